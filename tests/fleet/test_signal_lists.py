"""The routing loop's lists of engine signals (ctx.waiting, ctx.kv_usage) are its views' values at
every decision, with exact and with stale signals."""
from __future__ import annotations

import pytest

from sim.fleet import FleetSettings, simulate_fleet
from sim.fleet.routing import ROUTERS, Decision, Router
from sim.workload import Request, Workload


class _Watcher(Router):
    name = "test_signal_lists"
    seen: list = []

    def route(self, request, ctx):
        views = ctx.replicas
        _Watcher.seen.append((list(ctx.waiting), list(ctx.kv_usage),
                              [v.waiting for v in views], [v.kv_usage for v in views]))
        return Decision(len(_Watcher.seen) % self.n, "test")


@pytest.mark.parametrize("refresh", [0.0, 250.0])
def test_signal_lists_are_the_views(refresh, monkeypatch):
    monkeypatch.setitem(ROUTERS, "test_signal_lists", _Watcher)
    _Watcher.seen = []
    reqs = [Request(id=f"r{i}", prompt_len=300 + 40 * (i % 7), max_tokens=30 + i % 50, arrival_time=7.0 * i)
            for i in range(120)]
    wl = Workload(reqs, {"num_gpu_blocks": 120, "block_size": 16, "max_num_seqs": 4})
    simulate_fleet(wl, FleetSettings(replicas=3, router="test_signal_lists", refresh_interval=refresh))
    assert len(_Watcher.seen) == 120
    assert any(max(w) > 0 for w, _, _, _ in _Watcher.seen)   # queues did form
    for waiting, kv, view_waiting, view_kv in _Watcher.seen:
        assert waiting == view_waiting and kv == view_kv
