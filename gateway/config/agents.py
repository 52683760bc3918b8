"""An agent of agents.yaml: its model, its tools (selections of the apis' operations), its run policy.

```yaml
agents:
  NAME:                                 # letters, digits, _ and -; at most 58 (the `ask_NAME` tool fits 64)
    model: PROVIDER/MODEL_ID            # split at the first '/'; PROVIDER must be under providers
    instructions: ...                   # the system prompt
    description: ...                    # shown to a lead agent that delegates to this one
    tools:                              # the union of the entries; an entry may also be just the api's name
      - api: shop
        operations: [listItems, "get*"] # operationIds or catalog tool names, globs (fnmatch, case-sensitive)
        tags: [items]                   # any of these tags (globs)
        methods: [GET]
        paths: ["/items/*"]             # path templates, globs (`*` also crosses `/`)
        exclude: [deleteItem]           # operationIds or tool names, globs
        args: {tenant: acme}            # fixed values: hidden from the model, always sent
        override:                       # per-tool overrides, keyed by operationId or tool name
          getItem: {rename: fetch_item, description: ..., approval: always, timeout: 5, max_result_bytes: 10000}
    approval: never|writes|always       # writes: anything but GET, HEAD, OPTIONS
    max_iterations: 40
    max_consecutive_errors: 3
    max_parallel_calls: 8
    max_result_bytes: 64000
    timeout: 300                        # seconds for a whole run
    tool_timeout: 30                    # seconds per tool call (default: the api's timeout)
    max_tool_calls: 200
    delegates: [auditor]                # one `ask_<agent>` tool each; cycles are refused
    tool_search: auto|on|off|native     # native: the provider's own search (anthropic, openai-responses)
    pinned: [users/get-authenticated]   # offered from the start (never deferred) when tool search is on
    hooks: [...]                        # the agent's own hooks (gateway.config.hooks_budgets)
    code_mode: off|on|only              # the model's `run_code` over its tools
    code_limits: {time: 30, memory: 256, tool_calls: 50}
```
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import BeforeValidator, ConfigDict, WithJsonSchema, field_validator
from pydantic.json_schema import SkipJsonSchema

from ..catalog import OutputCheck
from .fields import (
    TOOL_NAME,
    AlsoShort,
    Count,
    Names,
    Seconds,
    Section,
    at_key,
    defaults,
    derived,
    doc,
    switch_schema,
    yaml_switch,
)
from .hooks_budgets import HookConfig

Approval = Literal["never", "writes", "always"]
ToolSearch = Literal["auto", "on", "off", "native"]
CodeMode = Literal["on", "off", "only"]
ToolSearchSwitch = Annotated[ToolSearch, BeforeValidator(yaml_switch), WithJsonSchema(switch_schema(ToolSearch))]
CodeModeSwitch = Annotated[CodeMode, BeforeValidator(yaml_switch), WithJsonSchema(switch_schema(CodeMode))]
OutputCheckSwitch = Annotated[OutputCheck, BeforeValidator(yaml_switch), WithJsonSchema(switch_schema(OutputCheck))]
"""`output_check: off` unquoted is YAML's false: read back as written."""
MODEL = r"^[^/]+/.+$"
"""`<provider>/<model id>`: checked with the providers (`gateway.config.checks`), so an agent with a bad model
is still checked for the rest."""
HTTP_METHODS = ("GET", "PUT", "POST", "DELETE", "OPTIONS", "HEAD", "PATCH", "TRACE")

_APPROVAL = "never: no tool waits; writes: anything but GET, HEAD, OPTIONS waits for a human; always: every call."
_OUTPUT_CHECK = ("The upstream answer against the operation's declared response schema: enforce (a mismatch is a "
                 "tool error), warn (passed on, with a warning), off.")


class ToolOverride(Section):
    """Per-tool settings inside a selection entry (keyed by operationId or catalog tool name)."""

    rename: str | None = doc("The name the model sees instead.", None, pattern=TOOL_NAME)
    description: str | None = doc("The description the model sees instead of the spec's.", None)
    approval: Approval | None = doc(_APPROVAL + " Default: the agent's.", None)
    timeout: Seconds | None = doc("Seconds one call may take (default: the agent's tool_timeout).", None)
    max_result_bytes: Count | None = doc("Bytes of the answer the model gets at most (default: the agent's).", None)
    output_check: OutputCheckSwitch | None = doc(_OUTPUT_CHECK + " Default: the api's.", None)


def _entry(value: Any) -> Any:
    """`- shop` is `- api: shop`."""
    return {"api": value} if isinstance(value, str) else value


class ToolSelection(Section):
    """One entry of an agent's `tools:`: which operations of one api (every filter given must match)."""

    api: str = doc("The api: its spec's path under specs/ without extension.", min_length=1)
    operations: Names | None = doc("operationIds or catalog tool names, globs allowed (default: all).", None)
    tags: Names | None = doc("Any of these tags (globs).", None)
    methods: Names | None = doc("HTTP methods (any case).", None)
    paths: Names | None = doc("Path templates, globs (`*` also crosses `/`).", None)
    exclude: Names = doc("operationIds or tool names left out, globs.", default=[])
    args: dict[str, Any] = doc("Fixed argument values: hidden from the model, always sent.", default={})
    overrides: dict[str, ToolOverride] = doc("Per-tool overrides, by operationId or tool name.",
                                             default={}, alias="override")
    line: SkipJsonSchema[int | None] = derived(None)
    pointer: SkipJsonSchema[str] = derived("")
    """The entry's key path in the manifest (`agents.clerk.tools[0]`), for diagnostics."""
    key_lines: SkipJsonSchema[dict[str, int]] = derived(default={})
    """Lines of the entry's parts, by relative key path (`operations[1]`, `args.tenant`, `override.getUser`)."""

    @field_validator("methods")
    @classmethod
    def _http_methods(cls, methods: list[str] | None) -> list[str] | None:
        for index, method in enumerate(methods or []):
            if method.upper() not in HTTP_METHODS:
                raise at_key(index, f"{method!r} is not an HTTP method ({', '.join(HTTP_METHODS)})")
        return None if methods is None else [method.upper() for method in methods]


class Policy(Section):
    """How a run of the agent goes: approvals, limits, deadlines (written at the agent's own level)."""

    approval: Approval = doc(_APPROVAL, "never")
    max_iterations: Count = doc("Model calls in one run; then one last call without tools asks for a summary.", 40)
    max_consecutive_errors: Count = doc("Failed tool-call rounds in a row that end the run.", 3)
    max_parallel_calls: Count = doc("Tool calls of one model turn run at once.", 8)
    max_result_bytes: Count = doc("Bytes of a tool's answer the model gets at most.", 64_000)
    timeout: Seconds = doc("Seconds a whole run may take.", 300.0)
    tool_timeout: Seconds | None = doc("Seconds one tool call may take (default: the api's timeout).", None)
    max_tool_calls: Count = doc("Tool calls in one run at most (searches, scripts and delegations count as calls).",
                                200)


class CodeLimits(Section):
    """What one `run_code` script of the agent may use (`gateway.codemode`)."""

    model_config = ConfigDict(frozen=True)

    time: Seconds = doc("Seconds of execution (the time its tool calls take does not count).", 30.0)
    memory: Count = doc("Megabytes of heap.", 256)
    tool_calls: Count = doc("Tool calls one script may make.", 50)


class AgentConfig(Policy):
    """One agent: a model, the tools it sees, and its run policy (the keys of `Policy` at this level)."""

    model: str = doc("`<provider>/<model id>`, split at the first '/'; the provider must be under `providers`.",
                     json_schema_extra={"pattern": MODEL})
    instructions: str = doc("The system prompt.", "")
    description: str = doc("What the agent does, shown to a lead agent that delegates to it.", "")
    tools: list[Annotated[ToolSelection, BeforeValidator(_entry), AlsoShort("string")]] = doc(
        "The union of these selections; an entry may be just the api's name.", default=[])
    delegates: Names = doc("Agents this one may hand a task to (one `ask_<agent>` tool each; no cycles).",
                           default=[])
    tool_search: ToolSearchSwitch = doc(
        "on: the model starts with `pinned` + `search_tools` and loads what it finds; auto: on above 64 tools or "
        "the definitions budget; native: the provider's own search (anthropic, openai-responses).", "auto")
    pinned: Names = doc("Tools (names, operationIds or globs) offered from the start when tool search is on.",
                        default=[])
    hooks: list[HookConfig] = doc("The agent's own hooks (after the global ones).", default=[])
    code_mode: CodeModeSwitch = doc(
        "on: the model is offered `run_code` (one Python script over the tools) beside the tools; only: `run_code` "
        "with `search_tools` and `describe_tool`; off (the sandbox: `pip install 'gateway[codemode]'`).", "off")
    code_limits: CodeLimits = doc("Limits of one `run_code` script.", default_factory=defaults(CodeLimits))
    name: SkipJsonSchema[str] = derived("")
    line: SkipJsonSchema[int | None] = derived(None)

    @property
    def provider(self) -> str:
        return self.model.partition("/")[0]

    @property
    def model_id(self) -> str:
        return self.model.partition("/")[2]

    @property
    def policy(self) -> Policy:
        """The run policy: the agent's own keys."""
        return self
