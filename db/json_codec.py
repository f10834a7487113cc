"""How JSON columns are encoded and decoded: orjson, with the standard library as fallback.

Every run's end writes its result document (outputs such as embedding vectors, usage, per-node
figures) on the synchronous caller's path; the standard encoder spends about 0.1 ms of CPU on
a small embedding there, orjson a tenth of that. The stored text is plain JSON either way, so
rows written by either encoder read back the same.

``dumps`` falls back to the standard library for what orjson refuses (integers beyond 64
bits, for example); values neither encoder handles raise the standard library's TypeError.
NaN and infinities become ``null`` under orjson (the standard encoder would write tokens that
are not JSON at all).
"""

from __future__ import annotations

import json
from typing import Any

import orjson

_OPTIONS = orjson.OPT_NON_STR_KEYS  # int keys become strings, as json.dumps does


def dumps(value: Any) -> str:
    """``value`` as JSON text (UTF-8 characters kept, no spaces)."""
    try:
        return orjson.dumps(value, option=_OPTIONS).decode()
    except TypeError:  # orjson.JSONEncodeError is a TypeError
        return json.dumps(value, separators=(",", ":"), ensure_ascii=False)


def loads(text: str | bytes) -> Any:
    """The value of JSON ``text``."""
    return orjson.loads(text)
