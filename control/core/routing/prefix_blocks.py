"""Prefix block hashes of a prompt's token ids: what a request carries so routing can find the
replica whose KV cache probably holds its prefix (:mod:`prefix_index`).

A prompt of ``n`` tokens has ``n // block_tokens`` whole blocks; a trailing partial block gets
no hash (it is no reusable unit: the next prompt rarely continues it token for token). Hashes
are chained, as in vLLM's prefix cache and the Mooncake trace format: block ``k``'s hash covers
blocks ``0..k``, so two prompts share block ``k``'s hash only when they share every token up to
its end, and "leading blocks present" is exactly "prefix held".

Hashes are 63-bit integers from BLAKE2b, the same in every process and on every run (Python's
own ``hash`` of a string is salted per process; the gateway and the twin must agree).
"""

from __future__ import annotations

import hashlib
from array import array
from collections.abc import Sequence

_MASK = (1 << 63) - 1


def block_hashes(token_ids: Sequence[int], block_tokens: int) -> tuple[int, ...]:
    """One chained hash per whole block of ``block_tokens`` leading tokens of ``token_ids``.

    Raises ValueError for ``block_tokens < 1``. Pure: equal inputs give equal hashes."""
    if block_tokens < 1:
        raise ValueError(f"block_tokens must be >= 1, got {block_tokens!r}")
    out: list[int] = []
    chain = b""
    for end in range(block_tokens, len(token_ids) + 1, block_tokens):
        block = array("q", token_ids[end - block_tokens : end]).tobytes()
        chain = hashlib.blake2b(chain + block, digest_size=8).digest()
        out.append(int.from_bytes(chain, "little") & _MASK)
    return tuple(out)
