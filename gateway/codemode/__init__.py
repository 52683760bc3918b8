"""Code mode: the model writes one Python script over its tools instead of calling them one at a time.

Per agent `code_mode: on | off | only` (default off): `on` offers `run_code` (`{"code": string}`) beside the
agent's tools; `only` offers `run_code` with `search_tools`/`describe_tool` for finding what to call.

- `tool`: the `run_code` tool and its description (typed signatures from the exact schemas, within the tool budget).
- `signatures`: tools as Python functions: names and type hints read from JSON Schema.
- `script`: one `run_code` call driven over a door's pipeline (`ScriptHost`); approvals pause it (`Paused`).
- `sandbox`: Monty (`pydantic-monty`), stepped from the event loop; limits from `code_limits`.
- `values`: sandbox values as JSON.
"""

from .run_code import RUN_CODE, RUN_CODE_TOOL, run_code_tool
from .sandbox import Limits, SandboxUnavailable, available
from .script import Paused, Script, ScriptHost
from .signatures import FunctionNames, python_name, signature

__all__ = ["RUN_CODE", "RUN_CODE_TOOL", "FunctionNames", "Limits", "Paused", "SandboxUnavailable", "Script",
           "ScriptHost", "available", "python_name", "run_code_tool", "signature"]
