"""The gateway's exception hierarchy: one tree, every error the gateway raises on purpose.

* GatewayError
  * ConfigError: the specs or agents.yaml are unusable (carries the diagnostics)
  * ProviderError: the LLM provider failed (provider, status, message)
  * RunError: a loop run ended without an answer (consecutive errors, deadline)
    * LoopError (gateway.loop_types): the same, with the steps taken so far
    * BudgetExceeded: a token or cost budget refuses the next model call (scope: run, agent or client)
  * HookDenied: a model-call hook refused the step (the run ends with the reason)
  * ApprovalError: an approval cannot be decided
    * UnknownApproval, ForbiddenApproval, AlreadyDecided, ToolGone, DecisionNotCarriedOut
  * RateLimited: a client or agent bucket is empty (retry after N seconds)
    * OverShare: a client has its whole share of chat runs or code-mode sandboxes in flight
  * TooManyWrongKeys: an address sent too many wrong keys; every key it sends is refused for N seconds
  * AuditUnavailable: a row could not be written to the store; the call's answer is withheld (fail closed)
  * StoreUnavailable: the store (PostgreSQL, Redis) cannot be reached, or cannot write, while serving (HTTP 503)
  * RequestBuildError: a tool call cannot become an HTTP request (turned into a `ToolResult` by the executor)
    * ArgumentError: the arguments cannot be put on the wire (the model can fix them)
    * ApiSetupError: the api's configuration cannot produce a request (the operator must fix it)
  * IdentityError: a caller's identity or a user's upstream credential (gateway.identity)
    * TokenRejected: the bearer token is not valid here (401 at a door; the reason says why, never the token)
    * NoClient: a valid token whose claims match no `clients.<name>.claims` (403)
    * AuthServerUnavailable: the authorization server cannot be reached or failed (503; nothing sent upstream)
    * UserCredentialError: no per-user credential for this call (a tool error; nothing was sent upstream)
      * UserRequired: the caller is no signed-in user, or the server refused to exchange their token
      * InsufficientScope: the user may not have the scopes the operation needs (names them)
      * NotConnected: the user has not connected their account to the api yet (carries the connect link)
    * ForeignConnectLink: a connect link opened or finished in a browser that is not its owner's (403; spent)

Errors of a single tool call are otherwise never exceptions: they are `ToolResult`s the model sees. The
HTTP doors turn these exceptions into OpenAI-shaped answers in `gateway.server.api_errors`.
"""

from __future__ import annotations

import math

from .catalog import Diagnostic


class GatewayError(Exception):
    """Base of every error the gateway raises on purpose."""


class ConfigError(GatewayError):
    def __init__(self, message: str, diagnostics: list[Diagnostic] | None = None) -> None:
        super().__init__(message)
        self.diagnostics = diagnostics or []


class ProviderError(GatewayError):
    def __init__(self, provider: str, message: str, status: int | None = None, retryable: bool = False,
                 retry_after: float | None = None) -> None:
        super().__init__(f"{provider}: {message}" + (f" (HTTP {status})" if status else ""))
        self.provider = provider
        self.status = status
        self.message = message
        self.retryable = retryable
        self.retry_after = retry_after
        """Seconds the provider's last answer asked to wait (its `Retry-After`), passed on to the caller."""


class RunError(GatewayError):
    def __init__(self, message: str, code: str = "run_failed") -> None:
        super().__init__(message)
        self.code = code


class BudgetExceeded(RunError):
    """A budget refuses the next model call."""

    def __init__(self, scope: str, name: str | None, message: str) -> None:
        super().__init__(message, "budget_exceeded")
        self.scope = scope
        """`run`, `agent` or `client`."""
        self.name = name


class HookDenied(GatewayError):
    """A model-call hook refused the step (the run ends with the reason)."""

    def __init__(self, event: str, reason: str) -> None:
        super().__init__(f"{event} hook refused the model call: {reason}")
        self.event = event
        self.reason = reason


class ApprovalError(GatewayError):
    status = 400


class UnknownApproval(ApprovalError):
    status = 404


class ForbiddenApproval(ApprovalError):
    status = 403


class AlreadyDecided(ApprovalError):
    status = 409


class ToolGone(ApprovalError):
    """Approved, the call would not run: a reload took its tool away from the agent (deny it instead)."""

    status = 409


class DecisionNotCarriedOut(ApprovalError):
    """The decision was taken back: nothing of its run was sent, and the approval is pending again."""

    status = 503


class RateLimited(GatewayError):
    """A bucket is empty: `retry_after` seconds until the call would be granted."""

    def __init__(self, scope: str, retry_after: float) -> None:
        self.scope = scope
        self.retry_after = retry_after
        super().__init__(f"Rate limit reached for {scope}; retry after {self.retry_after_header} s.")

    @property
    def retry_after_header(self) -> str:
        return str(max(1, math.ceil(self.retry_after))) if math.isfinite(self.retry_after) else "3600"


class OverShare(RateLimited):
    """A client holds its whole share of some work already (`gateway.safety.client_shares`)."""

    def __init__(self, client: str | None, what: str, cap: int, setting: str, retry_after: float) -> None:
        who = f"Client {client!r}" if client is not None else "This caller"
        self.client = client
        super().__init__(f"{who}'s {what}", retry_after)
        self.args = (f"{who} has {cap} {what} in flight, its share ({setting}); retry after "
                     f"{self.retry_after_header} s, once one of them has ended.",)


class TooManyWrongKeys(GatewayError):
    """An address sent too many wrong keys (`gateway.safety.wrong_keys`): refused for `retry_after` seconds."""

    def __init__(self, retry_after: float) -> None:
        self.retry_after = retry_after
        super().__init__(f"Too many wrong keys from this address; retry after {self.retry_after_header} s.")

    @property
    def retry_after_header(self) -> str:
        return str(max(1, math.ceil(self.retry_after)))


class AuditUnavailable(GatewayError):
    """The audit row of a call could not be written: no answer leaves without its row (HTTP 503).

    A call's row is written before it is sent, so most of these say nothing was sent; when only its outcome could not
    be written, the call did run upstream and the message says so, so a caller does not blindly repeat a write.
    """

    status = 503


class StoreUnavailable(GatewayError):
    """The store cannot be reached (PostgreSQL, Redis) or cannot write (SQLite on a full disk) while serving: the
    doors answer 503, and nothing that needed the store (an approval, an audit row, a rate-limit count) is taken
    as done."""

    def refused(self, what: str) -> str:
        """The error a refused tool call's result says (`store_unavailable`: the model reads it, a door answers
        503): `what` was not sent."""
        return f"The gateway's shared state is unavailable ({self}), so {what} was not sent; try again later."


class RequestBuildError(GatewayError):
    error_type = "invalid_arguments"


class ArgumentError(RequestBuildError):
    error_type = "invalid_arguments"


class ApiSetupError(RequestBuildError):
    error_type = "configuration_error"


class IdentityError(GatewayError):
    status = 500
    error_type = "server_error"


class TokenRejected(IdentityError):
    """The reason is for the caller (`The token has expired.`); it never quotes the token."""

    status = 401
    error_type = "invalid_token"


class TokenExpired(TokenRejected):
    """A genuine token past its expiry (its signature verified, or the issuer vouched for it): its holder has to
    refresh it; it guessed nothing, so it does not count as a wrong key."""


class NoClient(IdentityError):
    status = 403
    error_type = "no_client"


class AuthServerUnavailable(IdentityError):
    status = 503
    error_type = "auth_unavailable"

    def __init__(self, message: str, *, retry_after: float | None = None) -> None:
        super().__init__(message)
        self.retry_after = retry_after
        """Seconds until the server is asked again (the answer's Retry-After); None: not known."""


class UserCredentialError(IdentityError):
    status = 403
    error_type = "user_required"


class UserRequired(UserCredentialError):
    error_type = "user_required"


class InsufficientScope(UserCredentialError):
    error_type = "insufficient_scope"

    def __init__(self, message: str, scopes: list[str]) -> None:
        super().__init__(message)
        self.scopes = scopes


class NotConnected(UserCredentialError):
    error_type = "not_connected"

    def __init__(self, message: str, connect_url: str) -> None:
        super().__init__(message)
        self.connect_url = connect_url


class ForeignConnectLink(IdentityError):
    """Possessing a connect link proves nothing: the browser opening or finishing it is not signed in as the user
    it was made for (or does not hold the nonce given to theirs). The link is spent; nothing is stored."""

    status = 403
    error_type = "foreign_connect_link"
