"""The compiled truth: every operation of every spec as a `Tool`, gathered in a `Catalog`.

A `Tool` carries the exact JSON Schema (2020-12) of its input and output, and a *binding*
(`Argument`s and a `BodyBinding`) that says where every argument goes on the wire. The
compiler (`gateway.openapi`) produces these; the executor reads the binding and never guesses.
An `AgentTool` is a tool as one agent sees it (renamed, narrowed, with fixed arguments: `gateway.toolsets`
builds them).
Everything here is plain, immutable-by-convention data so a catalog can be cached on disk.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any, Literal
from urllib.parse import urlsplit

OWNED_HEADERS = frozenset({
    "host", "content-length", "transfer-encoding", "connection", "keep-alive", "te", "trailer", "upgrade",
    "expect", "proxy-authorization", "proxy-connection",
    # OpenAPI: header parameters named Accept, Content-Type or Authorization are ignored.
    "accept", "content-type", "authorization",
    # The cookie parameters and the credentials build this one.
    "cookie",
})
"""Request headers the gateway sets itself (lower case): a spec's header parameter of one of these names is not
an argument (the compiler drops it) and is never sent from arguments (the request builder skips it). The one
source of this fact for both."""

Location = Literal["path", "query", "header", "cookie", "body"]
Level = Literal["error", "warning"]
Approval = Literal["never", "writes", "always"]
OutputCheck = Literal["enforce", "warn", "off"]
"""When a tool waits for a human (agents.yaml `approval:`): never, for writes only, or always."""

JSONSchema = dict[str, Any]


@dataclass(slots=True, kw_only=True)
class Diagnostic:
    """Something the compiler or the manifest loader met that the operator should know about."""

    level: Level
    """`error`: the thing named was skipped or is unusable; `warning`: it was used, with a caveat."""
    file: str
    """The file, relative to the folder it was loaded from (e.g. `github.json`, `agents.yaml`)."""
    pointer: str = ""
    """A JSON pointer into the file (`/paths/~1repos/get`), or a key path for the manifest."""
    message: str = ""
    line: int | None = None
    """1-based line in the file, where known (the manifest always knows)."""

    def __str__(self) -> str:
        where = self.file
        if self.line is not None:
            where += f":{self.line}"
        if self.pointer:
            where += f": {self.pointer}" if self.line is not None else f"#{self.pointer}"
        return f"{where}: {self.message}"

    def to_dict(self) -> dict[str, Any]:
        return {
            "level": self.level,
            "file": self.file,
            "pointer": self.pointer,
            "line": self.line,
            "message": self.message,
        }


@dataclass(slots=True, kw_only=True)
class Argument:
    """One top-level property of a tool's input schema, and where its value goes in the request."""

    name: str
    """The property name the model sees (the spec's name unless a collision forced a rename)."""
    location: Location
    """`path`, `query`, `header`, `cookie`: a parameter. `body`: a property of an object body."""
    wire_name: str
    """The name on the wire: the parameter's `name`, or the body property's name."""
    required: bool = False
    style: str | None = None
    """OpenAPI style; None for body properties. Defaults already applied by the compiler
    (path/header: simple, query/cookie: form)."""
    explode: bool = False
    """OpenAPI explode, defaults already applied (form: true, otherwise false)."""
    allow_reserved: bool = False
    content_type: str | None = None
    """Set when the parameter uses `content` instead of `schema` (the value is serialized in that media type)."""


@dataclass(slots=True, kw_only=True)
class Encoding:
    """OpenAPI Encoding Object of one property of a form or multipart body."""

    content_type: str | None = None
    style: str | None = None
    explode: bool | None = None
    allow_reserved: bool = False
    headers: tuple[str, ...] = ()


@dataclass(slots=True, kw_only=True)
class BodyBinding:
    """How the request body is assembled."""

    media_type: str
    """The declared media type sent as Content-Type (e.g. `application/vnd.github+json`)."""
    required: bool = False
    argument: str | None = None
    """The argument that holds the whole body (usually `body`). None when the body is an object whose
    properties sit at the top level of the input schema (see `Argument.location == "body"`)."""
    encoding: dict[str, Encoding] = field(default_factory=dict)
    """Per-property encoding for `application/x-www-form-urlencoded` and `multipart/form-data`."""
    xml: dict[str, Any] | None = None
    """XML media types only: the spec's `xml` objects (element and attribute names, wrapped arrays,
    namespaces) and the root element's name, as a JSON tree kept beside the schema, which stays plain
    JSON Schema. Layout in gateway/openapi/_xml.py; None: property names are used as is."""


@dataclass(slots=True, kw_only=True)
class Server:
    """One entry of the spec's `servers` (Swagger 2.0's host/basePath/schemes already translated)."""

    url: str
    variables: dict[str, str] = field(default_factory=dict)
    """Each server variable's default."""

    def resolved(self) -> str:
        url = self.url
        for name, value in self.variables.items():
            url = url.replace("{" + name + "}", value)
        return url

    def origin(self) -> tuple[str, str, int] | None:
        """(scheme, host, port) of the resolved URL, the port at its scheme's default when not written; None for
        a URL that is relative, not http(s), or unreadable (no origin to compare)."""
        return origin_of_url(self.resolved())


def origin_of_url(url: str) -> tuple[str, str, int] | None:
    """(scheme, lower-case host, port) of an absolute http(s) URL; None otherwise."""
    try:
        parts = urlsplit(url.strip())
        port = parts.port
    except ValueError:
        return None
    scheme = parts.scheme.lower()
    if scheme not in ("http", "https") or not parts.hostname:
        return None
    return scheme, parts.hostname.rstrip(".").lower(), port or (443 if scheme == "https" else 80)


def foreign_origin(server: Server, api_servers: tuple[Server, ...], trusted: Iterable[str] = ()) -> bool:
    """Whether an operation's server is another origin than its api's (the spec's first top-level server), so the
    api's credentials must not go there (a spec that names `https://evil.example` for one operation would collect
    them). `trusted`: other origins the operator named (`apis.<name>.trusted_origins`)."""
    own = server.origin()
    if own is None:  # relative: never called without a base_url, which replaces it
        return False
    if api_servers and own == api_servers[0].origin():
        return False
    return own not in {origin_of_url(url) for url in trusted}


@dataclass(slots=True, kw_only=True)
class Tool:
    """One operation of one spec, as the model and the executor know it."""

    name: str
    """Unique in the catalog, `^[a-zA-Z0-9_-]{1,64}$`, deterministic."""
    api: str
    """The spec's path under the specs folder without extension (`github`, `twilio.com/api`)."""
    operation_id: str | None
    method: str
    """Upper case: GET, POST, ..."""
    path: str
    """The path template as in the spec (`/repos/{owner}/{repo}`), without the server part."""
    description: str
    input_schema: JSONSchema
    """An object schema (JSON Schema 2020-12), carrying only the `$defs` it uses."""
    output_schema: JSONSchema | None = None
    """The schema of the first 2xx JSON response, when there is one."""
    arguments: tuple[Argument, ...] = ()
    body: BodyBinding | None = None
    servers: tuple[Server, ...] = ()
    """Operation-, path- or spec-level servers, whichever is most specific."""
    response_media_types: tuple[str, ...] = ()
    """Media types of the responses, for `Accept`."""
    security: tuple[dict[str, tuple[str, ...]], ...] = ()
    """Alternatives of security requirements: scheme name -> scopes. Empty: none required."""
    tags: tuple[str, ...] = ()
    deprecated: bool = False
    summary: str = ""
    source: str = ""
    """File the operation came from (relative to the specs folder)."""
    pointer: str = ""
    """JSON pointer of the operation in that file."""
    judged_schema: JSONSchema | None = None
    """What arguments are judged by when not `input_schema`: the `$defs` entries a value would be judged by
    exponentially often accept anything (`gateway.openapi._ambiguity`; the upstream still checks them)."""

    @property
    def is_write(self) -> bool:
        return self.method not in ("GET", "HEAD", "OPTIONS")

    def argument(self, name: str) -> Argument | None:
        for argument in self.arguments:
            if argument.name == name:
                return argument
        return None

    def to_dict(self) -> dict[str, Any]:
        """The `--format json` rendering."""
        return {
            "name": self.name,
            "api": self.api,
            "operation_id": self.operation_id,
            "method": self.method,
            "path": self.path,
            "description": self.description,
            "input_schema": self.input_schema,
            "output_schema": self.output_schema,
            "tags": list(self.tags),
            "deprecated": self.deprecated,
        }


@dataclass(slots=True, kw_only=True)
class AgentTool:
    """A tool as one agent sees it."""

    name: str
    """Unique within the agent's set; what the model calls."""
    description: str
    input_schema: JSONSchema
    """The catalog tool's schema without the fixed `args`."""
    output_schema: JSONSchema | None = None
    tool: Tool | None = None
    """The catalog tool (its binding); None for a delegation tool."""
    fixed_args: dict[str, Any] = field(default_factory=dict)
    approval: Approval = "never"
    """The effective approval policy for this tool (agent policy, or the per-tool override)."""
    delegate: str | None = None
    """For a delegation tool: the sub-agent it runs."""
    timeout: float | None = None
    max_result_bytes: int | None = None
    output_check: OutputCheck = "enforce"
    """What a 2xx body that breaks `output_schema` is: enforce: an `invalid_output` failure; warn: passed on with a
    warning; off: not checked. Only an enforced schema is declared to clients (MCP's `outputSchema`)."""

    @property
    def enforced_output_schema(self) -> JSONSchema | None:
        """The output schema a client may rely on: the spec's, when the gateway enforces it."""
        return self.output_schema if self.output_check == "enforce" else None

    @property
    def needs_approval(self) -> bool:
        if self.approval == "always":
            return True
        if self.approval == "writes":
            return self.tool is None or self.tool.is_write
        return False

    def to_dict(self) -> dict[str, Any]:
        """The `--format json` rendering: the catalog fields plus what the agent's view adds."""
        tool = self.tool
        return {
            "name": self.name,
            "api": tool.api if tool else None,
            "operation_id": tool.operation_id if tool else None,
            "method": tool.method if tool else None,
            "path": tool.path if tool else None,
            "description": self.description,
            "input_schema": self.input_schema,
            "output_schema": self.output_schema,
            "output_check": self.output_check,
            "tool": tool.name if tool else None,
            "fixed_args": self.fixed_args,
            "approval": self.approval,
            "needs_approval": self.needs_approval,
            "delegate": self.delegate,
        }


@dataclass(slots=True, kw_only=True)
class ApiSpec:
    """What the catalog knows of one spec file, beside its tools."""

    name: str
    file: str
    openapi_version: str = ""
    title: str = ""
    version: str = ""
    servers: tuple[Server, ...] = ()
    security_schemes: dict[str, dict[str, Any]] = field(default_factory=dict)
    operation_count: int = 0
    tool_count: int = 0
    content_hash: str = ""
    search_index: bytes = b""
    """The spec's tool search index (`gateway.offer.index`), built at compile time: row i is the i-th of
    the spec's tools in catalog order."""
    tag_descriptions: dict[str, str] = field(default_factory=dict)
    """What the spec's `tags[]` say of each tag (markup out), by name: read once each by the search index, in a table
    of its own (`gateway.offer.tag_table`), kept so that the index can be built again from the catalog."""
    skipped: dict[str, Diagnostic] = field(default_factory=dict)
    """Operations the compiler skipped, by operationId (the derived tool name when there is none): why."""


class Catalog:
    """All tools of all specs, by name; one compiled truth shared by every agent and every door."""

    def __init__(
        self,
        tools: Iterable[Tool] = (),
        apis: Mapping[str, ApiSpec] | None = None,
        diagnostics: Iterable[Diagnostic] = (),
    ) -> None:
        self.tools: dict[str, Tool] = {}
        by_api: dict[str, list[Tool]] = {}
        for tool in tools:
            if tool.name in self.tools:
                raise ValueError(f"duplicate tool name {tool.name!r}")
            self.tools[tool.name] = tool
            by_api.setdefault(tool.api, []).append(tool)
        # grouped once: tool search reads an api's tools at every search (11,000 of them for Graph)
        self._by_api = {api: tuple(api_tools) for api, api_tools in by_api.items()}
        self.apis: dict[str, ApiSpec] = dict(apis or {})
        self.diagnostics: list[Diagnostic] = list(diagnostics)

    def __iter__(self) -> Iterator[Tool]:
        return iter(self.tools.values())

    def __len__(self) -> int:
        return len(self.tools)

    def __contains__(self, name: object) -> bool:
        return name in self.tools

    def get(self, name: str) -> Tool | None:
        return self.tools.get(name)

    def for_api(self, api: str) -> tuple[Tool, ...]:
        """The api's tools, in catalog order (a catalog does not change once built)."""
        return self._by_api.get(api, ())

    @property
    def errors(self) -> list[Diagnostic]:
        return [d for d in self.diagnostics if d.level == "error"]
