"""The engine loop: the simulator's scheduler (sim.scheduler.VllmScheduler, every policy and
preemption mode it offers) drives a real model over a real paged KV cache.

Each step: schedule -> swap -> prepare -> forward -> sample -> update, every phase timed with
perf counters (the forward closed after a device sync). The run is recorded by the same
Recorder as the simulator's (sim.simulate), so the engine's Trace has the same tables, with
source "engine", time unit "ms", measured step times, the phase split as extra step columns
(t_schedule, t_swap, t_prepare, t_forward, t_sample, t_update, cpu_ms), and the KV block log.
"""
from __future__ import annotations

import dataclasses
import time
from dataclasses import dataclass

import torch

from sim.cost import MeasuredCost
from sim.scheduler import SchedulerConfig, Seq
from sim.simulate import SCHEDULERS, Arrivals, Recorder, check_fits, max_model_len_for, resolve_config
from sim.trace import Trace
from sim.workload import Request, Workload

from .config import EngineConfig
from .device import PhaseTimer, resolve_device, resolve_dtype, setup_threads
from .model import CausalLM
from .runner import ModelRunner
from .sampling import SamplingParams
from .weights import build_model

PHASE_COLUMNS = ("t_schedule", "t_swap", "t_prepare", "t_forward", "t_sample", "t_update", "cpu_ms")
ENGINE_SCHEDULERS = ("vllm", "static")  # schedulers whose plans name real KV blocks for every token
STALL_STEPS = 1000


@dataclass
class StepOutput:
    """What one step did, for live viewers."""
    step: int
    start: float  # ms since the run started
    end: float
    phases: dict  # phase -> ms
    entries: list  # (request, kind, tokens, computed_before) in batch order
    sampled: dict  # request -> token id
    finished: list
    preempted: list
    admitted: list
    num_tokens: int


@dataclass
class EngineResult:
    trace: Trace
    tokens: dict  # request -> generated token ids
    finish_reason: dict  # request -> "length" | "stop" | "rejected"


class LLMEngine:
    def __init__(self, config: EngineConfig | dict | None = None, scheduler: SchedulerConfig | dict | None = None,
                 *, model: CausalLM | None = None, max_model_len: int | None = None, scheduler_name: str = "vllm"):
        self.config = config if isinstance(config, EngineConfig) else EngineConfig.from_dict(config)
        c = self.config
        self.threads = setup_threads(c.threads)
        if model is None:
            self.device = resolve_device(c.device)
            self.dtype = resolve_dtype(c.dtype, self.device)
            model = build_model(c.model, seed=c.seed, dtype=self.dtype, device=self.device)
        else:
            p = next(model.parameters())
            self.device, self.dtype = p.device, p.dtype
        self.model = model
        self.eos = None if c.ignore_eos else model.config.eos_token_id
        self.runner: ModelRunner | None = None
        self.reset(scheduler, max_model_len, scheduler_name)

    # -- a run -------------------------------------------------------------------------------
    def reset(self, scheduler: SchedulerConfig | dict | None = None, max_model_len: int | None = None,
              scheduler_name: str = "vllm") -> None:
        """Start a new run (empty queues, empty trace) with this scheduler config (a dict may
        name the scheduler: {"scheduler": "static", ...}). The model stays; the KV cache is
        reallocated only if its geometry changes."""
        if isinstance(scheduler, dict) and "scheduler" in scheduler:
            scheduler = dict(scheduler)
            scheduler_name = scheduler.pop("scheduler")
        if scheduler_name not in ENGINE_SCHEDULERS:
            raise ValueError(f"the engine runs the {' and '.join(ENGINE_SCHEDULERS)} schedulers, "
                             f"not {scheduler_name!r}")
        cfg = scheduler if isinstance(scheduler, SchedulerConfig) else SchedulerConfig.from_dict(scheduler)
        if cfg.async_scheduling:   # its loop applies each step's output before the next schedule()
            raise ValueError("the live engine runs sync scheduling only: set async_scheduling to false "
                             "(the simulator models vLLM's async scheduling)")
        # swap-space accounting in this model's real bytes
        kv_bytes = self.model.config.kv_bytes_per_token(torch.empty((), dtype=self.dtype).element_size())
        cfg = dataclasses.replace(cfg, kv_bytes_per_token=float(kv_bytes))
        positions = self.model.rope.cos.shape[0]
        mml = int(max_model_len or cfg.max_model_len or positions)
        if mml > positions:
            raise ValueError(f"max_model_len {mml} is past the model's {positions} positions")
        self.sched_cfg, self.scheduler_name, self.max_model_len = cfg, scheduler_name, mml
        self.sched = SCHEDULERS[scheduler_name](cfg, mml)
        self.sched.keep_tokens = True  # the model needs every token id
        # SLO admission prices the queue ahead of an arrival in ms: with the steps measured so far
        self.step_cost = MeasuredCost("ms")
        self.sched.cost_model = self.step_cost
        attention = self.config.attention
        if self.runner is None or not self.runner.fits(cfg.num_gpu_blocks, cfg.block_size, attention):
            self.runner = None  # free the old pool first
            self.runner = ModelRunner(self.model, cfg.num_gpu_blocks, cfg.block_size, attention)
        self.runner.cache.host.clear()
        self.rec = Recorder(cfg.enable_prefix_caching, extra_step_columns=PHASE_COLUMNS)
        self.requests: list[Request] = []
        self.seqs: dict[str, Seq] = {}
        self.sampling: dict[str, SamplingParams] = {}
        self.stopped: set[str] = set()  # finished on EOS
        self.step_no = 0
        self._arrived: list[str] = []
        self._stalled = 0
        self.t0 = time.perf_counter()

    def now(self) -> float:
        """ms since the run started."""
        return (time.perf_counter() - self.t0) * 1000.0

    def check_request(self, req: Request) -> None:
        """ValueError if this run can never serve `req` (it only reads the run's fixed limits)."""
        need = req.prompt_len + req.max_tokens
        if need > self.max_model_len:
            raise ValueError(f"request {req.id} needs {need} tokens; max_model_len is {self.max_model_len}")
        blocks = -(-need // self.sched_cfg.block_size)
        if blocks > self.sched_cfg.num_gpu_blocks - 1:
            raise ValueError(f"request {req.id} needs {blocks} KV blocks; the pool has "
                             f"{self.sched_cfg.num_gpu_blocks - 1} usable")

    def add_request(self, req: Request, sampling: SamplingParams | None = None, *, timed: bool = False) -> Seq:
        """Queue a request; it joins before the next step (timed: arrival_time is its own)."""
        if req.id in self.seqs:
            raise ValueError(f"duplicate request id {req.id!r}")
        self.check_request(req)
        c = self.config
        self.sampling[req.id] = sampling or SamplingParams(c.temperature, c.top_k, c.top_p, c.seed)
        self.sched.pool.step = self.step_no + 1
        self.sched.clock = self.now()  # EDF's deadlines and SLO admission read the arrival's time (ms)
        seq = self.rec.arrive(self.sched, req, self.step_no + 1, self.sched.clock, timed)
        self.requests.append(req)
        self.seqs[req.id] = seq
        self._arrived.append(req.id)
        return seq

    def has_requests(self) -> bool:
        return self.sched.has_requests()

    def step(self) -> StepOutput | None:
        """One scheduler iteration and forward pass; None when there is nothing to do."""
        if not self.sched.has_requests():
            return None
        self.step_no += 1
        step, sched = self.step_no, self.sched
        sched.pool.step = step
        cpu0 = time.process_time()
        timer = PhaseTimer()
        start = (timer.t - self.t0) * 1000.0
        sched.clock = start
        plan = sched.schedule()
        timer.lap("t_schedule")
        self._stalled = 0 if (plan.entries or plan.admitted or plan.preempted) else self._stalled + 1
        if self._stalled > STALL_STEPS:
            raise RuntimeError(f"no progress for {STALL_STEPS} steps: the KV pool is too small for the "
                               f"requests in flight")
        sampled = self.runner.execute(plan, lambda s: self.sampling[s.id], timer)
        if self.eos is not None:
            for rid, tok in sampled.items():
                if tok == self.eos:  # finish now: update() ends a request at max_tokens
                    seq = sched.seqs[rid]
                    seq.max_tokens = seq.num_output + 1
                    self.stopped.add(rid)
        finished = sched.update(plan, sampled)
        end_t = timer.lap("t_update")
        end = (end_t - self.t0) * 1000.0
        for seq in finished:
            self.runner.cache.drop(seq.id)
        phases = dict(timer.ms, cpu_ms=(time.process_time() - cpu0) * 1000.0)
        self.step_cost.observe(plan.num_tokens, plan.context_tokens, end - start)
        swap_bytes = plan.swapped_in_bytes + plan.swapped_out_bytes
        arrived, self._arrived = self._arrived, []
        self.rec.record(sched, plan, finished, step, start, end, arrived, swap_bytes, phases)
        if sched.waiting.state():
            self.rec.record_counters(sched, step)
        for seq in finished:
            if seq.id in self.stopped:
                self.rec.info[seq.id]["finish_reason"] = "stop"
        return StepOutput(step, start, end, phases,
                          [(e.seq.id, e.kind, e.tokens, e.computed_before) for e in plan.entries],
                          sampled, [s.id for s in finished], [s.id for s in plan.preempted],
                          [s.id for s in plan.admitted], plan.num_tokens)

    def idle_step(self) -> None:
        """An empty iteration (nothing to schedule), recorded as the simulator records one."""
        self.step_no += 1
        self.sched.pool.step = self.step_no
        t = self.now()
        arrived, self._arrived = self._arrived, []
        self.rec.idle(self.step_no, t, 0.0, self.sched.pool, arrived)

    # -- results -----------------------------------------------------------------------------
    def tokens(self) -> dict[str, list[int]]:
        """Generated token ids so far, per request."""
        return {rid: list(s.tokens[s.prompt_len:]) for rid, s in self.seqs.items()}

    def finish_reasons(self) -> dict[str, str]:
        out = {}
        for rid, s in self.seqs.items():
            if s.status == "rejected":
                out[rid] = "rejected"
            elif s.status == "finished":
                out[rid] = "stop" if rid in self.stopped else "length"
        return out

    def trace(self, name: str = "") -> Trace:
        c = self.config
        meta = {"source": "engine", "time_unit": "ms", "workload": name,
                # the fit SLO admission priced arrivals with (it is the run's own, measured)
                "cost_model": self.step_cost.describe() if self.sched_cfg.slo_admission != "off" else None,
                "device": str(self.device), "dtype": str(self.dtype).replace("torch.", ""),
                "threads": self.threads, "model": self.model.config.to_dict(),
                "model_params": self.model.config.num_params, "engine": c.to_dict(),
                "attention": self.runner.attention if self.runner else None,
                "attention_check": self.runner.attention_check if self.runner else ""}
        return self.rec.build(self.requests, self.sched_cfg, self.scheduler_name, self.sched.pool, meta)

    def run(self, workload: Workload, config: dict | SchedulerConfig | None = None,
            sampling: dict[str, SamplingParams] | None = None) -> EngineResult:
        """Run a whole workload (its config, overridden by `config`), arrivals as the simulator
        does them: arrival_step joins before step arrival_step + 1; arrival_time (ms since the
        start) joins at the first step starting after it, an idle engine sleeping until then."""
        cfg, mode = resolve_config(workload, config)
        mml = max_model_len_for(workload, cfg)
        check_fits(workload, cfg, mml)
        self.reset(cfg, mml, mode)
        arrivals = Arrivals(workload.requests)
        sampling = sampling or {}
        while arrivals.remaining or self.sched.has_requests():
            if arrivals.timed and arrivals.remaining and not self.sched.has_requests():
                wait = arrivals.next_time() - self.now()
                if wait > 0:
                    time.sleep(wait / 1000.0)
            for r in arrivals.due(self.step_no + 1, self.now()):
                self.add_request(r, sampling.get(r.id), timed=arrivals.timed)
            if self.sched.has_requests():
                self.step()
            else:
                self.idle_step()
        return EngineResult(self.trace(workload.name), self.tokens(), self.finish_reasons())

