"""A `gateway serve --workers N` worker leaves when its supervisor is gone.

uvicorn's supervisor (`uvicorn.supervisors.Multiprocess`) watches its workers (a ping over a pipe), but a worker
does not watch its supervisor: SIGKILLed (an operator's `kill -9 <pid>`, the OOM killer), the supervisor ends
without stopping them, and they live on, orphans holding the port, which a restarted gateway then cannot bind.
uvicorn offers nothing public for it; gunicorn's workers compare `os.getppid()` with the arbiter's pid on every turn
of their loop and leave when it changed (`is_parent_alive`, `gunicorn/workers/sync.py` and `gthread.py`), and
PyTorch's compile workers do it from a thread once a second. A worker here does the same on a timer, in a thread of
its own (a busy event loop does not delay it), and stops as on SIGTERM: uvicorn stops
accepting, gives the requests in flight `--graceful-timeout`, and a call still going then is cut and audited as
any stop cuts it (`gateway.server.stopping`: the caller is told, the run gets its `stopped` row).
(Linux's `prctl(PR_SET_PDEATHSIG)` would need a library that is not a dependency, and would not cover a
supervisor that died before the worker set it; the pid comparison covers both.)
Orphaned, a worker also takes the supervisor's metrics folder with it (`metrics_folder.leave`). A supervisor that is
only stopped (SIGSTOP) is said once in the log, not left: the workers keep serving (`_Stopped`).
"""

from __future__ import annotations

import logging
import os
import signal
import threading
import time
from collections.abc import Callable
from pathlib import Path

from starlette.types import ASGIApp, Message, Receive, Scope, Send

logger = logging.getLogger("gateway.server")

CHECK_SECONDS = 1.0
"""How often a worker asks whether its supervisor is still its parent (a `getppid` call: nothing to measure)."""


def watch_supervisor(supervisor: int, every: float = CHECK_SECONDS) -> threading.Event:
    """Start a daemon thread that sends this process SIGTERM (uvicorn's graceful stop) once its parent is no longer
    `supervisor` (the supervisor died and the worker was handed to init or a subreaper); the event it returns is set
    then (`AfterOrphanedShutdown` reads it)."""
    orphaned = threading.Event()
    threading.Thread(target=_wait_for_orphaning, args=(supervisor, every, orphaned), name="gateway-supervisor-watch",
                     daemon=True).start()
    return orphaned


def _wait_for_orphaning(supervisor: int, every: float, orphaned: threading.Event) -> None:
    stopped = _Stopped(supervisor)
    while os.getppid() == supervisor:
        stopped.look()
        time.sleep(every)
    logger.warning("the supervisor of this worker (pid %d) is gone: worker %d stops as on SIGTERM (requests in "
                   "flight get the graceful timeout)", supervisor, os.getpid())
    orphaned.set()
    os.kill(os.getpid(), signal.SIGTERM)


class AfterOrphanedShutdown:
    """An orphaned worker's app: once its lifespan has shut down (every request ended, nothing counted any more),
    `then` does what the supervisor would have done after it (`metrics_folder.leave`). Not at the process's exit:
    uvicorn re-raises the SIGTERM it caught once the server is done, and the default action ends the process without
    running `atexit`'s functions."""

    def __init__(self, app: ASGIApp, orphaned: threading.Event, then: Callable[[], None]) -> None:
        self.app = app
        self.orphaned = orphaned
        self.then = then

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "lifespan":
            await self.app(scope, receive, send)
            return

        async def sent(message: Message) -> None:
            if message["type"] == "lifespan.shutdown.complete" and self.orphaned.is_set():
                self.then()
            await send(message)

        await self.app(scope, receive, sent)


class _Stopped:
    """Says once when the supervisor is stopped (SIGSTOP, `kill -STOP`, a debugger holding it) and once when it runs
    again.

    A stopped supervisor is not a gone one: this worker keeps serving, and /readyz stays as the store makes it (a
    balancer that took every worker out for it would turn a paused supervisor into an outage, while the workers
    serve as well as before). What stops with it is its care: a worker that dies is not replaced, and a SIGTERM or
    SIGINT sent to it waits until it runs again (SIGCONT); the log says so, as nothing else would. Read from
    Linux's /proc (`T`: stopped by a signal, `t`: by a tracer), twice in a row before it is said: a profiler's
    moment's stop is not a spell."""

    def __init__(self, supervisor: int) -> None:
        self.supervisor = supervisor
        self.seen = 0
        """Looks in a row that found it stopped."""

    def look(self) -> None:
        if _state(self.supervisor) in ("T", "t"):
            self.seen += 1
            if self.seen == 2:
                logger.warning("the supervisor of this worker (pid %d) is stopped (SIGSTOP or a debugger): worker %d "
                               "keeps serving, but while it is stopped a worker that dies is not replaced and a "
                               "SIGTERM sent to it waits for a SIGCONT (said once: a line will say when it is "
                               "resumed)", self.supervisor, os.getpid())
            return
        if self.seen >= 2:
            logger.info("the supervisor of this worker (pid %d) is resumed", self.supervisor)
        self.seen = 0


def _state(pid: int) -> str:
    """The process's state letter in /proc (`R`, `S`, `T`, ...); empty when it cannot be read."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return ""
