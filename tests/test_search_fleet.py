"""The config search over fleets (sim/search.py's fleet knobs): replicas, router, router.<setting>,
refresh_interval, response_tail, router_latency and router_seed as grid keys."""
from __future__ import annotations

import csv
import io
import json
import math
import subprocess
import sys
from pathlib import Path

import pytest

from sim.cost import cost_from_preset
from sim.fleet import FleetSettings, fleet_summary, simulate_fleet
from sim.fleet.metrics import fleet_digest
from sim.fleet.scenarios import chat
from sim.search import (Grid, SearchJob, check_configs, fleet_knob_names, fleet_row, fleet_settings, is_fleet,
                        run_local, to_csv, values_from_text)
from sim.slo import SLO, slo_summary

ROOT = Path(__file__).resolve().parents[1]
COST = "a100-8B-fp16"
SLO_TEXT = '{"ttft": 150, "tpot": 30}'
GRID = Grid.parse({"replicas": [1, 3], "router": ["round_robin", "power_of_two", "cache_aware"]})


@pytest.fixture(scope="module")
def workload():
    return chat(n=90, rate_per_s=12.0, groups=6)   # shared system prompts: the routers differ


@pytest.fixture(scope="module")
def job(workload):
    return SearchJob.make(workload, cost=COST, slo=SLO_TEXT)


@pytest.fixture(scope="module")
def rows(job):
    return run_local(job, GRID.configs(), workers=1)


def _same(a: dict, b: dict) -> bool:
    return list(a) == list(b) and all(
        (isinstance(v, float) and math.isnan(v) and isinstance(b[k], float) and math.isnan(b[k])) or b[k] == v
        for k, v in a.items())


def test_fleet_knobs_are_grid_keys_and_router_settings_are_prefixed():
    names = fleet_knob_names()
    for k in ("replicas", "router", "refresh_interval", "response_tail", "router_latency", "router_seed",
              "router.cache_threshold", "router.balance_abs_threshold", "router.signal", "router.kv_weight"):
        assert k in names
    assert all(k.startswith("router.") or "." not in k for k in names)
    assert is_fleet({"replicas": 2}) and is_fleet({"router.cache_threshold": 0.5}) and not is_fleet({"policy": "sjf"})
    s, sched = fleet_settings({"replicas": 4, "router": "cache_aware", "router.cache_threshold": 0.5,
                               "refresh_interval": 50.0, "router_seed": 3, "max_num_seqs": 16})
    assert (s.replicas, s.router, s.router_config, s.refresh_interval, s.seed, s.record_scores) == (
        4, "cache_aware", {"cache_threshold": 0.5}, 50.0, 3, False)
    assert sched == {"max_num_seqs": 16}
    # typed as a list of text, as the Choosing settings page takes a knob's values
    assert values_from_text("replicas", "2, 4") == [2, 4]
    assert values_from_text("router", "round_robin, cache_aware") == ["round_robin", "cache_aware"]
    assert values_from_text("router.cache_threshold", "0.3, 0.5") == [0.3, 0.5]
    assert values_from_text("router.balance_abs_threshold", "32") == [32]
    assert values_from_text("refresh_interval", "0, 100") == [0.0, 100.0]


def test_a_fleet_row_is_simulate_fleet_and_fleet_summary(workload, rows):
    assert len(rows) == len(GRID) == 6
    slo = SLO.parse(SLO_TEXT)
    for i, cfg in enumerate(GRID.configs()):
        fleet = simulate_fleet(workload, FleetSettings(replicas=cfg["replicas"], router=cfg["router"],
                                                       record_scores=False), cost=cost_from_preset(COST), digest=True)
        want = fleet_summary(fleet, slo)["metrics"]
        want.pop("slo")
        assert _same(want, rows[i]), cfg
        # the fleet's goodput is slo_summary over the fleet's joined digest
        assert rows[i]["goodput"] == slo_summary(fleet_digest(fleet), slo)["goodput"]
        assert rows[i]["replicas"] == cfg["replicas"] and not rows[i].get("error")
    # the routers did differ: cache-aware keeps each system prompt on one replica
    by = {(c["replicas"], c["router"]): r for c, r in zip(GRID.configs(), rows)}
    assert by[(3, "cache_aware")]["prefix_hit_rate"] > by[(3, "round_robin")]["prefix_hit_rate"]
    assert by[(1, "cache_aware")]["prefix_hit_rate"] == by[(1, "round_robin")]["prefix_hit_rate"]


def test_fleet_row_is_fleet_summary_with_settings_and_a_full_trace(workload):
    slo = SLO.parse(SLO_TEXT)
    s = FleetSettings(replicas=2, router="least_loaded", router_config={"signal": "kv_usage"}, refresh_interval=40.0,
                      response_tail=5.0, router_latency=1.0)
    full = simulate_fleet(workload, s, {"max_num_seqs": 8}, cost=cost_from_preset(COST))   # a Trace per replica
    want = fleet_summary(full, slo)["metrics"]
    assert _same(want, fleet_row(full, slo))
    assert _same(fleet_summary(full)["metrics"], fleet_row(full))


def test_the_csv_has_the_fleet_knobs_as_columns(rows):
    text = to_csv(GRID, rows)
    table = list(csv.DictReader(io.StringIO(text)))
    cols = list(table[0])
    assert cols[:3] == ["config", "replicas", "router"] and cols[-1] == "error"
    for c in ("throughput", "ttft_p99", "goodput", "slo_attainment", "load_imbalance", "prefix_hit_rate",
              "request_imbalance"):
        assert c in cols
    assert cols.count("replicas") == 1
    assert [(r["replicas"], r["router"]) for r in table] == [(str(c["replicas"]), c["router"]) for c in GRID.configs()]
    assert {r["error"] for r in table} == {""}


def test_a_router_setting_applies_to_the_grids_routers_that_have_it(job):
    g = Grid.parse({"router": ["round_robin", "cache_aware"], "router.cache_threshold": [0.3, 0.9],
                    "replicas": [3]})
    assert g.configs() == [{"router": "round_robin", "replicas": 3},
                           {"router": "cache_aware", "router.cache_threshold": 0.3, "replicas": 3},
                           {"router": "cache_aware", "router.cache_threshold": 0.9, "replicas": 3}]
    assert len(g) == 3
    rows = run_local(job, g.configs())
    table = list(csv.DictReader(io.StringIO(to_csv(g, rows))))
    assert list(table[0])[:4] == ["config", "router", "router.cache_threshold", "replicas"]
    assert [r["router.cache_threshold"] for r in table] == ["", "0.3", "0.9"]
    assert rows[1] != rows[2]   # the threshold took effect
    # no router in the grid: the default (round_robin) has no cache_threshold
    with pytest.raises(ValueError) as e:
        Grid.parse({"replicas": [2], "router.cache_threshold": [0.5]})
    assert str(e.value) == ("router.cache_threshold is a setting of cache_aware, not of the default router "
                            "(round_robin: the grid sets no router); add cache_aware to the grid's router")
    # one router: its settings only
    with pytest.raises(ValueError, match=r"^router.signal is a setting of least_loaded, not of the grid's router "
                                         r"\(cache_aware\); add least_loaded to the grid's router$"):
        Grid.parse({"router": ["cache_aware"], "router.signal": ["in_flight"]})


@pytest.mark.parametrize("grid, message", [
    ({"replicas": [0]}, "in the grid: replicas must be a whole number from 1 to 1,024, not 0"),
    ({"replicas": [10_000]}, "in the grid: replicas must be a whole number from 1 to 1,024, not 10000"),
    ({"replicas": [2.5]}, "in the grid: replicas must be a whole number from 1 to 1,024, not 2.5"),
    ({"router": ["round_robin", "vllm-router"]}, 'in the grid: router "vllm-router" is not one; known: round_robin,'),
    ({"router": ["cache_aware"], "router.cache_treshold": [0.5]},
     "router.cache_treshold is not a setting of any router; did you mean cache_threshold"),
    ({"router": ["cache_aware"], "router.cache_threshold": [float("nan")]},
     "in the grid: router setting cache_threshold must be a finite number, 0 or more, not nan"),
    ({"router": ["cache_aware"], "router.balance_abs_threshold": [1.5]},
     "in the grid: router setting balance_abs_threshold must be a whole number, not 1.5"),
    ({"refresh_interval": [-1]}, "in the grid: refresh_interval must be a time, 0 or more (in the run's time unit), "
                                 "not -1"),
    ({"router_seed": [True]}, "in the grid: router_seed must be a whole number, 0 or more, not true"),
    ({"replica": [2]}, "unknown knob 'replica' in the grid; did you mean replicas"),
])
def test_a_bad_fleet_grid_is_one_plain_sentence(grid, message):
    with pytest.raises(ValueError) as e:
        Grid.parse(grid)
    assert message in str(e.value)
    assert "\n" not in str(e.value)


def test_check_configs_names_the_bad_fleet_config(workload):
    check_configs(workload, GRID.configs())
    cases = [
        ([{"replicas": 2}, {"replicas": 0}], "config 2 of 2 (replicas=0): a fleet has 1 to 1,024 replicas, not 0"),
        ([{"router": "nope"}], 'config 1 of 1 (router="nope"): unknown router \'nope\'; known: round_robin,'),
        ([{"router": "round_robin", "router.cache_threshold": 0.3}],
         'config 1 of 1 (router="round_robin", router.cache_threshold=0.3): router round_robin has no setting '
         "'cache_threshold'"),
        ([{"router": "weighted", "router.queue_weight": 0, "router.kv_weight": 0, "router.prefix_weight": 0}],
         'config 1 of 1 (router="weighted", router.queue_weight=0, router.kv_weight=0, router.prefix_weight=0): '),
        ([{"replicas": 2, "num_gpu_blocks": 4}], "config 1 of 1 (replicas=2, num_gpu_blocks=4): "),
        ([{"replicas": 2, "response_tail": float("inf")}], "config 1 of 1 (replicas=2, response_tail=Infinity): "
                                                           "the fleet's response_tail must be a finite time"),
    ]
    for configs, message in cases:
        with pytest.raises(ValueError) as e:
            check_configs(workload, configs)
        assert str(e.value).startswith(message), str(e.value)
        assert "\n" not in str(e.value)


def test_a_fleet_search_is_the_same_on_one_or_two_workers(job, rows):
    placement: list = []
    two = run_local(job, GRID.configs(), workers=2, placement=placement)
    assert to_csv(GRID, two) == to_csv(GRID, rows)
    assert len({p.split(":")[1] for p in placement}) == 2


def test_a_grid_mixes_fleet_and_scheduler_knobs(job, workload):
    g = Grid.parse({"max_num_seqs": [8, 64], "replicas": [2], "router": ["least_loaded"],
                    "router.signal": ["in_flight", "waiting"], "router_latency": [0, 2.5]})
    assert len(g) == 8
    rows = run_local(job, g.configs())
    assert not any(r.get("error") for r in rows)
    cfg = g.configs()[5]
    assert cfg == {"max_num_seqs": 64, "replicas": 2, "router": "least_loaded", "router.signal": "in_flight",
                   "router_latency": 2.5}
    fleet = simulate_fleet(workload, FleetSettings(replicas=2, router="least_loaded", router_latency=2.5,
                                                   router_config={"signal": "in_flight"}, record_scores=False),
                           {"max_num_seqs": 64}, cost=cost_from_preset(COST), digest=True)
    want = fleet_summary(fleet, SLO.parse(SLO_TEXT))["metrics"]
    want.pop("slo")
    assert _same(want, rows[5])


def test_the_command_searches_a_fleet_grid(tmp_path, workload, rows):
    wl = tmp_path / "w.json"
    wl.write_text(workload.dumps())
    out = tmp_path / "out.csv"
    p = subprocess.run([sys.executable, "-m", "sim", "search", str(wl), "--grid", json.dumps(GRID.to_json()),
                        "--slo", SLO_TEXT, "--cost", COST, "--workers", "2", "--quiet", "-o", str(out)],
                       cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert p.returncode == 0, p.stderr
    assert out.read_text() == to_csv(GRID, rows)
    assert "best: config" in p.stdout and "router=" in p.stdout
    bad = subprocess.run([sys.executable, "-m", "sim", "search", str(wl), "--grid", '{"replicas": [2, 2000]}',
                          "--cost", COST, "-o", str(tmp_path / "bad.csv")], cwd=ROOT, capture_output=True, text=True,
                         timeout=120)
    assert bad.returncode != 0 and "Traceback" not in bad.stderr
    assert bad.stderr.strip() == "in the grid: replicas must be a whole number from 1 to 1,024, not 2000"
    assert not (tmp_path / "bad.csv").exists()
