"""The call pipeline: a model's (or a caller's) tool call becomes a `ToolResult`.

`arguments` validates against the exact schema, `executor` turns a valid call into the REST request its spec
describes, `runner` merges an agent's fixed arguments and runs delegations.
"""
