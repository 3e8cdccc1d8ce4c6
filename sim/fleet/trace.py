"""The fleet Trace: the routing table (one row per request: when it reached the router, the
replica it went to, the rule that picked it and every scorer's score) and one ordinary Trace
per replica, saved and loaded as one file (gzip-compressed JSON, the same bytes for the same
fleet, like a Trace file).

Routing table columns: request, tenant, prompt_len, arrival (at the router), replica (0-based,
in worker order), reason, candidates ("0,3": the replicas the rule considered), scores (JSON:
scorer -> one score per replica; "" when not recorded), detail (JSON), reached (arrival at
the replica), released (the response ended at the router: the in-flight count dropped).
Replaying a real fleet adds predicted / predicted_reason (what the router policy would have
picked) beside the replica that served each request.
"""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from ..digest import Digest
from ..jsonout import finite
from ..trace import Trace, _cat_column, _clean, _dtype_name, gzip_json, narrow_int, read_gzip_json
from .routes import MAX_REPLICAS, ROUTE_COLUMNS, routes_frame

FORMAT = "scheduler-lab-fleet"
VERSION = 1


# the routing table's repeated text as categoricals, its small integers as int32 (sim.trace's
# compact columns; ids, scores and details are one per request and stay text)
_CAT_ROUTE_COLUMNS = ("tenant", "reason", "candidates", "predicted_reason")
_INT32_ROUTE_COLUMNS = ("prompt_len", "replica", "served", "predicted")


def compact_routes(routes: pd.DataFrame) -> pd.DataFrame:
    """The routing table with compact columns (the same values; a file of it the same bytes)."""
    out = {}
    for c in routes.columns:
        v = routes[c]
        if c in _CAT_ROUTE_COLUMNS and not isinstance(v.dtype, pd.CategoricalDtype):
            v = pd.Series(_cat_column(v.to_numpy(dtype=object), len(v)), index=routes.index, name=c)
        elif c in _INT32_ROUTE_COLUMNS and v.dtype.kind in "iu":
            v = pd.Series(narrow_int(v.to_numpy()), index=routes.index, name=c)
        out[c] = v
    return pd.DataFrame(out, index=routes.index)


@dataclass
class FleetTrace:
    routes: pd.DataFrame
    replicas: list            # one Trace (or, from a search, a Digest) per replica, in worker order
    meta: dict = field(default_factory=dict)

    def __post_init__(self):
        self.routes = compact_routes(self.routes)

    @property
    def time_unit(self) -> str:
        return self.meta.get("time_unit", "ms")

    @property
    def num_replicas(self) -> int:
        return len(self.replicas)

    @property
    def names(self) -> list[str]:
        return list(self.meta.get("names") or [f"replica {i}" for i in range(len(self.replicas))])

    def to_bytes(self) -> bytes:
        if any(isinstance(t, Digest) for t in self.replicas):
            raise ValueError("a fleet run kept for its metrics only (a Digest) has no per-step tables to save")
        doc = {"format": FORMAT, "version": VERSION, "meta": finite(self.meta),
               "routes": {"columns": list(self.routes.columns),
                          "dtypes": [_dtype_name(t) for t in self.routes.dtypes],
                          "data": [[_clean(v) for v in self.routes[c].tolist()] for c in self.routes.columns]},
               "replicas": [t.to_doc() for t in self.replicas]}
        return gzip_json(doc)

    def save(self, path: str) -> None:
        with open(path, "wb") as f:
            f.write(self.to_bytes())

    @classmethod
    def from_bytes(cls, data: bytes) -> "FleetTrace":
        doc = read_gzip_json(data, "fleet trace")
        if not isinstance(doc, dict) or doc.get("format") != FORMAT:
            raise ValueError("not a fleet trace file: the 'format' field is missing or wrong")
        version = doc.get("version")
        if not isinstance(version, int) or isinstance(version, bool) or not 1 <= version <= VERSION:
            raise ValueError(f"fleet trace version {version!r} is not one this program reads (up to {VERSION})")
        meta, reps, routes = doc.get("meta"), doc.get("replicas"), doc.get("routes")
        if not isinstance(meta, dict) or not isinstance(reps, list) or not isinstance(routes, dict):
            raise ValueError("not a fleet trace file: 'meta', 'replicas' and 'routes' are missing or of the wrong kind")
        if not 1 <= len(reps) <= MAX_REPLICAS:
            raise ValueError(f"a fleet trace holds 1 to {MAX_REPLICAS:,} replicas, not {len(reps):,}")
        _check_fleet_meta(meta, len(reps))
        traces = []
        for i, r in enumerate(reps):
            try:
                traces.append(Trace.from_doc(r))
            except ValueError as e:
                raise ValueError(f"replica {i} of this fleet trace: {e}") from None
        try:
            cols = dict(zip(routes["columns"], routes["data"]))
            missing = [c for c in ROUTE_COLUMNS if c not in cols]
            if missing:
                raise ValueError(missing[0])
            table = routes_frame(cols)
            bad = table["replica"].to_numpy()
            if len(bad) and (bad.min() < 0 or bad.max() >= len(traces)):
                raise ValueError("replica")
            # one row per request each replica served, no more, no fewer (a cut table is no fleet)
            held = [set(map(str, t.requests["request"].tolist())) for t in traces]
            counts = [0] * len(traces)
            for rid, i in zip(map(str, table["request"].tolist()), bad.tolist()):
                if rid not in held[i]:
                    raise ValueError(f"request {rid[:80]!r} is not in replica {i}'s run")
                counts[i] += 1
            if counts != [len(h) for h in held]:
                raise ValueError("its rows are not the replicas' requests")
            for c in ("arrival", "reached", "released"):   # NaN (not yet) or a time on a clock of years
                v = table[c].to_numpy(dtype=float)
                if (np.abs(v[~np.isnan(v)]) > MAX_TIME).any():
                    raise ValueError(f"a time in '{c}' is past {MAX_TIME:g}")
        except (KeyError, TypeError, ValueError, IndexError, OverflowError) as e:
            raise ValueError(f"not a fleet trace file: its routing table does not have the layout "
                             f"FleetTrace.save writes ({e})") from None
        return cls(routes=table, replicas=traces, meta=meta)

    @classmethod
    def load(cls, path: str) -> "FleetTrace":
        with open(path, "rb") as f:
            return cls.from_bytes(f.read())


MAX_TIME = 1e15   # a routing table's times (ms: 30,000 years; a page's scrubber takes no more)


def _check_fleet_meta(meta: dict, replicas: int) -> None:
    """ValueError (plain) for meta fields the page reads that a hand edit broke."""
    names = meta.get("names")
    if names is not None and (not isinstance(names, list) or len(names) != replicas
                              or not all(isinstance(n, str) for n in names)):
        raise ValueError(f"not a fleet trace file: its meta 'names' must be {replicas} texts, one per replica")
    for k in ("settings", "router_defaults"):
        if meta.get(k) is not None and not isinstance(meta[k], dict):
            raise ValueError(f"not a fleet trace file: its meta {k!r} must be a JSON object")


def is_fleet_file(data: bytes) -> bool:
    """Whether `data` looks like a fleet trace file (its first bytes), without parsing it all."""
    import zlib
    try:
        head = zlib.decompressobj(wbits=31).decompress(data[:4096], 256) if data[:2] == b"\x1f\x8b" else data[:256]
    except zlib.error:
        return False
    return FORMAT.encode() in head
