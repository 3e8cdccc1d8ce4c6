"""Read a recording of a vLLM server's steps (recorder.py) into a Trace, a workload, oracle lines.

    rec = read_recording("steps.jsonl")      # a path (.gz too), bytes or a binary file object
    trace = to_trace(rec)                    # source "vllm", times in ms since the recorder started
    wl = to_workload(rec)                    # `sim trace` of it reproduces the recording step for step
    lines = oracle_lines(rec)                # the recorded steps in the oracle's JSON-lines format

Reading never raises on content it can partly read: a cut last line (a killed server), a
damaged line, lines of another recorder version are skipped and said in rec.warnings. A file
that is no recording at all raises ValueError with a plain message.

How the Trace is filled, as the simulator fills it:
- a batch entry's kind is the simulator's: "recompute" while a preempted request computes again
  what it had computed, "decode" once its prompt is done and it has sampled, else "prefill";
- slots (lanes) are given as the simulator gives them: the lowest free one on admission, given
  back on preemption and finish;
- the KV block map comes from the block ids the recorder saw each request take; a preempted or
  finished request gives back every block it held (vLLM frees the tail block first);
- a step's start is its schedule() call, its end the end of its update_from_output(); the
  phases (t_schedule, t_model, t_update) are the three spans between the four times;
- a request arrives when the scheduler got it (its `received_time` is the front end's).
"""
from __future__ import annotations

import functools
import gzip
import io
import itertools
import json
import os
import random
import zlib
from dataclasses import dataclass, field
from typing import Callable

import numpy as np

from sim import versions
from sim.inputs import check_config
from sim.trace import Trace, kv_table, table_from_columns
from sim.workload import MIN_TOKEN_ID, VOCAB_SIZE, Request, Workload

from .format import FORMAT, RECORDED_WITH, VERSION

SOURCE = "vllm"
PHASES = ("t_schedule", "t_model", "t_update")
# the header's settings that are the simulator's (SchedulerConfig) knobs, by the same names
CONFIG_KEYS = ("num_gpu_blocks", "block_size", "max_num_batched_tokens", "max_num_seqs", "policy",
               "enable_prefix_caching", "long_prefill_token_threshold", "enable_chunked_prefill",
               "max_model_len", "scheduler_reserve_full_isl", "watermark")
ORACLE_FIELDS = ("scheduled", "computed_before", "sampled", "preempted", "finished", "free_blocks",
                 "free_blocks_after_schedule", "cached_free_blocks", "running", "waiting")
MAX_WARNINGS = 30
HEADER_MAX = 1 << 16   # a header line is a few hundred bytes
MAX_BAD_LINES = 100_000   # lines that are not JSON objects before reading stops (a recorder writes none)
MAX_TEXT_BYTES = 1 << 30   # of (unzipped) text read from one recording
LINE_KINDS = frozenset(("step", "add", "finish", "end", "header", "rotate"))   # what the recorder writes
MAX_LINE_BYTES = 64 << 20   # one line (an add line holds its prompt's ids: 10M tokens fit)
ProgressFn = Callable[[int, int | None], None]


@dataclass
class Recording:
    header: dict
    adds: list[dict] = field(default_factory=list)      # in the order the scheduler got them
    steps: list[dict] = field(default_factory=list)
    finishes: list[dict] = field(default_factory=list)  # requests finished outside a step (aborts)
    warnings: list[str] = field(default_factory=list)
    # the recorder closed the file; vLLM's engine is mostly killed before its scheduler can (every
    # line is flushed as it is written, so nothing is lost: this only says how the run ended)
    ended: bool = False
    name: str = ""

    @property
    def config(self) -> dict:
        return dict(self.header.get("config") or {})

    @property
    def continues_earlier(self) -> bool:
        """A file begun by rotation: requests added before it lack their history."""
        return int(self.header.get("part") or 1) > 1

    def warn(self, msg: str) -> None:
        if msg not in self.warnings and len(self.warnings) < MAX_WARNINGS:
            self.warnings.append(msg)


# ---------------------------------------------------------------------------------------------
# Reading
# ---------------------------------------------------------------------------------------------

def _open(source):
    """(binary stream, total bytes or None, name)."""
    if isinstance(source, (str, os.PathLike)):
        path = os.fspath(source)
        f = open(path, "rb")
        total = os.path.getsize(path)
        name = os.path.basename(path)
    elif isinstance(source, (bytes, bytearray, memoryview)):
        f, total, name = io.BytesIO(bytes(source)), len(source), ""
    elif hasattr(source, "read"):
        f, total, name = source, None, getattr(source, "name", "") or ""
    else:
        raise TypeError("a recording is a path, bytes or a binary file object")
    head = f.read(2)
    if isinstance(head, str):
        raise TypeError("open the recording in binary mode")
    rest = f
    if head == b"\x1f\x8b":
        rest = gzip.GzipFile(fileobj=_Prepend(head, f))
        total = None
    else:
        rest = _Prepend(head, f)
    return rest, total, str(name)


class _Prepend(io.RawIOBase):
    """A stream with its first bytes (already read to sniff gzip) put back."""

    def __init__(self, head: bytes, f):
        self.head, self.f = head, f

    def readable(self) -> bool:
        return True

    def readinto(self, b) -> int:
        if self.head:
            n = min(len(b), len(self.head))
            b[:n] = self.head[:n]
            self.head = self.head[n:]
            return n
        data = self.f.read(len(b))
        b[:len(data)] = data
        return len(data)


def read_recording(source, *, progress: ProgressFn | None = None, name: str | None = None) -> Recording:
    """Parse a recording (see the module's docstring). ValueError when it is none."""
    f, total, fname = _open(source)
    stream = io.BufferedReader(f, 1 << 20) if not isinstance(f, gzip.GzipFile) else f
    rec: Recording | None = None
    done = 0
    bad = 0
    lineno = 0
    last_bad = None
    try:
        first = stream.readline(HEADER_MAX)
        if len(first) >= HEADER_MAX and not first.endswith(b"\n"):
            raise ValueError(_not_a_recording(first) if "binary" in _not_a_recording(first) else
                             f"the first line is over {HEADER_MAX >> 10} KiB: not a recording's header")
        # lines read with a bound: a gzip bomb of one endless line would otherwise fill the memory
        for raw in itertools.chain((first,) if first else (), iter(functools.partial(stream.readline, MAX_LINE_BYTES), b"")):
            lineno += 1
            done += len(raw)
            if len(raw) >= MAX_LINE_BYTES and not raw.endswith(b"\n"):
                rec.warn(f"a line is over {MAX_LINE_BYTES >> 20} MiB (no recorder line is): reading stopped there")
                break
            if progress is not None and lineno % 20000 == 0:
                progress(done, total)
            if bad > MAX_BAD_LINES:   # junk (a file of blank lines reads at 10-45 us a line): stop
                rec.warn(f"over {MAX_BAD_LINES:,} lines are not JSON objects: reading stopped there")
                break
            if done > MAX_TEXT_BYTES:   # a gzip bomb (a 64 MB upload can unzip to 64 GB)
                rec.warn(f"the recording is over {MAX_TEXT_BYTES / 2**30:g} GiB of text: only its first "
                         f"{MAX_TEXT_BYTES / 2**30:g} GiB are read")
                break
            try:
                obj = json.loads(raw) if not raw.isspace() else None
            except (ValueError, UnicodeDecodeError, RecursionError):
                if rec is None:
                    raise ValueError(_not_a_recording(raw)) from None
                bad += 1
                last_bad = (lineno, raw.endswith(b"\n"))
                continue
            if rec is None:
                rec = _start(obj, raw)
                continue
            if not isinstance(obj, dict) or obj.get("kind") not in LINE_KINDS:
                bad += 1
                continue
            try:
                _take(rec, obj)
            except _StopReading:
                break
    except (OSError, EOFError, zlib.error) as e:
        if rec is None:
            raise ValueError(f"the file could not be read: {e}") from None
        rec.warn(f"the file stops early ({type(e).__name__}: {e}); what was read is shown")
    if rec is None:
        raise ValueError("the file is empty: no recording header")
    if last_bad is not None and last_bad[0] == lineno and not last_bad[1]:
        bad -= 1
        rec.warn("the last line is cut (the server was killed while writing?): it is left out")
    if bad:
        rec.warn(f"{bad} line(s) that are not JSON objects of the recorder's kinds were skipped")
    if progress is not None:
        progress(done, total)
    rec.name = name or fname
    return rec


def _not_a_recording(raw: bytes) -> str:
    head = raw[:256]
    try:
        head.decode("utf-8")
        text = b"\x00" not in head
    except UnicodeDecodeError as e:
        text = e.start >= len(head) - 3   # only a character cut at the end of the window
    if not text:
        return "this is a binary file, not a vLLM step recording (JSON lines)"
    return ("this is not a vLLM step recording: its first line should be the recorder's JSON header "
            f"(\"format\": \"{FORMAT}\")")


def _start(obj, raw: bytes) -> Recording:
    if not isinstance(obj, dict) or obj.get("kind") != "header" or obj.get("format") != FORMAT:
        if isinstance(obj, dict) and "requests" in obj:
            raise ValueError("this is a workload file, not a vLLM step recording: open it on Playback")
        if isinstance(obj, dict) and "step" in obj and "scheduled" in obj:
            raise ValueError("this is an oracle trace (sim trace's JSON lines), not a vLLM step recording")
        raise ValueError(_not_a_recording(raw))
    rec = Recording(header=obj)
    v = obj.get("version")
    if not isinstance(v, int) or v > VERSION:
        rec.warn(f"recorded by a newer recorder (format version {v}; this reader knows {VERSION}): "
                 "fields it does not know are ignored")
    if obj.get("vllm") != RECORDED_WITH:
        try:   # the simulator's rules follow the header's version (mode_config); the recorder's reads do not
            ruled = f"re-simulated with vLLM {versions.normalize(str(obj.get('vllm')))}'s rules"
        except ValueError:
            ruled = "the simulator has no rules for that version"
        rec.warn(f"recorded with vLLM {obj.get('vllm')}; the recorder was built and checked inside vLLM "
                 f"{RECORDED_WITH}, so what it read of this version's scheduler is unchecked ({ruled})")
    if not isinstance(obj.get("config"), dict):
        rec.warn("the header has no scheduler settings: the recording cannot be re-simulated")
        obj["config"] = {}
    try:   # the settings the simulator takes from it: of the types and ranges an upload must have
        check_config({k: obj["config"][k] for k in CONFIG_KEYS if k in obj["config"]})
    except ValueError as e:
        raise ValueError(f"the recording's header is damaged: {e}") from None
    return rec


def _take(rec: Recording, obj: dict) -> None:
    kind = obj.get("kind")
    try:
        if kind == "step":
            if obj.get("step") is None:
                return   # an update of a step made before the recorder started
            for k in ("running", "waiting"):   # left out: the same as the step before's
                if k not in obj:
                    obj[k] = rec.steps[-1][k] if rec.steps else []
            rec.steps.append(_clean_step(obj))
        elif kind == "add":
            rec.adds.append(_clean_add(obj))
        elif kind == "finish":
            obj.update(i=_int(obj["i"]), reason=str(obj.get("reason")), t=_num(obj.get("t")),
                       after_step=_int(obj.get("after_step") or 0))
            rec.finishes.append(obj)
        elif kind == "end":
            rec.ended = True
        elif kind == "header":
            rec.warn("a second header: the file holds more than one server run; only the first is read")
            raise _StopReading
        elif kind == "rotate":
            rec.ended = True
            rec.warn("the recorder rotated this file: the steps after it are in the next file")
    except (KeyError, TypeError, ValueError, OverflowError):
        rec.warn(f"a {str(kind)[:20]!r} line is damaged or of another format: skipped")


class _StopReading(Exception):
    pass


_INT_MAX = 2**53   # counts, ids, block numbers: past this the Trace's columns (float64 on the way) would round them


def _int(v) -> int:
    x = int(v)
    if not -_INT_MAX <= x <= _INT_MAX:
        raise ValueError("a number out of range")
    return x


def _ints(v) -> list[int]:
    if not isinstance(v, list):
        raise TypeError("not a list")
    return [_int(x) for x in v]


def _clean_step(obj: dict) -> dict:
    """A step line with every field the reader uses of the type it uses (TypeError/ValueError:
    the line is damaged)."""
    obj["step"] = _int(obj["step"])
    obj["sched"] = [(_int(i), _int(n), _int(cb)) for i, n, cb in obj.get("sched") or ()]
    for k in ("sampled", "pre", "running", "waiting"):
        obj[k] = _ints(obj.get(k) or [])
    obj["fin"] = [(_int(i), str(why)) for i, why in obj.get("fin") or ()]
    obj["blocks"] = [(_int(i), _ints(ids)) for i, ids in obj.get("blocks") or ()]
    t = list(obj.get("t") or [])[:4]
    obj["t"] = [_num(x) for x in t + [None] * (4 - len(t))]
    for k in ("free", "free_sched", "cached_free", "waiting_n"):
        if obj.get(k) is not None:
            obj[k] = _int(obj[k])
        else:
            obj.pop(k, None)   # null is "not recorded", as a missing key
    return obj


def _clean_add(obj: dict) -> dict:
    obj.update(i=_int(obj["i"]), id=str(obj["id"]), prompt_len=_int(obj["prompt_len"]),
               max_tokens=_int(obj["max_tokens"]), priority=_int(obj.get("priority") or 0),
               before_step=_int(obj.get("before_step") or 1), added=_num(obj.get("added")),
               arrival=_num(obj.get("arrival")))
    if obj.get("prompt") is not None:
        obj["prompt"] = _ints(obj["prompt"])
        if len(obj["prompt"]) != obj["prompt_len"]:
            raise ValueError("prompt length")
    if obj.get("hashes") is not None:
        obj["hashes"] = [str(h) for h in obj["hashes"]]
        for h in obj["hashes"]:
            int(h, 16)
    if obj["prompt_len"] < 0 or obj["max_tokens"] < 0:
        raise ValueError("negative length")
    return obj


# ---------------------------------------------------------------------------------------------
# Replaying the recording: per step, what happened to each request
# ---------------------------------------------------------------------------------------------

class _Req:
    __slots__ = ("add", "computed", "recompute_until", "n_out", "slot", "running", "blocks", "d")

    def __init__(self, add: dict):
        self.add = add
        self.computed = 0
        self.recompute_until = 0
        self.n_out = 0
        self.slot = None
        self.running = False
        self.blocks: list[int] = []
        self.d: dict = {}


def _kind(r: _Req, n: int, before: int) -> tuple[str, int]:
    """The simulator's entry kind (sim.scheduler._entry) and the recomputed tokens in it."""
    if before < r.recompute_until:
        return "recompute", min(before + n, r.recompute_until) - before
    if before >= r.add["prompt_len"] and r.n_out > 0:
        return "decode", 0
    return "prefill", 0


def to_trace(rec: Recording) -> Trace:
    """The recording as the standard Trace (see the module's docstring)."""
    reqs = {a["i"]: _Req(a) for a in rec.adds}
    ident = {i: r.add["id"] for i, r in reqs.items()}
    arrivals: dict[int, list[int]] = {}
    for a in rec.adds:
        arrivals.setdefault(int(a.get("before_step") or 1), []).append(a["i"])
    b_rows, s_rows, phases = [], [], {p: [] for p in PHASES}
    ev = {k: [] for k in ("step", "time", "request", "kind", "detail")}
    kv_s, kv_b, kv_r, kv_o = [], [], [], []
    free_slots: list[int] = []
    next_slot = 0

    def event(step, t, i, kind, detail=""):
        ev["step"].append(step)
        ev["time"].append(t)
        ev["request"].append(ident.get(i, "") if i is not None else "")
        ev["kind"].append(kind)
        ev["detail"].append(detail)

    def release(step, r: _Req, i: int):
        for b in reversed(r.blocks):   # vLLM frees a request's blocks tail first
            kv_s.append(step)
            kv_b.append(b)
            kv_r.append(ident[i])
            kv_o.append(2)
        r.blocks = []

    for a in rec.adds:
        event(int(a.get("before_step") or 1), _num(a.get("added")), a["i"], "arrive",
              f"{a['prompt_len']} prompt tokens")
    outside = sorted(rec.finishes, key=lambda f: f.get("after_step") or 0)
    fi = 0
    missing = 0
    for st in rec.steps:
        k = int(st["step"])
        t0, t1, t2, t3 = (list(st.get("t") or []) + [None] * 4)[:4]
        start, end = _num(t0), _num(t3)
        while fi < len(outside) and (outside[fi].get("after_step") or 0) < k:
            f = outside[fi]
            fi += 1
            r = reqs.get(int(f["i"]))
            if r is None:
                continue
            _finish(r, f, None, _num(f.get("t")), k - 1, event, release, free_slots, int(f["i"]))
        for i in st.get("pre") or ():
            r = reqs.get(i)
            if r is None:
                missing += 1
                continue
            r.recompute_until = max(r.recompute_until, r.computed)
            r.computed = 0
            if r.running:
                free_slots.append(r.slot)
            r.running = False
            r.d["preemptions"] = r.d.get("preemptions", 0) + 1
            release(k, r, i)
            event(k, start, i, "preempt", f"recompute {r.recompute_until} tokens")
        new_blocks = {int(i): ids for i, ids in st.get("blocks") or ()}
        sampled = set(st.get("sampled") or ())
        prefill = decode = recompute = 0
        for i, n, before in st["sched"]:
            r = reqs.get(i)
            if r is None:
                missing += 1
                continue
            if not r.running:
                if free_slots:
                    r.slot = min(free_slots)
                    free_slots.remove(r.slot)
                else:
                    r.slot, next_slot = next_slot, next_slot + 1
                r.running = True
                event(k, start, i, "resume" if r.d.get("preemptions") else "admit", f"slot {r.slot}")
            kind, redo = _kind(r, n, before)
            b_rows.append((k, ident[i], r.slot, kind, n, before, i in sampled))
            d = r.d
            if kind == "decode":
                decode += n
            elif kind == "recompute":
                recompute += n
                d["recomputed_tokens"] = d.get("recomputed_tokens", 0) + redo
            else:
                prefill += n
            if "first_scheduled_step" not in d:
                d["first_scheduled_step"], d["first_scheduled_time"], d["cached_tokens"] = k, start, before
            r.computed = before + n
            if i in sampled:
                r.n_out += 1
                if "first_token_step" not in d:
                    d["first_token_step"], d["first_token_time"] = k, end
            for b in new_blocks.get(i, ()):
                r.blocks.append(int(b))
                kv_s.append(k)
                kv_b.append(int(b))
                kv_r.append(ident[i])
                kv_o.append(1)
        fin = st.get("fin") or ()
        for i, reason in fin:
            r = reqs.get(i)
            if r is not None:
                _finish(r, {"reason": reason}, k, end, k, event, release, free_slots, i)
        idle = False   # as the simulator: a schedule() call, if an empty one (see oracle_lines)
        s_rows.append((k, start, end, prefill + decode + recompute, prefill, decode, recompute, len(st["sched"]),
                       len(st.get("running") or ()), int(st.get("waiting_n", len(st.get("waiting") or ()))),
                       st.get("free"), st.get("free_sched"), st.get("cached_free"), len(st.get("pre") or ()),
                       len(fin), len(arrivals.get(k, ())), idle, 0.0))
        for p, (a, b) in zip(PHASES, ((t0, t1), (t1, t2), (t2, t3))):
            phases[p].append(np.nan if a is None or b is None else float(b) - float(a))
    if missing:
        rec.warn(f"{missing} step entries name requests the recording never added (it continues an earlier "
                 "file?): left out")
    return _build(rec, reqs, b_rows, s_rows, phases, ev, (kv_s, kv_b, kv_r, kv_o))


def _finish(r: _Req, f: dict, step, t, ev_step, event, release, free_slots, i) -> None:
    d = r.d
    d["finish_step"], d["finish_time"] = step, t
    d["finish_reason"] = str(f.get("reason") or "unknown")
    if r.running:
        free_slots.append(r.slot)
        r.running = False
    release(ev_step, r, i)
    event(ev_step, t, i, "finish", f"{d['finish_reason']}, {r.n_out} tokens")


def _num(v):
    if v is None:
        return None
    x = float(v)
    if x != x or x in (float("inf"), float("-inf")):
        raise ValueError("not a finite number")
    return x


def _build(rec, reqs, b_rows, s_rows, phases, ev, kv) -> Trace:
    names = ("step", "request", "slot", "kind", "tokens", "computed_before", "sampled")
    batch = table_from_columns("batch", {c: [row[j] for row in b_rows] for j, c in enumerate(names)})
    snames = ("step", "start", "end", "num_tokens", "prefill_tokens", "decode_tokens", "recompute_tokens", "num_seqs",
              "running", "waiting", "free_blocks", "free_blocks_after_schedule", "cached_free_blocks", "preempted",
              "finished", "arrived", "idle", "swap_bytes")
    cols = {c: [row[j] for row in s_rows] for j, c in enumerate(snames)}
    cols["start"] = np.array(cols["start"], dtype=float)   # None (unknown) becomes NaN
    cols["end"] = np.array(cols["end"], dtype=float)
    starts = cols["start"]
    period = np.append(np.diff(starts), np.nan) if len(starts) else np.zeros(0)
    steps = table_from_columns("steps", {**cols, **{p: np.asarray(v, dtype=float) for p, v in phases.items()},
                                         "period_ms": period})
    rows = list(reqs.values())
    d = [r.d for r in rows]
    requests = table_from_columns("requests", {
        "request": [r.add["id"] for r in rows], "tenant": ["default"] * len(rows),
        "priority": [int(r.add.get("priority") or 0) for r in rows],
        "prompt_len": [r.add["prompt_len"] for r in rows], "max_tokens": [r.add["max_tokens"] for r in rows],
        "arrival_step": [max(int(r.add.get("before_step") or 1) - 1, 0) for r in rows],
        "arrival_time": [_num(r.add.get("added")) for r in rows],
        **{k: [x.get(k) for x in d] for k in ("first_scheduled_step", "first_scheduled_time", "first_token_step",
                                                "first_token_time", "finish_step", "finish_time", "cached_tokens")},
        "output_tokens": [r.n_out for r in rows],
        "preemptions": [x.get("preemptions", 0) for x in d],
        "recomputed_tokens": [x.get("recomputed_tokens", 0) for x in d],
        "rejected": [False] * len(rows), "finish_reason": [x.get("finish_reason", "") for x in d],
        "slot": [r.slot for r in rows],
        "received_time": np.array([_num(r.add.get("arrival")) for r in rows], dtype=float)})
    events = table_from_columns("events", ev)
    if len(events):
        events = events.iloc[np.argsort(events["step"].to_numpy(), kind="stable")].reset_index(drop=True)
    cfg = rec.config
    h = rec.header
    meta = {"source": SOURCE, "name": rec.name, "time_unit": "ms", "time_origin": "recorder start",
            "scheduler": "vllm", "vllm_version": h.get("vllm"), "scheduler_class": h.get("scheduler_class"),
            "started_unix": h.get("started_unix"), "async_scheduling": bool(cfg.get("async_scheduling")),
            "config": {k: cfg[k] for k in CONFIG_KEYS if k in cfg}, "num_blocks": cfg.get("num_gpu_blocks"),
            "block_size": cfg.get("block_size"), "prompts": h.get("prompts"), "ended": rec.ended,
            "block_ids": bool(h.get("block_ids")), "continues_earlier": rec.continues_earlier,
            "warnings": list(rec.warnings), "num_requests": len(rows), "phases": list(PHASES)}
    return Trace(requests=requests, steps=steps, batch=batch, events=events, kv=kv_table(*kv),
                 counters=table_from_columns("counters", {"step": [], "tenant": [], "value": []}), meta=meta)


# ---------------------------------------------------------------------------------------------
# The recording as the oracle's lines, and as a workload to re-simulate
# ---------------------------------------------------------------------------------------------

def oracle_lines(rec: Recording) -> list[dict]:
    """The recorded steps in the oracle's JSON-lines format (`sim trace`'s), request ids as vLLM's.
    A step that scheduled nothing is the engine's one more schedule() after the last finish,
    before it idles (the simulator makes the same step, not marked idle: the oracle's idle is a
    step the engine never scheduled); trailing ones are left out, since the simulator stops at
    the last finish."""
    ident = {a["i"]: a["id"] for a in rec.adds}
    arrivals: dict[int, list[str]] = {}
    for a in rec.adds:
        arrivals.setdefault(int(a.get("before_step") or 1), []).append(a["id"])
    caching = bool(rec.header.get("cached_free_blocks"))
    out = []
    for st in rec.steps:
        k = int(st["step"])
        line = {"step": k, "arrived": arrivals.get(k, []),
                "scheduled": {ident.get(i, str(i)): n for i, n, _ in st["sched"]},
                "computed_before": {ident.get(i, str(i)): cb for i, _, cb in st["sched"]},
                "sampled": [ident.get(i, str(i)) for i in st.get("sampled") or ()],
                "preempted": [ident.get(i, str(i)) for i in st.get("pre") or ()],
                "finished": [ident.get(i, str(i)) for i, _ in st.get("fin") or ()],
                "free_blocks": st.get("free"), "free_blocks_after_schedule": st.get("free_sched"),
                "running": [ident.get(i, str(i)) for i in st.get("running") or ()],
                "waiting": [ident.get(i, str(i)) for i in st.get("waiting") or ()]}
        if caching and "cached_free" in st:
            line["cached_free_blocks"] = st["cached_free"]
        out.append(line)   # never "idle" in the oracle's sense: every recorded step is a schedule() call
    while out and not out[-1]["scheduled"]:
        out.pop()
    return out


def _prompt_ids(a: dict, block_size: int):
    """The prompt's token ids: as recorded, or made from its block hashes (equal hash chains give
    equal blocks, so prefix-cache hits land where they landed; the partial last block is the
    request's own), or None (no prompt stored)."""
    if a.get("prompt") is not None:
        return tuple(int(t) for t in a["prompt"])
    hashes = a.get("hashes")
    if hashes is None:
        return None
    ids: list[int] = []
    for h in hashes[: a["prompt_len"] // block_size]:
        rng = random.Random(int(h, 16))
        ids += [rng.randrange(MIN_TOKEN_ID, VOCAB_SIZE) for _ in range(block_size)]
    rng = random.Random((1 << 42) + zlib.crc32(str(a["id"]).encode()))
    ids += [rng.randrange(MIN_TOKEN_ID, VOCAB_SIZE) for _ in range(a["prompt_len"] - len(ids))]
    return tuple(ids)


def mode_config(rec: Recording) -> dict:
    """The simulator settings a recording's header picks: `vllm_version` (the rules of the vLLM
    that ran, sim/versions.py) and `async_scheduling` (the scheduler's class). ValueError with one
    sentence for a vLLM the simulator has no rules for; a header without a version (a recorder
    that could not read it) keeps the newest rules."""
    out = {}
    v = rec.header.get("vllm")
    if v not in (None, "", "unknown"):
        try:
            out["vllm_version"] = versions.normalize(str(v))
        except ValueError:
            raise ValueError(f"this recording is of vLLM {v}, and the simulator has rules for vLLM "
                             f"{', '.join(versions.VERSIONS)} only: it can be played back but not "
                             f"re-simulated") from None
    if is_async(rec):
        out["async_scheduling"] = True
    return out


def is_async(rec: Recording) -> bool:
    """Whether vLLM's AsyncScheduler made the recording: the recorder's class says so (the one
    the user named with --scheduler-cls); a header without one falls back on the setting."""
    cls = rec.header.get("scheduler_class")
    if cls:
        return "Async" in str(cls)
    return bool(rec.config.get("async_scheduling"))


def engine_calls_before(rec: Recording) -> Callable[[int], int]:
    """Async recordings: for schedule() call k, the engine calls before it (k - 1 schedule calls
    and the drain calls among them). The recorder counts schedule() calls; the simulator counts every
    call of step_with_batch_queue (sim/async_sched.py), and a drain call (an output applied with
    nothing to schedule: the end of a busy period) is one. A step's output applied before the next
    schedule() began was drained, unless it was applied in the call that scheduled it (the queue
    was empty, nothing was scheduled). Without times no drain is counted."""
    steps = [st for st in rec.steps if st.get("step") is not None]
    out, drains, prev_applied_early = {}, 0, True
    for j, st in enumerate(steps):
        k = int(st["step"])
        out[k] = k - 1 + drains
        nxt = steps[j + 1] if j + 1 < len(steps) else None
        t, tn = st.get("t") or [None] * 4, (nxt.get("t") if nxt else None) or [None] * 4
        applied_early = t[2] is not None and tn[0] is not None and t[2] < tn[0]
        fell_through = prev_applied_early and not st.get("sched")
        if applied_early and not fell_through:
            drains += 1
        prev_applied_early = applied_early
    return lambda k: out.get(k, k - 1 + drains)


def to_workload(rec: Recording, *, timed: bool = False) -> Workload:
    """The recorded requests as a workload with the server's config. Each arrives right before the
    step it was added in (arrival_step = that step - 1), or, timed, at the time the scheduler got
    it (ms since the recorder started: run it with a cost model in ms). A request that stopped
    on its own (EOS, a stop string) or was aborted asks for the tokens it made."""
    cfg = rec.config
    config = {k: cfg[k] for k in CONFIG_KEYS if k in cfg}
    config.update(mode_config(rec))
    produced: dict[int, int] = {}
    reason: dict[int, str] = {}
    for st in rec.steps:
        for i in st.get("sampled") or ():
            produced[i] = produced.get(i, 0) + 1
        for i, why in st.get("fin") or ():
            reason[i] = why
    for f in rec.finishes:
        reason[int(f["i"])] = str(f.get("reason"))
    bs = int(cfg.get("block_size") or 16)
    # async: a request added before schedule() call k joins before the engine call that made it
    calls = engine_calls_before(rec) if config.get("async_scheduling") else (lambda k: k - 1)
    reqs = []
    for a in rec.adds:
        i = a["i"]
        mt = a["max_tokens"]
        if reason.get(i) not in (None, "length") and produced.get(i):
            mt = produced[i]
        k = int(a.get("before_step") or 1)
        reqs.append(Request(id=str(a["id"]), prompt_len=a["prompt_len"], max_tokens=int(mt),
                            arrival_step=max(calls(k), 0),
                            arrival_time=_num(a.get("added")) if timed else None,
                            priority=int(a.get("priority") or 0), prompt_token_ids=_prompt_ids(a, bs)))
    if config.get("enable_prefix_caching") and any(r.prompt_token_ids is None for r in reqs):
        rec.warn("prompts were not recorded (SCHEDLAB_VLLM_PROMPTS=none): prefix-cache hits cannot be "
                 "re-simulated")
    return Workload(requests=reqs, config=config, name=f"{rec.name or 'vLLM recording'} (requests)")


def first_difference(recorded: list[dict], simulated: list[dict], fields=ORACLE_FIELDS) -> dict | None:
    """The first step where two oracle traces differ: {step, field, recorded, simulated}, or None.
    A field only one side has (cached_free_blocks without prefix caching) is not compared."""
    for a, b in zip(recorded, simulated):
        for f in fields:
            if f in a and f in b and a[f] != b[f]:
                return {"step": a["step"], "field": f, "recorded": a[f], "simulated": b[f]}
    if len(recorded) != len(simulated):
        n = min(len(recorded), len(simulated)) + 1
        return {"step": n, "field": "steps", "recorded": len(recorded), "simulated": len(simulated)}
    return None
