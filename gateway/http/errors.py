"""Why a request could not be built: raised inside `gateway.http`, turned into a `ToolResult` by the executor.

The classes live in the one error tree, `gateway.errors`; this module names the ones `gateway.http` raises.
"""

from __future__ import annotations

from ..errors import ApiSetupError, ArgumentError, RequestBuildError

__all__ = ["ApiSetupError", "ArgumentError", "RequestBuildError"]
