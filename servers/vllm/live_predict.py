"""The time prediction on a recording that is still being written, kept up to date at a cost that
grows with the new steps, not the run: compare.predict(rec, rec, band=False)'s numbers, as lines come.

    times = LivePrediction()
    p = times.update(rec, trace)   # each refresh: rec a Recording that grew; trace: its Trace so far
    p                              # compare.Prediction of the lines read (None until there is one)
    times.fitted_at, times.refitting

The prediction is a cost model fitted on the recording (compare.fit_cost), then the recording's
arrivals simulated on the wall clock with it (simulate(to_workload(rec, timed=True), cost=M)).
Here:
- the model is fitted again only when the recording has grown REFIT_FACTOR x since the last fit
  (at 1,000 steps, 2,000, 4,000, ...): a fit reads the whole Trace once, so fits cost O(total) in
  all. `fitted_at` is the recorded steps the model was fitted on; it equals compare.fit_cost on
  those lines. A new model's simulation starts from step 1 and catches up over refreshes
  (PREDICT_BUDGET_S of simulating each) while the previous prediction stays up (`refitting`);
- between fits the model is fixed and its simulation goes on: the simulator's scheduler is kept,
  requests join as their add lines are read, and only the steps the lines so far fix are made
  (_TimedSim); each refresh a copy of that state runs to the end of the requests read (what the
  whole-run simulation does next on the same lines), a cost that grows with the requests in
  flight, not the run.

What the lines so far fix, so that a step made now is the step the whole-run simulation makes on
any later lines too (simulate()'s loop, a step at a time, stopped before the first step that
could change):
- arrivals: the simulator's step starting at clock c takes every request added at or before c.
  The recorder writes a request's add line before the step it was added before, in the order
  the scheduler got them; so once recorded step N is read, every request added before its
  schedule() call (t[0]) is known, and once an add line is read every earlier one is. A step is
  made only while its clock is before that horizon;
- lengths: a request that stopped on its own or was aborted is simulated to ask for the tokens
  it made (recording.max_tokens), known only at its finish. While the server still runs it, a
  simulated step may only sample a token the server has gone past (its token count + 1, + 2
  async, below what the server sampled so far), so the finish check never reads a length that
  may still change;
- what changes the past anyway (a longer request without max_model_len in the header, an add
  line out of time order): the simulation starts again from step 1, once.

Equal to compare.predict(rec, rec, band=False, cost=M) with the same model M at every point
(tests/servers/vllm/test_live_predict.py feeds recordings in random pieces and checks it).
The band (predicted_<metric>_low / _high) is left out: the live page shows the errors only.
"""
from __future__ import annotations

import copy
import heapq
import math
import pickle
import time
from collections import Counter

import numpy as np
import pandas as pd

from sim.async_sched import AsyncVllmScheduler, BatchQueue
from sim.calibrate import calibrate
from sim.registry import SCHEDULERS
from sim.simulate import SWAP_LINK_BYTES_PER_S, _async_call, _note_entry, check_fits, resolve_config
from sim.versions import check_options
from sim.workload import Request, Workload

from .compare import METRICS, Prediction, _pct, busy_periods, request_times
from .live_check import _Lean, count_tokens
from .recording import CONFIG_KEYS, max_tokens, mode_config, request_of, to_trace

REFIT_FACTOR = 2.0         # the cost model is fitted again when the recording has grown this much
FIRST_FIT_STEPS = 3        # the first fit: once this many steps are in (calibrate needs 3 busy ones)
PREDICT_BUDGET_S = 0.5     # simulating per refresh at most (a new model's catching up goes on over refreshes)
MAX_STEPS = 10_000_000     # simulate()'s step cap
SWEEP_STEPS = 4096         # finished requests are let go of by the scheduler every so many steps
_INF = math.inf


class _Restart(Exception):
    """Something read changes a step already simulated: that simulation starts again."""


class _Harvest(_Lean):
    """live_check's lean Recorder (no step rows, batch rows, events), which also takes each
    finished request's times (what request_times reads) as it finishes and lets its info go."""

    def __init__(self, caching: bool, out: dict, gone):
        super().__init__(caching, None)
        self.out, self.gone = out, gone
        self.rejected: set[str] = set()

    def entries(self, ents, step, start, end, info):
        p = d = r = 0
        for e in ents:
            kind = e.kind
            if kind == "decode":
                d += e.tokens
                continue
            _note_entry(info[e.seq.id], e, step, start, end)   # its first token's step and time
            if kind == "recompute":
                r += e.tokens
            else:
                p += e.tokens
        return p, d, r

    def record(self, sched, plan, finished, *a, **kw):
        super().record(sched, plan, finished, *a, **kw)
        for seq in finished:
            d = self.info.pop(seq.id)
            self.out[seq.id] = _times(d)
            self.gone(seq)


def _times(d) -> tuple[float, float, float]:
    """(ttft, tpot, e2e) as compare.request_times works them out of a request's RequestInfo."""
    arr = _f(d.get("arrival_time"))
    first, fin = _f(d.get("first_token_time")), _f(d.get("finish_time"))
    out = d.get("output_tokens")
    out = math.nan if out is None else float(out)
    tpot = (fin - first) / max(out - 1, 1) if out > 1 else math.nan
    return first - arr, tpot, fin - arr


def _f(x) -> float:
    return math.nan if x is None else float(x)


class _Known:
    """What the lines read so far say, shared by the simulations: the requests in add order (each
    with the length it is simulated to ask for now), each one's tokens sampled and finish, the
    arrival horizon, max_model_len."""

    def __init__(self, rec):
        self.rec = rec
        cfg = rec.config
        config = {k: cfg[k] for k in CONFIG_KEYS if k in cfg}
        config.update(mode_config(rec))   # ValueError: no rules for its version
        self.cfg, self.mode = resolve_config(Workload(requests=[], config=config), None)
        check_options(self.cfg, self.mode)
        self.is_async = bool(self.cfg.async_scheduling)
        self.bs = int(cfg.get("block_size") or 16)
        self.adds: list[dict] = []
        self.mt: dict[int, int] = {}
        self.produced: dict[int, int] = {}
        self.reason: dict[int, str] = {}
        self.changes: list[tuple[int, int]] = []   # (request, new length), in the order learned
        self.needs: Counter = Counter()
        self.last_added = -_INF
        self.last_start = -_INF
        self.n_adds = self.n_steps = self.n_fins = 0

    def read(self) -> None:
        rec = self.rec
        for a in rec.adds[self.n_adds:]:
            i = int(a["i"])
            self.adds.append(a)
            self.mt[i] = int(a["max_tokens"])
            self.needs[a["prompt_len"] + self.mt[i]] += 1
            t = a.get("added")
            if t is not None:
                self.last_added = max(self.last_added, float(t))
        self.n_adds = len(rec.adds)
        steps = rec.steps
        line_of = getattr(steps, "step_line", None)
        changed = set()
        for j in range(self.n_steps, len(steps)):
            st = line_of(j) if line_of is not None else steps[j]
            count_tokens(st, self.produced, self.reason, changed)
            t = st.get("t")
            if t and t[0] is not None:
                self.last_start = max(self.last_start, float(t[0]))
        self.n_steps = len(steps)
        for f in rec.finishes[self.n_fins:]:
            i = int(f["i"])
            self.reason[i] = str(f.get("reason"))
            changed.add(i)
        self.n_fins = len(rec.finishes)
        for i in sorted(changed):
            a = self._add_of(i)
            if a is None:   # a request added before the file began (rotation): not simulated
                continue
            new = max_tokens(a["max_tokens"], self.reason.get(i), self.produced.get(i, 0))
            old = self.mt[i]
            if new != old:
                self.mt[i] = new
                self.needs[a["prompt_len"] + old] -= 1
                if not self.needs[a["prompt_len"] + old]:
                    del self.needs[a["prompt_len"] + old]
                self.needs[a["prompt_len"] + new] += 1
                self.changes.append((i, new))

    def _add_of(self, i: int):
        if not hasattr(self, "_by_i"):
            self._by_i = {}
        by = self._by_i
        if len(by) < len(self.adds):
            for a in self.adds[len(by):]:
                by[int(a["i"])] = a
        return by.get(i)

    @property
    def horizon(self) -> float:
        """A step starting before this clock takes only requests already read (inf: the run ended)."""
        return _INF if self.rec.ended else max(self.last_added, self.last_start)

    def final(self, i: int) -> bool:
        """The length request i is simulated to ask for cannot change any more."""
        return i in self.reason or self.rec.ended

    def mml(self) -> int:
        """simulate.max_model_len_for and check_fits on the requests read so far."""
        need = max(self.needs) if self.needs else 1
        mml = int(self.cfg.max_model_len or need)
        if need > mml:
            raise ValueError(f"a request needs {need} tokens but max_model_len is {mml}")
        mml = max(mml, int(self.cfg.long_prefill_token_threshold or 0))
        if -(-mml // self.cfg.block_size) > self.cfg.num_gpu_blocks - 1:
            check_fits(Workload(requests=[Request(id="", prompt_len=need, max_tokens=0)]), self.cfg, mml)
        return mml


class _State:
    """simulate()'s loop variables and the scheduler: what a copy runs on to the end."""

    def __init__(self):
        self.sched = self.bq = None
        self.pending: list = []                 # (arrival time, add order, request) known, not yet arrived
        self.reqs: dict[int, Request] = {}
        self.inflight: dict[str, tuple] = {}    # request id -> (its add index, Seq): arrived, not finished
        self.step = 0
        self.clock = 0.0
        self.made_clock = -_INF                 # the clock the last step made started at
        self.stalled = 0
        self.total = self.done = 0


class _TimedSim:
    """simulate(to_workload(rec, timed=True), cost=cost) a step at a time, held where the lines
    read so far stop fixing the next step (see the module's docstring)."""

    def __init__(self, known: _Known, cost):
        self.known, self.cost = known, cost
        self.s = _State()
        self.times: dict[str, tuple] = {}       # request id -> (ttft, tpot, e2e) once finished
        self.n_known = self.n_changes = 0
        self.order = 0
        self.mml = None
        self.behind = False
        cfg = known.cfg
        self.shaped = getattr(cost, "uses_shape", False)
        self.idle_dt = cost.step_time(1, [1])
        to_unit = {"ms": 1000.0, "s": 1.0}.get(getattr(cost, "time_unit", ""), 0.0)
        self.swap_unit = to_unit / SWAP_LINK_BYTES_PER_S
        self.rec = _Harvest(cfg.enable_prefix_caching, self.times, self._gone)
        self.extra = 2 if known.is_async else 0

    def _gone(self, seq) -> None:
        self.s.inflight.pop(seq.id, None)

    # ------------------------------------------------------------------ the lines read
    def sync(self) -> None:
        """Take the requests and lengths read since the last call. _Restart: the past changes."""
        k, s = self.known, self.s
        if s.sched is not None and k.mml() != self.mml:
            raise _Restart
        for a in k.adds[self.n_known:]:
            i = int(a["i"])
            r = request_of(a, k.mt[i], 0, k.bs, True)
            t = r.arrival_time or 0.0
            if t <= s.made_clock:   # it joins before a step already made
                raise _Restart
            s.reqs[i] = r
            heapq.heappush(s.pending, (t, self.order, i))
            self.order += 1
            s.total += 1
        self.n_known = len(k.adds)
        for i, new in k.changes[self.n_changes:]:
            r = s.reqs.get(i)
            if r is not None:   # not arrived yet
                r.max_tokens = new
                continue
            rid = str(k._add_of(i)["id"])
            got = s.inflight.get(rid)
            if got is None:   # finished here with the old length (a rejected one asked for none)
                if rid in self.times and rid not in self.rec.rejected:
                    raise _Restart
                continue
            seq = got[1]
            if seq.num_output + (1 if k.is_async else 0) >= min(seq.max_tokens, new):
                raise _Restart
            seq.max_tokens = new
            seq.req.max_tokens = new
        self.n_changes = len(k.changes)

    # ------------------------------------------------------------------ the simulator
    def _start(self) -> None:
        k, s = self.known, self.s
        cfg = k.cfg
        self.mml = k.mml()
        s.sched = (AsyncVllmScheduler if cfg.async_scheduling else SCHEDULERS[k.mode])(cfg, self.mml)
        self.slo_clock = hasattr(s.sched, "clock")
        if self.slo_clock:
            s.sched.cost_model = self.cost
        s.sched.pool.logging = False
        s.bq = BatchQueue(s.sched) if cfg.async_scheduling else None

    def advance(self, budget_s: float | None) -> None:
        """Make the steps the lines read so far fix (held: a copy finishes the run, finish())."""
        self.behind = False
        s = self.s
        if s.sched is None:
            if not s.reqs:
                return
            self._start()
        end = None if budget_s is None else time.monotonic() + budget_s
        horizon = self.known.horizon
        n = 0
        while s.done < s.total:
            if not self._next(s, horizon, True):
                return
            n += 1
            if end is not None and not n & 31 and time.monotonic() > end:
                self.behind = True
                return

    def _safe(self, s: _State) -> bool:
        k = self.known
        if k.rec.ended:
            return True
        produced, extra = k.produced, self.extra
        for i, seq in s.inflight.values():
            if seq.num_output + 1 + extra >= produced.get(i, 0) and not k.final(i):
                return False
        return True

    def _next(self, s: _State, horizon: float, hold: bool) -> bool:
        """simulate()'s loop body, one step (engine call); False (nothing done) where it is held."""
        sched, bq, rec = s.sched, s.bq, self.rec
        if s.step >= MAX_STEPS:
            raise RuntimeError(f"step cap {MAX_STEPS} reached with {s.total - s.done} requests unfinished")
        clock = s.clock
        if s.pending and not sched.has_requests() and not (bq and bq.pending):
            clock = max(clock, s.pending[0][0])   # an idle engine waits for the next arrival
        if hold and (clock >= horizon or not self._safe(s)):
            return False
        s.step += 1
        step = s.step
        s.made_clock = clock
        if not step % SWEEP_STEPS:
            self._sweep(s)
        sched.pool.step = step
        if self.slo_clock:
            sched.clock = clock
        arrived = []
        p = s.pending
        while p and p[0][0] <= clock:
            i = heapq.heappop(p)[2]
            r = s.reqs.pop(i)
            seq = rec.arrive(sched, r, step, clock, True)
            if seq.status == "rejected":
                s.done += 1
                rec.info.pop(r.id, None)
                rec.out[r.id] = (math.nan, math.nan, math.nan)
                rec.rejected.add(r.id)
            else:
                s.inflight[r.id] = (i, seq)
            arrived.append(r.id)
        if bq is not None:
            finished, s.clock, s.stalled, _, _ = _async_call(bq, sched, rec, self.cost, step, clock, arrived,
                                                             self.idle_dt, s.stalled, self.swap_unit)
            s.done += len(finished)
            return True
        if not sched.has_requests():
            rec.idle(step, clock, self.idle_dt, sched.pool, arrived)
            s.clock = clock + self.idle_dt
            return True
        plan = sched.schedule()
        s.stalled = 0 if (plan.entries or plan.admitted or plan.preempted) else s.stalled + 1
        if s.stalled > 1000:
            raise RuntimeError(f"no progress for 1000 steps at step {step}: the KV pool is too small for "
                               f"the requests in flight")
        cost = self.cost
        dt = cost.step_time_plan(plan) if self.shaped else cost.step_time_totals(plan.num_tokens, plan.context_tokens)
        swap_bytes = plan.swapped_in_bytes + plan.swapped_out_bytes
        dt += swap_bytes * self.swap_unit
        finished = sched.update(plan)
        end = clock + dt
        s.done += len(finished)
        rec.record(sched, plan, finished, step, clock, end, arrived, swap_bytes)
        s.clock = end
        return True

    @staticmethod
    def _sweep(s: _State) -> None:
        """Let go of finished requests (the scheduler only ever writes to its seqs)."""
        seqs = s.sched.seqs
        for sid in [sid for sid, seq in seqs.items() if seq.status in ("finished", "rejected")]:
            del seqs[sid]

    def finish(self) -> dict[str, tuple]:
        """(ttft, tpot, e2e) of every request read: the ones finished here, and the rest from a
        copy of the state run to the end of the requests read (what simulate() does next)."""
        s = self.s
        if s.done >= s.total or s.sched is None and not s.reqs:
            return self.times
        if s.sched is None:
            self._start()
        self._sweep(s)
        live = (s.sched, s.bq, s.pending, s.reqs, s.inflight)
        try:
            sched, bq, pending, reqs, inflight = pickle.loads(pickle.dumps(live, pickle.HIGHEST_PROTOCOL))
        except Exception:   # noqa: BLE001 - something the pickler cannot take: the slower deep copy
            sched, bq, pending, reqs, inflight = copy.deepcopy(live)
        c = _State()
        c.sched, c.bq, c.pending, c.reqs, c.inflight = sched, bq, pending, reqs, inflight
        c.step, c.clock, c.made_clock, c.stalled, c.total, c.done = (s.step, s.clock, s.made_clock, s.stalled,
                                                                    s.total, s.done)
        tail: dict[str, tuple] = {}
        own = self.rec
        rec = _Harvest(own.caching, tail, lambda seq: c.inflight.pop(seq.id, None))
        rec.info = {rid: copy.copy(own.info[rid]) for rid in inflight if rid in own.info}
        keep = self.rec, self.s
        self.rec, self.s = rec, c
        try:
            while c.done < c.total:
                self._next(c, _INF, False)
        finally:
            self.rec, self.s = keep
        out = dict(self.times)
        out.update(tail)
        return out


def fit_on(trace) -> object:
    """compare.fit_cost on a Trace already made (the page's)."""
    cost, _ = calibrate(busy_periods(trace))
    return cost


def prediction_of(times: dict[str, tuple], trace, cost) -> Prediction:
    """compare.predict's Prediction (no band, no simulated Trace) from each request's predicted
    (ttft, tpot, e2e) and the recording's Trace."""
    real = request_times(trace)
    out = real.copy()
    ids = list(times)
    vals = np.array([times[i] for i in ids], dtype=float).reshape(-1, 3)
    guess = pd.DataFrame(vals, columns=list(METRICS), index=pd.Index(ids, name="id"))
    for m in METRICS:
        out[f"predicted_{m}"] = guess[m].reindex(out["id"]).to_numpy(dtype=float)
    errors = {m: _pct(out[m].to_numpy(dtype=float), out[f"predicted_{m}"].to_numpy(dtype=float)) for m in METRICS}
    return Prediction(cost, None, out, errors, None)


class LivePrediction:
    """compare.predict(rec, rec, band=False) as rec grows (see the module's docstring)."""

    def __init__(self, refit_factor: float = REFIT_FACTOR, first_fit: int = FIRST_FIT_STEPS):
        self.refit_factor, self.first_fit = refit_factor, first_fit
        self.rec = None
        self.known: _Known | None = None
        self.sim: _TimedSim | None = None      # the model shown
        self.next: _TimedSim | None = None     # a new model catching up
        self.fitted_at = 0                     # recorded steps the shown model was fitted on
        self.next_at = 0
        self.prediction: Prediction | None = None
        self.at_steps = 0                      # the steps the prediction shown was made on
        self.cost_s = 0.0                      # the last update's time
        self.fit_s = 0.0                       # the last fit's time
        self.restarts = 0
        self._made_on = None

    @property
    def refitting(self) -> bool:
        return self.next is not None

    @property
    def cost(self):
        return self.sim.cost if self.sim is not None else None

    def update(self, rec, trace=None, budget_s: float | None = PREDICT_BUDGET_S) -> Prediction | None:
        """The prediction on what rec holds now (the last one while a new model catches up);
        trace: rec's Trace so far (None: to_trace(rec)). ValueError: no prediction can be made
        now (one sentence, as compare.predict says it; the next call tries again)."""
        t0 = time.monotonic()
        try:
            return self._update(rec, trace, budget_s)
        finally:
            self.cost_s = time.monotonic() - t0

    def _update(self, rec, trace, budget_s):
        if rec is not self.rec:   # the first call, or the file restarted: all afresh
            self.rec = None
            self.known, self.sim, self.next, self.prediction, self._made_on = _Known(rec), None, None, None, None
            self.rec = rec
            self.fitted_at = self.at_steps = 0
        k = self.known
        k.read()
        steps = len(rec.steps)
        end = None if budget_s is None else time.monotonic() + budget_s
        if self.next is None and (steps >= self.first_fit or rec.ended) and (
                self.sim is None or steps >= self.refit_factor * self.fitted_at):
            t = time.monotonic()
            tr = trace if trace is not None else to_trace(rec)
            try:
                cost = fit_on(tr)
            except ValueError:   # too few busy steps yet
                cost = None
            self.fit_s = time.monotonic() - t
            if cost is not None:
                self.next, self.next_at = _TimedSim(k, cost), int(len(tr.steps))
        if self.next is not None:
            self._run(self.next, end)
            if self.next.behind:
                return self.prediction
            self.sim, self.fitted_at, self.next, self._made_on = self.next, self.next_at, None, None
        if self.sim is None:
            return self.prediction
        at = (len(rec.adds), steps, len(rec.finishes), bool(rec.ended))
        if self.prediction is not None and at == self._made_on and not self.sim.behind:
            return self.prediction
        self._run(self.sim, end)
        if self.sim.behind:
            return self.prediction
        try:
            times = self.sim.finish()
        except RuntimeError as e:   # the copy stopped; what is kept is as it was
            raise ValueError(f"the simulator cannot run this recording's arrivals to their end ({e})") from None
        self.prediction = prediction_of(times, trace if trace is not None else to_trace(rec), self.sim.cost)
        self.at_steps, self._made_on = steps, at
        return self.prediction

    def _run(self, sim: _TimedSim, end) -> None:
        for _ in range(3):
            try:
                sim.sync()
                sim.advance(None if end is None else max(0.0, end - time.monotonic()))
                return
            except _Restart:
                self.restarts += 1
                sim.__init__(sim.known, sim.cost)
            except RuntimeError as e:   # the simulator stopped: as compare.predict says it; from step 1 next time
                sim.__init__(sim.known, sim.cost)
                raise ValueError(f"the simulator cannot run this recording's arrivals to their end ({e})") from None
        raise ValueError("the simulation had to start again three times in one refresh")
