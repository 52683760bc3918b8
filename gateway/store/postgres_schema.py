"""The PostgreSQL store's schema, as numbered migrations applied in order.

`migrate(url)` brings a database up to `LATEST` and is what both `gateway serve` (on start) and
`gateway migrate` run. Several instances starting at once are safe: the migrations run inside one
transaction holding a transaction-level advisory lock, so one instance applies them and the others
find them applied. A migration is never edited once released; a change is a new entry at the end.

JSON columns are `json`, not `jsonb`: they keep the key order and the exact text the gateway wrote
(a paused run's state and the arguments shown to an approver), and nothing queries inside them.
"""

from __future__ import annotations

import logging
import time
from urllib.parse import urlsplit, urlunsplit

from ..config.settings import POSTGRES_MODULES, missing_extra
from ..errors import ConfigError

logger = logging.getLogger("gateway.store")

MIGRATIONS: tuple[str, ...] = (
    # 1: what the SQLite store keeps, plus who decided an approval.
    """
    CREATE TABLE runs (
        id text PRIMARY KEY, agent text NOT NULL, kind text NOT NULL, client text, status text NOT NULL,
        state json NOT NULL, created double precision NOT NULL, updated double precision NOT NULL
    );
    CREATE TABLE approvals (
        id text PRIMARY KEY, run_id text NOT NULL, agent text NOT NULL, tool text NOT NULL, arguments json NOT NULL,
        call_id text, client text, status text NOT NULL, created double precision NOT NULL,
        decided double precision, reason text, decided_arguments json, decided_by text
    );
    CREATE INDEX approvals_run ON approvals (run_id);
    CREATE INDEX approvals_pending ON approvals (created) WHERE status = 'pending';
    CREATE TABLE audit (
        id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY, time double precision NOT NULL, kind text NOT NULL,
        client text, agent text, tool text, api text, arguments json, status text NOT NULL, http_status integer,
        latency_ms double precision NOT NULL, bytes bigint NOT NULL, approval text, usage json, run_id text,
        error text
    );
    CREATE INDEX audit_time ON audit (time);
    CREATE TABLE responses (
        id text PRIMARY KEY, agent text NOT NULL, client text, body json NOT NULL, messages json NOT NULL,
        created double precision NOT NULL
    );
    CREATE TABLE buckets (key text PRIMARY KEY, tokens double precision NOT NULL, updated double precision NOT NULL);
    """,
    # 2: console sessions signed out before they expire.
    """
    CREATE TABLE ended_sessions (id text PRIMARY KEY, until double precision NOT NULL);
    """,
    # 3: the signed-in user a call was made for (gateway.auth).
    "ALTER TABLE audit ADD COLUMN subject text;",
    # 4: users' own connections to apis (auth: {type: user_oauth}), their tokens encrypted.
    """
    CREATE TABLE connections (
        subject text NOT NULL, api text NOT NULL, secret text NOT NULL, scopes text NOT NULL,
        created double precision NOT NULL, updated double precision NOT NULL, PRIMARY KEY (subject, api)
    );
    CREATE TABLE pending_connections (
        state text PRIMARY KEY, subject text NOT NULL, api text NOT NULL, verifier text NOT NULL, client text,
        created double precision NOT NULL, expires double precision NOT NULL
    );
    """,
    # 5: the hash of the nonce a connect link's owner's browser holds (bound at the gateway's start page).
    "ALTER TABLE pending_connections ADD COLUMN browser text;",
    # 6: each client's pending approvals, counted at every hold (gateway.max_pending_approvals_per_client) and
    # numbered oldest first for the listing that takes clients in turns.
    "CREATE INDEX approvals_client_pending ON approvals (client, created, id) WHERE status = 'pending';",
    # 7: each owner's number of stored conversations, and their index oldest first: what keeps
    # gateway.max_stored_conversations_per_client (a count of one row, not a walk of the owner's entries).
    """
    CREATE INDEX responses_client ON responses (client, created, id);
    CREATE TABLE conversation_counts (owner text PRIMARY KEY, n integer NOT NULL);
    INSERT INTO conversation_counts (owner, n)
        SELECT coalesce(client, ''), count(*) FROM responses GROUP BY coalesce(client, '');
    """,
)
LATEST = len(MIGRATIONS)

_LOCK_ID = 0x6761746577  # "gatew": the advisory lock every instance's migration takes
_VERSIONS = """CREATE TABLE IF NOT EXISTS gateway_schema (
    version integer PRIMARY KEY, applied double precision NOT NULL
)"""


def safe_url(url: str) -> str:
    """`url` without its password, for messages and logs."""
    parts = urlsplit(url)
    if parts.password is None:
        return url
    host = parts.hostname or ""
    netloc = f"{parts.username}:***@{host}" + (f":{parts.port}" if parts.port else "")
    return urlunsplit((parts.scheme, netloc, parts.path, parts.query, parts.fragment))


def migrate(url: str, *, connect_timeout: float = 5.0) -> list[int]:
    """Apply every migration the database at `url` lacks; the versions applied (empty: it was current).

    Raises ConfigError naming the server (never its password) when it cannot be reached or refuses, and when
    the database was migrated by a newer gateway than this one.
    """
    problem = missing_extra("the PostgreSQL store (agents.yaml gateway.store)", POSTGRES_MODULES)
    if problem is not None:
        raise ConfigError(problem)
    import psycopg

    try:
        with psycopg.connect(url, connect_timeout=max(1, int(connect_timeout))) as conn:
            with conn.transaction():
                conn.execute("SELECT pg_advisory_xact_lock(%s)", (_LOCK_ID,))
                conn.execute(_VERSIONS)
                row = conn.execute("SELECT coalesce(max(version), 0) FROM gateway_schema").fetchone()
                current = int(row[0]) if row else 0
                if current > LATEST:
                    raise ConfigError(
                        f"the store {safe_url(url)} has schema version {current}, newer than this gateway's "
                        f"{LATEST}: upgrade the gateway (or point it at another database)")
                applied = []
                for version in range(current + 1, LATEST + 1):
                    conn.execute(MIGRATIONS[version - 1].encode())
                    conn.execute("INSERT INTO gateway_schema (version, applied) VALUES (%s, %s)",
                                 (version, time.time()))
                    applied.append(version)
            # Said once committed (one line each: what an operator compares with the release notes); `gateway
            # serve` configures logging before it opens the store, so these lines are in its log.
            for version in applied:
                logger.info("the store %s: schema migration %d of %d applied", safe_url(url), version, LATEST)
            return applied
    except psycopg.Error as exc:
        raise ConfigError(f"cannot use the store {safe_url(url)} (agents.yaml gateway.store): "
                          f"{_first_line(exc)}") from None


def _first_line(exc: Exception) -> str:
    text = str(exc).strip() or type(exc).__name__
    return text.splitlines()[0]
