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
"""

from __future__ import annotations

import logging
import os
import signal
import threading
import time

logger = logging.getLogger("gateway.server")

CHECK_SECONDS = 1.0
"""How often a worker asks whether its supervisor is still its parent (a `getppid` call: nothing to measure)."""


def watch_supervisor(supervisor: int, every: float = CHECK_SECONDS) -> threading.Thread:
    """Start a daemon thread that sends this process SIGTERM (uvicorn's graceful stop) once its parent is no longer
    `supervisor` (the supervisor died and the worker was handed to init or a subreaper)."""
    thread = threading.Thread(target=_wait_for_orphaning, args=(supervisor, every), name="gateway-supervisor-watch",
                              daemon=True)
    thread.start()
    return thread


def _wait_for_orphaning(supervisor: int, every: float) -> None:
    while os.getppid() == supervisor:
        time.sleep(every)
    logger.warning("the supervisor of this worker (pid %d) is gone: worker %d stops as on SIGTERM (requests in "
                   "flight get the graceful timeout)", supervisor, os.getpid())
    os.kill(os.getpid(), signal.SIGTERM)
