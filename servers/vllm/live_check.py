"""The simulator held to a recording that is still being written, step by step: compare.decisions'
verdict kept up to date as lines come, at a cost that grows with the new steps, not the run.

    check = LiveDecisions()
    v = check.update(rec)    # rec: a Recording that grew since the last call (RecordingStream's)

What is kept between calls: the simulator's scheduler, advanced a step (an engine call, async)
at a time, its requests added as the recording's add lines are read; the recorded steps read so
far as the oracle's lines, compared with the simulated ones in order as both come (compare.py's
rule: a run of recorded steps that scheduled nothing waits for a step that does).

When a step may be simulated: the simulator's step k takes the requests that arrived before it,
and the recorder writes a request's add line before the step it was added before. So with the
recorded steps read up to N, every request added before step N is known and the simulator may
make steps 1 .. N (async: engine calls up to N plus the drains the steps before N show; a step's
drain is known only from the next step's times, see recording.EngineCalls). Nothing later: a
request added before step N + 1 may still be on its way.

What can change the past, and then the state starts again (the run so far simulated afresh,
once): a request that stopped on its own or was aborted is simulated to ask for the tokens it
made (recording.to_workload), which is known only at its finish: if the simulator's request had
already made that many by then (an abort of a request that sampled its last token steps before),
its finish moves back; a request whose arrival lies before a step already simulated; without
max_model_len in the header, a longer request than any before. Also a new Recording (the file
restarted, rotated into another run, truncated).

Equal to compare.decisions on the same lines at every point, in `equal`, `first_difference`,
`steps` and `waiting_capped` (tests/servers/vllm/test_live_check.py feeds recordings in random
pieces and checks it). Not looked ahead: decisions() simulates every request read to its end, so
its `simulated_steps` counts steps the recording has not made yet, and a stop of the simulator
past the recorded steps (RuntimeError: no progress) is said there at once; here both come when
the recording gets there. A run still going takes the verdict of the steps both made (so_far).
"""
from __future__ import annotations

import heapq
import json
import time
from collections import Counter, deque

from sim import versions
from sim.async_sched import _SCHEDULE_FIELDS, _UPDATE_FIELDS, AsyncVllmScheduler, BatchQueue
from sim.cost import UnitsCost
from sim.limits import MAX_SEEDED_PROMPT_TOKENS
from sim.registry import SCHEDULERS
from sim.limits import check_prompt_work
from sim.simulate import Recorder, _async_call, check_fits, resolve_config
from sim.versions import check_options
from sim.workload import Request, Workload

from .compare import _Compare
from .recording import (CONFIG_KEYS, NO_PROMPTS, EngineCalls, first_difference, max_tokens, mode_config,
                        oracle_line, request_of)

MAX_STEPS = 10_000_000   # simulate()'s step cap
SWEEP_STEPS = 4096       # finished requests are let go of every so many steps (their prompts' token ids)
_GONE = "finished"       # what self.seqs keeps of a finished request


class _Lean(Recorder):
    """The simulator's Recorder keeping nothing a verdict does not read: the oracle lines go to
    the comparison, the step rows, batch rows, events and counters are let go each step."""

    def entries(self, ents, step, start, end, info):
        p = d = r = 0
        for e in ents:
            if e.kind == "decode":
                d += e.tokens
            elif e.kind == "recompute":
                r += e.tokens
            else:
                p += e.tokens
        return p, d, r

    def event(self, step, time, rid, kind, detail=""):
        pass

    def record_counters(self, sched, step):
        pass

    def idle(self, *a, **kw):
        super().idle(*a, **kw)
        self.step_rows.clear()

    def record(self, *a, **kw):
        super().record(*a, **kw)
        self.step_rows.clear()


class _Lines(_Compare):
    """The file the simulator writes its oracle lines to (compare._Compare's writing): each line
    parsed, as decisions() parses them, and handed on."""

    def __init__(self, take):
        self.take, self.part = take, ""

    def _one(self, sim: dict) -> None:
        self.take(sim)


def count_tokens(st: dict, produced: dict, reason: dict, changed: set) -> None:
    """A step line's sampled tokens counted per request and its finishes noted; `changed` gains
    the requests whose simulated length (recording.max_tokens) may have moved."""
    for i in st.get("sampled") or ():
        produced[i] = produced.get(i, 0) + 1
        if i in reason:
            changed.add(i)
    for i, why in st.get("fin") or ():
        reason[i] = why
        changed.add(i)


class Restart(Exception):
    """Something read changes a step already simulated: the state starts again."""


class _Comparison:
    """The simulated lines held to the recorded ones in order, as both come (LiveDecisions' half
    that compares: sim_q and rec_q, the lines of each side not yet paired)."""

    def _sim_line(self, line: dict) -> None:
        self.n_sim += 1
        self.sim_q.append(line)
        self._pair()

    def _async_line(self, line: dict) -> None:
        """sim.async_sched.per_schedule, a call at a time: a schedule() call's line is ready once
        the update that applied its output has come."""
        if not line.get("idle") and not line.get("drain"):
            self.n_own += 1
            own = {"step": self.n_own, **{k: line[k] for k in _SCHEDULE_FIELDS}}
            self.by_step[line["step"]] = own
            self.own.append([own, False])
        applied = self.by_step.pop(line.get("applied_step"), None)
        if applied is not None:
            applied.update({k: line[k] for k in _UPDATE_FIELDS if k in line})
            for x in self.own:
                if x[0] is applied:
                    x[1] = True
                    break
        self._release_own(False)

    def _release_own(self, final: bool) -> None:
        """Applied lines, in order, to the comparison; one that scheduled nothing only once a line
        that did follows it (per_schedule leaves trailing ones out), or while requests remain."""
        own = self.own
        while own and (own[0][1] or final):
            if not own[0][0]["scheduled"] and self._trailing_empty(final):
                return
            x = own.popleft()[0]
            self.n_sim += 1
            self.sim_q.append(x)
            self._pair()

    def _trailing_empty(self, final: bool) -> bool:
        if any(x[0]["scheduled"] for x in self.own):
            return False
        return final or self._done()

    def _done(self) -> bool:
        """Whether decisions() would have stopped simulating here: every request read has finished
        (or the simulator stopped)."""
        if self.stopped is not None:
            return True
        if self.later:
            return False
        return self.n_done >= self.n_total if self.sched is not None else not self.requests

    def _pair(self) -> None:
        sq, rq = self.sim_q, self.rec_q
        while sq and rq:
            a, b = rq.popleft(), sq.popleft()
            self.compared += 1
            if self.diff is None:
                d = first_difference([a], [b])
                if d is not None and d["field"] != "steps":
                    self.diff = d


class LiveDecisions(_Comparison):
    """compare.decisions on a recording as it grows (see the module's docstring)."""

    def __init__(self):
        self.rec = None
        self.restarts = 0     # how often the state started again (a new recording included)
        self._fresh()

    # ------------------------------------------------------------------ state
    def _fresh(self) -> None:
        self.n_adds = self.n_steps = self.n_fins = 0
        self.ident: dict[int, str] = {}
        self.adds: dict[int, dict] = {}          # recorder index -> add line
        self.produced: dict[int, int] = {}
        self.reason: dict[int, str] = {}
        self.mt: dict[int, int] = {}             # the max_tokens each request is simulated with
        self.prev = {"running": [], "waiting": []}
        self.calls = EngineCalls()
        self.last_step = None                    # the last recorded step number read
        self.waiting_n = deque()                 # per held recorded line: its waiting_n
        self.rec_held: list = []                 # recorded lines that scheduled nothing, waiting for one that did
        self.rec_q: deque = deque()              # recorded lines released, not yet compared
        self.n_rec = 0
        self.capped = False
        # the simulator
        self.sched = self.bq = None
        self.pending: list = []                  # (arrival_step, add order, index): known, not yet arrived
        self.later: list[int] = []               # indexes added before a step not read yet (async: arrival unknown)
        self.order = 0
        self.requests: dict[int, object] = {}   # index -> Request (before it arrives)
        self.seqs: dict[int, object] = {}       # index -> the simulator's Seq (arrived)
        self.n_total = self.n_done = 0
        self.step = 0
        self.clock = 0.0
        self.stalled = 0
        self.stopped: str | None = None
        self.needs: Counter = Counter()          # each request's prompt + max_tokens, counted
        self.over: dict[int, int] = {}           # requests longer than the header's max_model_len
        self.mml = None
        self.prompt_work = 0                     # prompt tokens made up (prefix caching, no prompt recorded)
        self.sim_q: deque = deque()              # simulated lines ready, not yet compared
        self.own: deque = deque()                # async: per-schedule lines [line, applied], in order
        self.by_step: dict = {}                  # async: engine call -> its per-schedule line, until applied
        self.n_own = 0
        self.n_sim = 0
        self.compared = 0
        self.behind = False
        self.diff = None

    def _setup(self, rec) -> None:
        self.rec = rec
        cfg = rec.config
        config = {k: cfg[k] for k in CONFIG_KEYS if k in cfg}
        config.update(mode_config(rec))   # ValueError: no rules for its version
        self.config = config
        self.is_async = bool(config.get("async_scheduling"))
        self.caching = bool(rec.header.get("cached_free_blocks"))
        self.bs = int(cfg.get("block_size") or 16)
        self.simulated_as = {"vllm_version": config.get("vllm_version", versions.NEWEST),
                             "async_scheduling": self.is_async}
        self.cfg, self.mode = resolve_config(Workload(requests=[], config=config), None)
        check_options(self.cfg, self.mode)
        self.fixed_mml = self.cfg.max_model_len

    def _start_sim(self) -> None:
        """The scheduler, made once the first request is known (its max_model_len may need it)."""
        cfg = self.cfg
        self.mml = self._mml()
        self.sched = (AsyncVllmScheduler if cfg.async_scheduling else SCHEDULERS[self.mode])(cfg, self.mml)
        self.cost = UnitsCost()
        self.slo_clock = hasattr(self.sched, "clock")
        if self.slo_clock:
            self.sched.cost_model = self.cost
        self.out = _Lines(self._async_line if self.is_async else self._sim_line)
        self.recorder = _Lean(cfg.enable_prefix_caching, self.out)
        self.sched.pool.logging = False
        self.idle_dt = self.cost.step_time(1, [1])
        self.bq = BatchQueue(self.sched) if cfg.async_scheduling else None

    def _mml(self) -> int:
        """simulate.max_model_len_for and check_fits on the requests read so far."""
        need = max(self.needs) if self.needs else 1
        if self.over:
            raise ValueError(f"a request needs {max(self.over.values())} tokens but max_model_len is "
                             f"{int(self.fixed_mml)}")
        mml = max(int(self.fixed_mml or need), int(self.cfg.long_prefill_token_threshold or 0))
        if -(-mml // self.cfg.block_size) > self.cfg.num_gpu_blocks - 1:
            check_fits(Workload(requests=[Request(id="", prompt_len=need, max_tokens=0)]), self.cfg, mml)
        return mml

    # ------------------------------------------------------------------ the lines read
    def update(self, rec, budget_s: float | None = None) -> dict:
        """The verdict on what rec holds now (compare.decisions' dict, with `compared`: the steps
        held to each other so far, and `behind`: True when budget_s (seconds of simulating) ran
        out first; the next call goes on from there). ValueError: the recording cannot be
        re-simulated (one sentence; the next call tries again from the start)."""
        if rec is not self.rec:
            if self.rec is not None:
                self.restarts += 1
            self._fresh()
            self.rec = None
            self._setup(rec)
        try:
            for _ in range(3):
                try:
                    self._read(rec)
                    self._advance(rec, budget_s)
                    break
                except Restart:
                    self.restarts += 1
                    self._fresh()
            return self.result(rec)
        except ValueError:
            self.rec = None   # the next call starts again
            raise

    def _read(self, rec) -> None:
        adds, steps, fins = rec.adds, rec.steps, rec.finishes
        line_of = getattr(steps, "step_line", None)
        changed: set[int] = set()
        # adds first: an add line comes before the step it was added before
        for a in adds[self.n_adds:]:
            self._add(a)
        self.n_adds = len(adds)
        n = len(steps)
        prev = self.prev
        for j in range(self.n_steps, n):
            st = line_of(j) if line_of is not None else steps[j]
            for k in ("running", "waiting"):
                if k in st:
                    prev[k] = st[k]
                else:
                    st[k] = prev[k]
            self._step(st, changed)
        self.n_steps = n
        for f in fins[self.n_fins:]:
            i = int(f["i"])
            self.reason[i] = str(f.get("reason"))
            changed.add(i)
        self.n_fins = len(fins)
        for i in changed:
            self._max_tokens(i)
        if self.is_async:
            self._settle_arrivals(rec)
        if self.sched is not None and self._mml() != self.mml:   # the whole run has another max_model_len
            raise Restart

    def _add(self, a: dict) -> None:
        i = a["i"]
        self.ident[i] = a["id"]
        self.adds[i] = a
        self.mt[i] = int(a["max_tokens"])
        if a["prompt_len"] < 0 or a["max_tokens"] < 0:
            raise ValueError("negative length")
        self._need(i, a["prompt_len"] + self.mt[i], None)
        if self.cfg.enable_prefix_caching and a.get("prompt") is None and a.get("hashes") is None:   # no ids
            if not self.prompt_work:
                self.rec.warn(NO_PROMPTS)
            self.prompt_work += a["prompt_len"]
            if self.prompt_work > MAX_SEEDED_PROMPT_TOKENS:
                check_prompt_work([Request(id="", prompt_len=self.prompt_work, max_tokens=1)], True)
        k = int(a.get("before_step") or 1)
        if not self.is_async:
            self._known(i, max(k - 1, 0))
        else:
            self.later.append(i)   # its engine call waits for the steps' times (_settle_arrivals)

    def _settle_arrivals(self, rec) -> None:
        """Async: the requests added before a step read (or, at the recording's end, any) get
        their engine call."""
        last = self.last_step
        keep = []
        for i in self.later:
            k = int(self.adds[i].get("before_step") or 1)
            if rec.ended or (last is not None and k <= last):
                self._known(i, max(self.calls(k), 0))
            else:
                keep.append(i)
        self.later = keep

    def _known(self, i: int, arrival: int) -> None:
        a = self.adds[i]
        self.requests[i] = request_of(a, self.mt[i], arrival, self.bs)
        self.n_total += 1
        if self.sched is not None and arrival < self.step:   # it joins before a step already made
            raise Restart
        heapq.heappush(self.pending, (arrival, self.order, i))
        self.order += 1

    def _need(self, i: int, need: int, old: int | None) -> None:
        if old is not None:
            self.needs[old] -= 1
            if not self.needs[old]:
                del self.needs[old]
        self.needs[need] += 1
        if self.fixed_mml and need > int(self.fixed_mml):
            self.over[i] = need
        else:
            self.over.pop(i, None)

    def _step(self, st: dict, changed: set) -> None:
        count_tokens(st, self.produced, self.reason, changed)
        self.last_step = int(st["step"])
        self.calls.step(st)
        line = oracle_line(st, self.ident, {}, self.caching)
        self.rec_held.append((line, st.get("waiting_n", 0)))
        if line["scheduled"]:
            for x, wn in self.rec_held:
                if len(x["waiting"]) < wn:
                    self.capped = True
                self.rec_q.append(x)
            self.n_rec += len(self.rec_held)
            self.rec_held = []

    def _max_tokens(self, i: int) -> None:
        a = self.adds.get(i)
        if a is None:
            return
        new = max_tokens(a["max_tokens"], self.reason.get(i), self.produced.get(i, 0))
        old = self.mt[i]
        if new == old:
            return
        self.mt[i] = new
        seq = self.seqs.get(i)
        if seq is _GONE:
            raise Restart
        if seq is not None:
            # the finish check (num_output >= max_tokens) and, async, the last-token-in-flight check
            # (one token ahead) would have read it already: the past changes
            if seq.num_output + (1 if self.is_async else 0) >= min(old, new) or seq.status == "finished":
                raise Restart
            seq.max_tokens = new
        r = self.requests.get(i)
        if r is not None:
            r.max_tokens = new
        self._need(i, a["prompt_len"] + new, a["prompt_len"] + old)

    # ------------------------------------------------------------------ the simulator
    def _bound(self, rec) -> int | None:
        """The last step (engine call) the simulator may make now; None: to the end."""
        if rec.ended:
            return None
        if self.last_step is None:
            return 0
        if not self.is_async:
            return self.last_step
        return self.calls(self.last_step) + 1

    def _advance(self, rec, budget_s: float | None = None) -> None:
        self.behind = False
        if self.stopped is not None or self.diff is not None:
            return   # a verdict made: later steps cannot change where they part
        if self.sched is None:
            if not self.requests:
                return
            self._start_sim()
        bound = self._bound(rec)
        end = None if budget_s is None else time.monotonic() + budget_s
        try:
            while self.n_done < self.n_total + len(self.later) and (bound is None or self.step < bound) and \
                    self.diff is None:
                self._one()
                if end is not None and not self.step & 63 and time.monotonic() > end:
                    self.behind = True
                    return
        except RuntimeError as e:
            self.stopped = str(e)

    def _one(self) -> None:
        """simulate()'s loop, one step (engine call) of it."""
        sched, rec = self.sched, self.recorder
        if self.step >= MAX_STEPS:
            raise RuntimeError(f"step cap {MAX_STEPS} reached with {self.n_total - self.n_done} requests unfinished")
        self.step += 1
        step = self.step
        if not step % SWEEP_STEPS:
            self._sweep()
        sched.pool.step = step
        if self.slo_clock:
            sched.clock = self.clock
        arrived = []
        p = self.pending
        while p and p[0][0] < step:
            i = heapq.heappop(p)[2]
            r = self.requests.pop(i)
            seq = rec.arrive(sched, r, step, self.clock, False)
            self.seqs[i] = seq
            if seq.status == "rejected":
                self.n_done += 1
            arrived.append(r.id)
        if self.bq is not None:
            finished, self.clock, self.stalled, _, _ = _async_call(self.bq, sched, rec, self.cost, step, self.clock,
                                                                   arrived, self.idle_dt, self.stalled, 0.0)
            self.n_done += len(finished)
            return
        if not sched.has_requests():
            rec.idle(step, self.clock, self.idle_dt, sched.pool, arrived)
            self.clock += self.idle_dt
            return
        plan = sched.schedule()
        self.stalled = 0 if (plan.entries or plan.admitted or plan.preempted) else self.stalled + 1
        if self.stalled > 1000:
            raise RuntimeError(f"no progress for 1000 steps at step {step}: the KV pool is too small for "
                               f"the requests in flight")
        dt = self.cost.step_time_totals(plan.num_tokens, plan.context_tokens)
        finished = sched.update(plan)
        self.n_done += len(finished)
        rec.record(sched, plan, finished, step, self.clock, self.clock + dt, arrived, 0)
        self.clock += dt

    def _sweep(self) -> None:
        """Let go of finished requests (the scheduler only ever writes to its seqs): a run of hours
        would otherwise hold every prompt's token ids."""
        seqs = self.sched.seqs
        for i, seq in self.seqs.items():
            if seq is not _GONE and seq.status in ("finished", "rejected"):
                self.seqs[i] = _GONE
                seqs.pop(seq.id, None)

    def result(self, rec) -> dict:
        self._pair()
        done = self._done() and not self.behind
        n_sim = self.n_sim
        diff = self.diff
        if done and self.own:   # per_schedule's end: lines never applied count as they are
            kept = [x[0] for x in self.own]
            while kept and not kept[-1]["scheduled"]:
                kept.pop()
            if diff is None and not self.sim_q:
                for a, b in zip(self.rec_q, kept):
                    d = first_difference([a], [b])
                    if d is not None and d["field"] != "steps":
                        diff = d
                        break
            n_sim += len(kept)
        if diff is None and done and self.n_rec != n_sim:
            n = min(self.n_rec, n_sim) + 1
            diff = {"step": n, "field": "steps", "recorded": self.n_rec, "simulated": n_sim}
        if self.stopped and diff is None:
            diff = {"step": n_sim + 1, "field": "steps", "recorded": self.n_rec, "simulated": n_sim}
        out = {"equal": diff is None, "steps": self.n_rec, "simulated_steps": n_sim, "first_difference": diff,
               "waiting_capped": self.capped, "simulated_as": dict(self.simulated_as), "compared": self.compared,
               "behind": self.behind}
        if self.stopped:
            out["stopped"] = self.stopped
        return out
