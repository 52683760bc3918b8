"""The one small interface behind every piece of state the gateway keeps between requests.

Approvals (with the paused run they belong to), audit rows, rate-limit buckets, and stored conversations
(Responses API answers for `previous_response_id`, and turns handed back to a caller's tools). Callers only
ever see `Store`; SQLite is the embedded default (`gateway.store.sqlite`), `MemoryStore` serves
tests and throwaway runs, and a Redis or PostgreSQL backend for several gateway instances only has
to implement the same methods.
"""

from __future__ import annotations

import abc
import dataclasses
import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any, ClassVar, Literal, NamedTuple

from ..config.settings import DEFAULT_MAX_STORED_CONVERSATIONS, DEFAULT_SHARED_STATE_TIMEOUT
from .server_watch import ServerWatch

ApprovalStatus = Literal["pending", "approved", "denied"]
RunStatus = Literal["paused", "resuming", "done", "failed"]
RunKind = Literal["chat", "call", "script"]
FINISHED: tuple[RunStatus, ...] = ("done", "failed")
"""Runs no one goes on with: retention may delete them (`Store.prune_conversations`)."""


@dataclass(slots=True, kw_only=True)
class ConnectionRecord:
    """A user's own connection to an api (`auth: {type: user_oauth}`): its tokens, encrypted."""

    subject: str
    api: str
    secret: str = field(repr=False)
    """The tokens (access, refresh, expiry) as one Fernet token: the store never holds them in clear."""
    scopes: str = ""
    created: float = 0.0
    updated: float = 0.0

    COLUMNS: ClassVar[str] = "subject, api, secret, scopes, created, updated"
    """The table's columns in the order `from_row` reads them (every store selects them so)."""

    @classmethod
    def from_row(cls, row: Sequence[Any]) -> ConnectionRecord:
        return cls(subject=row[0], api=row[1], secret=row[2], scopes=row[3], created=row[4], updated=row[5])


@dataclass(slots=True, kw_only=True)
class PendingConnection:
    """An authorization the gateway sent a user to, waiting for them to come back (`state` is its key)."""

    state: str
    subject: str
    api: str
    verifier: str = field(repr=False)
    """The PKCE code verifier."""
    client: str | None = None
    created: float = 0.0
    expires: float = 0.0
    browser: str | None = field(default=None, repr=False)
    """The SHA-256 (hex) of the nonce the owner's browser was given at the start page, in a cookie; None until the
    owner opened the link there. The callback stores tokens only for the browser holding that nonce."""

    COLUMNS: ClassVar[str] = "state, subject, api, verifier, client, created, expires, browser"
    """The table's columns in the order `from_row` reads them."""

    @classmethod
    def from_row(cls, row: Sequence[Any]) -> PendingConnection:
        return cls(state=row[0], subject=row[1], api=row[2], verifier=row[3], client=row[4], created=row[5],
                   expires=row[6], browser=row[7])

    def values(self) -> tuple[Any, ...]:
        """The record's values in `COLUMNS`' order (what every store inserts)."""
        return (self.state, self.subject, self.api, self.verifier, self.client, self.created, self.expires,
                self.browser)


class Bucket(NamedTuple):
    """One token bucket: its key, refill rate (tokens per second) and capacity."""

    key: str
    rate: float
    burst: float


@dataclass(slots=True, kw_only=True)
class ApprovalRecord:
    """One tool call waiting for (or past) a human's decision."""

    id: str
    """Unguessable (`apr_` + random); the only handle a caller gets."""
    run_id: str
    agent: str
    tool: str
    arguments: dict[str, Any]
    """The arguments as the model sent them (redacted only when shown, never in storage)."""
    call_id: str | None = None
    client: str | None = None
    status: ApprovalStatus = "pending"
    created: float = field(default_factory=time.time)
    decided: float | None = None
    reason: str | None = None
    decided_arguments: dict[str, Any] | None = None
    """Arguments edited by the approver; None: run with the model's."""
    decided_by: str | None = None
    """Who decided: the deciding client's name, `cli` for `gateway approvals`; None when no clients are set."""

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass(slots=True, kw_only=True)
class RunRecord:
    """A paused run: the loop's JSON state, resumed once every approval of it is decided."""

    id: str
    agent: str
    kind: RunKind = "chat"
    """`chat`: a paused loop run; `call`: a single tool call outside a chat (direct, MCP, `gateway call`);
    `script`: a `run_code` script outside a chat, waiting at one of its calls (`gateway.server.direct_script`)."""
    state: dict[str, Any] = field(default_factory=dict)
    client: str | None = None
    status: RunStatus = "paused"
    created: float = field(default_factory=time.time)
    updated: float = field(default_factory=time.time)


@dataclass(slots=True, kw_only=True)
class ResponseRecord:
    """A stored conversation: a Responses API answer (`resp_...`), or a turn that handed calls back to the
    caller's tools (`turn_<call id>`), so the run goes on from the gateway's full conversation."""

    id: str
    agent: str
    client: str | None
    """Whose it is: the caller's client name, and with `gateway.auth` its user (`client\x00subject`,
    `gateway.server.handoff.owner`); only the same may read or continue it (None: no clients configured)."""
    body: dict[str, Any] = field(default_factory=dict)
    """The answer as the caller got it (the Response object); empty for a handed-back turn."""
    messages: list[dict[str, Any]] = field(default_factory=list)
    """The conversation to continue from (`gateway.loop_types.message_to_dict` form)."""
    created: float = field(default_factory=time.time)



AUDIT_RUNNING = "running"
"""The status of a call's audit row from before it is sent until its outcome is written. Such a row has no outcome
yet: a store may write its outcome columns as a new row's (`http_status`, `usage`, `error` NULL, `latency_ms` and
`bytes` 0) without reading them from the row."""

AuditKind = Literal["tool", "chat", "decision", "conversation"]
AUDIT_KINDS: tuple[AuditKind, ...] = ("tool", "chat", "decision", "conversation")
"""What an audit row records: a tool call, a chat run, a human's approval decision, or stored conversations
removed past their client's cap (`gateway.store.kept_conversations`)."""

@dataclass(slots=True, kw_only=True)
class AuditRow:
    """One tool call or one chat, as the audit log keeps it (arguments already redacted)."""

    time: float
    kind: AuditKind
    """`decision`: a human approved or denied a call (then `client` is who decided)."""
    client: str | None = None
    agent: str | None = None
    tool: str | None = None
    api: str | None = None
    arguments: Any = None
    status: str = "ok"
    """`ok`, or the error type (`upstream_error`, `timeout`, `approval_pending`, ...); chats: ok|paused|cut|error.
    `running` (`AUDIT_RUNNING`): a tool call written before it was sent, its outcome not yet (`update_audit`)."""
    http_status: int | None = None
    latency_ms: float = 0.0
    bytes: int = 0
    approval: str | None = None
    """The approval id this call went through (or waits for), if any."""
    usage: dict[str, Any] | None = None
    run_id: str | None = None
    error: str | None = None
    subject: str | None = None
    """The signed-in user the call was made for (`sub` of the caller's access token); None for a client key."""
    id: int | None = None

    def to_dict(self) -> dict[str, Any]:
        row = asdict(self)
        row["time"] = time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(self.time)) + f".{int(self.time % 1 * 1000):03d}Z"
        row["latency_ms"] = round(self.latency_ms, 3)
        return row


@dataclass(slots=True, frozen=True, kw_only=True)
class AuditQuery:
    """Which audit rows to list (`GET /audit` and the console's filters); None fields match everything."""

    agents: frozenset[str] | None = None
    """The agents a caller may see (None: all); `agent` narrows within them."""
    agent: str | None = None
    client: str | None = None
    tool: str | None = None
    status: str | None = None
    kind: str | None = None
    run_id: str | None = None
    subject: str | None = None
    """The signed-in user the rows were recorded for (a user's own rows)."""
    since: float | None = None
    """Epoch seconds, inclusive."""
    until: float | None = None
    """Epoch seconds, exclusive."""

    def matches(self, row: AuditRow) -> bool:
        """The same test as the SQL backends' WHERE clause (for stores that filter in Python)."""
        return ((self.agents is None or row.agent in self.agents)
                and all(want is None or got == want for want, got in (
                    (self.agent, row.agent), (self.client, row.client), (self.tool, row.tool),
                    (self.status, row.status), (self.kind, row.kind), (self.run_id, row.run_id),
                    (self.subject, row.subject)))
                and (self.since is None or row.time >= self.since)
                and (self.until is None or row.time < self.until))

    def within(self, agents: set[str] | None) -> AuditQuery:
        """This query narrowed to `agents` (those a caller may see; None: no narrowing)."""
        if agents is None:
            return self
        allowed = frozenset(agents) if self.agents is None else self.agents & frozenset(agents)
        return dataclasses.replace(self, agents=allowed)

    def where(self, placeholder: str = "?") -> tuple[str, list[Any]]:
        """A WHERE clause and its parameters (`placeholder`: `?` for SQLite, `%s` for psycopg); empty when nothing
        is filtered."""
        clauses: list[str] = []
        params: list[Any] = []
        if self.agents is not None:
            marks = ", ".join([placeholder] * len(self.agents))
            clauses.append(f"agent IN ({marks})" if self.agents else "1 = 0")
            params.extend(sorted(self.agents))
        for column, value in (("agent", self.agent), ("client", self.client), ("tool", self.tool),
                              ("status", self.status), ("kind", self.kind), ("run_id", self.run_id),
                              ("subject", self.subject)):
            if value is not None:
                clauses.append(f"{column} = {placeholder}")
                params.append(value)
        if self.since is not None:
            clauses.append(f"time >= {placeholder}")
            params.append(self.since)
        if self.until is not None:
            clauses.append(f"time < {placeholder}")
            params.append(self.until)
        return ("WHERE " + " AND ".join(clauses) if clauses else ""), params


def approvals_select(columns: str, *, status: str | None, run_id: str | None, client: str | None, fair: bool,
                     placeholder: str = "?") -> tuple[str, list[Any]]:
    """The SQL stores' `list_approvals` query (its last parameter, the limit, is the caller's) and its parameters.

    `fair` numbers each client's rows oldest first (a window function: SQLite 3.25+, PostgreSQL) and takes the rows
    by that turn, so the limit cuts every client at the same depth rather than the newest clients off. Only ids are
    numbered and sorted (from an index), then the chosen rows read: sorting whole rows (their arguments) took 2.5
    times as long (bench/approval_queue.py)."""
    clauses: list[str] = []
    params: list[Any] = []
    for column, value in (("status", status), ("run_id", run_id), ("client", client)):
        if value is not None:
            clauses.append(f"{column} = {placeholder}")
            params.append(value)
    where = "WHERE " + " AND ".join(clauses) if clauses else ""
    if not fair:
        return f"SELECT {columns} FROM approvals {where} ORDER BY created, id LIMIT {placeholder}", params
    numbered = (f"SELECT id, created, ROW_NUMBER() OVER (PARTITION BY client ORDER BY created, id) AS turn"
                f" FROM approvals {where}")
    chosen = f"SELECT id, created, turn FROM ({numbered}) AS numbered ORDER BY turn, created, id LIMIT {placeholder}"
    qualified = ", ".join(f"a.{column.strip()}" for column in columns.split(","))
    return (f"SELECT {qualified} FROM approvals AS a JOIN ({chosen}) AS chosen ON a.id = chosen.id"
            " ORDER BY chosen.turn, chosen.created, chosen.id"), params


class Store(abc.ABC):
    """State shared by every request (and, with a networked backend, every gateway instance)."""

    conversation_cap: int | None = DEFAULT_MAX_STORED_CONVERSATIONS
    """Stored conversations one client keeps (`gateway.store.kept_conversations`); the safety layer sets it from
    agents.yaml (`gateway.max_stored_conversations_per_client`), a store without one keeps the default."""
    timeout: float = DEFAULT_SHARED_STATE_TIMEOUT
    """Seconds a question to the store (or its Redis) waits for an answer (`gateway.shared_state_timeout`, read when
    `open_store` opened it); `/readyz` waits as long for each part, so it calls a part unavailable when a call
    would."""
    watch: ServerWatch | None = None
    """What this process knows of the store's server (a networked one's: PostgreSQL), whose lines say when it goes,
    is slow and is back; None for a store in this process (SQLite, memory)."""

    # -- approvals and paused runs ------------------------------------------------------------------
    @abc.abstractmethod
    async def save_run(self, run: RunRecord, approvals: list[ApprovalRecord], *,
                       pending_cap: int | None = None) -> bool:
        """Insert or replace the run and insert its new approvals, atomically; True.

        With `pending_cap`: nothing is saved (False) when the run's client would then have more than `pending_cap`
        approvals pending (callers without a key count as one client). The count and the insert are one step, so
        requests holding calls at once, on any instance, cannot pass the cap together."""

    @abc.abstractmethod
    async def get_run(self, run_id: str) -> RunRecord | None: ...

    @abc.abstractmethod
    async def get_approval(self, approval_id: str) -> ApprovalRecord | None: ...

    @abc.abstractmethod
    async def list_approvals(
        self, *, status: ApprovalStatus | None = "pending", run_id: str | None = None, client: str | None = None,
        limit: int = 100, fair: bool = False,
    ) -> list[ApprovalRecord]:
        """Approvals oldest first (`client`: that client's only). `fair`: taken in turns by client instead (every
        client's oldest, then every client's second oldest, ...), so that one client's many cannot fill `limit`
        and hide another's; the rows are still given in that order of turns."""

    @abc.abstractmethod
    async def pending_count(self, client: str | None) -> int:
        """How many approvals of `client` (None: callers without a key, counted as one client) are pending: a
        count, not the rows (a look before a run pauses, against `gateway.max_pending_approvals_per_client`)."""

    @abc.abstractmethod
    async def decide_approval(
        self, approval_id: str, *, approve: bool, arguments: dict[str, Any] | None = None, reason: str | None = None,
        by: str | None = None,
    ) -> ApprovalRecord | None:
        """Move a *pending* approval to approved/denied (decided `by` whom); None when unknown or already decided.

        Atomic: of two concurrent decisions on one approval, exactly one gets the record.
        """

    @abc.abstractmethod
    async def claim_run(self, run_id: str) -> RunRecord | None:
        """Move a paused run with no approval left pending to `resuming`; None otherwise (exactly one claimer wins)."""

    @abc.abstractmethod
    async def finish_run(self, run_id: str, status: RunStatus) -> None: ...

    @abc.abstractmethod
    async def reopen_run(self, run_id: str, approval_ids: Sequence[str], *, status: RunStatus) -> bool:
        """Undo decisions that could not be carried out: the run, if it is still in `status` (`resuming`, or
        `paused`), goes back to `paused` and those of `approval_ids` that were decided go back to `pending`
        (their decision cleared), atomically. False when the run was not in `status` (another instance moved it)."""

    @abc.abstractmethod
    async def stuck_runs(self, before: float) -> list[RunRecord]:
        """Runs no one will move on their own: `resuming` since before `before` (epoch seconds: the instance that
        claimed it died, or its resume outlived every timeout), and `paused` with every approval decided, the last
        decision before `before` (the decider failed between its decision and the claim)."""

    # -- audit --------------------------------------------------------------------------------------
    @abc.abstractmethod
    async def add_audit(self, row: AuditRow) -> None:
        """Durably record one row before returning.

        The row must be taken (queued or written) before the first `await`, and written even when the caller
        is cancelled while it waits: the pipeline's audit stage (`gateway.safety.audit.RecordCall`) awaits a finished
        call's row without a shield. A row that cannot be written raises (the audit fails closed).
        """

    @abc.abstractmethod
    async def update_audit(self, row: AuditRow) -> None:
        """Write the outcome of a row `add_audit` took before (found by `row.id`): its status, http_status,
        latency_ms, bytes, approval and error.

        A call's row is written before the call is sent and its outcome after (`gateway.safety.audit`). The
        same guarantees as `add_audit`: taken before the first `await`, written even when the caller is
        cancelled while it waits, and written after the row's insert even when that insert is still queued."""

    def add_audit_now(self, row: AuditRow) -> bool:
        """`add_audit` on this thread, without waiting, when the backend can (an embedded file whose write lock is
        free): True once the row is committed; False when nothing was written (then `add_audit`, awaited, writes
        it). A row that cannot be written raises, as `add_audit`. A call's row is written so before it is sent and
        its outcome after: no coroutine, task or thread hand-off per write (`gateway.safety.audit`)."""
        return False

    def update_audit_now(self, row: AuditRow) -> bool:
        """`update_audit` on this thread, without waiting, when the backend can: True once the outcome is committed;
        False when nothing was written (then `update_audit`, awaited, writes it). Raises as `update_audit`."""
        return False

    @abc.abstractmethod
    async def list_audit(self, *, limit: int = 100, agents: set[str] | None = None,
                         query: AuditQuery | None = None) -> list[AuditRow]:
        """The newest rows first; `agents` restricts to those agents (None: all), `query` filters further."""

    @abc.abstractmethod
    async def prune_audit(self, before: float) -> int:
        """Delete rows older than `before` (epoch seconds); the number deleted."""

    # -- stored conversations -----------------------------------------------------------------------
    @abc.abstractmethod
    async def save_response(self, record: ResponseRecord, *, keep: int | None = None) -> list[str]:
        """Insert or replace the record (by id); with `keep`, then remove the record's client's oldest beyond its
        newest `keep` (`gateway.max_stored_conversations_per_client`). The ids removed, oldest first."""

    @abc.abstractmethod
    async def get_response(self, response_id: str) -> ResponseRecord | None:
        """The record, whoever its client is: the door compares `client` before showing or continuing it."""

    @abc.abstractmethod
    async def get_responses(self, response_ids: Sequence[str]) -> dict[str, ResponseRecord]:
        """The stored records among `response_ids`, by id, whoever their client is (as `get_response`), in one
        question of the store: a chat's history may name a kept turn in each of its 4,096 messages."""

    @abc.abstractmethod
    async def prune_conversations(self, before: float) -> int:
        """Delete what was kept to go on with a conversation and is older than `before` (epoch seconds): stored
        answers and handed-back turns created before it, and finished runs (done, failed) last updated before it,
        with their approvals. Paused runs stay whatever their age: a human may still decide. The number deleted."""

    # -- users' own connections to apis (gateway.identity.connections) -----------------------------
    @abc.abstractmethod
    async def save_connection(self, record: ConnectionRecord) -> None:
        """Insert or replace the connection of (`subject`, `api`)."""

    @abc.abstractmethod
    async def get_connection(self, subject: str, api: str) -> ConnectionRecord | None: ...

    @abc.abstractmethod
    async def list_connections(self, subject: str) -> list[ConnectionRecord]: ...

    @abc.abstractmethod
    async def delete_connection(self, subject: str, api: str) -> bool: ...

    @abc.abstractmethod
    async def add_pending_connection(self, pending: PendingConnection) -> None: ...

    @abc.abstractmethod
    async def take_pending_connection(self, state: str, now: float) -> PendingConnection | None:
        """Remove and return the pending authorization of `state` if it has not expired by `now` (once only: a
        second callback with the same state finds nothing); expired ones are dropped on the way."""

    # -- console sessions ---------------------------------------------------------------------------
    @abc.abstractmethod
    async def end_session(self, session: str, until: float) -> None:
        """Record that the console session `session` was signed out; it would have expired at `until` (epoch
        seconds), after which the record may go (entries past their `until` are pruned here)."""

    @abc.abstractmethod
    async def session_ended(self, session: str) -> bool:
        """Whether the console session `session` was signed out (on any instance sharing the store)."""

    # -- rate limits --------------------------------------------------------------------------------
    @abc.abstractmethod
    async def take_tokens(self, buckets: Sequence[Bucket], cost: float = 1.0) -> float:
        """Take `cost` tokens from every bucket, all or none, atomically.

        Each bucket refills `rate` tokens/s up to `burst` (and starts full). Returns 0.0 when granted,
        else the seconds until every bucket has enough again (then nothing is taken).
        """

    async def ping(self) -> None:  # noqa: B027 - a backend in this process's memory is always there
        """Return when the backend answers; `StoreUnavailable` (or the driver's error) when it does not."""

    async def check_writable(self) -> None:
        """Return once the store took a write as an audit row is written (committed, then gone); an error when it
        cannot. `/readyz` asks it, so a balancer stops sending work that would fail closed on the audit: a store
        that answers reads but cannot write (a full disk) is not ready."""
        await self.ping()

    async def check(self) -> None:  # noqa: B027 - a backend in this process's memory is always there
        """The stuck-runs sweep's question, once a minute, off every request's path (`Safeguards.sweep_once`): a
        shared server whose last request went unanswered is asked again until its watch tells slow from gone
        (`gateway.store.server_watch.settle`), so an idle instance's log says an outage within that minute."""

    def readiness(self) -> list[tuple[str, Callable[[], Awaitable[None]]]]:
        """What `/readyz` asks, each by the name it reports: the store's write, and Redis where a store counts
        there (`gateway.store.redis_counters`), asked apart so that the one that hangs is the one named."""
        return [("store", self.check_writable)]

    async def aclose(self) -> None:  # noqa: B027 - optional: backends without resources need nothing
        """Release connections and threads."""


def refill_bucket(tokens: float, updated: float, now: float, bucket: Bucket) -> float:
    """Token-bucket arithmetic shared by backends: the tokens in `bucket` at `now`."""
    return min(bucket.burst, tokens + max(0.0, now - updated) * bucket.rate)


def wait_for(tokens: float, bucket: Bucket, cost: float) -> float:
    """Seconds until `bucket` holding `tokens` can give `cost` (0.0: now)."""
    if tokens >= cost:
        return 0.0
    if bucket.rate <= 0:
        return float("inf")
    return (cost - tokens) / bucket.rate
