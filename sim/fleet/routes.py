"""The routing table: one row per request, what the router decided for it (see
sim/fleet/trace.py for the columns)."""
from __future__ import annotations

import numpy as np
import pandas as pd

MAX_REPLICAS = 1024
ROUTE_COLUMNS = ("request", "tenant", "prompt_len", "arrival", "replica", "reason", "candidates", "scores", "detail",
                 "reached", "released")


def _whole(values) -> np.ndarray:
    """Whole numbers as int64; ValueError for 1.5 (numpy would cut it to 1 without a word)."""
    out = np.asarray(values, dtype=np.int64)
    if out.dtype == np.int64 and len(out) and not np.array_equal(out, np.asarray(values, dtype=np.float64)):
        raise ValueError("a whole number column holds fractions")
    return out


def routes_frame(rows: dict) -> pd.DataFrame:
    """The routing table, its columns typed (ids, reasons and score texts as str)."""
    out = pd.DataFrame({
        "request": np.asarray(rows["request"], dtype=object), "tenant": np.asarray(rows["tenant"], dtype=object),
        "prompt_len": _whole(rows["prompt_len"]),
        "arrival": np.asarray(rows["arrival"], dtype=np.float64),
        "replica": _whole(rows["replica"]), "reason": np.asarray(rows["reason"], dtype=object),
        "candidates": np.asarray(rows["candidates"], dtype=object),
        "scores": np.asarray(rows["scores"], dtype=object), "detail": np.asarray(rows["detail"], dtype=object),
        "reached": np.asarray(rows["reached"], dtype=np.float64),
        "released": np.asarray(rows["released"], dtype=np.float64)})
    for k in ("served", "predicted", "predicted_reason"):
        if k in rows:
            out[k] = np.asarray(rows[k], dtype=object) if k == "predicted_reason" else _whole(rows[k])
    return out
