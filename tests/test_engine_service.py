"""The live wrapper: one engine stepping in a worker thread; many readers, one driver."""
import threading
import time

import pytest

from engine import EngineConfig, LLMEngine
from engine.service import EngineService, get_service
from sim.workload import Request, Workload

CFG = EngineConfig(model="tiny", dtype="float64", seed=1)
SCHED = {"num_gpu_blocks": 24, "max_num_batched_tokens": 48, "max_num_seqs": 8}


def _reqs(prefix, n=6):
    return [Request(f"{prefix}{i}", prompt_len=10 + 7 * i, max_tokens=4 + 3 * i) for i in range(n)]


def _wait_done(svc, ids, timeout=60.0):
    t0 = time.time()
    while time.time() - t0 < timeout:
        snap = svc.snapshot()
        assert snap["error"] is None, snap["error"]
        if all(snap["requests"][i]["status"] in ("finished", "rejected") for i in ids):
            return snap
        time.sleep(0.02)
    raise AssertionError("requests did not finish")


def test_one_driver_many_watchers():
    svc = EngineService()
    assert svc.claim("a") and not svc.claim("b") and svc.claim("a")
    with pytest.raises(PermissionError):
        svc.start("b", CFG, SCHED)
    svc.start("a", CFG, SCHED)
    with pytest.raises(PermissionError):
        svc.submit("b", _reqs("x"))
    errors, seen = [], []

    def watch():  # a second session polling as fast as it can while the engine runs
        try:
            since = 0
            for _ in range(400):
                snap = svc.snapshot(since)
                since += len(snap["steps"])
                seen.extend(s["step"] for s in snap["steps"])
                time.sleep(0.001)
        except Exception as e:  # pragma: no cover - the assertion below reports it
            errors.append(e)

    watcher = threading.Thread(target=watch)
    watcher.start()
    reqs = _reqs("r")
    svc.submit("a", reqs[:3])
    time.sleep(0.05)
    svc.submit("a", reqs[3:])
    with pytest.raises(ValueError, match="duplicate"):
        svc.submit("a", reqs[:1])
    snap = _wait_done(svc, [r.id for r in reqs])
    watcher.join()
    assert not errors
    assert seen == sorted(seen) and len(set(seen)) == len(seen)  # each step seen once, in order
    trace = svc.trace()
    assert trace.source == "engine" and trace.num_steps == snap["num_steps"]
    for r in reqs:
        assert len(snap["requests"][r.id]["generated"]) == r.max_tokens
    # what the live run generated is what a batch run of the same requests generates
    batch = LLMEngine(CFG, SCHED).run(Workload(reqs), SCHED)
    assert {r.id: snap["requests"][r.id]["generated"] for r in reqs} == batch.tokens
    # KV changes published per step rebuild the pool: everything is free again at the end
    held = {}
    for s in snap["steps"]:
        for block, rid, op in s["kv"]:
            held[block] = held.get(block, 0) + {"acquire": 1, "release": -1}.get(op, 0)
    assert held and all(v == 0 for v in held.values())
    svc.stop("a")
    assert not svc.running
    assert svc.trace().num_steps == snap["num_steps"]  # still readable after stop
    svc.release("a")
    assert svc.claim("b")


def test_restart_resets_the_run_and_keeps_the_model():
    svc = EngineService()
    svc.claim("a")
    svc.start("a", CFG, SCHED)
    model = svc.engine.model
    svc.submit("a", _reqs("p", 2))
    _wait_done(svc, ["p0", "p1"])
    svc.start("a", CFG, dict(SCHED, num_gpu_blocks=40))
    assert svc.engine.model is model and svc.snapshot()["num_steps"] == 0
    assert svc.snapshot()["info"]["num_blocks"] == 40
    svc.submit("a", _reqs("p", 2))  # ids are free again in a new run
    _wait_done(svc, ["p0", "p1"])
    with pytest.raises(ValueError, match="max_model_len|KV pool"):
        svc.submit("a", [Request("huge", 5000, 10)])
    svc.stop("a")
    with pytest.raises(RuntimeError, match="not running"):
        svc.submit("a", _reqs("q", 1))


def test_worker_error_is_reported_not_raised():
    svc = EngineService()
    svc.claim("a")
    svc.start("a", CFG, SCHED)

    def boom(*a, **k):
        raise RuntimeError("injected")

    svc.engine.step = boom
    svc.submit("a", _reqs("e", 1))
    t0 = time.time()
    while svc.snapshot()["error"] is None and time.time() - t0 < 10:
        time.sleep(0.01)
    assert "injected" in svc.snapshot()["error"]
    assert not svc.running


def test_get_service_is_one_per_process():
    assert get_service() is get_service()
