"""The HTTP side of the executor: serialization, bodies, credentials, sending, reading, redaction.

Modules: `serialize` (parameter styles), `body` (request bodies), `request` (URL and headers from a
binding), `auth` (credentials, OAuth2 token cache), `client` (retries, redirects, the deadline),
`library` (the pyreqwest client and its errors), `wire` (the executor's requests on it), `transport` (the
httpx transport of the providers and OAuth, bodies capped), `reading` (capped
reading, result shaping), `redact` (secrets out of results and logs), `validation` (arguments against
the input schema), `errors`.
"""

from __future__ import annotations

from ..kernel.redaction import Redactor

__all__ = ["Redactor"]
