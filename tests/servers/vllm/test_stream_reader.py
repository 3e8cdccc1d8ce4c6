"""The streaming reader of vLLM step recordings (servers/vllm/reader/): fed any way, it gives
what reading the whole file gives; a stream's Trace at any point is the Trace of the lines fed
so far; what stops it early (a gzip bomb, a cut gzip, a cut last line, the server restarting
into the same file) is one plain sentence. On the bundled samples and on recordings made by
driving vLLM's own scheduler class with the recorder (drive_recorder.py, in .venv-vllm)."""
from __future__ import annotations

import gzip
import json
import random
import subprocess
import time
import zlib
from pathlib import Path

import pandas as pd
import pytest

from real_vllm import PY, marks
from servers.vllm.compare import decisions
from servers.vllm.recording import (RecordingRestarted, RecordingStream, oracle_lines, read_recording, to_trace,
                                    to_workload)
from sim.trace import TABLES

ROOT = Path(__file__).resolve().parents[3]
SAMPLES = sorted((ROOT / "samples" / "vllm").glob("*.jsonl.gz"))
DRIVER = Path(__file__).with_name("drive_recorder.py")
CASES = ROOT / "tests" / "fixtures" / "vllm"


def lines_of(path: Path) -> list[bytes]:
    return gzip.decompress(path.read_bytes()).splitlines()


def same_trace(a, b) -> None:
    for name in TABLES:
        pd.testing.assert_frame_equal(getattr(a, name), getattr(b, name), check_exact=True, obj=name)
    assert a.meta == b.meta


def fed(lines, seed: int, name: str = "") -> RecordingStream:
    """A stream fed the lines in chunks of 1 to 60 lines (seeded), some as text, some as bytes."""
    rng = random.Random(seed)
    s = RecordingStream(name=name)
    j = 0
    while j < len(lines):
        n = rng.randint(1, 60)
        chunk = lines[j:j + n]
        s.feed([x.decode() for x in chunk] if rng.random() < 0.3 else chunk)
        j += n
    return s


def one_sentence(msg: str) -> None:
    assert msg and len(msg) <= 200 and "\n" not in msg and "Traceback" not in msg, msg


@pytest.mark.parametrize("path", SAMPLES, ids=lambda p: p.name)
def test_a_stream_fed_in_any_chunks_gives_the_whole_files_trace(path):
    whole = read_recording(path)
    for seed in (1, 2):
        s = fed(lines_of(path), seed, name=path.name)
        same_trace(s.trace(), to_trace(whole))
        rec = s.recording
        assert oracle_lines(rec) == oracle_lines(whole)
        assert to_workload(rec).dumps() == to_workload(whole).dumps()
        assert list(rec.steps) == list(whole.steps) and len(rec.steps) == len(whole.steps) > 100
        assert rec.steps[-1] == whole.steps[len(whole.steps) - 1]
    assert decisions(s.recording)["equal"]


@pytest.mark.parametrize("path", SAMPLES[:1], ids=lambda p: p.name)
def test_a_streams_trace_so_far_is_the_trace_of_the_lines_so_far(path):
    """Taken part-way and fed on: each Trace equals reading those lines alone (a server watched
    live sees what reading the file then would show), and feeding on extends it."""
    lines = lines_of(path)
    s = RecordingStream()
    done = 0
    for cut in (1, 2, 37, len(lines) // 2, len(lines) // 2 + 1, len(lines) - 1, len(lines)):
        s.feed(lines[done:cut])
        done = cut
        same_trace(s.trace(), to_trace(read_recording(b"\n".join(lines[:cut]) + b"\n")))
    assert s.num_steps == len(read_recording(path).steps)


def test_the_trace_is_the_same_bytes_each_time():
    path = SAMPLES[0]
    a, b = to_trace(read_recording(path)), fed(lines_of(path), 3, name=path.name).trace()
    assert a.to_bytes() == b.to_bytes() == to_trace(read_recording(path)).to_bytes()


def drive(tmp: Path, case: str, *flags: str) -> Path:
    rec, orc = tmp / f"{case}.rec.jsonl", tmp / f"{case}.oracle.jsonl"
    subprocess.run([str(PY), str(DRIVER), str(CASES / f"{case}.workload.json"), str(rec), str(orc), *flags],
                   check=True, capture_output=True, timeout=300)
    return rec


@pytest.mark.parametrize("case,flags", [pytest.param("preempt_fcfs", (), marks=marks(600)),
                                        pytest.param("random_fcfs_500", ("--async", "--pipeline"), marks=marks(600))])
def test_a_recording_made_by_vllms_scheduler_streams_as_it_reads(tmp_path, case, flags):
    path = drive(tmp_path, case, *flags)
    lines = path.read_bytes().splitlines()
    whole = read_recording(path)
    assert whole.warnings == [] and len(whole.steps) > 50
    s = fed(lines, 4, name=path.name)
    same_trace(s.trace(), to_trace(whole))
    assert oracle_lines(s.recording) == oracle_lines(whole)
    tr = s.trace()
    assert (tr.kv["op"] == "acquire").sum() == (tr.kv["op"] == "release").sum() > 0   # every block given back
    if not flags:   # (the async one is of vLLM 0.32, whose rules have no async mode: test_async_recording's)
        verdict = decisions(s.recording)
        assert verdict["equal"], verdict["first_difference"]


def test_a_second_header_raises_one_sentence_and_keeps_what_came_before():
    lines = lines_of(SAMPLES[0])
    n = len(lines) // 2
    s = RecordingStream()
    s.feed(lines[:n])
    before = s.trace()
    with pytest.raises(RecordingRestarted) as e:
        s.feed(lines[n:n + 5] + [lines[0]] + lines[1:20])
    one_sentence(str(e.value))
    assert isinstance(e.value, ValueError) and e.value.line == n + 6 and e.value.header["kind"] == "header"
    same_trace(s.trace(), to_trace(read_recording(b"\n".join(lines[:n + 5]) + b"\n")))
    assert s.num_steps >= before.num_steps
    with pytest.raises(RecordingRestarted):   # closed: the new run is a new stream's
        s.feed(lines[n + 5:])
    # a whole file: the first run, and a warning
    rec = read_recording(b"\n".join(lines[:n] + lines) + b"\n")
    assert any("second header" in w for w in rec.warnings) and len(rec.steps) < len(read_recording(SAMPLES[0]).steps)


def test_a_stream_that_does_not_start_with_a_header_is_one_sentence():
    lines = lines_of(SAMPLES[0])
    for bad in ([lines[3]], [b"\x00\x01\x02 binary"], [b'{"requests": []}']):
        with pytest.raises(ValueError) as e:
            RecordingStream().feed(bad)
        one_sentence(str(e.value))
    with pytest.raises(ValueError, match="no recording header"):
        RecordingStream().trace()


def _bomb(header: bytes, line: bytes, n_bytes: int) -> bytes:
    """`line` repeated to n_bytes of text, gzipped (a few KB per GB)."""
    z = zlib.compressobj(9, zlib.DEFLATED, 31)
    block = line * ((1 << 20) // len(line))
    out = [z.compress(header + b"\n")]
    for _ in range(n_bytes // len(block)):
        out.append(z.compress(block))
    return b"".join(out) + z.flush()


def test_a_gzip_bomb_stops_at_the_text_limit_with_one_sentence(monkeypatch):
    monkeypatch.setattr("servers.vllm.recording.MAX_TEXT_BYTES", 16 << 20)
    header = lines_of(SAMPLES[0])[0]
    bomb = _bomb(header, b'{"kind":"end"}\n', 256 << 20)   # 256 MB of lines in ~250 KB
    assert len(bomb) < 1 << 20
    t0 = time.perf_counter()
    rec = read_recording(bomb)
    assert time.perf_counter() - t0 < 5   # it read 16 MB, not 256
    said = [w for w in rec.warnings if "only its first" in w]
    assert len(said) == 1
    one_sentence(said[0])


def test_a_gzip_bomb_of_one_endless_line_stops_with_one_sentence(monkeypatch):
    monkeypatch.setattr("servers.vllm.recording.MAX_LINE_BYTES", 4 << 20)
    header = lines_of(SAMPLES[0])[0]
    bomb = _bomb(header, b"0" * 1024, 64 << 20)
    rec = read_recording(bomb)
    said = [w for w in rec.warnings if "a line is over 4 MiB" in w]
    assert len(said) == 1 and len(rec.steps) == 0
    one_sentence(said[0])


def test_a_cut_gzip_reads_what_it_holds_and_says_so():
    data = SAMPLES[0].read_bytes()
    whole = read_recording(data)
    rec = read_recording(data[: len(data) * 2 // 3])
    said = [w for w in rec.warnings if "stops early" in w]
    assert len(said) == 1
    one_sentence(said[0])
    assert 0 < len(rec.steps) < len(whole.steps)
    assert rec.steps[:10] == whole.steps[:10]
    with pytest.raises(ValueError, match="could not be read"):   # cut before its first line ends
        read_recording(data[:30])


def test_a_cut_last_line_is_left_out_and_the_complete_lines_equal_a_stream_of_them():
    text = gzip.decompress(SAMPLES[2].read_bytes())
    cut = text[: text.rfind(b"\n", 0, len(text) - 1) + 40]
    rec = read_recording(cut)
    said = [w for w in rec.warnings if "last line is cut" in w]
    assert len(said) == 1 and not any("not JSON" in w for w in rec.warnings)
    s = RecordingStream()
    s.feed(cut.split(b"\n")[:-1])   # the follower feeds complete lines only
    same_trace(s.trace(), to_trace(read_recording(cut[: cut.rfind(b"\n") + 1])))
    assert s.num_steps == len(rec.steps)


def test_progress_is_told_the_files_bytes_up_to_its_size(tmp_path):
    big = tmp_path / "rec.jsonl.gz"
    lines = lines_of(SAMPLES[0])
    big.write_bytes(gzip.compress(b"\n".join(lines + lines[1:] * 20) + b"\n", compresslevel=1, mtime=0))
    seen = []
    read_recording(big, progress=lambda done, total: seen.append((done, total)))
    size = big.stat().st_size
    assert len(seen) >= 2 and all(t == size for _, t in seen)
    assert [d for d, _ in seen] == sorted(d for d, _ in seen) and seen[-1][0] == size
    with open(big, "rb") as f:   # a file object: its size is known too
        seen.clear()
        read_recording(f, progress=lambda done, total: seen.append((done, total)))
        assert seen[-1] == (size, size)


def test_the_cli_shows_progress_on_stderr(tmp_path):
    import sys
    p = subprocess.run([sys.executable, "-m", "sim", "vllm", str(SAMPLES[0]), "--progress", "--json"], cwd=ROOT,
                       capture_output=True, text=True, timeout=120)
    assert p.returncode == 0, p.stderr
    assert "100.0%" in p.stderr and json.loads(p.stdout)["decisions"]["equal"]
