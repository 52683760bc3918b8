"""The spec compiler: a folder of OpenAPI documents becomes one exact tool `Catalog`.

`compile_specs(folder)` for the gateway, `compile_document(dict, api=...)` for one parsed spec.
Rules live beside the code that applies them: `_names` (tool names), `_operations` (parameters,
bodies, collisions), `_schema` (JSON Schema 2020-12 translation), `_closed` (closed objects no call could
satisfy, read as meant), `_values` (defaults, examples and enums that break their own schema), `_swagger`
(2.0), `_documents` (reading files within `gateway.yamlbounds`, `$ref`s inside the specs folder only),
`_xml` (XML body mappings), `_cache` (compiled-spec cache), `_lines` (line numbers for `gateway validate`).
"""

from __future__ import annotations

from ._cache import default_dir as default_cache_dir
from ._compile import DEFAULT_MAX_DESCRIPTION, compile_document, compile_specs, spec_files
from ._names import NAME_PATTERN

__all__ = [
    "DEFAULT_MAX_DESCRIPTION",
    "NAME_PATTERN",
    "compile_document",
    "compile_specs",
    "default_cache_dir",
    "spec_files",
]
