"""Public request traces as workloads: the Azure LLM inference traces, BurstGPT and Mooncake.

    kind = sniff(data)                         # "azure" | "burstgpt" | "mooncake" | None, by content
    wl = read_trace(data, "conv.csv", limit=1000, rate_scale=2.0, progress=cb)
    wl.source                                  # what was read: format, rows, rows left out, clock

The formats, as their publishers document them:

- **Azure LLM inference traces** (Azure/AzurePublicDataset, 2023 and 2024): CSV with the header
  `TIMESTAMP,ContextTokens,GeneratedTokens`; TIMESTAMP is a wall-clock time with 100 ns digits
  (`2023-11-16 18:15:46.6805900`).
- **BurstGPT** (HPMLL/BurstGPT): CSV `Timestamp,Model,Request tokens,Response tokens,Total
  tokens,Log Type` (later files add `Session ID,Elapsed time`); Timestamp in seconds from the
  first day's midnight. A row with 0 response tokens is a failed request (the publishers' own
  "without_fails" files drop them): it produced nothing to schedule, so it is left out and counted.
- **Mooncake** (kvcache-ai/Mooncake, FAST'25 traces): JSON lines `{"timestamp": ms,
  "input_length", "output_length", "hash_ids": [...]}`; a hash id names one 512-token block of
  the prompt, and equal ids are equal blocks. The ids become the requests' `prompt_blocks`
  (sim.workload.Request), so requests that share ids share a prompt prefix and the simulator's
  prefix cache sees the trace's reuse. The last block may be partial; a prompt longer than its
  ids cover gets tokens of its own for the rest.

Every format: arrival_time is the row's time in milliseconds after the earliest row (the first
one, in these sorted files), divided by `rate_scale`; rows whose prompt or output count is 0 are
left out and counted in `source["left_out"]`. The times are the cost model's milliseconds, as in
the llama-server log's re-simulation, so a trace runs under a timed cost model: DEFAULT_COST
unless the caller picks another (sim.cost.COST_PRESETS).

The files are read with pandas (its pyarrow engine when pyarrow is there, else pandas' own),
in pieces of about 8 MB so a caller can show progress: no per-row Python loop parses a row.
"""
from __future__ import annotations

import gc
import io
import json
import re
import zlib
from dataclasses import dataclass, field
from itertools import repeat
from typing import Callable

import numpy as np
import pandas as pd

from .limits import EXPECTED, FORMATS, FORMATS_HELP, UnknownFormat  # noqa: F401  (the formats, named once)
from .limits import MAX_ARRIVAL_TIME, MAX_REQUESTS, MAX_TENANTS, MAX_TOKENS, archive_kind, unpack_it
from .workload import PROMPT_BLOCK_TOKENS, Request, Workload

AZURE, BURSTGPT, MOONCAKE = "azure", "burstgpt", "mooncake"
LABELS = {AZURE: "Azure LLM inference trace", BURSTGPT: "BurstGPT trace", MOONCAKE: "Mooncake trace"}
AZURE_COLUMNS = ("TIMESTAMP", "ContextTokens", "GeneratedTokens")
BURSTGPT_COLUMNS = ("Timestamp", "Model", "Request tokens", "Response tokens")
MOONCAKE_KEYS = ("timestamp", "input_length", "output_length")
# A roofline in ms whose pool fits the default 10,000 blocks of 16 tokens (20 GB of an 8B
# model's FP16 KV cache beside its 16 GB of weights on an 80 GB A100): arrivals in ms need a
# cost model in ms, and the lesson's abstract units are not one.
DEFAULT_COST = "a100-8B-fp16"
PIECE_BYTES = 8 << 20  # a progress tick per piece; big enough that the per-piece cost is noise
MAX_UNZIPPED_BYTES = 1 << 30

Progress = Callable[[int, int], None]


@dataclass
class TraceWorkload(Workload):
    """A Workload read from a public trace; `source` says what was read and how."""
    source: dict = field(default_factory=dict)


@dataclass
class TraceColumns:
    """A trace file's rows as columns (file order), before any are left out."""
    kind: str
    time_ms: np.ndarray  # float64, the file's own clock in ms (not yet offset)
    prompt: np.ndarray  # int64
    output: np.ndarray  # int64
    tenant: np.ndarray | None = None  # str per row (BurstGPT's Model), else one tenant
    block_starts: np.ndarray | None = None  # Mooncake: row i's ids are block_ids[starts[i]:starts[i+1]]
    block_ids: np.ndarray | None = None


# ---------------------------------------------------------------------------------------------
# Recognising a file
# ---------------------------------------------------------------------------------------------

def unzip(data: bytes) -> bytes:
    """The bytes of a gzip file, unzipped (at most MAX_UNZIPPED_BYTES); other bytes as they are."""
    if data[:2] != b"\x1f\x8b":
        return data
    # several gzip members back to back (`cat a.gz b.gz`, as gzip itself reads them) are read
    # one after the other: only the first was read before, the rest dropped without a word
    parts, room, rest = [], MAX_UNZIPPED_BYTES, data
    while True:
        d = zlib.decompressobj(wbits=31)
        try:
            out = d.decompress(rest, room)
        except zlib.error:
            raise ValueError("the file looks gzip-compressed but does not unzip") from None
        if not d.eof and d.unconsumed_tail:
            raise ValueError(f"unzipped, the file is over {MAX_UNZIPPED_BYTES >> 30} GiB")
        if not d.eof:
            raise ValueError("the gzip file is cut short: it does not unzip to its end")
        parts.append(out)
        room -= len(out)
        rest = d.unused_data
        if rest[:2] != b"\x1f\x8b":   # the end; bytes after the last member are ignored, as gzip(1) does
            return b"".join(parts) if len(parts) > 1 else parts[0]
        if room <= 0:
            raise ValueError(f"unzipped, the file is over {MAX_UNZIPPED_BYTES >> 30} GiB")


def _first_line(data: bytes) -> bytes:
    end = data.find(b"\n", 0, 1 << 20)
    line = data[: end if end >= 0 else 1 << 20]
    return line.removeprefix(b"\xef\xbb\xbf").strip()


def _header(line: bytes) -> list[str]:
    return [c.strip().strip('"').strip() for c in line.decode("utf-8", "replace").split(",")]


def sniff(data: bytes) -> str | None:
    """Which public trace these (unzipped) bytes hold, by their first line: AZURE, BURSTGPT,
    MOONCAKE, or None (not one of them)."""
    line = _first_line(data)
    if line.startswith(b"{"):
        try:
            first = json.loads(line)
        except (ValueError, RecursionError):  # a multi-line JSON document (a workload), not JSON lines; or too deep
            return None
        return MOONCAKE if isinstance(first, dict) and all(k in first for k in MOONCAKE_KEYS) else None
    cols = set(_header(line))
    if set(AZURE_COLUMNS) <= cols:
        return AZURE
    if set(BURSTGPT_COLUMNS) <= cols:
        return BURSTGPT
    return None


def not_a_known_format(data: bytes) -> str:
    """A plain one-line sentence for bytes that are neither a workload JSON nor a trace read here."""
    kind = archive_kind(data[:512])
    if kind is not None:
        return f"{unpack_it(kind)}; expected {EXPECTED}"
    line = _first_line(data)
    try:
        line.decode("utf-8")
    except UnicodeDecodeError:
        return f"the file is not UTF-8 text; expected {EXPECTED}"
    if not line:
        return f"the file is empty; expected {EXPECTED}"
    # the names shown are cut to letters, digits and a few marks (error boxes render markdown), and
    # to three of at most 12 characters: the sentence stays one short line
    cols = _header(line)
    names = [re.sub(r"[^\w .-]", "", c)[:12] for c in cols[:3]]
    shown = ", ".join(repr(n) for n in names) + (", ..." if len(cols) > 3 else "")
    return f"its first line (columns {shown}) is none of the formats read here; expected {EXPECTED}"


def json_lines_problem(data: bytes) -> str | None:
    """For JSON text that failed as a workload: when its first line is a whole JSON object (JSON
    lines, not one document), the sentence saying it is not a Mooncake trace either; else None."""
    try:
        first = json.loads(_first_line(data))
    except (ValueError, RecursionError):   # RecursionError: nested too deep (sim.limits says how deep)
        return None
    if not isinstance(first, dict) or "requests" in first:
        return None
    missing = [k for k in MOONCAKE_KEYS if k not in first]
    return (f"its lines are JSON objects but not a Mooncake trace's (no {', '.join(missing)}); "
            f"expected {EXPECTED}")


# ---------------------------------------------------------------------------------------------
# Reading the columns
# ---------------------------------------------------------------------------------------------

def _pieces(data: bytes, start: int) -> list[tuple[int, int]]:
    """(begin, end) byte ranges from `start`, each about PIECE_BYTES, cut after a newline."""
    out, a, n = [], start, len(data)
    while a < n:
        b = data.find(b"\n", a + PIECE_BYTES)
        b = n if b < 0 else b + 1
        out.append((a, b))
        a = b
    return out


def _engine() -> str:
    try:
        import pyarrow  # noqa: F401  (streamlit needs it, so it is there with the dashboard)
        return "pyarrow"
    except ImportError:
        return "c"


def _read_pieces(data: bytes, reader, progress: Progress | None) -> list[pd.DataFrame]:
    """reader(piece, first) -> DataFrame over each piece of `data` (first: the piece that
    begins the file), progress(bytes done, bytes in all) after each."""
    frames = []
    for a, b in _pieces(data, 0):
        frames.append(reader(data[a:b], a == 0))
        if progress is not None:
            progress(b, len(data))
    return frames


def _whole(values: pd.Series, what: str, first_row: int, row_word: str = "row") -> np.ndarray:
    """A column of counts as int64; ValueError naming the first row that is not a whole number
    from 0 to MAX_TOKENS."""
    if pd.api.types.is_integer_dtype(values.dtype) and not values.isna().any():
        v = values.to_numpy(dtype=np.int64)
        bad = (v < 0) | (v > MAX_TOKENS)
    else:  # text, decimals or empty cells: find the first that is not a count
        f = pd.to_numeric(values, errors="coerce").to_numpy(dtype=float, na_value=np.nan)
        bad = ~np.isfinite(f) | (f != np.floor(f)) | (f < 0) | (f > MAX_TOKENS)
        v = np.where(bad, 0, f).astype(np.int64)
    if bad.any():
        i = int(np.argmax(bad))
        raise ValueError(f"{row_word} {first_row + i}: {what} is {_shown(values.iloc[i])}, "
                         f"not a whole number of tokens from 0 to {MAX_TOKENS:,}")
    return v


def _reason(e: Exception) -> str:
    text = str(e).strip()
    return text.splitlines()[0][:200] if text else type(e).__name__


def _shown(v) -> str:
    if v is None or (isinstance(v, float) and np.isnan(v)) or v is pd.NA:
        return "empty"
    return repr(re.sub(r"[^\w .+-]", "?", str(v))[:24])


def _seconds(values: pd.Series, what: str, first_row: int) -> np.ndarray:
    v = pd.to_numeric(values, errors="coerce").to_numpy(dtype=float, na_value=np.nan)
    bad = ~np.isfinite(v)
    if bad.any():
        i = int(np.argmax(bad))
        raise ValueError(f"row {first_row + i}: {what} is {_shown(values.iloc[i])}, not a number")
    return v


def _csv_reader(header: bytes, usecols: tuple[str, ...], engine: str):
    def read(piece: bytes, first: bool) -> pd.DataFrame:
        body = piece if first else header + b"\n" + piece   # every piece after the first gets the header
        try:
            if engine == "pyarrow":
                try:
                    return pd.read_csv(io.BytesIO(body), usecols=list(usecols), engine="pyarrow")
                except Exception:  # pandas' own parser names the line that is wrong; pyarrow's may not
                    pass
            return pd.read_csv(io.BytesIO(body), usecols=list(usecols), low_memory=False)
        except Exception as e:  # pandas raises several kinds; the reason is what matters
            raise ValueError(f"the CSV could not be read ({_reason(e)})") from None
    return read


def _read_azure(data: bytes, progress: Progress | None) -> TraceColumns:
    df = _read_csv(data, AZURE_COLUMNS, progress)
    raw = df["TIMESTAMP"]
    ts = raw if pd.api.types.is_datetime64_any_dtype(raw.dtype) else pd.to_datetime(
        raw.astype("string").str.strip(), format="ISO8601", errors="coerce")
    if ts.isna().any():
        i = int(np.argmax(ts.isna().to_numpy()))
        raise ValueError(f"row {i + 1}: TIMESTAMP is {_shown(raw.iloc[i])}, not a date and time "
                         f"like 2023-11-16 18:15:46.6805900")
    ns = ts.to_numpy(dtype="datetime64[ns]").astype(np.int64)
    return TraceColumns(AZURE, time_ms=(ns - ns.min()) / 1e6,
                        prompt=_whole(df["ContextTokens"], "ContextTokens", 1),
                        output=_whole(df["GeneratedTokens"], "GeneratedTokens", 1))


def _read_burstgpt(data: bytes, progress: Progress | None) -> TraceColumns:
    df = _read_csv(data, BURSTGPT_COLUMNS, progress)
    tenant = df["Model"].astype("string").fillna("").str.strip().to_numpy(dtype=object)
    return TraceColumns(BURSTGPT, time_ms=_seconds(df["Timestamp"], "Timestamp", 1) * 1000.0,
                        prompt=_whole(df["Request tokens"], "Request tokens", 1),
                        output=_whole(df["Response tokens"], "Response tokens", 1),
                        tenant=tenant)


def _read_csv(data: bytes, usecols: tuple[str, ...], progress: Progress | None) -> pd.DataFrame:
    head_end = data.find(b"\n")
    header = data[: head_end if head_end >= 0 else len(data)].rstrip(b"\r")
    read = _csv_reader(header, usecols, _engine())
    frames = _read_pieces(data, read, progress)
    df = pd.concat(frames, ignore_index=True) if len(frames) > 1 else frames[0]
    if df.empty:
        raise ValueError("the trace has a header but no rows")
    return df


def _read_mooncake(data: bytes, progress: Progress | None) -> TraceColumns:
    engine = _engine()

    def read(piece: bytes, first: bool) -> pd.DataFrame:
        if not piece.strip():
            return pd.DataFrame()
        try:
            if engine == "pyarrow":
                try:
                    return pd.read_json(io.BytesIO(piece), lines=True, engine="pyarrow", dtype_backend="pyarrow")
                except Exception:  # mixed types or a broken line: pandas' own reader, whose values
                    pass           # the checks below then name line by line
            return pd.read_json(io.BytesIO(piece), lines=True, dtype=False)
        except Exception as e:
            raise ValueError(f"a line is not a JSON object of the Mooncake trace ({_reason(e)})") from None

    frames = [f for f in _read_pieces(data, read, progress) if len(f)]
    if not frames:
        raise ValueError("the trace has no lines")
    times, prompts, outputs, starts, ids = [], [], [], [], []
    first, offset = 1, 0
    for f in frames:  # one pass per 8 MB piece, not per line
        for k in MOONCAKE_KEYS:
            if k not in f.columns:
                raise ValueError(f"line {first}: the Mooncake trace's lines need {', '.join(MOONCAKE_KEYS)} "
                                 f"(and hash_ids); this piece has no {k}")
        times.append(_seconds(f["timestamp"], "timestamp", first))
        prompts.append(_whole(f["input_length"], "input_length", first, "line"))
        outputs.append(_whole(f["output_length"], "output_length", first, "line"))
        lens, flat = _hash_ids(f, first)
        starts.append(offset + np.concatenate([[0], np.cumsum(lens)[:-1]]))
        ids.append(flat)
        offset += int(lens.sum())
        first += len(f)
    return TraceColumns(MOONCAKE, time_ms=np.concatenate(times), prompt=np.concatenate(prompts),
                        output=np.concatenate(outputs),
                        block_starts=np.concatenate([*starts, [offset]]).astype(np.int64),
                        block_ids=np.concatenate(ids).astype(np.int64))


def _hash_ids(f: pd.DataFrame, first: int) -> tuple[np.ndarray, np.ndarray]:
    """Per line, how many hash ids it has, and all of them in one array."""
    n = len(f)
    if "hash_ids" not in f.columns:
        return np.zeros(n, dtype=np.int64), np.zeros(0, dtype=np.int64)
    col = f["hash_ids"]
    if isinstance(col.dtype, pd.ArrowDtype):  # the pyarrow engine keeps the lists as Arrow lists
        import pyarrow as pa
        if not pa.types.is_list(col.dtype.pyarrow_dtype):
            raise ValueError(f"line {first}: hash_ids must be a list of block ids")
        lens = col.list.len().fillna(0).to_numpy(dtype=np.int64)
        flat = col.list.flatten()
        if (not pa.types.is_integer(flat.dtype.pyarrow_dtype) or flat.hasnans) and len(flat):   # a null in a list
            raise ValueError(f"line {first}: hash_ids must hold whole-number block ids")
        flat = flat.to_numpy(dtype=np.int64) if len(flat) else np.zeros(0, dtype=np.int64)
    else:
        import itertools
        lists = [v if isinstance(v, list) else [] for v in col.tolist()]
        lens = np.fromiter(map(len, lists), dtype=np.int64, count=n)
        try:
            flat = np.fromiter(itertools.chain.from_iterable(lists), dtype=np.int64, count=int(lens.sum()))
        except (TypeError, ValueError, OverflowError):
            raise ValueError(f"lines {first}-{first + n - 1}: hash_ids must hold whole-number block ids") from None
    if len(flat) and flat.min() < 0:
        i = int(np.searchsorted(np.cumsum(lens), int(np.argmax(flat < 0)), side="right"))
        raise ValueError(f"line {first + i}: a hash id is negative; block ids are 0 or more")
    return lens, flat


# why a row with no output is left out, as each file's own words say it
OUTPUT_ZERO = {AZURE: "with 0 generated tokens", BURSTGPT: "failed requests (0 response tokens)",
               MOONCAKE: "with an output_length of 0"}
READERS = {AZURE: _read_azure, BURSTGPT: _read_burstgpt, MOONCAKE: _read_mooncake}


def read_columns(data: bytes, kind: str | None = None, progress: Progress | None = None) -> TraceColumns:
    """The rows of a trace file (unzipped bytes) as columns; ValueError with a plain message."""
    kind = kind or sniff(data)
    if kind not in READERS:
        raise UnknownFormat(not_a_known_format(data))
    return READERS[kind](data.removeprefix(b"\xef\xbb\xbf"), progress)


# ---------------------------------------------------------------------------------------------
# Columns to a workload
# ---------------------------------------------------------------------------------------------

def to_workload(cols: TraceColumns, name: str = "", *, limit: int | None = None,
                rate_scale: float = 1.0) -> TraceWorkload:
    """The requests of a trace: rows with a 0 count left out, the first `limit` by arrival
    (ties in file order), arrival_time = ms after the earliest of them, divided by rate_scale.
    Request ids are "r" + the row's index in the file (from 0), so they lead back to it."""
    if not (isinstance(rate_scale, (int, float)) and np.isfinite(rate_scale) and rate_scale > 0):
        raise ValueError(f"rate_scale must be a number above 0, not {rate_scale!r}")
    if limit is not None and (not isinstance(limit, (int, np.integer)) or limit < 1):
        raise ValueError(f"the request limit must be a whole number of at least 1, not {limit!r}")
    n = len(cols.prompt)
    left_out = {}
    no_output = cols.output == 0
    no_prompt = (cols.prompt == 0) & ~no_output
    if no_output.any():
        left_out[OUTPUT_ZERO[cols.kind]] = int(no_output.sum())
    if no_prompt.any():
        left_out["with 0 prompt tokens"] = int(no_prompt.sum())
    keep = np.flatnonzero(~(no_output | no_prompt))
    if not len(keep):
        raise ValueError(f"none of the trace's {n:,} rows has both prompt and output tokens")
    keep = keep[np.argsort(cols.time_ms[keep], kind="stable")]
    if limit is not None:
        keep = keep[:limit]
    if len(keep) > MAX_REQUESTS:
        raise ValueError(f"the trace has {len(keep):,} requests; at most {MAX_REQUESTS:,} are run "
                         f"(set a request limit)")
    t = cols.time_ms[keep]
    if t[-1] - t[0] > MAX_ARRIVAL_TIME * rate_scale:
        hours = (t[-1] - t[0]) / 3.6e6 / rate_scale   # as run; shown short (a 1e300 timestamp: 300 digits)
        span = f"{hours:,.0f}" if hours < 1e15 else f"{hours:.3g}"
        at = "" if rate_scale == 1.0 else f" at rate scale {rate_scale:g}"
        raise ValueError(f"the trace's arrivals span {span} hours{at}; at most "
                         f"{MAX_ARRIVAL_TIME / 3.6e6:,.0f} hours of arrivals are run")
    arrival = ((t - t[0]) / float(rate_scale)).tolist()
    width = max(4, len(str(n - 1)))
    ids = [f"r{i:0{width}d}" for i in keep.tolist()]
    prompt, output = cols.prompt[keep].tolist(), cols.output[keep].tolist()
    tenants = cols.tenant[keep].tolist() if cols.tenant is not None else None
    if tenants and len(set(tenants)) > MAX_TENANTS:
        raise ValueError(f"the trace names {len(set(tenants)):,} models (each one a tenant here); at most "
                         f"{MAX_TENANTS} tenants are compared")
    blocks = None
    if cols.block_ids is not None:
        flat = cols.block_ids.tolist()
        a, b = cols.block_starts[keep].tolist(), cols.block_starts[keep + 1].tolist()
        blocks = [tuple(flat[i:j]) for i, j in zip(a, b)]
    tenants = [t or "default" for t in tenants] if tenants else repeat("default")
    # positional, in Request's field order, with the collector paused: a million requests took
    # 1.2 s so against 3.6 s with keywords and the collector's passes (measured on this machine)
    was = gc.isenabled()
    gc.disable()
    try:
        reqs = list(map(Request, ids, prompt, output, repeat(0), arrival, tenants, repeat(0), repeat(None),
                        repeat(None), blocks if blocks else repeat(None)))
    finally:
        if was:
            gc.enable()
    config = {"enable_prefix_caching": True} if cols.kind == MOONCAKE else {}
    span = float(t[-1] - t[0]) / float(rate_scale)
    source = {"format": cols.kind, "label": LABELS[cols.kind], "rows": n, "requests": len(reqs),
              "left_out": left_out, "limit": limit, "rate_scale": float(rate_scale), "span_ms": span,
              "cost": DEFAULT_COST,
              "clock": "arrival_time in ms after the earliest row" + (f", divided by {rate_scale:g}"
                                                                       if rate_scale != 1 else "")}
    if cols.kind == MOONCAKE:
        source["prompt_block_tokens"] = PROMPT_BLOCK_TOKENS
    return TraceWorkload(requests=reqs, config=config, name=name, source=source)


def read_trace(data: bytes, name: str = "", *, kind: str | None = None, limit: int | None = None,
               rate_scale: float = 1.0, progress: Progress | None = None) -> TraceWorkload:
    """A public trace file (plain or gzip bytes) as a workload (see to_workload)."""
    data = unzip(data)
    return to_workload(read_columns(data, kind, progress), name, limit=limit, rate_scale=rate_scale)


def describe(source: dict) -> str:
    """One sentence about a trace workload (TraceWorkload.source), for a page or the CLI's stderr."""
    parts = [f"{source['label']}: {source['requests']:,} requests"]
    if source["requests"] != source["rows"]:
        parts.append(f"of {source['rows']:,} rows")
    out = " ".join(parts)
    gone = "; ".join(f"{v:,} {k}" for k, v in source.get("left_out", {}).items())
    if gone:
        out += f" (left out: {gone})"
    if source.get("limit") and source["requests"] == source["limit"]:
        out += f", the first {source['limit']:,} by arrival"
    out += f", over {source['span_ms'] / 1000:,.1f} s"
    if source.get("rate_scale", 1) != 1:
        out += f" (arrivals {source['rate_scale']:g}x as fast as recorded)"
    return out + "; arrival times in ms after the earliest row."
