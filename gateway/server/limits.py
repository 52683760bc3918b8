"""The request size limit's error: 413 in OpenAI's error shape.

The limit itself is enforced by the request envelope (`gateway.server.envelope`): a declared `Content-Length` over
the limit is refused before the body is read (one within it is passed on untouched: the server frames the body by
that length); a body of unknown length is counted as it arrives and refused once it passes the limit, so no route
ever buffers more than that.
"""

from __future__ import annotations

from .errors import APIError


class BodyTooLarge(APIError):
    """Refuses a body over the limit; raised from `receive` mid-body, it is answered like any other `APIError`."""

    def __init__(self, limit: int) -> None:
        super().__init__(413, f"The request body is larger than the limit of {limit} bytes.",
                         headers={"Connection": "close"})
