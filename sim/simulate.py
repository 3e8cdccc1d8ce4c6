"""Run a workload through a scheduler and record the Trace (and, optionally, the oracle's
per-step JSONL, for conformance with shared/vllm/cases).

Steps are numbered 1, 2, ... A request with arrival_step a joins right before step a+1, in
workload order among equals (the oracle's rule). With arrival_time set, a request joins at
the first step that starts at or after that time, and an idle engine jumps to it.
Each step's duration comes from a cost model; the trace's time unit is the model's.
"""
from __future__ import annotations

from array import array
from dataclasses import dataclass, replace
from operator import itemgetter
from typing import Callable, TextIO

import numpy as np
import pandas as pd

from . import static, llamaslots  # noqa: F401  (each registers itself, in the order pages list them)
from .cost import UnitsCost
from .digest import Digest, gaps_frame
from .gc_passes import with_fewer_gc_passes
from .jsonout import dumps_strict
from .limits import check_prompt_work
from .registry import SCHEDULERS
from .run_memory import run_bytes
from .async_sched import AsyncVllmScheduler, BatchQueue
from .scheduler import SchedulerConfig, StepPlan
from .static import PADDING
from .trace import Trace, categorical, kv_table, table_from_columns
from .versions import check_options, chunked_anyway, kept_victims, normalize, rules, threshold_unread, unchecked
from .workload import Workload

BATCH_COLUMNS = ("step", "request", "slot", "kind", "tokens", "computed_before", "sampled")
SWAP_LINK_BYTES_PER_S = 31.5e9  # PCIe 4.0 x16, the lesson's swap link (Example 8)


def scheduler_names() -> list[str]:
    """Every registered scheduler: "vllm", "static", "llama_slots"."""
    return list(SCHEDULERS)


def max_model_len_for(workload: Workload, cfg: SchedulerConfig, strict: bool = True) -> int:
    """The scheduler's max_model_len: the config's, else the longest request's (prompt and
    output). strict: ValueError for a request longer than the config's (a fleet's replica turns
    such a request away instead, as vLLM's front end does)."""
    need = max((r.prompt_len + r.max_tokens for r in workload.requests), default=1)
    mml = int(cfg.max_model_len or need)
    if strict and need > mml:
        raise ValueError(f"a request needs {need} tokens but max_model_len is {mml}")
    return max(mml, int(cfg.long_prefill_token_threshold or 0))


def check_fits(workload: Workload, cfg: SchedulerConfig, mml: int) -> None:
    held_back = 1 if rules(cfg.vllm_version).null_block else 0   # 0.8.2 and before: no null block
    usable = cfg.num_gpu_blocks - held_back
    if -(-mml // cfg.block_size) > usable:
        need = max((r.prompt_len + r.max_tokens for r in workload.requests), default=1)
        what = (f"max_model_len ({mml:,} tokens: raised to the long-prefill threshold; the longest request "
                f"needs {need:,})"
                if mml > need and mml == cfg.long_prefill_token_threshold and not cfg.max_model_len
                else f"the longest request ({mml:,} tokens)" if mml == need else f"max_model_len ({mml:,} tokens)")
        raise ValueError(
            f"{what} needs {-(-mml // cfg.block_size):,} blocks of {cfg.block_size}, more than the {usable:,} "
            f"usable blocks (num_gpu_blocks{' - 1' if held_back else ''}); vLLM would not start")


def _columns(names, rows: list) -> dict:
    """Rows of tuples as {name: column list}. One pass per column: zip(*rows) would be a call
    with a million arguments, several times slower."""
    return {k: list(map(itemgetter(j), rows)) for j, k in enumerate(names)}


# a batch column's array type while recorded: compact, as the Trace holds it (sim.trace.SCHEMA);
# ids and kinds as integer codes into the recorder's names (a row is 22 bytes)
_BATCH_DTYPES = {"step": np.int32, "request": np.int32, "slot": np.int32, "kind": np.int8, "tokens": np.int32,
                 "computed_before": np.int32, "sampled": np.bool_}
_BATCH_TYPECODES = {np.int32: "i", np.int8: "b", np.bool_: "b"}
BATCH_CHUNK_ROWS = 1 << 16
STEP_CHUNK_ROWS = 1 << 14
_NULLABLE_STEP_COLUMNS = ("free_blocks", "free_blocks_after_schedule", "cached_free_blocks")


class RequestInfo:
    """What a run notes about one request for the requests table: a dict's get / [] / in /
    setdefault over slots (a dict per request was ~0.9 kB: most of a million-request run's
    memory besides its tables). A field never set is absent."""

    __slots__ = ("arrival_step", "arrival_time", "rejected", "first_scheduled_step", "first_scheduled_time",
                 "cached_tokens", "first_token_step", "first_token_time", "recomputed_tokens", "slot", "preemptions",
                 "swapped", "finish_step", "finish_time", "output_tokens", "finish_reason", "extra")

    def get(self, key, default=None):
        try:
            return self[key]
        except KeyError:
            return default

    def __getitem__(self, key):
        try:
            return getattr(self, key)
        except AttributeError:
            extra = getattr(self, "extra", None) if key != "extra" else None
            if extra is not None and key in extra:
                return extra[key]
            raise KeyError(key) from None

    def __setitem__(self, key, value) -> None:
        if key in RequestInfo.__slots__ and key != "extra":
            setattr(self, key, value)
        else:   # a field the slots do not name (an executor's own)
            try:
                self.extra[key] = value
            except AttributeError:
                self.extra = {key: value}

    def __contains__(self, key) -> bool:
        try:
            self[key]
            return True
        except KeyError:
            return False

    def setdefault(self, key, default=None):
        if key not in self:
            self[key] = default
        return self[key]


class Names:
    """Text values (request ids, kinds, details) as integer codes, numbered as first seen."""

    def __init__(self):
        self.code: dict = {}
        self.names: list = []

    def __call__(self, value) -> int:
        c = self.code.get(value)
        if c is None:
            c = self.code[value] = len(self.names)
            self.names.append(value)
        return c

    def codes(self, values) -> np.ndarray:
        """Codes of many values (a C-speed lookup; new ones numbered as they come)."""
        try:
            return np.fromiter(map(self.code.__getitem__, values), dtype=np.int32, count=len(values))
        except KeyError:
            return np.fromiter(map(self, values), dtype=np.int32, count=len(values))

    def column(self, codes) -> pd.Categorical:
        return categorical(codes, self.names)

    def decode(self, codes) -> np.ndarray:
        return np.asarray(self.names + [None], dtype=object)[codes]


def _column_arrays(rows: list, ids: Names, kinds: Names) -> dict:
    """Batch rows (tuples in BATCH_COLUMNS' order) as {name: numpy column}, ids and kinds coded."""
    out = {}
    for j, k in enumerate(BATCH_COLUMNS):
        col = list(map(itemgetter(j), rows)) if k in ("request", "kind") else map(itemgetter(j), rows)
        if k in ("request", "kind"):
            out[k] = (ids if k == "request" else kinds).codes(col).astype(_BATCH_DTYPES[k], copy=False)
            continue
        try:
            out[k] = np.fromiter(col, dtype=_BATCH_DTYPES[k], count=len(rows))
        except (TypeError, ValueError, OverflowError):   # an unknown (None) or odd value: as the objects
            out[k] = np.array(list(map(itemgetter(j), rows)), dtype=object)
    return out


def _note_entry(d: dict, e, step, start, end) -> None:
    """What a prompt entry (prefill, recompute, padding) tells the requests table about its request."""
    if e.sampled and "first_token_step" not in d:
        d["first_token_step"] = step
        d["first_token_time"] = end
    if e.kind == "recompute":
        d["recomputed_tokens"] = d.get("recomputed_tokens", 0) + e.recomputed
    if "first_scheduled_step" not in d:
        d["first_scheduled_step"] = step
        d["first_scheduled_time"] = start
        d["cached_tokens"] = e.computed_before


class Recorder:
    """Records a run as it goes (a tuple per step and per batch entry: cheap appends; `steps` and
    `batch` give them as the Trace's columns), and writes the oracle's per-step JSONL when asked.
    Shared by the executors: the simulator (step times from a cost model) and the engine
    (measured step times, plus its own extra step columns such as the phase split)."""

    STEP_COLUMNS = ("step", "start", "end", "num_tokens", "prefill_tokens", "decode_tokens", "recompute_tokens",
                    "num_seqs", "running", "waiting", "free_blocks", "free_blocks_after_schedule",
                    "cached_free_blocks", "preempted", "finished", "arrived", "idle", "swap_bytes")

    def __init__(self, caching: bool = False, oracle_out: TextIO | None = None, extra_step_columns=()):
        # one tuple per step (STEP_COLUMNS) and per batch entry (BATCH_COLUMNS): a step appends two
        # or three tuples instead of 25 column values; steps and batch turn them into columns
        self.step_rows: list[tuple] = []
        self.step_chunks: list[dict] = []
        # batch entries since the last flush; every BATCH_CHUNK_ROWS they become numpy columns
        # (~50 bytes a row, against ~190 for a tuple of fresh ints: a long run's peak memory)
        self.batch_rows: list[tuple] = []
        # flushed rows: one typed buffer per column, grown in place (a run's batch is held once,
        # not as chunks and then joined); chunks only once a row held a value of another type
        self.batch_cols = self._fresh_cols()
        self.batch_chunks: list[dict] = []
        self.batch_flushed = 0
        self.extra_step_columns = tuple(extra_step_columns)
        self.extras = {k: [] for k in self.extra_step_columns}
        # request ids, batch kinds, event kinds and details, tenants as codes (sim.trace's
        # categorical columns); events and counters in typed arrays, not lists of Python objects
        self.ids, self.kinds, self.ev_kinds, self.ev_details, self.tenants = Names(), Names(), Names(), Names(), Names()
        self.ev = {"step": array("i"), "time": array("d"), "request": array("i"), "kind": array("i"),
                   "detail": array("i")}
        self.ctr = {"step": array("i"), "tenant": array("i"), "value": array("d")}
        self.info: dict[str, RequestInfo] = {}  # request id -> what the requests table says about it
        self.caching = caching
        self.oracle_out = oracle_out

    @property
    def steps(self) -> dict:
        """The step columns as lists (unknown = None)."""
        out = _columns(self.STEP_COLUMNS, self.step_rows)
        if self.step_chunks:
            for k in self.STEP_COLUMNS:
                head = []
                for c in self.step_chunks:
                    vals = c[k].tolist()
                    if k in _NULLABLE_STEP_COLUMNS and c[k].dtype == np.float64:
                        vals = [None if v != v else int(v) for v in vals]   # NaN was unknown
                    head += vals
                out[k] = head + out[k]
        return out

    def step_arrays(self, take: bool = False) -> dict:
        """The step columns as numpy arrays (nullable integers as float, NaN unknown): what the
        steps table is built from, without a list per column. The recorder keeps them (an
        engine's trace may be taken again as it runs) unless `take` (a run that is over: each
        column's chunks are let go as they are joined)."""
        self._flush_steps(force=True)
        chunks = self.step_chunks
        if take:
            self.step_chunks = []
            return {k: np.concatenate([c.pop(k) for c in chunks]) if chunks else np.zeros(0)
                    for k in self.STEP_COLUMNS}
        if len(chunks) > 1:   # joined once, so a later call does not join them again
            self.step_chunks = chunks = [{k: np.concatenate([c[k] for c in chunks]) for k in self.STEP_COLUMNS}]
        return {k: chunks[0][k] if chunks else np.zeros(0) for k in self.STEP_COLUMNS}

    def _flush_steps(self, force: bool = False) -> None:
        """Every STEP_CHUNK_ROWS steps, their tuples become numpy columns (~70 bytes a step against
        ~400 for a tuple and its numbers: half a million steps at a million requests)."""
        rows = self.step_rows
        if len(rows) >= STEP_CHUNK_ROWS or (force and rows):
            chunk = {}
            for j, k in enumerate(self.STEP_COLUMNS):
                col = list(map(itemgetter(j), rows))
                dtype = np.float64 if k in _NULLABLE_STEP_COLUMNS or k in ("start", "end", "swap_bytes") else \
                    np.bool_ if k == "idle" else np.int64
                try:
                    chunk[k] = np.array(col, dtype=dtype)   # None becomes NaN in a float column
                except (TypeError, ValueError, OverflowError):
                    chunk[k] = np.array(col, dtype=object)
            self.step_chunks.append(chunk)
            self.step_rows = []

    @staticmethod
    def _fresh_cols() -> dict:
        return {k: array(_BATCH_TYPECODES[_BATCH_DTYPES[k]]) for k in BATCH_COLUMNS}

    def _typed(self, take: bool) -> dict:
        """The typed buffers as numpy columns: a copy, or (take) the buffers themselves."""
        cols = self.batch_cols
        if take:
            self.batch_cols = self._fresh_cols()
        return {k: (np.frombuffer(v, dtype=_BATCH_DTYPES[k]) if take and len(v) else
                    np.array(np.frombuffer(v, dtype=_BATCH_DTYPES[k]) if len(v) else [], dtype=_BATCH_DTYPES[k]))
                for k, v in cols.items()}

    @property
    def batch(self) -> dict:
        """The batch columns as numpy arrays (the flushed rows and the rows since), ids and
        kinds as text (object arrays)."""
        out = self._joined(self.batch_chunks + [self._typed(False), self._arrays(self.batch_rows)], keep=True)
        out["request"] = self.ids.decode(out["request"])
        out["kind"] = self.kinds.decode(out["kind"])
        return out

    def take_batch(self) -> dict:
        """The batch columns as the Trace holds them (ids and kinds categorical), emptying the
        recorder: the typed buffers are handed over without a copy."""
        self._flush_batch(force=True)
        if self.batch_chunks:   # a row held another type: chunks, joined a column at a time
            chunks = self.batch_chunks + [self._arrays(self.batch_rows)]
            self.batch_chunks, self.batch_rows = [], []
            out = self._joined(chunks, keep=False)
        else:
            out = self._typed(True)
        self.batch_flushed = 0
        out["request"] = self.ids.column(out["request"])
        out["kind"] = self.kinds.column(out["kind"])
        return out

    def _arrays(self, rows: list) -> dict:
        return _column_arrays(rows, self.ids, self.kinds)

    @property
    def events(self) -> dict:
        """The events' columns (ids, kinds and details categorical)."""
        e = self.ev
        return {"step": np.array(e["step"], dtype=np.int32), "time": np.array(e["time"], dtype=np.float64),
                "request": self.ids.column(np.array(e["request"], dtype=np.int32)),
                "kind": self.ev_kinds.column(np.array(e["kind"], dtype=np.int32)),
                "detail": self.ev_details.column(np.array(e["detail"], dtype=np.int32))}

    @property
    def counters(self) -> dict:
        c = self.ctr
        return {"step": np.array(c["step"], dtype=np.int32), "tenant": self.tenants.column(np.array(c["tenant"], dtype=np.int32)),
                "value": np.array(c["value"], dtype=np.float64)}

    @staticmethod
    def _joined(chunks: list[dict], keep: bool) -> dict:
        out = {}
        for k in BATCH_COLUMNS:
            parts = [c[k] if keep else c.pop(k) for c in chunks]
            kinds = {p.dtype for p in parts if len(p)}
            out[k] = np.concatenate(parts if len(kinds) <= 1 else [p.astype(object) for p in parts])
        return out

    @property
    def num_batch_rows(self) -> int:
        return self.batch_flushed + len(self.batch_rows)

    def _flush_batch(self, force: bool = False) -> None:
        if len(self.batch_rows) >= BATCH_CHUNK_ROWS or (force and self.batch_rows):
            chunk = self._arrays(self.batch_rows)
            if not self.batch_chunks and all(chunk[k].dtype == _BATCH_DTYPES[k] for k in BATCH_COLUMNS):
                for k, v in chunk.items():
                    self.batch_cols[k].frombytes(v.tobytes())
            else:
                if not self.batch_chunks:   # from now on as chunks, after what the buffers hold
                    self.batch_chunks.append(self._typed(True))
                self.batch_chunks.append(chunk)
            self.batch_flushed += len(self.batch_rows)
            self.batch_rows = []

    def event(self, step, time, rid, kind, detail=""):
        e = self.ev
        e["step"].append(step)
        e["time"].append(time)
        e["request"].append(self.ids(rid))
        e["kind"].append(self.ev_kinds(kind))
        e["detail"].append(self.ev_details(detail))

    def _arrived(self, r, step: int, clock: float, timed: bool) -> RequestInfo:
        self.ids(r.id)   # ids numbered in arrival order (the batch rows' codes)
        d = self.info.get(r.id)
        if d is None:
            d = self.info[r.id] = RequestInfo()
        d["arrival_step"] = step - 1 if not timed else step
        d["arrival_time"] = r.arrival_time if timed else clock
        self.event(step, clock, r.id, "arrive", f"{r.prompt_len} prompt tokens")
        return d

    def turn_away(self, r, step: int, clock: float, reason: str) -> None:
        """Note request `r` turned away as it arrives, before the scheduler sees it (vLLM's front
        end answers such a request with an error)."""
        self._arrived(r, step, clock, True)["rejected"] = True
        self.event(step, clock, r.id, "reject", reason)

    def arrive(self, sched, r, step: int, clock: float, timed: bool):
        """Hand request `r` to the scheduler at `step` (clock = the step's start time)."""
        seq = sched.add_request(r)
        d = self._arrived(r, step, clock, timed)
        if seq.status == "rejected":
            d["rejected"] = True
            self.event(step, clock, r.id, "reject", getattr(sched, "reject_reason", "queue limit"))
        elif seq.status == "deferred":  # SLO admission: held aside, served when nothing else waits
            self.event(step, clock, r.id, "defer", "TTFT target cannot be met")
        return seq

    def entries(self, ents, step, start, end, info) -> tuple[int, int, int]:
        """Note a step's batch entries (a row each, and what the requests table learns from them);
        returns the step's prefill, decode and recompute tokens."""
        rows = self.batch_rows
        prefill = decode = recompute = 0
        for e in ents:
            kind = e.kind
            seq = e.seq
            rows.append((step, seq.id, seq.slot if seq.slot >= 0 else info[seq.id].get("slot", -1), kind, e.tokens,
                         e.computed_before, e.sampled))   # BATCH_COLUMNS' order
            if kind == "decode":
                decode += e.tokens
                continue  # a decoding request was scheduled and sampled before; nothing new to note
            _note_entry(info[seq.id], e, step, start, end)
            if kind == "recompute":
                recompute += e.tokens
            else:
                prefill += e.tokens
        return prefill, decode, recompute

    def _extras(self, extras):
        if self.extra_step_columns:
            for k in self.extra_step_columns:
                self.extras[k].append((extras or {}).get(k))

    def idle(self, step, clock, dt, pool, arrived, extras=None, tail=None):
        _record_idle(self, step, clock, dt, pool, arrived, self.caching, self.oracle_out, tail)
        self._extras(extras)
        self._flush_steps()

    def record(self, sched, plan: StepPlan, finished, step, start, end, arrived, swap_bytes, extras=None,
               finish_time=None, tail=None):
        """A step. finish_time: when its finished requests' last tokens came (default `end`; async
        scheduling applies an earlier step's output); tail: fields that end its oracle line."""
        _record_step(self, sched, plan, finished, step, start, end, arrived, self.info, self.caching,
                     self.oracle_out, swap_bytes, end if finish_time is None else finish_time, tail)
        self._extras(extras)
        self._flush_batch()
        self._flush_steps()

    def record_counters(self, sched, step):
        c = self.ctr
        for t, v in sched.waiting.state().items():
            c["step"].append(step)
            c["tenant"].append(self.tenants(t))
            c["value"].append(v)

    def build(self, requests, cfg, mode, pool, meta: dict, take_log: bool = False) -> Trace:
        """The Trace of the run so far. take_log: the pool's KV log is handed over (no copy) and
        emptied, for a run that is over."""
        return _build_trace(requests, cfg, mode, self, pool, meta, take_log)

    def columns(self, requests) -> RunColumns:
        return RunColumns(steps=self.steps, batch=self.batch, requests=_request_rows(requests, self.info))


class DigestRecorder(Recorder):
    """Records a run as a Digest (sim.digest): the requests and steps as a Recorder does, and of
    the batch only each request's token gaps, each step's service per tenant and the working
    slot-steps; no batch rows, KV log, events or counters. A million-request run in a small
    fraction of the memory, for a config search's metrics."""

    def __init__(self, caching: bool = False):
        super().__init__(caching)
        self.tok: dict[str, list] = {}   # request id -> [last token's time, sum of gaps, gaps, worst gap]
        self.svc: tuple[list, list, list, list] = ([], [], [], [])   # step, tenant, prompt tokens, sampled
        self.useful = 0

    def event(self, step, time, rid, kind, detail=""):
        pass   # the metrics read no events

    def record_counters(self, sched, step):
        pass

    def entries(self, ents, step, start, end, info) -> tuple[int, int, int]:
        prefill = decode = recompute = 0
        tok = self.tok
        served: dict[str, list] = {}   # tenant -> [prompt tokens, sampled]
        for e in ents:
            kind = e.kind
            seq = e.seq
            sv = served.get(seq.tenant)
            if sv is None:
                sv = served[seq.tenant] = [0, 0]
            if e.sampled:
                sv[1] += 1
                g = tok.get(seq.id)
                if g is None:
                    tok[seq.id] = [end, 0.0, 0, 0.0]
                else:
                    gap = end - g[0]
                    g[0] = end
                    g[1] += gap
                    g[2] += 1
                    if gap > g[3] or g[2] == 1:
                        g[3] = gap
            if kind == "decode":
                decode += e.tokens
                continue
            if kind == PADDING:
                self.useful -= 1
            _note_entry(info[seq.id], e, step, start, end)
            if kind == "recompute":
                recompute += e.tokens
            else:
                prefill += e.tokens
                if kind == "prefill":
                    sv[0] += e.tokens
        self.useful += len(ents)
        st, te, pr, sa = self.svc
        for t, (p, n) in served.items():
            st.append(step)
            te.append(t)
            pr.append(p)
            sa.append(n)
        return prefill, decode, recompute

    def build(self, requests, cfg, mode, pool, meta: dict, take_log: bool = False) -> Digest:
        req = table_from_columns("requests", _request_rows(requests, self.info))
        steps = table_from_columns("steps", self.step_arrays())
        with_gaps = [(rid, g) for rid, g in self.tok.items() if g[2]]
        gaps = gaps_frame([rid for rid, _ in with_gaps], [g[1] for _, g in with_gaps], [g[2] for _, g in with_gaps],
                          [g[3] for _, g in with_gaps])
        st, te, pr, sa = self.svc
        service = pd.DataFrame({"step": np.asarray(st, dtype=np.int64), "tenant": np.asarray(te, dtype=object),
                                "prompt_tokens": np.asarray(pr, dtype=np.int64),
                                "sampled": np.asarray(sa, dtype=np.int64)})
        return Digest(requests=req, steps=steps, gaps=gaps, service=service, useful_slot_steps=self.useful,
                      meta=_trace_meta(cfg, mode, meta, len(requests)))


@dataclass(frozen=True)
class RunColumns:
    """A run's steps and requests as the Trace's columns in plain lists (unknown = None) and its
    batch as numpy columns, without building the Trace's pandas tables (about 10 ms a run): for
    sweeps that read a few columns of many runs. simulate(..., columns=True) returns one."""
    steps: dict
    batch: dict
    requests: dict


class Arrivals:
    """A workload's requests in the order they join: by arrival_step (joining right before step
    arrival_step + 1), or, when any has arrival_time, by time (joining at the first step that
    starts at or after it); ties keep workload order."""

    def __init__(self, requests):
        reqs = list(requests)
        self.timed = any(r.arrival_time is not None for r in reqs)
        if self.timed:
            order = sorted(range(len(reqs)), key=lambda i: (reqs[i].arrival_time or 0.0, i))
        else:
            order = sorted(range(len(reqs)), key=lambda i: (reqs[i].arrival_step, i))
        self.pending = [reqs[i] for i in order]
        self.i = 0

    @property
    def remaining(self) -> int:
        return len(self.pending) - self.i

    def next_time(self) -> float:
        return self.pending[self.i].arrival_time or 0.0

    def due(self, step: int, clock: float) -> list:
        """Requests that join before `step` (which starts at `clock`)."""
        out, p, i, n = [], self.pending, self.i, len(self.pending)
        while i < n and ((p[i].arrival_time or 0.0) <= clock if self.timed else p[i].arrival_step < step):
            out.append(p[i])
            i += 1
        self.i = i
        return out


def resolve_config(workload: Workload, config) -> tuple[SchedulerConfig, str]:
    """The workload's config overridden by `config`; returns (config, scheduler name)."""
    if isinstance(config, SchedulerConfig):
        return config, "vllm"
    merged = dict(workload.config)
    merged.update(config or {})
    mode = merged.pop("scheduler", "vllm")
    return SchedulerConfig.from_dict(merged), mode


@with_fewer_gc_passes
def simulate(workload: Workload, config: dict | SchedulerConfig | None = None, *, cost=None,
             oracle_out: TextIO | None = None, max_steps: int = 10_000_000,
             progress: Callable[[int, int], None] | None = None, columns: bool = False,
             digest: bool = False, max_batch_rows: int | None = None,
             max_memory: int | None = None) -> Trace | RunColumns | Digest:
    """Run `workload` (its own config, overridden by `config`) and return the Trace (with
    `columns`, only its steps, batch and requests columns: RunColumns; with `digest`, only what
    the metrics read: a Digest, without per-token rows or the KV log). `max_batch_rows`: stop
    with a RuntimeError once the run holds more batch rows than that; `max_memory`: likewise once
    the run's Trace would take more bytes than that (sim.run_memory's model: a server's memory cap)."""
    cfg, mode = resolve_config(workload, config)
    check_options(cfg, mode)  # a version with rules; async only where it is modelled (sim/versions.py)
    borrowed = unchecked(cfg.vllm_version)
    if borrowed:   # a version outside the checked ones runs under (and is recorded as) the nearest's rules
        cfg = replace(cfg, vllm_version=normalize(cfg.vllm_version))
    cost = cost or UnitsCost()
    mml = max_model_len_for(workload, cfg)
    check_fits(workload, cfg, mml)
    check_prompt_work(workload.requests, cfg.enable_prefix_caching)  # seconds, not hours, of token ids
    memory = None if max_memory is None or digest else _MemoryCap(workload.requests, cfg, max_memory)
    try:
        sched = (AsyncVllmScheduler if cfg.async_scheduling else SCHEDULERS[mode])(cfg, mml)
    except KeyError:
        raise ValueError(f"unknown scheduler {mode!r}; known: {', '.join(SCHEDULERS)}") from None
    slo_clock = hasattr(sched, "clock")  # SLO admission and EDF read the step's start time
    if slo_clock:
        sched.cost_model = cost

    arrivals = Arrivals(workload.requests)
    if digest and (columns or oracle_out is not None):
        raise ValueError("a digest keeps no batch rows: not with columns or oracle_out")
    rec = DigestRecorder(cfg.enable_prefix_caching) if digest else Recorder(cfg.enable_prefix_caching, oracle_out)
    pool = sched.pool
    pool.logging = not digest
    # swap traffic costs link time; the abstract "units" model has no seconds scale, so none there
    to_unit = {"ms": 1000.0, "s": 1.0}.get(getattr(cost, "time_unit", ""), 0.0)
    swap_unit_per_byte = to_unit / SWAP_LINK_BYTES_PER_S
    n_total, n_done = arrivals.remaining, 0
    step, clock = 0, 0.0
    stalled = 0
    idle_dt = cost.step_time(1, [1])  # an idle tick: the engine polls, no model pass
    shaped = getattr(cost, "uses_shape", False)  # priced by the step's make-up (sim.cost.FormCost)
    tracks_counters = bool(sched.waiting.state()) or cfg.policy == "vtc"
    # async scheduling: each step is one call of vLLM's step_with_batch_queue (sim/async_sched.py)
    bq = BatchQueue(sched) if cfg.async_scheduling else None

    while n_done < n_total:
        if step >= max_steps:
            raise RuntimeError(f"step cap {max_steps} reached with {n_total - n_done} requests unfinished")
        if max_batch_rows is not None and rec.num_batch_rows > max_batch_rows:
            raise RuntimeError(
                f"this run holds more than {max_batch_rows:,} token rows (a batch entry per request per step) "
                f"after {step:,} steps, with {n_total - n_done:,} of {n_total:,} requests to go: more than "
                f"this server keeps. " + _ELSEWHERE)
        if step % 1000 == 0 and step:   # sync and async steps alike (the async call continues early)
            if memory is not None:
                memory.check(step, rec, pool, n_total - n_done, n_total)
            if progress is not None:
                progress(n_done, n_total)
        if arrivals.timed and arrivals.remaining and not sched.has_requests() and not (bq and bq.pending):
            clock = max(clock, arrivals.next_time())  # an idle engine waits for the next arrival
        step += 1
        pool.step = step
        if slo_clock:
            sched.clock = clock
        arrived = []
        for r in arrivals.due(step, clock):
            if rec.arrive(sched, r, step, clock, arrivals.timed).status == "rejected":
                n_done += 1
            arrived.append(r.id)
        if bq is not None:
            finished, clock, stalled, _, _ = _async_call(bq, sched, rec, cost, step, clock, arrived, idle_dt,
                                                         stalled, swap_unit_per_byte)
            n_done += len(finished)
            if tracks_counters:
                rec.record_counters(sched, step)
            continue
        if not sched.has_requests():
            rec.idle(step, clock, idle_dt, pool, arrived)
            clock += idle_dt
            continue

        plan = sched.schedule()
        stalled = 0 if (plan.entries or plan.admitted or plan.preempted) else stalled + 1
        if stalled > 1000:
            raise RuntimeError(f"no progress for 1000 steps at step {step}: the KV pool is too small for "
                               f"the requests in flight")
        dt = cost.step_time_plan(plan) if shaped else cost.step_time_totals(plan.num_tokens, plan.context_tokens)
        swap_bytes = plan.swapped_in_bytes + plan.swapped_out_bytes
        dt += swap_bytes * swap_unit_per_byte
        finished = sched.update(plan)
        end = clock + dt
        n_done += len(finished)
        rec.record(sched, plan, finished, step, clock, end, arrived, swap_bytes)
        if tracks_counters:
            rec.record_counters(sched, step)
        clock = end

    if columns:
        return rec.columns(workload.requests)
    warnings = [borrowed] if borrowed else []
    if not cfg.enable_chunked_prefill and getattr(sched, "cfg", cfg).enable_chunked_prefill:
        warnings.append(chunked_anyway(cfg.vllm_version))
    if getattr(sched, "victims_kept", None):
        warnings.append(kept_victims(cfg.vllm_version, sched.victims_kept))
    ruled = rules(cfg.vllm_version)
    if cfg.long_prefill_token_threshold and not ruled.long_prefill_threshold:
        warnings.append(threshold_unread(cfg.vllm_version))
    meta = {"source": "simulator", "time_unit": cost.time_unit,
            **({} if ruled.null_block else {"null_block": False}),   # 0.8.2 and before hand out block 0
            "cost_model": cost.describe() if hasattr(cost, "describe") else type(cost).__name__,
            "workload": workload.name, **({"warnings": warnings} if warnings else {})}
    return rec.build(workload.requests, cfg, mode, pool, meta, take_log=not digest)


class _MemoryCap:
    """Stops a run whose Trace would take more than `budget` bytes (sim.run_memory's model): at
    the start for what the requests alone take, then every 1,000 steps for what the run holds."""

    def __init__(self, requests, cfg, budget: int):
        self.budget, self.requests = budget, len(requests)
        self.prompt_tokens = sum(r.prompt_len for r in requests) if cfg.enable_prefix_caching else 0
        need = run_bytes(0, 0, 0, self.requests, self.prompt_tokens)
        if need > budget:
            raise RuntimeError(f"its {self.requests:,} requests alone would take about {_gb(need)} of memory, more "
                               f"than the {_gb(budget)} this server keeps for one run. " + _ELSEWHERE)

    def check(self, step: int, rec, pool, to_go: int, total: int) -> None:
        need = run_bytes(step, rec.num_batch_rows, pool.log_len, self.requests, self.prompt_tokens)
        if need > self.budget:
            raise RuntimeError(f"after {step:,} steps, with {to_go:,} of {total:,} requests to go, this run already "
                               f"holds about {_gb(need)} ({rec.num_batch_rows:,} token rows, {pool.log_len:,} KV "
                               f"changes), more than the {_gb(self.budget)} this server keeps for one run. "
                               + _ELSEWHERE)


_ELSEWHERE = ("Run fewer requests, or get the metrics alone with `python -m sim run` or the Choosing settings page, "
              "which keep no token rows")


def _gb(n: int) -> str:
    return f"{n / 1e9:.1f} GB"


def _async_call(bq: BatchQueue, sched, rec, cost, step, clock, arrived, idle_dt, stalled, swap_unit_per_byte):
    """One call of step_with_batch_queue: schedule (if the scheduler holds requests), then apply
    the oldest output in flight if the queue says so; an idle tick when there is neither.
    Returns (the requests it finished, the clock after it, calls without progress, the step it
    scheduled (an empty StepPlan for a drain; None for an idle tick), the (step, plan, end) whose
    output it applied or None)."""
    through = bq.applied_through
    plan = bq.schedule(step)
    if plan is None and not bq.pending:
        rec.idle(step, clock, idle_dt, sched.pool, arrived,
                 tail={"output_applied_through": through, "applied_step": None})
        return [], clock + idle_dt, stalled, None, None
    drain = plan is None  # nothing to schedule, an output still in flight: the call only applies it
    if drain:
        plan = StepPlan()
        plan.free_after_schedule = sched.pool.num_free
    swap_bytes = plan.swapped_in_bytes + plan.swapped_out_bytes
    dt = (cost.step_time_plan(plan) if getattr(cost, "uses_shape", False)
          else cost.step_time_totals(plan.num_tokens, plan.context_tokens))
    end = clock + dt + swap_bytes * swap_unit_per_byte
    applied, finished = bq.apply() if bq.submit(step, None if drain else plan, end) else (None, [])
    progressed = plan.entries or plan.admitted or plan.preempted or finished
    stalled = 0 if progressed else stalled + 1
    if stalled > 1000:
        raise RuntimeError(f"no progress for 1000 steps at step {step}: the KV pool is too small for "
                           f"the requests in flight")
    tail = {"output_applied_through": through, "applied_step": applied[0] if applied else None}
    if drain:
        tail["drain"] = True
    # a finished request's last token came at the end of the step that sampled it
    rec.record(sched, plan, finished, step, clock, end, arrived, swap_bytes,
               finish_time=applied[2] if applied else end, tail=tail)
    return finished, end, stalled, plan, applied


def _oracle_write(out, line: dict) -> None:
    """One oracle line to `out`: its JSON to a text file; to a reader that takes the lines as
    they come (a `line` method: servers/vllm/compare.py), the dict itself, no JSON between. The
    dict holds str keys, ints, None and lists, so its JSON read back is equal to it."""
    take = getattr(out, "line", None)
    if take is not None:
        take(line)
    else:
        out.write(dumps_strict(line) + "\n")


def _record_idle(rec, step, clock, dt, pool, arrived, caching, oracle_out, tail=None):
    # in Recorder.STEP_COLUMNS' order
    rec.step_rows.append((step, clock, clock + dt, 0, 0, 0, 0, 0, 0, 0, pool.num_free, pool.num_free,
                          pool.num_cached_free if caching else None, 0, 0, len(arrived), True, 0.0))
    if oracle_out is not None:
        line = {"step": step, "arrived": arrived, "scheduled": {}, "computed_before": {}, "sampled": [],
                "preempted": [], "finished": [], "free_blocks": pool.num_free,
                "free_blocks_after_schedule": pool.num_free, "running": [], "waiting": [], "idle": True}
        if tail:
            line.update(tail)
        _oracle_write(oracle_out, line)


def _record_step(rec, sched, plan: StepPlan, finished, step, start, end, arrived, info, caching, oracle_out,
                 swap_bytes, finish_time, tail=None):
    pool = sched.pool
    ents = plan.entries
    prefill, decode, recompute = rec.entries(ents, step, start, end, info)
    for seq in plan.admitted:
        d = info[seq.id]
        kind = "resume" if d.get("preemptions") else "admit"
        rec.event(step, start, seq.id, kind, f"slot {seq.slot}")
        d["slot"] = seq.slot
        if plan.swapped_in_bytes and kind == "resume" and d.get("swapped"):
            rec.event(step, start, seq.id, "swap_in", "")
            d["swapped"] = False
    for seq in plan.preempted:
        d = info[seq.id]
        d["preemptions"] = d.get("preemptions", 0) + 1
        if seq.swapped_blocks:
            d["swapped"] = True
            rec.event(step, start, seq.id, "preempt", f"swap out {seq.swapped_blocks} blocks")
            rec.event(step, start, seq.id, "swap_out", f"{seq.swapped_blocks} blocks")
        else:
            rec.event(step, start, seq.id, "preempt", f"recompute {seq.recompute_until} tokens")
    for seq in finished:
        d = info[seq.id]
        d["finish_step"] = step
        d["finish_time"] = finish_time
        d["output_tokens"] = seq.num_output
        d["finish_reason"] = "length"
        rec.event(step, finish_time, seq.id, "finish", f"{seq.num_output} tokens")
    rec.step_rows.append((step, start, end, plan.num_tokens, prefill, decode, recompute, len(ents), len(sched.running),
                          len(sched.waiting), pool.num_free, plan.free_after_schedule,
                          pool.num_cached_free if caching else None, len(plan.preempted), len(finished),
                          len(arrived), False, swap_bytes))   # Recorder.STEP_COLUMNS' order
    if oracle_out is not None:
        line = {"step": step, "arrived": arrived,
                "scheduled": {e.seq.id: e.tokens for e in ents},
                "computed_before": {e.seq.id: e.computed_before for e in ents},
                "sampled": [e.seq.id for e in ents if e.sampled],
                "preempted": [s.id for s in plan.preempted],
                "finished": [s.id for s in finished],
                "free_blocks": pool.num_free, "free_blocks_after_schedule": plan.free_after_schedule,
                "running": [s.id for s in sched.running], "waiting": [s.id for s in sched.waiting]}
        if caching:
            line["cached_free_blocks"] = pool.num_cached_free
        if tail:
            line.update(tail)
        _oracle_write(oracle_out, line)


def _request_rows(reqs, info: dict) -> dict:
    """The requests table's columns: each request's workload fields and what the run noted."""
    none = RequestInfo()
    ds = [info.get(r.id, none) for r in reqs]
    rows = {"request": [r.id for r in reqs], "tenant": [r.tenant for r in reqs],
            "priority": [r.priority for r in reqs], "prompt_len": [r.prompt_len for r in reqs],
            "max_tokens": [r.max_tokens for r in reqs],
            "preemptions": [d.get("preemptions", 0) for d in ds],
            "recomputed_tokens": [d.get("recomputed_tokens", 0) for d in ds],
            "rejected": [d.get("rejected", False) for d in ds],
            "finish_reason": ["rejected" if d.get("rejected") else d.get("finish_reason", "") for d in ds]}
    for k in ("arrival_step", "arrival_time", "first_scheduled_step", "first_scheduled_time", "first_token_step",
              "first_token_time", "finish_step", "finish_time", "output_tokens", "cached_tokens", "slot"):
        rows[k] = [d.get(k) for d in ds]
    return rows


def _build_trace(reqs, cfg, mode, rec: Recorder, pool, meta: dict, take_log: bool = False) -> Trace:
    requests = table_from_columns("requests", _request_rows(reqs, rec.info))
    step_cols = rec.step_arrays(take=take_log)
    for k, v in rec.extras.items():
        step_cols[k] = np.asarray([np.nan if x is None else x for x in v], dtype=np.float64)
    steps = table_from_columns("steps", step_cols)
    batch = table_from_columns("batch", rec.take_batch())
    events = table_from_columns("events", rec.events)
    counters = table_from_columns("counters", rec.counters)
    k_step, k_block, k_req, k_op, k_names = pool.log_columns(take=take_log)
    kv = kv_table(k_step, k_block, categorical(k_req, k_names), k_op)
    return Trace(requests=requests, steps=steps, batch=batch, events=events, kv=kv, counters=counters,
                 meta=_trace_meta(cfg, mode, meta, len(reqs)))


def _trace_meta(cfg, mode, meta: dict, num_requests: int) -> dict:
    return {"source": meta.get("source"), "scheduler": mode, "time_unit": meta.get("time_unit"),
            **{k: v for k, v in meta.items() if k not in ("source", "time_unit", "workload")},
            "config": cfg.to_dict(), "num_blocks": cfg.num_gpu_blocks, "block_size": cfg.block_size,
            "workload": meta.get("workload", ""), "num_requests": num_requests}


def oracle_jsonl(workload: Workload, config: dict | None = None) -> str:
    """The per-step JSONL the vLLM oracle writes, from this simulator."""
    import io
    buf = io.StringIO()
    simulate(workload, config, oracle_out=buf)
    return buf.getvalue()


