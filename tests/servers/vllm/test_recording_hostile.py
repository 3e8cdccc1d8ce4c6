"""Damaged recordings found by a hostile sweep: each used to stall a re-simulation for minutes,
crash the page, mislead the verdict, or lose what could be read; each now reads what it holds
and says what it could not use in one sentence (servers/vllm/reader/)."""
from __future__ import annotations

import gzip
import json
import subprocess
import sys
from pathlib import Path

import pytest

from servers.vllm.compare import decisions
from servers.vllm.recording import is_async, read_recording, to_trace

ROOT = Path(__file__).resolve().parents[3]
PRIORITY = ROOT / "samples" / "vllm" / "priority.jsonl.gz"   # 149 steps, 14 requests, its last step idle


def rows() -> list[dict]:
    return [json.loads(x) for x in gzip.decompress(PRIORITY.read_bytes()).splitlines()]


def text(rs: list[dict]) -> bytes:
    return "".join(json.dumps(r) + "\n" for r in rs).encode()


def test_an_add_far_past_the_steps_read_is_taken_as_the_next_step():
    """An add's before_step of 1e15 made the re-simulation run to its 10M-step cap (100 s); the
    page raised (an int32/int64 merge). The recorder writes an add just before its step."""
    rs = rows()
    adds = [r for r in rs if r["kind"] == "add"]
    first = rs.index(adds[0]) < next(i for i, r in enumerate(rs) if r["kind"] == "step")
    adds[0]["before_step"] = adds[4]["before_step"] = 10**15   # the first comes before any step line
    rec = read_recording(text(rs))
    assert first and sum("an add line names a step far past the steps read" in w for w in rec.warnings) == 1
    assert rec.adds[0]["before_step"] == 1 and rec.adds[4]["before_step"] < 1000
    v = decisions(rec)
    assert v["simulated_steps"] < 1000 and v["equal"]


def test_a_reused_request_id_is_numbered_and_the_decisions_hold():
    """A client may reuse an id once its first request ended: the later one is "id (2)" (the
    Trace's ids are unique: the page raised on the duplicate, the verdict said the pool was too
    small)."""
    rs = rows()
    adds = [r for r in rs if r["kind"] == "add"]
    adds[4]["id"] = adds[3]["id"]
    rec = read_recording(text(rs))
    ids = to_trace(rec).requests["request"].astype(str)
    assert ids.is_unique and f"{adds[3]['id']} (2)" in set(ids)
    assert any("a request id was added twice" in w for w in rec.warnings) and decisions(rec)["equal"]


def test_a_block_id_past_the_pool_does_not_size_the_block_map():
    rs = rows()
    step = next(r for r in rs if r["kind"] == "step" and r.get("blocks"))
    step["blocks"][0][1].append(2**62)
    tr = to_trace(read_recording(text(rs)))
    count, cached, holders = tr.block_map(int(step["step"]))   # a 4 EiB array before
    assert len(count) == tr.num_blocks and tr.kv_index() is not None


def test_header_and_bytes_of_other_kinds():
    rs = rows()
    rs[0]["part"] = "x"   # a damaged part number: read as part 1 (it raised ValueError)
    assert len(read_recording(text(rs)).steps) == 149
    with pytest.raises(ValueError, match="this file is UTF-16 text"):   # it read as an empty recording
        read_recording(text(rows()).decode().encode("utf-16"))
    assert len(read_recording(b"\xef\xbb\xbf" + text(rows())).steps) == 149   # a BOM: read
    rs = rows()
    rs[0]["config"]["async_scheduling"] = "false"
    rs[0].pop("scheduler_class", None)
    assert is_async(read_recording(text(rs))) is False   # bool("false") said it was async


def test_idle_steps_are_not_busy_and_a_damaged_gzip_keeps_what_came_before():
    rec = read_recording(PRIORITY.read_bytes())
    s = to_trace(rec).steps
    assert len(s) == 149 and int((~s["idle"]).sum()) == 148   # its last step scheduled nothing
    raw = gzip.compress(text(rows()) * 20, mtime=0)
    bad = bytearray(raw)
    bad[len(raw) // 2] ^= 0xFF
    rec = read_recording(bytes(bad))
    assert any("its gzip data is damaged" in w for w in rec.warnings)
    assert len(rec.steps) >= 149   # at least the first copy (it lost all: the header was in the failed call)


def test_the_cli_plays_back_what_it_cannot_re_simulate(tmp_path):
    rs = rows()
    rs[0]["config"]["max_model_len"] = 10   # no vLLM starts with this, and the prompts are longer
    p = tmp_path / "r.jsonl"
    p.write_bytes(text(rs))
    r = subprocess.run([sys.executable, "-m", "sim", "vllm", str(p), "--json"], cwd=ROOT, capture_output=True,
                       text=True, timeout=300)
    out = json.loads(r.stdout)
    assert r.returncode == 0 and out["steps"] == 149 and out["decisions"]["equal"] is None
    assert out["decisions"]["not_simulated"] and "not re-simulated" in r.stderr


def test_one_step_number_far_ahead_is_skipped_not_every_line_after_it():
    rs = rows()
    steps = [r for r in rs if r["kind"] == "step"]
    steps[4]["step"] = 10**12   # it kept 5 steps of 149: the 144 after it "went back"
    rec = read_recording(text(rs))
    assert len(rec.steps) == 148
    assert any("a step line's number is far past the step before it" in w for w in rec.warnings)


@pytest.mark.parametrize("where", ["middle", "last", "chunks"])
def test_a_line_over_the_cap_is_skipped_and_the_lines_after_it_are_read(monkeypatch, where):
    """A line over the line cap (no recorder line is: damaged data) stopped the reading there and
    lost every step after it. It is skipped, with one sentence, and the rest is read, whether the
    line comes in one read or in many (gzip hands the text over in pieces)."""
    monkeypatch.setattr("servers.vllm.recording.MAX_LINE_BYTES", 1 << 20)
    rs = rows()
    whole = read_recording(text(rs))
    lines = text(rs).split(b"\n")
    junk = b'{"kind": "step", "x": "' + b"9" * (3 << 20) + b'"}'
    at = len(lines) - 1 if where == "last" else len(lines) // 2
    lines.insert(at, junk)
    data = b"\n".join(lines)
    if where == "chunks":
        data = gzip.compress(data, compresslevel=1)
    rec = read_recording(data)
    said = [w for w in rec.warnings if "a line is over 1 MiB (no recorder line is): it was skipped" in w]
    assert len(said) == 1 and len(rec.steps) == len(whole.steps) and decisions(rec)["equal"]


def _step4(rs: list[dict]) -> dict:
    return [r for r in rs if r["kind"] == "step"][3]


@pytest.mark.parametrize("damage,kind", [
    (lambda rs: _step4(rs)["sched"][0].__setitem__(1, 3.5), "step"),       # tokens scheduled
    (lambda rs: _step4(rs)["sched"][0].__setitem__(1, -2), "step"),
    (lambda rs: _step4(rs)["sched"][0].__setitem__(2, -5), "step"),        # computed before
    (lambda rs: _step4(rs)["sched"][0].__setitem__(0, 0.5), "step"),       # a request's index
    (lambda rs: _step4(rs).__setitem__("free", 2.5), "step"),
    (lambda rs: _step4(rs).__setitem__("waiting_n", -1), "step"),
    (lambda rs: _step4(rs)["blocks"][0][1].__setitem__(0, -1), "step"),
    (lambda rs: _step4(rs)["sampled"].__setitem__(0, 1.5), "step"),
    (lambda rs: next(r for r in rs if r["kind"] == "add").__setitem__("max_tokens", 2.5), "add"),
    (lambda rs: next(r for r in rs if r["kind"] == "add").__setitem__("priority", 1.5), "add"),
], ids=["tokens 3.5", "tokens -2", "computed -5", "index 0.5", "free 2.5", "waiting -1", "block -1",
        "sampled 1.5", "max_tokens 2.5", "priority 1.5"])
def test_a_count_no_recorder_writes_makes_its_line_damaged(damage, kind):
    """A fractional or negative count, index or block id (a recorder writes whole numbers, 0 or
    more) was taken as it came (3.5 tokens as 3, -2 tokens as -2) and the verdict said the
    scheduler differed, with no word why. The line is damaged now: skipped, in one sentence."""
    rs = rows()
    damage(rs)
    rec = read_recording(text(rs))
    said = [w for w in rec.warnings if "damaged or of another format: skipped" in w]
    assert len(said) == 1 and f"'{kind}' line" in said[0]
    assert len(rec.steps) == 149 - (kind == "step")
    decisions(rec)   # the verdict is made of what was read


def test_a_whole_float_is_still_a_count():
    """3.0 is 3 (a hand-edited or re-serialised file may write whole numbers as floats)."""
    rs = rows()
    step = _step4(rs)
    step["sched"] = [[float(x) for x in e] for e in step["sched"]]
    step["free"] = float(step["free"])
    rec = read_recording(text(rs))
    assert not rec.warnings and len(rec.steps) == 149 and decisions(rec)["equal"]


@pytest.mark.parametrize("damage,said", [
    (lambda h: h.__setitem__("config", None), "has no scheduler settings"),
    (lambda h: h.__setitem__("config", {}), "has no scheduler settings"),
    (lambda h: h["config"].pop("num_gpu_blocks"), "does not give num_gpu_blocks"),
    (lambda h: h["config"].__setitem__("block_size", None), "does not give block_size"),
], ids=["settings null", "settings empty", "no pool size", "block size null"])
def test_a_header_without_the_pool_and_batch_sizes_is_played_back_not_re_simulated(damage, said):
    """The re-simulation guessed the sizes a header left out (defaults, or a ValueError from the
    defaults' pool) and its verdict said the scheduler differed; a header that said it had no
    settings was re-simulated anyway. Now: played back, with the reason, and no verdict."""
    from servers.vllm.recording import mode_config
    rs = rows()
    damage(rs[0])
    rec = read_recording(text(rs))
    assert len(rec.steps) == 149 and len(to_trace(rec).steps) == 149
    with pytest.raises(ValueError) as e:
        mode_config(rec)
    assert str(e.value) == f"the recording's header {said}: it can be played back but not re-simulated"


def test_a_header_without_a_version_says_which_rules_re_simulate_it():
    rs = rows()
    del rs[0]["vllm"]
    rec = read_recording(text(rs))
    assert rec.warnings == ["the header does not say which vLLM ran: what the recorder read is unchecked, and it is "
                            "re-simulated with vLLM 0.34's rules"]
    assert decisions(rec)["simulated_as"]["vllm_version"] == "0.34"
