"""The llama-server log reader's output, as one digest per way of reading each log.

  python bench/reader_digests.py > before.txt      # then change the reader, and:
  python bench/reader_digests.py > after.txt && diff before.txt after.txt

A refactor of the reader must leave every line the same. Each log (the test fixtures, the
bundled samples and, when present, ../shared/llama-logs) is read as a path, as bytes in blocks
of several sizes (7 bytes to 4 MB), as a binary stream (the read-ahead thread), as a list of
lines, gzipped, and cut at a few places; each way with the C tokenizer and with the regexes.
A line is: the way it was read, then the sha256 of the Trace's bytes, of the CLI summary and of
the workload taken from it. --module names the reader's package (`servers.llama_server`; an
older checkout's `sim.llamalog` works too).
"""
from __future__ import annotations

import argparse
import gzip
import hashlib
import importlib
import io
import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
SOURCES = (ROOT / "tests" / "fixtures" / "llama-logs", ROOT / "samples" / "llama-logs",
           ROOT.parent / "shared" / "llama-logs")
SMALL = 1 << 20          # logs up to this size are read in every block size
BLOCKS = (7, 4096, 65536, 1 << 20, 4 << 20)


def _sha(b: bytes) -> str:
    return hashlib.sha256(b).hexdigest()[:16]


def _logs() -> list[Path]:
    out = []
    for d in SOURCES:
        if d.is_dir():
            out += sorted(p for p in d.rglob("*") if p.name.endswith((".log", ".log.gz")))
    return out


def _ways(path: Path, data: bytes):
    """(label, source, read keywords) for each way of reading one log."""
    yield "path", path, {}
    yield "stream", io.BytesIO(data), {}
    blocks = BLOCKS if len(data) <= SMALL else BLOCKS[-2:]
    for b in blocks:
        yield f"bytes/{b}", data, {"block_size": b}
    if len(data) <= SMALL:
        yield "lines", data.decode("utf-8", "replace").splitlines(), {}
        yield "gzip", gzip.compress(data, mtime=0), {}
        for frac in (0.13, 0.5, 0.91):
            cut = int(len(data) * frac)
            yield f"cut/{frac}", data[:cut], {}
            yield f"cut/{frac}/stream", io.BytesIO(data[:cut]), {}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--module", default="servers.llama_server")
    args = ap.parse_args()
    mod = importlib.import_module(args.module)
    read, summary, workload = mod.read_llama_log, mod.summary, mod.workload_from_trace
    n = 0
    for path in _logs():
        raw = path.read_bytes()
        data = gzip.decompress(raw) if raw[:2] == b"\x1f\x8b" else raw
        label = f"{path.parent.name}/{path.name}"
        for way, src, kw in _ways(path, data):
            for native in (True, False):
                if isinstance(src, io.BytesIO):
                    src.seek(0)
                tr = read(src, native=native, name="x", **kw)
                wl = workload(tr, timed=True)
                line = (f"{label} {way} {'C' if native else 're'} {_sha(tr.to_bytes())} "
                        f"{_sha(json.dumps(summary(tr), sort_keys=True).encode())} "
                        f"{_sha(json.dumps(wl.to_json(), sort_keys=True).encode())}")
                print(line, flush=True)
                n += 1
    print(f"# {n} reads", flush=True)


if __name__ == "__main__":
    main()
