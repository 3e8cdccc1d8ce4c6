"""Bad input for the server-log reader: never a traceback; one plain sentence, or a partial read
with a count. And the command line (`python -m sim log`, `llamalog` kept)."""
from __future__ import annotations

import gzip
import json
import os
import random
import subprocess
import sys
import zlib

import pytest

from engine_variants import FIXTURES, ROOT, SGLANG, VLLM
from servers.server_log import read_log, text

LINE = ("[2025-09-03 18:33:18 TP0] Prefill batch. #new-seq: 1, #new-token: 103, #cached-token: 1, token usage: 0.00, "
        "#running-req: 0, #queue-req: 0, ")


def refusal(data) -> str:
    with pytest.raises(ValueError) as e:
        read_log(data)
    msg = str(e.value)
    assert "\n" not in msg and len(msg) <= 200
    return msg


def test_binary_empty_and_other_programs_are_refused_in_one_line():
    assert "binary" in refusal(random.Random(1).randbytes(200_000))
    assert "empty" in refusal(b"")
    assert "none of their" in refusal(b"GET / HTTP/1.1\nHost: x\n" * 100)
    assert "none of their" in refusal((ROOT / "README.md").read_bytes())


def test_damaged_and_truncated_gzip_is_a_partial_read():
    data = gzip.compress((LINE + "\n").encode() * 5000, mtime=0)
    r = read_log(data[: len(data) // 2]).read
    assert r.engine == "sglang" and 0 < len(r.batches) < 5000 and not r.complete
    assert any("gzip" in w for w in r.warnings)


def test_a_gzip_bomb_stops_at_the_limit(monkeypatch):
    monkeypatch.setattr(text, "MAX_BYTES", 8 << 20)
    bomb = zlib.compressobj(9, zlib.DEFLATED, 31)
    body = bomb.compress((LINE + "\n").encode() * 2000) + bomb.compress(b"\n" * (64 << 20)) + bomb.flush()
    r = read_log(body).read
    assert len(r.batches) == 2000 and not r.complete
    assert any("only the first 8 MB" in w for w in r.warnings)


def test_huge_lines_are_cut_not_kept():
    data = (LINE + "\n" + "x" * (10 << 20) + "\n" + LINE.replace("18:33:18", "18:33:19") + "\n").encode()
    r = read_log(data).read
    assert len(r.batches) == 2 and any("longer than 64 KB" in w for w in r.warnings)
    huge_record = ("[2025-09-03 18:33:18 TP0] Prefill batch. " + "#x: 1, " * 200_000 + "\n").encode()
    r = read_log(huge_record + (LINE + "\n").encode()).read
    assert r.not_understood == 1 and len(r.not_understood_examples[0]["text"]) <= 300


def test_html_and_javascript_in_fields_stay_text():
    evil = LINE.replace("#queue-req: 0, ", "#queue-req: 0, note: <script>alert(1)</script>, ")
    r = read_log((evil + "\n").encode()).read
    assert r.batches[0]["other"] == {"note": "<script>alert(1)</script>"}
    bad = LINE.replace("#new-token: 103", "#new-token: <img src=x onerror=alert(1)>")
    r = read_log((bad + "\n").encode()).read
    assert r.not_understood == 1 and "<img" in r.not_understood_examples[0]["text"]


def test_nul_bytes_and_invalid_utf8():
    data = (LINE + "\n").encode() + b"\xff\xfe\x00garbage\x00\n" + (LINE.replace(":18 ", ":19 ") + "\n").encode()
    r = read_log(data).read
    assert len(r.batches) == 2 and any("NUL" in w for w in r.warnings)


def run_cli(*args):
    return subprocess.run([sys.executable, "-m", "sim", *args], cwd=ROOT, capture_output=True, text=True, timeout=120,
                          env={**os.environ, "PYTHONPATH": str(ROOT)})


def test_cli_json_is_strict_and_deterministic(tmp_path):
    path = FIXTURES / "sglang" / "13_sgl-kernel-npu_608.log"
    a, b = run_cli("log", str(path), "--json"), run_cli("log", str(path), "--json")
    assert a.returncode == 0 and a.stdout == b.stdout
    doc = json.loads(a.stdout, parse_constant=lambda c: pytest.fail(f"not strict JSON: {c}"))
    assert doc["engine"] == "sglang" and len(doc["batches"]) == 4 and doc["not_understood"]["count"] == 0
    assert {"kind", "time", "new_seqs", "new_tokens", "cached_tokens", "running", "waiting", "kv_usage",
            "throughput"} <= set(doc["batches"][0])
    out = tmp_path / "x.trace"
    assert run_cli("log", str(VLLM[0]), "-o", str(out)).returncode == 0
    from sim.trace import Trace
    tr = Trace.load(str(out))
    assert tr.meta["engine"] == "vllm" and set(tr.counters["tenant"]) >= {"running", "waiting", "kv_usage"}
    first = out.read_bytes()
    run_cli("log", str(VLLM[0]), "-o", str(out))
    assert out.read_bytes() == first


def test_cli_any_name_gzip_and_llama_alias(tmp_path):
    odd = tmp_path / "no_extension"
    odd.write_bytes(gzip.compress(SGLANG[1].read_bytes(), mtime=0))
    r = run_cli("log", str(odd), "--json")
    assert r.returncode == 0 and json.loads(r.stdout)["engine"] == "sglang"
    llama = ROOT / "samples" / "llama-logs" / "s6_stream_cancel_seed601.34af94cd9.log.gz"
    a, b = run_cli("log", str(llama), "--json"), run_cli("llamalog", str(llama), "--json")
    assert a.returncode == b.returncode == 0
    da, db = json.loads(a.stdout), json.loads(b.stdout)
    assert da["engine"] == "llama-server" and {k: v for k, v in da.items() if k not in ("engine", "era")} == db
    bad = tmp_path / "bin.log"
    bad.write_bytes(random.Random(2).randbytes(10_000))
    r = run_cli("log", str(bad))
    assert r.returncode != 0 and "Traceback" not in r.stderr and len(r.stderr.strip()) <= 200
