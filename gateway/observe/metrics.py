"""Prometheus metrics of one gateway, served as text at `/metrics` (with `prometheus_client`).

Counters and histograms are updated where things happen (the request envelope, the tool pipeline's observe
stage, the loop's model-call and run seams); gauges that mirror state (breakers, pending approvals, reloads)
are read when `/metrics` is scraped. Each `Metrics` has its own registry, so two gateways in one process (tests)
never share counts.

Several worker processes (`gateway serve --workers N`) answer one `/metrics` together, with prometheus_client's
multiprocess mode: `serve` points `PROMETHEUS_MULTIPROC_DIR` at a folder of its own before the workers start, each
worker's values go to files there, and a scrape, whichever worker answers it, reads them all (`render`). Counters
and histograms add up over the workers (a worker that died keeps its counts); the gauges that mirror state show
the highest value any worker last set (breakers, reloads: each worker's own) or the latest one (pending approvals:
the same store for all).

    gateway_requests_total{door,status}              gateway_tool_calls_total{api,tool,outcome}
    gateway_tool_call_duration_seconds{api,tool}     gateway_model_call_duration_seconds{agent,model}
    gateway_run_duration_seconds{agent}              gateway_tokens_total{agent,model,type}
    gateway_run_tokens{agent}                        gateway_budget_exceeded_total{scope}
    gateway_hook_decisions_total{event,decision}     gateway_breaker_state{api,group,state}
    gateway_pending_approvals                        gateway_reloads_total, gateway_reloads_refused_total
    gateway_tool_output_warnings_total{api,tool}     gateway_build_info{version}
    process_start_time_seconds (and prometheus_client's other process_* series, in one process)

The counters a request or a tool call adds one to (`gateway_requests_total`, `gateway_tool_calls_total`) are summed
in a plain dict between scrapes and handed to prometheus_client's counters (`inc(n)`, its public API) when the
registry is read: `Counter.inc` checks its arguments and takes the value's lock every time, and every request
counted two of them. A collector registered on the registry before the counters (`_Flush`) hands them over at the
start of every collection, so a scrape, `generate_latest` or `get_sample_value` sees every count made before it.
Counting happens on the event loop's thread (the request envelope, the observe stage's callback), as the scrape
does (`/metrics` is an async route). In multiprocess mode each count goes to the worker's file at once, where
another worker's scrape reads it.

`gateway_build_info` is 1, labelled with the running version (`gateway.__version__`), and
`process_start_time_seconds` the Unix time the process started, as prometheus_client's process collector reads it
from /proc: what an operator needs to see which version answers and when it last restarted. In multiprocess mode
the process collector is not served (a scrape would show the CPU and memory of whichever worker answered it, never
the same twice): `process_start_time_seconds` is then a gauge of the workers' latest start.
"""

from __future__ import annotations

import os
import time
from collections.abc import Iterable
from typing import Any

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, ProcessCollector, generate_latest
from prometheus_client.exposition import CONTENT_TYPE_LATEST
from prometheus_client.metrics_core import Metric
from prometheus_client.multiprocess import MultiProcessCollector
from prometheus_client.registry import Collector

from ..kernel import __version__

CONTENT_TYPE = CONTENT_TYPE_LATEST
MULTIPROCESS_DIR = "PROMETHEUS_MULTIPROC_DIR"
"""prometheus_client's variable: set (before the workers import it), every worker's values are kept in files there."""
_LATENCY_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 120.0)
_TOKEN_BUCKETS = (100, 500, 1000, 5000, 10_000, 50_000, 100_000, 500_000, 1_000_000)
_BREAKER_STATES = ("closed", "half_open", "open")
_DOORS = (("/v1/chat/completions", "chat"), ("/v1/responses", "responses"), ("/mcp", "mcp"),
          ("/approvals", "approvals"), ("/agents/", "direct"), ("/metrics", "metrics"), ("/console", "console"))


class Metrics:
    """The gateway's metrics in their own registry."""

    def __init__(self) -> None:
        self.registry = CollectorRegistry(auto_describe=True)
        r = self.registry
        self._counts: dict[Any, int] | None = None if os.environ.get(MULTIPROCESS_DIR) else {}
        """Counts not yet handed to their counters: labelled child -> how many (None: each count at once)."""
        r.register(_Flush(self))  # first: collected before the counters it hands counts to
        self.requests = Counter("gateway_requests", "HTTP requests by door and status.", ["door", "status"],
                                registry=r)
        self.tool_calls = Counter("gateway_tool_calls", "Tool calls by api, tool and outcome (ok or the error type).",
                                  ["api", "tool", "outcome"], registry=r)
        self.output_warnings = Counter("gateway_tool_output_warnings", "Successful tool calls whose body broke "
                                       "the spec's output schema, passed on under `output_check: warn`.",
                                       ["api", "tool"], registry=r)
        self.tool_latency = Histogram("gateway_tool_call_duration_seconds", "Tool call latency.", ["api", "tool"],
                                      buckets=_LATENCY_BUCKETS, registry=r)
        self.model_latency = Histogram("gateway_model_call_duration_seconds", "Model call latency.",
                                       ["agent", "model"], buckets=_LATENCY_BUCKETS, registry=r)
        self.run_latency = Histogram("gateway_run_duration_seconds", "Whole runs of the loop.", ["agent"],
                                     buckets=_LATENCY_BUCKETS, registry=r)
        self.tokens = Counter("gateway_tokens", "Model tokens by agent, model and type (input, output).",
                              ["agent", "model", "type"], registry=r)
        self.run_tokens = Histogram("gateway_run_tokens", "Tokens one run used.", ["agent"], buckets=_TOKEN_BUCKETS,
                                    registry=r)
        self.budget_exceeded = Counter("gateway_budget_exceeded", "Runs stopped by a budget, by scope.", ["scope"],
                                       registry=r)
        self.hook_decisions = Counter("gateway_hook_decisions", "What hooks decided, by event.",
                                      ["event", "decision"], registry=r)
        self.breaker_state = Gauge("gateway_breaker_state", "1 for the state each api's breaker is in (per caller "
                                   "group), 0 for the others.", ["api", "group", "state"], registry=r,
                                   multiprocess_mode="max")
        self.pending_approvals = Gauge("gateway_pending_approvals", "Tool calls waiting for a human.", registry=r,
                                       multiprocess_mode="mostrecent")
        self.reloads = Gauge("gateway_reloads_total", "Reloads of specs/ and agents.yaml applied.", registry=r,
                             multiprocess_mode="max")
        self.refused_reloads = Gauge("gateway_reloads_refused_total", "Reloads refused (the last good config "
                                     "kept serving).", registry=r, multiprocess_mode="max")
        self.build_info = Gauge("gateway_build_info", "1, labelled with the gateway's version.", ["version"],
                                registry=r, multiprocess_mode="max")
        self.build_info.labels(__version__).set(1)
        if os.environ.get(MULTIPROCESS_DIR):
            self.start_time = Gauge("process_start_time_seconds", "Start time of the process since unix epoch in "
                                    "seconds (the latest of the workers').", registry=r, multiprocess_mode="max")
            self.start_time.set(process_start_time())
        else:
            ProcessCollector(registry=r)
        # The labelled children of the per-call metrics, found once per label values: `labels()` checks and joins
        # its arguments on every call, and every request and tool call updates these.
        self._request_counts: dict[tuple[str, int], Any] = {}
        self._tool_counts: dict[tuple[str, str, str], Any] = {}
        self._tool_latencies: dict[tuple[str, str], Any] = {}

    def count_request(self, door: str, status: int) -> None:
        """One HTTP request answered with `status` (`gateway_requests_total`)."""
        child = self._request_counts.get((door, status))
        if child is None:
            child = self._request_counts[(door, status)] = self.requests.labels(door, str(status))
        self.count(child)

    def count(self, child: Any) -> None:
        """One more on `child`, a labelled child of one of this registry's counters: handed to it at the next
        collection (or at once in multiprocess mode)."""
        counts = self._counts
        if counts is None:
            child.inc()
        else:
            counts[child] = counts.get(child, 0) + 1

    def flush(self) -> None:
        """Hand the counts made since the last collection to their counters (every collection starts with it)."""
        counts = self._counts
        if counts:
            self._counts = {}
            for child, amount in counts.items():
                child.inc(amount)

    def record_tool_call(self, api: str, tool: str, outcome: str, seconds: float) -> None:
        """One tool call's outcome and latency (`gateway_tool_calls_total`, `gateway_tool_call_duration_seconds`)."""
        latency = self._tool_latencies.get((api, tool))
        if latency is None:
            latency = self._tool_latencies[(api, tool)] = self.tool_latency.labels(api, tool)
        latency.observe(seconds)
        count = self._tool_counts.get((api, tool, outcome))
        if count is None:
            count = self._tool_counts[(api, tool, outcome)] = self.tool_calls.labels(api, tool, outcome)
        self.count(count)

    def refresh(self, *, breakers: Iterable[tuple[str, str, str]] = (), pending: int | None = None,
                reloads: int = 0, refused: int = 0) -> None:
        """Set the gauges that mirror state, just before a scrape."""
        for api, group, current in breakers:
            for state in _BREAKER_STATES:
                self.breaker_state.labels(api=api, group=group, state=state).set(1 if state == current else 0)
        if pending is not None:
            self.pending_approvals.set(pending)
        self.reloads.set(reloads)
        self.refused_reloads.set(refused)

    def render(self) -> bytes:
        """The text of a scrape: this registry's values, or every worker's in multiprocess mode."""
        folder = os.environ.get(MULTIPROCESS_DIR)
        if not folder:
            return generate_latest(self.registry)
        registry = CollectorRegistry()
        MultiProcessCollector(registry, path=folder)  # type: ignore[no-untyped-call]
        return generate_latest(registry)


class _Flush(Collector):
    """A collector of no series of its own (prometheus_client's custom-collector protocol): collecting it hands
    `Metrics`' waiting counts to their counters, before the registry collects those."""

    def __init__(self, metrics: Metrics) -> None:
        self.metrics = metrics

    def describe(self) -> list[Metric]:
        return []  # no series: asked by the registry when it is registered

    def collect(self) -> list[Metric]:
        self.metrics.flush()
        return []


def process_start_time() -> float:
    """When this process started (Unix time), as prometheus_client's process collector reads it; where it reads
    nothing (no /proc), when this module was imported."""
    for family in ProcessCollector(registry=None).collect():
        for sample in family.samples:
            if sample.name == "process_start_time_seconds":
                return float(sample.value)
    return _IMPORTED


_IMPORTED = time.time()


def door_of(path: str) -> str:
    """The door a request path belongs to (a label with few values, never the raw path)."""
    door = _doors_seen.get(path)
    if door is None:
        door = next((door for prefix, door in _DOORS if path.startswith(prefix)), "other")
        if len(_doors_seen) < _MAX_DOORS_SEEN:  # foreign paths cannot grow it without bound
            _doors_seen[path] = door
    return door


_doors_seen: dict[str, str] = {}
"""`door_of` by path: every request asks, nearly always with a path seen before."""
_MAX_DOORS_SEEN = 1024
