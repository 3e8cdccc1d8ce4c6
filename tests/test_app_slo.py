"""SLO targets on the Playback and Compare pages, and the predictor section of the Policies page,
under Streamlit's AppTest."""
from __future__ import annotations

from pathlib import Path

import pytest
from streamlit.testing.v1 import AppTest

from plotly_util import chart_specs, decode
from sim import scenarios
from sim.simulate import simulate
from sim.slo import SLO, slo_summary

APP = str(Path(__file__).resolve().parents[1] / "app.py")


def page(path: str, **params) -> AppTest:
    at = AppTest.from_file(APP, default_timeout=120)
    for k, v in params.items():
        at.query_params[k] = v
    at.switch_page(path).run()
    assert not at.exception, at.exception
    return at


def metric(at, label: str) -> str:
    return next(m.value for m in at.metric if m.label == label)


def test_playback_without_targets_shows_no_slo_section():
    at = page("pages/playback.py")
    assert not any(m.label.startswith("TTFT met") for m in at.metric)
    assert "pb_slo_timeline" not in chart_specs(at)


def test_playback_targets_show_attainment_misses_and_go_in_the_url():
    at = page("pages/playback.py")
    at.selectbox(key="keep_pb_scenario").set_value("preemption_pressure").run()
    at.number_input(key="keep_pb_slo_ttft").set_value(100.0).run()
    assert not at.exception and not at.error
    assert at.query_params["pb_slo_ttft"] in ("100.0", ["100.0"])
    want = slo_summary(simulate(scenarios.workload("preemption_pressure")), SLO(ttft=100))
    assert 0 < want["slo_ttft_attainment"] < 1  # the scenario has misses to show
    assert metric(at, "TTFT met") == f"{100 * want['slo_ttft_attainment']:.1f}%"
    assert metric(at, "TPOT met") == "–"
    fig = chart_specs(at)["pb_slo_timeline"]
    assert fig["layout"]["meta"]["missed"] == want["slo_missed"]
    missed = next(t for t in fig["data"] if t["name"] == "missed")
    assert (decode(missed["y"]) > 100).all()  # every red cross is over the target line
    misses = next(d.value for d in at.dataframe if "missed at" in d.value.columns)
    assert len(misses) == want["slo_missed"] and misses["missed"].str.startswith("TTFT +").all()


def test_a_link_with_targets_opens_with_them():
    at = page("pages/playback.py", pb_slo_ttft="25", pb_slo_tpot="12.5")
    assert at.number_input(key="keep_pb_slo_ttft").value == 25.0
    assert at.number_input(key="keep_pb_slo_tpot").value == 12.5
    assert metric(at, "All targets met").endswith("%")


def test_a_bad_target_in_the_link_is_ignored_with_a_warning():
    at = page("pages/playback.py", pb_slo_ttft="-3")
    assert any("Ignored a setting in the link" in w.value for w in at.warning)
    assert at.number_input(key="keep_pb_slo_ttft").value is None


def test_compare_shows_both_sides_attainment():
    at = page("pages/compare.py", cmp_slo_ttft="20")
    assert not at.error
    wl = scenarios.workload("lesson_abc")  # the page's default: B is A with twice the KV blocks
    a = slo_summary(simulate(wl), SLO(ttft=20))["slo_ttft_attainment"]
    b = slo_summary(simulate(wl, {"num_gpu_blocks": 2 * wl.config["num_gpu_blocks"]}), SLO(ttft=20))["slo_ttft_attainment"]
    assert metric(at, "TTFT met") == f"{100 * a:.1f}% → {100 * b:.1f}%"
    specs = chart_specs(at)
    assert {"cmp_slo_timeline_a", "cmp_slo_timeline_b"} <= set(specs)


def test_edf_on_playback_uses_the_targets():
    at = page("pages/playback.py", pb_slo_ttft="50", pb_policy="edf")
    assert not at.error
    assert metric(at, "TTFT met").endswith("%")


@pytest.mark.parametrize("sigma", [0.0, 2.0])
def test_policies_page_predictor_section(sigma):
    at = page("pages/policies.py", pol_pred_sigma=str(sigma), pol_pred_seeds="2")
    meta = chart_specs(at)["pol_predictor"]["layout"]["meta"]["gain_kept"]
    assert meta["0"] == pytest.approx(1.0) and meta["3"] < meta["1"] < meta["0"]
    text = next(m.value for m in at.markdown if "Shortest-first needs" in m.value)
    kept = f"**{100 * meta[f'{sigma:g}']:.0f}%**"
    assert kept in text and f"sigma **{sigma:g}**" in text
