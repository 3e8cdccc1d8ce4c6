"""Read a recording of a vLLM server's steps (recorder.py) into a Trace, a workload, oracle lines.

    rec = read_recording("steps.jsonl")      # a path (.gz too), bytes or a binary file object
    trace = to_trace(rec)                    # source "vllm", times in ms since the recorder started
    wl = to_workload(rec)                    # `sim trace` of it reproduces the recording step for step
    lines = oracle_lines(rec)                # the recorded steps in the oracle's JSON-lines format

Reading never raises on content it can partly read: a cut last line (a killed server), a
damaged line, lines of another recorder version are skipped and said in rec.warnings. A file
that is no recording at all raises ValueError with a plain message.

Reading is one pass over the lines with bounded memory (servers/vllm/reader/): the steps are
held as columns and the Trace's tables are built as the lines come, so to_trace(rec) is a copy
of buffers, not a second pass. RecordingStream takes lines as a file grows (a server watched
live): its Trace so far at any point, equal to reading the same lines at once.

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

import random
import zlib
from array import array
from typing import Callable

from sim import versions
from sim.limits import shown
from sim.trace import Trace
from sim.workload import MIN_TOKEN_ID, VOCAB_SIZE, Request, Workload

from .format import UNVERSIONED
from .reader.lines import CONFIG_KEYS, LINE_KINDS, as_num
from .reader.replay import PHASES, SOURCE, TraceBuilder
from .reader.stream import Recording, RecordingRestarted, RecordingStream, read_all

__all__ = ["CONFIG_KEYS", "LINE_KINDS", "PHASES", "SOURCE", "Recording", "RecordingRestarted", "RecordingStream",
           "EngineCalls", "engine_calls_before", "first_difference", "is_async", "iter_oracle_lines", "mode_config", "oracle_lines",
           "read_recording",
           "to_trace", "to_workload"]

ORACLE_FIELDS = ("scheduled", "computed_before", "sampled", "preempted", "finished", "free_blocks",
                 "free_blocks_after_schedule", "cached_free_blocks", "running", "waiting")
# the reader's limits, read here at each call (a test may lower them)
HEADER_MAX = 1 << 16   # a header line is a few hundred bytes
MAX_BAD_LINES = 100_000   # lines that are not JSON objects before reading stops (a recorder writes none)
MAX_TEXT_BYTES = 1 << 30   # of (unzipped) text read from one recording: a gzip bomb stops there
MAX_LINE_BYTES = 64 << 20   # one line (an add line holds its prompt's ids: 10M tokens fit)
ProgressFn = Callable[[int, "int | None"], None]   # (bytes of the file read, its size or None)
_num = as_num


def read_recording(source, *, progress: ProgressFn | None = None, name: str | None = None,
                   max_text: int | None = None) -> Recording:
    """Parse a recording (see the module's docstring). ValueError when it is none.
    progress(done, total): bytes of the file read (compressed bytes of a .gz) and its size (None
    for a file object that cannot tell), about every MiB and once at the end. max_text: the most
    text (unzipped) read, MAX_TEXT_BYTES unless lower (a page bounds what an upload unzips to)."""
    cap = MAX_TEXT_BYTES if max_text is None else min(int(max_text), MAX_TEXT_BYTES)
    return read_all(source, progress=progress, name=name, max_text=cap, max_line=MAX_LINE_BYTES,
                    max_bad_lines=MAX_BAD_LINES, header_max=HEADER_MAX)


def to_trace(rec: Recording) -> Trace:
    """The recording as the standard Trace (see the module's docstring)."""
    if rec.builder is None:   # a Recording made by hand: replay it (every add first, as it always was)
        rec.builder = b = TraceBuilder()
        for a in rec.adds:
            b.add(a)
        for f in rec.finishes:
            b.finish_outside(f)
        for st in rec.steps:
            b.step(st, len(st.get("running") or ()), int(st.get("waiting_n", len(st.get("waiting") or ()))))
    return rec.builder.trace(rec)


# ---------------------------------------------------------------------------------------------
# The recording as the oracle's lines, and as a workload to re-simulate
# ---------------------------------------------------------------------------------------------

def oracle_lines(rec: Recording) -> list[dict]:
    """The recorded steps in the oracle's JSON-lines format (`sim trace`'s), request ids as vLLM's.
    A step that scheduled nothing is the engine's one more schedule() after the last finish,
    before it idles (the simulator makes the same step, not marked idle: the oracle's idle is a
    step the engine never scheduled); trailing ones are left out, since the simulator stops at
    the last finish."""
    return list(iter_oracle_lines(rec))


def iter_oracle_lines(rec: Recording):
    """oracle_lines(rec), one line at a time (a long recording's lines, held together, took
    gigabytes): a run of steps that scheduled nothing is held back until a step follows it."""
    ident = {a["i"]: a["id"] for a in rec.adds}
    arrivals: dict[int, list[str]] = {}
    for a in rec.adds:
        arrivals.setdefault(int(a.get("before_step") or 1), []).append(a["id"])
    caching = bool(rec.header.get("cached_free_blocks"))
    held = []
    for st in rec.steps:
        line = oracle_line(st, ident, arrivals, caching)
        held.append(line)
        if line["scheduled"]:
            yield from held
            held = []


def oracle_line(st: dict, ident: dict, arrivals: dict, caching: bool) -> dict:
    """One step dict (running / waiting filled in) as the oracle's line; ident: recorder index ->
    request id; arrivals: step -> ids added before it. Never "idle" in the oracle's sense: every
    recorded step is a schedule() call."""
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
    return line


# Token ids below SHARED_IDS are taken from one list of ints (made on first use: 9 MB), so that a
# long recording's prompts share one int object per id (a tuple of 27,000 prompts' ids made an
# object of 28 bytes for each token). 2**18 holds the vocabularies of Llama 3, Qwen 2 and Gemma.
SHARED_IDS = 1 << 18
_shared_ints: list[int] = []


def _shared(ids: array) -> tuple:
    """tuple(ids), each id below SHARED_IDS the shared int object."""
    if not ids or min(ids) < 0 or max(ids) >= SHARED_IDS:
        return tuple(ids)
    if not _shared_ints:
        _shared_ints.extend(range(SHARED_IDS))
    return tuple(map(_shared_ints.__getitem__, ids))


def _prompt_ids(a: dict, block_size: int):
    """The prompt's token ids: as recorded, or made from its block hashes (equal hash chains give
    equal blocks, so prefix-cache hits land where they landed; the partial last block is the
    request's own), or None (no prompt stored)."""
    p = a.get("prompt")
    if p is not None:   # the reader's array('q') of ints (clean_add), or a list a caller made
        return _shared(p) if isinstance(p, array) else tuple(int(t) for t in p)
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


# the settings a re-simulation cannot guess: without them its verdict would say nothing true
SIZING_KEYS = ("num_gpu_blocks", "block_size", "max_num_seqs", "max_num_batched_tokens")


def mode_config(rec: Recording) -> dict:
    """The simulator settings a recording's header picks: `vllm_version` (the rules of the vLLM
    that ran, sim/versions.py) and `async_scheduling` (the scheduler's class). ValueError with one
    sentence for a vLLM the simulator has no rules for, or a header without the pool's and the
    batch's sizes (SIZING_KEYS); a header without a version (a recorder that could not read it)
    keeps the newest rules (check_header says so)."""
    out = {}
    cfg = rec.config
    lacking = [k for k in SIZING_KEYS if cfg.get(k) is None]
    if lacking:
        what = ("has no scheduler settings" if len(lacking) == len(SIZING_KEYS)
                else f"does not give {', '.join(lacking)}")
        raise ValueError(f"the recording's header {what}: it can be played back but not re-simulated")
    v = rec.header.get("vllm")
    if v not in UNVERSIONED:
        try:
            out["vllm_version"] = versions.normalize(str(v))
        except ValueError:
            named = v if isinstance(v, str) and len(v) <= 40 else shown(v)
            raise ValueError(f"this recording is of vLLM {named}, whose scheduler the simulator does not "
                             f"reproduce (it follows vLLM {versions.named()}, and a later one by the newest "
                             f"of them): it can be played back but not re-simulated") from None
    if is_async(rec):
        out["async_scheduling"] = True
    return out


def is_async(rec: Recording) -> bool:
    """Whether vLLM's AsyncScheduler made the recording: the recorder's class says so (the one
    the user named with --scheduler-cls); a header without one falls back on the setting."""
    cls = rec.header.get("scheduler_class")
    if cls:
        return "Async" in str(cls)
    flag = rec.config.get("async_scheduling")
    return flag is True or (isinstance(flag, str) and flag.strip().lower() == "true")   # not bool("false")


def engine_calls_before(rec: Recording) -> Callable[[int], int]:
    """Async recordings: for schedule() call k, the engine calls before it (k - 1 schedule calls
    and the drain calls among them). The recorder counts schedule() calls; the simulator counts every
    call of step_with_batch_queue (sim/async_sched.py), and a drain call (an output applied with
    nothing to schedule: the end of a busy period) is one. A step's output applied before the next
    schedule() began was drained, unless it was applied in the call that scheduled it (the queue
    was empty, nothing was scheduled). Without times no drain is counted."""
    calls = EngineCalls()
    for st in rec.steps:
        calls.step(st)
    return calls


class EngineCalls:
    """engine_calls_before, step by step: step(st) for each step dict in order; calls(k) or
    self(k) then says the engine calls before schedule() call k for every k up to the last step
    given, and for a later k what the steps so far say (the last step's drain is known only
    when the next step's times come: it counts as none until then, as on the whole file)."""

    def __init__(self):
        self.out: dict[int, int] = {}
        self.drains = 0
        self.prev_applied_early = True
        self.last: dict | None = None   # the last step given: whether it was drained waits for the next

    def step(self, st: dict) -> None:
        if st.get("step") is None:
            return
        if self.last is not None:
            self._settle(self.last, st.get("t"))
        k = int(st["step"])
        self.out[k] = k - 1 + self.drains
        self.last = st

    def _settle(self, st: dict, t_next) -> None:
        t, tn = st.get("t") or [None] * 4, t_next or [None] * 4
        applied_early = t[2] is not None and tn[0] is not None and t[2] < tn[0]
        fell_through = self.prev_applied_early and not st.get("sched")
        if applied_early and not fell_through:
            self.drains += 1
        self.prev_applied_early = applied_early

    def __call__(self, k: int) -> int:
        return self.out.get(k, k - 1 + self.drains)

    calls = __call__


def to_workload(rec: Recording, *, timed: bool = False, mode: dict | None = None, ids: bool = True) -> Workload:
    """The recorded requests as a workload with the server's config. Each arrives right before the
    step it was added in (arrival_step = that step - 1), or, timed, at the time the scheduler got
    it (ms since the recorder started: run it with a cost model in ms). A request that stopped
    on its own (EOS, a stop string) or was aborted asks for the tokens it made. `mode`: the
    version and scheduling settings to use instead of the header's (mode_config). ids=False:
    no prompt token ids (a re-simulation without prefix caching reads none; a long recording's
    took gigabytes as tuples of ints)."""
    cfg = rec.config
    config = {k: cfg[k] for k in CONFIG_KEYS if k in cfg}
    config.update(mode_config(rec) if mode is None else mode)
    if getattr(rec.steps, "summarized", False):   # counted as the lines were read (reader/steps.py)
        produced, reason = rec.steps.sampled, dict(rec.steps.ended)
    else:
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
    reqs = [request_of(a, max_tokens(a["max_tokens"], reason.get(a["i"]), produced.get(a["i"], 0)),
                       max(calls(int(a.get("before_step") or 1)), 0), bs, timed, ids) for a in rec.adds]
    if config.get("enable_prefix_caching") and any(r.prompt_token_ids is None for r in reqs):
        rec.warn(NO_PROMPTS)
    return Workload(requests=reqs, config=config, name=f"{rec.name or 'vLLM recording'} (requests)")


NO_PROMPTS = "prompts were not recorded (SCHEDLAB_VLLM_PROMPTS=none): prefix-cache hits cannot be re-simulated"


def max_tokens(asked: int, reason: str | None, produced: int) -> int:
    """The tokens a request is simulated to ask for: what it asked, or, when it stopped on its own
    (EOS, a stop string) or was aborted, the tokens it made."""
    return int(produced) if reason not in (None, "length") and produced else int(asked)


def request_of(a: dict, max_tokens: int, arrival_step: int, block_size: int, timed: bool = False,
               ids: bool = True) -> Request:
    """An add line as the simulator's Request (to_workload's)."""
    return Request(id=str(a["id"]), prompt_len=a["prompt_len"], max_tokens=int(max_tokens), arrival_step=arrival_step,
                   arrival_time=_num(a.get("added")) if timed else None, priority=int(a.get("priority") or 0),
                   prompt_token_ids=_prompt_ids(a, block_size) if ids else None)


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
