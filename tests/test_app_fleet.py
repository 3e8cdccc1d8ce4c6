"""The Fleet page under Streamlit's AppTest: it opens on the chat scenario (4 replicas, cache
aware against round robin); the router's settings change the routing table; the A/B shows both
routers; a link's settings come back; bad input is one plain sentence; the bundled real fleet
opens and a policy's prediction agrees with the real router."""
from __future__ import annotations

import gzip
import json
import re
from pathlib import Path

import numpy as np
import pytest

from app_util import open_page
from plotly_util import chart_specs, decode

ROOT = Path(__file__).resolve().parents[1]
SAMPLE = ROOT / "samples" / "fleet" / "vllm-router-cache_aware"
UPLOAD, REAL, REAL_UPLOAD = ("Upload a workload JSON", "A real fleet (bundled recordings)",
                             "A real fleet (upload recordings)")
LEAKS = ("Traceback", 'File "', "/tmp/", "schedlab-fleet-", str(ROOT))


def table(at, column: str):
    """The first dataframe that has `column`."""
    return next(d.value for d in at.dataframe if column in d.value.columns)


def routes(at):
    return table(at, "candidates")


def lane_heatmaps(spec: dict) -> list[dict]:
    return [t for t in spec["data"] if t["type"] == "heatmap" and not t["name"].endswith(" kind")]


def assert_one_sentence(at, *words: str) -> str:
    assert not at.exception, at.exception
    assert len(at.error) == 1, [e.value for e in at.error]
    msg = at.error[0].value
    assert "\n" not in msg.strip() and len(msg) < 600, msg
    assert all(w in msg.replace("\\", "") for w in words), msg   # (markdown escapes aside)
    shown = "\n".join(str(e.value) for kind in ("error", "warning", "markdown", "caption") for e in getattr(at, kind))
    assert not any(leak in shown for leak in LEAKS), shown
    return msg


@pytest.fixture(scope="module")
def chat():
    return open_page("fleet.py", timeout=180)


def test_it_opens_on_the_chat_scenario_with_every_replica_on_one_clock(chat):
    at = chat
    assert not at.error and not at.exception
    assert at.title[0].value == "Fleet"
    specs = chart_specs(at)
    assert {"fleet_lanes", "fleet_signals", "fleet_scores", "fleet_change", "fleet_placement"} <= set(specs)
    lanes = specs["fleet_lanes"]
    heat = lane_heatmaps(lanes)
    assert [h["name"] for h in heat] == [f"replica {i}" for i in range(4)]   # a lane block per replica
    assert [h["yaxis"] for h in heat] == ["y", "y2", "y3", "y4"] and {h["xaxis"] for h in heat} == {"x"}
    t = at.slider(key="keep_fleet_t").value
    marker = lanes["layout"]["shapes"][0]
    assert marker["x0"] == marker["x1"] == t and marker["yref"] == "paper"   # the scrub time, across every row
    assert specs["fleet_signals"]["layout"]["shapes"][0]["x0"] == t
    z = decode(heat[0]["z"])
    assert (z >= 0).any() and (z == -1).any()   # busy and idle slots
    r = routes(at)
    assert len(r) == 600 and set(r["rule"]) == {"prefix_hit", "prefix_miss"}
    assert {"score: in_flight", "score: matched"} <= set(r.columns)
    assert r.loc[r["request"] == "chat-3", "score: matched"].item() == "0 · 1024 · 0 · 0"
    explained = " ".join(m.value for m in at.markdown)
    assert "chat\\-3 reached the router at 121\\.0 ms" in explained and "sent it to replica 1" in explained
    scores = specs["fleet_scores"]
    assert scores["layout"]["meta"] == {"request": "chat-3", "scorers": ["in_flight", "matched"], "picked": "replica 1"}
    assert at.query_params["fleet_a_router"] == "cache_aware" and at.query_params["fleet_b_router"] == "round_robin"


def test_the_ab_shows_both_routers_side_by_side(chat):
    at = chat
    m = table(at, "better").set_index("metric")
    assert {"A", "B", "B - A"} <= set(m.columns)
    hit = m.loc["prefix-cache hit rate (%)"]
    assert hit["A"] > hit["B"] + 5 and hit["better"] == "A"   # cache aware keeps each system prompt on one replica
    assert m.loc["requests", "A"] == m.loc["requests", "B"] == 600
    specs = chart_specs(at)
    spread = specs["fleet_placement"]["layout"]["meta"]["spread"]
    assert spread[0] < 1.5 < 3.5 < spread[1]   # A: a group on ~1 replica; B (round robin): on all 4
    place = [t for t in specs["fleet_placement"]["data"] if t["type"] == "heatmap"]
    assert len(place) == 2 and decode(place[0]["z"]).sum() == decode(place[1]["z"]).sum()
    c = specs["fleet_change"]["layout"]["meta"]
    assert c["faster"] + c["slower"] + c["same"] == 600 and c["metric"] == "e2e"
    per = [d.value for d in at.dataframe if "busy / busiest %" in d.value.columns]
    assert len(per) == 2 and all(len(p) == 4 for p in per)
    assert per[1]["requests"].tolist() == [150] * 4   # round robin splits 600 evenly
    delta = next(mm.delta for mm in at.metric if mm.label == "p99 TTFT")   # B - A beside A's number
    assert float(delta.replace(",", "")) == pytest.approx(m.loc["TTFT p99", "B - A"], rel=0.01)


@pytest.mark.parametrize("scenario", ["bursty", "stale"])
def test_every_fleet_scenario_opens_with_its_own_ab(scenario):
    from sim.fleet.scenarios import FLEET_SCENARIOS
    sc = FLEET_SCENARIOS[scenario]
    at = open_page("fleet.py", timeout=180, fleet_scenario=scenario)
    assert not at.exception and not at.error
    assert at.selectbox(key="keep_fleet_a_router").value == sc.a.router
    assert at.number_input(key="keep_fleet_a_refresh").value == sc.a.refresh_interval
    assert at.selectbox(key="keep_fleet_b_router").value == sc.b.router
    assert len(routes(at)) == len(sc.workload().requests)
    assert {"fleet_lanes", "fleet_signals", "fleet_change"} <= set(chart_specs(at))


def test_switching_router_a_changes_the_routing_table():
    at = open_page("fleet.py", timeout=180, fleet_ab="false")
    before = routes(at)
    assert "B" not in table(at, "busy / busiest %").columns and "fleet_change" not in chart_specs(at)
    at.selectbox(key="keep_fleet_a_router").set_value("round_robin").run()
    assert not at.exception and not at.error
    after = routes(at)
    assert set(after["rule"]) == {"round_robin"} and not any(c.startswith("score:") for c in after.columns)
    by_arrival = after.sort_values("arrival (ms)", kind="stable")["replica"].tolist()
    assert by_arrival[:8] == [f"replica {i % 4}" for i in range(8)]
    assert (before["replica"] != after["replica"]).any()
    assert at.query_params["fleet_a_router"] == "round_robin"
    # a knob widget writes the one JSON setting the link holds
    at.selectbox(key="keep_fleet_a_router").set_value("least_loaded").run()
    at.selectbox(key="fleet_a_knob_least_loaded_signal").set_value("kv_usage").run()
    assert not at.exception and not at.error
    assert json.loads(at.query_params["fleet_a_router_config"]) == {"signal": "kv_usage"}
    assert "score: kv_usage" in routes(at).columns


def test_a_link_brings_its_settings_back():
    at = open_page("fleet.py", timeout=180, fleet_ab="false", fleet_a_replicas="3", fleet_a_router="least_loaded",
                   fleet_a_router_config='{"signal": "waiting"}', fleet_a_refresh="100.0", fleet_t="5000",
                   fleet_window="2000", fleet_request="chat-7")
    assert not at.exception and not at.error and not at.warning
    assert at.number_input(key="keep_fleet_a_replicas").value == 3
    assert at.selectbox(key="keep_fleet_a_router").value == "least_loaded"
    assert at.selectbox(key="fleet_a_knob_least_loaded_signal").value == "waiting"
    assert at.number_input(key="keep_fleet_a_refresh").value == 100.0
    assert at.slider(key="keep_fleet_t").value == 5000
    assert at.selectbox(key="keep_fleet_request").value == "chat-7"
    lanes = chart_specs(at)["fleet_lanes"]["layout"]
    assert lanes["meta"]["replicas"] == 3 and lanes["shapes"][0]["x0"] == 5000
    w = lanes["meta"]["window"]
    assert w[1] - w[0] == pytest.approx(2000) and w[0] <= 5000 <= w[1]
    r = routes(at)
    assert set(r["rule"]) <= {"least_loaded", "tie_first"} and "score: waiting" in r.columns
    assert at.query_params["fleet_a_refresh"] == "100.0" and at.query_params["fleet_t"] == "5000"


def test_replicas_may_differ():
    at = open_page("fleet.py", timeout=180, fleet_ab="false", fleet_replica_configs='[{}, {"num_gpu_blocks": 500}]')
    assert not at.exception and not at.error
    at.selectbox(key="keep_fleet_inspect").set_value(1).run()
    kv = next(m.value for m in at.markdown if m.value.startswith("**replica 1, KV blocks"))
    nums = [int(x.replace(",", "")) for x in re.findall(r"([\d,]+) (?:in use|free|cached-free)", kv)]
    assert sum(nums) == 499, kv   # replica 1's own pool (block 0 is the null block)
    at = open_page("fleet.py", timeout=180, fleet_ab="false", fleet_replica_configs='{"num_gpu_blocks": 500}')
    assert_one_sentence(at, "Replicas that differ", "JSON list")


def test_a_replica_may_run_async_scheduling():
    """vLLM's async scheduling on every replica (the toggle, in the URL) or on one (its own
    override): the page runs it and says so; swap preemption with async is refused in one sentence."""
    def mode(at) -> str:
        return next(c.value for c in at.caption if c.value.startswith("Fleet A: ")).split("(", 1)[1].split(")")[0]
    at = open_page("fleet.py", timeout=180, fleet_ab="false")
    assert not at.exception and mode(at) == "sync scheduling" and at.toggle(key="keep_fleet_async").value is False
    at = open_page("fleet.py", timeout=180, fleet_ab="false", fleet_async="true")
    assert not at.exception and not at.error and mode(at) == "async scheduling"
    assert at.query_params["fleet_async"] == "true"
    at = open_page("fleet.py", timeout=180, fleet_ab="false", fleet_replica_configs='[{}, {"async_scheduling": true}]')
    assert not at.exception and not at.error and mode(at) == "async scheduling on 1 of them"
    at = open_page("fleet.py", timeout=180, fleet_ab="false",
                   fleet_replica_configs='[{}, {"async_scheduling": true, "preemption_mode": "swap"}]')
    assert_one_sentence(at, "async_scheduling is modelled with vLLM's own preemption")


def test_scrubbing_moves_the_marker_and_the_tables(chat):
    at = chat
    t0 = at.slider(key="keep_fleet_t").value
    at.button(key="fleet_t_next").click().run()
    t1 = at.slider(key="keep_fleet_t").value
    assert t1 > t0
    specs = chart_specs(at)
    assert specs["fleet_lanes"]["layout"]["shapes"][0]["x0"] == t1
    assert specs["fleet_signals"]["layout"]["shapes"][0]["x0"] == t1
    assert any(m.value == f"**The fleet at {t1:,} ms**" for m in at.markdown)
    at.slider(key="keep_fleet_t").set_value(20_000).run()
    now = table(at, "in flight (router)")
    assert len(now) == 4 and now["routed so far"].sum() == (routes(at)["arrival (ms)"] <= 20_000).sum()
    assert at.query_params["fleet_t"] == "20000"


@pytest.mark.parametrize("name,data,words", [
    ("junk.bin", bytes(range(256)) * 64, ("junk.bin",)),
    ("notes.json", b'{"hello": "world"}', ("notes.json", "'requests' list")),
])
def test_a_bad_upload_is_one_sentence(name, data, words):
    at = open_page("fleet.py", timeout=180)
    at.radio(key="keep_fleet_source").set_value(UPLOAD).run()
    at.file_uploader(key="fleet_upload").upload(name, data, "application/octet-stream")
    at.run()
    assert_one_sentence(at, *words)
    assert not chart_specs(at)   # nothing ran on it


def test_a_workload_past_the_pages_limit_is_refused_in_one_sentence():
    reqs = [{"id": f"r{i}", "prompt_len": 8, "max_tokens": 1, "arrival_time": i * 0.5} for i in range(50_001)]
    at = open_page("fleet.py", timeout=180)
    at.radio(key="keep_fleet_source").set_value(UPLOAD).run()
    at.file_uploader(key="fleet_upload").upload("big.json", json.dumps({"requests": reqs}).encode(), "application/json")
    at.run()
    assert len(at.error) == 2   # A and B: each says why it did not run
    msg = assert_one_sentence_each(at)
    assert "50,001 requests" in msg and "at most 50,000" in msg
    assert not chart_specs(at)


def assert_one_sentence_each(at) -> str:
    assert not at.exception, at.exception
    for e in at.error:
        assert "\n" not in e.value.strip() and len(e.value) < 600, e.value
    return at.error[0].value.replace("\\", "")


def test_bad_router_knobs_in_a_link_are_one_sentence():
    at = open_page("fleet.py", timeout=180, fleet_ab="false", fleet_a_router_config='{"cache_threshold": "high"}')
    assert_one_sentence(at, "Router A's settings", "cache_threshold")
    at = open_page("fleet.py", timeout=180, fleet_ab="false", fleet_a_router_config='{"nope": 1}')
    assert_one_sentence(at, "Router A's settings", "'nope'")
    at = open_page("fleet.py", timeout=180, fleet_ab="false", fleet_a_router_config='{"cache_threshold": 0.5')
    assert_one_sentence(at, "Router A's settings", "not valid JSON")


def test_the_bundled_real_fleet_opens_and_its_prediction_agrees():
    at = open_page("fleet.py", timeout=180, fleet_source=REAL)
    assert not at.exception and not at.error
    verdicts = table(at, "equal")
    assert verdicts["replica"].tolist() == ["rec-8101", "rec-8102"] and verdicts["equal"].all()
    r = routes(at)
    assert len(r) == 50 and set(r["rule"]) == {"recorded"}
    assert chart_specs(at)["fleet_lanes"]["layout"]["meta"]["names"] == ["rec-8101", "rec-8102"]
    at.toggle(key="keep_fleet_predict").set_value(True).run()
    assert not at.exception and not at.error
    assert at.selectbox(key="keep_fleet_a_router").value == "cache_aware"   # the manifest's policy
    agree = next(m for m in at.metric if m.label == "Agreement with the real router")
    # recorded timing: the policy sees what vllm-router saw (where each request went, when it
    # ended), so its rule must pick the real router's replica for every request
    assert agree.value == "50 of 50"
    r = routes(at)
    assert r["agree"].all() and {"prefix_hit", "prefix_miss"} <= set(r["policy's rule"])
    at.radio(key="keep_fleet_timing").set_value("simulated").run()
    assert not at.exception and not at.error
    agree = next(m for m in at.metric if m.label == "Agreement with the real router")
    done, total = map(int, agree.value.split(" of "))
    assert total == 50 and done >= 40   # everything predicted: a few picks may differ
    assert "fleet_change" in chart_specs(at)   # the real fleet beside its simulation
    # a policy that draws: the picks it drew are said apart from the agreement by its rule
    at.radio(key="keep_fleet_timing").set_value("recorded").run()
    at.selectbox(key="keep_fleet_a_router").set_value("power_of_two").run()
    assert not at.exception and not at.error
    said = " ".join(c.value for c in at.caption)
    assert re.search(r"\b\d+ of its picks were its own random draw", said), said


def _recording(name: str) -> bytes:
    return (SAMPLE / name).read_bytes()


def test_uploaded_recordings_that_disagree_are_one_sentence():
    at = open_page("fleet.py", timeout=180, fleet_source=REAL_UPLOAD)
    assert not at.error and at.info   # asks for the files
    uploader = at.file_uploader(key="fleet_recordings")
    uploader.set_value([("a.jsonl.gz", _recording("rec-8101.jsonl.gz"), "application/gzip"),
                        ("b.jsonl.gz", _recording("rec-8101.jsonl.gz"), "application/gzip")])
    at.run()
    assert_one_sentence(at, "a.jsonl.gz", "b.jsonl.gz", "one replica")
    uploader = at.file_uploader(key="fleet_recordings")
    uploader.set_value([("good.jsonl.gz", _recording("rec-8101.jsonl.gz"), "application/gzip"),
                        ("junk.jsonl", bytes(range(256)) * 16, "application/octet-stream")])
    at.run()
    assert_one_sentence(at, "junk.jsonl")


def test_uploaded_recordings_in_worker_order_open_as_a_fleet():
    at = open_page("fleet.py", timeout=180, fleet_source=REAL_UPLOAD)
    at.file_uploader(key="fleet_recordings").set_value(
        [("w1.jsonl", gzip.decompress(_recording("rec-8102.jsonl.gz")), "application/x-ndjson"),
         ("w0.jsonl.gz", _recording("rec-8101.jsonl.gz"), "application/gzip")])
    at.run()
    assert not at.exception and not at.error
    assert chart_specs(at)["fleet_lanes"]["layout"]["meta"]["names"] == ["w1", "w0"]   # the order given
    r = routes(at)
    assert len(r) == 50 and np.array_equal(np.sort(r["replica"].unique()), ["w0", "w1"])


FILE = "A saved fleet trace file"


def test_a_saved_fleet_trace_opens_as_it_was_saved():
    from sim.cost import cost_from_preset
    from sim.fleet import FleetSettings, simulate_fleet
    from sim.fleet.scenarios import chat as chat_workload
    fleet = simulate_fleet(chat_workload(n=60), FleetSettings(replicas=3, router="power_of_two", seed=4),
                           cost=cost_from_preset("a100-8B-fp16"))
    at = open_page("fleet.py", timeout=180, fleet_source=FILE)
    assert not at.error and at.info   # asks for the file
    at.file_uploader(key="fleet_fleet_file").upload("run.fleet", fleet.to_bytes(), "application/gzip")
    at.run()
    assert not at.exception and not at.error, [e.value for e in at.error]
    r = routes(at)
    assert len(r) == 60
    assert set(r["rule"]) <= {"lower_load", "tie_first_drawn"} and "lower_load" in set(r["rule"])
    assert chart_specs(at)["fleet_lanes"]["layout"]["meta"]["names"] == fleet.names


@pytest.mark.parametrize("data, words", [(bytes(range(256)) * 8, ("not a fleet trace",)),
                                         (b'{"format": "scheduler-lab-trace"}', ("not a fleet trace",))])
def test_a_bad_fleet_trace_file_is_one_sentence(data, words):
    at = open_page("fleet.py", timeout=180, fleet_source=FILE)
    at.file_uploader(key="fleet_fleet_file").upload("bad.fleet", data, "application/octet-stream")
    at.run()
    assert_one_sentence(at, *words)


# --- found by a hostile sweep of the page (each used to raise, or to render a user's link) -------

def test_a_replica_the_router_sent_nothing_draws_empty_lanes():
    """A link alone: consistent hashing on 12 replicas leaves some without a request; their lanes
    used to raise (IndexError) and take the rest of the page with them."""
    at = open_page("fleet.py", timeout=180, fleet_ab="false", fleet_a_router="consistent_hash",
                   fleet_a_replicas="12", fleet_max_seqs="2")
    assert not at.exception and not at.error
    lanes = chart_specs(at)["fleet_lanes"]
    idle = [t for t in lane_heatmaps(lanes) if isinstance(t.get("customdata"), list)
            and all(c == "idle" for row in t["customdata"] for c in row)]
    assert lanes["layout"]["meta"]["replicas"] == 12 and idle   # some replica got nothing, and shows it
    assert len(routes(at)) > 0
    said = [i.value for i in at.info if "were sent no request" in i.value]   # and the page says how many, and why
    assert len(said) == 1 and re.fullmatch(r"Fleet A: \d+ of 12 replicas were sent no request \(consistent_hash keys on "
                                           r"the tenant, and the requests have \d+ tenants\)\.", said[0]), said


def test_markdown_in_a_link_or_an_upload_never_becomes_a_link():
    link = "[Log in again](https://evil.example)"
    at = open_page("fleet.py", timeout=180, fleet_scenario=link)
    said = at.warning[0].value
    assert "Ignored a setting in the link" in said and "\\[Log in again\\](https\u2060://evil.example)" in said
    at.radio(key="keep_fleet_source").set_value(UPLOAD).run()
    bad = json.dumps({"requests": [{"id": "a", "prompt_len": link, "max_tokens": 5}]}).encode()
    at.file_uploader(key="fleet_upload").upload("w.json", bad, "application/json")
    at.run()
    assert not at.exception and "\\[Log in again\\](https\u2060://evil.example)" in at.error[0].value
    good = json.dumps({"requests": [{"id": "<b>x</b>", "prompt_len": 10, "max_tokens": 5}]}).encode()
    at.file_uploader(key="fleet_upload").upload("[Log in again](https:evil.example).json", good, "application/json")
    at.run()
    assert not at.exception and not at.error
    blurb = next(m.value for m in at.markdown if m.value.startswith("Uploaded workload"))
    assert "\\[Log in again\\]" in blurb
    # an id is shown in the lanes' hover as written, not as Plotly's markup
    hover = [c for t in lane_heatmaps(chart_specs(at)["fleet_lanes"]) for row in t.get("customdata") or []
             for c in row if c != "idle"]
    assert hover and all(c.startswith("&lt;b&gt;x&lt;/b&gt;") for c in hover)


def test_replica_overrides_nested_deep_are_one_sentence():
    at = open_page("fleet.py", timeout=180, fleet_replica_configs="[" * 3000 + "]" * 3000)
    assert_one_sentence(at, "nests lists or objects", "give a JSON list of objects")


@pytest.mark.parametrize("edit, words", [
    (lambda d: d["meta"].__setitem__("names", [1, 2, 3]), ("'names' must be 3 texts",)),
    (lambda d: d["meta"].__setitem__("settings", "x"), ("'settings' must be a JSON object",)),
    (lambda d: d["replicas"][0]["meta"]["config"].__setitem__("num_gpu_blocks", "x"),
     ("num_gpu_blocks must be a whole number",)),
    (lambda d: d["routes"]["data"][d["routes"]["columns"].index("arrival")].__setitem__(0, 1e300),
     ("a time in 'arrival' is past",)),
])
def test_a_hand_edited_fleet_trace_is_one_sentence(edit, words):
    from sim.cost import cost_from_preset
    from sim.fleet import FleetSettings, simulate_fleet
    from sim.fleet.scenarios import chat as chat_workload
    fleet = simulate_fleet(chat_workload(n=30), FleetSettings(replicas=3), cost=cost_from_preset("a100-8B-fp16"))
    doc = json.loads(gzip.decompress(fleet.to_bytes()))
    edit(doc)
    at = open_page("fleet.py", timeout=180, fleet_source=FILE)
    at.file_uploader(key="fleet_fleet_file").upload("edited.fleet", gzip.compress(json.dumps(doc).encode()),
                                                    "application/gzip")
    at.run()
    assert_one_sentence(at, *words)


def test_scores_of_another_shape_in_a_saved_fleet_show_as_blanks():
    from sim.cost import cost_from_preset
    from sim.fleet import FleetSettings, simulate_fleet
    from sim.fleet.scenarios import chat as chat_workload
    fleet = simulate_fleet(chat_workload(n=30), FleetSettings(replicas=3, router="cache_aware"),
                           cost=cost_from_preset("a100-8B-fp16"))
    doc = json.loads(gzip.decompress(fleet.to_bytes()))
    col = doc["routes"]["data"][doc["routes"]["columns"].index("scores")]
    col[0] = json.dumps({"match": [[1], "x", True]})
    at = open_page("fleet.py", timeout=180, fleet_source=FILE)
    at.file_uploader(key="fleet_fleet_file").upload("s.fleet", gzip.compress(json.dumps(doc).encode()),
                                                    "application/gzip")
    at.run()
    assert not at.exception and not at.error
    assert routes(at)["score: match"].iloc[0] == "– · – · –"


def test_a_prediction_that_cannot_run_leaves_the_real_fleet_shown():
    """Recordings whose header names a vLLM without rules here (V0's, as a damaged header may):
    simulated timing cannot predict them; the page says so in one sentence and still shows the
    real fleet as it ran (it used to stop)."""
    recs = []
    for name in ("rec-8101.jsonl.gz", "rec-8102.jsonl.gz"):
        raw = gzip.decompress(_recording(name)).decode()
        recs.append((name.replace(".gz", ""), raw.replace('"vllm":"0.32.0"', '"vllm":"0.6.3"', 1).encode(),
                     "application/x-ndjson"))
    at = open_page("fleet.py", timeout=180, fleet_source=REAL_UPLOAD, fleet_predict="true",
                   fleet_timing="simulated")
    at.file_uploader(key="fleet_recordings").set_value(recs)
    at.run()
    msg = assert_one_sentence(at, "The policy cannot replay this fleet", "0.6.3", "Below: the real fleet as it ran")
    assert "\n" not in msg and len(routes(at)) == 50 and "fleet_lanes" in chart_specs(at)


def test_a_prediction_on_replicas_of_different_max_model_len_says_what_was_turned_away():
    """Uploaded recordings whose max_model_len differ (b's 284; a served up to 288 tokens):
    simulated timing used to stop ("a request needs 288 tokens"); now b turns away what it cannot
    take, as vLLM does (HTTP 400), and the page says so above the fleets."""
    src = ROOT / "tests" / "fixtures" / "fleet" / "vllm-round_robin-tokens"
    a = gzip.decompress((src / "rec-44789.jsonl.gz").read_bytes())
    lines = gzip.decompress((src / "rec-51121.jsonl.gz").read_bytes()).decode().split("\n")
    head = json.loads(lines[0])
    head["config"]["max_model_len"] = 284
    b = "\n".join([json.dumps(head)] + lines[1:]).encode()
    at = open_page("fleet.py", timeout=180, fleet_source=REAL_UPLOAD, fleet_predict="true",
                   fleet_timing="simulated", fleet_a_router="random", fleet_a_seed="1")
    at.file_uploader(key="fleet_recordings").set_value([("a.jsonl", a, "application/x-ndjson"),
                                                        ("b.jsonl", b, "application/x-ndjson")])
    at.run()
    assert not at.exception and not at.error
    said = [i.value for i in at.info if "turned away" in i.value]
    assert len(said) == 1 and "1 by b, whose max_model_len is 284" in said[0] and "HTTP 400" in said[0]
    assert "fleet_lanes" in chart_specs(at)
