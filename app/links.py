"""One-time sign-in links to the console, as notebook servers print them.

A launcher that knows the admin credential (``legato up``, ``legato console``) calls
:func:`issue`: it draws a random token, writes a *ticket* file
``<var_dir>/console-tickets/<sha256 of the token>`` (0600, in a 0700 folder) holding the issue
time and the credential sealed under the token (XOR with a SHAKE-256 stream of it), and prints
``<console>/?ticket=<token>``. Neither the file alone nor the link alone reveals the credential.

The console calls :func:`redeem` with a token a browser session presents: it claims the ticket by
renaming it (atomic: of two sessions presenting the same link, one wins), deletes it, and returns
the unsealed credential, which the console then checks against the API exactly like a typed
one. A ticket is good once, and only within ``max_age_s`` of being issued; anything else (an
unknown, used, expired or malformed token) gives None.

Standard library only: the console may import nothing of the control plane, and the launcher
imports this module to write what the console reads.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import secrets
from pathlib import Path

TICKETS = "console-tickets"
_TOKEN = re.compile(r"[A-Za-z0-9_-]{32,128}")


def _name(token: str) -> str:
    return hashlib.sha256(token.encode()).hexdigest()


def _stream(token: str, size: int) -> bytes:
    return hashlib.shake_256(b"legato console ticket\0" + token.encode()).digest(size)


def _xor(data: bytes, key: bytes) -> bytes:
    return bytes(a ^ b for a, b in zip(data, key, strict=True))


def issue(var_dir: Path, credential: str, now: float) -> str:
    """Write a one-time ticket for ``credential`` issued at ``now`` (epoch seconds); return the
    token to put in the link's ``ticket`` query parameter."""
    folder = Path(var_dir) / TICKETS
    folder.mkdir(mode=0o700, parents=True, exist_ok=True)
    token = secrets.token_urlsafe(32)
    secret = credential.encode()
    body = {"issued_at": now, "sealed": _xor(secret, _stream(token, len(secret))).hex()}
    fd = os.open(folder / _name(token), os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "w") as fh:
        json.dump(body, fh)
    return token


def link(console_url: str, token: str) -> str:
    """The sign-in link for ``token`` on the console at ``console_url``."""
    return f"{console_url.rstrip('/')}/?ticket={token}"


def redeem(var_dir: Path, token: str, now: float, max_age_s: float) -> str | None:
    """The credential the ticket of ``token`` holds, taken out for good; None when there is no
    such ticket (never issued, already redeemed, malformed) or it is older than ``max_age_s``."""
    if not isinstance(token, str) or not _TOKEN.fullmatch(token):
        return None
    path = Path(var_dir) / TICKETS / _name(token)
    claimed = path.with_name(f"{path.name}.{secrets.token_hex(8)}.claimed")
    try:
        os.rename(path, claimed)
    except OSError:
        return None  # unknown, or another session took it first
    try:
        body = json.loads(claimed.read_text(encoding="utf-8"))
        sealed = bytes.fromhex(body["sealed"])
        fresh = 0 <= now - float(body["issued_at"]) <= max_age_s
    except (OSError, ValueError, KeyError, TypeError):
        return None
    finally:
        claimed.unlink(missing_ok=True)
    if not fresh:
        return None
    try:
        return _xor(sealed, _stream(token, len(sealed))).decode()
    except UnicodeDecodeError:
        return None
