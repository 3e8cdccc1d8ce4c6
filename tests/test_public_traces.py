"""Public request traces as workloads (sim/public_traces.py): Azure, BurstGPT and Mooncake files
read by content, their arrivals on the cost model's ms clock, Mooncake's hash ids as shared
prompt prefixes the prefix cache finds, the CLI on each, and plain messages for other files."""
from __future__ import annotations

import csv
import gzip
import io
import json
import subprocess
import sys
from datetime import datetime
from pathlib import Path

import numpy as np
import pytest

from sim import public_traces as pt
from sim.cost import cost_from_preset
from sim.inputs import parse_workload
from sim.limits import FORMATS, UnknownFormat
from sim.metrics import summary
from sim.simulate import simulate
from sim.trace import Trace
from sim.workload import PROMPT_BLOCK_TOKENS, Request, Workload

ROOT = Path(__file__).resolve().parents[1]
FIX = ROOT / "tests" / "fixtures" / "public_traces"
AZURE, BURST, MOON = (tuple((FIX / n).read_bytes() for n in ("azure_conv.csv", "burstgpt.csv", "mooncake.jsonl")))


def rows(data: bytes) -> list[dict]:
    return list(csv.DictReader(io.StringIO(data.decode())))


def mooncake_lines() -> list[dict]:
    return [json.loads(line) for line in MOON.decode().splitlines()]


def test_the_fixtures_are_what_their_generator_writes():
    sys.path.insert(0, str(FIX))
    try:
        from make_fixtures import FIXTURES
    finally:
        sys.path.remove(str(FIX))
    for name, make in FIXTURES.items():
        assert make() == (FIX / name).read_bytes(), name


@pytest.mark.parametrize("data,kind,wrong_name", [(AZURE, pt.AZURE, "conv.jsonl"), (BURST, pt.BURSTGPT, "b.json"),
                                                  (MOON, pt.MOONCAKE, "mooncake.csv")])
def test_each_format_is_recognised_by_content_whatever_its_name(data, kind, wrong_name):
    assert pt.sniff(data) == kind
    wl = parse_workload(data, wrong_name)
    assert isinstance(wl, pt.TraceWorkload) and wl.source["format"] == kind and wl.name == wrong_name
    gz = parse_workload(gzip.compress(data, mtime=0), wrong_name + ".gz")
    assert gz.to_json() == wl.to_json()
    bom = parse_workload(b"\xef\xbb\xbf" + data, wrong_name)   # a spreadsheet's byte-order mark
    assert bom.to_json() == wl.to_json()


def test_azure_rows_become_requests_with_ms_arrivals_from_the_first_row():
    file_rows = rows(AZURE)

    def ticks(stamp: str) -> int:   # 100 ns ticks, without pandas
        day, frac = stamp.split(".")
        return int(datetime.strptime(day, "%Y-%m-%d %H:%M:%S").timestamp()) * 10**7 + int(frac.ljust(7, "0"))
    t0 = ticks(file_rows[0]["TIMESTAMP"])
    wl = parse_workload(AZURE, "a.csv")
    by_id = {r.id: r for r in wl.requests}
    kept = [(i, r) for i, r in enumerate(file_rows) if int(r["GeneratedTokens"]) > 0]
    assert len(wl.requests) == len(kept) == len(file_rows) - 2
    assert wl.source["left_out"] == {"with 0 generated tokens": 2}
    for i, r in kept:
        req = by_id[f"r{i:04d}"]
        assert (req.prompt_len, req.max_tokens) == (int(r["ContextTokens"]), int(r["GeneratedTokens"]))
        assert req.arrival_time == pytest.approx((ticks(r["TIMESTAMP"]) - t0) / 1e4, abs=1e-6)
    assert wl.requests[0].arrival_time == 0.0 and wl.config == {}


def test_burstgpt_failures_are_left_out_and_models_become_tenants():
    file_rows = rows(BURST)
    wl = parse_workload(BURST, "b.csv")
    failed = [r for r in file_rows if r["Response tokens"] == "0"]
    assert len(failed) == 3 and wl.source["left_out"] == {"failed requests (0 response tokens)": 3}
    ok = [r for r in file_rows if r["Response tokens"] != "0"]
    assert [(q.prompt_len, q.max_tokens, q.tenant) for q in wl.requests] == \
        [(int(r["Request tokens"]), int(r["Response tokens"]), r["Model"]) for r in ok]
    t0 = float(ok[0]["Timestamp"])
    assert [q.arrival_time for q in wl.requests] == [(float(r["Timestamp"]) - t0) * 1000 for r in ok]
    assert {q.tenant for q in wl.requests} == {"ChatGPT", "GPT-4"}


def test_a_later_burstgpt_file_with_session_columns_reads_the_same():
    file_rows = rows(BURST)
    out = io.StringIO()
    w = csv.writer(out, lineterminator="\n")
    w.writerow(["Timestamp", "Session ID", "Elapsed time", "Model", "Request tokens", "Response tokens",
                "Total tokens", "Log Type"])
    for i, r in enumerate(file_rows):
        w.writerow([r["Timestamp"], f"s{i % 7}", "1.5", r["Model"], r["Request tokens"], r["Response tokens"],
                    r["Total tokens"], r["Log Type"]])
    assert parse_workload(out.getvalue().encode()).to_json() == parse_workload(BURST).to_json()


def test_mooncake_hash_ids_become_shared_prompt_prefixes():
    lines = mooncake_lines()
    wl = parse_workload(MOON, "m.jsonl")
    assert wl.config == {"enable_prefix_caching": True}
    assert [r.prompt_blocks for r in wl.requests] == [tuple(d["hash_ids"]) for d in lines]
    assert [(r.prompt_len, r.max_tokens, r.arrival_time) for r in wl.requests] == \
        [(d["input_length"], d["output_length"], float(d["timestamp"] - lines[0]["timestamp"])) for d in lines]
    toks = [r.prompt_tokens() for r in wl.requests]
    assert [len(t) for t in toks] == [d["input_length"] for d in lines]
    bs = PROMPT_BLOCK_TOKENS
    pairs = 0
    for a in range(len(lines)):
        for b in range(a):
            ha, hb = lines[a]["hash_ids"], lines[b]["hash_ids"]
            common = next((k for k, (x, y) in enumerate(zip(ha, hb)) if x != y), min(len(ha), len(hb)))
            n = min(common * bs, len(toks[a]), len(toks[b]))
            assert toks[a][:n] == toks[b][:n]   # equal ids, equal tokens
            if common < min(len(ha), len(hb)):   # the first differing block differs from its first token
                k = common * bs
                assert toks[a][k:k + 2] != toks[b][k:k + 2]
            pairs += common > 1
    assert pairs > 10   # the fixture has real reuse beyond the shared first block


def test_a_prompt_longer_than_its_blocks_gets_its_own_tokens_past_them():
    r1 = Request("a", 700, 1, prompt_blocks=(5,))
    r2 = Request("b", 700, 1, prompt_blocks=(5,))
    t1, t2 = r1.prompt_tokens(), r2.prompt_tokens()
    assert t1[:512] == t2[:512] and t1[512:] != t2[512:] and len(t1) == 700
    assert Request.from_json(r1.to_json()) == r1   # prompt_blocks round-trip through the workload JSON
    assert Request.from_json({"id": "c", "max_tokens": 1, "prompt_blocks": [1, 2]}).prompt_len == 2 * 512


def _run(wl, **config):
    return simulate(wl, config, cost=cost_from_preset(pt.DEFAULT_COST))


def test_cached_prompt_tokens_come_from_the_traces_shared_prefixes():
    wl = parse_workload(MOON)
    on, off = summary(_run(wl)), summary(_run(wl, enable_prefix_caching=False))
    assert off["cached_prompt_tokens"] == 0
    # at most what the hash ids share with an earlier request (a hit needs the block computed and kept)
    lines = mooncake_lines()
    bound = 0
    for a, d in enumerate(lines):
        best = max((next((k for k, (x, y) in enumerate(zip(d["hash_ids"], e["hash_ids"])) if x != y),
                         min(len(d["hash_ids"]), len(e["hash_ids"]))) for e in lines[:a]), default=0)
        bound += min(best * PROMPT_BLOCK_TOKENS, d["input_length"] - 1)
    assert 0.5 * bound < on["cached_prompt_tokens"] <= bound
    assert on["ttft_mean"] < off["ttft_mean"]   # cached prompt is prefill skipped
    # a trace with no reuse finds nothing cached even with the cache on
    assert summary(_run(parse_workload(AZURE), enable_prefix_caching=True))["cached_prompt_tokens"] == 0


def test_limit_and_rate_scale():
    full = parse_workload(BURST)
    wl = parse_workload(BURST, limit=10, rate_scale=4.0)
    assert [r.id for r in wl.requests] == [r.id for r in full.requests[:10]]
    assert [r.arrival_time for r in wl.requests] == [r.arrival_time / 4 for r in full.requests[:10]]
    assert wl.source["requests"] == 10 and wl.source["rows"] == 80 and wl.source["rate_scale"] == 4.0
    assert "the first 10 by arrival" in pt.describe(wl.source) and "4x as fast" in pt.describe(wl.source)
    for bad in ({"rate_scale": 0.0}, {"rate_scale": float("nan")}, {"limit": 0}):
        with pytest.raises(ValueError, match="rate_scale|limit"):
            parse_workload(BURST, **bad)


def test_unsorted_rows_arrive_in_time_order_from_the_earliest():
    lines = MOON.decode().splitlines()
    wl = parse_workload(("\n".join(lines[5:] + lines[:5]) + "\n").encode())
    assert min(r.arrival_time for r in wl.requests) == 0.0
    assert [r.arrival_time for r in wl.requests] == sorted(r.arrival_time for r in wl.requests)


@pytest.mark.parametrize("data,message", [
    (b"", "empty"),
    (b"\x00\xff\xfe\x01", "not UTF-8"),
    (b"time,prompt,output\n1,2,3\n", "columns 'time', 'prompt', 'output'"),
    (b'{"ts": 1, "in": 2}\n{"ts": 2, "in": 3}\n', "not a Mooncake trace's"),
    (b"hello world", "none of the formats read here"),
    (gzip.compress(b"x,y\n1,2\n", mtime=0), "none of the formats read here"),
    (gzip.compress(AZURE, mtime=0)[:200], "cut short"),
    (b"\x1f\x8bnot gzip at all", "does not unzip"),
    (b"TIMESTAMP,ContextTokens,GeneratedTokens\n", "no rows"),
    (b"TIMESTAMP,ContextTokens,GeneratedTokens\n2023-11-16 18:15:46.6805900,12,3\n"
     b"2023-11-16 18:15:47.0000000,many,3\n", "row 2: ContextTokens is 'many', not a whole number"),
    (b"TIMESTAMP,ContextTokens,GeneratedTokens\n2023-11-16 18:15:46.6805900,12,-3\n", "row 1: GeneratedTokens is"),
    (b"TIMESTAMP,ContextTokens,GeneratedTokens\nyesterday,12,3\n", "TIMESTAMP is 'yesterday', not a date"),
    (b"Timestamp,Model,Request tokens,Response tokens\n1,ChatGPT,5,2\nsoon,ChatGPT,5,2\n",
     "row 2: Timestamp is 'soon', not a number"),
    (b"Timestamp,Model,Request tokens,Response tokens\n1,ChatGPT,5,0\n", "none of the trace's 1 rows"),
    (b"Timestamp,Model,Request tokens,Response tokens\n1,ChatGPT,5.5,2\n", "Request tokens is '5.5'"),
    (b"Timestamp,Model,Request tokens,Response tokens\n1,ChatGPT,99999999999,2\n", "from 0 to 10,000,000"),
    (b'{"timestamp": 0, "input_length": 5, "output_length": 2, "hash_ids": [0]}\n'
     b'{"timestamp": 1, "input_length": "five", "output_length": 2, "hash_ids": [0]}\n', "line 2: input_length is"),
    (b'{"timestamp": 0, "input_length": 5, "output_length": 2, "hash_ids": [0]}\nnot json\n', "not a JSON object"),
    (b'{"timestamp": 0, "input_length": 5, "output_length": 2, "hash_ids": [-1]}\n', "hash id is negative"),
])
def test_other_files_get_a_plain_message(data, message):
    with pytest.raises(ValueError) as e:
        parse_workload(data, "x")
    assert message in str(e.value), str(e.value)
    assert "\n" not in str(e.value) and len(str(e.value)) <= 200, str(e.value)   # one short line
    if "none of the formats" in message or "empty" in message or "UTF-8" in message or "Mooncake" in message:
        # it names the formats; what each looks like the page shows under it, and `sim run --help`
        assert isinstance(e.value, UnknownFormat), type(e.value)
        assert all(f in str(e.value) for f in ("workload JSON", "Azure", "BurstGPT", "Mooncake")), str(e.value)
        assert any("TIMESTAMP,ContextTokens,GeneratedTokens" in what for _, what in FORMATS)
        assert any("hash_ids" in what for _, what in FORMATS)


def test_workload_json_still_reads_as_before():
    doc = {"config": {"max_num_seqs": 2}, "requests": [{"id": "x", "prompt_len": 4, "max_tokens": 2}]}
    wl = parse_workload(json.dumps(doc).encode(), "w.json")
    assert type(wl) is Workload and wl.config == {"max_num_seqs": 2}
    assert parse_workload(gzip.compress(json.dumps(doc).encode()), "w.json.gz").to_json() == wl.to_json()


def test_reading_reports_progress_piece_by_piece(monkeypatch):
    monkeypatch.setattr(pt, "PIECE_BYTES", 512)   # the fixture's 3 KB in pieces
    seen = []
    small = parse_workload(AZURE, progress=lambda done, total: seen.append((done, total)))
    assert len(seen) >= 5 and seen[-1] == (len(AZURE), len(AZURE))
    assert [d for d, _ in seen] == sorted(d for d, _ in seen)
    monkeypatch.setattr(pt, "PIECE_BYTES", 8 << 20)
    assert small.to_json() == parse_workload(AZURE).to_json()   # pieces change nothing


def test_mooncake_pieces_keep_every_line_and_its_blocks(monkeypatch):
    whole = parse_workload(MOON).to_json()
    monkeypatch.setattr(pt, "PIECE_BYTES", 700)
    assert parse_workload(MOON).to_json() == whole


def test_the_pandas_fallback_reads_the_same(monkeypatch):
    fast = [parse_workload(d).to_json() for d in (AZURE, BURST, MOON)]
    monkeypatch.setattr(pt, "_engine", lambda: "c")
    assert [parse_workload(d).to_json() for d in (AZURE, BURST, MOON)] == fast


def _cli(*args, cwd=ROOT):
    return subprocess.run([sys.executable, "-m", "sim", "run", *map(str, args)], cwd=cwd, capture_output=True,
                          text=True, timeout=120)


@pytest.mark.parametrize("name,data,label", [("trace.json", AZURE, "Azure LLM inference trace"),
                                             ("trace.txt", BURST, "BurstGPT trace"),
                                             ("trace.csv", MOON, "Mooncake trace")])
def test_sim_run_reads_each_trace(tmp_path, name, data, label):
    f = tmp_path / name
    f.write_bytes(data)
    out = _cli(f, "-o", tmp_path / "run.trace", "--limit", "40")
    assert out.returncode == 0, out.stderr
    s = json.loads(out.stdout)
    assert s["requests"] == 40 and s["finished"] == 40 and s["time_unit"] == "ms"
    assert (s["cached_prompt_tokens"] > 0) == (label == "Mooncake trace")
    assert label in out.stderr and "cost model a100-8B-fp16" in out.stderr
    meta = Trace.load(tmp_path / "run.trace").meta
    assert meta["public_trace"]["label"] == label and meta["cost_model"]["name"] == "roofline"


def test_sim_run_is_deterministic_and_says_what_it_cannot_read(tmp_path):
    f = tmp_path / "m.jsonl"
    f.write_bytes(MOON)
    for i in (1, 2):
        run = _cli(f, "-o", tmp_path / f"{i}.trace", "--limit", "25", "--rate-scale", "2", "--cost", "h100-70B")
        assert run.returncode == 0, run.stderr
    assert (tmp_path / "1.trace").read_bytes() == (tmp_path / "2.trace").read_bytes()
    assert Trace.load(tmp_path / "1.trace").meta["cost_model"]["hardware"]["name"] == "H100 SXM"
    bad = tmp_path / "bad.csv"
    bad.write_bytes(b"when,in,out\n1,2,3\n")
    out = _cli(bad)
    assert out.returncode != 0 and "Traceback" not in out.stderr
    assert "none of the formats read here" in out.stderr and "Mooncake" in out.stderr


def test_same_file_same_requests_every_time():
    for data in (AZURE, BURST, MOON):
        a, b = parse_workload(data), parse_workload(bytes(data))
        assert a.dumps() == b.dumps()
    ta, tb = _run(parse_workload(MOON)), _run(parse_workload(MOON))
    assert np.array_equal(ta.requests["cached_tokens"].to_numpy(), tb.requests["cached_tokens"].to_numpy())
