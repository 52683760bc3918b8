"""The gateway's exception hierarchy: one tree, every error the gateway raises on purpose.

* GatewayError
  * ConfigError: the specs or agents.yaml are unusable (carries the diagnostics)
  * ProviderError: the LLM provider failed (provider, status, message)
  * RunError: a loop run ended without an answer (consecutive errors, deadline)
    * LoopError (gateway.loop_types): the same, with the steps taken so far
  * ApprovalError (gateway.safety.approvals): an approval cannot be decided (unknown, forbidden, already decided)
  * RateLimited (gateway.safety.ratelimit): a client or agent bucket is empty (retry after N seconds)
  * AuditUnavailable: a row could not be written to the store; the call's answer is withheld (fail closed)
  * RequestBuildError: a tool call cannot become an HTTP request (turned into a `ToolResult` by the executor)
    * ArgumentError: the arguments cannot be put on the wire (the model can fix them)
    * ApiSetupError: the api's configuration cannot produce a request (the operator must fix it)

Errors of a single tool call are otherwise never exceptions: they are `ToolResult`s the model sees. The
HTTP doors turn these exceptions into OpenAI-shaped answers in `gateway.server.errors`.
"""

from __future__ import annotations

from .catalog import Diagnostic


class GatewayError(Exception):
    """Base of every error the gateway raises on purpose."""


class ConfigError(GatewayError):
    def __init__(self, message: str, diagnostics: list[Diagnostic] | None = None) -> None:
        super().__init__(message)
        self.diagnostics = diagnostics or []


class ProviderError(GatewayError):
    def __init__(self, provider: str, message: str, status: int | None = None, retryable: bool = False) -> None:
        super().__init__(f"{provider}: {message}" + (f" (HTTP {status})" if status else ""))
        self.provider = provider
        self.status = status
        self.message = message
        self.retryable = retryable


class RunError(GatewayError):
    def __init__(self, message: str, code: str = "run_failed") -> None:
        super().__init__(message)
        self.code = code


class AuditUnavailable(GatewayError):
    """The audit row of a call could not be written: no answer leaves without its row (HTTP 503).

    The call itself may have run upstream; the message says so, so a caller does not blindly repeat a write.
    """

    status = 503


class RequestBuildError(GatewayError):
    error_type = "invalid_arguments"


class ArgumentError(RequestBuildError):
    error_type = "invalid_arguments"


class ApiSetupError(RequestBuildError):
    error_type = "configuration_error"
