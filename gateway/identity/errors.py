"""What can go wrong with a caller's identity or a user's upstream credential.

* IdentityError
  * TokenRejected: the bearer token is not valid here (401 at a door; the reason says why, never the token)
  * NoClient: a valid token whose claims match no `clients.<name>.claims` (403)
  * AuthServerUnavailable: the authorization server cannot be reached or failed (503; nothing was sent upstream)
  * UserCredentialError: no per-user credential for this call (a tool error; nothing was sent upstream)
    * UserRequired: the caller is no signed-in user, or the server refused to exchange their token
    * InsufficientScope: the user may not have the scopes the operation needs (names them)
    * NotConnected: the user has not connected their account to the api yet (carries the connect link)
"""

from __future__ import annotations

from ..errors import GatewayError


class IdentityError(GatewayError):
    status = 500
    error_type = "server_error"


class TokenRejected(IdentityError):
    """The reason is for the caller (`The token has expired.`); it never quotes the token."""

    status = 401
    error_type = "invalid_token"


class NoClient(IdentityError):
    status = 403
    error_type = "no_client"


class AuthServerUnavailable(IdentityError):
    status = 503
    error_type = "auth_unavailable"


class UserCredentialError(IdentityError):
    status = 403
    error_type = "user_required"


class UserRequired(UserCredentialError):
    error_type = "user_required"


class InsufficientScope(UserCredentialError):
    error_type = "insufficient_scope"

    def __init__(self, message: str, scopes: list[str]) -> None:
        super().__init__(message)
        self.scopes = scopes


class NotConnected(UserCredentialError):
    error_type = "not_connected"

    def __init__(self, message: str, connect_url: str) -> None:
        super().__init__(message)
        self.connect_url = connect_url
