"""The config search (sim/search.py, `python -m sim search`): the grid, its checks, the table."""
from __future__ import annotations

import csv
import io
import json
import math
import subprocess
import sys
from pathlib import Path

import pytest

from sim import scenarios
from sim.search import (Grid, SearchJob, best, check_configs, columns, frontier, knob_names, run_local,
                        table_rows, to_csv)
from sim.simulate import simulate
from sim.metrics import summary
from sim.slo import SLO, slo_summary

ROOT = Path(__file__).resolve().parents[1]
SLO_TEXT = '{"ttft": 400, "tpot": 40}'


def test_the_grid_is_every_combination_in_product_order():
    g = Grid.parse({"max_num_seqs": [4, 8], "policy": ["fcfs", "sjf", "spf"]})
    assert len(g) == 6
    assert g.configs() == [{"max_num_seqs": 4, "policy": "fcfs"}, {"max_num_seqs": 4, "policy": "sjf"},
                           {"max_num_seqs": 4, "policy": "spf"}, {"max_num_seqs": 8, "policy": "fcfs"},
                           {"max_num_seqs": 8, "policy": "sjf"}, {"max_num_seqs": 8, "policy": "spf"}]
    assert Grid.parse(json.dumps(g.to_json())) == g
    assert Grid.parse({}).configs() == [{}]   # no knobs: the workload's own config, once


def test_any_scheduler_config_key_and_the_scheduler_kind_are_knobs():
    names = knob_names()
    for k in ("scheduler", "max_num_batched_tokens", "max_num_seqs", "num_gpu_blocks", "preemption_mode",
              "policy", "block_size", "enable_prefix_caching", "watermark", "aging"):
        assert k in names
    g = Grid.parse({"scheduler": ["vllm", "static"], "preemption_mode": ["recompute", "swap"],
                    "num_gpu_blocks": [300], "watermark": [0, 0.01], "enable_prefix_caching": [False]})
    assert len(g) == 8
    slo_minded = Grid.parse({"policy": ["edf", "short_long"], "slo_admission": ["off", "reject"],
                             "slo": [{"ttft": 400}]})
    assert slo_minded.configs()[1] == {"policy": "edf", "slo_admission": "reject", "slo": {"ttft": 400}}
    with pytest.raises(ValueError, match="slo must be a JSON object or null"):
        Grid.parse({"slo": [400]})


@pytest.mark.parametrize("grid, message", [
    ('{"max_num_seq": [4]}', "unknown knob 'max_num_seq' in the grid; did you mean max_num_seqs? "
                             "(sim search --help lists them)"),
    ('{"max_num_seqs": 4}', "the grid's max_num_seqs must be a non-empty list of values, not 4"),
    ('{"max_num_seqs": []}', "the grid's max_num_seqs must be a non-empty list"),
    ('{"max_num_seqs": [4, "8"]}', 'in the grid: max_num_seqs must be a whole number, not "8"'),
    ('{"max_num_seqs": [4, 4]}', "the grid's max_num_seqs lists a value twice"),
    ('{"enable_prefix_caching": [1]}', "enable_prefix_caching must be true or false, not 1"),
    ('{"scheduler": ["vllm", "sglang"]}', "scheduler 'sglang' is not one; known: vllm"),
    ('{"watermark": [true]}', "watermark must be a number, not true"),
    ('[1, 2]', "the grid must be a JSON object of knob -> list of values"),
    ('{"max_num_seqs": [4,', "the grid is not valid JSON"),
    (json.dumps({"max_num_seqs": list(range(1, 101)), "num_gpu_blocks": list(range(300, 401))}),
     "the grid has 10,100 combinations; at most 10,000"),
])
def test_a_bad_grid_is_one_plain_message(grid, message):
    with pytest.raises(ValueError) as e:
        Grid.parse(grid)
    assert message in str(e.value)
    assert "\n" not in str(e.value) and len(str(e.value)) <= 200, str(e.value)


def test_every_config_is_checked_against_the_workload_before_any_run():
    wl = scenarios.workload("random_500")
    check_configs(wl, Grid.parse({"max_num_seqs": [4, 8]}).configs())
    with pytest.raises(ValueError, match=r"config 2 of 2 \(policy=\"lifo\"\): unknown policy 'lifo'"):
        check_configs(wl, Grid.parse({"policy": ["fcfs", "lifo"]}).configs())
    with pytest.raises(ValueError, match=r"config 1 of 3 \(max_num_seqs=0\): config max_num_seqs must be a whole number"):
        check_configs(wl, Grid.parse({"max_num_seqs": [0, 1, 2]}).configs())
    with pytest.raises(ValueError, match=r"config 1 of 2 \(num_gpu_blocks=4\): .*more than the 3 usable blocks"):
        check_configs(wl, Grid.parse({"num_gpu_blocks": [4, 300]}).configs())
    with pytest.raises(ValueError, match=r"preemption_mode must be recompute or swap, not 'drop'"):
        check_configs(wl, Grid.parse({"preemption_mode": ["drop"]}).configs())


GRID = Grid.parse({"max_num_seqs": [4, 16], "policy": ["fcfs", "sjf"], "num_gpu_blocks": [64, 300]})


@pytest.fixture(scope="module")
def job():
    return SearchJob.make(scenarios.workload("random_500"), slo=SLO_TEXT)


@pytest.fixture(scope="module")
def rows(job):
    return run_local(job, GRID.configs(), workers=1)


def test_a_row_is_the_runs_summary_and_its_slo_summary(job, rows):
    wl = scenarios.workload("random_500")
    for i in (0, 5):
        trace = simulate(wl, GRID.configs()[i])
        want = {**summary(trace), **slo_summary(trace, SLO.parse(SLO_TEXT))}
        want.pop("slo")
        got = rows[i]
        assert got.keys() == want.keys()
        for k, v in want.items():
            assert (isinstance(v, float) and math.isnan(v) and math.isnan(got[k])) or got[k] == v, k


def test_the_table_is_the_same_on_one_or_two_workers(job, rows):
    placement: list = []
    seconds: list = []
    two = run_local(job, GRID.configs(), workers=2, placement=placement, timings=seconds)
    assert len(seconds) == len(GRID) and all(isinstance(t, float) and t > 0 for t in seconds)
    assert to_csv(GRID, two) == to_csv(GRID, rows)
    assert len({p.split(":")[1] for p in placement}) == 2   # two processes did the work
    assert len(set(to_csv(GRID, rows).splitlines()[1:])) == len(GRID)   # the configs did differ


def test_the_csv_has_the_knobs_metrics_and_goodput_in_the_grids_order(rows):
    table = list(csv.DictReader(io.StringIO(to_csv(GRID, rows))))
    cols = list(table[0])
    assert cols[:4] == ["config", "max_num_seqs", "policy", "num_gpu_blocks"] and cols[-1] == "error"
    for c in ("throughput", "ttft_p99", "goodput", "goodput_unit", "slo_attainment", "slo_ttft_attainment"):
        assert c in cols
    assert "slo" not in cols
    assert [r["config"] for r in table] == [str(i) for i in range(1, 9)]
    assert [(r["max_num_seqs"], r["policy"], r["num_gpu_blocks"]) for r in table][:3] == [
        ("4", "fcfs", "64"), ("4", "fcfs", "300"), ("4", "sjf", "64")]
    assert {r["goodput_unit"] for r in table} == {"requests/units"}
    goodput = [float(r["goodput"]) for r in table]
    assert all(g >= 0 for g in goodput) and len(set(goodput)) > 1
    # goodput is the requests that met both targets per time unit over the run's span
    r0 = table[0]
    assert float(r0["goodput"]) == pytest.approx(int(r0["slo_met"]) / float(r0["duration"]))
    assert int(r0["slo_met"]) + int(r0["slo_missed"]) == 500


def test_a_config_that_cannot_finish_is_a_row_with_its_error():
    wl = scenarios.workload("lesson_abc")
    rows = run_local(SearchJob.make(wl), [{}, {"max_num_seqs": 1, "num_gpu_blocks": 3}], workers=1)
    assert not rows[0].get("error")
    assert rows[1] == {"error": "the longest request (14 tokens) needs 4 blocks of 4, more than the 2 usable "
                                "blocks (num_gpu_blocks - 1); vLLM would not start"}
    g = Grid.parse({"max_num_seqs": [3, 1]})
    trows = table_rows(g, [rows[0], {"error": "no progress"}])
    assert trows[1]["error"] == "no progress" and trows[1]["throughput"] is None
    assert columns(g.knobs, [{"error": "x"}]) == ["config", "max_num_seqs", "error"]


def test_the_best_config_has_the_most_goodput_ties_broken_in_a_fixed_order():
    r = lambda g, t, p: {"goodput": g, "throughput": t, "ttft_p99": p}  # noqa: E731
    assert best([r(1.0, 5, 10), r(2.0, 1, 99), r(0.5, 9, 1)]) == 1
    assert best([r(2.0, 1, 10), r(2.0, 3, 10)]) == 1            # tie: more throughput
    assert best([r(2.0, 3, 20), r(2.0, 3, 10)]) == 1            # then the lower p99 TTFT
    assert best([r(2.0, 3, 10), r(2.0, 3, 10)]) == 0            # then the first in the grid
    assert best([{"error": "x"}, r(0.0, 1, 1)]) == 1
    assert best([{"error": "x"}]) is None
    nog = lambda t: {"throughput": t, "ttft_p99": 1.0}  # noqa: E731  (no SLO: throughput decides)
    assert best([nog(1.0), nog(3.0), nog(2.0)]) == 1


def test_the_best_of_a_real_search_is_its_max_goodput(rows):
    b = best(rows)
    assert rows[b]["goodput"] == max(r["goodput"] for r in rows)


def test_the_frontier_is_the_configs_no_other_beats_on_both_axes():
    pts = [{"ttft_p99": 10.0, "throughput": 1.0}, {"ttft_p99": 5.0, "throughput": 2.0},
           {"ttft_p99": 20.0, "throughput": 3.0}, {"ttft_p99": 30.0, "throughput": 2.5},
           {"error": "x"}, {"ttft_p99": float("nan"), "throughput": 9.0}]
    assert frontier(pts) == [1, 2]


def _cli(*args, cwd=ROOT):
    return subprocess.run([sys.executable, "-m", "sim", "search", *args], cwd=cwd, capture_output=True, text=True,
                          timeout=120)


def test_the_command_writes_the_table_and_names_the_best(tmp_path, rows):
    wl = tmp_path / "w.json"
    wl.write_text(scenarios.workload("random_500").dumps())
    grid = tmp_path / "g.json"
    grid.write_text(json.dumps(GRID.to_json()))
    out = tmp_path / "out.csv"
    p = _cli(str(wl), "--grid", str(grid), "--slo", SLO_TEXT, "-o", str(out), "--workers", "2", "--quiet")
    assert p.returncode == 0, p.stderr
    assert out.read_text() == to_csv(GRID, rows)
    b = best(rows)
    assert f"best: config {b + 1} (" in p.stdout and "goodput" in p.stdout
    inline = _cli(str(wl), "--grid", json.dumps(GRID.to_json()), "--slo", SLO_TEXT, "--workers", "1", "--quiet")
    assert inline.stdout.startswith(to_csv(GRID, rows))   # stdout: the table (the summary goes to stderr)


@pytest.mark.parametrize("extra, message", [
    (["--grid", '{"max_num_seqs": ["x"]}'], 'in the grid: max_num_seqs must be a whole number, not "x"'),
    (["--grid", '{"num_gpu_blocks": [2]}'], "config 1 of 1 (num_gpu_blocks=2):"),
    (["--grid", "{}", "--slo", '{"ttft": -1}'], "SLO ttft must be a positive finite number"),
    (["--grid", "{}", "--cost", "tpu"], "unknown cost preset 'tpu'"),
    (["--grid", "{}", "--workers", "0"], "--workers must be at least 1"),
])
def test_the_command_refuses_bad_input_in_one_line_before_any_run(tmp_path, extra, message):
    wl = tmp_path / "w.json"
    wl.write_text(scenarios.workload("lesson_abc").dumps())
    p = _cli(str(wl), *extra, "-o", str(tmp_path / "o.csv"))
    assert p.returncode != 0
    assert message in p.stderr and "Traceback" not in p.stderr
    assert not (tmp_path / "o.csv").exists()


def test_the_command_reads_what_the_upload_reads(tmp_path):
    bad = tmp_path / "bad.json"
    bad.write_text('{"requests": []}')
    p = _cli(str(bad), "--grid", "{}")
    assert p.returncode != 0 and "the workload has no requests" in p.stderr


def test_the_core_imports_without_ray():
    code = "import sys, sim.search, sim.search_ray, sim.__main__; print('ray' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert out.stdout.strip() == "False", out.stderr


def test_the_command_searches_a_public_trace_in_ms(tmp_path):
    out = tmp_path / "az.csv"
    p = _cli(str(ROOT / "tests/fixtures/public_traces/azure_conv.csv"), "--grid", '{"max_num_seqs": [16, 64]}',
             "--slo", '{"ttft": 500}', "--limit", "40", "--workers", "1", "--quiet", "-o", str(out))
    assert p.returncode == 0, p.stderr
    table = list(csv.DictReader(io.StringIO(out.read_text())))
    assert [r["max_num_seqs"] for r in table] == ["16", "64"]
    assert {r["time_unit"] for r in table} == {"ms"} and {r["goodput_unit"] for r in table} == {"requests/ms"}
    assert {r["requests"] for r in table} == {"40"}
