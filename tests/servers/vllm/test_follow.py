"""Following a recording as it is written (servers/vllm/follow.py): complete lines only, a cut
line waits, truncation and replacement start over, the recorder's rotation reads on as one run
(also with the real recorder in vLLM's scheduler class, rotating every few KB), a header that
changes half-way stops with one sentence, gzip is read to what decompresses, and a gzip bomb
stops."""
from __future__ import annotations

import gzip
import json
import os
import subprocess
import threading
import time
import zlib
from pathlib import Path

import pytest

from real_vllm import PY, marks
from servers.vllm.follow import Follower, RecordingLines
from servers.vllm.recording import first_difference, oracle_lines, read_recording

ROOT = Path(__file__).resolve().parents[3]
SAMPLE = ROOT / "samples" / "vllm" / "fcfs_kv_pressure.jsonl.gz"


def header(started: float = 1000.0, part: int = 1) -> bytes:
    return (json.dumps({"kind": "header", "format": "schedlab-vllm-recording", "version": 1, "vllm": "0.32.0",
                        "scheduler_class": "RecordingScheduler", "started_unix": started, "part": part,
                        "config": {"num_gpu_blocks": 40, "block_size": 32}}, separators=(",", ":")) + "\n").encode()


def add(i: int, earlier: bool = False) -> bytes:
    obj = {"kind": "add", "i": i, "id": f"r{i}", "prompt_len": 8, "max_tokens": 4}
    if earlier:
        obj["earlier"] = True
    return (json.dumps(obj, separators=(",", ":")) + "\n").encode()


def step(k: int) -> bytes:
    return (json.dumps({"kind": "step", "step": k, "sched": [[0, 1, k]]}, separators=(",", ":")) + "\n").encode()


def lines_of(chunks) -> list[bytes]:
    return [line for c in chunks for line in c.lines]


def test_a_file_written_in_pieces_gives_whole_lines_only(tmp_path):
    p = tmp_path / "steps.jsonl"
    f = Follower(p)
    assert f.poll() == []   # not there yet: waited for
    text = header() + add(0) + step(1) + ("{\"kind\":\"step\",\"note\":\"naïve ✓\"}\n").encode()
    out = []
    with open(p, "wb") as w:
        for k in range(0, len(text), 7):   # 7-byte pieces: most polls end mid-line, some mid-character
            w.write(text[k:k + 7])
            w.flush()
            got = lines_of(f.poll())
            assert all(x.endswith(b"\n") for x in got)
            out += got
    assert b"".join(out) == text
    assert f.poll() == []


def test_a_cut_line_waits_for_its_rest(tmp_path):
    p = tmp_path / "steps.jsonl"
    p.write_bytes(header() + step(1)[:10])
    f = Follower(p)
    assert lines_of(f.poll()) == [header()]
    assert f.poll() == []   # the cut line is not handed
    with open(p, "ab") as w:
        w.write(step(1)[10:])
    assert lines_of(f.poll()) == [step(1)]


def test_truncation_and_a_rewrite_in_place_start_over_saying_so(tmp_path):
    p = tmp_path / "steps.jsonl"
    p.write_bytes(header() + add(0) + step(1) + step(2))
    f = Follower(p)
    assert len(lines_of(f.poll())) == 4
    ino = os.stat(p).st_ino
    with open(p, "r+b") as w:   # truncated, shorter than what was read
        w.truncate(0)
        w.write(header(2000.0))
    assert os.stat(p).st_ino == ino
    chunks = f.poll()
    assert chunks[0].begins == "truncated" and "truncated" in chunks[0].note and lines_of(chunks) == [header(2000.0)]
    # a server restarted into the same file and written past the old length: the first line differs
    with open(p, "r+b") as w:
        w.truncate(0)
        w.write(header(3000.0) + b"".join(step(k) for k in range(1, 20)))
    chunks = f.poll()
    assert chunks[0].begins == "truncated" and lines_of(chunks)[0] == header(3000.0) and len(lines_of(chunks)) == 20


def test_a_replaced_file_is_read_from_its_start(tmp_path):
    p = tmp_path / "steps.jsonl"
    p.write_bytes(header() + step(1))
    f = Follower(p)
    f.poll()
    new = tmp_path / "new.jsonl"
    new.write_bytes(header(5000.0) + step(1) + step(2))
    os.replace(new, p)
    chunks = f.poll()
    assert [c.begins for c in chunks] == ["replaced"] and "replaced" in chunks[0].note
    assert lines_of(chunks) == [header(5000.0), step(1), step(2)]


def rotate(p: Path, keep: int = 4) -> None:
    """What recorder._File.rotate does: FILE.k-1 -> FILE.k, ..., FILE -> FILE.1."""
    for k in range(keep, 0, -1):
        src = p if k == 1 else Path(f"{p}.{k - 1}")
        if src.exists():
            os.replace(src, f"{p}.{k}")


def test_rotation_reads_on_as_one_run(tmp_path):
    p = tmp_path / "steps.jsonl"
    p.write_bytes(header() + add(0) + add(1) + step(1))
    r = RecordingLines(p)
    first = r.poll()
    assert first.lines == [header(), add(0), add(1), step(1)] and not first.restart
    with open(p, "ab") as w:   # the rest of the old file, then the recorder's rotate line
        w.write(step(2) + b'{"kind":"rotate","t":5.0,"after_step":2}\n')
    rotate(p)
    p.write_bytes(header(part=2) + add(1, earlier=True) + add(2) + step(3))
    got = r.poll()
    assert got.lines == [step(2), add(2), step(3)] and not got.restart and "rotated" in got.note
    # twice between two polls: ours is FILE.2 now, FILE.1 a file never seen
    with open(p, "ab") as w:
        w.write(step(4) + b'{"kind":"rotate"}\n')
    rotate(p)
    p.write_bytes(header(part=3) + add(2, earlier=True) + step(5) + b'{"kind":"rotate"}\n')
    rotate(p)
    p.write_bytes(header(part=4) + add(2, earlier=True) + step(6))
    got = r.poll()
    assert got.lines == [step(4), step(5), step(6)] and r.rotations == 3
    whole = read_recording(b"".join(first.lines + [step(2), add(2), step(3), step(4), step(5), step(6)]))
    assert [s["step"] for s in whole.steps] == [1, 2, 3, 4, 5, 6] and [a["i"] for a in whole.adds] == [0, 1, 2]


def test_a_rotation_caught_half_way_is_still_a_rotation(tmp_path):
    p = tmp_path / "steps.jsonl"
    p.write_bytes(header() + step(1))
    r = RecordingLines(p)
    r.poll()
    with open(p, "ab") as w:
        w.write(step(2) + b'{"kind":"rotate"}\n')
    rotate(p)
    p.write_bytes(header(part=2) + step(3) + b'{"kind":"rotate"}\n')
    os.replace(f"{p}.1", f"{p}.2")   # the second rotation under way: ours is FILE.2, FILE.1 not made yet
    got = r.poll()
    assert not got.restart and got.lines == [step(2), step(3)] and r.stopped is None


def test_a_header_that_changes_half_way_stops_with_one_sentence(tmp_path):
    p = tmp_path / "steps.jsonl"
    p.write_bytes(header() + step(1))
    r = RecordingLines(p)
    assert len(r.poll().lines) == 2
    with open(p, "ab") as w:
        w.write(step(2) + header(9999.0) + step(1))
    got = r.poll()
    assert got.lines == [step(2)] and r.stopped and got.note == r.stopped
    assert "header changed half-way" in r.stopped and "\n" not in r.stopped and len(r.stopped) <= 200
    with open(p, "ab") as w:
        w.write(step(3))
    assert r.poll().lines == []   # stopped for good: what was read stays


def test_a_rotated_file_of_another_run_is_a_header_change(tmp_path):
    p = tmp_path / "steps.jsonl"
    p.write_bytes(header() + step(1))
    r = RecordingLines(p)
    r.poll()
    rotate(p)
    p.write_bytes(header(started=42.0, part=2) + step(1))
    assert r.poll().lines == [] and "header changed half-way" in r.stopped


def test_a_replaced_file_restarts_the_reader(tmp_path):
    p = tmp_path / "steps.jsonl"
    p.write_bytes(header() + step(1))
    r = RecordingLines(p)
    r.poll()
    new = tmp_path / "n.jsonl"
    new.write_bytes(header(7.0) + step(1))
    os.replace(new, p)
    got = r.poll()
    assert got.restart and got.lines == [header(7.0), step(1)] and "replaced" in got.note and not r.stopped


def test_a_gzip_being_written_is_read_to_what_decompresses(tmp_path):
    p = tmp_path / "steps.jsonl.gz"
    text = header() + b"".join(step(k) for k in range(1, 200))
    f = Follower(p)
    w = open(p, "wb")
    z = zlib.compressobj(6, zlib.DEFLATED, 31)
    got = []
    for k in range(0, len(text), 1000):
        w.write(z.compress(text[k:k + 1000]) + z.flush(zlib.Z_SYNC_FLUSH))
        w.flush()
        got += lines_of(f.poll())
    assert b"".join(got) == text[:text.rfind(b"\n") + 1] and f.stopped is None   # no trailer yet: fine
    w.write(z.flush())
    w.close()
    assert f.poll() == [] and f.stopped is None
    # a whole .gz (a bundled sample), several members, read in small polls
    data = SAMPLE.read_bytes()
    two = tmp_path / "two.jsonl.gz"
    two.write_bytes(data + gzip.compress(b"{\"kind\":\"end\"}\n"))
    f = Follower(two, read_bytes=4096, unzip_bytes=8192)
    got, polls = [], 0
    while True:
        c = f.poll()
        polls += 1
        if not c and not f.behind:
            break
        got += lines_of(c)
    assert b"".join(got) == gzip.decompress(data) + b"{\"kind\":\"end\"}\n" and polls > 10


def test_a_damaged_gzip_stops_with_one_sentence(tmp_path):
    p = tmp_path / "bad.jsonl.gz"
    good = gzip.compress(header() + step(1))
    p.write_bytes(good[:30] + bytes(64) + good[30:])
    f = Follower(p)
    f.poll()
    assert f.stopped and "gzip file is damaged" in f.stopped and "\n" not in f.stopped


def bomb(tmp_path: Path, piece: bytes, gb: int) -> Path:
    """A gzip file of several members, `gb` GB of text in all (zlib makes 100 MB of it in ~0.3 s)."""
    one = gzip.compress(piece * ((100 << 20) // len(piece)), 9)
    p = tmp_path / "bomb.jsonl.gz"
    p.write_bytes(one * (gb * 10))
    return p


def test_a_10_gb_gzip_bomb_of_one_endless_line_stops_at_the_line_cap(tmp_path):
    p = bomb(tmp_path, b"\0" * 4096, 10)
    assert p.stat().st_size < 20 << 20
    f = Follower(p)
    t = time.perf_counter()
    while f.stopped is None and time.perf_counter() - t < 60:
        f.poll()
    assert f.stopped and "line is over 64 MiB" in f.stopped and len(f.stopped) <= 200
    assert f.text < 200 << 20   # stopped soon after the cap, not after 10 GB


def test_a_gzip_bomb_of_short_lines_stops_at_the_text_cap(tmp_path):
    p = bomb(tmp_path, b"{}" + b" " * 1021 + b"\n", 10)
    f = Follower(p, max_text_bytes=256 << 20)
    t = time.perf_counter()
    n = 0
    while f.stopped is None and time.perf_counter() - t < 60:
        n += sum(len(c.lines) for c in f.poll())
    assert f.stopped and "over 256 MiB of text" in f.stopped and n <= 256 << 10


def test_one_poll_reads_a_bounded_amount_and_catches_up(tmp_path):
    p = tmp_path / "big.jsonl"
    text = header() + b"".join(step(k) for k in range(1, 50_000))
    p.write_bytes(text)
    f = Follower(p, read_bytes=64 << 10)
    first = lines_of(f.poll())
    assert f.behind and sum(map(len, first)) <= 64 << 10
    got = first
    while f.behind:
        got += lines_of(f.poll())
    assert b"".join(got) == text


# ---------------------------------------------------------------------------------------------
# The real recorder, inside vLLM's scheduler class, rotating every 50 KB while followed
# ---------------------------------------------------------------------------------------------

def real_vllm(test):
    for m in marks(600):   # the vllm mark, its timeout, skipped (saying so) without .venv-vllm
        test = m(test)
    return test


@real_vllm
def test_a_real_recording_rotating_while_followed_reads_as_the_whole_run(tmp_path):
    case = "random_fcfs_500"
    driver = ROOT / "tests" / "servers" / "vllm" / "drive_recorder.py"
    rec, orc = tmp_path / "rec.jsonl", tmp_path / "oracle.jsonl"
    r = RecordingLines(rec)
    got: list[bytes] = []
    done = threading.Event()

    def follow():
        while not done.is_set():
            got.extend(r.poll().lines)
            time.sleep(0.002)

    th = threading.Thread(target=follow, daemon=True)
    th.start()
    subprocess.run([str(PY), str(driver), str(ROOT / "tests" / "fixtures" / "vllm" / f"{case}.workload.json"),
                    str(rec), str(orc)], check=True, capture_output=True, timeout=300,
                   env={**os.environ, "SCHEDLAB_VLLM_MAX_MB": "0.05", "SCHEDLAB_VLLM_KEEP": "1000"})
    done.set()
    th.join()
    while True:   # what was written after the thread's last poll
        more = r.poll()
        got.extend(more.lines)
        if not more.lines and not r.behind:
            break
    assert r.stopped is None and r.rotations >= 5
    followed = read_recording(b"".join(got))
    assert followed.warnings == [] and followed.ended
    recorded = oracle_lines(followed)
    seen = [json.loads(line) for line in orc.read_text().splitlines()]
    for line in recorded + seen:   # the harness adds by its own step count; the recorder by schedule() calls
        line.pop("arrived")
    assert first_difference(recorded, seen) is None and len(recorded) == len(seen) > 100
