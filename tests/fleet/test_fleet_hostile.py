"""Fleet inputs that used to hang, crash or mislead (found by a hostile-input sweep): each now
runs in moments, or is refused in one sentence; a router's latency counts in what a client
measures."""
from __future__ import annotations

import gzip
import json
import math
import time

import pytest

from sim.cost import cost_from_preset
from sim.fleet import FleetSettings, FleetTrace, fleet_summary, simulate_fleet
from sim.fleet.metrics import fleet_requests
from sim.fleet.routers import make_router
from sim.workload import Request, Workload

MS = cost_from_preset("a100-8B-fp16")


def _workload(n=12, gap=40.0, **cfg) -> Workload:
    reqs = [Request(id=f"r{i}", prompt_len=64 + 16 * (i % 5), max_tokens=6 + i % 4, arrival_time=i * gap,
                    prompt_seed=i % 3) for i in range(n)]
    return Workload(reqs, {"enable_prefix_caching": True, "num_gpu_blocks": 200, "max_num_seqs": 8, **cfg})


def one_sentence(e: pytest.ExceptionInfo) -> str:
    msg = str(e.value)
    assert "\n" not in msg and len(msg) < 300, msg
    return msg


def test_cache_aware_skips_a_long_quiet_spell_of_eviction_ticks_in_one_jump():
    """Its eviction timer used to be stepped tick by tick up to each decision: a 1 ms interval
    and a request at 1e12 ms took 1e12 turns. The tick after the spell is the same either way."""
    r = make_router("cache_aware", 2, {"eviction_interval_ms": 1})
    t0 = time.perf_counter()
    r.maybe_evict(1e12)
    assert time.perf_counter() - t0 < 1.0
    assert r.next_eviction == 1e12 + 1 and r.evictions == 1
    short = make_router("cache_aware", 2, {"eviction_interval_ms": 7})
    short.maybe_evict(500.0)   # a short spell: tick by tick, as before
    assert short.next_eviction == 504.0   # 7 x 72, the first tick after 500
    wl = _workload(n=3)
    wl.requests[-1] = Request(id="late", prompt_len=80, max_tokens=4, arrival_time=1e12, prompt_seed=0)
    t0 = time.perf_counter()
    f = simulate_fleet(wl, FleetSettings(replicas=2, router="cache_aware", router_config={"eviction_interval_ms": 1}),
                       cost=MS)
    assert time.perf_counter() - t0 < 30 and len(f.routes) == 3


@pytest.mark.parametrize("config, said", [
    ({"virtual_nodes": 100_000_000}, "virtual_nodes must be from 1 to 10,000"),
    ({"url_format": "{port[0]}"}, "url_format may name only {port} and {i}"),
    ({"url_format": "{port.real}"}, "url_format may name only"),
    ({"url_format": "{port:>2000000000}"}, "url_format may name only"),   # a 2 GB URL a replica
    ({"url_format": "{port!r}"}, "url_format may name only"),
    ({"url_format": "http://{host}:{port}"}, "url_format may name only"),
    ({"url_format": "{"}, "url_format may name only"),
    ({"url_format": "x" * 3000 + "{port}"}, "url_format is 3,006 characters long"),
])
def test_consistent_hash_settings_that_would_hang_or_crash_are_one_sentence(config, said):
    with pytest.raises(ValueError) as e:
        make_router("consistent_hash", 3, config)
    assert said in one_sentence(e)


def test_consistent_hash_formats_that_name_port_and_i_plainly_still_work():
    r = make_router("consistent_hash", 2, {"url_format": "http://h:{port}/{i}", "virtual_nodes": 10_000})
    assert r.urls == ("http://h:8101/0", "http://h:8102/1")
    assert make_router("consistent_hash", 1, {"url_format": "{{port}}"}).urls == ("{port}",)


@pytest.mark.parametrize("name", ["router_latency", "response_tail", "refresh_interval"])
def test_a_time_past_the_clock_s_range_is_refused(name):
    with pytest.raises(ValueError) as e:
        FleetSettings(replicas=2, **{name: 1e17}).check()
    assert f"{name} must be at most" in one_sentence(e)
    FleetSettings(replicas=2, **{name: 1e12}).check()


def test_the_router_s_latency_counts_in_waits_ttft_and_e2e():
    """A client's TTFT runs from the router, so a router 5 ms from its replicas adds 5 ms to
    every request's wait, TTFT and E2E (the fleet starts idle: the replicas' runs shift by 5)."""
    wl = _workload()
    runs = [simulate_fleet(wl, FleetSettings(replicas=2, router_latency=lat), cost=MS) for lat in (0.0, 5.0)]
    a, b = (fleet_summary(f) for f in runs)
    for k in ("ttft_p50", "ttft_p99", "ttft_mean", "e2e_mean", "e2e_p99", "wait_mean"):
        assert b["metrics"][k] == pytest.approx(a["metrics"][k] + 5.0, abs=1e-9), k
    for pa, pb in zip(a["per_replica"], b["per_replica"]):
        assert pb["ttft_p50"] == pytest.approx(pa["ttft_p50"] + 5.0, abs=1e-9)
    assert b["metrics"]["itl_mean"] == pytest.approx(a["metrics"]["itl_mean"], abs=1e-9)   # gaps are the replicas'
    ra, rb = fleet_requests(runs[0]), fleet_requests(runs[1])
    assert (rb["ttft"] - ra["ttft"]).to_numpy() == pytest.approx([5.0] * len(ra), abs=1e-9)
    # the replicas' own traces still say when each request reached them
    assert runs[1].replicas[0].requests["arrival_time"].iloc[0] == 5.0


def test_an_idle_replica_found_no_prompt_tokens_in_its_cache():
    wl = _workload(n=1)
    s = fleet_summary(simulate_fleet(wl, FleetSettings(replicas=3), cost=MS))
    assert [p["cached_prompt_tokens"] for p in s["per_replica"]][1:] == [0, 0]
    assert s["metrics"]["cached_prompt_tokens"] == s["per_replica"][0]["cached_prompt_tokens"]


def _doc(fleet) -> dict:
    return json.loads(gzip.decompress(fleet.to_bytes()))


def _bytes(doc: dict) -> bytes:
    return gzip.compress(json.dumps(doc).encode(), mtime=0)


@pytest.mark.parametrize("damage, said", [
    (lambda d: [d["routes"]["data"].__setitem__(k, col[:3]) for k, col in enumerate(d["routes"]["data"])],
     "its rows are not the replicas' requests"),
    (lambda d: d["routes"]["data"][d["routes"]["columns"].index("replica")].__setitem__(0, 1.5),
     "a whole number column holds fractions"),
    (lambda d: d["routes"]["data"][d["routes"]["columns"].index("replica")].__setitem__(0, 1),
     "is not in replica 1's run"),
    (lambda d: d.__setitem__("version", -1), "fleet trace version -1 is not one this program reads"),
    (lambda d: d.__setitem__("version", 0), "fleet trace version 0 is not one this program reads"),
])
def test_a_damaged_fleet_trace_is_refused_in_one_sentence(damage, said):
    fleet = simulate_fleet(_workload(), FleetSettings(replicas=2), cost=MS)
    doc = _doc(fleet)
    damage(doc)
    with pytest.raises(ValueError) as e:
        FleetTrace.from_bytes(_bytes(doc))
    assert said in one_sentence(e)
    back = FleetTrace.from_bytes(fleet.to_bytes())   # the undamaged file loads, the same bytes again
    assert back.to_bytes() == fleet.to_bytes() and not math.isnan(fleet_summary(back)["metrics"]["ttft_p50"])


def test_a_replica_of_llama_server_slots_is_refused_in_one_sentence():
    """llama_slots keeps slots, not vLLM's queue and KV pool that a replica exposes to the router:
    it used to raise AttributeError mid-run (and a search lost every row already run)."""
    with pytest.raises(ValueError) as e:
        simulate_fleet(_workload(), FleetSettings(replicas=2), {"scheduler": "llama_slots"}, cost=MS)
    assert one_sentence(e) == ("replica 0's config: scheduler llama_slots cannot run as a fleet's replica; a replica "
                               "runs vllm or static")
    assert len(simulate_fleet(_workload(), FleetSettings(replicas=2), {"scheduler": "static"}, cost=MS).routes) == 12


def test_idle_replicas_share_one_computed_row_equal_to_their_own():
    """A fleet of many replicas and few requests: every idle replica's row is computed once (a
    1,024-replica fleet of 10 requests spent 8 s on 1,014 identical rows) and equals its own."""
    import math as m

    from sim.fleet.metrics import replica_summaries
    from sim.metrics import summary
    f = simulate_fleet(_workload(n=3), FleetSettings(replicas=40), cost=MS, digest=True)
    rows = replica_summaries(f, fairness=False)
    idle = [i for i, t in enumerate(f.replicas) if not len(t.requests)]
    assert len(idle) == 37 and [r["replica"] for r in rows] == list(range(40))
    own = summary(f.replicas[idle[-1]])
    for k, v in own.items():
        if k in ("jain_index", "max_service_gap"):
            continue
        got = rows[idle[-1]][k]
        assert got == v or (isinstance(v, float) and m.isnan(v) and m.isnan(got)), k


def test_replicas_sent_nothing_are_named_and_why_for_a_hash_on_one_tenant(tmp_path):
    """consistent_hash keys on the tenant by default: a workload of one tenant (a public trace has
    none) sent every request to one replica and said nothing; the fleet's numbers then read as a
    fleet's. `sim fleet` now says how many replicas got nothing, and why, on stderr and in
    --json's warnings; a key that spreads them (the request's id) says nothing."""
    import subprocess
    import sys
    from pathlib import Path
    from sim.fleet.metrics import unused_replicas
    p = tmp_path / "w.json"
    p.write_text(_workload(n=40, gap=20.0).dumps())
    root = Path(__file__).resolve().parents[2]
    got = {}
    for cfg in ("{}", '{"key": "request"}'):
        r = subprocess.run([sys.executable, "-m", "sim", "fleet", str(p), "--replicas", "4", "--router",
                            "consistent_hash", "--router-config", cfg, "--json"], cwd=root, capture_output=True,
                           text=True, timeout=300)
        assert r.returncode == 0, r.stderr
        got[cfg] = (json.loads(r.stdout), r.stderr)
    out, err = got["{}"]
    want = "3 of 4 replicas were sent no request (consistent_hash keys on the tenant, and the requests have 1 tenant)"
    assert out["warnings"] == [want] and f"warning: {want}" in err
    assert len({x["replica"] for x in out["routes"]}) == 1
    out, err = got['{"key": "request"}']
    assert out["warnings"] == [] and "sent no request" not in err
    few = simulate_fleet(_workload(n=3), FleetSettings(replicas=4), cost=MS)
    assert unused_replicas(few) is None   # fewer requests than replicas: nothing to say


def test_a_request_longer_than_a_replicas_max_model_len_is_turned_away_there_not_the_whole_run():
    """Replicas of different max_model_len (real fleets' recordings can differ): a request routed to
    one too short for it used to stop the whole run ("a request needs N tokens"); vLLM's front end
    answers it with HTTP 400 and serves the rest. The replica turns it away at once (rejected,
    a reject event naming the limit), its response leaves the router's count after the tail, the
    others run as before; the fleet says so, and a Digest run counts it too."""
    from sim.fleet.metrics import fleet_warnings
    reqs = [Request(id=f"r{i}", prompt_len=900 if i < 2 else 100, max_tokens=8, arrival_time=i * 30.0)
            for i in range(10)]
    wl = Workload(reqs, {"num_gpu_blocks": 400, "max_num_seqs": 8})
    s = FleetSettings(replicas=2, router="round_robin", response_tail=5.0,
                      replica_configs=[{"max_model_len": 512}, {}])
    fleet = simulate_fleet(wl, s, cost=MS)
    r = fleet.routes.set_index("request")
    assert r.loc["r0", "replica"] == 0 and r.loc["r1", "replica"] == 1   # round robin: r0 meets the short one
    assert r.loc["r0", "released"] == pytest.approx(r.loc["r0", "reached"] + 5.0)
    assert r.loc["r1", "released"] > r.loc["r1", "reached"] + 5.0         # served
    reqs0 = fleet.replicas[0].requests.set_index("request")
    assert bool(reqs0.loc["r0", "rejected"]) and not reqs0.drop("r0")["rejected"].any()
    assert not fleet.replicas[1].requests["rejected"].any()
    ev = fleet.replicas[0].events
    reject = ev[ev["kind"] == "reject"]
    assert reject["request"].tolist() == ["r0"] and "over max_model_len 512" in reject["detail"].iloc[0]
    assert fleet.meta["turned_away"] == [1, 0] and fleet.meta["context_limits"] == [512, None]
    assert fleet_warnings(fleet) == [
        "1 request was longer than the max_model_len of the replica the router sent it to, and was turned away at "
        "once, as vLLM answers HTTP 400 (1 by replica 0, whose max_model_len is 512)"]
    assert fleet_summary(fleet)["metrics"]["rejected"] == 1
    digest = simulate_fleet(wl, s, cost=MS, digest=True)
    assert digest.meta["turned_away"] == [1, 0] and fleet_summary(digest)["metrics"]["rejected"] == 1
    # one replica: the same rule (its max_model_len is the config's)
    one = simulate_fleet(wl, FleetSettings(replicas=1), {"max_model_len": 512}, cost=MS)
    assert one.meta["turned_away"] == [2]
    assert fleet_warnings(simulate_fleet(wl, FleetSettings(replicas=2), cost=MS)) == []
