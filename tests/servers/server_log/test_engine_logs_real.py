"""The real excerpts users pasted (tests/fixtures/engine_logs/, copied byte for byte): each is
recognised as its engine and read fully, to the counts its .meta.json gives."""
from __future__ import annotations

import json

import pytest

from engine_variants import ALL, SGLANG, VLLM
from servers.server_log import read_log


def meta(path):
    return json.loads(path.with_suffix(".meta.json").read_text())


@pytest.mark.parametrize("path", ALL, ids=lambda p: p.name)
def test_each_excerpt_is_recognised_and_read_fully(path):
    m = meta(path)
    log = read_log(path.read_bytes(), path.name)
    r = log.read
    assert r.engine == m["engine"]
    assert r.not_understood == 0, r.not_understood_examples
    assert r.physical_lines == m["counts"]["physical_lines"]
    c = m["counts"]
    if r.engine == "sglang":
        assert sum(b["kind"] == "prefill" for b in r.batches) + r.duplicates >= c["prefill_lines_real"]
        assert sum(b["kind"] == "decode" for b in r.batches) + r.duplicates == c["decode_lines"] or \
            sum(b["kind"] == "decode" for b in r.batches) == c["decode_lines"]
        assert len(r.batches) == c["prefill_lines_real"] + c["decode_lines"]
        assert sum(q["kind"] == "http" for q in r.requests) == c["http_access_lines"]
        assert len(log.trace.steps) == len(r.batches)
    else:
        assert len(r.stats) == c["stats_lines"]
        assert len(r.spec_decoding) == c["specdecode_lines"]
        kinds = [q["kind"] for q in r.requests]
        assert kinds.count("added") == c["added_request_lines"]
        assert kinds.count("received") == c["received_request_lines"]
        assert kinds.count("http") == c["http_access_lines"]
        assert log.trace.steps.empty      # stats lines are no steps


def test_sglang_fields_of_a_prefill_and_a_decode_line():
    r = read_log((SGLANG[0].parent / "18_sglang_10053.log").read_bytes()).read
    p, d = r.batches[0], r.batches[1]
    assert p == {**p, "kind": "prefill", "time": "2025-09-03 18:33:18", "t": 0.0, "new_seqs": 1, "new_tokens": 103,
                 "cached_tokens": 1, "kv_usage": 0.0, "running": 0, "waiting": 0, "ranks": "TP0", "lane": ""}
    assert d == {**d, "kind": "decode", "t": 1.0, "running": 1, "kv_tokens": 137, "cuda_graph": True,
                 "throughput": 1.06, "gen_throughput": 1.06, "waiting": 0}
    assert r.era.startswith("2025") and r.extra["decode_log_interval"] == 40
    assert [q["kind"] for q in r.requests] == ["http", "http"] and r.requests[0]["status"] == 200


def test_2024_time_only_era_and_hybrid_and_npu_and_dp_lanes():
    by = {p.name: read_log(p.read_bytes()).read for p in SGLANG}
    r = by["02_sglang_1612.log"]
    assert r.era.startswith("2024") and r.batches[1]["cache_hit_rate"] == 0.0276 and "no date" in r.time_origin
    h = by["10_llama-benchy_15.log"]
    assert h.batches[0]["full_kv_usage"] == 0.01 and h.batches[0]["swa_kv_usage"] == 0.02
    assert h.batches[0]["kv_usage"] == 0.01 and any("hybrid" in t for t in h.traits)
    assert [s for s in h.gaps] and h.gaps[0] == [0.0, 44.0]     # 44 s silences: unknown, not idle
    n = by["13_sgl-kernel-npu_608.log"]
    assert n.batches[1]["accept_len"] == 3.05 and n.batches[0]["npu_graph"] is False
    assert n.batches[0]["pending_tokens"] == 0 and n.batches[0]["throughput"] == 2793.64
    dp = by["06_sglang_20766.log"]
    assert dp.lanes == sorted(f"DP{i}" for i in range(8, 16)) and dp.duplicates == 0
    assert by["23_skypilot_deepseek-r1-readme.log"].wrappers == ["Ray / SkyPilot (pid=N)"]


def test_vllm_fields_v0_and_v1():
    by = {p.name: read_log(p.read_bytes()).read for p in VLLM}
    v0 = by["01_vllm_12314.log"]
    assert v0.era.startswith("V0") and v0.stats[0]["waiting"] == 0 and v0.stats[0]["swapped"] == 0
    assert v0.stats[0]["kv_usage"] == 0.074 and v0.stats[0]["cpu_kv_usage"] == 0.0
    assert v0.stats[0]["prompt_throughput"] == 605.5 and v0.extra["stats_interval_s"] == 5
    v1 = by["20_vllm-ascend_11876.log"]
    assert v1.lanes == ["Engine 001"] and v1.stats[1]["deferred"] == 1 and v1.stats[1]["waiting"] == 1
    assert v1.stats[0]["external_prefix_cache_hit_rate"] == 1.0
    assert v1.spec_decoding[0]["mean_acceptance_length"] == 1.92
    docker = by["09_tt-inference-server_3359.log"]
    assert docker.wrappers == ["docker/kubectl --timestamps (RFC 3339)"] and docker.time_origin.startswith("2026-05-12")
    assert by["06_vllm_28926.log"].time_origin.startswith("(no year)")


def test_how_many_excerpts_read_fully():
    """The figure the issue asks for: how many of the real excerpts read fully (all of them)."""
    full = [p.name for p in ALL if read_log(p.read_bytes()).read.not_understood == 0]
    assert len(full) == len(ALL) == 14


def test_a_v1_log_without_a_preemptions_field_does_not_say_there_were_none():
    """vLLM V1's logger zeroes its preemption count before printing it: a V1 log's silence on
    preemptions is said to be no evidence; a line that does carry the field (a build that prints
    it) and a V0 log get no such sentence."""
    quiet = "whether any request was preempted"
    by = {p.name: read_log(p.read_bytes()).read for p in VLLM}
    assert any(quiet in c for c in by["06_vllm_28926.log"].cannot_say)
    assert not any(quiet in c for c in by["01_vllm_12314.log"].cannot_say)      # V0: no such field to miss
    line = next(p for p in VLLM if p.name == "06_vllm_28926.log").read_text().splitlines()[0]
    told = line.replace("Waiting: 0 reqs, ", "Waiting: 0 reqs, Preemptions: 3, ")
    r = read_log((line + "\n" + told + "\n").encode()).read
    assert [s.get("preemptions") for s in r.stats] == [None, 3]
    assert not any(quiet in c for c in r.cannot_say)
    assert any("vllm:num_preemptions" in w for w in by["06_vllm_28926.log"].would_tell_more)


V0_PREEMPTED = (
    "WARNING 01-22 18:25:10 [scheduler.py:1800] Sequence group eb1c91ce-4ffb-11f0-b0ac-0242ac110008 is preempted by "
    "PreemptionMode.RECOMPUTE mode because there is not enough KV cache space. This can affect the end-to-end "
    "performance. Increase gpu_memory_utilization or tensor_parallel_size to provide more KV cache memory. "
    "total_num_cumulative_preemption=3501")


def test_v0_preemption_warnings_are_read_as_preemptions():
    """V0 warns at the 1st, 51st, 101st ... preemption (the line as a user pasted it, its time moved
    among a real V0 excerpt's stats lines): each is the request's preempt event, with its mode and the server's
    count so far; a cut line keeps what it says; the gauges chart marks them."""
    from figures.serverlog import gauges_figure
    stats = next(p for p in VLLM if p.name == "01_vllm_12314.log").read_text().splitlines()
    stats = [x for x in stats if "Avg prompt throughput" in x]
    swap = V0_PREEMPTED.replace("RECOMPUTE", "SWAP").replace("3501", "3551").replace("eb1c91ce", "fc2d0aef")
    cut = V0_PREEMPTED.split(" because")[0].replace("eb1c91ce", "0a0a0a0a")
    log = read_log("\n".join([stats[0], V0_PREEMPTED, stats[1], swap, cut, *stats[2:]]).encode())
    r = log.read
    assert r.not_understood == 0 and r.era.startswith("V0")
    pre = [q for q in r.requests if q["kind"] == "preempted"]
    assert [(q["mode"], q.get("cumulative")) for q in pre] == [("recompute", 3501), ("swap", 3551), ("recompute", None)]
    assert pre[0]["request"] == "eb1c91ce-4ffb-11f0-b0ac-0242ac110008" and pre[0]["time"] == "01-22 18:25:10"
    assert r.extra["preemption_warnings"] == {"lines": 3, "cumulative_max": 3551}
    assert any(t.startswith("preemption warnings") and "3,551" in t for t in r.traits)
    assert any("between two preemption warnings" in c for c in r.cannot_say)
    ev = log.trace.events
    assert (ev["kind"] == "preempt").sum() == 3
    assert list(ev["detail"]) == ["recompute; preemption 3,501 of the server's run",
                                  "swap; preemption 3,551 of the server's run", "recompute"]
    assert len(log.trace.requests) == 0   # a warning is an event of its request, not a request line of its own
    assert gauges_figure(log.trace).layout.meta["preempt_marks"] == 3


def test_a_preempted_request_id_of_html_is_shown_as_written():
    from figures.serverlog import gauges_figure
    line = V0_PREEMPTED.replace("eb1c91ce-4ffb-11f0-b0ac-0242ac110008", "<b>x</b>%{y}")
    stats = next(p for p in VLLM if p.name == "01_vllm_12314.log").read_text().splitlines()[1]
    fig = gauges_figure(read_log(f"{stats}\n{line}\n".encode()).trace)
    mark = next(t for t in fig.data if t.name.startswith("preemption warning"))
    assert mark.customdata[0][0] == "&lt;b&gt;x&lt;/b&gt;&#37;{y}"


def test_sglang_retractions_are_read_and_counted_once_per_dp_group():
    """`KV cache pool is full. Retract requests.` (each decode step that sends requests back to the
    queue; the three forms users pasted: with #new_tokens_gained, with the ratio only, bare), among a
    real excerpt's DP-ranked decode lines: counted per line and per request, the line of another rank
    of a DP group than its batch lines' a duplicate, each an event of the Trace and a mark on the
    gauges chart; which requests went back it cannot say."""
    from figures.serverlog import gauges_figure
    batch = next(p for p in SGLANG if p.name == "06_sglang_20766.log").read_text().splitlines()[:3]
    at = batch[0][:batch[0].index("]") + 2]   # `[2026-03-17 17:35:07 DP9 TP9] `
    lines = [*batch,
             at + "KV cache pool is full. Retract requests. #retracted_reqs: 1, #new_tokens_gained: 646, "
                  "#new_token_ratio: 0.0980 -> 0.3487",
             at.replace("TP9", "TP10") + "KV cache pool is full. Retract requests. #retracted_reqs: 1, "
                                         "#new_tokens_gained: 646, #new_token_ratio: 0.0980 -> 0.3487",
             at.replace("DP9 TP9", "DP13 TP13") + "KV cache pool is full. Retract requests. #retracted_reqs: 3, "
                                                  "#new_token_ratio: 0.3397 -> 0.3530",
             at.replace("DP9 TP9", "DP15 TP15") + "KV cache pool is full. Retract requests."]
    log = read_log("\n".join(lines).encode())
    r = log.read
    assert r.engine == "sglang" and r.not_understood == 0 and r.other_lines == 0 and r.duplicates == 1
    got = [(x["lane"], x["retracted"], x.get("new_tokens_gained"), x.get("new_token_ratio")) for x in r.extra["retractions"]]
    assert got == [("DP9", 1, 646, [0.098, 0.3487]), ("DP13", 3, None, [0.3397, 0.353]), ("DP15", None, None, None)]
    assert "retractions (KV cache pool full): 3 lines, 4 requests sent back to the queue" in r.traits
    assert any(c.startswith("which requests were retracted") for c in r.cannot_say)
    ev = log.trace.events
    assert list(ev["kind"]) == ["preempt"] * 3 and list(ev["request"]) == [""] * 3
    assert list(ev["detail"]) == ["retracted 1 request; new-token ratio 0.098 -> 0.3487; DP9",
                                  "retracted 3 requests; new-token ratio 0.3397 -> 0.353; DP13", "retracted requests; DP15"]
    fig = gauges_figure(log.trace)
    assert fig.layout.meta["preempt_marks"] == 3 and fig.data[-1].name == "retraction (KV cache pool full)"
    # a log without such a line keeps the plain sentence
    assert "retraction (preemption) victims" in read_log("\n".join(batch).encode()).read.cannot_say


@pytest.mark.parametrize("lines, version", [
    (["INFO 10-17 09:00:01 api_server.py:528] vLLM API server version 0.6.3.post1",
      "INFO 10-17 09:00:02 llm_engine.py:237] Initializing an LLM engine (v0.6.3.post1) with config: model='m'"],
     "0.6.3.post1"),
    (["(EngineCore pid=9) INFO 12-04 19:11:45 [core.py:133] Initializing a V1 LLM engine (v0.11.0) with config: "
      "model='m'", "(EngineCore pid=9) INFO 12-04 19:12:45 [core.py:133] Initializing a V1 LLM engine (v0.12.0) "
      "with config: model='m'"], "0.11.0"),   # a restart's version is not followed, as its settings are not
    (["WARNING 12-04 19:11:45 [x.py:1] this will be removed in a future version 2"], None),
])
def test_the_vllm_version_its_start_up_lines_state(lines, version):
    stats = next(p for p in VLLM if p.name == "06_vllm_28926.log").read_text().splitlines()[0]
    r = read_log("\n".join([*lines, stats]).encode()).read
    assert r.engine == "vllm" and r.extra.get("vllm_version") == version
    assert any(t.startswith(f"vLLM {version} ") for t in r.traits) == (version is not None)
