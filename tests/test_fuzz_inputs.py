"""Seeded mutants of the project's own inputs (tests/fuzz_inputs.py: truncated, bytes flipped,
lines dropped / duplicated / swapped, numbers made huge / negative / NaN / text, a value's type
changed, BOM, UTF-16, CRLF, gzip cut or damaged) fed to every CLI command (sim.__main__.main, in
process) and to the readers the pages use: no exception but the plain refusal, every refusal one
line of at most 200 characters without a Python repr, every --json output strict JSON, and no run
past the watchdog. A modest, fixed number of mutants per kind of input; a wider sweep:

    .venv/bin/python tests/fuzz_inputs.py --seed 7 --n 100 --files 4 --save /tmp/fuzz

Below them, one test per crash such a sweep found, on an input built to hit it."""
from __future__ import annotations

import gzip
import json
import math
from pathlib import Path

import pytest

from fuzz_inputs import SOURCES, base_input, bad_refusal, mutants, run_one
from sim.__main__ import main as sim_main

ROOT = Path(__file__).resolve().parents[1]
SEED = 20261204
# mutants per kind of input (each fed to 2-5 targets): ~15 s of CPU in all (the file: 25-50 s on the
# shared 2-core machine)
PER_KIND = {"recording": 12, "fleet": 4, "llama": 8, "server_log": 40, "workload": 24, "public_trace": 24,
            "trace": 20, "fleet_trace": 12, "args": 12}


@pytest.mark.filterwarnings("error::RuntimeWarning")   # numpy's warnings reach a user's terminal: a crash here
@pytest.mark.parametrize("kind", list(PER_KIND))
def test_mutants_of_every_input_run_or_are_refused_in_one_plain_line(kind, tmp_path):
    files = SOURCES[kind]
    problems = []
    for i, path in enumerate(files):
        n = PER_KIND[kind] // len(files) + (i < PER_KIND[kind] % len(files))
        for label, data in mutants(base_input(kind, path), SEED + i, n):
            d = tmp_path / f"{i}-{label.replace('#', '-').replace('+', '-')}"
            d.mkdir()
            problems += run_one(kind, path, data, label, d, slow_s=30, hang_s=60)
    assert not problems, "\n".join(map(str, problems))


# --------------------------------------------------------------------------------------------
# The crashes a sweep found, one input each
# --------------------------------------------------------------------------------------------

def _lines(path: Path) -> list[bytes]:
    return gzip.decompress(path.read_bytes()).split(b"\n")


def _cli(tmp_path, monkeypatch, capsys, *argv) -> tuple[object, str]:
    monkeypatch.chdir(tmp_path)
    try:
        rc = sim_main(list(argv))
    except SystemExit as e:
        rc = e.code
    return rc, capsys.readouterr().out


def test_a_recording_line_whose_kind_is_a_list_is_skipped_not_a_crash(tmp_path, monkeypatch, capsys):
    # "kind": ["step"] made a TypeError (unhashable) in the reader's line dispatch
    from servers.vllm.recording import read_recording
    lines = _lines(ROOT / "samples/vllm/priority.jsonl.gz")
    doc = json.loads(lines[2])
    lines[2] = json.dumps({**doc, "kind": [doc["kind"]]}).encode()
    data = b"\n".join(lines)
    rec = read_recording(data)
    assert any("skipped" in w for w in rec.warnings), rec.warnings
    (tmp_path / "r.jsonl").write_bytes(data)
    rc, out = _cli(tmp_path, monkeypatch, capsys, "vllm", "r.jsonl", "--json")
    assert rc == 0 and json.loads(out)["warnings"]


@pytest.fixture
def simulator_stops(monkeypatch):
    """The re-simulation of a recording stops early (simulate's RuntimeError, as its step cap and
    "no progress for 1000 steps" raise it): a sweep met it on recordings with an add line written
    twice (now skipped by the reader, below)."""
    import servers.vllm.compare as compare
    real = compare.simulate
    monkeypatch.setattr(compare, "simulate", lambda wl, *a, **kw: real(wl, *a, **{**kw, "max_steps": 40}))


def test_a_recording_the_simulator_cannot_finish_is_a_verdict_not_a_crash(simulator_stops, tmp_path, monkeypatch,
                                                                           capsys):
    # simulate's RuntimeError came out of servers.vllm.compare.decisions: `sim vllm` and
    # `sim fleet --recordings` crashed, the Fleet page lost the whole fleet
    from servers.vllm.compare import decisions
    from servers.vllm.recording import read_recording
    data = (ROOT / "samples/vllm/fcfs_kv_pressure.jsonl.gz").read_bytes()
    v = decisions(read_recording(data))
    assert not v["equal"] and v["first_difference"]["step"] == 41 and v["simulated_steps"] == 40
    assert "step cap 40" in v["stopped"] and not bad_refusal(v["stopped"])
    (tmp_path / "r.jsonl.gz").write_bytes(data)
    rc, out = _cli(tmp_path, monkeypatch, capsys, "vllm", "r.jsonl.gz")
    assert rc == 0 and "simulator: decisions part at step 41" in out and "simulator stopped: step cap 40" in out
    fleet = ROOT / "samples/fleet/vllm-router-cache_aware"
    real = __import__("servers.vllm.fleet", fromlist=["read_fleet"]).read_fleet(
        [fleet / "rec-8101.jsonl.gz", fleet / "rec-8102.jsonl.gz"])
    assert all("step cap 40" in rep.decisions["stopped"] for rep in real.replicas)


def test_predicting_a_recording_the_simulator_cannot_finish_is_one_plain_line(simulator_stops, tmp_path,
                                                                              monkeypatch, capsys):
    # servers.vllm.compare.predict let simulate's RuntimeError out: `sim vllm --predict` crashed
    # and the vLLM server page stopped on the guard's "internal error"
    (tmp_path / "r.jsonl.gz").write_bytes((ROOT / "samples/vllm/fcfs_kv_pressure.jsonl.gz").read_bytes())
    rc, _ = _cli(tmp_path, monkeypatch, capsys, "vllm", "r.jsonl.gz", "--predict", "r.jsonl.gz")
    assert isinstance(rc, str) and "the simulator cannot run this recording's arrivals" in rc, rc
    assert not bad_refusal(rc, ["r.jsonl.gz"])


def test_a_recording_add_line_written_twice_is_skipped_and_said(tmp_path, monkeypatch, capsys):
    # the request came twice: the re-simulation could not hold both copies ("no progress for 1000
    # steps", a crash before the fix above) and the fleet refused the request as served twice
    from servers.vllm.compare import decisions
    from servers.vllm.recording import read_recording
    lines = _lines(ROOT / "samples/vllm/fcfs_kv_pressure.jsonl.gz")
    rec = read_recording(b"\n".join(lines[:2] + [lines[1]] + lines[2:]))
    assert any("add line repeats" in w for w in rec.warnings) and len(rec.adds) == 38
    assert decisions(rec)["equal"]
    fleet = ROOT / "samples/fleet/vllm-router-cache_aware"
    lines = _lines(fleet / "rec-8101.jsonl.gz")
    adds = [i for i, x in enumerate(lines) if x.startswith(b'{"kind":"add"')]
    k = adds[len(adds) // 2]
    (tmp_path / "a.jsonl").write_bytes(b"\n".join(lines[:k + 1] + [lines[k]] + lines[k + 1:]))
    (tmp_path / "b.jsonl.gz").write_bytes((fleet / "rec-8102.jsonl.gz").read_bytes())
    rc, out = _cli(tmp_path, monkeypatch, capsys, "fleet", "--recordings", "a.jsonl", "b.jsonl.gz", "--json")
    assert rc == 0 and any("add line repeats" in w for w in json.loads(out)["warnings"])


def test_a_llama_log_of_several_gzip_members_reads_to_its_end():
    # a member that ended inside a bounded decompress call left its tail in both unconsumed_tail
    # and unused_data, and servers.llama_server.blocks.gunzip_into fed the tail to the finished
    # member again and again: a loop without end, memory growing (`cat a.log.gz b.log.gz`)
    from servers.llama_server import read_llama_log, summary
    one = (ROOT / "samples/llama-logs/s3_no_cont_batching.34af94cd9.log.gz").read_bytes()
    n = summary(read_llama_log(one))["batches"]
    assert summary(read_llama_log(one + one))["batches"] == 2 * n
    tail = one + gzip.compress(b"", mtime=0) + b"\x1f\x8b"   # an empty member, then a cut one
    t = read_llama_log(tail)
    assert summary(t)["batches"] == n and any("ends early" in w for w in t.meta["warnings"])


def test_a_gzipped_trace_of_several_members_is_read_whole():
    # sim.public_traces.unzip read the first member and dropped the rest without a word
    from sim.inputs import parse_workload
    rows = (ROOT / "tests/fixtures/public_traces/azure_conv.csv").read_bytes().splitlines(keepends=True)
    half = len(rows) // 2
    whole = parse_workload(b"".join(rows), "t.csv")
    two = parse_workload(gzip.compress(b"".join(rows[:half]), mtime=0)
                         + gzip.compress(b"".join(rows[half:]), mtime=0), "t.csv.gz")
    assert len(two.requests) == len(whole.requests)
    with pytest.raises(ValueError, match="cut short"):
        parse_workload(gzip.compress(b"".join(rows), mtime=0) + b"\x1f\x8b", "t.csv.gz")


def test_an_infinite_count_in_a_trace_file_is_refused_not_cast_to_garbage():
    # Infinity in a nullable whole-number column was cast to int64's minimum without a word
    from sim.trace import Trace
    doc = json.loads(gzip.decompress((ROOT / "tests/fixtures/trace_v1/lesson_abc.trace").read_bytes()))
    t = doc["tables"]["requests"]
    t["data"][t["columns"].index("first_token_step")][0] = math.inf   # an Int64 column
    with pytest.raises(ValueError, match="not a trace file") as e:
        Trace.from_bytes(gzip.compress(json.dumps(doc).encode()))
    assert not bad_refusal(str(e.value))


def test_an_unknown_format_on_the_cli_is_one_line_of_200_besides_the_path(tmp_path, monkeypatch, capsys):
    # `sim run` wrapped the reader's sentence in the path and a hint: 229 characters on a CSV
    # whose lines end in CR alone
    (tmp_path / "in.csv").write_bytes(b"TIMESTAMP,ContextTokens,GeneratedTokens\r2023-11-16 18:15:46,374,44\r")
    rc, _ = _cli(tmp_path, monkeypatch, capsys, "run", "in.csv")
    assert "none of the formats read here" in rc and not bad_refusal(rc, ["in.csv"]), rc


@pytest.mark.parametrize("number", [b"9" * 170, b"9" * 5000, b"99999999999999999999"])
def test_a_server_log_count_of_absurd_digits_is_unknown_not_a_crash(number, tmp_path, monkeypatch, capsys):
    # an SGLang batch line's count of 170 digits overflowed the Trace's int64 columns
    from servers.server_log import read_log
    line = (b"[2025-11-11 04:28:02] Prefill batch, #new-seq: 17, #new-token: 4096, #cached-token: %s, "
            b"token usage: 0.03, #running-req: 0, #queue-req: 3\n")
    data = line % b"16" + line % number + line % b"5"
    log = read_log(data, "s.log")
    assert log.engine == "sglang" and len(log.read.batches) == 3
    assert [b.get("cached_tokens", b.get("#cached-token")) for b in log.read.batches][1] is None
    (tmp_path / "s.log").write_bytes(data)
    rc, out = _cli(tmp_path, monkeypatch, capsys, "log", "s.log", "--json", "-o", "s.trace")
    assert rc == 0 and json.loads(out)


@pytest.mark.parametrize("config,words", [
    ('{"cache_threshold": ' + "9" * 400 + "}", "from 0 to 2**53, not a number of about"),
    ('{"' + "x" * 500 + '": 1}', "has no setting 'xxx"),
    ('{"flavor": "' + "v" * 500 + '"}', "flavor is 500 characters long"),
])
def test_a_router_config_of_absurd_values_is_one_plain_line(config, words, tmp_path, monkeypatch, capsys):
    # a 400-digit threshold overflowed math.isfinite (OverflowError); values were shown by repr
    import shutil
    shutil.copy(ROOT / "tests/fixtures/vllm/lesson_abc_7blocks.workload.json", tmp_path / "w.json")
    rc, _ = _cli(tmp_path, monkeypatch, capsys, "fleet", "w.json", "--router", "cache_aware", "--router-config",
                 config, "--json")
    assert isinstance(rc, str) and words in rc and not bad_refusal(rc), rc


def test_a_grid_nested_past_the_recursion_limit_is_one_plain_line(tmp_path, monkeypatch, capsys):
    import shutil
    shutil.copy(ROOT / "tests/fixtures/vllm/lesson_abc_7blocks.workload.json", tmp_path / "w.json")
    rc, _ = _cli(tmp_path, monkeypatch, capsys, "search", "w.json", "--grid", "[" * 200_000, "-o", "o.csv")
    assert isinstance(rc, str) and "too deep" in rc and not bad_refusal(rc), rc   # was a RecursionError


def test_a_recording_step_line_written_twice_is_skipped_and_said(tmp_path, monkeypatch, capsys):
    # the repeated step was applied twice and the Trace held its number twice: the metrics'
    # lookup by step refused it (pandas: "cannot reindex on an axis with duplicate labels") on
    # the vLLM server page and in `sim fleet --recordings`
    from servers.vllm.recording import read_recording, to_trace
    from sim.metrics import summary
    lines = _lines(ROOT / "samples/vllm/priority.jsonl.gz")
    k = next(i for i, x in enumerate(lines) if x.startswith(b'{"kind":"step"') and i > 20)
    clean = to_trace(read_recording(b"\n".join(lines)))
    rec = read_recording(b"\n".join(lines[:k + 1] + [lines[k]] + lines[k + 1:]))
    assert any("repeats" in w for w in rec.warnings), rec.warnings
    trace = to_trace(rec)
    for table in ("steps", "batch", "kv", "requests", "events"):   # the same Trace as without the repeated line
        assert getattr(trace, table).equals(getattr(clean, table)), table
    summary(trace)
    fleet = ROOT / "samples/fleet/vllm-router-cache_aware"
    lines = _lines(fleet / "rec-8101.jsonl.gz")
    k = next(i for i, x in enumerate(lines) if x.startswith(b'{"kind":"step"') and i > 20)
    (tmp_path / "a.jsonl").write_bytes(b"\n".join(lines[:k + 1] + [lines[k]] + lines[k + 1:]))
    (tmp_path / "b.jsonl.gz").write_bytes((fleet / "rec-8102.jsonl.gz").read_bytes())
    rc, out = _cli(tmp_path, monkeypatch, capsys, "fleet", "--recordings", "a.jsonl", "b.jsonl.gz", "--json")
    assert rc == 0 and any("repeats" in w for w in json.loads(out)["warnings"])


@pytest.mark.parametrize("field,value", [("#token", b"1e300"), ("#running-req", b"0.5"), ("#new-seq", b"2.5"),
                                         ("#cached-token", b"1e20")])
def test_a_server_log_count_that_is_no_whole_number_is_unknown_not_a_crash(field, value):
    # `#token: 1e300` reached the Int64 column as a float (TypeError), `#running-req: 0.5` was cut to 0
    from servers.server_log import read_log
    prefill = (b"[2025-11-11 04:28:02] Prefill batch, #new-seq: 17, #new-token: 4096, #cached-token: 16, "
               b"token usage: 0.03, #running-req: 1, #queue-req: 3\n")
    decode = (b"[2025-11-11 04:28:03] Decode batch, #running-req: 12, #token: 768, token usage: 0.00, "
              b"cuda graph: True, gen throughput (token/s): 3.83, #queue-req: 0\n")
    lines = [prefill, decode]
    i = 0 if field in ("#new-seq", "#cached-token") else 1
    lines[i] = lines[i].replace(field.encode() + b": " + lines[i].split(field.encode() + b": ")[1].split(b",")[0],
                                field.encode() + b": " + value)
    assert value in lines[i]
    log = read_log(b"".join(lines), "s.log")
    assert len(log.trace.steps) == 2


def test_a_lone_surrogate_in_a_workload_is_one_plain_line(tmp_path, monkeypatch, capsys):
    # json.loads made "\ud800" a str no UTF-8 writer takes: pandas raised UnicodeEncodeError in `sim run`
    doc = json.loads((ROOT / "tests/fixtures/vllm/lesson_abc_7blocks.workload.json").read_text())
    doc["requests"][0]["tenant"] = "\ud800x"
    (tmp_path / "w.json").write_text(json.dumps(doc))   # ensure_ascii: the file holds the escape \ud800
    rc, _ = _cli(tmp_path, monkeypatch, capsys, "run", "w.json")
    assert isinstance(rc, str) and "lone UTF-16 surrogate (\\ud800 at line 1)" in rc and not bad_refusal(rc), rc
    doc["requests"][0]["tenant"] = "\U0001F600"   # a pair is one character: read as it is
    (tmp_path / "w.json").write_text(json.dumps(doc))
    rc, out = _cli(tmp_path, monkeypatch, capsys, "run", "w.json")
    assert rc == 0, rc
    doc["requests"][0]["tenant"] = "C:\\ud800 and \\\\"   # the text backslash-u-d-8-0-0 is no escape: read as it is
    (tmp_path / "w.json").write_text(json.dumps(doc))
    assert b'\\\\ud800' in (tmp_path / "w.json").read_bytes()
    rc, out = _cli(tmp_path, monkeypatch, capsys, "run", "w.json")
    assert rc == 0, rc


def test_a_trace_of_absurd_timestamps_is_one_short_line():
    # the span of arrivals was printed in full: 300 digits of hours
    from sim.inputs import parse_workload
    data = b'{"timestamp": 0, "input_length": 10, "output_length": 5, "hash_ids": [1]}\n' \
           b'{"timestamp": 1e300, "input_length": 10, "output_length": 5, "hash_ids": [2]}\n'
    with pytest.raises(ValueError) as e:
        parse_workload(data, "m.jsonl")
    assert "2.78e+293 hours" in str(e.value) and not bad_refusal(str(e.value)), str(e.value)


def test_a_null_hash_id_and_an_slo_bomb_are_one_plain_line(tmp_path, monkeypatch, capsys):
    # a null in a Mooncake line's hash_ids reached int() as pandas' NA (TypeError); an --slo of
    # 200,000 "[" reached json.loads' recursion limit (RecursionError)
    from sim.inputs import parse_workload
    from servers.vllm.fleet import load_vocab
    with pytest.raises(ValueError, match="hash_ids must hold whole-number block ids"):
        parse_workload(b'{"timestamp": 0, "input_length": 10, "output_length": 5, "hash_ids": [1, null]}\n', "m")
    import shutil
    shutil.copy(ROOT / "tests/fixtures/vllm/lesson_abc_7blocks.workload.json", tmp_path / "w.json")
    rc, _ = _cli(tmp_path, monkeypatch, capsys, "run", "w.json", "--slo", "[" * 200_000)
    assert rc == "--slo: SLO nests lists or objects too deep", rc
    (tmp_path / "tokenizer.json").write_text("[" * 200_000)
    with pytest.raises(ValueError, match="not a tokenizer.json"):
        load_vocab(tmp_path / "tokenizer.json")


def test_a_recording_header_with_a_long_unknown_policy_is_one_line_of_200(tmp_path, monkeypatch, capsys):
    # the header's policy, 40 characters of HTML, made a 205-character refusal through the fleet reader
    lines = _lines(ROOT / "samples/fleet/vllm-router-cache_aware/rec-8101.jsonl.gz")
    head = json.loads(lines[0])
    head["config"]["policy"] = "fcfs<script>alert('x')</script>" + "x" * 20
    lines[0] = json.dumps(head).encode()
    (tmp_path / "in.jsonl.gz").write_bytes(gzip.compress(b"\n".join(lines)))
    for argv in (["vllm", "in.jsonl.gz"], ["fleet", "--recordings", "in.jsonl.gz", "--json"]):
        rc, _ = _cli(tmp_path, monkeypatch, capsys, *argv)
        assert isinstance(rc, str) and "unknown policy" in rc and not bad_refusal(rc, ["in.jsonl.gz"]), rc


def test_a_grid_argument_of_200000_characters_is_one_short_line(tmp_path, monkeypatch, capsys):
    # neither JSON nor a file: the refusal named it whole (200,056 characters; found by
    # tests/fuzz_inputs.py --seed 1210)
    (tmp_path / "w.json").write_bytes((ROOT / "tests/fixtures/vllm/preempt_fcfs.workload.json").read_bytes())
    rc, _ = _cli(tmp_path, monkeypatch, capsys, "search", "w.json", "--grid", "z" * 200_000)
    assert isinstance(rc, str) and rc.startswith("there is no grid file 'zzz"), rc[:300]
    assert not bad_refusal(rc, ["w.json"]), rc[:300]


def test_a_grid_argument_of_bytes_that_are_not_utf8_is_one_short_line(tmp_path, monkeypatch, capsys):
    # each such byte shows escaped (6 characters, \udcff): cut at 37 characters, the refusal ran
    # to 283 (tests/fuzz_inputs.py --seed 1212)
    (tmp_path / "w.json").write_bytes((ROOT / "tests/fixtures/vllm/preempt_fcfs.workload.json").read_bytes())
    rc, _ = _cli(tmp_path, monkeypatch, capsys, "search", "w.json", "--grid", "\udcff" * 500)
    assert isinstance(rc, str) and rc.startswith("there is no grid file '\\udcff"), rc[:300]
    assert not bad_refusal(rc, ["w.json"]), rc[:400]


@pytest.mark.parametrize("cmd", ["log", "vllm", "llamalog", "run"])
@pytest.mark.parametrize("where, why", [("gone.log", "No such file or directory"), (".", "Is a directory")])
def test_a_path_that_cannot_be_read_says_why(cmd, where, why, tmp_path, monkeypatch, capsys):
    # `sim log` said a missing file "is empty"; `sim vllm` and `llamalog` showed Python's "[Errno 2] ..."
    rc, _ = _cli(tmp_path, monkeypatch, capsys, cmd, where)
    assert isinstance(rc, str) and rc.startswith("cannot read ") and rc.endswith(why), rc
    assert "Errno" not in rc and not bad_refusal(rc, [where]), rc
