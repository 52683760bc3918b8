"""The call pipeline: a model's (or a caller's) tool call becomes a `ToolResult`, the same way on every door.

`pipeline` assembles the stages in one place (`build_pipeline`); their seams (`Stage`, `ToolHooks`, `Invocation`)
are the call contract in `gateway.kernel.calls`. `stages` holds the execution stages (argument validation, hooks,
the output check, the call, redaction); `arguments` validates against the exact schema; `executor` turns a valid call
into the REST request its spec describes; `runner` is the doors' front (an agent's fixed arguments merged,
delegations run). The safety stages (approval, rate limits, breaker and concurrency, audit) live in
`gateway.safety`.
"""
