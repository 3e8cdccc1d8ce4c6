"""Ollama's logs: a request per gin access line of an inference route (Go durations, journald
and docker prefixes, error statuses), its arrival the end less the handler's time, the requests
in flight rebuilt from them; other routes counted; the server's settings, version and runner
flags; a log that holds the llama.cpp runner's own lines says the llama-server page reads those.
Pasted lines: tests/fixtures/engine_logs/ollama/ (each with its source)."""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from figures.serverlog import gauges_figure, request_timeline
from servers.ollama_log.lines import duration_ms
from servers.server_log import read_log
from servers.server_log.detect import detect_text

ROOT = Path(__file__).resolve().parents[3]
FIX = ROOT / "tests" / "fixtures" / "engine_logs" / "ollama"


def gin(hms: str, status: int, dur: str, path: str = "/api/chat", method: str = "POST", day: str = "2024/08/19") -> str:
    return f'[GIN] {day} - {hms} | {status} | {dur:>13} |       127.0.0.1 | {method:<8} "{path}"'


SETUP = [
    '2024/08/19 14:09:56 routes.go:1123: INFO server config env="map[OLLAMA_DEBUG:false OLLAMA_KEEP_ALIVE:5m0s '
    'OLLAMA_MAX_LOADED_MODELS:0 OLLAMA_MAX_QUEUE:512 OLLAMA_NUM_PARALLEL:4 OLLAMA_ORIGINS:[http://localhost] OLLAMA_TMPDIR:]"',
    'time=2024-08-19T14:09:56.520+08:00 level=INFO source=routes.go:1170 msg="Listening on 127.0.0.1:11434 (version 0.3.5)"',
    'time=2024-08-19T14:10:00.000+08:00 level=INFO source=server.go:383 msg="starting llama server" cmd="/usr/lib/ollama/'
    'runners/cpu_avx2/ollama_llama_server --model /root/.ollama/models/blobs/sha256-ab --ctx-size 8192 --batch-size 512 '
    '--embedding --n-gpu-layers 33 --threads 8 --parallel 4 --port 40000"',
    'time=2024-08-19T14:10:02.100+08:00 level=INFO source=server.go:630 msg="llama runner started in 2.01 seconds"',
]


def read(lines):
    return read_log(("\n".join(lines) + "\n").encode(), "ollama.log")


def test_go_durations():
    assert [duration_ms(v) for v in ("29m59s", "1h2m3.5s", "4.709180529s", "6.2826ms", "414.019µs", "0s", "500ns",
                                     "30m0s")] == pytest.approx([1799000.0, 3723500.0, 4709.180529, 6.2826, 0.414019,
                                                                 0.0, 0.0005, 1800000.0], rel=1e-12)
    assert duration_ms("") is None and duration_ms("5 s") is None and duration_ms("fast") is None


def test_requests_their_times_and_the_in_flight_count():
    lines = SETUP + [gin("14:13:01", 200, "6.2826ms", "/api/tags", "GET"),
                     gin("14:13:05", 200, "4.5s"), gin("14:13:06", 200, "3.2s", "/v1/chat/completions"),
                     gin("14:13:09", 500, "1.25s", "/api/generate"), gin("14:13:10", 200, "0s", "/api/ps", "GET")]
    assert detect_text("\n".join(lines).encode()).engine == "ollama"
    log = read(lines)
    r = log.read
    assert r.engine == "ollama" and r.not_understood == 0 and r.warnings == []
    assert [q["path"] for q in r.requests] == ["/api/chat", "/v1/chat/completions", "/api/generate"]
    assert r.extra["other_route_lines"] == 2 and r.extra["ollama_version"] == "0.3.5"
    cfg = r.extra["server_config"]
    assert (cfg["OLLAMA_NUM_PARALLEL"], cfg["OLLAMA_MAX_QUEUE"], cfg["runner_parallel"], cfg["runner_ctx_size"]) == \
        (4, 512, 4, 8192)
    rq = log.trace.requests
    assert np.allclose(rq["finish_time"] - rq["arrival_time"], [4.5, 3.2, 1.25])
    assert rq["finish_reason"].tolist() == ["200 /api/chat", "200 /v1/chat/completions", "500 /api/generate"]
    c = log.trace.counters
    assert set(c["tenant"]) == {"in_flight"} and c["value"].max() == 2 and c["value"].iloc[-1] == 0
    ev = log.trace.events
    assert ev["kind"].tolist().count("cancel") == 1        # the 500
    fig = request_timeline(log.trace)
    assert fig.layout.meta["panels"] == ["latency"] and fig.layout.meta["requests"] == 3
    assert "in_flight" in gauges_figure(log.trace).layout.meta["gauges"]


def test_the_pasted_logs():
    j = read_log(FIX / "8387_journald_long_chats.log").read
    assert j.engine == "ollama" and len(j.requests) == 10 and j.not_understood == 0
    assert [q["handler_ms"] for q in j.requests[:4]] == [1799000.0, 1799000.0, 1799000.0, 1111000.0]
    assert all(q["status"] == 500 for q in j.requests) and "journald" in j.wrappers
    f = read_log(FIX / "5816_forbidden_and_tags.log").read
    assert len(f.requests) == 3 and f.extra["other_route_lines"] == 3
    assert {q["status"] for q in f.requests} == {403}


def test_damage_runner_lines_and_the_cli(tmp_path):
    lines = ['llama_model_loader: - kv   0:                       general.architecture str              = llama',
             gin("14:13:05", 200, "4.5s"), gin("14:13:06", 200, "soon"), gin("14:13:07", 200, "1s")[:40]]
    r = read(lines).read
    assert len(r.requests) == 1 and r.not_understood == 2
    assert any("llama-server log page" in w for w in r.warnings)
    p = tmp_path / "o.log"
    p.write_text("\n".join(gin(f"14:{m:02d}:00", 200, f"{m}.5s") for m in range(10, 40)) + "\n", encoding="utf-8")
    out = subprocess.run([sys.executable, "-m", "sim", "log", str(p), "--json"], cwd=ROOT, capture_output=True,
                         text=True, check=True).stdout
    got = json.loads(out, parse_constant=lambda c: (_ for _ in ()).throw(ValueError(c)))
    assert got["engine"] == "ollama" and len(got["requests"]) == 30 and got["requests"][0]["handler_ms"] == 10500.0
