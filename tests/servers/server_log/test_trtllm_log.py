"""TensorRT-LLM's logs: the PyTorch executor's iteration line (`print_iter_log`) in each form its
builds print (early 2025's elapsed_time, PR 3914's num_scheduled_requests, PR 6906's host and
device step times, 2026's kv_cache_util / cached_kv_tokens / attention-DP dummies), the Triton
backend's iteration JSON, the start-up settings, TP ranks that repeat rank 0 and attention-DP
ranks that schedule their own, damage. Pasted lines: tests/fixtures/engine_logs/trtllm/ (each
with its source)."""
from __future__ import annotations

import gzip
import json
import subprocess
import sys
from pathlib import Path

import numpy as np

from figures.serverlog import records_table, step_timeline, verdict_table
from servers.server_log import read_log
from servers.server_log.detect import detect_text
from trtllm_lines import line

ROOT = Path(__file__).resolve().parents[3]
FIX = ROOT / "tests" / "fixtures" / "engine_logs" / "trtllm"


def read(lines, name="trt.log"):
    return read_log(("\n".join(lines) + "\n").encode(), name)


def test_every_form_is_one_step_with_its_counts():
    lines = [
        line(1, form="2025a", ctx=(1, 13694), host=45810.2, fetched=(0, 1)),
        line(2, form="2025a", ctx=(2, 200), gen=1, sched=3, fetched=(0, 3), sec=1),
        line(3, form="2025b", gen=16, sched=10, host=5.5, dev="40.25ms", fetched=(0, 3), sec=1),
        line(4, form="2025b", ctx=(1, 512), gen=10, sched=11, host=30.0, dev="5.0ms", fetched=(0, 4), sec=2),
        line(5, form="2026", gen=11, sched=11, kv=0.125, cached=63821, host=6.0, dev="28.5ms", fetched=(0, 4), sec=2,
             tags=" [RANK 0]"),
    ]
    assert detect_text("\n".join(lines).encode()).engine == "trtllm"
    log = read(lines)
    r = log.read
    assert r.engine == "trtllm" and r.not_understood == 0 and r.warnings == []
    assert [b["iteration"] for b in r.batches] == [1, 2, 3, 4, 5] and r.lanes == ["rank 0"]
    one, two, three, four, five = r.batches
    assert (one["context_requests"], one["context_tokens"], one["generation_tokens"]) == (1, 13694, 0)
    assert "generation_requests" not in one          # no batch size printed before PR 3914
    assert one["elapsed_ms"] == 45810.2 and abs(two["elapsed_ms"] - 10.0) < 1e-9     # elapsed_time in seconds
    assert two["generation_requests"] == 1 and three["generation_requests"] == 10   # 16 tokens: 6 CUDA-graph padding
    # prev_device_step_time is the pass before: it lands on that step
    assert (two["device_ms"], three["device_ms"], four["device_ms"]) == (40.25, 5.0, 28.5)
    assert "device_ms" not in one and "device_ms" not in five
    assert five["kv_usage"] == 0.125 and five["cached_tokens"] == 63821 and five["dummy_context_tokens"] == 0
    s = log.trace.steps
    assert s["prefill_tokens"].tolist() == [13694, 200, 0, 512, 0]
    assert s["decode_tokens"].tolist() == [0, 1, 16, 10, 11]
    assert s["num_seqs"].tolist() == [1, 3, 10, 11, 11]     # context + generation requests (padding not counted)
    assert s["arrived"].tolist() == [0, 2, 0, 1, 0]          # the rise of the fetched count
    assert s["generation_requests"].isna().tolist() == [True, False, False, False, False]
    assert np.isnan(s["kv_usage"].to_numpy()[:4]).all() and s["kv_usage"].tolist()[4] == 0.125
    assert s["device_ms"].tolist()[1:4] == [40.25, 5.0, 28.5]
    assert log.trace.meta["source"] == "trtllm-log" and log.trace.meta["engine"] == "trtllm"
    fig = step_timeline(log.trace)
    assert fig.layout.meta["steps"] == 5 and fig.layout.meta["prefill_tokens"] == 14406
    hover = fig.data[1].customdata.tolist()
    assert hover[0] == "?" and hover[2] == "10"        # unknown generation requests shown as such
    assert "TensorRT-LLM iteration" in fig.data[0].hovertext[0]
    assert any(d.name == "step time (GPU)" for d in fig.data)
    assert "iteration" in " ".join(verdict_table(r.to_json())["value"]) and len(records_table(r.to_json())) == 5


def test_the_pasted_lines_read():
    """PR 3914's two lines (before and after it), the Triton backend's JSON hard-wrapped as pasted,
    and start-up lines of both backends."""
    r = read_log(FIX / "3914_iter_lines.log").read
    assert r.not_understood == 0 and len(r.batches) == 2
    assert [b.get("generation_requests") for b in r.batches] == [None, 10]
    assert r.batches[0]["generation_tokens"] == 16 and r.batches[0]["elapsed_ms"] == 5.060911178588867
    t = read_log(FIX / "217_triton_iteration.log").read
    assert t.not_understood == 0 and t.rejoined >= 1 and len(t.batches) == 1
    b = t.batches[0]
    assert (b["iteration"], b["context_requests"], b["context_tokens"], b["generation_requests"]) == (0, 1, 2048, 0)
    assert b["kv_blocks"] == 1 and abs(b["kv_usage"] - 1 / 513) < 1e-6 and b["time"] == "2023-12-18 03:35:37"
    assert t.era.startswith("Triton backend")
    cpp = read_log(FIX / "4028_startup.log").read
    assert cpp.engine == "trtllm" and cpp.batches == []
    assert cpp.extra["server_config"] == {"capacity_scheduler_policy": "GUARANTEED_NO_EVICT",
                                          "context_chunking_policy": "None", "max_batch_size": 64, "max_beam_width": 1,
                                          "max_input_len": 383, "max_num_sequences": 64, "max_num_tokens": 384,
                                          "max_seq_len": 384}
    assert cpp.warnings == ["no TensorRT-LLM iteration line could be read"]
    assert any("print_iter_log" in w for w in cpp.would_tell_more)
    pool = read_log(FIX / "150_kv_pool.log").read
    assert pool.extra["server_config"] == {"kv_cache_tokens": 3731744, "kv_primary_blocks": 116617,
                                           "kv_secondary_blocks": 0, "tokens_per_block": 32}


def test_tensor_parallel_copies_are_duplicates_and_attention_dp_ranks_are_lanes():
    tp = []
    for i in range(1, 41):
        for rank in (0, 1):       # TLLM_PROFILE_LOG_RANKS=all under TP: both ranks print the same batch
            tp.append(line(i, rank=rank, gen=8, sched=8, sec=i // 10, host=9.0 + rank))
    r = read(tp).read
    assert r.lanes == ["rank 0"] and len(r.batches) == 40 and r.duplicates == 40
    assert r.extra["copied_ranks"] == {"rank 1": "rank 0"}
    adp = []
    for i in range(1, 41):
        adp.append(line(i, rank=0, gen=8, sched=8, sec=i // 10))
        adp.append(line(i, rank=1, gen=3 + i % 5, ctx=(i % 2, 100 * (i % 2)), sched=3 + i % 5 + i % 2, sec=i // 10))
    a = read(adp).read
    assert a.lanes == ["rank 0", "rank 1"] and len(a.batches) == 80 and a.duplicates == 0
    assert any("attention DP" in x for x in a.traits)
    steps = read(adp).trace.steps
    assert sorted(set(steps["lane"])) == ["rank 0", "rank 1"]
    twice = read(tp[::2] + tp[::2]).read      # a log collected twice: each line kept once
    assert len(twice.batches) == 40 and twice.duplicates == 40


def test_damage_is_counted_never_guessed():
    ok = line(7, gen=4, sched=4, sec=3)
    lines = [
        ok[:90],                                                         # cut in the head's fields
        line(8, gen=4, sched=4, sec=3).replace("'num_generation_tokens': 4", "'num_generation_tokens': x"),
        line(9, gen=4, sched=4, sec=3).replace("host_step_time = 10.0ms", "host_step_time = fastms"),
        line(10, gen=4, sched=4, sec=3, form="2026", kv=1.5),             # a share past 1
        line(11, gen=10**30, sched=4, sec=3),                              # past any count
        line(12, gen=4, sched=4, sec=3).replace("timestamp = 2025-08-20 10:00:03", "timestamp = <script>x</script>"),
        ok,
    ]
    r = read(lines).read
    assert [b["iteration"] for b in r.batches] == [7] and r.not_understood == 6
    assert all(e["why"] == "incomplete record (cut or damaged line)" for e in r.not_understood_examples)
    # a line wrapped by a terminal is joined again
    long = line(13, ctx=(1, 96), gen=4, sched=5, sec=4)
    w = read([long[:100], long[100:], line(14, gen=5, sched=5, sec=4)]).read
    assert [b["iteration"] for b in w.batches] == [13, 14] and w.not_understood == 0 and w.rejoined == 1


def test_other_engines_are_not_taken_for_it_and_gzip_reads():
    vllm = ("INFO 12-06 07:01:02 [loggers.py:200] Engine 000: Avg prompt throughput: 1.0 tokens/s, Avg generation "
            "throughput: 2.0 tokens/s, Running: 1 reqs, Waiting: 0 reqs, GPU KV cache usage: 1.0%, Prefix cache hit "
            "rate: 0.0%")
    assert detect_text((vllm + "\n").encode()).engine == "vllm"
    lines = [line(i, gen=2, sched=2, sec=i) for i in range(1, 6)]
    z = read_log(gzip.compress(("\n".join(lines) + "\n").encode(), mtime=0), "x.bin")
    assert z.engine == "trtllm" and len(z.read.batches) == 5


def test_the_cli_prints_strict_json_and_says_why_it_cannot_resimulate(tmp_path):
    p = tmp_path / "trt.log"
    p.write_text("\n".join(line(i, ctx=(i % 2, 64 * (i % 2)), gen=3, sched=3 + i % 2, sec=i, fetched=(0, i))
                           for i in range(1, 21)) + "\n")
    out = subprocess.run([sys.executable, "-m", "sim", "log", str(p), "--json"], cwd=ROOT, capture_output=True,
                         text=True, check=True).stdout
    j = json.loads(out, parse_constant=lambda c: (_ for _ in ()).throw(ValueError(c)))
    assert j["engine"] == "trtllm" and len(j["batches"]) == 20 and j["not_understood"]["count"] == 0
    assert j["batches"][1]["context_tokens"] == 0 and j["batches"][0]["context_tokens"] == 64
    r = subprocess.run([sys.executable, "-m", "sim", "log", str(p), "--resimulate"], cwd=ROOT, capture_output=True,
                       text=True)
    assert r.returncode == 1 and "names no request" in r.stdout
