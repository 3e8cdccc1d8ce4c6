"""Record every step a running vLLM server takes, for Scheduler Lab to play back.

    SCHEDLAB_VLLM_TRACE=/tmp/steps.jsonl PYTHONPATH=/path/to/scheduler-lab \\
        python -m vllm.entrypoints.openai.api_server --model DIR \\
        --scheduler-cls servers.vllm.recorder.RecordingScheduler

With async scheduling on (vLLM's default on GPUs), pass
`servers.vllm.recorder.AsyncRecordingScheduler` instead: `--scheduler-cls` replaces the class
vLLM would pick, and the plain one would turn async scheduling's overlap off.

The recorder subclasses vLLM's scheduler and calls straight through: it reads the scheduler's
state after each call and never changes a decision. Anything that goes wrong inside the
recorder turns the recorder off (with one warning in the server's log); the server goes on.
This module imports only the standard library and vLLM: it runs in the user's vLLM process.

The file is JSON lines (FORMAT, VERSION); servers/vllm/recording.py reads it. Lines:
- header: vLLM's version, the scheduler and cache settings that decide scheduling, the start
  time (Unix seconds; every other time is ms since it), the recorder's options;
- add: a request as the scheduler receives it: `i` (the index the step lines use), vLLM's id,
  prompt length, max_tokens, priority, the front end's arrival and the add time, and the
  prompt's token ids (or the 64-bit prefixes of its block hashes, or nothing: see PROMPTS);
- step: one per schedule() that is followed by update_from_output(): its four times (schedule
  start and end, update start and end), what it scheduled in scheduling order as [i, tokens,
  computed_before] (computed_before after prefix-cache hits, as the oracle defines it), who got
  a token, the preempted in victim order, the finished with their reason, free blocks after
  schedule and at the end, cached free blocks (with prefix caching, on pools up to
  CACHED_FREE_MAX_BLOCKS), running and waiting at the end (waiting up to WAITING_CAP ids, and
  its length; a list left out is the step before's), and the ids of the KV blocks each request
  took (`blocks`; a preempted or finished request gives back all it held). A step that
  scheduled nothing says `"idle": true`. Lines are flushed every FLUSH_S seconds and whenever
  the server has nothing left to run (a killed server loses at most FLUSH_S of steps);
- finish: a request finished outside a step (an abort between steps);
- rotate / end: the file was closed, for rotation or at shutdown.

Settings (environment variables, read when the scheduler is made):
- SCHEDLAB_VLLM_TRACE: the file (required; without it the recorder writes nothing).
- SCHEDLAB_VLLM_PROMPTS: "ids" (default), "hashes" (no token ids are stored: privacy), "none".
- SCHEDLAB_VLLM_MAX_MB (default 512) and SCHEDLAB_VLLM_KEEP (default 4): a file that reaches the
  size is renamed FILE.1 (FILE.1 to FILE.2, ...) and a new one begins with the header and the
  requests still in the scheduler; at most KEEP old files are kept, so the recording takes at
  most MAX_MB x (KEEP + 1) of disk.
"""
from __future__ import annotations

import atexit
import json
import logging
import os
import re
import time
from itertools import islice

try:
    from vllm.v1.core.sched.scheduler import Scheduler
except ModuleNotFoundError as e:   # vLLM 0.8.1 and before: vllm/v1/core/scheduler.py
    if e.name not in ("vllm.v1.core.sched", "vllm.v1.core.sched.scheduler"):
        raise   # something the module imports is missing: say that, not this
    from vllm.v1.core.scheduler import Scheduler

from .format import FORMAT, VERSION

try:   # vLLM builds without it (it came with async scheduling)
    from vllm.v1.core.sched.async_scheduler import AsyncScheduler
except ImportError:   # pragma: no cover - depends on the vLLM build
    AsyncScheduler = None

WAITING_CAP = 1000             # waiting ids written per step (the length is always written)
CACHED_FREE_MAX_BLOCKS = 8192  # counting cached free blocks walks the pool: skipped on bigger pools
FLUSH_S = 0.2                  # the file is flushed at most this often: a killed server loses at most this
PROMPT_MODES = ("ids", "hashes", "none")

log = logging.getLogger("schedlab.recorder")


def _vllm_version() -> str:
    try:
        from vllm import __version__
        return str(__version__)
    except ImportError:   # pragma: no cover
        return "unknown"


def _release(version: str) -> tuple[int, ...]:
    """(0, 8, 2) for "0.8.2+cpu"; () for what is not a version."""
    m = re.match(r"v?(\d+)\.(\d+)(?:\.(\d+))?", version)
    return tuple(int(g or 0) for g in m.groups()) if m else ()


def _recording_class(cls) -> str:
    """The recorder's class the scheduler is made from (a user's subclass of it keeps the name)."""
    return next((c.__name__ for c in cls.__mro__ if c.__module__ == __name__ and c.__name__ != "_Recording"),
                cls.__name__)


def _settings(s) -> dict:
    """The scheduler and cache settings that decide what the scheduler does."""
    sc, cc = s.scheduler_config, s.cache_config
    pool = s.kv_cache_manager.block_pool
    return {
        "num_gpu_blocks": int(pool.num_gpu_blocks), "block_size": int(s.block_size),
        "max_num_batched_tokens": int(sc.max_num_batched_tokens), "max_num_seqs": int(sc.max_num_seqs),
        "policy": str(getattr(sc.policy, "value", sc.policy)),
        "enable_prefix_caching": bool(cc.enable_prefix_caching),
        "enable_chunked_prefill": bool(sc.enable_chunked_prefill),
        "long_prefill_token_threshold": int(sc.long_prefill_token_threshold or 0),
        "scheduler_reserve_full_isl": bool(getattr(sc, "scheduler_reserve_full_isl", True)),
        "watermark": float(getattr(sc, "watermark", 0.0) or 0.0),
        "max_model_len": int(s.max_model_len),
        "async_scheduling": bool(getattr(sc, "async_scheduling", False)),   # (0.9 and before: none)
        **_admission(sc),
    }


def _admission(sc) -> dict:
    """vLLM 0.34's cache-aware admission settings, where the scheduler has them (older ones do
    not: nothing is written, and the reader keeps admission off)."""
    window = getattr(sc, "cache_aware_admission_window", None)
    if window is None:
        return {}
    return {"cache_aware_admission_window": int(window),
            "cache_aware_admission_threshold": float(getattr(sc, "cache_aware_admission_threshold", 0.5))}


def _arrival(req) -> float:
    """When the front end received the request (Unix seconds); 0.9.1 and before keep no arrival
    time on the scheduler's Request: then now, when it is added."""
    t = getattr(req, "arrival_time", None)
    return time.time() if t is None else float(t)


def _finite(obj):
    """obj with NaN and infinite floats as None (standard library only: this runs inside vLLM)."""
    if isinstance(obj, float):
        return obj if obj - obj == 0.0 else None
    if isinstance(obj, dict):
        return {k: _finite(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [_finite(v) for v in obj]
    return obj


class _File:
    """The recording's file: line writes, flushed per step, rotated at a size."""

    def __init__(self, path: str, max_bytes: int, keep: int):
        self.path, self.max_bytes, self.keep = path, max_bytes, keep
        self.f = open(path, "w", encoding="utf-8")
        self.size = 0

    def write(self, obj: dict) -> None:
        try:
            line = json.dumps(obj, separators=(",", ":"), allow_nan=False) + "\n"
        except ValueError:  # a NaN or infinity (strict JSON has none): null, as sim.jsonout writes it
            line = json.dumps(_finite(obj), separators=(",", ":"), allow_nan=False) + "\n"
        self.f.write(line)
        self.size += len(line)

    def flush(self) -> None:
        self.f.flush()

    def full(self) -> bool:
        return self.size >= self.max_bytes

    def rotate(self) -> None:
        self.f.close()
        for k in range(self.keep, 0, -1):
            src = self.path if k == 1 else f"{self.path}.{k - 1}"
            if os.path.exists(src):
                os.replace(src, f"{self.path}.{k}")
        if self.keep == 0:
            os.remove(self.path)
        self.f = open(self.path, "w", encoding="utf-8")
        self.size = 0

    def close(self) -> None:
        self.f.close()


class _Recorder:
    """What one scheduler did, written as it happens (see the module's docstring)."""

    def __init__(self, sched, path: str):
        self.s = sched
        self.t0 = time.time()
        self.p0 = time.perf_counter()
        mode = os.environ.get("SCHEDLAB_VLLM_PROMPTS", "ids").strip().lower() or "ids"
        if mode not in PROMPT_MODES:
            log.warning("SCHEDLAB_VLLM_PROMPTS=%r is none of %s: prompts are not stored", mode, PROMPT_MODES)
            mode = "none"
        self.prompts = mode
        max_mb = float(os.environ.get("SCHEDLAB_VLLM_MAX_MB", "512"))
        keep = int(os.environ.get("SCHEDLAB_VLLM_KEEP", "4"))
        self.file = _File(path, int(max_mb * (1 << 20)), max(keep, 0))
        self.pool = sched.kv_cache_manager.block_pool
        self.count_cached = bool(sched.cache_config.enable_prefix_caching) and \
            self.pool.num_gpu_blocks <= CACHED_FREE_MAX_BLOCKS
        self.index: dict[str, int] = {}     # vLLM's request id -> the recording's index (while held)
        self.next_i = 0
        self.adds: dict[str, dict] = {}     # the add line of each request still held (for rotation)
        self.step = 0
        self.part = 1
        self.pending: dict[int, dict] = {}  # id(SchedulerOutput) -> its step, until update_from_output
        self.preempted: list[int] = []      # inside the current schedule()
        self.updating: dict | None = None   # the step whose update_from_output runs
        self.held: dict[int, int] = {}      # index -> blocks of it already written (its block list's length)
        # vLLM 0.15 and before keep no Request.is_prefill_chunk: the recorder notes the chunks
        # that leave tokens for later itself (see _Recording._update_after_schedule)
        self.flagless = False
        self.chunks: set[str] = set()
        # 0.9.1 and before advance each request inside schedule() (no _update_after_schedule): the
        # chunks are told from the requests after it
        self.advanced = not hasattr(Scheduler, "_update_after_schedule")
        # 0.8.2 and before advance them in update_from_output (0.8.2 scheduler.py:560): after
        # schedule() a request's computed count is still the step's start
        self.late = () < _release(_vllm_version()) < (0, 8, 3)
        try:   # the first KV cache group's block lists (full attention: the one group)
            self.req_blocks = sched.kv_cache_manager.coordinator.single_type_managers[0].req_to_blocks
        except (AttributeError, IndexError):   # 0.9.0-0.9.1: one single-type manager; 0.8: the manager's own
            km = sched.kv_cache_manager
            self.req_blocks = getattr(getattr(km, "single_type_manager", km), "req_to_blocks", None)
        self.closed = False
        self.last_running: list[int] | None = None
        self.last_waiting: list[int] | None = None
        self.flushed = 0.0
        self._header()
        atexit.register(self.close)   # a server stopped by a signal still ends its file

    def ms(self, perf: float) -> float:
        return round((perf - self.p0) * 1000.0, 3)

    def _header(self) -> None:
        self.file.write({"kind": "header", "format": FORMAT, "version": VERSION, "vllm": _vllm_version(),
                         "scheduler_class": _recording_class(type(self.s)), "started_unix": self.t0, "part": self.part,
                         "config": _settings(self.s), "prompts": self.prompts, "waiting_cap": WAITING_CAP,
                         "cached_free_blocks": self.count_cached, "block_ids": self.req_blocks is not None})
        self.file.flush()

    # ------------------------------------------------------------------ events from the scheduler
    def added(self, req) -> None:
        rid = req.request_id
        if rid in self.index:   # a streaming input's next chunk: the same request
            return
        i = self.next_i
        self.next_i += 1
        self.index[rid] = i
        self.flagless = not hasattr(req, "is_prefill_chunk")
        sp = req.sampling_params
        line = {"kind": "add", "i": i, "id": rid, "prompt_len": int(req.num_prompt_tokens),
                "max_tokens": int(req.max_tokens), "priority": int(getattr(req, "priority", 0)),   # 0.9.1-: none
                "arrival": round((_arrival(req) - self.t0) * 1000.0, 3),
                "added": self.ms(time.perf_counter()), "before_step": self.step + 1}
        if sp is not None and getattr(sp, "ignore_eos", False):
            line["ignore_eos"] = True
        if self.prompts == "ids" and req.prompt_token_ids is not None:
            line["prompt"] = list(req.prompt_token_ids)
        elif self.prompts == "hashes":
            line["hashes"] = [bytes(h)[:8].hex() for h in (req.block_hashes or ())]
        self.adds[rid] = line
        self.file.write(line)

    def scheduled(self, out, t_start: float, t_end: float) -> None:
        self.step += 1
        reqs = self.s.requests
        sched, sampled, blocks = [], [], []
        held, req_blocks = self.held, self.req_blocks
        for rid, n in out.num_scheduled_tokens.items():
            r = reqs[rid]
            i = self.index[rid]
            before = r.num_computed_tokens if self.late else r.num_computed_tokens - n
            sched.append([i, int(n), int(before)])
            if self.advanced:   # 0.9.1 and before (sync only): a chunk ends short of the known tokens
                chunk = before + n < r.num_tokens
            else:
                chunk = rid in self.chunks if self.flagless else r.is_prefill_chunk
            if not chunk:
                sampled.append(i)
            if req_blocks is not None:
                have = req_blocks.get(rid)
                k = held.get(i, 0)
                if have is not None and len(have) > k:
                    blocks.append([i, [b.block_id for b in have[k:]]])
                    held[i] = len(have)
        step = {"kind": "step", "step": self.step, "t": [self.ms(t_start), self.ms(t_end), None, None],
                "sched": sched, "sampled": sampled, "pre": self.preempted,
                "free_sched": int(self.pool.get_num_free_blocks())}
        if blocks:
            step["blocks"] = blocks   # block ids each request took this step, in its block table's order
        if not sched:
            step["idle"] = True
        self.preempted = []
        self.pending[id(out)] = step

    def freed(self, req) -> None:
        rid = req.request_id
        i = self.index.pop(rid, None)
        self.adds.pop(rid, None)
        if i is None:
            return
        self.held.pop(i, None)
        why = req.get_finished_reason()
        reason = (why.name if why is not None else req.status.name).lower()
        if self.updating is not None:
            self.updating.setdefault("fin", []).append([i, reason])
        else:
            self.file.write({"kind": "finish", "i": i, "reason": reason, "t": self.ms(time.perf_counter()),
                             "after_step": self.step})

    def update_started(self, out, t: float) -> None:
        step = self.pending.pop(id(out), None)
        if step is None:   # a SchedulerOutput this recorder did not see (made before it started)
            step = {"kind": "step", "step": None, "t": [None, None, None, None], "sched": []}
        step["t"][2] = self.ms(t)
        step.setdefault("fin", [])
        self.updating = step

    def updated(self, t: float) -> None:
        step, self.updating = self.updating, None
        if step is None:
            return
        s = self.s
        step["t"][3] = self.ms(t)
        step["free"] = int(self.pool.get_num_free_blocks())
        if self.count_cached:
            null = getattr(self.pool, "null_block", None)   # (0.8's blocks have no is_null; 0.8.2- no null block)
            step["cached_free"] = sum(1 for b in self.pool.blocks
                                      if b.ref_cnt == 0 and b is not null and b.block_hash is not None)
        idx = self.index
        running = [idx[r.request_id] for r in s.running]
        holding = getattr(s, "kv_holding_waiting", ())
        waiting = [idx[r.request_id] for r in islice(holding, WAITING_CAP)]
        if len(waiting) < WAITING_CAP:
            waiting += [idx[r.request_id] for r in islice(s.waiting, WAITING_CAP - len(waiting))]
        # a list the same as the step before's is left out (most decode steps): the line is
        # shorter and its JSON cheaper; the reader carries the previous one over
        if running != self.last_running:
            step["running"] = self.last_running = running
        if waiting != self.last_waiting:
            step["waiting"] = self.last_waiting = waiting
        step["waiting_n"] = len(holding) + len(s.waiting)
        self.file.write(step)
        if self.file.full():
            self._rotate()
        if t - self.flushed >= FLUSH_S or not (running or waiting):   # drained: the server may now idle
            self.file.flush()
            self.flushed = t

    # ------------------------------------------------------------------ the file
    def _rotate(self) -> None:
        """A new file that can be read alone: the header, then every request still held."""
        self.file.write({"kind": "rotate", "t": self.ms(time.perf_counter()), "after_step": self.step})
        self.file.rotate()
        self.part += 1
        self.last_running = self.last_waiting = None   # a new file starts with both lists
        self._header()
        for line in self.adds.values():
            self.file.write({**line, "earlier": True})

    def close(self) -> None:
        if self.closed:
            return
        self.closed = True
        self.file.write({"kind": "end", "t": self.ms(time.perf_counter()), "steps": self.step})
        self.file.close()


class _Recording:
    """The recorder's hooks around the scheduler's own methods (a mixin: put it before the
    scheduler class). Each hook calls the scheduler first or after, unchanged, and hands what
    it saw to _Recorder; a failure of the recorder turns it off and is logged once."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self._rec = None
        path = os.environ.get("SCHEDLAB_VLLM_TRACE")
        if not path:
            log.warning("SCHEDLAB_VLLM_TRACE is not set: the schedlab recorder records nothing")
            return
        try:
            self._rec = _Recorder(self, path)
            if not hasattr(Scheduler, "_preempt_request"):
                self._watch_inline_preemption()
        except Exception:   # noqa: BLE001 - never stop the server for the recorder
            log.exception("schedlab recorder could not start; the server runs without it")

    def _watch_inline_preemption(self) -> None:
        """vLLM 0.11 and before preempt inside schedule(), with no method to hook: the victim,
        marked PREEMPTED, goes to the head of the waiting queue (0.11.2 scheduler.py:321-331),
        so that is where it is noted."""
        from vllm.v1.request import RequestStatus
        if not hasattr(self.waiting, "prepend_request"):
            self._watch_deque_queue()
            return
        prepend = self.waiting.prepend_request

        def prepend_request(request):
            if request.status == RequestStatus.PREEMPTED:
                self._note_preempted(request)
            return prepend(request)
        self.waiting.prepend_request = prepend_request

    def _watch_deque_queue(self) -> None:
        """vLLM 0.9.1 and before keep the waiting queue in a deque, and the victim goes back by
        appendleft (0.8.5 scheduler.py:232): the queue becomes one of a subclass of its own class
        that notes what comes back preempted (the same requests, the same order)."""
        from vllm.v1.request import RequestStatus
        note = self._note_preempted

        class NotingQueue(type(self.waiting)):
            def appendleft(self, request):
                if request.status == RequestStatus.PREEMPTED:
                    note(request)
                return super().appendleft(request)
        self.waiting = NotingQueue(self.waiting)

    def _rec_failed(self) -> None:
        log.exception("schedlab recorder failed and is off from now on; the server is not affected")
        rec, self._rec = self._rec, None
        try:
            rec.closed = True
            rec.file.close()
        except Exception:   # noqa: BLE001
            pass

    def add_request(self, request) -> None:
        super().add_request(request)
        if self._rec is not None:
            try:
                self._rec.added(request)
            except Exception:   # noqa: BLE001
                self._rec_failed()

    def schedule(self, *args, **kwargs):
        t0 = time.perf_counter()
        out = super().schedule(*args, **kwargs)
        t1 = time.perf_counter()
        if self._rec is not None:
            try:
                self._rec.scheduled(out, t0, t1)
            except Exception:   # noqa: BLE001
                self._rec_failed()
        return out

    def _update_after_schedule(self, scheduler_output):
        rec = self._rec
        if rec is not None and rec.flagless:
            # Before the call advances each request (and AsyncScheduler adds its placeholders): a
            # chunk that ends short of the known tokens samples nothing, the test 0.16 on keeps as
            # Request.is_prefill_chunk (0.16.0 scheduler.py:933-936)
            try:
                reqs = self.requests
                rec.chunks = {rid for rid, n in scheduler_output.num_scheduled_tokens.items()
                              if reqs[rid].num_computed_tokens + n
                              < reqs[rid].num_tokens + getattr(reqs[rid], "num_output_placeholders", 0)}
            except Exception:   # noqa: BLE001
                self._rec_failed()
        return super()._update_after_schedule(scheduler_output)

    def _note_preempted(self, request) -> None:
        if self._rec is not None:
            i = self._rec.index.get(request.request_id)
            if i is not None:
                self._rec.preempted.append(i)
                self._rec.held.pop(i, None)   # its blocks go back to the pool

    def _preempt_request(self, request, *args, **kwargs):
        self._note_preempted(request)
        return super()._preempt_request(request, *args, **kwargs)

    def _free_request(self, request, *args, **kwargs):
        if self._rec is not None:
            try:
                self._rec.freed(request)
            except Exception:   # noqa: BLE001
                self._rec_failed()
        return super()._free_request(request, *args, **kwargs)

    def update_from_output(self, scheduler_output, model_runner_output):
        if self._rec is not None:
            try:
                self._rec.update_started(scheduler_output, time.perf_counter())
            except Exception:   # noqa: BLE001
                self._rec_failed()
        out = super().update_from_output(scheduler_output, model_runner_output)
        if self._rec is not None:
            try:
                self._rec.updated(time.perf_counter())
            except Exception:   # noqa: BLE001
                self._rec_failed()
        return out

    def shutdown(self) -> None:
        if self._rec is not None:
            try:
                self._rec.close()
            except Exception:   # noqa: BLE001
                log.exception("schedlab recorder could not close its file")
            self._rec = None
        super().shutdown()


class RecordingScheduler(_Recording, Scheduler):
    """vLLM's Scheduler, recording every step (synchronous scheduling: the CPU backend's)."""


if AsyncScheduler is not None:
    class AsyncRecordingScheduler(_Recording, AsyncScheduler):
        """vLLM's AsyncScheduler, recording every step: schedule() of step k+1 runs before
        update_from_output() of step k, so each step is matched to its own update by its
        SchedulerOutput."""
