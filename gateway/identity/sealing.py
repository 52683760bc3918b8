"""The key users' connection tokens are stored encrypted with: `GATEWAY_CONNECTIONS_KEY`.

Apart from `gateway.identity.connections` (which imports the HTTP client its token requests go out on) so that a
door can check the key when it opens, before anything builds the connections themselves.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import TYPE_CHECKING

from ..errors import ApiSetupError

if TYPE_CHECKING:  # cryptography is imported when a key is read, not at every start-up
    from cryptography.fernet import MultiFernet

KEY_VARIABLE = "GATEWAY_CONNECTIONS_KEY"
MAKE_A_KEY = "make one with `python -c 'from cryptography.fernet import Fernet; print(Fernet.generate_key().decode())'`"
"""How to make a key, said wherever one is missing or wrong: the docs' reader has none yet."""


def cipher_from_environment(environ: Mapping[str, str] = os.environ) -> MultiFernet | None:
    """The Fernet keys of `GATEWAY_CONNECTIONS_KEY` (one, or several separated by commas: the first encrypts, all
    decrypt); None when it is unset; ApiSetupError when it holds something else."""
    keys = [key.strip() for key in environ.get(KEY_VARIABLE, "").split(",") if key.strip()]
    if not keys:
        return None
    from cryptography.fernet import Fernet, MultiFernet

    try:
        return MultiFernet([Fernet(key) for key in keys])
    except ValueError:
        raise ApiSetupError(f"{KEY_VARIABLE} must hold Fernet keys (32 url-safe base64 bytes each, comma-separated;"
                            f" {MAKE_A_KEY})") from None
