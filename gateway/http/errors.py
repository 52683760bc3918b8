"""Why a request could not be built: raised inside `gateway.http`, turned into a `ToolResult` by the executor.

* RequestBuildError
  * ArgumentError: the model's arguments can't be put on the wire (nothing was sent; it can fix them)
  * ConfigurationError: the gateway's configuration can't produce a request (the operator must fix it)
"""

from __future__ import annotations


class RequestBuildError(Exception):
    error_type = "invalid_arguments"


class ArgumentError(RequestBuildError):
    error_type = "invalid_arguments"


class ConfigurationError(RequestBuildError):
    error_type = "configuration_error"
