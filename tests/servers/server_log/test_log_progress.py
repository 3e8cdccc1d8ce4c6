"""read_log's progress callback (bytes of the file read, as servers/vllm's reader tells it) and
`python -m sim log FILE --progress`, which prints it to stderr only."""
from __future__ import annotations

import gzip
import io
import os
import subprocess
import sys

from engine_variants import ROOT, SGLANG, VLLM, lines
from servers.server_log import read_log


def big(path, copies: int) -> bytes:
    """The excerpt's lines over and over: a log of a few MiB."""
    text = "\n".join(lines(path)) + "\n"
    return (text * copies).encode()


def calls(src, **kw):
    got = []
    log = read_log(src, progress=lambda done, total: got.append((done, total)), **kw)
    return log, got


def copies_for(path, size: int = 3 << 20) -> int:
    return size // len("\n".join(lines(path)).encode()) + 1


def test_progress_rises_to_the_file_size_on_a_plain_file(tmp_path):
    path = tmp_path / "server.log"
    path.write_bytes(big(SGLANG[0], copies_for(SGLANG[0])))
    log, got = calls(str(path))
    size = path.stat().st_size
    assert log.read.engine == "sglang" and len(log.read.batches) > 0
    assert len(got) >= 3, got   # about every MiB of a 3 MiB file, and the end
    done = [d for d, _ in got]
    assert done == sorted(done) and len(set(done)) == len(done)
    assert all(t == size for _, t in got)
    assert got[-1] == (size, size)


def test_progress_counts_the_compressed_bytes_of_a_gzip(tmp_path):
    path = tmp_path / "server.log.gz"
    text = big(VLLM[0], copies_for(VLLM[0], 6 << 20))
    path.write_bytes(gzip.compress(text, mtime=0))
    log, got = calls(str(path))
    size = path.stat().st_size
    assert log.read.engine == "vllm" and len(log.read.stats) > 0
    assert size < len(text) and got[-1] == (size, size)
    assert all(0 < d <= size and t == size for d, t in got)
    assert [d for d, _ in got] == sorted(d for d, _ in got)


def test_progress_on_bytes_and_a_stream_that_cannot_tell_its_size():
    data = big(SGLANG[0], copies_for(SGLANG[0], 2 << 20))
    _, got = calls(data)
    assert got[-1] == (len(data), len(data))

    class Pipe(io.RawIOBase):   # no fileno, no size: only what was read can be told
        def __init__(self, b):
            self.f = io.BytesIO(b)

        def readable(self):
            return True

        def readinto(self, buf):
            n = self.f.readinto(buf)
            return n

    _, got = calls(io.BufferedReader(Pipe(data)))
    assert got[-1] == (len(data), len(data))   # read_log takes a stream's bytes first: their size is known


def test_the_same_read_with_or_without_progress():
    data = big(VLLM[0], 50)
    plain = read_log(data).read.to_json()
    told, got = calls(data)
    assert told.read.to_json() == plain and got


def run_cli(*args):
    return subprocess.run([sys.executable, "-m", "sim", *args], cwd=ROOT, capture_output=True, text=True, timeout=120,
                          env={**os.environ, "PYTHONPATH": str(ROOT)})


def test_cli_progress_goes_to_stderr_not_stdout(tmp_path):
    path = tmp_path / "server.log"
    path.write_bytes(big(SGLANG[0], copies_for(SGLANG[0], 2 << 20)))
    with_p, without = run_cli("log", str(path), "--json", "--progress"), run_cli("log", str(path), "--json")
    assert with_p.returncode == 0 and without.returncode == 0, with_p.stderr
    assert with_p.stdout == without.stdout
    assert "reading" not in without.stderr and "100.0%" in with_p.stderr and "reading" in with_p.stderr
    assert "reading" not in with_p.stdout and str(path) not in with_p.stdout
