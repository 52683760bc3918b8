"""The ground floor: what several packages share and nothing above it may be needed for.

`calls` (the call contract: `Invocation`, `Stage`, `Proceed`, `ToolHooks`, `Door`), `caller` (who a piece of work
is done for), `redaction` (secrets out of values, texts and log lines), `usage` (model token counts), `tracing`
(OpenTelemetry spans) and `nullable` (a JSON Schema that also accepts null). The kernel imports only the other
ground-floor modules (`gateway.catalog`, `gateway.messages`), never the package root.
"""

__version__ = "0.1.0"
"""The package's version (`gateway.__version__`); kept here so the ground floor can name it."""
