"""Hand-built tools and executors for the executor's tests (the compiler is not needed to test the wire)."""

from __future__ import annotations

from typing import Any

from gateway.catalog import Argument, BodyBinding, Catalog, Server, Tool
from gateway.config.model import ApiConfig, AuthConfig, Manifest
from gateway.execution.executor import Executor


def arg(name: str, location: str, schema: dict[str, Any] | None = None, *, required: bool = False,
        wire_name: str | None = None, style: str | None = None, explode: bool | None = None,
        allow_reserved: bool = False, content_type: str | None = None) -> tuple[Argument, dict[str, Any]]:
    default_style = {"path": "simple", "header": "simple", "query": "form", "cookie": "form"}.get(location)
    style = style if style is not None or location == "body" else default_style
    argument = Argument(
        name=name,
        location=location,  # type: ignore[arg-type]
        wire_name=wire_name or name,
        required=required or location == "path",
        style=style,
        explode=explode if explode is not None else style == "form",
        allow_reserved=allow_reserved,
        content_type=content_type,
    )
    return argument, schema if schema is not None else {"type": "string"}


def make_tool(*args: tuple[Argument, dict[str, Any]], method: str = "GET", path: str = "/items",
              body: BodyBinding | None = None, body_schema: dict[str, Any] | None = None, name: str = "op",
              api: str = "demo", servers: tuple[Server, ...] = (), extra_schema: dict[str, Any] | None = None,
              response_media_types: tuple[str, ...] = ("application/json",)) -> Tool:
    properties = {a.name: s for a, s in args}
    required = [a.name for a, _ in args if a.required]
    if body is not None and body.argument:
        properties[body.argument] = body_schema or {}
        if body.required:
            required.append(body.argument)
    schema: dict[str, Any] = {"type": "object", "properties": properties, **(extra_schema or {})}
    if required:
        schema["required"] = required
    return Tool(
        name=name, api=api, operation_id=name, method=method, path=path, description="", input_schema=schema,
        arguments=tuple(a for a, _ in args), body=body, servers=servers,
        response_media_types=response_media_types,
    )


def executor_for(base_url: str | None, *tools: Tool, auth: list[AuthConfig] | None = None,
                 api: str = "demo", transport: Any = None, **settings: Any) -> Executor:
    config = ApiConfig(name=api, base_url=base_url, auth=auth or [], **settings)
    return Executor(Manifest(apis={api: config}), Catalog(tools), transport=transport)
