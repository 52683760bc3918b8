"""The pieces every section of the settings model is made of: the `Section` base and the value types of agents.yaml.

Every section refuses keys it does not know (`extra="forbid"`); the loader turns pydantic's errors into
file:line:key diagnostics (`gateway.config.reading`). Fields the loader fills in itself (an entry's name, its
line) are `derived`: the file cannot set them and the JSON Schema does not show them, yet Python code may pass
them by name (`AgentConfig(name="clerk", ...)`), because the file is validated by alias only.

`${VAR}` is expanded before validation (`gateway.config.yamlnodes`), so a number written `${MAX:-40}` arrives
as the number 40; the JSON Schema (`gateway.config.schema`) accepts such a placeholder wherever it checks a value.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Annotated, Any, ClassVar, Literal, TypeVar, get_args

from pydantic import (
    AfterValidator,
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    GetJsonSchemaHandler,
    Strict,
    WithJsonSchema,
    field_validator,
    model_validator,
)
from pydantic.json_schema import JsonSchemaValue
from pydantic_core import PydanticCustomError

HTTP_URL = r"^https?://[^/\s]+"
AGENT_NAME = r"^[A-Za-z0-9_-]{1,58}$"
TOOL_NAME = r"^[A-Za-z0-9_-]{1,64}$"
HOOK_CALL = r"^[A-Za-z_][\w.]*:[A-Za-z_]\w*$"
PROVIDER_NAME = r"^[^/]+$"
REDIS_URL = r"^(|(redis|rediss|unix)://.*)$"
PATTERN_MESSAGES = {
    HTTP_URL: "expected an http:// or https:// URL, got {value!r}",
    AGENT_NAME: "an agent name is 1-58 letters, digits, '_' or '-' (it becomes the tool name ask_<name>)",
    TOOL_NAME: "{value!r} is not a valid tool name (1-64 letters, digits, '_' or '-')",
    HOOK_CALL: "expected 'module:function', got {value!r}",
    REDIS_URL: "expected a redis://, rediss:// or unix:// URL, got {value!r}",
    PROVIDER_NAME: "a provider name must not contain '/' (the agent's model is '<provider>/<model id>')",
}
"""What a value that misses one of these patterns is told (the patterns also go into the JSON Schema)."""

_DERIVED = itertools.count()
S = TypeVar("S", bound="Section")


class Section(BaseModel):
    """A mapping of agents.yaml: unknown keys refused, numbers never booleans, nothing infinite."""

    model_config = ConfigDict(
        extra="forbid", validate_by_name=True, validate_by_alias=True, coerce_numbers_to_str=True,
        allow_inf_nan=False, defer_build=True, validate_default=False,
    )


OLLAMA_PORT = 11434


def ollama_host_url(host: str) -> str:
    """An Ollama server's address in the forms `OLLAMA_HOST` takes, read as Ollama's own clients read it: no scheme
    is http://, no port is 11434, `:port` is 127.0.0.1 (`0.0.0.0:11434`, set for `ollama serve` to listen everywhere,
    is `http://0.0.0.0:11434`); a URL with a scheme is left as written."""
    host = host.strip()
    if not host or "://" in host:
        return host
    authority, slash, path = host.partition("/")
    if authority.startswith(":"):
        authority = "127.0.0.1" + authority
    if ":" not in authority.rpartition("]")[2]:  # no port (an IPv6 address is in brackets)
        authority = f"{authority}:{OLLAMA_PORT}"
    return f"http://{authority}{slash}{path}".rstrip("/")


class KindEndpoint(Section):
    """A service of some `kind` (a provider, the embeddings endpoint): `base_url` defaults to the kind's public one
    (`default_base_urls`), and an empty `api_key` (`${KEY:-}` unset) is no key."""

    default_base_urls: ClassVar[Mapping[str, str]] = {}

    @model_validator(mode="before")
    @classmethod
    def _base_url_of_the_kind(cls, data: Any) -> Any:
        if isinstance(data, dict) and not data.get("base_url") and data.get("kind") in cls.default_base_urls:
            return {**data, "base_url": cls.default_base_urls[data["kind"]]}
        if isinstance(data, dict) and data.get("kind") == "ollama" and isinstance(data.get("base_url"), str):
            return {**data, "base_url": ollama_host_url(data["base_url"])}
        return data

    @field_validator("api_key", check_fields=False)
    @classmethod
    def _empty_is_none(cls, key: str | None) -> str | None:
        return key or None


def derived(default: Any = None, **options: Any) -> Any:
    """A field the loader fills in (a name, a line): not written in the file, not dumped; annotate it
    `SkipJsonSchema[...]` to keep it out of the schema.

    Its only validation alias is one no YAML key can spell (it starts with a NUL), and the file is validated
    by alias only."""
    alias = f"\0derived{next(_DERIVED)}"
    if "default_factory" in options:
        return Field(validation_alias=alias, exclude=True, **options)
    return Field(default, validation_alias=alias, exclude=True, **options)


def at_key(key: str | int | tuple[str | int, ...], message: str) -> PydanticCustomError:
    """An error a section's own check raises about one of its keys (reported at that key, not at the section)."""
    keys = key if isinstance(key, tuple) else (key,)
    return PydanticCustomError("at_key", "{message}", {"keys": keys, "message": message})


def describe_type(value: Any) -> str:
    if value is None:
        return "nothing (null)"
    if isinstance(value, bool):
        return f"a boolean ({value})"
    if isinstance(value, int | float):
        return f"a number ({value})"
    if isinstance(value, str):
        shown = value if len(value) <= 30 else value[:27] + "..."
        return f"a string ({shown!r})"
    if isinstance(value, list):
        return "a list"
    if isinstance(value, Mapping):
        return "a mapping"
    return type(value).__name__


def _whole_number(value: Any) -> Any:
    if isinstance(value, bool):
        raise PydanticCustomError("int_type", "expected an integer")
    return value


def _number(value: Any) -> Any:
    if isinstance(value, bool):
        raise PydanticCustomError("float_type", "expected a number")
    return value


def _one_or_many(value: Any) -> Any:
    """`operations: getRepo` is `operations: [getRepo]`."""
    return [value] if isinstance(value, str) else value


def yaml_switch(value: Any) -> Any:
    """YAML 1.1 reads an unquoted `on` / `off` as a boolean: read it back as written."""
    if value is True:
        return "on"
    if value is False:
        return "off"
    return value


_STRINGS = {"anyOf": [{"type": "string"}, {"type": "array", "items": {"type": "string"}}]}

Int = Annotated[int, BeforeValidator(_whole_number)]
"""A whole number (`"3"` is read as 3; `true` is no number, though pydantic alone would take it as 1)."""
Number = Annotated[float, BeforeValidator(_number)]
"""A number, whole or decimal (`"2.5"` is read as 2.5; `true` is no number)."""
Count = Annotated[int, Field(ge=1), BeforeValidator(_whole_number)]
"""A whole number, at least 1 (the bound before the validator, so the JSON Schema says `minimum`)."""
Seconds = Annotated[float, Field(gt=0), BeforeValidator(_number)]
"""A duration in seconds, more than 0."""
Positive = Annotated[float, Field(gt=0), BeforeValidator(_number)]
"""A number more than 0."""
NonNegative = Annotated[float, Field(ge=0), BeforeValidator(_number)]
"""A number, 0 or more."""
TokenBudget = Annotated[int, Field(ge=200), BeforeValidator(_whole_number)]
"""Tokens, at least 200 (less cannot hold a tool's name and a sentence)."""
Flag = Annotated[bool, Strict()]
"""`true` or `false` (not `"yes"`, not 1)."""
Names = Annotated[list[str], BeforeValidator(_one_or_many), WithJsonSchema(_STRINGS)]
"""A list of strings; one string is a list of one."""
HttpUrl = Annotated[str, Field(pattern=HTTP_URL), AfterValidator(lambda url: url.rstrip("/"))]
"""An http:// or https:// URL, its trailing `/` dropped."""
TextMap = dict[str, str]
"""Strings by name (headers); a number is written as text."""


def switch_schema(choices: Any) -> dict[str, Any]:
    """The JSON Schema of a `Literal` of choices among which `on`/`off` may be written unquoted (YAML booleans),
    validated with `yaml_switch` first."""
    return {"anyOf": [{"enum": list(get_args(choices))}, {"type": "boolean"}]}


def defaults(section: type[S]) -> Callable[[], S]:
    """The default of a nested section: the section with its own defaults (nothing to validate).

    A plain function, not the bound `model_construct`: pydantic reads a default factory's signature, and for a
    builtin that means compiling `tokenize`'s patterns, tens of milliseconds at every start."""

    def make() -> S:
        return section.model_construct()

    return make


@dataclass(frozen=True, slots=True)
class AlsoShort:
    """Annotation: the file may also write this value in a shorter form that a before-validator expands (`- shop`
    for `- api: shop`, one credential for a list of one); the JSON Schema then accepts both."""

    short: Literal["string", "item"]

    def __get_pydantic_json_schema__(self, schema: Any, handler: GetJsonSchemaHandler) -> JsonSchemaValue:
        full = handler(schema)
        short = {"type": "string"} if self.short == "string" else full.get("items", {})
        return {"anyOf": [full, short]}


def _no_default(schema: dict[str, Any]) -> None:
    schema.pop("default", None)


def filled(text: str) -> Any:
    """A string the section fills in itself when the file leaves it out (a default that depends on another key)."""
    return Field("", description=text, json_schema_extra=_no_default)


def doc(text: str, default: Any = ..., **options: Any) -> Any:
    """A field with its description (the JSON Schema's and the agents.yaml reference's); `...`: required."""
    if "default_factory" in options:
        return Field(description=text, **options)
    return Field(default, description=text, **options)


