"""The HTTP side of the executor: serialization, bodies, credentials, sending, reading, redaction.

Modules: `serialize` (parameter styles), `body` (request bodies), `request` (URL and headers from a
binding), `auth` (credentials, OAuth2 token cache), `client` (retries, redirects, the deadline),
`http1` (the wire: pooled HTTP/1.1 connections, answers parsed by httptools), `reading` (capped
reading, result shaping), `redact` (secrets out of results and logs), `validation` (arguments against
the input schema), `errors`.
"""

from __future__ import annotations

from ..safety.redaction import Redactor

__all__ = ["Redactor"]
