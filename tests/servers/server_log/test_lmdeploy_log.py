"""LMDeploy's logs: its stats line in each era (July 2025's vLLM-shaped one, told apart from
vLLM's; 2026's `Avg thr (in/out)` with API server / Server and Engine counts), the SpecDecoding
line, the PyTorch engine's DEBUG forward lines and TurboMind's [Forward] mini-batches as steps,
each request's start and end, the engine's settings; the pastes in
tests/fixtures/engine_logs/lmdeploy/ (each with its source)."""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np

from figures.serverlog import batch_timeline, gauges_figure
from servers.server_log import read_log
from servers.server_log.detect import detect_text
from lmdeploy_lines import py, served_log

ROOT = Path(__file__).resolve().parents[3]
FIX = ROOT / "tests" / "fixtures" / "engine_logs" / "lmdeploy"


STATS_2025 = ("[2025-09-01 10:00:{s:02d} DP0] Avg prompt throughput: 500.0 tokens/s, Avg generation throughput: 100.0 "
              "tokens/s, Finished: 3 reqs, Unfinished: 2 reqs, Running: 2 reqs, Waiting: 1 reqs, GPU KV cache usage: 5.5%, "
              "Prefix cache hit rate: 12.5%")
STATS_FEB = ("[2026-02-05 17:05:{s:02d} DP0] Avg thr (in/out): 4618.5 / 2756.3 tokens/s, API server "
             "(completed/routed/waiting): 1 / 50 / 50, Engine (running/waiting): 45 / 5, KV cache: 21.6%, ")
STATS_NOW = ("[2026-06-01 09:00:{s:02d} DP1] Avg thr (in/out): 10.0 / 20.0 tokens/s, Server "
             "(succeeded/failed/routed/waiting): 7 / 1 / 3 / 0, Engine (running/waiting): 3 / 0, KV cache: 40.0%, "
             "Prefix cache hit rate: 33.3%, Avg MM preprocess: 0.120 s/req, SpecDecoding metrics: Draft acceptance "
             "rate: 71.20%, Mean acceptance length: 2.42, Accepted: 171 tokens, Drafted: 240 tokens, Per-position "
             "acceptance rate: 0.812, 0.612")


def read(lines):
    return read_log(("\n".join(lines) + "\n").encode(), "lmdeploy.log")


def test_each_stats_era_and_the_spec_line():
    lines = [STATS_2025.format(s=0), "SpecDecoding metrics: Draft acceptance rate: 50.00%, Mean acceptance length: "
             "2.00, Accepted: 10 tokens, Drafted: 20 tokens, Per-position acceptance rate: 0.500",
             STATS_2025.format(s=10), STATS_FEB.format(s=5), STATS_NOW.format(s=7)]
    # the July 2025 line has vLLM's words: it is LMDeploy's by its `[date time DPn]` head
    assert detect_text((STATS_2025.format(s=0) + "\n").encode()).engine == "lmdeploy"
    log = read(lines)
    r = log.read
    assert r.engine == "lmdeploy" and r.not_understood == 0 and len(r.stats) == 4
    old, _, feb, now = r.stats
    assert (old["running"], old["waiting"], old["finished"], old["unfinished"]) == (2, 1, 3, 2)
    assert old["kv_usage"] == 0.055 and old["prefix_cache_hit_rate"] == 0.125 and old["engine"] == "DP0"
    assert (feb["running"], feb["waiting"], feb["completed"], feb["api_routed"], feb["api_waiting"]) == (45, 5, 1, 50, 50)
    assert feb["prompt_throughput"] == 4618.5 and feb["kv_usage"] == 0.216
    assert (now["succeeded"], now["failed"], now["engine"], now["mm_preprocess_s"]) == (7, 1, "DP1", 0.12)
    assert now["prefix_cache_hit_rate"] == 0.333
    assert [s["draft_acceptance_rate"] for s in r.spec_decoding] == [50.0, 71.2]
    assert r.lanes == ["DP0", "DP1"]
    gauges = gauges_figure(log.trace).layout.meta
    assert {"running", "waiting", "kv_usage", "prefix_cache_hit_rate"} <= set(gauges["gauges"])
    cut = read([STATS_FEB.format(s=5)[:90], STATS_NOW.format(s=9).replace("KV cache: 40.0%", "KV cache: full")]).read
    assert cut.stats == [] and cut.not_understood == 2


def test_forward_lines_are_steps_and_requests_have_their_lengths():
    lines = [
        py(10.001, "input backend=pytorch, backend_config=PytorchEngineConfig(dtype='auto', tp=1, dp=1, session_len=None, "
             "max_batch_size=128, cache_max_entry_count=0.8, block_size=64, num_gpu_blocks=0, max_prefill_token_num=8192, "
             "enable_prefix_caching=True)", file="async_engine.py:130"),
        py(12.170, "session=1, history_tokens=0, input_tokens=790, max_new_tokens=2048, seq_start=True, seq_end=True, "
             "step=0, prep=True"),
        py(12.213, "Sending forward inputs: num_tokens=790, batch_size=1, is_decoding=False, has_vision=False",
           "DEBUG", "engine.py:274"),
        py(12.262, "Sending forward inputs: num_tokens=1, batch_size=1, is_decoding=True", "DEBUG", "engine.py:274"),
        py(12.300, "session=2, input_tokens=50, max_new_tokens=16, prep=True"),
        py(12.310, "Sending forward inputs: num_tokens=50, batch_size=1, is_decoding=False, has_vision=False",
           "DEBUG", "engine.py:274"),
        py(12.330, "Sending forward inputs: num_tokens=2, batch_size=2, is_decoding=True, has_vision=False",
           "DEBUG", "engine.py:274"),
        py(14.0, 'session 2 finished, reason "length", input_tokens 50, output_tokens 16', file="async_engine.py:779"),
        py(22.0, 'session 1 finished, reason "stop", input_tokens 790, output_tokens 120', file="async_engine.py:779"),
    ]
    log = read(lines)
    r = log.read
    assert r.engine == "lmdeploy" and r.not_understood == 0
    assert r.extra["server_config"]["max_batch_size"] == 128 and r.extra["server_config"]["enable_prefix_caching"] is True
    s = log.trace.steps
    assert s["kind"].tolist() == ["prefill", "decode", "prefill", "decode"]
    assert s["prefill_tokens"].tolist() == [790, 0, 50, 0] and s["decode_tokens"].tolist() == [0, 1, 0, 2]
    assert np.allclose(s["start"].to_numpy(), [0.043, 0.092, 0.14, 0.16])    # to the millisecond
    rq = log.trace.requests.set_index("request")
    assert rq.loc["1", "prompt_len"] == 790 and rq.loc["1", "output_tokens"] == 120
    assert abs(rq.loc["2", "finish_time"] - rq.loc["2", "arrival_time"] - 1.7) < 1e-9
    fig = batch_timeline(log.trace).layout.meta
    assert fig["batches"] == 4 and fig["prefill"] == 2 and fig["decode"] == 2


def test_the_pasted_turbomind_logs():
    r = read_log(FIX / "2709_turbomind_long_prompts.log").read
    assert r.engine == "lmdeploy" and r.not_understood == 0
    assert [(b["prefill_tokens"], b["decode_tokens"], b["batch_size"]) for b in r.batches] == [(205, 0, 1), (8191, 1, 2)]
    started = [q for q in r.requests if q["kind"] == "received"]
    assert [(q["request"], q["prompt_tokens"], q["max_tokens"]) for q in started] == \
        [("6", 85709, 2000), ("7", 76861, 2000), ("8", 84015, 2000)]
    d = read_log(FIX / "1788_damaged_forward.log").read
    assert d.not_understood == 1 and d.batches == [] and len(d.requests) == 2
    assert "cut before its head" in d.not_understood_examples[0]["why"]


def test_vllm_and_sglang_logs_stay_theirs_and_the_cli_json_is_strict(tmp_path):
    vllm = ("INFO 12-06 07:01:02 [loggers.py:200] Engine 000: Avg prompt throughput: 1.0 tokens/s, Avg generation "
            "throughput: 2.0 tokens/s, Running: 1 reqs, Waiting: 0 reqs, GPU KV cache usage: 1.0%, Prefix cache hit "
            "rate: 0.0%")
    assert detect_text((vllm + "\n").encode()).engine == "vllm"
    sglang = ("[2025-09-03 18:33:18 DP0 TP0] Prefill batch, #new-seq: 1, #new-token: 103, #cached-token: 1, token usage: "
              "0.00, #running-req: 0, #queue-req: 0")
    assert detect_text((sglang + "\n").encode()).engine == "sglang"
    p = tmp_path / "lm.log"
    p.write_text("\n".join(STATS_FEB.format(s=i) for i in range(0, 60, 10)) + "\n", encoding="utf-8")
    out = subprocess.run([sys.executable, "-m", "sim", "log", str(p), "--json"], cwd=ROOT, capture_output=True,
                         text=True, check=True).stdout
    j = json.loads(out, parse_constant=lambda c: (_ for _ in ()).throw(ValueError(c)))
    assert j["engine"] == "lmdeploy" and len(j["stats"]) == 6 and j["stats_interval_s"] == 10.0


def test_a_log_with_request_lines_is_re_simulated():
    from servers.server_log.resim import resimulate
    log = read(served_log())
    res = resimulate(log.read)
    imp = res.implied
    assert not imp.why and res.trace is not None and len(imp.workload.requests) == 40
    assert [r.prompt_len for r in imp.workload.requests[:3]] == [100, 107, 114]
    assert [r.max_tokens for r in imp.workload.requests[:3]] == [20, 21, 22]     # the finished lines' outputs
    assert any("time to the next forward line" in a for a in imp.assumed)
    assert any("30 ms per step" in a and "forward lines" in a for a in imp.assumed)     # the forwards' 30-ms period
    assert set(res.compare["gauge"]) >= {"running", "waiting", "kv_usage"}
    assert res.preemptions["log"] is None and "LMDeploy" in res.preemptions["log_is"]
    done = res.trace.requests["finish_time"].notna().sum()
    assert done == 40
