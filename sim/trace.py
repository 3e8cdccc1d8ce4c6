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
from .limits import shown
from .kvindex import KvIndex, block_map_scan as _block_map_scan, codes_of, key_like as _key_like  # noqa: F401  (codes_of: for the readers)
from .kvpool import ACQUIRE, EVICTED, HASHED, OP_NAMES, RELEASE

FORMAT = "scheduler-lab-trace"
VERSION = 1   # the file's layout; the compact dtypes below are how a loaded table is held, not what the file says
TABLES = ("requests", "steps", "batch", "events", "kv", "counters")

# column -> dtype for each table; sources fill what they know. Compact, so that a long run's
# memory grows with what its steps hold, not with Python objects:
# - "cat": text as a pandas Categorical, its categories the values seen, sorted (so a groupby or
#   a sort over the column orders as over the text); unknown is "";
# - "int32" / "Int32" (nullable): int32 when every value fits, else int64 (values never change);
# - the rest as named. A file names the plain dtypes (object, int64, Int64): the same bytes as
#   before the compact columns, which older programs read.
SCHEMA: dict[str, dict[str, str]] = {
    "requests": {
        "request": "cat", "tenant": "cat", "priority": "int64", "prompt_len": "Int32", "max_tokens": "Int32",
        "arrival_step": "Int32", "arrival_time": "float64",
        "first_scheduled_step": "Int32", "first_scheduled_time": "float64",
        "first_token_step": "Int32", "first_token_time": "float64",
        "finish_step": "Int32", "finish_time": "float64",
        "output_tokens": "Int32", "cached_tokens": "Int32", "preemptions": "int32",
        "recomputed_tokens": "int32", "rejected": "bool", "finish_reason": "cat", "slot": "Int32",
    },
    "steps": {
        "step": "int32", "start": "float64", "end": "float64", "num_tokens": "int32",
        "prefill_tokens": "int32", "decode_tokens": "int32", "recompute_tokens": "int32",
        "num_seqs": "int32", "running": "int32", "waiting": "int32", "free_blocks": "Int32",
        "free_blocks_after_schedule": "Int32", "cached_free_blocks": "Int32", "preempted": "int32",
        "finished": "int32", "arrived": "int32", "idle": "bool", "swap_bytes": "float64",
    },
    "batch": {
        "step": "int32", "request": "cat", "slot": "Int32", "kind": "cat", "tokens": "int32",
        "computed_before": "Int32", "sampled": "bool",
    },
    "events": {"step": "int32", "time": "float64", "request": "cat", "kind": "cat", "detail": "cat"},
    "kv": {"step": "int32", "block": "int32", "request": "cat", "op": "cat"},
    "counters": {"step": "int32", "tenant": "cat", "value": "float64"},
}
_INT32 = np.iinfo(np.int32)
_FILE_DTYPE = {"cat": "object", "int32": "int64", "Int32": "Int64"}   # what a file says of a compact column


def empty_table(name: str) -> pd.DataFrame:
    return table_from_columns(name, {c: [] for c in SCHEMA[name]})


def _pd_dtype(t: str):
    return object if t in ("str", "cat", "object") else t


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


def narrow_int(a: np.ndarray) -> np.ndarray:
    """An integer column as int32 when every value fits, else int64 (the values as they are)."""
    if a.dtype == np.int32:
        return a
    if len(a) and (a.min() < _INT32.min or a.max() > _INT32.max):
        return a.astype(np.int64, copy=False)
    return a.astype(np.int32)


def _int_column(v, n: int) -> np.ndarray:
    if isinstance(v, np.ndarray) and v.dtype.kind in "iu":
        return narrow_int(v)
    return narrow_int(as_array(v, np.int64) if n else np.zeros(0, dtype=np.int64))


def _nullable_int(v, n: int) -> pd.arrays.IntegerArray:
    if isinstance(v, np.ndarray) and v.dtype.kind in "iu":
        return pd.arrays.IntegerArray(narrow_int(v), np.zeros(len(v), dtype=bool))
    if isinstance(v, pd.Series):
        v = v.array
    if isinstance(v, pd.arrays.IntegerArray):
        data = v.to_numpy(dtype=np.int64, na_value=0)
        return pd.arrays.IntegerArray(narrow_int(data), np.asarray(v.isna(), dtype=bool))
    a = as_array(v, np.float64) if n else np.zeros(0)
    missing = np.isnan(a)
    if not (np.abs(a[~missing]) < 2.0**63).all():   # an infinity or 1e300 would cast to garbage
        raise ValueError("a whole-number column holds a value past 2**63")
    return pd.arrays.IntegerArray(narrow_int(np.where(missing, 0, a).astype(np.int64)), missing)


def categorical(codes, names) -> pd.Categorical:
    """A text column from integer codes into `names` (any order, duplicates and unused names
    allowed; code -1 is unknown, shown as ""): its categories the names used, sorted."""
    codes = np.asarray(codes)
    names = np.asarray(names, dtype=object)
    if codes.dtype.kind not in "iu":
        codes = codes.astype(np.int64)
    if len(codes) and codes.min() < 0:   # unknown is ""; a code past the names for it
        names = np.append(names, "")
        codes = np.where(codes < 0, len(names) - 1, codes)
    used = np.flatnonzero(np.bincount(codes, minlength=len(names)) > 0) if len(codes) else np.zeros(0, dtype=np.int64)
    try:
        cats, inv = np.unique(names[used], return_inverse=True)   # sorted as Python sorts the text
    except TypeError:   # values that do not sort together (text and numbers): first seen order
        inv, cats = pd.factorize(names[used])
    # the codes' lookup in the narrowest type that holds them (a long column's new codes are its
    # biggest temporary: 52M rows at a million requests)
    lut = np.full(len(names), -1, dtype=np.int8 if len(cats) < 127 else np.int32)
    lut[used] = inv
    dtype = pd.CategoricalDtype(pd.Index(np.asarray(cats, dtype=object), dtype=object))
    if not len(codes):
        return pd.Categorical.from_codes(np.zeros(0, dtype=np.int8), dtype=dtype)
    if len(used) == len(names) and np.array_equal(lut, np.arange(len(names))) and codes.dtype == lut.dtype:
        return pd.Categorical.from_codes(codes, dtype=dtype)   # names all used, already sorted: the codes as they are
    return pd.Categorical.from_codes(lut[codes], dtype=dtype)


def _cat_column(v, n: int) -> pd.Categorical:
    if isinstance(v, pd.Series):
        v = v.array
    if isinstance(v, pd.Categorical):
        return categorical(v.codes, v.categories.to_numpy(dtype=object))
    arr = np.empty(n, dtype=object)
    arr[:] = v
    unknown = pd.isna(arr)
    if unknown.any():
        arr[unknown] = ""
    codes, names = pd.factorize(arr)   # hashed, first seen order; categorical() sorts the few names
    return categorical(codes, names)


def table_from_columns(name: str, cols: dict) -> pd.DataFrame:
    """Build a table with the schema's dtypes; missing columns are all-unknown. A column may come
    as a list, a numpy array, a pandas array or Series (text also as a pd.Categorical). Columns
    the schema does not name follow the schema's, in their order, as given (arrays) or inferred (lists)."""
    n = len(next(iter(cols.values()))) if cols else 0
    out = {}
    for c, t in SCHEMA[name].items():
        v = cols.get(c)
        if v is None:
            if t in ("Int64", "Int32"):  # all unknown, without converting n Nones
                out[c] = pd.arrays.IntegerArray(np.zeros(n, dtype=np.int32 if t == "Int32" else np.int64),
                                                np.ones(n, dtype=bool))
                continue
            if t == "cat":
                out[c] = categorical(np.zeros(n, dtype=np.int8), [""])
                continue
            v = [None] * n
        if t == "cat":
            out[c] = _cat_column(v, n)
        elif t == "str":
            # unknown (None or NaN) is "", kept as object dtype (pandas 3 would infer its str dtype)
            arr = np.empty(n, dtype=object)
            arr[:] = v
            unknown = pd.isna(arr)
            if unknown.any():
                arr[unknown] = ""
            out[c] = pd.Series(arr, dtype=object, copy=False)
        elif t == "Int32":
            out[c] = _nullable_int(v, n)
        elif t == "int32":
            out[c] = _int_column(v, n)
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


def plain_table(df: pd.DataFrame) -> pd.DataFrame:
    """`df` with the dtypes tables had before the compact columns: text as object, int32 as
    int64, Int32 as Int64 (the same values). For a check against the old layout."""
    out = {}
    for c in df.columns:
        v = df[c]
        if isinstance(v.dtype, pd.CategoricalDtype):
            v = pd.Series(v.to_numpy(dtype=object), index=df.index, dtype=object)
        elif str(v.dtype) == "int32":
            v = v.astype(np.int64)
        elif str(v.dtype) == "Int32":
            v = v.astype("Int64")
        out[c] = v
    return pd.DataFrame(out, index=df.index)


@dataclass
class Trace:
    requests: pd.DataFrame
    steps: pd.DataFrame
    batch: pd.DataFrame
    events: pd.DataFrame
    kv: pd.DataFrame
    counters: pd.DataFrame = field(default_factory=lambda: empty_table("counters"))
    meta: dict = field(default_factory=dict)
    # what block_map and batch_at keep between calls, per table object; not a field of the trace
    _memo: dict = field(default_factory=dict, init=False, repr=False, compare=False)

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

    @property
    def usable_blocks(self) -> int:
        """The blocks requests can hold: all but block 0, vLLM's null block, unless the source says
        it kept none back (vLLM 0.8.2 and before: meta "null_block" False)."""
        return max(self.num_blocks - (1 if self.meta.get("null_block", True) else 0), 0)

    # -- the block map ------------------------------------------------------------------
    def block_map(self, step: int) -> tuple[np.ndarray, np.ndarray, list[list[str]]]:
        """KV state at the end of `step`: (holders count per block, cached flag per block,
        holder request ids per block). Block 0 is the null block. Rebuilt from the kv log: from
        the nearest checkpoint before `step` when the log is in step order (sim.kvindex), else
        by a pass over the whole log."""
        n = self.num_blocks
        kv = self._cached("kv_in_pool", self.kv, lambda: _in_pool(self.kv, n))
        if n == 0 or kv.empty:
            return np.zeros(n, dtype=np.int64), np.zeros(n, dtype=bool), [[] for _ in range(n)]
        index = self._cached("kv", kv, lambda: KvIndex.of(kv))
        if index is not None:
            return index.block_map(step, n)
        return _block_map_scan(kv, step, n)

    def batch_at(self, step: int) -> pd.DataFrame:
        b = self.batch
        st = b["step"].to_numpy()
        whole = isinstance(step, (int, np.integer)) or (isinstance(step, float) and step.is_integer())
        if whole and self._cached("batch", b, lambda: bool(len(st)) and bool(np.all(st[1:] >= st[:-1]))):
            key = _key_like(st, step)
            lo, hi = np.searchsorted(st, key, side="left"), np.searchsorted(st, key, side="right")
            return b.iloc[int(lo):int(hi)]   # rows in step order: a slice, not a pass over every row
        return b[st == step]

    def kv_index(self) -> KvIndex | None:
        """The kv log's index with checkpoints (sim.kvindex), made once; None when the log is not
        in step order."""
        kv = self._cached("kv_in_pool", self.kv, lambda: _in_pool(self.kv, self.num_blocks))
        return self._cached("kv", kv, lambda: KvIndex.of(kv))

    def _cached(self, what: str, table: pd.DataFrame, make):
        """`make()` once per table object (a page that swaps a table in gets a fresh one). The memo
        holds the table it was made from: an id() alone could be handed on to a later table."""
        hit = self._memo.get(what)
        if hit is None or hit[0] is not table or hit[1] != len(table):
            hit = self._memo[what] = (table, len(table), make())
        return hit[2]

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
        _check_meta(meta)
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


def _in_pool(kv: pd.DataFrame, n: int) -> pd.DataFrame:
    """The kv log's rows of blocks 0..n-1 (all of them, as a rule): a damaged recording's block
    id of 2**62 would otherwise size the block map's arrays (exabytes)."""
    b = kv["block"].to_numpy() if len(kv) else np.zeros(0, dtype=np.int64)
    if n <= 0 or not len(b) or (b.min() >= 0 and b.max() < n):   # (n 0: a pool of unknown size)
        return kv
    return kv[(b >= 0) & (b < n)]


# the settings a trace's meta.config holds that the pages compute with: whole numbers when given
_META_COUNTS = ("num_gpu_blocks", "block_size", "max_num_seqs", "max_num_batched_tokens", "max_model_len",
                "long_prefill_token_threshold")


def _check_meta(meta: dict) -> None:
    """ValueError (plain) for a hand-edited meta the pages would trip on: a config that is no
    object, or one of its counts that is no whole number."""
    cfg = meta.get("config")
    if cfg is None:
        return
    if not isinstance(cfg, dict):
        raise ValueError("not a trace file: its meta 'config' must be a JSON object")
    for k in _META_COUNTS:
        v = cfg.get(k)
        if v is not None and (isinstance(v, bool) or not isinstance(v, int) or not 0 <= v <= 2**53):
            raise ValueError(f"not a trace file: its config's {k} must be a whole number, not {shown(v)}")


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
    except json.JSONDecodeError as e:   # said as a reader would: cut short, or damaged where
        said = "it ends early (cut short?)" if e.pos >= len(raw.rstrip()) else f"its JSON is damaged at byte {e.pos:,}"
        raise ValueError(f"not a {what} file (expected gzip-compressed JSON): {said}") from None
    except (OSError, EOFError, ValueError, UnicodeDecodeError, zlib.error) as e:
        raise ValueError(f"not a {what} file (expected gzip-compressed JSON): {e}") from None
    except RecursionError:
        raise ValueError(f"not a {what} file: its JSON nests lists or objects too deep") from None


def _gunzip(data: bytes) -> bytes:
    d = zlib.decompressobj(wbits=31)
    out = d.decompress(data, MAX_TRACE_UNZIPPED)
    if d.unconsumed_tail:
        raise ValueError(f"it unzips to more than {MAX_TRACE_UNZIPPED >> 30} GiB")
    if not d.eof:   # the stream stops before its end (its checksum unread): a file cut short
        raise ValueError("it is cut short (the gzip stream does not end)")
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
    """A column's dtype as a file names it: the plain dtypes (text is object, int32 is int64)."""
    name = str(t)
    if name in ("str", "string", "object", "category"):
        return "object"
    return {"int32": "int64", "Int32": "Int64"}.get(name, name)


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


def kv_table(steps, blocks, reqs, ops) -> pd.DataFrame:
    """The kv table from its columns: steps and blocks (ints), request ids (text, or a
    Categorical), ops (sim.kvpool's op numbers)."""
    names = np.array(["", OP_NAMES[ACQUIRE], OP_NAMES[RELEASE], OP_NAMES[HASHED], OP_NAMES[EVICTED]], dtype=object)
    ops = np.asarray(ops) if len(ops) else np.zeros(0, dtype=np.int8)
    return table_from_columns("kv", {"step": steps, "block": blocks, "request": reqs, "op": categorical(ops, names)})
