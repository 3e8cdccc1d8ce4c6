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
import threading

_VALUE = r"-?\d+(?:\.\d+)?(?:[eE][+-]?\d+)?%?|True|False|None|nan|inf|-inf"
_FIELD = re.compile(
    r"\s*(?P<k>[#A-Za-z][^:,]{0,60}?): (?:(?P<sub>GPU|CPU): )?(?:(?P<v>" + _VALUE + r")"
    r"(?P<u> tokens/s| token/s| tok/s| reqs| req/s| tokens| ms| s)?|(?P<raw>[^,:]{1,80}?))"
    r"(?P<sep>,\s*|\.\s+|\.?\s*$)")


_INT = re.compile(r"-?\d+")
_FIELD_TAIL = _FIELD.pattern[_FIELD.pattern.index(": (?:(?P<sub>"):]
TEMPLATES_MAX = 16


INT_MAX = 2**53   # a count past this is no count (the Trace's columns, float64 on the way, would round it)


def _big_int(v: str):
    """A whole number of 16 digits or more: itself up to INT_MAX, else None, as NaN and inf are
    (a 170-digit count overflowed the Trace's int64 columns; 5,000 digits are past int()'s limit)."""
    if len(v.lstrip("-")) > 17:
        return None
    n = int(v)
    return n if -INT_MAX <= n <= INT_MAX else None


def value(v: str, unit: str | None = None):
    """A field's value: int, float (a percentage as a fraction 0-1), bool or None (also for a
    whole number past INT_MAX, and NaN or inf)."""
    if v.isdigit():          # the common case first (`v` matched _VALUE: its digits are \d's)
        return int(v) if len(v) < 16 else _big_int(v)
    if v in ("True", "False"):
        return v == "True"
    if v == "None":
        return None
    if v.endswith("%"):
        x = float(v[:-1]) / 100.0
        return round(x, 10) if math.isfinite(x) else None
    if _INT.fullmatch(v):
        return int(v) if len(v) < 16 else _big_int(v)
    x = float(v)
    return x if math.isfinite(x) else None


def _take(groups, last_key: str, out: list) -> str:
    """One matched field (its k, sub, v, raw groups) appended to `out` as split() gives it; the key
    a following `GPU:` / `CPU:` field belongs to."""
    rawk, sub, v, raw = groups
    k = rawk.strip()
    if k in ("CPU", "GPU") and last_key:          # V0: `Prefix cache hit rate: GPU: x%, CPU: y%`
        k = f"{last_key} {k}"
    elif sub:
        last_key = k
        k = f"{k} {sub}"
    else:
        last_key = k
    if v is not None:
        out.append((k, value(v), True))
    else:
        out.append((k, raw.strip(), False))
    return last_key


class Templates:
    """Whole-body regexes, one per sequence of keys a log repeats (a server prints the same keys on
    every line): the fields of a body in one match instead of one match per field. Each field is
    _FIELD with its key written out, inside an atomic group, so it matches exactly where and how
    _FIELD's own match at that position does (a key holds no `:`, so it is the text up to the
    first `:`; the atomic group commits to the first match, as the field-by-field loop does). A
    body that no template matches whole is read field by field, as without templates. A key
    sequence gets a template the second time it is read whole, at most TEMPLATES_MAX per read
    (reset() at the start of each read; one set per thread)."""

    def __init__(self) -> None:
        self.items: list[tuple[re.Pattern, list[int]]] = []
        self.counts: dict[tuple[str, ...], int] = {}
        self.last = 0

    def match(self, body: str):
        """[(k, sub, v, raw) per field] of the template matching `body` whole, or None."""
        items = self.items
        n = len(items)
        for i in range(n):
            j = (self.last + i) % n      # the template of the line before first
            rx, idx = items[j]
            m = rx.fullmatch(body)
            if m is not None:
                self.last = j
                g = m.groups()
                return [(g[k], g[k + 1], g[k + 2], g[k + 4]) for k in idx]
        return None

    def add(self, raw_keys: tuple[str, ...]) -> None:
        if not raw_keys or len(self.items) >= TEMPLATES_MAX:
            return
        c = self.counts.get(raw_keys, 0) + 1
        if len(self.counts) < 4096:
            self.counts[raw_keys] = c
        if c != 2:
            return
        tail = re.sub(r"\(\?P<\w+>", "(", _FIELD_TAIL)    # groups per field: k, sub, v, unit, raw, sep
        rx = re.compile("".join(r"(?>\s*(" + re.escape(k) + ")" + tail + ")" for k in raw_keys))
        self.items.append((rx, [6 * j for j in range(len(raw_keys))]))


_local = threading.local()


def _templates() -> Templates:
    t = getattr(_local, "t", None)
    if t is None:
        t = _local.t = Templates()
    return t


def reset() -> None:
    """Forget this thread's templates (a new log's keys)."""
    _local.t = Templates()


def split(body: str) -> tuple[list[tuple[str, object, bool]], bool]:
    """([(key, value, is_number_like), ...], whole text consumed). A raw (non-number) value is kept
    as its text with is_number_like False. `GPU: x%, CPU: y%` after a key gives `key GPU`, `key CPU`."""
    out: list[tuple[str, object, bool]] = []
    last_key = ""
    tpl = _templates()
    got = tpl.match(body) if body and tpl.items else None
    if got is not None:
        for groups in got:
            last_key = _take(groups, last_key, out)
        return out, True
    pos, n = 0, len(body)
    raw_keys = []
    while pos < n:
        m = _FIELD.match(body, pos)
        if m is None or m.end() == pos:
            return out, body[pos:].strip() == ""
        raw_keys.append(m["k"])
        last_key = _take((m["k"], m["sub"], m["v"], m["raw"]), last_key, out)
        pos = m.end()
    tpl.add(tuple(raw_keys))
    return out, True


def norm_key(k: str) -> str:
    """An unknown field's key as a JSON name: `#foo-bar (x/s)` -> `foo_bar_x_s`."""
    return re.sub(r"[^a-z0-9]+", "_", k.lower()).strip("_") or "field"
