"""Logs of 2024 llama-server builds (servers/llama_server/legacy.py, jsonlog.py).

The fixtures (tests/fixtures/llama-logs-2024/) are real c392e5094 runs rewritten line by line into
the 2024 formats by tests/fixtures/llama-logs/make_2024.py; the other variants here are made from
them in the test (no -v, older field names, mixed forms, garbage, tool prefixes). Every check
holds the 2024 reading to the original run: its own log, read by the reader, and its manifest.
"""
from __future__ import annotations

import functools
import gzip
import importlib.util
import io
import json
import math
import random
import subprocess
import sys
from collections import Counter
from pathlib import Path

import pytest

from servers.llama_server import read_llama_log, summary
from servers.llama_server.jsonlog import parse_record
from servers.llama_server.legacy import classify

ROOT = Path(__file__).resolve().parents[3]
FIX = ROOT / "tests" / "fixtures" / "llama-logs"
OLD = FIX / "c392e5094"
Y2024 = ROOT / "tests" / "fixtures" / "llama-logs-2024"
TEXT = ("s6_stream_cancel_seed603", "text")
JSON = ("s4_small_ctx_context_shift_default_on", "json")
EARLY = ("s2_np4_mixed_staggered_seed2201", "early")
CASES = [TEXT, JSON, EARLY]
EPOCH = 1717200000


def fixture(case) -> Path:
    return Y2024 / f"{case[0]}.{case[1]}.log.gz"


def lines_of(case) -> list[str]:
    return gzip.decompress(fixture(case).read_bytes()).decode("utf-8").split("\n")


@functools.lru_cache(maxsize=None)
def original(name: str):
    return read_llama_log(OLD / f"{name}.log")


@functools.lru_cache(maxsize=None)
def read24(case):
    return read_llama_log(fixture(case))


def counts(trace) -> dict:
    """task -> (slot, processed prompt, cached, generated)."""
    return {t["task"]: (t["slot"], t["prompt_tokens"], t["cached_tokens"], t["generated_tokens"])
            for t in summary(trace)["tasks"]}


def cancelled(trace) -> set:
    return {t["task"] for t in summary(trace)["tasks"] if t["finish"] == "cancelled"}


def test_the_fixtures_are_what_the_generator_writes():
    spec = importlib.util.spec_from_file_location("make_2024", FIX / "make_2024.py")
    gen = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(gen)
    assert [tuple(j) for j in gen.JOBS] == CASES
    for case in CASES:
        src = (OLD / f"{case[0]}.log").read_text(encoding="utf-8", errors="replace").split("\n")[:-1]
        assert "\n".join(gen.rewrite(src, case[1])) + "\n" == "\n".join(lines_of(case))


@pytest.mark.parametrize("case", CASES, ids=[c[1] for c in CASES])
def test_every_task_comes_back_on_its_slot_with_its_counts(case):
    trace, orig = read24(case), original(case[0])
    assert counts(trace) == counts(orig)
    assert len(counts(trace)) >= 5
    # and as the client saw it: every answered request is a task on its slot with its counts
    man = json.loads((OLD / f"{case[0]}.json").read_text())
    seen = Counter((s, p, g) for s, p, _, g in counts(trace).values())
    want = Counter((r["response"]["id_slot"], r["response"]["timings"]["prompt_n"],
                    r["response"]["timings"]["predicted_n"]) for r in man["requests"]
                   if r.get("response") and "timings" in r["response"] and "id_slot" in r["response"])
    assert want and not want - seen


@pytest.mark.parametrize("case", [TEXT, JSON], ids=["text", "json"])
def test_batches_come_back_from_the_verbose_lines(case):
    trace, orig = read24(case), original(case[0])
    assert len(trace.steps) == len(orig.steps) > 100
    assert trace.steps["num_tokens"].tolist() == orig.steps["num_tokens"].tolist()
    cols = ["step", "request", "slot", "kind", "tokens", "computed_before"]
    assert trace.batch[cols].values.tolist() == orig.batch[cols].values.tolist()
    assert trace.meta["batches_checked_against_log"] == len(orig.steps) and trace.meta["batch_mismatches"] == 0
    assert "decoding batch" in trace.meta["batch_format"]
    for k in ("n_slots", "n_ctx", "n_batch", "n_ubatch", "build"):
        assert trace.meta[k] == orig.meta[k]


def test_the_early_format_has_no_batches_and_says_so():
    trace = read24(EARLY)
    assert len(trace.steps) == 0 and len(trace.batch) == 0
    assert trace.meta["batch_format"] is None
    assert any("no per-batch lines" in x for x in trace.meta["format_limits"])
    assert any("matched to the release lines in the order" in x for x in trace.meta["format_limits"])
    assert "early-2024" in trace.meta["log_format"]


@pytest.mark.parametrize("case", [TEXT, JSON], ids=["text", "json"])
def test_finish_reasons_where_the_format_tells_them(case):
    trace, orig = read24(case), original(case[0])
    got = {t["task"]: t["finish"] for t in summary(trace)["tasks"]}
    for t in summary(orig)["tasks"]:
        # a 2024 build logs no cancellation: the task just ends, reason unknown (and meta says so)
        assert got[t["task"]] == ("unknown" if t["finish"] == "cancelled" else t["finish"])
    if cancelled(orig):
        assert any("cancelled" in x for x in trace.meta["format_limits"])


@pytest.mark.parametrize("case", [TEXT, JSON], ids=["text", "json"])
def test_the_timestamps_are_the_clock(case):
    trace, orig = read24(case), original(case[0])
    m = trace.meta
    assert m["time_unit"] == "ms" and m["time_resolution_ms"] == 1000 and str(EPOCH) in m["time_origin"]
    sec = lambda v: 1000.0 * math.floor(v / 1000.0)  # noqa: E731  (the rewrite's timestamps: whole seconds)
    assert trace.steps["start"].tolist() == [sec(v) for v in orig.steps["start"]]
    a = trace.requests.set_index("task")
    b = orig.requests.set_index("task")
    for task in b.index:
        assert a.loc[task, "first_token_time"] == sec(b.loc[task, "first_token_time"])
        # `slot released` comes at the start of the next iteration: the same second or the next
        assert 0 <= a.loc[task, "finish_time"] - sec(b.loc[task, "finish_time"]) <= 1000
    assert trace.steps["start"].max() > 1000


def test_the_early_format_has_no_clock():
    m = read24(EARLY).meta
    assert m["time_unit"] == "steps" and "time_resolution_ms" not in m


def test_without_verbose_lines_tasks_and_counts_remain():
    """A 2024 log made without -v (most of those pasted in bug reports): only the INFO lines."""
    info = [ln for ln in lines_of(TEXT) if not ln.startswith("VERB [")]
    trace, orig = read_llama_log("\n".join(info).encode()), original(TEXT[0])
    assert len(trace.steps) == 0
    got, want = counts(trace), counts(orig)
    assert set(got) == set(want)
    gone = cancelled(orig)
    assert gone
    for task, (slot, prompt, cached, gen) in want.items():
        if task in gone:   # no timings, no batches: neither count is stated
            assert got[task] == (slot, None, cached, None)
        else:
            assert got[task] == (slot, prompt, cached, gen)
    assert sorted(trace.meta["legacy_unsized_tasks"]) == sorted(gone)
    assert any("no per-batch lines" in x for x in trace.meta["format_limits"])


def test_older_field_names_and_sorted_keys():
    """Builds of about February to April 2024: `slot_id` / `task_id`, keys sorted."""
    names = {"id_slot": "slot_id", "id_task": "task_id"}
    out = []
    for ln in lines_of(JSON):
        if ln.startswith("{"):
            d = json.loads(ln)
            ln = json.dumps({names.get(k, k): v for k, v in d.items()}, sort_keys=True)
        out.append(ln)
    trace = read_llama_log(out)
    assert counts(trace) == counts(read24(JSON))
    assert trace.steps["num_tokens"].tolist() == read24(JSON).steps["num_tokens"].tolist()


def _as_json(line: str) -> str:
    rec = parse_record(line)
    d = {"timestamp": rec.ts, "level": rec.level, "function": rec.function, "line": 0, "msg": rec.msg, **rec.extra}
    return json.dumps(d, ensure_ascii=False)


def test_a_mixed_file_with_garbage_still_reads():
    """Both forms in one file, a tool's prefix on some lines, and junk between the lines."""
    rng = random.Random(19)
    junk = [
        b"\x00\xff\xfe garbage \x01",
        b'{"tid":"1","timestamp":17,"level":"INFO","function":"x","msg":"slot released","id_slot":',   # cut
        b"INFO [            update_slots] slot released",   # no fields: no ids
        b"INFO [   launch_slot_with_task] something else | tid=\"1\" timestamp=1 id_slot=0 id_task=99",
        b'time=2024-06-01T00:00:00.000Z level=INFO source=server.go:1 msg="llama runner started"',
        b"[1717200001] slot 0 : kv cache rm - [",
        b"x" * 5000,
        b'{"level": "INFO", "msg": [1, 2], "function": "main"}',
        b"[" * 20000 + b"]" * 20000,
        b"{" + b'"a":{' * 3000 + b"}" * 3001,
        # hostile values: no count or id is negative, a float, huge or NaN; the record is dropped
        b'INFO [            update_slots] kv cache rm [p0, end) | tid="1" timestamp=1717200000 id_slot=-1 id_task=0 p0=5',
        b'INFO [            update_slots] kv cache rm [p0, end) | tid="1" timestamp=1717200000 id_slot=0 id_task=0 p0=1e300',
        b'INFO [            update_slots] kv cache rm [p0, end) | tid="1" timestamp=1717200000 id_slot=0 id_task=0 p0=NaN',
        b'{"level":"INFO","msg":"slot released","id_slot":0,"id_task":0,"n_past":1e400,"timestamp":1717200000}',
        b'{"level":"INFO","msg":"decoding batch","n_tokens":99999999999999999999,"timestamp":99999999999}',
    ]
    out = []
    for i, ln in enumerate(lines_of(TEXT)):
        if ln.startswith(("INFO [", "VERB [", "WARN [", " ERR [")):
            if i % 3 == 0:
                ln = _as_json(ln)
            if i % 5 == 0:
                ln = f"2024-06-01T00:00:{i % 60:02d}.123456789Z " + ln   # docker logs -t
        out.append(ln.encode("utf-8"))
        if rng.random() < 0.2:
            out.append(rng.choice(junk))
    trace = read_llama_log(b"\n".join(out))
    clean = read24(TEXT)
    assert counts(trace) == counts(clean)
    assert trace.steps["num_tokens"].tolist() == clean.steps["num_tokens"].tolist()
    assert trace.steps["start"].tolist() == clean.steps["start"].tolist()   # the far-future timestamp is not used
    assert trace.meta["unparsed_lines"] == 0
    assert {"text", "json"} <= set(trace.meta["log_forms"])


def test_a_log_appended_to_after_an_upgrade():
    """A 2024 build's log, then the same file's lines of a 2025 build: two server runs, all tasks."""
    first = gzip.decompress(fixture(TEXT).read_bytes())
    later = (OLD / "s5_prompt_cache_reuse.log").read_bytes()
    trace = read_llama_log(first + later)
    assert trace.meta["runs"] == 2
    assert len(trace.steps) == len(read24(TEXT).steps) + len(original("s5_prompt_cache_reuse").steps)
    got = [(t["slot"], t["prompt_tokens"], t["generated_tokens"]) for t in summary(trace)["tasks"]]
    want = [(t["slot"], t["prompt_tokens"], t["generated_tokens"])
            for tr in (read24(TEXT), original("s5_prompt_cache_reuse")) for t in summary(tr)["tasks"]]
    assert got == want


@pytest.mark.parametrize("kind", ["path", "bytes", "gzip bytes", "str", "binary stream", "text stream", "lines",
                                  "iterator"])
def test_every_kind_of_input(kind):
    path = fixture(TEXT)
    raw = gzip.decompress(path.read_bytes())
    text = raw.decode("utf-8")
    source = {"path": lambda: path, "bytes": lambda: raw, "gzip bytes": lambda: path.read_bytes(),
              "str": lambda: text, "binary stream": lambda: io.BytesIO(raw),
              "text stream": lambda: io.StringIO(text), "lines": lambda: text.split("\n"),
              "iterator": lambda: iter(text.split("\n"))}[kind]()
    assert counts(read_llama_log(source)) == counts(read24(TEXT))


def test_later_builds_are_not_taken_for_2024_ones():
    for log in [OLD / "s1_two_slots_chunked_prompt.log", FIX / "34af94cd9" / "s7_chat_and_completion_endpoints.log"]:
        head = log.read_bytes()[:256 << 10].split(b"\n")
        assert classify(head) is None
        # one 2024-looking line among them changes nothing
        assert classify(head[:50] + [b'INFO [ main] build info | tid="1" timestamp=1'] + head[50:]) is None
    assert classify(lines_of(TEXT)[:1000]) == {"text": classify(lines_of(TEXT)[:1000])["text"]}
    assert classify(lines_of(EARLY))["early"] > 10


def test_the_cli_reads_a_2024_log():
    out = subprocess.run([sys.executable, "-m", "sim", "llamalog", str(fixture(TEXT)), "--json"], cwd=ROOT,
                         capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    got = json.loads(out.stdout)
    want = summary(read24(TEXT))
    assert got["batches"] == want["batches"] == len(original(TEXT[0]).steps)
    assert [(t["task"], t["slot"], t["prompt_tokens"], t["generated_tokens"]) for t in got["tasks"]] == \
        [(t["task"], t["slot"], t["prompt_tokens"], t["generated_tokens"]) for t in want["tasks"]]


def test_a_zip_bomb_in_a_2024_format_stops_at_the_cap(monkeypatch):
    """A gzip whose first lines look like a 2024 log, unzipping past the cap: read up to it, said plainly."""
    import gzip as _gzip

    from servers.llama_server import legacy
    head = b'INFO [              main] HTTP server listening | tid="1" timestamp=1717000000 port="8080"\n'
    monkeypatch.setattr(legacy, "MAX_UNZIPPED_BYTES", 200_000)
    data = _gzip.compress(head * 10 + b"\n" * 5_000_000)
    tr = read_llama_log(data)
    assert any("GiB of text" in w for w in tr.meta["warnings"])
