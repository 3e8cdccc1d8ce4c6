"""Drive vLLM's own scheduler class with the recorder plugged in, without a model (run it with
.venv-vllm's Python): the oracle harness's loop (tests/fixtures/vllm/vllm_trace.py: fabricated
model outputs, one token per finished chunk), so a test can lay the recorder's view of a run
beside the harness's own.

  python drive_recorder.py WORKLOAD.json RECORDING ORACLE.jsonl [--async] [--pipeline] [--plain]

--async: vLLM's AsyncScheduler class (AsyncRecordingScheduler). --pipeline: as the engine's batch
queue runs it with async scheduling: step k+1 is scheduled before step k's output is applied.
--plain: the plain scheduler, no recorder (to time the recorder's own cost: prints the seconds
spent in schedule() and update_from_output()). --as-old: the recorder as it runs inside vLLM 0.15
and before, which keep no Request.is_prefill_chunk (it notes the chunks itself), and 0.11, which
preempts inline (it notes a victim where it re-enters the waiting queue, not in _preempt_request).
--as-oldest: and as inside 0.9.1 and before (sync), which advance the requests inside schedule()
and keep the waiting queue in a deque.
"""
from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve()
ROOT = HERE.parents[3]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tests" / "fixtures" / "vllm"))

import vllm_trace  # noqa: E402  (sets the CPU platform's environment)


class _Timed:
    """Times the scheduler's two calls (a mixin before the scheduler class)."""
    spent = [0.0, 0.0]

    def schedule(self, *a, **kw):
        t = time.perf_counter()
        out = super().schedule(*a, **kw)
        _Timed.spent[0] += time.perf_counter() - t
        return out

    def update_from_output(self, *a, **kw):
        t = time.perf_counter()
        out = super().update_from_output(*a, **kw)
        _Timed.spent[1] += time.perf_counter() - t
        return out


def _block_hasher(vllm_config, hash_block_size: int):
    """vllm_trace.make_block_hasher for vLLM 0.32, whose get_request_block_hasher takes no
    lookahead (0.33's does): EngineCore's hasher, only with prefix caching."""
    if not vllm_config.cache_config.enable_prefix_caching:
        return None
    from vllm.utils.hashing import get_hash_fn_by_name
    from vllm.v1.core.kv_cache_utils import get_request_block_hasher, init_none_hash

    fn = get_hash_fn_by_name(vllm_config.cache_config.prefix_caching_hash_algo)
    init_none_hash(fn)
    return get_request_block_hasher(hash_block_size, fn)


vllm_trace.make_block_hasher = _block_hasher


def _patch(cls) -> None:
    """vllm_trace.build_scheduler subclasses vllm.v1.core.sched.scheduler.Scheduler when called."""
    import vllm.v1.core.sched.scheduler as mod
    mod.Scheduler = type("Timed" + cls.__name__, (_Timed, cls), {})


def run_pipelined(workload: dict, out) -> int:
    """Like vllm_trace.run, with two steps in flight: schedule(k+1) before update(k)."""
    from vllm.sampling_params import SamplingParams
    from vllm.v1.outputs import ModelRunnerOutput
    from vllm.v1.request import Request

    cfg = {**vllm_trace.DEFAULT_CONFIG, **workload.get("config", {})}
    reqs = sorted(workload["requests"], key=lambda r: int(r["arrival_step"]))
    mml = max(int(r["prompt_len"]) + int(r["max_tokens"]) for r in reqs)
    sched, vllm_config, hbs = vllm_trace.build_scheduler(cfg, mml)
    hasher = vllm_trace.make_block_hasher(vllm_config, hbs)
    pending = list(reqs)
    inflight = []   # (scheduler output, the requests it samples)
    step = 0
    for r in pending:
        sched.add_request(Request(request_id=str(r["id"]), prompt_token_ids=vllm_trace.prompt_tokens(r),
                                  sampling_params=SamplingParams(max_tokens=int(r["max_tokens"]), ignore_eos=True),
                                  pooling_params=None, arrival_time=float(step), priority=int(r.get("priority", 0)),
                                  block_hasher=hasher))
    while sched.has_requests() or inflight:
        if sched.has_requests() and len(inflight) < 2:
            so = sched.schedule()
            samples = [rid for rid in so.num_scheduled_tokens if not sched.requests[rid].is_prefill_chunk]
            inflight.append((so, samples))
            if len(inflight) < 2 and so.total_num_scheduled_tokens:
                continue
        so, samples = inflight.pop(0)
        ids = list(so.num_scheduled_tokens)
        mro = ModelRunnerOutput(req_ids=ids, req_id_to_index={rid: i for i, rid in enumerate(ids)},
                                sampled_token_ids=[[vllm_trace.output_token(rid, 0)] if rid in samples else []
                                                   for rid in ids])
        sched.update_from_output(so, mro)
        step += 1
    sched.shutdown()
    return step


def _as_old(recorder) -> None:
    """The recorder's paths for vLLMs without is_prefill_chunk or _preempt_request, on this one."""
    added, init = recorder._Recorder.added, recorder._Recording.__init__

    def flagless_added(self, req):
        added(self, req)
        self.flagless = True

    def inline_init(self, *a, **kw):
        init(self, *a, **kw)
        if self._rec is not None:
            self._watch_inline_preemption()

    def unnoted_preempt(self, request, *a, **kw):
        return super(recorder._Recording, self)._preempt_request(request, *a, **kw)

    recorder._Recorder.added = flagless_added
    recorder._Recording.__init__ = inline_init
    recorder._Recording._preempt_request = unnoted_preempt


def _as_oldest(recorder) -> None:
    """Those paths and the ones for vLLMs without _update_after_schedule and with a deque for a
    waiting queue (0.9.1 and before, sync only), on this one: chunks told after schedule(), victims
    noted where the queue takes them back."""
    init = recorder._Recording.__init__
    _as_old(recorder)
    added = recorder._Recorder.added

    def advanced_added(self, req):
        added(self, req)
        self.advanced = True

    def deque_init(self, *a, **kw):
        init(self, *a, **kw)
        if self._rec is not None:
            self._watch_deque_queue()

    recorder._Recorder.added = advanced_added
    recorder._Recording.__init__ = deque_init


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("workload")
    ap.add_argument("recording")
    ap.add_argument("oracle")
    ap.add_argument("--async", dest="is_async", action="store_true")
    ap.add_argument("--pipeline", action="store_true")
    ap.add_argument("--plain", action="store_true")
    ap.add_argument("--as-old", action="store_true")
    ap.add_argument("--as-oldest", action="store_true")
    a = ap.parse_args()
    import os
    os.environ["SCHEDLAB_VLLM_TRACE"] = a.recording
    if a.plain:
        from vllm.v1.core.sched.scheduler import Scheduler as cls
    else:
        from servers.vllm import recorder
        if a.as_oldest:
            _as_oldest(recorder)
        elif a.as_old:
            _as_old(recorder)
        cls = recorder.AsyncRecordingScheduler if a.is_async else recorder.RecordingScheduler
    _patch(cls)
    wl = json.loads(Path(a.workload).read_text())
    with open(a.oracle, "w") as out:
        t0 = time.perf_counter()
        if a.pipeline:
            run_pipelined(wl, out)
        else:
            vllm_trace.run(wl, out, 200000)
        wall = time.perf_counter() - t0
    print(json.dumps({"schedule_s": _Timed.spent[0], "update_s": _Timed.spent[1], "wall_s": wall}))


if __name__ == "__main__":
    main()
