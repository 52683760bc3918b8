"""The gateway's exception hierarchy.

* GatewayError
  * ConfigError: the specs or agents.yaml are unusable (carries the diagnostics)
  * ProviderError: the LLM provider failed (provider, status, message)
  * RunError: a loop run ended without an answer (consecutive errors, deadline)

Errors of a single tool call are never exceptions: they are `ToolResult`s the model sees.
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
