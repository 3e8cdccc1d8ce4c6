"""The engine service as the Live engine page uses it: timed arrivals, each entry's lane, and a
Trace rebuilt from snapshots that equals the engine's own."""
import math
import time

from engine import EngineConfig
from engine.service import EngineService
from sim.calibrate import compare_with_simulator
from sim.live import LiveRun, preset_requests
from sim.workload import Request

CFG = EngineConfig(model="tiny", seed=2)
SCHED = {"num_gpu_blocks": 14, "block_size": 8, "max_num_batched_tokens": 32, "max_num_seqs": 4}


def _until(pred, timeout=60.0):
    t0 = time.time()
    while time.time() - t0 < timeout:
        if pred():
            return
        time.sleep(0.02)
    raise AssertionError("timed out")


def test_live_trace_matches_the_engine_trace_and_arrivals_wait_their_time():
    svc = EngineService()
    svc.claim("a")
    svc.start("a", CFG, SCHED)
    try:
        snap = svc.snapshot()
        assert snap["run"] == 1 and snap["info"]["run"] == 1
        t0 = svc.now_ms()
        reqs = [Request(f"r{i}", 12 + 5 * i, 5 + 2 * i) for i in range(5)]
        late = Request("late", 10, 4, arrival_time=t0 + 400.0)
        svc.submit("a", reqs + [late])
        assert svc.snapshot()["requests"]["late"]["status"] in ("submitted", "scheduled")
        live = LiveRun()
        _until(lambda: live.update(svc.snapshot) >= 0 and live.all_done())
        tr = svc.trace()
        r = tr.requests.set_index("request")
        assert r.loc["late", "arrival_time"] == t0 + 400.0  # recorded at its own time
        assert r.loc["late", "first_scheduled_time"] >= t0 + 400.0
        assert tr.steps["preempted"].sum() > 0  # the small pool forces preemptions
        lt = live.trace()
        cols = ["step", "request", "slot", "kind", "tokens", "computed_before", "sampled"]
        assert lt.batch[cols].reset_index(drop=True).equals(tr.batch[cols].reset_index(drop=True))
        assert lt.kv.reset_index(drop=True).equals(tr.kv.reset_index(drop=True))
        for c in ("step", "num_tokens", "prefill_tokens", "decode_tokens", "recompute_tokens", "running", "waiting",
                  "preempted", "finished"):
            assert lt.steps[c].tolist() == tr.steps[c].tolist(), c
        assert (lt.events["kind"] == "preempt").sum() == (tr.events["kind"] == "preempt").sum()
        # a new run: watchers start over
        svc.start("a", CFG, SCHED)
        live.update(svc.snapshot)
        assert live.run == 2 and live.num_steps == 0
        # requests still ahead when the engine stops are cancelled, never half-run
        svc.submit("a", [Request("never", 8, 2, arrival_time=svc.now_ms() + 60_000.0)])
        svc.stop("a")
        assert svc.snapshot()["requests"]["never"]["status"] == "cancelled"
    finally:
        svc.stop("a")


def test_calibrating_a_real_run():
    svc = EngineService()
    svc.claim("a")
    svc.start("a", CFG, dict(SCHED, num_gpu_blocks=64))
    try:
        reqs = preset_requests("two_tenants", start_ms=svc.now_ms())[:6]
        svc.submit("a", reqs)
        live = LiveRun()
        _until(lambda: live.update(svc.snapshot) >= 0 and live.all_done())
        svc.stop("a")
        tr = svc.trace()
        cmp = compare_with_simulator(tr, list(svc.engine.requests))
        assert len(cmp.ttft) == 6 and cmp.ttft["measured"].notna().all() and cmp.ttft["simulated"].notna().all()
        assert math.isfinite(cmp.cost.per_token) and 0 <= cmp.cost.fit_info["outliers"] <= len(cmp.steps) / 2
        assert set(cmp.metrics["metric"]) >= {"Mean TTFT (ms)", "Tokens / s"}
    finally:
        svc.stop("a")
