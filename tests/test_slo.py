"""SLO targets: parsing, per-request met/missed, attainment and goodput on small runs whose
numbers can be checked by hand, overrides per tenant and priority, the CLI and summary()."""
from __future__ import annotations

import json
import math

import numpy as np
import pytest

from sim.__main__ import main
from sim.metrics import summary
from sim.simulate import simulate
from sim.slo import SLO, slo_summary, slo_table
from sim.workload import Request, Workload


def six():
    """Six 500-token prompts at once, 3 output tokens each, a 500-token budget, the units cost (a
    step of up to 500 tokens costs 10). Step 1: r0's prompt (first token at 10). Step 2: r0's
    decode + 499 of r1's prompt. Step 3: r0's last decode (done at 30), r1's last prompt token
    (first token at 30), 498 of r2's. From there each step finishes one prompt: first tokens at
    10, 30, 40, 50, 60, 70; each request's tokens come one step (10) apart; the run is 9 steps, 90."""
    reqs = [Request(f"r{i}", 500, 3) for i in range(6)]
    return simulate(Workload(reqs, config={"max_num_batched_tokens": 500}))


def test_per_request_table_by_hand():
    tab = slo_table(six(), SLO(ttft=35, tpot=10, e2e=60))
    assert tab["ttft"].tolist() == [10, 30, 40, 50, 60, 70]
    assert tab["tpot"].tolist() == [10] * 6
    assert tab["e2e"].tolist() == [30, 50, 60, 70, 80, 90]
    assert tab["met_ttft"].tolist() == [True, True, False, False, False, False]
    assert tab["met_tpot"].all()  # equal to the target is met
    assert tab["met_e2e"].tolist() == [True, True, True, False, False, False]
    assert tab["met"].tolist() == [True, True, False, False, False, False]
    assert tab["ttft_over"].tolist() == [-25, -5, 5, 15, 25, 35]
    # the TTFT deadline (arrival 0 + 35) is when r2.. missed
    assert np.isnan(tab["missed_at"].to_numpy()[:2]).all()  # met: never missed
    assert tab["missed_at"].tolist()[2:] == [35.0] * 4


def test_attainment_and_goodput_by_hand():
    tr = six()
    s = slo_summary(tr, SLO(ttft=35, tpot=10, e2e=60))
    assert s["slo_ttft_attainment"] == pytest.approx(2 / 6)
    assert s["slo_tpot_attainment"] == 1.0
    assert s["slo_e2e_attainment"] == pytest.approx(3 / 6)
    assert s["slo_attainment"] == pytest.approx(2 / 6)
    assert (s["slo_met"], s["slo_missed"]) == (2, 4)
    assert s["goodput"] == pytest.approx(2 / 90) and s["goodput_unit"] == "requests/units"
    tighter = slo_summary(tr, SLO(tpot=9.99))
    assert tighter["slo_tpot_attainment"] == 0.0 and tighter["slo_ttft_attainment"] is None
    assert tighter["goodput"] == 0.0
    json.dumps(s)  # JSON-friendly


def test_no_target_means_no_attainment():
    s = slo_summary(six(), SLO())
    assert s["slo_attainment"] is None and s["goodput"] is None
    assert all(s[f"slo_{k}_attainment"] is None for k in ("ttft", "tpot", "e2e"))


def test_rejected_and_unfinished_requests_miss():
    reqs = [Request(f"q{i}", 100, 2) for i in range(5)]
    tr = simulate(Workload(reqs, config={"max_queued_requests": 2, "max_num_seqs": 1}))
    tab = slo_table(tr, SLO(ttft=1e6))  # a target nobody served could miss
    rejected = tab["rejected"].to_numpy()
    assert rejected.tolist() == [False, False, True, True, True]  # all five arrive before step 1: two fit the queue
    assert not tab.loc[rejected, "met"].any() and tab.loc[~rejected, "met"].all()
    assert (tab.loc[rejected, "missed_at"] == tab.loc[rejected, "arrival_time"]).all()
    assert slo_summary(tr, SLO(ttft=1e6))["slo_attainment"] == pytest.approx(2 / 5)
    # a request the trace never saw finish (a log cut short): missed, even with its first token in time
    cut = six()
    cut.requests.loc[0, "finish_time"] = math.nan
    tab = slo_table(cut, SLO(ttft=35))
    assert tab["met"].tolist()[:2] == [False, True]


def test_single_token_requests_meet_any_tpot():
    tr = simulate(Workload([Request("one", 10, 1), Request("two", 10, 2)]))
    tab = slo_table(tr, SLO(tpot=0.5))
    assert tab["tpot"].isna().tolist() == [True, False]
    assert tab["met_tpot"].tolist() == [True, False]


def test_overrides_per_tenant_and_priority():
    slo = SLO.parse({"ttft": 100, "tpot": 5,
                     "tenants": {"batch": {"ttft": 1000}},
                     "priorities": {"0": {"ttft": 20}, "1": {"tpot": 50}}})
    assert slo.targets_for("chat", 2) == {"ttft": 100, "tpot": 5, "e2e": None}
    assert slo.targets_for("chat", 0) == {"ttft": 20, "tpot": 5, "e2e": None}
    assert slo.targets_for("batch", 0) == {"ttft": 1000, "tpot": 5, "e2e": None}  # the tenant wins
    assert slo.targets_for("batch", 1) == {"ttft": 1000, "tpot": 50, "e2e": None}
    reqs = [Request("c", 500, 2, tenant="chat", priority=0), Request("b", 500, 2, tenant="batch", priority=0)]
    tr = simulate(Workload(reqs, config={"max_num_batched_tokens": 500}))
    tab = slo_table(tr, slo).set_index("request")
    assert tab.loc["c", "ttft_target"] == 20 and tab.loc["b", "ttft_target"] == 1000
    # c: first token at 10, within 20; b: its prompt ends in step 3 (after c's decode took a token), at 30
    assert tab.loc["c", "met_ttft"] and tab.loc["b", "met_ttft"]
    tight = SLO.parse({"tenants": {"batch": {"ttft": 25}}})
    s = slo_summary(tr, tight)
    assert s["slo_ttft_attainment"] == 0.0  # only b has a target, and misses it
    assert s["slo_attainment"] == 0.0 and s["slo_met"] == 0 and s["slo_missed"] == 1


def test_round_trip_and_hash():
    text = '{"ttft": 400, "tpot": 40, "tenants": {"a": {"e2e": 9000}}, "priorities": {"2": {"ttft": 100}}}'
    slo = SLO.parse(text)
    assert SLO.parse(slo.to_json()) == slo == SLO.parse(json.dumps(slo.to_json()))
    assert hash(slo) == hash(SLO.parse(text)) and SLO.parse(slo) is slo
    assert slo.to_json() == {"ttft": 400.0, "tpot": 40.0, "tenants": {"a": {"e2e": 9000.0}},
                             "priorities": {"2": {"ttft": 100.0}}}
    assert SLO.parse(None).empty and not slo.empty
    assert SLO(ttft=400, tpot=40, per_tenant={"a": {"e2e": 9000}}, per_priority={"2": SLO(ttft=100)}) == slo


@pytest.mark.parametrize("bad, message", [
    ('{"ttft": -1}', "positive"), ('{"tpot": 0}', "positive"), ({"e2e": float("nan")}, "finite"),
    ({"ttft": float("inf")}, "finite"), ('{"ttft": "fast"}', "number"), ('{"ttft": true}', "number"),
    ('{"ttfb": 3}', "unknown SLO keys: ttfb"), ('{"tenants": {"a": {"tenants": {}}}}', "unknown SLO keys"),
    ('{"priorities": {"high": {"ttft": 1}}}', "whole number"), ('{"tenants": [1]}', "tenants must be"),
    ("{not json", "not valid JSON"), ("[400]", "JSON object"), ('{"tenants": {"a": 5}}', "JSON object"),
])
def test_parse_errors_are_plain(bad, message):
    with pytest.raises(ValueError, match=message):
        SLO.parse(bad)


def test_summary_merges_the_slo():
    tr = six()
    plain = summary(tr)
    assert not any(k.startswith("slo_") or k == "goodput" for k in plain)
    merged = summary(tr, slo=SLO(ttft=35))
    assert json.dumps({k: merged[k] for k in plain}) == json.dumps(plain)  # NaN-safe: the same numbers
    assert merged["slo_ttft_attainment"] == pytest.approx(2 / 6) and merged["goodput"] == pytest.approx(2 / 90)
    with pytest.raises(TypeError, match="SLO.parse"):
        summary(tr, slo={"ttft": 35})


def test_cli_run_with_slo(tmp_path, capsys):
    wl = tmp_path / "w.json"
    wl.write_text(Workload([Request(f"r{i}", 500, 3) for i in range(6)],
                           config={"max_num_batched_tokens": 500}).dumps())
    assert main(["run", str(wl), "--slo", '{"ttft": 35, "tpot": 10}']) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["slo_ttft_attainment"] == pytest.approx(2 / 6) and out["slo_tpot_attainment"] == 1.0
    assert out["goodput"] == pytest.approx(2 / 90) and out["goodput_unit"] == "requests/units"
    assert main(["run", str(wl)]) == 0
    assert "goodput" not in json.loads(capsys.readouterr().out)
    with pytest.raises(SystemExit, match="--slo: SLO ttft must be a positive"):
        main(["run", str(wl), "--slo", '{"ttft": -5}'])
