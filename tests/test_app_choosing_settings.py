"""The Choosing settings page under AppTest: it opens on the default search already run (or shows
it as an example beside other settings), a search over the default grid, its best config, the
charts, the link to Playback, settings in the URL, bad values, a stopped search."""
from __future__ import annotations

from pathlib import Path
from urllib.parse import parse_qsl, urlsplit

import pytest
from streamlit.testing.v1 import AppTest

from app_util import open_page as _open_page
from plotly_util import chart_specs
from sim import scenarios
from sim.search import Grid, SearchJob, best, describe, run_local, to_csv

APP = str(Path(__file__).resolve().parents[1] / "app.py")
DEFAULT_GRID = {"max_num_seqs": [8, 16, 32], "max_num_batched_tokens": [128, 256, 512]}


def open_page(**params) -> AppTest:
    return _open_page("choosing_settings.py", 180, **params)


@pytest.fixture(scope="module")
def searched():
    at = open_page()
    assert not at.error
    at.button(key="cs_run_button").click().run()
    assert not at.exception and not at.error, (at.exception, at.error)
    return at


@pytest.fixture(scope="module")
def expected():
    grid = Grid.parse(DEFAULT_GRID)
    rows = run_local(SearchJob.make(scenarios.workload("random_500"), slo={"ttft": 4000.0}), grid.configs())
    return grid, rows


def test_the_page_opens_on_the_default_search_already_run(expected):
    grid, rows = expected
    at = open_page()
    assert at.title[0].value == "Choosing settings"
    assert at.multiselect(key="cs_knob_pick").value == ["max_num_seqs", "max_num_batched_tokens"]
    assert at.text_input(key="keep_cs_v_max_num_seqs").value == "8, 16, 32"
    assert any("9 configs × 500 requests" in c.value for c in at.caption)
    assert any(c.value.startswith("Already run: the page's default search") for c in at.caption)
    # the opening result is this search's own, its rows the core's, before any click
    run = at.session_state["cs_run"]
    assert run["opening"] and not run["running"] and sorted(run["rows"]) == list(range(len(grid)))
    assert to_csv(grid, [run["rows"][i] for i in range(len(grid))]) == to_csv(grid, rows)
    specs = chart_specs(at)
    assert specs["cs_frontier"]["layout"]["meta"]["configs"] == 9
    assert specs["cs_frontier"]["layout"]["meta"]["best"] == best(rows) + 1
    assert specs["cs_heatmap"]["layout"]["meta"]["x"] == ["8", "16", "32"]
    b = best(rows)
    assert any(f"**Config {b + 1}**: {describe(grid.configs()[b])}" in m.value for m in at.markdown)
    assert at.button(key="cs_stop_button").disabled and not at.button(key="cs_run_button").disabled
    assert not at.warning


def test_other_settings_open_on_the_default_search_as_an_example_until_run(expected):
    grid, rows = expected
    at = open_page(cs_v_max_num_seqs="8, 32", cs_v_max_num_batched_tokens="128, 512")
    assert "cs_run" not in at.session_state   # nothing of this search has run
    assert any("4 configs × 500 requests" in c.value for c in at.caption)
    assert any("the default search (9 configs on the built-in random_500 scenario), already run" in i.value
               for i in at.info)
    specs = chart_specs(at)
    assert specs["cs_frontier"]["layout"]["meta"]["configs"] == 9   # the example's, not this search's
    assert specs["cs_heatmap"]["layout"]["meta"]["x"] == ["8", "16", "32"]
    query = dict(parse_qsl(urlsplit(at.get("link_button")[0].proto.url).query))
    assert query["pb_scenario"] == "random_500"
    assert query["pb_max_seqs"] == str(grid.configs()[best(rows)]["max_num_seqs"])
    assert "keep_cs_hx" not in {getattr(w, "key", None) for w in at.get("selectbox")}   # its axes are fixed
    # Run the search: the visitor's own four configs replace the example
    at.button(key="cs_run_button").click().run()
    assert not at.exception and not at.error, (at.exception, at.error)
    assert not any("already run" in i.value for i in at.info)
    assert chart_specs(at)["cs_frontier"]["layout"]["meta"]["configs"] == 4
    assert chart_specs(at)["cs_heatmap"]["layout"]["meta"]["x"] == ["8", "32"]


def test_a_search_runs_every_config_and_names_the_best(searched, expected):
    grid, rows = expected
    run = searched.session_state["cs_run"]
    assert not run["running"] and sorted(run["rows"]) == list(range(len(grid)))
    assert [run["rows"][i] for i in range(len(grid))] == rows   # the page's rows are the core's
    b = best(rows)
    assert any(f"**Config {b + 1}**: {describe(grid.configs()[b])}" in m.value for m in searched.markdown)
    goodput = next(m for m in searched.metric if m.label.startswith("Goodput"))
    assert goodput.value == f"{rows[b]['goodput']:.3g}"


def test_the_charts_show_the_frontier_the_slo_line_and_the_goodput_grid(searched, expected):
    grid, rows = expected
    specs = chart_specs(searched)
    front = specs["cs_frontier"]["layout"]
    assert front["meta"]["configs"] == 9 and front["meta"]["best"] == best(rows) + 1
    assert front["meta"]["ttft_slo"] == 4000.0
    assert any(s.get("type") == "line" and s.get("x0") == 4000.0 for s in front["shapes"])
    assert best(rows) + 1 in front["meta"]["frontier"]
    heat = specs["cs_heatmap"]["layout"]["meta"]
    assert heat["x"] == ["8", "16", "32"] and heat["y"] == ["128", "256", "512"]
    # cell [y][x] is that config's goodput (only two knobs swept: one config per cell)
    cfgs = grid.configs()
    for i, c in enumerate(cfgs):
        x = DEFAULT_GRID["max_num_seqs"].index(c["max_num_seqs"])
        y = DEFAULT_GRID["max_num_batched_tokens"].index(c["max_num_batched_tokens"])
        assert heat["z"][y][x] == rows[i]["goodput"]


def test_the_link_opens_the_best_config_on_playback(searched, expected):
    grid, rows = expected
    best_cfg = grid.configs()[best(rows)]
    url = searched.get("link_button")[0].proto.url
    path, query = urlsplit(url).path, dict(parse_qsl(urlsplit(url).query))
    assert path == "./"   # the app's root, where Playback (the default page) is served
    assert query["pb_max_seqs"] == str(best_cfg["max_num_seqs"])
    assert query["pb_budget"] == str(best_cfg["max_num_batched_tokens"])
    pb = AppTest.from_file(APP, default_timeout=180)
    for k, v in query.items():
        pb.query_params[k] = v
    pb.switch_page("pages/playback.py").run()
    assert not pb.exception and not pb.error, (pb.exception, pb.error)
    assert pb.selectbox(key="keep_pb_scenario").value == "random_500"
    assert pb.number_input(key="keep_pb_max_seqs").value == best_cfg["max_num_seqs"]
    assert pb.number_input(key="keep_pb_budget").value == best_cfg["max_num_batched_tokens"]
    assert pb.number_input(key="keep_pb_blocks").value == 300   # not swept: the scenario's own


def test_the_settings_live_in_the_url_and_a_link_brings_them_back():
    at = open_page()
    at.multiselect(key="cs_knob_pick").set_value(["max_num_seqs", "policy"]).run()
    at.text_input(key="keep_cs_v_policy").set_value("fcfs, sjf").run()
    at.number_input(key="keep_cs_tpot").set_value(12.0).run()
    assert not at.exception
    link = {k: (v[0] if isinstance(v, list) else v) for k, v in at.query_params.items()}
    assert link["cs_knobs"] == "max_num_seqs,policy" and link["cs_v_policy"] == "fcfs, sjf"
    assert link["cs_tpot"] == "12.0"
    again = open_page(**link)
    assert again.multiselect(key="cs_knob_pick").value == ["max_num_seqs", "policy"]
    assert again.text_input(key="keep_cs_v_policy").value == "fcfs, sjf"
    assert again.number_input(key="keep_cs_tpot").value == 12.0
    assert any("6 configs × 500 requests" in c.value for c in again.caption)


@pytest.mark.parametrize("knob, text, message", [
    ("max_num_seqs", "8, lots", "max_num_seqs takes whole numbers, not 'lots'"),
    ("max_num_seqs", "0, 8", "config 1 of 6 (max_num_seqs=0, max_num_batched_tokens=128): config max_num_seqs"),
    ("max_num_batched_tokens", "", "give max_num_batched_tokens at least one value"),
])
def test_bad_values_say_why_in_one_line(knob, text, message):
    at = open_page()
    at.text_input(key=f"keep_cs_v_{knob}").set_value(text).run()
    assert not at.exception
    assert at.error and message in at.error[0].value
    assert not at.get("plotly_chart")


def test_a_stopped_search_shows_the_configs_it_ran(searched, expected):
    grid, rows = expected
    run = dict(searched.session_state["cs_run"])
    # worker processes finish out of order: a Stop can leave any few done
    kept = [1, 4, 7]
    searched.session_state["cs_run"] = {**run, "rows": {i: run["rows"][i] for i in kept}, "running": False,
                                        "stopped": True}
    searched.run()
    assert not searched.exception
    assert any("Stopped after 3 of 9 configs" in w.value for w in searched.warning)
    b3 = kept[best([rows[i] for i in kept])]
    front = chart_specs(searched)["cs_frontier"]["layout"]["meta"]
    assert front["best"] == b3 + 1 and set(front["frontier"]) <= {i + 1 for i in kept}
    assert any(f"**Config {b3 + 1}**: {describe(grid.configs()[b3])}" in m.value for m in searched.markdown)
    table = searched.dataframe[0].value
    assert list(table["config"]) == [i + 1 for i in kept]
    assert list(table["max_num_seqs"]) == [grid.configs()[i]["max_num_seqs"] for i in kept]
    assert not searched.button(key="cs_run_button").disabled   # it can run again
    searched.session_state["cs_run"] = run   # leave the module's fixture as it was


def test_on_local_worker_processes_the_table_is_the_same(expected):
    grid, rows = expected
    at = open_page(cs_backend="workers", cs_workers="2")
    assert at.radio(key="keep_cs_backend").value == "workers"
    assert "ray" not in at.radio(key="keep_cs_backend").options or __import__("os").environ.get(
        "SCHEDLAB_RAY_ADDRESS")   # Ray is offered only when the server names a cluster
    at.button(key="cs_run_button").click().run()
    assert not at.exception and not at.error, (at.exception, at.error)
    run = at.session_state["cs_run"]
    assert not run["running"] and "search" not in run and sorted(run["rows"]) == list(range(len(grid)))
    # the same table to the byte (rows that crossed a process boundary hold their own NaN objects)
    assert to_csv(grid, [run["rows"][i] for i in range(len(grid))]) == to_csv(grid, rows)


def test_with_no_knob_swept_the_search_is_the_workloads_own_config():
    at = open_page(cs_scenario="lesson_abc", cs_ttft="100")
    at.multiselect(key="cs_knob_pick").set_value([]).run()
    assert any("1 config × 3 requests" in c.value for c in at.caption)
    at.button(key="cs_run_button").click().run()
    assert not at.exception and not at.error, (at.exception, at.error)
    assert any("**Config 1**: the workload's own config" in m.value for m in at.markdown)
    assert "cs_heatmap" not in chart_specs(at)
    assert chart_specs(at)["cs_frontier"]["layout"]["meta"]["configs"] == 1
    url = at.get("link_button")[0].proto.url
    assert dict(parse_qsl(urlsplit(url).query)) == {"pb_source": "Built-in scenario", "pb_scenario": "lesson_abc",
                                                    "pb_cost": "units"}


def test_the_gpu_preset_sweeps_sync_against_async_on_64_token_blocks():
    """"vLLM 0.34 on a GPU: sync vs async": the knobs picked stay, async and the 64-token block
    size join them, a KV-block sweep is recounted to the same tokens; the rows are the core's."""
    from sim.versions import gpu_blocks
    at = open_page(cs_scenario="lesson_abc", cs_ttft="100", cs_knobs="max_num_seqs,num_gpu_blocks",
                   cs_v_max_num_seqs="1, 2", cs_v_num_gpu_blocks="9, 17")
    at.button(key="cs_gpu_preset").click().run()
    assert not at.exception and not at.error
    assert at.session_state["keep_cs_knobs"] == "max_num_seqs,num_gpu_blocks,block_size,async_scheduling"
    assert at.text_input(key="keep_cs_v_num_gpu_blocks").value == f"{gpu_blocks(9, 16)}, {gpu_blocks(17, 16)}"
    assert at.text_input(key="keep_cs_v_block_size").value == "64"
    at.button(key="cs_run_button").click().run()
    assert not at.exception and not at.error, (at.exception, at.error)
    run = at.session_state["cs_run"]
    grid = Grid.parse({"max_num_seqs": [1, 2], "num_gpu_blocks": [gpu_blocks(9, 16), gpu_blocks(17, 16)],
                       "block_size": [64], "async_scheduling": [False, True]})
    want = run_local(SearchJob.make(scenarios.workload("lesson_abc"), slo={"ttft": 100.0}), grid.configs())
    assert len(run["rows"]) == len(grid) == 8
    assert to_csv(grid, [run["rows"][i] for i in range(len(grid))]) == to_csv(grid, want)
    configs = grid.configs()
    steps = {(c["max_num_seqs"], c["num_gpu_blocks"], c["async_scheduling"]): r["steps"] for c, r in zip(configs, want)}
    assert any(steps[(m, b, True)] != steps[(m, b, False)] for m, b, _ in steps)   # async is a different run
