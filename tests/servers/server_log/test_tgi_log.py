"""text-generation-inference's logs: a request per router `Success` line (text, JSON, coloured,
wrapped), its arrival, first batch and end from the router's own times, the generated tokens
they imply, running and waiting rebuilt from them; errors, refusals for load, prefix-cache
allocations, the launcher's settings; pasted lines in tests/fixtures/engine_logs/tgi/."""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from figures.serverlog import records_table, request_timeline, verdict_table
from servers.server_log import read_log
from servers.server_log.detect import detect_text
from servers.tgi_log.lines import duration_ms
from tgi_lines import stamp, success

ROOT = Path(__file__).resolve().parents[3]
FIX = ROOT / "tests" / "fixtures" / "engine_logs" / "tgi"
ARGS_OLD = ('2023-08-22T18:35:50.966384Z  INFO text_generation_launcher: Args { model_id: "meta-llama/Llama-2-13b-chat-hf", '
            "revision: None, sharded: None, num_shard: None, quantize: None, dtype: None, trust_remote_code: false, "
            "max_concurrent_requests: 128, max_best_of: 2, max_stop_sequences: 4, max_input_length: 4096, "
            "max_total_tokens: 8192, waiting_served_ratio: 1.2, max_batch_prefill_tokens: 4096, max_batch_total_tokens: "
            '16000, max_waiting_tokens: 20, hostname: "831e9d857f4c", port: 80 }')
ARGS_NEW = ["2025-05-01T01:30:40.111111Z  INFO text_generation_launcher: Args {", '    model_id: "Qwen/Qwen2.5-7B",',
            "    max_concurrent_requests: 128,", "    max_input_tokens: None,", "    max_total_tokens: Some(",
            "        4096,", "    ),", "    waiting_served_ratio: 0.3,", "    max_batch_prefill_tokens: Some(4096),",
            "    max_waiting_tokens: 20,", "    max_batch_size: None,", "}"]


def read(lines, name="tgi.log"):
    return read_log(("\n".join(lines) + "\n").encode(), name)


def test_a_request_per_success_line_and_what_its_times_imply():
    lines = [ARGS_OLD,
             success(1.0, total=400.0, validation=2.0, queue=50.0, tokens=20),
             success(1.2, total=900.0, validation=1.0, queue=300.0, tokens=40, route="generate_stream", max_new=64),
             success(2.0, total=500.0, validation=0.5, queue=0.02, tokens=10, route="chat_completions")]
    assert detect_text("\n".join(lines).encode()).engine == "tgi"
    log = read(lines)
    r = log.read
    assert r.engine == "tgi" and r.not_understood == 0 and r.warnings == []
    ok = [q for q in r.requests if q["kind"] == "success"]
    assert [q["route"] for q in ok] == ["generate", "generate_stream", "chat_completions"]
    first = ok[0]
    assert (first["total_ms"], first["validation_ms"], first["queue_ms"]) == (400.0, 2.0, 50.0)
    assert abs(first["inference_ms"] - 348.0) < 1e-9 and first["output_tokens"] == 20 and first["max_new_tokens"] == 512
    assert ok[1]["max_new_tokens"] == 64 and "max_new_tokens" not in ok[2]     # chat's span prints no parameters
    assert r.extra["server_config"]["max_batch_total_tokens"] == 16000
    assert r.extra["server_config"]["waiting_served_ratio"] == 1.2
    assert "microseconds" in r.clock
    rq = log.trace.requests
    arrive = rq["arrival_time"].to_numpy()
    end = rq["finish_time"].to_numpy()
    assert np.allclose(end - arrive, [0.4, 0.9, 0.5])
    assert np.allclose(rq["first_scheduled_time"].to_numpy() - arrive, [0.052, 0.301, 0.00052])
    assert rq["output_tokens"].tolist() == [20, 40, 10]
    # rebuilt gauges: request 2 waits from 0.301 s to 0.601 s (origin = the first line's time) while 1 runs
    c = log.trace.counters
    run = c[c["tenant"] == "running"]
    assert run["value"].max() == 2 and run["value"].iloc[-1] == 0
    wait = c[c["tenant"] == "waiting"]
    assert wait["value"].max() == 1 and wait["value"].iloc[-1] == 0 and (wait["value"] >= 0).all()
    ev = log.trace.events
    assert sorted(set(ev["kind"])) == ["arrive", "finish", "schedule"] and len(ev) == 9
    fig = request_timeline(log.trace)
    assert fig.layout.meta["requests"] == 3 and len(fig.data[0].x) == 3
    assert np.allclose(sorted(fig.data[0].y), [0.52, 50.0 + 2.0, 301.0], atol=1e-6)
    assert "request" in " ".join(verdict_table(r.to_json())["value"]) and len(records_table(r.to_json())) == 3


def test_every_duration_unit_and_the_json_and_coloured_forms():
    assert [duration_ms(v) for v in ("1.5s", "12ms", "754.5µs", "754.5μs", "789ns", "161s", "3us")] == \
        pytest.approx([1500.0, 12.0, 0.7545, 0.7545, 0.000789, 161000.0, 0.003], rel=1e-12)
    assert duration_ms("12 ms") is None and duration_ms("fast") is None and duration_ms("1e400s") is None
    j = success(3.0, total=200.0, validation=1.0, queue=9.0, tokens=5, json_form=True)
    colour = ("\x1b[2m" + stamp(4.0) + "\x1b[0m \x1b[32m INFO\x1b[0m \x1b[1mgenerate\x1b[0m{\x1b[3mtotal_time\x1b[0m"
              '\x1b[2m=\x1b[0m"100ms" \x1b[3mvalidation_time\x1b[0m\x1b[2m=\x1b[0m"1ms" \x1b[3mqueue_time\x1b[0m\x1b[2m=\x1b[0m'
              '"9ms" \x1b[3minference_time\x1b[0m\x1b[2m=\x1b[0m"90ms" \x1b[3mtime_per_token\x1b[0m\x1b[2m=\x1b[0m"9ms" '
              '\x1b[3mseed\x1b[0m\x1b[2m=\x1b[0m"None"}\x1b[2m:\x1b[0m \x1b[2mtext_generation_router::server\x1b[0m'
              "\x1b[2m:\x1b[0m \x1b[2mrouter/src/server.rs\x1b[0m\x1b[2m:\x1b[0m\x1b[2m432:\x1b[0m Success")
    r = read([j, colour]).read
    assert r.not_understood == 0 and [q["route"] for q in r.requests] == ["generate", "generate"]
    assert r.requests[0]["max_new_tokens"] == 512 and r.requests[0]["output_tokens"] == 5
    assert r.requests[1]["output_tokens"] == 10 and "ANSI colour codes" in r.wrappers
    wrapped = success(5.0, total=300.0, validation=1.0, queue=2.0, tokens=3)
    w = read([wrapped[:120], wrapped[120:300], wrapped[300:], success(6.0, total=10.0, validation=1.0, queue=1.0,
                                                                      tokens=1)]).read
    assert len(w.requests) == 2 and w.not_understood == 0 and w.rejoined == 1    # one record rejoined


def test_errors_refusals_allocations_and_the_pretty_printed_args():
    lines = ARGS_NEW + [
        stamp(0.5) + " ERROR generate_stream{parameters=GenerateParameters { best_of: Some(1), grammar: None }}:"
        "async_stream:generate_stream: text_generation_router::infer: router/src/infer.rs:130: no permits available",
        stamp(0.6) + " ERROR chat_completions{total_time=\"1ms\"}: text_generation_router::infer: "
        "router/src/infer/mod.rs:102: `inputs` tokens + `max_new_tokens` must be <= 2048. Given: 4375 `inputs` tokens",
        stamp(0.7) + "  INFO text_generation_router_v3::radix: backends/v3/src/radix.rs:108: Prefix 580 - Suffix 1023",
        success(1.0, total=100.0, validation=1.0, queue=1.0, tokens=4),
    ]
    log = read(lines)
    r = log.read
    cfg = r.extra["server_config"]
    assert (cfg["max_total_tokens"], cfg["max_batch_prefill_tokens"], cfg["waiting_served_ratio"]) == (4096, 4096, 0.3)
    assert cfg["max_input_tokens"] is None and cfg["model_id"] == "Qwen/Qwen2.5-7B"
    assert r.extra["errors"] == {"count": 2, "rejected": 1}
    assert r.extra["allocations"]["rows"] == [[len(ARGS_NEW) + 3, 0.2, 580, 1023]]
    hit = log.trace.counters[log.trace.counters["tenant"] == "prefix_cache_hit_rate"]
    assert hit["value"].round(6).tolist() == [round(580 / 1603, 6)] and hit["time"].tolist() == [0.2]
    kinds = log.trace.events["kind"].tolist()
    assert kinds.count("reject") == 1 and kinds.count("cancel") == 1
    assert any("refused for load" in t for t in r.traits)


def test_idle_spans_and_the_pasted_logs():
    lines = [success(1.0, total=500.0, validation=1.0, queue=1.0, tokens=5),
             success(20.0, total=500.0, validation=1.0, queue=1.0, tokens=5)]
    r = read(lines).read
    assert len(r.gaps) == 1 and abs(r.gaps[0][0] - 0.0) < 1e-6 and abs(r.gaps[0][1] - 18.5) < 1e-6
    tei = read_log(FIX / "305_tei_embed.log").read      # an embeddings server: said, not misread
    assert tei.requests == [] and "text-embeddings-inference" in tei.warnings[0]
    cw = read_log(FIX / "1763_cloudwatch.log")
    assert cw.engine == "tgi" and cw.read.warnings == ["no text-generation-inference request line could be read"]
    dbg = read_log(FIX / "3203_debug_input.log").read
    assert dbg.engine == "tgi" and dbg.not_understood == 0 and dbg.requests == []


def test_damage_is_counted_never_guessed_and_the_cli_json_is_strict(tmp_path):
    good = success(2.0, total=100.0, validation=1.0, queue=1.0, tokens=4)
    lines = [good[:200],                                                      # cut mid-span
             good.replace('queue_time="1ms"', 'queue_time="soon"'),
             good.replace('time_per_token="24.5ms"', 'time_per_token="<script>x</script>"'),
             good]
    r = read(lines).read
    assert len(r.requests) == 1 and r.not_understood == 3
    p = tmp_path / "tgi.log"
    p.write_text("\n".join(success(i, total=100.0 + i, validation=1.0, queue=float(i), tokens=3 + i)
                           for i in range(1, 31)) + "\n", encoding="utf-8")
    out = subprocess.run([sys.executable, "-m", "sim", "log", str(p), "--json", "-o", str(tmp_path / "t.trace")],
                         cwd=ROOT, capture_output=True, text=True, check=True).stdout
    j = json.loads(out, parse_constant=lambda c: (_ for _ in ()).throw(ValueError(c)))
    assert j["engine"] == "tgi" and len(j["requests"]) == 30 and j["requests"][4]["output_tokens"] == 8
    assert (tmp_path / "t.trace").stat().st_size > 0
