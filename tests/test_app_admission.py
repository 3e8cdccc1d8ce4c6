"""The Admission and Little's law page under AppTest: the lesson's Example 7 by default; controls change the runs."""
from __future__ import annotations


from streamlit.testing.v1 import AppTest

from app_util import open_page as _open_page
from plotly_util import chart_specs



def page(**params) -> AppTest:
    return _open_page("admission.py", 240, **params)


def test_default_page_reproduces_example_7():
    at = page()
    assert not at.error
    meta = chart_specs(at)["adm_little"]["layout"]["meta"]
    unb, lim = meta["final"]["no limit"], meta["final"]["limit 16"]
    assert (round(unb["L"], 2), round(unb["lambda_W"], 2), round(unb["W"], 2)) == (447.50, 407.38, 1019.46)
    assert (lim["rejected"], lim["arrived"], round(lim["W"], 2), round(lim["L"], 2), round(lim["lambda_W"], 2)) == \
        (815, 8831, 50.71, 20.30, 20.26)
    assert meta["frames"] == 200
    values = [(m.label, m.value) for m in at.metric]
    assert ("Rejected", "815") in values and ("W", "50.71") in values and ("W", "1019.46") in values
    assert ("Offered load ρ = p / capacity", "1.10") in values
    assert not at.dataframe  # the four-run table waits until its expander is opened
    at.session_state["adm_lesson_open"] = True
    at.run()
    table = at.dataframe[0].value
    assert table["rejected"].tolist() == [0, 0, 0, 815] and table["W"].tolist()[-1] == 50.71
    assert table["this page"].tolist()[2:] == ["L 447.50 · W 1019.46 · rejected 0", "L 20.30 · W 50.71 · rejected 815"]
    assert "The lesson's Example 7" in " ".join(md.value for md in at.markdown)


def test_queue_limit_and_load_change_the_runs():
    at = page(adm_ticks="2000")
    final = chart_specs(at)["adm_little"]["layout"]["meta"]["final"]
    assert set(final) == {"no limit", "limit 16"}
    before = final["limit 16"]["rejected"]
    at.number_input(key="keep_adm_limit").set_value(4).run()
    assert not at.exception
    spec = chart_specs(at)["adm_little"]
    final = spec["layout"]["meta"]["final"]
    assert set(final) == {"no limit", "limit 4"} and final["limit 4"]["rejected"] > before
    assert "limit 4: queue limit + slots (12)" in [t["name"] for t in spec["data"]]
    at.toggle(key="keep_adm_compare").set_value(False).run()
    assert list(chart_specs(at)["adm_little"]["layout"]["meta"]["final"]) == ["limit 4"]
    at.slider(key="keep_adm_p").set_value(0.2).run()  # half of capacity: stable, nothing rejected
    final = chart_specs(at)["adm_little"]["layout"]["meta"]["final"]["limit 4"]
    assert final["L"] < 6 and abs(final["L"] - final["lambda_W"]) < 0.3
    assert ("Regime", "stable") in [(m.label, m.value) for m in at.metric]


def test_a_run_too_long_for_the_scheduler_still_draws_and_says_why_it_cannot_download():
    """20,000 ticks at p = 1 into one slot of 1,000 ticks: the scheduler would need twenty million
    steps (the last of 20,000 requests starts at step 19,999,001; past ui.runs.MAX_STEPS, which a
    memory budget sets); the curves come from slotted_run all the same."""
    at = page(adm_ticks="20000", adm_p="1.0", adm_slots="1", adm_service="1000", adm_limit="0")
    assert not at.error
    final = chart_specs(at)["adm_little"]["layout"]["meta"]["final"]
    assert final["no limit"]["arrived"] == 20000 and final["no limit"]["rejected"] == 0
    info = " ".join(i.value for i in at.info)
    assert "takes 20,000,000 steps to finish every request" in info, info
    assert not [b for b in at.get("download_button") if b.key.startswith("adm_dl_")]   # the settings file still is
