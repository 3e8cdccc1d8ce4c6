"""`python -m sim fleet --recordings ... --router POLICY --timing recorded` on the real fleets
recorded here (tests/fixtures/fleet/): the policy's replica for every request beside the real
router's. No vLLM and no router is needed (tests/servers/fleet/test_real_fleet.py does the
same on a fleet it runs).

The fixtures are fixed files, so the replay's agreement is one number per fixture (1.0, 0.96,
0.98 for cache_aware; 0.96, 0.92 for round_robin, when these tests were written); the
thresholds below leave room for the policies' models to change, and say what must not:
- cache_aware: every "prefix_hit" agrees (a request matching what was sent before follows the
  match, and the replay's tree holds what was really sent where); the misses go to the least-
  loaded replica, which the replay knows to a few ms (see test_real_fleet's MIN_AGREEMENT).
- round_robin: the router's own arrival order is taken to be vLLM's; two requests whose hop
  through the router took a few ms apart more than their gap swap places (seen: 1 and 2 pairs).
"""
from __future__ import annotations

import gzip
import json
import subprocess
import sys
from pathlib import Path

import pytest

from servers.vllm import tiny_model

ROOT = Path(__file__).resolve().parents[3]
FLEETS = ROOT / "tests" / "fixtures" / "fleet"
MIN_AGREEMENT = {"cache_aware": 0.93, "round_robin": 0.9}
CONFIG = {"vllm-router": {"granularity": "token"}, "sglang-router": {"flavor": "sglang", "granularity": "char"}}


@pytest.fixture(scope="module")
def tokenizer(tmp_path_factory) -> Path:
    """The tiny model's tokenizer.json as far as load_vocab reads it (its word-level vocabulary)."""
    path = tmp_path_factory.mktemp("tok") / "tokenizer.json"
    vocab = {tiny_model.word(i): i for i in range(tiny_model.VOCAB)}
    path.write_text(json.dumps({"model": {"type": "WordLevel", "vocab": vocab, "unk_token": "<unk>"}}))
    return path


def replay(name: str, tokenizer: Path) -> tuple[dict, dict]:
    m = json.loads((FLEETS / name / "manifest.json").read_text())
    cmd = [sys.executable, "-m", "sim", "fleet", "--recordings", *(str(FLEETS / name / r) for r in m["recordings"]),
           "--router", m["policy"], "--timing", "recorded", "--json"]
    if m["policy"] == "cache_aware":
        cmd += ["--router-config", json.dumps(CONFIG[m["router"]])]
    if m["prompts"] == "text":
        cmd += ["--tokenizer", str(tokenizer)]
    out = subprocess.run(cmd, capture_output=True, text=True, cwd=ROOT, timeout=120)
    assert out.returncode == 0, out.stderr[-3000:]
    return m, json.loads(out.stdout)


@pytest.mark.parametrize("name", sorted(p.parent.name for p in FLEETS.glob("*/manifest.json")))
def test_the_policy_agrees_with_the_real_router(name, tokenizer):
    m, doc = replay(name, tokenizer)
    assert all(r["decisions"]["equal"] for r in doc["replicas"])
    routing = doc["routing"]
    assert routing["requests"] == m["requests"] == len(doc["routes"])
    wrong = [r for r in doc["routes"] if r["replica"] != r["predicted"]]
    if m["policy"] == "cache_aware":
        hits = [r for r in doc["routes"] if r["reason"] == "prefix_hit"]
        assert len(hits) >= 20 and all(r["replica"] == r["predicted"] for r in hits), wrong
    assert routing["agreement"] >= MIN_AGREEMENT[m["policy"]], (routing, wrong)


def test_the_kit_s_fleet_is_agreed_on_whole(tokenizer):
    """The measuring kit's run (shared/fleet/sample): every one of its 50 decisions."""
    m, doc = replay("kit-vllm-cache_aware-tokens", tokenizer)
    assert doc["routing"] == {"requests": 50, "agree": 50, "agreement": 1.0, "drawn": 0,
                              "by_rule": {"requests": 50, "agree": 50, "agreement": 1.0}}


@pytest.mark.parametrize("policy, drawn", [("random", {"random"}), ("power_of_two", {"tie_first_drawn"}),
                                           ("least_loaded", set())])
def test_picks_the_policy_drew_are_counted_apart(policy, drawn):
    """A real router's random draws are its own: the replay says how many of its picks it drew
    (all of random's; power_of_two's ties, both of two replicas being drawn each time) and the
    agreement over the rest."""
    name = "kit-vllm-cache_aware-tokens"
    m = json.loads((FLEETS / name / "manifest.json").read_text())
    out = subprocess.run([sys.executable, "-m", "sim", "fleet", "--recordings",
                          *(str(FLEETS / name / r) for r in m["recordings"]), "--router", policy, "--json"],
                         capture_output=True, text=True, cwd=ROOT, timeout=120)
    assert out.returncode == 0, out.stderr[-3000:]
    doc = json.loads(out.stdout)
    routing, routes = doc["routing"], doc["routes"]
    by_draw = [r for r in routes if r["reason"] in drawn]
    rest = [r for r in routes if r["reason"] not in drawn]
    assert routing["drawn"] == len(by_draw) and routing["by_rule"]["requests"] == len(rest)
    assert routing["by_rule"]["agree"] == sum(r["replica"] == r["predicted"] for r in rest)
    assert routing["agree"] == sum(r["replica"] == r["predicted"] for r in routes)
    if policy == "random":
        assert routing["drawn"] == len(routes) == 50 and routing["by_rule"]["agreement"] is None
    if policy == "power_of_two":
        assert 0 < routing["drawn"] < len(routes)   # two replicas: only its ties are drawn


def test_power_of_two_of_more_than_two_replicas_draws_its_pair_too():
    from sim.fleet.routers import make_router
    cls = type(make_router("power_of_two", 2))
    assert cls.drawn(2) == {"tie_first_drawn"} and cls.drawn(3) == {"tie_first_drawn", "lower_load"}
    assert type(make_router("least_loaded", 4)).drawn(4) == {"tie_random", "softmax"}


@pytest.mark.parametrize("name, mode", [
    ("v034_tight034_00.async", {"vllm_version": "0.34", "async_scheduling": True}),
    ("v033_rand034_01.async", {"vllm_version": "0.33", "async_scheduling": True}),
    ("v032_rand034_01.sync", {"vllm_version": "0.32"})])
def test_recordings_are_simulated_under_the_rules_they_ran_with(name, mode, tmp_path):
    """A fleet recorded with vLLM's async scheduling or an older vLLM (here one real-recorder
    recording twice under other request ids), predicted with `--timing simulated`: each replica
    is simulated under its recording's version and scheduling, and every request is served."""
    from servers.vllm.fleet import read_fleet
    from servers.vllm.fleet_replay import recorded_replicas
    from sim.fleet import FleetSettings
    from sim.fleet.recorded import replay
    raw = gzip.decompress((ROOT / "tests" / "fixtures" / "vllm_recorded" / f"{name}.jsonl.gz").read_bytes()).decode()
    (tmp_path / "a.jsonl").write_text(raw)
    (tmp_path / "b.jsonl").write_text(raw.replace('"id":"r', '"id":"q'))
    real = read_fleet([tmp_path / "a.jsonl", tmp_path / "b.jsonl"])
    reps = recorded_replicas(real, with_costs=True)
    s = FleetSettings(replicas=2, router="round_robin")
    fleet = replay(reps, s, timing="simulated")
    assert [r.mode for r in reps] == [mode, mode]
    ran_async = [t.meta["config"].get("async_scheduling", False) for t in fleet.replicas]
    assert ran_async == [bool(mode.get("async_scheduling"))] * 2
    assert len(fleet.routes) == 2 * sum(1 for line in raw.splitlines() if '"kind":"add"' in line)
    assert all(t.requests["finish_time"].notna().all() for t in fleet.replicas)
    for r in reps:   # run the other way, the fleet parts from it: the mode was not dropped on the way
        r.mode = {**r.mode, "async_scheduling": not mode.get("async_scheduling")}
    other = replay(reps, s, timing="simulated")
    assert not all(a.steps.equals(b.steps) for a, b in zip(fleet.replicas, other.replicas))


def test_a_router_latency_counts_in_a_predicted_fleet_s_ttft_and_not_in_a_recorded_one():
    """`--timing simulated` with --latency-ms: each request reaches its simulated replica that
    much later, and the fleet's TTFT (from the router) takes it in; a recorded fleet's runs are
    the recordings, whatever the setting."""
    from servers.vllm.fleet import read_fleet
    from servers.vllm.fleet_replay import recorded_replicas
    from sim.fleet import FleetSettings, fleet_summary
    from sim.fleet.recorded import replay
    kit = FLEETS / "kit-vllm-cache_aware-tokens"
    reps = recorded_replicas(read_fleet([kit / "rec-8101.jsonl.gz", kit / "rec-8102.jsonl.gz"]), with_costs=True)
    got = {}
    for timing in ("simulated", "recorded"):
        for lat in (0.0, 5.0):
            f = replay(reps, FleetSettings(replicas=2, router="round_robin", router_latency=lat), timing=timing)
            got[timing, lat] = fleet_summary(f)["metrics"]
    for k in ("ttft_p50", "ttft_mean", "e2e_mean"):
        assert got["simulated", 5.0][k] == pytest.approx(got["simulated", 0.0][k] + 5.0, abs=1e-6), k
        assert got["recorded", 5.0][k] == got["recorded", 0.0][k], k
