"""The one Trace: what every source produces (simulator, engine, llama-server log) and every
page consumes.

Tables (pandas), one row per ...
- requests: request (arrival, first scheduled, first token, finish, preemptions, tenant, ...)
- steps:    model call / scheduler iteration (times, token mix, queue lengths, free blocks)
- batch:    (step, request) entry of a forward pass (slot, kind, tokens, computed before)
- events:   arrive / admit / resume / preempt / swap_out / swap_in / finish / reject / cancel ...
- kv:       KV block ownership change (step, block, request, op), from which the block map at
            any step is rebuilt without re-running the source
- counters: per-tenant fairness counters over steps (only for policies that keep them)

Unknown values are NaN/<NA>, never invented. `meta` says where the trace came from
(source), its time unit, and the config. A source that cannot see everything (a server log, which
logs some steps only) lists the spans of its clock it knows nothing about in meta["unknown_spans"]
(Trace.unknown_spans): unknown, not idle. Absent: none (every other source).

One file: gzip-compressed JSON with a fixed layout (sorted keys, mtime 0), so the same
trace always gives the same bytes.
"""
from __future__ import annotations

import gzip
import io
import json
import math
import zlib
from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from .jsonout import dumps_strict, finite
from .kvpool import ACQUIRE, EVICTED, HASHED, OP_NAMES, RELEASE

FORMAT = "scheduler-lab-trace"
VERSION = 1
TABLES = ("requests", "steps", "batch", "events", "kv", "counters")

# column -> dtype for each table; sources fill what they know
SCHEMA: dict[str, dict[str, str]] = {
    "requests": {
        "request": "str", "tenant": "str", "priority": "int64", "prompt_len": "Int64", "max_tokens": "Int64",
        "arrival_step": "Int64", "arrival_time": "float64",
        "first_scheduled_step": "Int64", "first_scheduled_time": "float64",
        "first_token_step": "Int64", "first_token_time": "float64",
        "finish_step": "Int64", "finish_time": "float64",
        "output_tokens": "Int64", "cached_tokens": "Int64", "preemptions": "int64",
        "recomputed_tokens": "int64", "rejected": "bool", "finish_reason": "str", "slot": "Int64",
    },
    "steps": {
        "step": "int64", "start": "float64", "end": "float64", "num_tokens": "int64",
        "prefill_tokens": "int64", "decode_tokens": "int64", "recompute_tokens": "int64",
        "num_seqs": "int64", "running": "int64", "waiting": "int64", "free_blocks": "Int64",
        "free_blocks_after_schedule": "Int64", "cached_free_blocks": "Int64", "preempted": "int64",
        "finished": "int64", "arrived": "int64", "idle": "bool", "swap_bytes": "float64",
    },
    "batch": {
        "step": "int64", "request": "str", "slot": "Int64", "kind": "str", "tokens": "int64",
        "computed_before": "Int64", "sampled": "bool",
    },
    "events": {"step": "int64", "time": "float64", "request": "str", "kind": "str", "detail": "str"},
    "kv": {"step": "int64", "block": "int64", "request": "str", "op": "str"},
    "counters": {"step": "int64", "tenant": "str", "value": "float64"},
}


def empty_table(name: str) -> pd.DataFrame:
    return pd.DataFrame({c: pd.Series([], dtype=_pd_dtype(t)) for c, t in SCHEMA[name].items()})


def _pd_dtype(t: str):
    return object if t == "str" else t


def as_array(values, dtype) -> np.ndarray:
    """np.asarray(values, dtype) for a column. A plain list goes through np.fromiter, the same
    values without asarray's walk over every element to find the common dtype and shape (several
    times the work, on the long lists a run or a log makes)."""
    if type(values) in (list, tuple) and dtype is not object:
        try:
            return np.fromiter(values, dtype=dtype, count=len(values))
        except (TypeError, ValueError):
            pass
    return np.asarray(values, dtype=dtype)


def table_from_columns(name: str, cols: dict) -> pd.DataFrame:
    """Build a table with the schema's dtypes; missing columns are all-unknown. Columns the
    schema does not name follow the schema's, in their order, as given (arrays) or inferred (lists)."""
    n = len(next(iter(cols.values()))) if cols else 0
    out = {}
    for c, t in SCHEMA[name].items():
        v = cols.get(c)
        if v is None:
            if t == "Int64":  # all unknown, without converting n Nones
                out[c] = pd.arrays.IntegerArray(np.zeros(n, dtype=np.int64), np.ones(n, dtype=bool))
                continue
            v = [None] * n
        if t == "str":
            # unknown (None or NaN) is "", kept as object dtype (pandas 3 would infer its str dtype)
            arr = np.empty(n, dtype=object)
            arr[:] = v
            unknown = pd.isna(arr)
            if unknown.any():
                arr[unknown] = ""
            out[c] = pd.Series(arr, dtype=object, copy=False)
        elif t == "Int64":
            a = as_array(v, np.float64) if n else np.zeros(0)
            missing = np.isnan(a)
            out[c] = pd.arrays.IntegerArray(np.where(missing, 0, a).astype(np.int64), missing)
        elif t == "float64":
            out[c] = as_array(v, np.float64) if n else np.zeros(0)
        else:
            out[c] = as_array(v, t) if n else np.zeros(0, dtype=t)
    out.update((c, v) for c, v in cols.items() if c not in SCHEMA[name])
    # no copy: the columns were built above or handed over by their maker (a copy doubled a long
    # run's batch table at its peak)
    return pd.DataFrame(out, copy=False)


@dataclass
class Trace:
    requests: pd.DataFrame
    steps: pd.DataFrame
    batch: pd.DataFrame
    events: pd.DataFrame
    kv: pd.DataFrame
    counters: pd.DataFrame = field(default_factory=lambda: empty_table("counters"))
    meta: dict = field(default_factory=dict)

    # -- basic facts ----------------------------------------------------------------
    @property
    def source(self) -> str:
        return self.meta.get("source", "unknown")

    @property
    def time_unit(self) -> str:
        return self.meta.get("time_unit", "steps")

    @property
    def num_steps(self) -> int:
        return int(len(self.steps))

    @property
    def unknown_spans(self) -> list[tuple[float, float]]:
        """[(start, end)] of the trace's clock where the source says nothing (not idle: unknown)."""
        return [(float(a), float(b)) for a, b in self.meta.get("unknown_spans") or ()]

    @property
    def num_blocks(self) -> int:
        return int(self.meta.get("num_blocks") or 0)

    # -- the block map ------------------------------------------------------------------
    def block_map(self, step: int) -> tuple[np.ndarray, np.ndarray, list[list[str]]]:
        """KV state at the end of `step`: (holders count per block, cached flag per block,
        holder request ids per block). Block 0 is the null block. Rebuilt from the kv log."""
        n = self.num_blocks
        holders: list[list[str]] = [[] for _ in range(n)]
        cached = np.zeros(n, dtype=bool)
        kv = self.kv
        if n == 0 or kv.empty:
            return np.zeros(n, dtype=np.int64), cached, holders
        upto = kv[kv["step"].to_numpy() <= step]
        op = upto["op"].to_numpy()
        own = upto[(op == "acquire") | (op == "release")]
        sign = np.where(own["op"].to_numpy() == "acquire", 1, -1)
        net = pd.DataFrame({"block": own["block"].to_numpy(), "request": own["request"].to_numpy(), "s": sign})
        net = net.groupby(["block", "request"], sort=True)["s"].sum()
        for (b, r), s in net.items():
            if s > 0:
                holders[int(b)].append(str(r))
        flags = upto[(op == "cached") | (op == "evicted")]
        if len(flags):
            last = flags.groupby("block", sort=False)["op"].last()
            cached[last.index.to_numpy(dtype=np.int64)] = last.to_numpy() == "cached"
        count = np.fromiter((len(h) for h in holders), dtype=np.int64, count=n)
        return count, cached, holders

    def batch_at(self, step: int) -> pd.DataFrame:
        b = self.batch
        return b[b["step"].to_numpy() == step]

    # -- save / load ----------------------------------------------------------------------
    def to_doc(self) -> dict:
        """The trace as the JSON document its file holds (a fleet's file holds several)."""
        return {"format": FORMAT, "version": VERSION, "meta": finite(self.meta),  # a NaN in meta is null, never NaN
                "tables": {name: _table_doc(getattr(self, name)) for name in TABLES}}

    def to_bytes(self) -> bytes:
        return gzip_json(self.to_doc())

    def save(self, path: str) -> None:
        with open(path, "wb") as f:
            f.write(self.to_bytes())

    @classmethod
    def from_bytes(cls, data: bytes) -> "Trace":
        return cls.from_doc(read_gzip_json(data, "trace"))

    @classmethod
    def from_doc(cls, doc) -> "Trace":
        """A trace from its JSON document; ValueError (plain) when it is not one."""
        if not isinstance(doc, dict) or doc.get("format") != FORMAT:
            raise ValueError("not a trace file: the 'format' field is missing or wrong")
        version = doc.get("version", 0)
        if not isinstance(version, int) or isinstance(version, bool):
            raise ValueError("not a trace file: its 'version' is not a whole number")
        if version > VERSION:
            raise ValueError(f"trace version {version:,} is newer than this program ({VERSION})")
        tables_doc, meta = doc.get("tables"), doc.get("meta", {})
        if not isinstance(tables_doc, dict) or not isinstance(meta, dict):
            raise ValueError("not a trace file: 'tables' and 'meta' must be JSON objects")
        try:
            tables = {name: _table_from_doc(name, tables_doc.get(name)) for name in TABLES}
        except (KeyError, TypeError, ValueError, IndexError, OverflowError) as e:
            # a damaged or hand-edited table: say which rule broke, not where in pandas it did
            raise ValueError(f"not a trace file: a table does not have the layout Trace.save writes "
                             f"({type(e).__name__})") from None
        return cls(meta=meta, **tables)

    @classmethod
    def load(cls, path: str) -> "Trace":
        with open(path, "rb") as f:
            return cls.from_bytes(f.read())


MAX_TRACE_UNZIPPED = 4 << 30   # a trace file unzips to at most 4 GiB (a zip bomb stops there)


def gzip_json(doc: dict) -> bytes:
    """`doc` as the trace files' bytes: strict JSON, sorted keys, gzip with mtime 0 (the same
    document always gives the same bytes)."""
    raw = dumps_strict(doc, sort_keys=True, separators=(",", ":"), default=_json_default).encode()
    buf = io.BytesIO()
    with gzip.GzipFile(fileobj=buf, mode="wb", mtime=0, compresslevel=6) as gz:
        gz.write(raw)
    return buf.getvalue()


def read_gzip_json(data: bytes, what: str):
    """The JSON document of a (gzip-compressed) file; ValueError naming `what` it is not."""
    try:
        raw = _gunzip(data) if data[:2] == b"\x1f\x8b" else data
        return json.loads(raw)
    except (OSError, EOFError, ValueError, UnicodeDecodeError, zlib.error) as e:
        raise ValueError(f"not a {what} file (expected gzip-compressed JSON): {e}") from None
    except RecursionError:
        raise ValueError(f"not a {what} file: its JSON nests lists or objects too deep") from None


def _gunzip(data: bytes) -> bytes:
    d = zlib.decompressobj(wbits=31)
    out = d.decompress(data, MAX_TRACE_UNZIPPED)
    if d.unconsumed_tail:
        raise ValueError(f"it unzips to more than {MAX_TRACE_UNZIPPED >> 30} GiB")
    return out


def _json_default(o):
    if isinstance(o, (np.integer,)):
        return int(o)
    if isinstance(o, (np.floating,)):
        return None if np.isnan(o) else float(o)
    if isinstance(o, np.bool_):
        return bool(o)
    if isinstance(o, np.ndarray):
        return o.tolist()
    raise TypeError(f"not JSON serialisable: {type(o)}")


def _clean(v):
    if v is pd.NA or v is None:
        return None
    if isinstance(v, float) and math.isnan(v):
        return None
    return v


def _dtype_name(t) -> str:
    name = str(t)
    return "object" if name in ("str", "string", "object") else name


def _table_doc(df: pd.DataFrame) -> dict:
    return {"columns": list(df.columns), "dtypes": [_dtype_name(t) for t in df.dtypes],
            "data": [[_clean(v) for v in df[c].tolist()] for c in df.columns]}


def _table_from_doc(name: str, doc: dict | None) -> pd.DataFrame:
    if not doc:
        return empty_table(name)
    cols = dict(zip(doc["columns"], doc["data"]))
    df = table_from_columns(name, {c: v for c, v in cols.items() if c in SCHEMA[name]})
    for c, t, v in zip(doc["columns"], doc["dtypes"], doc["data"]):
        if c not in SCHEMA[name]:
            df[c] = pd.Series(v, dtype=_pd_dtype(t) if t in ("Int64", "float64", "int64", "bool") else object)
    return df


def kv_table(steps: list[int], blocks: list[int], reqs: list[str], ops: list[int]) -> pd.DataFrame:
    names = np.array(["", OP_NAMES[ACQUIRE], OP_NAMES[RELEASE], OP_NAMES[HASHED], OP_NAMES[EVICTED]], dtype=object)
    return pd.DataFrame({
        "step": np.asarray(steps, dtype=np.int64),
        "block": np.asarray(blocks, dtype=np.int64),
        "request": pd.Series(reqs, dtype=object),
        "op": pd.Series(names[np.asarray(ops, dtype=np.int64)] if ops else [], dtype=object),
    })
