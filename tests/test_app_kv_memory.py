"""The KV memory and preemption page under AppTest: the lesson's Example 8 by default; controls change the runs."""
from __future__ import annotations


from streamlit.testing.v1 import AppTest

from app_util import open_page as _open_page
from plotly_util import chart_specs



def page(**params) -> AppTest:
    return _open_page("kv_memory.py", 180, **params)


def table_with(at, column: str):
    return next(d.value for d in at.dataframe if column in d.value.columns)


def test_default_page_reproduces_example_8():
    at = page()
    assert not at.error
    pre = table_with(at, "victim")
    first = pre.iloc[0]
    assert (first["step"], first["lesson step"], first["victim"], first["blocks freed"],
            first["KV tokens (to recompute)"]) == (22, 21, "r3", 4, 60)
    specs = chart_specs(at)
    meta = specs["kv_memory"]["layout"]["meta"]
    assert (meta["blocks"], meta["frames"], meta["opens_at"]) == (21, 99, 22)
    mark = specs["kv_costs"]["layout"]["meta"]["mark"]
    assert (round(mark["swap_ms"], 1), round(mark["recompute_ms"], 1)) == (16.6, 388.9)
    values = dict((m.label, m.value) for m in at.metric)
    assert values["Tokens recomputed: recompute run"] == "172" and values["Tokens recomputed: swap run"] == "0"
    assert values["Peak blocks in use"] == "20 of 20"
    text = " ".join(md.value for md in at.markdown)
    assert "The lesson's Example 8" in text and "60 tokens to recompute" in text and "r0 holds 100" in text
    victims = table_with(at, "victims (step)")
    assert victims["victims (step)"].tolist() == ["r3 (22) → r2 (44)", "r0 (22) → r3 (48)"]
    assert specs["kv_victims"]["layout"]["meta"]["victims"] == {"FCFS (vLLM default)": ["r3", "r2"],
                                                                 "Priority": ["r0", "r3"]}


def test_controls_change_the_runs():
    at = page()
    at.selectbox(key="keep_kv_demote").set_value("").run()  # equal priorities: the same victims
    victims = chart_specs(at)["kv_victims"]["layout"]["meta"]["victims"]
    assert victims["Priority"] == victims["FCFS (vLLM default)"] == ["r3", "r2"]
    at.selectbox(key="keep_kv_link").set_value("pcie5-x16").run()
    assert round(chart_specs(at)["kv_costs"]["layout"]["meta"]["mark"]["swap_ms"], 1) == 8.3
    at.number_input(key="keep_kv_blocks").set_value(40).run()  # room for everyone: no preemption
    assert not at.exception
    assert any("No preemptions" in i.value for i in at.info)
    assert dict((m.label, m.value) for m in at.metric)["Preemptions"] == "0"
    assert chart_specs(at)["kv_memory"]["layout"]["meta"]["blocks"] == 40
    assert at.query_params["kv_blocks"] == "40"


def test_a_big_cache_is_scrubbed_on_the_server():
    at = page(kv_scenario="random_500", kv_blocks="1200")
    specs = chart_specs(at)
    assert "kv_memory" not in specs and {"kv_map", "kv_timeline"} <= set(specs)
    step = at.slider(key="keep_kv_step").value
    at.button(key="kv_next").click().run()
    assert at.slider(key="keep_kv_step").value == step + 1
    assert chart_specs(at)["kv_map"]["layout"]["meta"]["step"] == step + 1
    assert chart_specs(at)["kv_timeline"]["layout"]["meta"]["cursor"] == step + 1
