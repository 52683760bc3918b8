"""The folder `gateway serve --workers N` makes for prometheus_client's multiprocess mode, and its removal when the
supervisor that made it is gone.

prometheus_client keeps each worker's values in files named `<kind>_<pid>.db` in `PROMETHEUS_MULTIPROC_DIR`, and
asks that the folder be wiped between runs, before start-up preferably ("Multiprocess Mode", client_python's docs):
a folder reused keeps the last run's counts. The supervisor makes a new one for each run and removes it when it
ends; SIGKILLed (`kill -9`, the OOM killer) it removes nothing, and its folder would stay in the temporary
directory, one more for every such death, with counts nobody serves. Two ways out, for the two ways it can end:

- its workers leave (`supervisor_watch`): each, once its app has shut down (`AfterOrphanedShutdown`), removes its
  own files and those of workers that ended before it, and the last one removes the folder (each removes its own
  files before it looks, so the last to look finds none left);
- when the workers were killed too (a cgroup's OOM kill, `kill -9` of the group), the next `--workers` start in
  the same temporary directory removes the folders whose supervisor is gone.

Whether a folder's supervisor is alive is asked of the kernel, not of a pid in its name: the supervisor holds an
exclusive `flock` on the folder's `supervisor.lock` while it runs, which the kernel releases however the process
ends, and which no later process reusing its pid holds (pids in another container's namespace cannot be compared;
a lock on the same file can). A folder without that file (made by an older version, or by someone else) is left
alone, as is an operator's own `PROMETHEUS_MULTIPROC_DIR`: both are theirs to wipe.
"""

from __future__ import annotations

import contextlib
import fcntl
import logging
import os
import re
import shutil
import tempfile
from pathlib import Path

logger = logging.getLogger("gateway.server")

PREFIX = "gateway-metrics-"
LOCK = "supervisor.lock"
"""The file whose exclusive lock the folder's supervisor holds while it runs."""
_VALUES = re.compile(r"[a-z_]+_(\d+)\.db")
"""prometheus_client's file of one process's values of one kind: `counter_4242.db`, `gauge_max_4242.db`."""


class MetricsFolder:
    """A folder made for this supervisor's workers, locked while it runs; `close` removes it."""

    def __init__(self, parent: str | None = None) -> None:
        """Remove the folders of supervisors that are gone (`clear_orphaned`), then make this one's in `parent`
        (the temporary directory: `TMPDIR`)."""
        cleared = clear_orphaned(parent)
        if cleared:
            logger.info("removed %d metrics folder(s) left by a `gateway serve --workers` that was killed: %s",
                        len(cleared), ", ".join(cleared))
        self.path = tempfile.mkdtemp(prefix=PREFIX, dir=parent)
        # Locked under another name, then named: another start's `clear_orphaned` never finds the lock file unlocked.
        self._lock = open(os.path.join(self.path, f".{LOCK}"), "w")  # noqa: SIM115 - held until close
        fcntl.flock(self._lock, fcntl.LOCK_EX)
        os.rename(self._lock.name, os.path.join(self.path, LOCK))

    def close(self) -> None:
        shutil.rmtree(self.path, ignore_errors=True)
        self._lock.close()


def clear_orphaned(parent: str | None = None) -> list[str]:
    """Remove each metrics folder in `parent` (the temporary directory) whose supervisor no longer holds its lock;
    the folders removed."""
    folder = Path(parent or tempfile.gettempdir())
    removed: list[str] = []
    with contextlib.suppress(OSError):
        for entry in folder.iterdir():
            if entry.name.startswith(PREFIX) and _orphaned(entry):
                shutil.rmtree(entry, ignore_errors=True)
                removed.append(str(entry))
    return removed


def _orphaned(folder: Path) -> bool:
    try:
        if folder.is_symlink() or not folder.is_dir() or folder.stat().st_uid != os.getuid():
            return False
        with open(folder / LOCK) as lock:
            try:
                fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                return False  # its supervisor runs
            return True
    except OSError:  # no lock file: not one of ours to judge
        return False


def leave(folder: str) -> None:
    """An orphaned worker's last act (at its exit): remove its own values and those of workers that have ended, and
    the folder once none are left."""
    me = os.getpid()
    with contextlib.suppress(OSError):
        for entry in os.scandir(folder):
            found = _VALUES.fullmatch(entry.name)
            if found is not None and (int(found[1]) == me or not _running(int(found[1]))):
                with contextlib.suppress(FileNotFoundError):
                    os.remove(entry.path)
        if not any(_VALUES.fullmatch(name) for name in os.listdir(folder)):
            shutil.rmtree(folder, ignore_errors=True)


def _running(pid: int) -> bool:
    """Whether `pid` is a live process (Linux's /proc: a zombie, ended but not yet reaped, is not)."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return False
    return state != "Z"
