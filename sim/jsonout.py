"""Strict JSON out: every JSON the project writes goes through dumps_strict.

Python's json writes NaN and Infinity for non-finite floats; they are not JSON (RFC 8259), and
browsers, jq and Perfetto refuse a file that holds them. Here they become null, as the Trace
tables already write unknown values. numpy scalars and arrays, and pandas' NA, are written as
the plain values they stand for.
"""
from __future__ import annotations

import json
import math
from typing import Any

import numpy as np


def _default(o: Any):
    """json's hook for what it cannot write itself (numpy scalars and arrays, pandas NA)."""
    if isinstance(o, np.bool_):
        return bool(o)
    if isinstance(o, np.integer):
        return int(o)
    if isinstance(o, np.floating):
        return float(o) if math.isfinite(o) else None
    if isinstance(o, np.ndarray):
        return finite(o.tolist())
    if o is None or type(o).__name__ in ("NAType", "NaTType"):   # pandas' missing markers
        return None
    raise TypeError(f"not JSON serialisable: {type(o).__name__}")


def finite(obj: Any) -> Any:
    """A copy of `obj` (dicts, lists, tuples, scalars) with every NaN or infinite float as None."""
    if isinstance(obj, float):
        return obj if math.isfinite(obj) else None
    if isinstance(obj, dict):
        return {k: finite(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [finite(v) for v in obj]
    if isinstance(obj, np.generic) or type(obj).__name__ in ("NAType", "NaTType"):
        return _default(obj)
    return obj


def dumps_strict(obj: Any, **kw) -> str:
    """json.dumps that never writes NaN or Infinity: non-finite floats become null.

    The common case (nothing non-finite) costs one plain json.dumps; only a document that holds
    a NaN or an infinity is walked and written again."""
    kw.setdefault("default", _default)
    try:
        return json.dumps(obj, allow_nan=False, **kw)
    except ValueError as e:
        if "Out of range float" not in str(e):   # a circular reference, say: not ours to mend
            raise
        return json.dumps(finite(obj), allow_nan=False, **kw)
