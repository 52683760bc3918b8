"""The sandbox a script runs in: Monty (`pydantic-monty`), a Python interpreter made for code a model writes.

Monty runs each script in a worker process of its own pool, with no files, no network, no environment and no
processes: an `open()`, an `import os`/`subprocess`/`socket` or an `os.getenv` reaches the host as an OS call,
which is always refused here, so it raises in the script (PermissionError, ModuleNotFoundError, ...). Its limits
bound the execution time, the heap and the recursion; a worker that overruns them is killed and replaced.

A script is stepped from the event loop: `start` (or `restore`) runs it until it calls a function it does not
define (a `HostCall`: one of the agent's tools), finishes (`Finished`) or fails (`Failed`); `answer` or `refuse`
gives the call's outcome back and runs on to the next stop. Each step runs in a worker thread (the sync API
releases the GIL while the worker computes), so an endless loop holds one thread until its time limit, never the
event loop. At a `HostCall` the paused script can be `dump`ed to bytes and `restore`d later by any process
(a run waiting for a human's approval is stored that way).

One pool serves the process: it is made on first use and closed at exit (`close_pool`). A client's scripts hold
at most `Limits.per_client` sandboxes at once (`gateway.max_code_workers_per_client`): one more is refused at once
(`SandboxBusy`), so one client cannot keep every other client's scripts waiting for a worker. They are counted in
this process, or across every instance in the door's `ShareBook` (`gateway.safety.shares`, Redis with
`gateway.redis`).
"""

from __future__ import annotations

import atexit
import contextlib
import re
import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal, TypeVar

import anyio
import anyio.to_thread
from anyio.lowlevel import RunVar

from ..config.settings import CODE_WORKERS
from ..kernel.caller import current_caller
from ..safety.client_shares import OverShare
from ..safety.shares import SANDBOXES, Held, LocalShares, ShareBook
from . import result

if TYPE_CHECKING:
    from pydantic_monty import Monty, MontyError, MontySession

    from ..config.agents import CodeLimits

POOL_WORKERS = CODE_WORKERS
"""Scripts that can run at once in this process (one worker process each); more wait for a free worker."""
CHECKOUT_TIMEOUT = 30.0
"""Seconds a script waits for a free worker before it fails."""
PRINT_BYTES = 16_384
"""What a script may print (the rest is dropped)."""
SANDBOX_HINT = ("The sandbox has no files, network, environment, processes or clock waits: only Python, the "
                "modules json, re, math, datetime, collections, itertools, functools, random, decimal, hashlib, "
                "base64, csv, copy, bisect, typing, dataclasses, and the tool functions.")

_steps: RunVar[anyio.CapacityLimiter] = RunVar("gateway_codemode_steps")
"""The threads that step scripts, per event loop (their own, so a busy sandbox never delays other work sent to
threads, such as searches)."""
_pool: Monty | None = None
_pool_lock = threading.Lock()
_here = LocalShares(SANDBOXES)
"""Each client's sandboxes in use, in this process (the pool is the process's), when no door counts them across
instances."""
_INPUT_FILE = re.compile(r'File "<python-input-\d+>", ')
_REFUSED_OS = (OSError, ImportError)
T = TypeVar("T")


class SandboxError(RuntimeError):
    """No sandbox could be had for a script (it did not run)."""


class SandboxUnavailable(SandboxError):
    """pydantic-monty is not installed: code mode cannot run."""


class SandboxBusy(SandboxError):
    """The calling client holds its whole share of the sandboxes (`Limits.per_client`): the script did not run."""

    def __init__(self, refused: OverShare) -> None:
        super().__init__(str(refused))
        self.retry_after = refused.retry_after


@dataclass(frozen=True, slots=True, kw_only=True)
class Limits:
    """What one script may use (an agent's `code_limits`)."""

    time: float = 30.0
    """Seconds of execution (time spent waiting for tool calls does not count)."""
    memory: int = 256 * 1024 * 1024
    """Bytes of heap."""
    tool_calls: int = 50
    """Tool calls one script may make."""
    per_client: int | None = None
    """Sandboxes the calling client's scripts may hold at once (None: any number)."""

    @classmethod
    def of(cls, configured: CodeLimits, *, per_client: int | None = None) -> Limits:
        """An agent's `code_limits` (memory in megabytes) as the sandbox counts them."""
        return cls(time=configured.time, memory=configured.memory * 1024 * 1024, tool_calls=configured.tool_calls,
                   per_client=per_client)


@dataclass(slots=True, kw_only=True)
class HostCall:
    """The script called a function it does not define: one of the tools, it hopes."""

    function: str
    args: tuple[Any, ...]
    kwargs: dict[str, Any]


@dataclass(slots=True, kw_only=True)
class Finished:
    value: Any
    printed: str = ""
    cut_from: int | None = None
    """Set when the result was larger than the sandbox hands over: its bytes as JSON (negative: at least that many),
    of which `value` is the beginning (`Sandbox.kept_result`)."""


@dataclass(slots=True, kw_only=True)
class Failed:
    kind: Literal["code_error", "code_limit"]
    message: str
    printed: str = ""


Stop = HostCall | Finished | Failed


def available() -> bool:
    """Whether the sandbox is installed (`pip install 'gateway[codemode]'`)."""
    try:
        import pydantic_monty  # noqa: F401
    except ImportError:
        return False
    return True


def _get_pool() -> Monty:
    global _pool
    with _pool_lock:
        if _pool is None:
            try:
                from pydantic_monty import Monty
            except ImportError as exc:
                raise SandboxUnavailable("code mode needs the sandbox: pip install 'gateway[codemode]'") from exc
            pool = Monty(min_processes=0, max_processes=POOL_WORKERS, checkout_timeout=CHECKOUT_TIMEOUT)
            pool.__enter__()
            _pool = pool
            atexit.register(close_pool)
        return _pool


def close_pool() -> None:
    """Stop the pool's workers (at exit; a later script starts a new pool)."""
    global _pool
    with _pool_lock:
        pool, _pool = _pool, None
    if pool is not None:
        pool.__exit__(None, None, None)


class Sandbox:
    """One script's session in a worker: `async with Sandbox(limits) as box: stop = await box.start(code)`.

    Parameters:
        limits: what the script may use.
        shares: where the client's sandboxes are counted (None: in this process).
        admitted: the script was let in before (resumed after an approval): counted, never refused.
    """

    def __init__(self, limits: Limits, shares: ShareBook | None = None, *, admitted: bool = False) -> None:
        self.limits = limits
        self.shares = shares if shares is not None else _here
        self.admitted = admitted
        self._stack = contextlib.ExitStack()
        self._session: MontySession | None = None
        self._snapshot: Any = None
        self._printed: Any = None
        self._printed_before = ""
        self._missing: set[str] = set()
        """Names the script read but nobody defined (a tool used as a value, a typo): for the error message."""
        self._share: Held | None = None

    async def __aenter__(self) -> Sandbox:
        limits = self.limits
        try:  # before the pool is asked: a client over its share never waits for a worker others need
            self._share = await self.shares.take(current_caller().client, limits.per_client, admitted=self.admitted)
        except OverShare as refused:
            raise SandboxBusy(refused) from None
        try:
            return await self._checkout()
        except BaseException:
            await self._share.release()
            raise

    async def _checkout(self) -> Sandbox:
        limits = self.limits

        def checkout() -> MontySession:
            from pydantic_monty import CollectString

            self._printed = CollectString(max_bytes=PRINT_BYTES)
            pool = _get_pool()
            return self._stack.enter_context(pool.checkout(
                script_name="run_code.py",
                limits={"max_feed_duration_secs": limits.time, "max_memory": limits.memory,
                        "max_suspensions": limits.tool_calls + 200},
            ))

        try:
            self._session = await in_thread(checkout)
        except SandboxError:
            raise
        except TimeoutError:
            raise SandboxError(f"every sandbox of this gateway was busy for {CHECKOUT_TIMEOUT:g}s; the script did "
                               "not run. Try again shortly.") from None
        except Exception as exc:  # the pool could not start a worker (a missing or broken binary, ...)
            raise SandboxError(f"the sandbox could not start: {exc}") from exc
        return self

    async def __aexit__(self, *exc: object) -> None:
        self._snapshot = None
        try:
            await in_thread(self._stack.close)
        finally:
            if self._share is not None:
                await self._share.release()

    async def start(self, code: str) -> Stop:
        session = self._require_session()
        return await self._step(lambda: session.feed_start(code, print_callback=self._printed))

    async def restore(self, dump: bytes, printed: str = "") -> Stop:
        """Go on from a `dump` (the stop it was taken at is announced again); `printed`: what it printed before."""
        session = self._require_session()
        self._printed_before = printed
        return await self._step(lambda: session.load_snapshot(dump, print_callback=self._printed))

    async def answer(self, value: Any) -> Stop:
        """The pending call returns `value` in the script."""
        snapshot = self._snapshot
        return await self._step(lambda: snapshot.resume({"return_value": value}))

    async def refuse(self, exc_type: Literal["RuntimeError", "TypeError", "NameError"], message: str) -> Stop:
        """The pending call raises `exc_type(message)` in the script (which may catch it)."""
        snapshot = self._snapshot
        return await self._step(lambda: snapshot.resume({"exc_type": exc_type, "message": message}))

    async def dump(self) -> bytes:
        """The script paused at its pending call, as bytes `restore` takes (in any process)."""
        snapshot = self._snapshot
        dumped: bytes = await in_thread(lambda: snapshot.dump())
        return dumped

    async def kept_result(self, cap: int) -> Finished | Failed:
        """The finished script's result, kept in the sandbox (`gateway.codemode.result`): whole when about `cap`
        bytes of JSON or fewer, else its beginning (about `cap` bytes) with its size."""
        from pydantic_monty import CollectString, MontyError

        session = self._require_session()
        quiet = CollectString(max_bytes=0)  # the gateway's own snippet prints nothing; none of it is the script's

        def fetch() -> Finished | Failed:
            try:
                size, exact, value = session.feed_run(
                    f"{result.HAND_OVER}\n__gateway_hand_over({result.NAME}, {cap})", print_callback=quiet)
            except MontyError as error:
                return self._failure(error)
            cut = None if size <= cap else -int(size) if not exact else int(size)
            return Finished(value=value, printed=self.printed(), cut_from=cut)

        return await in_thread(fetch)

    def printed(self) -> str:
        now = self._printed.output if self._printed is not None else ""
        return (self._printed_before + now)[:PRINT_BYTES]

    def _require_session(self) -> MontySession:
        if self._session is None:
            raise RuntimeError("the sandbox is used outside `async with`")
        return self._session

    async def _step(self, work: Callable[[], Any]) -> Stop:
        """Run the script on to its next stop (in a thread); OS calls and name lookups are answered on the way."""
        from pydantic_monty import FunctionSnapshot, MontyComplete, MontyError, NameLookupSnapshot

        def run() -> Stop:
            try:
                snapshot = work()
                while True:
                    if isinstance(snapshot, MontyComplete):
                        self._snapshot = None
                        return Finished(value=snapshot.output, printed=self.printed())
                    if isinstance(snapshot, NameLookupSnapshot):
                        # A name nobody defined, read but not called: it stays undefined (NameError). Handing
                        # Monty a host callable for it is what aborts the interpreter at exit now and then.
                        self._missing.add(snapshot.variable_name)
                        snapshot = snapshot.resume()
                        continue
                    if isinstance(snapshot, FunctionSnapshot):
                        if snapshot.is_os_function:  # files, environment, imports it does not ship, sleeps
                            snapshot = snapshot.resume_not_handled()
                            continue
                        self._snapshot = snapshot
                        return HostCall(function=str(snapshot.function_name), args=tuple(snapshot.args),
                                        kwargs=dict(snapshot.kwargs))
                    # A future: scripts get no awaitables from the host, so none can be pending.
                    self._snapshot = None
                    return Failed(kind="code_error", message="the tool functions are not awaitable: call them "
                                                             "directly (no await, no asyncio.gather).")
            except MontyError as error:
                self._snapshot = None
                return self._failure(error)
            except Exception as error:  # noqa: BLE001 - e.g. a kept dump this version of the sandbox cannot read
                self._snapshot = None
                return Failed(kind="code_error", message=f"the sandbox failed: {type(error).__name__}: {error}",
                              printed=self.printed())

        return await in_thread(run)

    def _failure(self, error: MontyError) -> Failed:
        from pydantic_monty import MontyCrashedError, MontyRuntimeError, MontySyntaxError

        printed = self.printed()
        limits = self.limits
        if isinstance(error, MontyCrashedError):
            if error.timed_out:
                return Failed(kind="code_limit", printed=printed, message=f"the script ran past its time limit "
                              f"({limits.time:g}s of execution, code_limits.time) and was stopped.")
            return Failed(kind="code_error", printed=printed, message=f"the sandbox stopped: {error}")
        if isinstance(error, MontySyntaxError | MontyRuntimeError):
            inner = error.exception()
            text = result.as_written(_INPUT_FILE.sub("", error.display()))
            if isinstance(inner, TimeoutError) and "time limit" in str(inner):
                return Failed(kind="code_limit", printed=printed, message=f"the script ran longer than its time "
                              f"limit ({limits.time:g}s of execution, code_limits.time); nothing after that ran. "
                              "Do less in one script, or loop over fewer items.")
            if isinstance(inner, MemoryError):
                return Failed(kind="code_limit", printed=printed, message=f"the script used more memory than its "
                              f"limit ({limits.memory // (1024 * 1024)} MB, code_limits.memory). Keep less in "
                              "memory: select the fields you need from each answer.")
            if isinstance(inner, NameError) and self._missing:
                text += ("\nOnly names the script defines, Python's builtins and the tool functions exist; a tool "
                         "function is called directly by its name (not stored or passed as a value).")
            elif isinstance(inner, _REFUSED_OS) or "not supported in this environment" in str(inner):
                text += "\n" + SANDBOX_HINT
            return Failed(kind="code_error", printed=printed, message=text)
        return Failed(kind="code_error", printed=printed, message=f"the sandbox failed: {error}")


async def in_thread(work: Callable[[], T]) -> T:
    """`work` in one of the threads that step scripts: what a script's size decides the cost of (a step, its
    values made JSON) never runs on the event loop."""
    try:
        limiter = _steps.get()
    except LookupError:
        limiter = anyio.CapacityLimiter(POOL_WORKERS + 4)
        _steps.set(limiter)
    return await anyio.to_thread.run_sync(work, limiter=limiter)


