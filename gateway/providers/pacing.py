"""How long a model's streamed answer may take: a bound on its idle time and on its whole time.

The client times each read (`providers.<name>.timeout`), so a stream lives as long as bytes come. A server that
sends only keep-alives (SSE comments `: ping`, blank lines) or trickles its answer resets that timer for ever,
bounded by nothing but the answer's 16 MiB cap (at a comment a second: weeks), and the run, its client's place
and a connection are held all the while. `StreamClock` bounds both: no event or line carrying data for `idle`
seconds (keep-alives do not count: SSE comments, Anthropic's `event: ping`, blank JSON lines), or the stream going
on past `whole` seconds, ends the model call with a `ProviderError` that names the setting. Events are counted
where the adapters read them (`iter_sse`, `iter_lines` in `gateway.providers.base`), which find the clock in the
response's `extensions`.
"""

from __future__ import annotations

import time

import anyio
import httpx

EXTENSION = "gateway.stream_clock"
"""The key of a response's `extensions` under which its stream's clock is found."""


class StreamClock:
    """A cancel scope whose deadline moves on with each line that carries data, never past the whole bound.

    Args:
        idle: seconds a stream may go without a line carrying data.
        whole: seconds the whole stream may take, from the first byte of its body on.
    """

    def __init__(self, idle: float, whole: float) -> None:
        self.idle = idle
        self.whole = whole
        now = anyio.current_time()
        self._end = now + whole
        self._started = time.monotonic()
        self.scope = anyio.CancelScope(deadline=min(now + idle, self._end))

    def attach(self, response: httpx.Response) -> None:
        response.extensions[EXTENSION] = self

    def tick(self) -> None:
        """A line that carries data came: the idle bound starts again."""
        self.scope.deadline = min(anyio.current_time() + self.idle, self._end)

    @property
    def expired(self) -> bool:
        return self.scope.cancelled_caught

    def explain(self, provider: str) -> str:
        """What ended the stream, naming the setting that bounds it."""
        if time.monotonic() - self._started >= self.whole - 0.001:
            return (f"the model's streamed answer went on past {self.whole:g} s "
                    f"(providers.{provider}.stream_timeout); it was cut off")
        return (f"the model's stream sent nothing but keep-alives for {self.idle:g} s "
                f"(providers.{provider}.stream_idle_timeout); it was cut off")


def tick(response: httpx.Response) -> None:
    """Tell the response's clock, when it has one, that a line carrying data came."""
    clock = response.extensions.get(EXTENSION)
    if clock is not None:
        clock.tick()
