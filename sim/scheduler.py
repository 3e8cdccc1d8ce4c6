"""An iteration-level scheduler that makes vLLM v1's decisions, step for step.

The rules and their sources (vLLM 0.33.0, vllm/v1/core/sched/scheduler.py) are listed in
shared/vllm/README.md; the conformance cases in tests/fixtures/vllm check them. In short:
running requests first, in admission order, each asking for all its unscheduled tokens
(capped by the long-prefill threshold and the remaining budget); a running request that
cannot get a block preempts a victim; then, only if nothing was preempted, waiting
requests are admitted in queue order until the budget, max_num_seqs or the KV pool says
no, and the first refusal stops admission (head-of-line blocking).

Beyond vLLM, all off by default: preemption by swap, other waiting-queue policies
(sim/policies.py), a per-tenant running cap, admission control that rejects on arrival, and the
SLO-minded rules of sim/slo_policies.py (TTFT admission that rejects or defers, EDF, a budget
share for short prompts, SJF on a predicted length).

One implementation of the rules, two executors: the simulator (sim/simulate.py) fabricates
sampled tokens; the engine passes real ones to `update`.
"""
from __future__ import annotations

from dataclasses import dataclass, fields, replace

from .kvpool import BlockPool, SwapSpace
from .limits import shown
from .policies import POLICIES, WaitingQueue, make_policy
from .registry import register_scheduler
from .slo import SLO
from .slo_policies import ADMISSION_MODES, make_admission  # registers the SLO policies too
from .versions import NEWEST, check_options, rules
from .workload import Request, output_token

WAITING, RUNNING, PREEMPTED, FINISHED, REJECTED = "waiting", "running", "preempted", "finished", "rejected"
DEFERRED = "deferred"  # SLO admission's defer mode: held aside until nothing else waits
PREEMPTION_MODES = ("recompute", "swap")
# Whole-number knobs and the ranges a user-supplied config (an upload, a settings file, the URL)
# may set; the dashboard's widgets use the same ranges. Not enforced by the scheduler itself.
CONFIG_BOUNDS = {"max_num_batched_tokens": (1, 1_000_000), "max_num_seqs": (1, 4096),
                 "num_gpu_blocks": (2, 1_000_000), "block_size": (1, 1024),
                 "long_prefill_token_threshold": (0, 1_000_000), "tenant_cap": (0, 4096),
                 "max_queued_requests": (0, 1_000_000), "short_prompt_threshold": (1, 1_000_000),
                 "predictor_seed": (0, 2**31 - 1)}
# The SLO-minded options (sim/slo_policies.py). to_dict leaves them out while at their defaults,
# so a config that uses none of them, and the traces it is saved in, read as before they existed.
SLO_OPTION_DEFAULTS = {"slo": None, "slo_admission": "off", "sjf_error_sigma": 0.0, "predictor_seed": 0,
                       "short_prompt_threshold": 512, "short_budget_share": 0.25}
# The version and async options (sim/versions.py), likewise left out of to_dict at their defaults
VERSION_OPTION_DEFAULTS = {"vllm_version": NEWEST, "async_scheduling": False, "cache_aware_admission_window": 0,
                           "cache_aware_admission_threshold": 0.5}
_OMITTED_AT_DEFAULT = {**SLO_OPTION_DEFAULTS, **VERSION_OPTION_DEFAULTS}


@dataclass
class SchedulerConfig:
    num_gpu_blocks: int = 10000
    block_size: int = 16
    max_num_batched_tokens: int = 8192
    max_num_seqs: int = 256
    policy: str = "fcfs"
    enable_prefix_caching: bool = False
    long_prefill_token_threshold: int = 0
    enable_chunked_prefill: bool = True
    max_model_len: int | None = None
    scheduler_reserve_full_isl: bool = True
    watermark: float = 0.0
    # beyond vLLM (defaults reproduce vLLM)
    preemption_mode: str = "recompute"  # or "swap"
    swap_space_bytes: float = 4e9
    kv_bytes_per_token: float = 131072.0  # 8B-class model in F16 (lesson Example 1)
    aging: float = 0.0  # spf / sjf / priority_aging: key credit per step waited
    tenant_cap: int = 0  # max running requests per tenant (0 = no cap)
    vtc_w_in: float = 1.0
    vtc_w_out: float = 2.0
    max_queued_requests: int = 0  # admission control: 0 = unlimited
    max_queued_tokens: int = 0
    cont_batching: bool = True  # llama_slots only: -cb / -nocb
    # which vLLM's rules where versions differ (sim/versions.py): "0.20" to "0.34"
    vllm_version: str = NEWEST
    # vLLM 0.32.0's running loop (the rule vllm_version "0.32" picks); kept as a key of its own
    # for configs written before vllm_version existed. True forces it under any version
    self_preemption_ends_running: bool = False
    # vLLM's AsyncScheduler driven by EngineCore.step_with_batch_queue (sim/async_sched.py)
    async_scheduling: bool = False
    # vLLM 0.34's cache-aware admission (0 = off): see sim/versions.py
    cache_aware_admission_window: int = 0
    cache_aware_admission_threshold: float = 0.5
    # SLO-minded options (sim/slo_policies.py; defaults: off): targets for edf and admission,
    # admission off | reject | defer, sjf_predicted's error, short_long's split
    slo: dict | None = None
    slo_admission: str = "off"
    sjf_error_sigma: float = 0.0
    predictor_seed: int = 0
    short_prompt_threshold: int = 512
    short_budget_share: float = 0.25

    @classmethod
    def from_dict(cls, d: dict | None) -> "SchedulerConfig":
        known = {f.name for f in fields(cls)}
        d = dict(d or {})
        unknown = sorted(set(d) - known - {"scheduler"})
        if unknown:
            raise ValueError(f"unknown config keys: {', '.join(unknown)}")
        return cls(**{k: v for k, v in d.items() if k in known and (v is not None or k == "max_model_len")})

    def to_dict(self) -> dict:
        return {f.name: getattr(self, f.name) for f in fields(self)
                if f.name not in _OMITTED_AT_DEFAULT or getattr(self, f.name) != _OMITTED_AT_DEFAULT[f.name]}

    def validate(self) -> "SchedulerConfig":
        """Check a user-supplied config: known policy and preemption mode, whole numbers within
        CONFIG_BOUNDS, a true/false prefix-caching flag. Raises ValueError with a plain message;
        returns self."""
        if self.policy not in POLICIES:
            raise ValueError(f"unknown policy {shown(self.policy)}; known: {', '.join(POLICIES)}")
        if self.preemption_mode not in PREEMPTION_MODES:
            raise ValueError(f"preemption_mode must be recompute or swap, not {shown(self.preemption_mode)}")
        for name, (lo, hi) in CONFIG_BOUNDS.items():
            v = getattr(self, name)
            if isinstance(v, bool) or not isinstance(v, int) or not lo <= v <= hi:
                raise ValueError(f"config {name} must be a whole number from {lo:,} to {hi:,}, not {shown(v)}")
        if not isinstance(self.enable_prefix_caching, bool):
            raise ValueError("config enable_prefix_caching must be true or false")
        check_options(self)  # the version, async scheduling and cache-aware admission (sim/versions.py)
        self._validate_slo_options()
        return self

    def _validate_slo_options(self) -> None:
        try:
            slo = SLO.parse(self.slo)
        except ValueError as e:
            raise ValueError(f"config slo: {e}") from None
        if self.slo_admission not in ADMISSION_MODES:
            raise ValueError(f"config slo_admission must be one of {', '.join(ADMISSION_MODES)}, "
                             f"not {shown(self.slo_admission)}")
        if self.slo_admission != "off" and not slo.has_target("ttft"):
            raise ValueError("config slo_admission needs a ttft target in config slo, e.g. {\"ttft\": 400}")
        for name, lo, hi in (("sjf_error_sigma", 0.0, 10.0), ("short_budget_share", 0.0, 0.95)):
            v = getattr(self, name)
            if isinstance(v, bool) or not isinstance(v, (int, float)) or not lo <= v <= hi:
                raise ValueError(f"config {name} must be a number from {lo:g} to {hi:g}, not {shown(v)}")


class Seq:
    """A request's scheduling state (vLLM's Request, reduced to what scheduling reads)."""

    __slots__ = ("req", "id", "tenant", "priority", "prompt_len", "max_tokens", "add_seq", "status",
                 "num_computed", "num_output", "blocks", "num_cached_blocks", "tokens", "hashes",
                 "recompute_until", "swapped_blocks", "queued_step", "slot", "num_tokens", "placeholders")

    def __init__(self, req: Request, add_seq: int, step: int, with_tokens: bool):
        self.req = req
        self.id = req.id
        self.tenant = req.tenant
        self.priority = req.priority
        self.prompt_len = req.prompt_len
        self.max_tokens = req.max_tokens
        self.add_seq = add_seq
        self.status = WAITING
        self.num_computed = 0
        self.num_output = 0
        self.num_tokens = req.prompt_len  # prompt + generated (vLLM's num_tokens); kept by update()
        self.blocks: list[int] = []
        self.num_cached_blocks = 0
        self.tokens: list[int] | None = req.prompt_tokens() if with_tokens else None
        self.hashes: list[int] = []
        self.recompute_until = 0  # tokens computed before the last preemption (recomputed on resume)
        self.swapped_blocks = 0
        self.queued_step = step
        self.slot = -1
        self.placeholders = 0  # async scheduling: tokens scheduled whose output is still in flight

    def extend_hashes(self, block_size: int) -> None:
        """Chain hashes of every full block of known tokens (vLLM's request block hasher)."""
        toks = self.tokens
        h = self.hashes[-1] if self.hashes else 0
        for i in range(len(self.hashes), len(toks) // block_size):
            h = hash((h, tuple(toks[i * block_size:(i + 1) * block_size])))
            self.hashes.append(h)


class Entry:
    """One request's part of a step."""

    __slots__ = ("seq", "tokens", "computed_before", "kind", "recomputed", "sampled")

    def __init__(self, seq: Seq, tokens: int, computed_before: int, kind: str, recomputed: int = 0):
        self.seq = seq
        self.tokens = tokens
        self.computed_before = computed_before
        self.kind = kind  # prefill | decode | recompute
        self.recomputed = recomputed  # tokens of this chunk computed before a preemption
        self.sampled = False  # set by update(): the chunk reached the last known token


class StepPlan:
    """What one schedule() decided: the batch entries, who was preempted and admitted, the swap
    traffic, and the step's totals. A plain class: one is made per step."""

    __slots__ = ("entries", "preempted", "admitted", "swap_out", "swap_in", "swapped_out_bytes",
                 "swapped_in_bytes", "free_after_schedule", "num_tokens", "context_tokens")

    def __init__(self):
        self.entries: list[Entry] = []
        self.preempted: list[Seq] = []
        self.admitted: list[Seq] = []
        self.swap_out: dict = {}  # request id -> GPU blocks to copy out
        self.swap_in: dict = {}  # request id -> GPU blocks to copy back into
        self.swapped_out_bytes = 0.0
        self.swapped_in_bytes = 0.0
        self.free_after_schedule = 0
        self.num_tokens = 0
        self.context_tokens = 0


class _Ctx:
    __slots__ = ("step", "running_by_tenant")

    def __init__(self, step, running_by_tenant):
        self.step = step
        self.running_by_tenant = running_by_tenant


@register_scheduler("vllm")
class VllmScheduler:
    """vLLM v1's schedule() / update_from_output() over a BlockPool."""

    def __init__(self, config: SchedulerConfig, max_model_len: int, keep_tokens: bool = False):
        self.rules = rules(config.vllm_version)  # what differs between vLLM versions (sim/versions.py)
        if not config.enable_chunked_prefill and not self.rules.unchunked_prefill:   # 0.8: it chunks anyway
            config = replace(config, enable_chunked_prefill=True)
        self.cfg = config
        self._self_preemption_ends = config.self_preemption_ends_running or self.rules.self_preemption_ends_running
        # 0.34 ignores the long-prefill threshold without chunked prefill; older versions still cut at it
        self._threshold_off = not config.enable_chunked_prefill and not self.rules.threshold_without_chunking
        # 0.11's engine config clears the threshold when chunked prefill is off and prefix caching was not asked for
        self._threshold_off |= (self.rules.unchunked_uncached_clears_threshold and not config.enable_chunked_prefill
                                and not config.enable_prefix_caching)
        self._threshold_off |= not self.rules.long_prefill_threshold   # 0.8.2 and before never read it
        # up to 0.30 a lone request's chunks are capped at the threshold too; 0.31 on spares it (nobody to starve)
        self._threshold_alone = self.rules.threshold_for_a_lone_request
        self._cursor_follows_any_victim = self.rules.cursor_follows_any_victim
        self._skip_last_in_flight = self.rules.async_skips_last_token_in_flight
        self._rescinds_victim = self.rules.priority_victim_leaves_the_step
        self.victims_kept: list[int] = []   # steps where a scheduled priority victim kept its tokens (0.10)
        # scheduler_reserve_full_isl, where the version has the check (0.19 on)
        self._full_sequence_check = config.scheduler_reserve_full_isl and self.rules.full_sequence_check
        # 0.34's cache-aware admission, which vLLM turns on only for FCFS with prefix caching
        self._cache_window = (int(config.cache_aware_admission_window or 0)
                              if self.rules.cache_aware_admission and config.policy == "fcfs"
                              and config.enable_prefix_caching else 0)
        # token ids are needed for prefix hashing, and by an engine that feeds them to a model
        self.keep_tokens = keep_tokens or config.enable_prefix_caching
        self.max_model_len = int(max_model_len)
        self.pool = BlockPool.for_rules(self.rules, config, self.max_model_len)
        self.caching = config.enable_prefix_caching
        self.clock = 0.0  # the current step's start, set by the executor (SLO policies read it)
        self.waiting = make_policy(config.policy, aging=config.aging, tenant_cap=config.tenant_cap,
                                   w_in=config.vtc_w_in, w_out=config.vtc_w_out, config=config,
                                   clock=lambda: self.clock)
        self._split = bool(getattr(self.waiting, "splits_budget", False))  # short_long's budget share
        self.admission = make_admission(config.slo_admission, config)
        self.cost_model = None  # admission prices the work ahead with it (the executor's; else units)
        self.deferred: list[Seq] = []
        self.reject_reason = "queue limit"
        self.running: list[Seq] = []
        self.seqs: dict[str, Seq] = {}
        self.step = 0
        self._add_seq = 0
        self.swap = SwapSpace(config.swap_space_bytes, config.kv_bytes_per_token * config.block_size)
        self.watermark_blocks = int(config.watermark * config.num_gpu_blocks)
        self._free_slots: list[int] = []
        self._next_slot = 0
        self.running_by_tenant: dict[str, int] = {}
        self._finished_pending = False
        # fairness policies count service; skip the hook calls for the others
        self._charges_service = type(self.waiting).on_sampled is not WaitingQueue.on_sampled

    # -- arrivals ---------------------------------------------------------------
    def add_request(self, req: Request) -> Seq:
        """Queue a request, or reject it (admission control, like vLLM's HTTP 503)."""
        seq = Seq(req, self._add_seq, self.step, self.keep_tokens)
        self._add_seq += 1
        self.seqs[seq.id] = seq
        c = self.cfg
        if ((c.max_queued_requests and len(self.waiting) >= c.max_queued_requests)
                or (c.max_queued_tokens and self.queued_tokens() + req.prompt_len > c.max_queued_tokens)):
            seq.status = REJECTED
            self.reject_reason = "queue limit"
            return seq
        if self.caching:
            seq.extend_hashes(c.block_size)
        if self.admission is not None and self._slo_hopeless(seq):
            if self.admission.name == "reject":
                seq.status = REJECTED
                self.reject_reason = "TTFT target cannot be met"
            else:
                seq.status = DEFERRED
                self.deferred.append(seq)
            return seq
        self.waiting.add(seq)
        return seq

    def _slo_hopeless(self, seq: Seq) -> bool:
        if self.cost_model is None:
            from .cost import UnitsCost
            self.cost_model = UnitsCost()
        return self.admission.hopeless(self, seq, self.cost_model)

    def _release_deferred(self) -> None:
        """Deferred requests join the queue once nothing else waits (in arrival order)."""
        for seq in self.deferred:
            seq.status = WAITING
            seq.queued_step = self.step
            self.waiting.add(seq)
        self.deferred = []

    def queued_tokens(self) -> int:
        return sum(s.num_tokens - s.num_computed for s in self.waiting)

    def has_requests(self) -> bool:
        # vLLM still calls schedule() once after requests finish, to tell the workers
        # (finished_req_ids), so that step is empty but not idle.
        return bool(self.running) or len(self.waiting) > 0 or self._finished_pending or bool(self.deferred)

    # -- block allocation (KVCacheManager.allocate_slots) -------------------------
    def _allocate(self, seq: Seq, num_new: int, hits: list[int] = (), hit_tokens: int = 0,
                  admission: bool = False) -> bool:
        pool, bs = self.pool, self.cfg.block_size
        computed = seq.num_computed + hit_tokens
        need_tokens = min(computed + num_new, self.max_model_len)
        have = len(seq.blocks) + len(hits)
        evictable_hits = pool.evictable(hits) if hits else 0
        if admission and self._full_sequence_check:
            # vLLM's full-sequence gate: the whole known sequence must fit before admission.
            full = -(-seq.num_tokens // bs) - have + evictable_hits
            if full > pool.num_free - self.watermark_blocks:
                return False
        new = max(0, -(-need_tokens // bs) - have)
        reserve = self.watermark_blocks if admission else 0
        if new + evictable_hits > pool.num_free - reserve:
            return False
        if hits:
            pool.touch(hits, seq.id)
            seq.blocks.extend(hits)
            seq.num_cached_blocks = len(seq.blocks)
        if new:   # (up to 0.8.4 with blocks preallocated beyond the need)
            seq.blocks.extend(pool.allocate(pool.grant(new, len(seq.blocks)), seq.id))
        if self.caching:
            full_blocks = min(computed + num_new, seq.num_tokens) // bs
            if full_blocks > seq.num_cached_blocks:
                pool.cache(seq.blocks, seq.hashes, seq.num_cached_blocks, full_blocks, seq.id)
                seq.num_cached_blocks = full_blocks
        return True

    def _release_blocks(self, seq: Seq) -> None:
        self.pool.free(seq.blocks, seq.id)
        seq.blocks = []
        seq.num_cached_blocks = 0

    # -- slots (lanes for drawing; no effect on scheduling) ------------------------
    def _take_slot(self, seq: Seq) -> None:
        if self._free_slots:
            seq.slot = min(self._free_slots)
            self._free_slots.remove(seq.slot)
        else:
            seq.slot = self._next_slot
            self._next_slot += 1
        self.running_by_tenant[seq.tenant] = self.running_by_tenant.get(seq.tenant, 0) + 1

    def _give_slot(self, seq: Seq) -> None:
        # seq.slot keeps its last value: a request that finishes in the step it was admitted
        # is still drawn (and reported) in the lane it ran in
        self._free_slots.append(seq.slot)
        self.running_by_tenant[seq.tenant] -= 1

    # -- preemption ----------------------------------------------------------------
    def _preempt(self, seq: Seq, plan: StepPlan) -> None:
        """Free the victim's blocks and put it back at the front of the waiting queue."""
        swap = (self.cfg.preemption_mode == "swap" and seq.num_computed > 0
                and self.swap.can_hold(len(seq.blocks)))
        if swap:
            # the engine copies these blocks to host memory before the step's forward pass
            # can overwrite them (they are free again from here on)
            plan.swap_out[seq.id] = list(seq.blocks)
            plan.swapped_out_bytes += self.swap.swap_out(seq.id, len(seq.blocks))
            seq.swapped_blocks = len(seq.blocks)
        else:
            seq.recompute_until = max(seq.recompute_until, seq.num_computed)
            seq.num_computed = 0
        seq.placeholders = 0  # async: a token in flight still lands, as a stale one (sim/async_sched.py)
        self._release_blocks(seq)
        self._give_slot(seq)
        seq.status = PREEMPTED
        seq.queued_step = self.step
        self.waiting.prepend(seq)
        plan.preempted.append(seq)

    # -- cache-aware admission (vLLM 0.34, sim/versions.py) ------------------------------
    def _cache_aware_reorder(self) -> None:
        """At KV usage >= the threshold, the new requests (no computed tokens, never preempted)
        among the first `window` waiting ones are stably re-sorted by cached-prefix length,
        deepest first, in the queue itself (so the order persists). Runs where vLLM's does: at
        the start of the waiting phase, after the running requests took their blocks."""
        pool = self.pool
        usable = self.cfg.num_gpu_blocks - 1
        usage = 1.0 - pool.num_free / usable if usable else 0.0  # BlockPool.get_usage
        if usage < self.cfg.cache_aware_admission_threshold:
            return
        q = self.waiting.q
        head = [q[k] for k in range(min(self._cache_window, len(q)))]
        # only requests never scheduled: a preempted one keeps its place (cases034, 9404 step 10)
        slots = [k for k, seq in enumerate(head) if seq.num_computed == 0 and seq.status == WAITING]
        if len(slots) < 2:
            return
        bs = self.cfg.block_size
        depth = {k: len(pool.cached_prefix(head[k].hashes, head[k].num_tokens)) * bs for k in slots}
        ordered = sorted(slots, key=lambda k: -depth[k])  # stable: equals keep queue order
        for k, src in zip(slots, ordered):
            q[k] = head[src]

    # -- one step --------------------------------------------------------------------
    def _entry(self, seq: Seq, n: int, before: int) -> Entry:
        if before < seq.recompute_until:
            done = min(before + n, seq.recompute_until) - before
            return Entry(seq, n, before, "recompute", done)
        if before >= seq.prompt_len and seq.num_output > 0:
            return Entry(seq, n, before, "decode")
        return Entry(seq, n, before, "prefill")

    def schedule(self) -> StepPlan:
        self.step += 1
        self._finished_pending = False
        if self.deferred and not len(self.waiting):
            self._release_deferred()
        cfg, plan = self.cfg, StepPlan()
        budget = cfg.max_num_batched_tokens
        # short_long: what long prefills may take this step (None: no cap)
        long_left = self.waiting.long_token_cap(budget, self.running) if self._split else None
        # The long-prefill cap is decided once per step and spares a lone request (from 0.31).
        thr = cfg.long_prefill_token_threshold
        lone = len(self.running) + len(self.waiting) <= 1
        if thr <= 0 or self._threshold_off or (lone and not self._threshold_alone):
            thr = 0
        scheduled: dict[str, Entry] = {}
        running = self.running
        bs = cfg.block_size
        fast = not self.caching  # without hashing, a chunk inside held blocks needs no allocator call
        context = 0  # KV tokens the step's attention reads, summed over its requests

        # 1. running requests, in admission order
        i = 0
        while i < len(running) and budget > 0:
            seq = running[i]
            ph = seq.placeholders
            if ph and self._skip_last_in_flight and seq.num_computed + 2 - ph >= seq.prompt_len + seq.max_tokens:
                i += 1  # async: its last token is in flight; it keeps its slot and blocks, is not scheduled
                continue
            n = seq.num_tokens + ph - seq.num_computed  # async: a placeholder's position is scheduled too
            if thr and n > thr:
                n = thr
            if n > budget:
                n = budget
            # the input position stays below max_model_len (binds only where 0.10's async mode schedules a
            # request whose last token is in flight: update() finishes a request at max_model_len)
            if n > self.max_model_len - 1 - seq.num_computed:
                n = self.max_model_len - 1 - seq.num_computed
            capped = long_left is not None and n > 1 and self.waiting.is_long(seq)
            if capped and n > long_left:
                n = long_left
            if n <= 0:
                i += 1
                continue
            ok = fast and seq.num_computed + n <= len(seq.blocks) * bs
            # allocate, preempting victims until it fits; `ok` stays False only if the
            # requester itself was preempted (the loop's `break`)
            while not ok and not self._allocate(seq, n):
                victim = self.waiting.victim(running, seq)
                k = running.index(victim)
                del running[k]
                rescind = victim.id in scheduled and self._rescinds_victim
                if k < i and (rescind or self._cursor_follows_any_victim):
                    # the loop's place moves with the list (scheduler.py: victim_index < req_index), whether the
                    # victim was scheduled or skipped (async: its last token in flight); up to 0.27 only for a
                    # scheduled one, so the request after a skipped one is passed over; 0.10 never moves it
                    i -= 1
                if rescind:  # priority victims may already hold this step's tokens
                    e = scheduled.pop(victim.id)
                    budget += e.tokens
                    context -= e.computed_before + e.tokens
                    victim.num_computed = e.computed_before
                self._preempt(victim, plan)
                if victim.id in scheduled and not rescind:
                    # 0.10 leaves its tokens in the step, the budget spent (0.10.2 scheduler.py:259-267), and
                    # the step's end adds them to its computed tokens, which preemption had reset to 0
                    victim.num_computed = kept = scheduled[victim.id].tokens
                    scheduled[victim.id] = self._entry(victim, kept, 0)
                    self.victims_kept.append(self.step)
                if victim is seq:
                    break
            else:
                ok = True
            if not ok:
                if cfg.policy == "priority" and not self._self_preemption_ends:
                    continue  # vLLM 0.33 moves on to the next running request
                break  # FCFS: the requester was the last one; the running phase ends (and in vLLM 0.32, always)
            before = seq.num_computed
            if before >= seq.prompt_len and seq.num_output and before >= seq.recompute_until:
                scheduled[seq.id] = Entry(seq, n, before, "decode")  # the common case, inlined
            else:
                scheduled[seq.id] = self._entry(seq, n, before)
            seq.num_computed = before + n
            context += before + n
            budget -= n
            if capped:
                long_left -= n
            i += 1

        # 2. waiting requests, only if this step preempted nothing
        if not plan.preempted:
            if self._cache_window:
                self._cache_aware_reorder()
            ctx = None  # made when the loop runs: a full server admits nobody in most steps
            passed_over = []  # up to 0.11: unchunked prompts over the budget, back at the head after the loop
            while len(self.waiting) and budget > 0 and len(running) < cfg.max_num_seqs:
                if ctx is None:
                    ctx = _Ctx(self.step, self.running_by_tenant)
                seq = self.waiting.peek(ctx)
                if seq is None:
                    break
                hits, hit_tokens = [], 0
                if self.caching and seq.num_computed == 0:
                    hits = self.pool.cached_prefix(seq.hashes, seq.num_tokens)
                    hit_tokens = len(hits) * cfg.block_size
                swapped = seq.swapped_blocks > 0
                n = seq.num_tokens - seq.num_computed - hit_tokens
                if thr:
                    n = min(n, thr)
                if not cfg.enable_chunked_prefill and n > budget:
                    if self.rules.unchunked_too_long_passed_over:
                        # 0.11 tries the requests behind it (0.11.2 scheduler.py:502-508)
                        self.waiting.remove(seq)
                        passed_over.append(seq)
                        continue
                    break  # 0.12 on: it ends admission, nobody behind it is tried
                n = min(n, budget)
                capped = long_left is not None and self.waiting.is_long(seq)
                if capped:
                    if long_left <= 0:
                        break  # the rest of the budget is the short class's
                    n = min(n, long_left)
                if not self._allocate(seq, n, hits, hit_tokens, admission=True):
                    break  # head-of-line: nobody behind it is tried
                self.waiting.remove(seq)
                if swapped:
                    plan.swapped_in_bytes += self.swap.swap_in(seq.id)
                    plan.swap_in[seq.id] = seq.blocks[: seq.swapped_blocks]  # restore into these
                    seq.swapped_blocks = 0
                seq.status = RUNNING
                running.append(seq)
                self._take_slot(seq)
                plan.admitted.append(seq)
                before = seq.num_computed + hit_tokens
                scheduled[seq.id] = self._entry(seq, n, before)
                seq.num_computed = before + n
                context += before + n
                budget -= n
                if capped:
                    long_left -= n
            # each went to the front of the step's own queue, which then went to the front of the
            # waiting queue: the last passed over is first (0.11.2 scheduler.py:506, :621-622);
            # under priority the queue orders them anyway
            for seq in passed_over:
                self.waiting.prepend(seq)

        plan.entries = list(scheduled.values())
        return self._close_plan(plan, budget, context)

    def _close_plan(self, plan: StepPlan, budget_left: int, context: int) -> StepPlan:
        """Totals of a scheduled step, and the service the fairness policy charges for it."""
        plan.num_tokens = self.cfg.max_num_batched_tokens - budget_left
        plan.context_tokens = context
        if self._charges_service:
            for e in plan.entries:
                if e.kind == "prefill":
                    self.waiting.on_prompt_tokens(e.seq, e.tokens)
        plan.free_after_schedule = self.pool.num_free
        return plan

    def update(self, plan: StepPlan, sampled: dict[str, int] | None = None) -> list[Seq]:
        """After the forward pass: a request whose chunk reached its last known token samples
        one token (a partial prefill's sample is discarded); finished requests free their
        blocks at once. `sampled` gives real token ids (engine); else the oracle's ids."""
        finished = []
        bs, caching, max_len = self.cfg.block_size, self.caching, self.max_model_len
        on_sampled = self.waiting.on_sampled if self._charges_service else None
        for e in plan.entries:
            seq = e.seq
            if seq.num_computed < seq.num_tokens:
                continue
            e.sampled = True
            if seq.tokens is not None:
                tok = sampled[seq.id] if sampled is not None else output_token(seq.id, seq.num_output)
                seq.tokens.append(tok)
            seq.num_output += 1
            seq.num_tokens += 1
            if on_sampled is not None:
                on_sampled(seq)
            if caching and len(seq.tokens) // bs > len(seq.hashes):   # a block just filled (one in bs tokens)
                seq.extend_hashes(bs)
            if seq.num_output >= seq.max_tokens or seq.num_tokens >= max_len:
                finished.append(seq)
        self._finished_pending = bool(finished)
        return self._retire(finished)

    def _retire(self, finished: list[Seq]) -> list[Seq]:
        """Finished requests leave the batch and free their blocks and lanes at once."""
        for seq in finished:
            seq.status = FINISHED
            self.running.remove(seq)
            self._release_blocks(seq)
            self._give_slot(seq)
        return finished
