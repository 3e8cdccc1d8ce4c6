"""simulate_fleet's progress(done, total) (what the Fleet page's progress bar draws): requests
finished so far, rising to the whole workload, called during the run for routers that run the
replicas in lockstep and for those that run them through at the end, and never changing the run."""
from __future__ import annotations

import pytest

from sim.cost import cost_from_preset
from sim.fleet import FleetSettings, simulate_fleet
from sim.workload import Request, Workload

MS = cost_from_preset("a100-8B-fp16")


def _workload(n: int = 400) -> Workload:
    # long outputs at a steady rate: each replica takes a few thousand steps
    reqs = [Request(id=f"r{i}", prompt_len=64 + (i * 37) % 200, max_tokens=40 + (i * 13) % 80,
                    arrival_time=i * 2.0, prompt_seed=i % 5) for i in range(n)]
    return Workload(reqs, {"enable_prefix_caching": True, "num_gpu_blocks": 400, "max_num_seqs": 8,
                           "max_num_batched_tokens": 256}, name="progress")


@pytest.mark.parametrize("router", ["round_robin", "power_of_two", "least_loaded", "cache_aware"])
def test_progress_rises_to_every_request_and_changes_nothing(router):
    wl = _workload()
    s = FleetSettings(replicas=3, router=router, response_tail=2.0)
    calls: list[tuple[int, int]] = []
    told = simulate_fleet(wl, s, cost=MS, progress=lambda done, total: calls.append((done, total)))
    plain = simulate_fleet(wl, s, cost=MS)
    assert told.to_bytes() == plain.to_bytes()
    assert sum(t.num_steps for t in told.replicas) > 3000   # enough steps for calls before the end
    assert len(calls) >= 3, calls
    done = [d for d, _ in calls]
    assert done == sorted(done) and all(t == len(wl.requests) for _, t in calls)
    assert calls[-1] == (len(wl.requests), len(wl.requests))
    assert any(0 < d < len(wl.requests) for d in done[:-1])   # told while running, not only at the end
