"""The fleet loop: replicas on one clock behind a router (sim/fleet/fleet.py)."""
from __future__ import annotations

import json
import math
import subprocess
import sys
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest

from sim.cost import cost_from_preset
from sim.fleet import FleetSettings, FleetTrace, fleet_summary, simulate_fleet
from sim.fleet.export import fleet_chrome_trace, routes_csv
from sim.fleet.metrics import busy_time, group_placement, prefix_groups
from sim.fleet.scenarios import FLEET_SCENARIOS
from sim.simulate import simulate
from sim.workload import Request, Workload

ROOT = Path(__file__).resolve().parents[2]
MS = cost_from_preset("a100-8B-fp16")


def _workload(n=120, gap=9.0, blocks=120, seeds=4, **cfg) -> Workload:
    reqs = [Request(id=f"r{i}", prompt_len=100 + (i * 37) % 400, max_tokens=8 + (i * 13) % 60,
                    arrival_time=i * gap, prompt_seed=i % seeds, tenant=f"t{i % 3}") for i in range(n)]
    return Workload(reqs, {"enable_prefix_caching": True, "num_gpu_blocks": blocks, "max_num_seqs": 16,
                           "max_num_batched_tokens": 512, **cfg}, name="test")


ASYNC = {"async_scheduling": True}


@pytest.mark.parametrize("cfg", [{}, {"num_gpu_blocks": 60, "preemption_mode": "swap"}, {"policy": "priority"},
                                 ASYNC, {**ASYNC, "num_gpu_blocks": 60}, {**ASYNC, "policy": "priority"},
                                 {**ASYNC, "vllm_version": "0.32", "num_gpu_blocks": 60},
                                 {"policy": "vtc"}, {**ASYNC, "policy": "vtc", "max_queued_requests": 2}])
def test_one_replica_is_the_single_scheduler(cfg):
    """A fleet of one is sim.simulate on the same timed arrivals: every table equal; with vLLM's
    async scheduling too (each step one call of the batch-queue loop), through preemptions."""
    wl = _workload(**cfg)
    fleet = simulate_fleet(wl, FleetSettings(replicas=1), cost=MS)
    alone = simulate(wl, cost=MS)
    for name in ("steps", "batch", "requests", "kv", "events", "counters"):
        assert getattr(fleet.replicas[0], name).equals(getattr(alone, name)), name
    assert (fleet.routes["replica"] == 0).all()
    if cfg.get("policy") == "vtc":
        assert len(alone.counters) > 0
    if cfg.get("num_gpu_blocks") == 60:
        assert alone.requests["preemptions"].sum() > 0
    if cfg.get("async_scheduling"):   # async parts from sync: the step's output comes a call later
        assert not alone.steps.equals(simulate(_workload(**{**cfg, "async_scheduling": False}), cost=MS).steps)


def test_one_replica_prices_steps_by_their_make_up_as_the_single_scheduler_does():
    """A cost form priced by a step's make-up (prefill and decode tokens, sequences): a fleet of
    one prices each step as sim.simulate does, not from its token totals."""
    from sim.cost import FormCost
    cost = FormCost(form="prefill_decode_seq", coef={"prefill": 0.02, "decode": 0.4, "context": 0.0005,
                                                      "seqs": 0.3}, per_step=2.0)
    wl = _workload()
    fleet = simulate_fleet(wl, FleetSettings(replicas=1), cost=cost)
    alone = simulate(wl, cost=cost)
    assert fleet.replicas[0].steps.equals(alone.steps) and fleet.replicas[0].requests.equals(alone.requests)
    totals = simulate(wl, cost=FormCost(form="linear", coef={"tokens": 0.02, "context": 0.0005}, per_step=2.0))
    assert not alone.steps["end"].equals(totals.steps["end"])   # the make-up changed the times


def test_pressure_case_had_preemptions():
    # the second case above is only worth its name if the small pool preempts
    t = simulate(_workload(num_gpu_blocks=60, preemption_mode="swap"), cost=MS)
    assert t.requests["preemptions"].sum() > 0


def test_round_robin_in_arrival_order_and_every_request_once():
    wl = _workload(n=40)
    f = simulate_fleet(wl, FleetSettings(replicas=3, router="round_robin"), cost=MS)
    assert f.routes["request"].tolist() == [f"r{i}" for i in range(40)]
    assert f.routes["replica"].tolist() == [i % 3 for i in range(40)]
    served = sorted(rid for t in f.replicas for rid in t.requests["request"])
    assert served == sorted(r.id for r in wl.requests)
    for i, t in enumerate(f.replicas):
        assert set(t.requests["request"]) == set(f.routes["request"][f.routes["replica"] == i])


def test_same_inputs_same_bytes_and_seeds_matter():
    wl = _workload(n=60)
    s = FleetSettings(replicas=4, router="power_of_two", seed=5)
    a, b = simulate_fleet(wl, s, cost=MS), simulate_fleet(wl, s, cost=MS)
    assert a.to_bytes() == b.to_bytes()
    other = simulate_fleet(wl, FleetSettings(replicas=4, router="power_of_two", seed=6), cost=MS)
    assert other.routes["replica"].tolist() != a.routes["replica"].tolist()


def test_save_and_load_round_trip(tmp_path):
    f = simulate_fleet(_workload(n=30), FleetSettings(replicas=2, router="cache_aware"), cost=MS)
    p = tmp_path / "f.fleet"
    f.save(str(p))
    g = FleetTrace.load(str(p))
    assert g.to_bytes() == f.to_bytes()
    assert g.routes["scores"].iloc[0] != ""   # every scorer's score is kept
    assert fleet_summary(g)["metrics"]["requests"] == 30


@pytest.mark.parametrize("data, says", [
    (b"\x00\x01binary", "not a fleet trace file"),
    (b'{"format": "scheduler-lab-trace", "version": 1}', "format"),
    (b'{"format": "scheduler-lab-fleet", "version": 99, "meta": {}, "replicas": [], "routes": {}}', "version"),
    (b'{"format": "scheduler-lab-fleet", "version": 1, "meta": {}, "replicas": [], "routes": {}}', "1 to 1,024"),
])
def test_bad_fleet_files_say_one_sentence(data, says):
    with pytest.raises(ValueError, match=says) as e:
        FleetTrace.from_bytes(data)
    assert "\n" not in str(e.value) and len(str(e.value)) < 250


def test_routing_table_out_of_range_replica_is_refused():
    f = simulate_fleet(_workload(n=10), FleetSettings(replicas=2), cost=MS)
    doc = json.loads(__import__("gzip").decompress(f.to_bytes()))
    col = doc["routes"]["columns"].index("replica")
    doc["routes"]["data"][col][0] = 7
    with pytest.raises(ValueError, match="routing table"):
        FleetTrace.from_bytes(json.dumps(doc).encode())


def test_response_tail_delays_the_release():
    wl = _workload(n=30)
    f = simulate_fleet(wl, FleetSettings(replicas=2, response_tail=25.0), cost=MS)
    fin = {rid: t for tr in f.replicas for rid, t in zip(tr.requests["request"], tr.requests["finish_time"])}
    rel = dict(zip(f.routes["request"], f.routes["released"]))
    assert all(math.isclose(rel[r], fin[r] + 25.0) for r in fin)


def test_in_flight_counts_are_what_least_loaded_compares():
    """With a long tail every request stays in flight: least_loaded on in-flight counts then
    alternates exactly (a count each, ties to the first)."""
    wl = _workload(n=20, gap=1.0)
    f = simulate_fleet(wl, FleetSettings(replicas=2, router="least_loaded", response_tail=1e9), cost=MS)
    assert f.routes["replica"].tolist() == [i % 2 for i in range(20)]


def test_stale_signals_herd():
    """A KV-use router refreshed every second sends every arrival in between to the replica
    that looked emptiest; refreshed at every decision it spreads them."""
    wl = _workload(n=80, gap=5.0, blocks=400)
    stale = simulate_fleet(wl, FleetSettings(replicas=4, router="least_loaded", router_config={"signal": "kv_usage"},
                                             refresh_interval=1000.0), cost=MS)
    exact = simulate_fleet(wl, FleetSettings(replicas=4, router="least_loaded", router_config={"signal": "kv_usage"}),
                           cost=MS)
    r = stale.routes
    window = np.floor(r["arrival"].to_numpy() / 1000.0)
    per_window = r.groupby(window)["replica"].nunique()
    assert (per_window == 1).all()                      # one replica per refresh window
    assert exact.routes.groupby(window)["replica"].nunique().max() > 1


def test_router_latency_moves_the_arrival_at_the_replica():
    f = simulate_fleet(_workload(n=10), FleetSettings(replicas=2, router_latency=3.5), cost=MS)
    for tr in f.replicas:
        arr = dict(zip(tr.requests["request"], tr.requests["arrival_time"]))
        for rid, a in arr.items():
            assert a == pytest.approx(float(rid[1:]) * 9.0 + 3.5)


def test_replicas_may_differ():
    wl = _workload(n=20)
    s = FleetSettings(replicas=2, replica_configs=[{}, {"num_gpu_blocks": 300, "max_num_seqs": 4}])
    f = simulate_fleet(wl, s, cost=MS)
    assert f.replicas[0].meta["config"]["num_gpu_blocks"] == 120
    assert f.replicas[1].meta["config"]["max_num_seqs"] == 4
    with pytest.raises(ValueError, match="replica 1"):
        simulate_fleet(wl, FleetSettings(replicas=2, replica_configs=[{}, {"policy": "nope"}]), cost=MS)
    with pytest.raises(ValueError, match="list of 2"):
        simulate_fleet(wl, FleetSettings(replicas=2, replica_configs=[{}]), cost=MS)


@pytest.mark.parametrize("kw, says", [({"replicas": 0}, "1 to 1,024"), ({"replicas": 10_000}, "1 to 1,024"),
                                      ({"refresh_interval": float("nan")}, "finite"),
                                      ({"response_tail": -1.0}, "0 or more")])
def test_bad_settings(kw, says):
    with pytest.raises(ValueError, match=says):
        simulate_fleet(_workload(n=3), FleetSettings(**kw), cost=MS)


def test_rejected_requests_leave_the_router_at_once():
    wl = _workload(n=40, gap=0.5, max_queued_requests=2)
    f = simulate_fleet(wl, FleetSettings(replicas=2), cost=MS)
    rej = [rid for tr in f.replicas for rid, x in zip(tr.requests["request"], tr.requests["rejected"]) if x]
    assert rej
    r = f.routes.set_index("request")
    assert (r.loc[rej, "released"] <= r.loc[rej, "reached"] + 1e-9 + 50).all()
    assert fleet_summary(f)["metrics"]["rejected"] == len(rej)


def test_step_driven_workload_gets_a_clock():
    reqs = [Request(id=f"s{i}", prompt_len=32, max_tokens=4, arrival_step=i) for i in range(6)]
    f = simulate_fleet(Workload(reqs, {}), FleetSettings(replicas=2))
    assert f.meta["clock"].startswith("arrival_step")
    assert f.routes["arrival"].tolist() == sorted(f.routes["arrival"].tolist())
    assert fleet_summary(f)["metrics"]["finished"] == 6


def test_fleet_metrics_add_up():
    f = simulate_fleet(_workload(n=90), FleetSettings(replicas=3, router="round_robin"), cost=MS)
    out = fleet_summary(f)
    m, per = out["metrics"], out["per_replica"]
    assert m["requests"] == sum(p["requests"] for p in per) == 90
    assert m["cached_prompt_tokens"] == sum(p["cached_prompt_tokens"] for p in per)
    assert m["output_tokens"] == sum(p["output_tokens"] for p in per)
    busy = [busy_time(t) for t in f.replicas]
    assert m["load_imbalance"] == pytest.approx(max(busy) / np.mean(busy))
    prompt = sum(int(t.requests["prompt_len"].sum()) for t in f.replicas)
    assert m["prefix_hit_rate"] == pytest.approx(m["cached_prompt_tokens"] / prompt)
    e2e = np.concatenate([(t.requests["finish_time"] - t.requests["arrival_time"]).to_numpy() for t in f.replicas])
    assert m["e2e_mean"] == pytest.approx(e2e.mean())
    assert m["e2e_p99"] == pytest.approx(np.percentile(e2e, 99))
    e2e0 = (f.replicas[0].requests["finish_time"] - f.replicas[0].requests["arrival_time"]).to_numpy()
    assert per[0]["e2e_p50"] == pytest.approx(np.median(e2e0))
    assert m["tpot_p50"] > 0 and m["tpot_p99"] >= m["tpot_p50"]


@pytest.mark.parametrize("mode", [{}, ASYNC])
def test_digest_gives_the_same_metrics(mode):
    wl = _workload(n=60, **mode)
    s = FleetSettings(replicas=3, router="cache_aware")
    full = fleet_summary(simulate_fleet(wl, s, cost=MS))["metrics"]
    dig = fleet_summary(simulate_fleet(wl, s, cost=MS, digest=True))["metrics"]
    for k, v in full.items():
        if isinstance(v, str):
            assert dig[k] == v, k
        elif isinstance(v, float) and math.isnan(v):
            assert math.isnan(dig[k]), k
        else:
            assert dig[k] == pytest.approx(v, rel=1e-9), k


def test_cache_aware_keeps_groups_together_and_hits_more():
    sc = FLEET_SCENARIOS["chat"]
    wl = sc.workload()
    aware = simulate_fleet(wl, sc.a, cost=MS, digest=True)
    rr = simulate_fleet(wl, sc.b, cost=MS, digest=True)
    groups = prefix_groups(wl.requests)
    spread_aware = (group_placement(aware, groups) > 0).sum(axis=1).mean()
    spread_rr = (group_placement(rr, groups) > 0).sum(axis=1).mean()
    assert spread_aware < 1.5 < 3.5 < spread_rr
    assert fleet_summary(aware)["metrics"]["prefix_hit_rate"] > fleet_summary(rr)["metrics"]["prefix_hit_rate"] + 0.1


def test_exports():
    f = simulate_fleet(_workload(n=12), FleetSettings(replicas=3), cost=MS)
    doc = fleet_chrome_trace(f)
    pids = {e["pid"] for e in doc["traceEvents"]}
    assert pids == {1, 2, 3, 4}   # the router and three replicas
    names = [e["args"]["name"] for e in doc["traceEvents"] if e.get("name") == "process_name"]
    assert names[0] == "router" and len(names) == 4
    csv = routes_csv(f).decode().splitlines()
    assert csv[0].startswith("request,tenant,prompt_len,arrival,replica,reason")
    assert len(csv) == 13


def _cli(*args, cwd=ROOT):
    return subprocess.run([sys.executable, "-m", "sim", "fleet", *args], cwd=cwd, capture_output=True, text=True,
                          timeout=300)


def test_cli_json(tmp_path):
    wl = _workload(n=25)
    p = tmp_path / "w.json"
    p.write_text(wl.dumps())
    r = _cli(str(p), "--replicas", "3", "--router", "round_robin", "--json", "-o", str(tmp_path / "f.trace"))
    assert r.returncode == 0, r.stderr
    out = json.loads(r.stdout)
    assert out["routes"][:4] == [{"id": "r0", "replica": 0}, {"id": "r1", "replica": 1}, {"id": "r2", "replica": 2},
                                 {"id": "r3", "replica": 0}]
    assert out["metrics"]["requests"] == 25 and len(out["per_replica"]) == 3
    assert out["metrics"]["cached_prompt_tokens"] == sum(p["cached_prompt_tokens"] for p in out["per_replica"])
    assert FleetTrace.load(str(tmp_path / "f.trace")).num_replicas == 3


@pytest.mark.parametrize("args, says", [
    (["--replicas", "0"], "1 to 1,024"), (["--replicas", "10000"], "1 to 1,024"),
    (["--router", "nope"], "unknown router"),
    (["--router", "cache_aware", "--router-config", '{"bogus": 1}'], "no setting 'bogus'"),
    (["--router", "weighted", "--router-config", '{"queue_weight": NaN}'], "finite number"),
    (["--recordings", "/nonexistent/rec.jsonl"], "rec.jsonl"),
])
def test_cli_refusals_are_one_line(tmp_path, args, says):
    p = tmp_path / "w.json"
    p.write_text(_workload(n=3).dumps())
    first = [] if "--recordings" in args else [str(p)]
    r = _cli(*first, *args)
    assert r.returncode != 0
    assert says in r.stderr
    assert "Traceback" not in r.stderr and len(r.stderr.strip().splitlines()) == 1


@pytest.mark.parametrize("router", ["round_robin", "random", "consistent_hash"])
def test_a_router_that_reads_nothing_skips_the_lockstep_and_changes_nothing(router, monkeypatch):
    """round_robin, random and consistent_hash read no signal: their replicas run through at the
    end instead of up to each decision, and the fleet is the same to the byte."""
    from sim.fleet.routers import make_router
    wl = _workload(n=80, gap=3.0)
    s = FleetSettings(replicas=3, router=router, response_tail=5.0)
    assert make_router(router, 3).reads_fleet is False
    lazy = simulate_fleet(wl, s, cost=MS).to_bytes()
    cls = type(make_router(router, 3))
    monkeypatch.setattr(cls, "reads_fleet", True)
    assert simulate_fleet(wl, s, cost=MS).to_bytes() == lazy


def test_cli_calibrated_on_recordings(tmp_path):
    """--calibrate: each replica's steps cost what a cost model fitted on its recording says, and
    the response tail is the recordings' front-end latency."""
    kit = ROOT / "tests" / "fixtures" / "fleet" / "kit-vllm-cache_aware-tokens"
    p = tmp_path / "w.json"
    p.write_text(_workload(n=20, blocks=200, max_model_len=1024).dumps())
    r = _cli(str(p), "--replicas", "2", "--router", "least_loaded", "--json", "--calibrate",
             str(kit / "rec-8101.jsonl.gz"), str(kit / "rec-8102.jsonl.gz"))
    assert r.returncode == 0, r.stderr
    out = json.loads(r.stdout)
    from servers.vllm.fleet import read_fleet
    real = read_fleet([kit / "rec-8101.jsonl.gz", kit / "rec-8102.jsonl.gz"])
    front_end = np.median([q.added - q.arrival for q in real.requests])   # ms each request spent before the scheduler
    assert out["settings"]["response_tail"] == pytest.approx(front_end)   # fitted, not the default 0
    assert out["settings"]["response_tail"] > 0
    assert out["metrics"]["time_unit"] == "ms" and out["metrics"]["finished"] == 20
    bad = _cli(str(p), "--replicas", "3", "--calibrate", str(kit / "rec-8101.jsonl.gz"), str(kit / "rec-8102.jsonl.gz"))
    assert bad.returncode != 0 and "one per replica (3)" in bad.stderr


@pytest.mark.parametrize("kw", [{}, {"refresh_interval": 40.0, "response_tail": 5.0, "router_latency": 1.0}])
@pytest.mark.parametrize("mode", [{}, ASYNC])
def test_lazy_views_change_nothing(kw, mode, monkeypatch):
    """power_of_two reads the two drawn replicas only: each replica runs up to a decision only
    when it is drawn, and the fleet is the same to the byte as running them all every time."""
    from sim.fleet.routers.basic import PowerOfTwo
    wl = _workload(n=150, gap=2.0, blocks=60, **mode)
    s = FleetSettings(replicas=5, router="power_of_two", seed=7, **kw)
    lazy = simulate_fleet(wl, s, cost=MS)
    assert lazy.routes["reason"].eq("lower_load").sum() > 10   # the counts differed: they were read
    monkeypatch.setattr(PowerOfTwo, "reads_drawn", False)
    assert simulate_fleet(wl, s, cost=MS).to_bytes() == lazy.to_bytes()


@pytest.mark.parametrize("router,config", [("precise_prefix", {}), ("kv_cost", {}), ("weighted", {"prefix": "precise"})])
def test_fleet_prefix_index_is_each_pool_asked_in_turn(router, config, monkeypatch):
    """The fleet-wide index of cached blocks (bitmasks per block hash, kept from the pools' cache
    changes) answers what asking every replica's pool gives, under eviction, with replicas of two
    block sizes and one without prefix caching; the whole fleet is the same to the byte."""
    from sim.fleet import fleet as fleet_mod
    from sim.fleet.routers import make_router
    wl = _workload(n=160, gap=2.5, blocks=70, seeds=3)
    s = FleetSettings(replicas=4, router=router, router_config=config,
                      replica_configs=[{}, {"block_size": 32, "num_gpu_blocks": 40}, {},
                                       {"enable_prefix_caching": False}])
    asked = []
    real = fleet_mod.RoutingLoop._cached_prefix_bits

    def checked(self, req):
        out, some = real(self, req)
        assert out == [self._cached_blocks(i, req) for i in range(len(self.backends))]
        assert some == sum(1 << i for i, k in enumerate(out) if k)   # the replicas holding some of it
        asked.append(list(out))
        return out, some
    monkeypatch.setattr(fleet_mod.RoutingLoop, "_cached_prefix_bits", checked)
    indexed = simulate_fleet(wl, s, cost=MS)
    assert len(asked) == 160 and any(0 < max(o[:3]) for o in asked) and all(o[3] == 0 for o in asked)
    evicted = sum(int((t.kv["op"] == "evicted").sum()) for t in indexed.replicas)
    assert evicted > 0   # the pools evicted: the index followed hashes leaving too
    assert make_router(router, 4, config).reads_prefix_cache
    monkeypatch.setattr(fleet_mod.RoutingLoop, "_prefix_indexes", lambda self: None)   # ask each pool
    monkeypatch.setattr(fleet_mod.RoutingLoop, "_cached_prefix_bits", real)
    assert simulate_fleet(wl, s, cost=MS).to_bytes() == indexed.to_bytes()


def test_async_and_sync_replicas_side_by_side():
    """One replica with vLLM's async scheduling beside a sync one: each is what sim.simulate makes
    of the requests routed to it, on the times they reached it."""
    wl = _workload(n=80, gap=3.0)
    fleet = simulate_fleet(wl, FleetSettings(replicas=2, replica_configs=[{}, ASYNC]), cost=MS)
    routes = fleet.routes
    for i, cfg in enumerate(({}, ASYNC)):
        mine = routes[routes["replica"] == i]
        by_id = {r.id: r for r in wl.requests}
        reqs = [replace(by_id[rid], arrival_time=float(t)) for rid, t in zip(mine["request"], mine["reached"])]
        alone = simulate(Workload(reqs, {**wl.config, **cfg}), cost=MS)
        assert fleet.replicas[i].steps.equals(alone.steps) and fleet.replicas[i].requests.equals(alone.requests)
    assert fleet.replicas[1].meta.get("config", {}).get("async_scheduling") is True


@pytest.mark.parametrize("cfg, says", [
    ({**ASYNC, "scheduler": "static"}, r"^replica 1's config: async_scheduling is vLLM's \(AsyncScheduler\); the "
                                       r"static scheduler has no async mode: [^.]*$"),
    ({**ASYNC, "preemption_mode": "swap"}, r"^replica 1's config: async_scheduling is modelled with vLLM's own "
                                           r"preemption \(recompute\), not swap: [^.]*$")])
def test_async_scheduling_that_is_not_modelled_is_refused_in_one_sentence(cfg, says):
    """A replica asking for async scheduling where it is not modelled is refused, not run sync."""
    s = FleetSettings(replicas=2, replica_configs=[{}, cfg])
    with pytest.raises(ValueError, match=says):
        simulate_fleet(_workload(n=6), s, cost=MS)


@pytest.mark.parametrize("router", ["least_loaded", "cache_aware", "power_of_two"])
@pytest.mark.parametrize("kw", [{}, {"response_tail": 7.0, "router_latency": 2.0, "refresh_interval": 30.0}])
@pytest.mark.parametrize("mode", [{}, ASYNC])
def test_a_router_reading_its_own_counts_runs_a_replica_only_when_a_response_could_have_ended(router, kw, mode,
                                                                                              monkeypatch):
    """least_loaded (on in_flight), cache_aware and power_of_two read no engine signal: a replica
    runs up to a decision only once one of its responses could have ended (its release horizon),
    and the fleet is the same to the byte as running them all; with a queue limit that turns
    requests away on arrival, too."""
    from sim.fleet import fleet as fleet_mod
    from sim.fleet.replica import SimReplica
    from sim.fleet.routers import make_router
    wl = _workload(n=200, gap=1.5, blocks=80, max_queued_requests=3, **mode)
    s = FleetSettings(replicas=4, router=router, seed=5, **kw)
    assert make_router(router, 4).reads_engine is False
    runs = []
    real = SimReplica.advance

    def counted(self, until):
        runs.append(until)
        return real(self, until)
    monkeypatch.setattr(SimReplica, "advance", counted)
    fast = simulate_fleet(wl, s, cost=MS)
    fast_runs = len(runs)
    rejected = sum(int(t.requests["rejected"].sum()) for t in fast.replicas)
    assert rejected > 0   # the queue limit turned some away: horizons held for them too
    monkeypatch.setattr(fleet_mod.RoutingLoop, "_counts_only", lambda self: False)
    runs.clear()
    assert simulate_fleet(wl, s, cost=MS).to_bytes() == fast.to_bytes()
    assert fast_runs <= len(runs)   # never more runs of the replicas for the same fleet
    if router == "least_loaded":     # it spreads requests: most replicas wait out most decisions
        assert fast_runs < len(runs)


@pytest.mark.parametrize("extra", [{}, ASYNC])
def test_release_horizon_is_a_floor_on_the_next_finish(extra):
    """No request of a replica ends before its release horizon, at any point of a run (checked
    every 3 ms of a busy replica's run, requests dispatched as they arrive); async too, where a
    request's last token may be in flight when the horizon is asked."""
    from sim.fleet.fleet import replica_configs, timed_requests
    from sim.fleet.replica import SimReplica
    wl = _workload(n=60, gap=4.0, **extra)
    (cfg, mode, mml), = replica_configs(wl, FleetSettings(replicas=1), None)
    b = SimReplica(0, cfg, mode, mml, MS)
    reqs, _ = timed_requests(wl, MS)
    t, k, checked, tight = 0.0, 0, 0, math.inf
    while k < len(reqs) or b.n_done < len(b.requests):
        while k < len(reqs) and reqs[k].arrival_time <= t:
            b.dispatch(reqs[k])
            k += 1
        h = b.release_horizon()
        before = len(b.finished)
        t += 3.0
        b.advance(t)
        ends = [end for _, end in b.finished[before:]]
        assert all(end >= h for end in ends), (h, ends)
        checked += len(ends)
        tight = min([tight] + [end - h for end in ends])
    assert checked == 60 and b.step_floor > 0
    assert tight < 3 * b.step_floor   # a floor, and not a loose one


@pytest.mark.parametrize("router", ["least_loaded", "power_of_two", "cache_aware"])
@pytest.mark.parametrize("cfg", [{}, {"num_gpu_blocks": 40}, {"num_gpu_blocks": 40, "preemption_mode": "swap"},
                                 {"policy": "priority"}, {"max_queued_requests": 3},
                                 {"scheduler": "static"}, ASYNC, {**ASYNC, "num_gpu_blocks": 40}])
def test_release_horizon_index_is_the_pass_over_every_request(router, cfg, monkeypatch):
    """SimReplica.release_horizon reads an index (the requests that have sampled; a heap of
    those that have not) instead of a pass over every request it holds (an overloaded
    replica's queue: tens of thousands a decision). At every call it equals the pass
    (_release_horizon_scan), through preemptions (recompute and swap), priorities, requests
    turned away and static batching, and the fleet is the same to the byte."""
    from sim.fleet.replica import SimReplica
    wl = _workload(n=160, gap=1.0, blocks=120, **cfg)   # overloaded: the queues grow
    s = FleetSettings(replicas=2, router=router, seed=3)
    fast = SimReplica.release_horizon
    calls = []

    def both(self):
        h = fast(self)
        assert h == self._release_horizon_scan(), (self.index, self.step)
        calls.append(h)
        return h
    monkeypatch.setattr(SimReplica, "release_horizon", both)
    checked = simulate_fleet(wl, s, cost=MS)
    assert len(calls) > 100 and any(math.isfinite(h) for h in calls)
    if cfg.get("num_gpu_blocks") == 40 and cfg.get("scheduler") is None:
        assert sum(int(t.requests["preemptions"].sum()) for t in checked.replicas) > 0
    monkeypatch.setattr(SimReplica, "release_horizon", SimReplica._release_horizon_scan)
    assert simulate_fleet(wl, s, cost=MS).to_bytes() == checked.to_bytes()
