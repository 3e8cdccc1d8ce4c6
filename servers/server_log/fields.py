"""`key: value` fields of a scheduler line, in any order, comma or period separated, as both
engines print them (`#new-seq: 3, #new-token: 771, token usage: 0.00, `, `Running: 2 reqs`,
`GPU KV cache usage: 7.4%.`, the 2024 `#seq: 1. #cached_token: 0.`).

split() returns the fields and whether the whole text was consumed: a line cut in the middle of a
field, or holding text that is no field, is not complete, and the reader counts it as not
understood rather than guessing the rest.
"""
from __future__ import annotations

import math
import re

_VALUE = r"-?\d+(?:\.\d+)?(?:[eE][+-]?\d+)?%?|True|False|None|nan|inf|-inf"
_FIELD = re.compile(
    r"\s*(?P<k>[#A-Za-z][^:,]{0,60}?): (?:(?P<sub>GPU|CPU): )?(?:(?P<v>" + _VALUE + r")"
    r"(?P<u> tokens/s| token/s| tok/s| reqs| req/s| tokens| ms| s)?|(?P<raw>[^,:]{1,80}?))"
    r"(?P<sep>,\s*|\.\s+|\.?\s*$)")


def value(v: str, unit: str | None = None):
    """A field's value: int, float (a percentage as a fraction 0-1), bool or None."""
    if v in ("True", "False"):
        return v == "True"
    if v == "None":
        return None
    if v.endswith("%"):
        x = float(v[:-1]) / 100.0
        return round(x, 10) if math.isfinite(x) else None
    if re.fullmatch(r"-?\d+", v):
        return int(v)
    x = float(v)
    return x if math.isfinite(x) else None


def split(body: str) -> tuple[list[tuple[str, object, bool]], bool]:
    """([(key, value, is_number_like), ...], whole text consumed). A raw (non-number) value is kept
    as its text with is_number_like False. `GPU: x%, CPU: y%` after a key gives `key GPU`, `key CPU`."""
    out: list[tuple[str, object, bool]] = []
    pos, n = 0, len(body)
    last_key = ""
    while pos < n:
        m = _FIELD.match(body, pos)
        if m is None or m.end() == pos:
            return out, body[pos:].strip() == ""
        k = m["k"].strip()
        if k in ("CPU", "GPU") and last_key:          # V0: `Prefix cache hit rate: GPU: x%, CPU: y%`
            k = f"{last_key} {k}"
        elif m["sub"]:
            last_key = k
            k = f"{k} {m['sub']}"
        else:
            last_key = k
        if m["v"] is not None:
            out.append((k, value(m["v"]), True))
        else:
            out.append((k, m["raw"].strip(), False))
        pos = m.end()
    return out, True


def norm_key(k: str) -> str:
    """An unknown field's key as a JSON name: `#foo-bar (x/s)` -> `foo_bar_x_s`."""
    return re.sub(r"[^a-z0-9]+", "_", k.lower()).strip("_") or "field"
