"""What an uploaded vLLM recording costs in memory on the server, to set the upload cap by
(.streamlit/config.toml maxUploadSize, sim/limits.MAX_JSON_BYTES).

    .venv/bin/python bench/bench_upload_cap.py [REC.jsonl.gz] [--steps 20000,50000,150000]

For each size, the first N steps of a long recording (bench/make_long_recording.py's, by default
/tmp/issue27/data/long150k.jsonl.gz) are written gzipped and plain; a fresh process reads each
as the vLLM server page does with an upload (the file's bytes in memory, read_recording, to_trace)
and reports its peak RSS over the same process's after the imports. Printed per file: MB on disk,
MB of text, the peak, and MB of peak per MB uploaded: the cap is the per-session memory budget
divided by the worst of those (plus the upload itself, which Streamlit keeps while it is shown).
"""
from __future__ import annotations

import argparse
import gzip
import json
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

CHILD = r"""
import resource, sys, json
sys.path.insert(0, sys.argv[2])
from servers.vllm.recording import read_recording, to_trace
import sim.metrics
base = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
data = open(sys.argv[1], "rb").read()
tr = to_trace(read_recording(data))
peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
print(json.dumps({"steps": len(tr.steps), "base_mb": base / 1024, "peak_mb": peak / 1024}))
"""


def cut(src: Path, steps: int, out: Path) -> tuple[Path, Path]:
    """The first `steps` step lines of src (with what comes before them), as .jsonl and .jsonl.gz."""
    plain, gz = out / f"rec{steps}.jsonl", out / f"rec{steps}.jsonl.gz"
    n = 0
    with gzip.open(src, "rb") as f, open(plain, "wb") as p:
        for line in f:
            if b'"kind":"step"' in line[:20]:
                n += 1
                if n > steps:
                    break
            p.write(line)
    with open(plain, "rb") as p, gzip.open(gz, "wb", 6) as g:
        g.write(p.read())
    return plain, gz


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("source", nargs="?", type=Path, default=Path("/tmp/issue27/data/long150k.jsonl.gz"))
    ap.add_argument("--steps", default="20000,50000,150000")
    a = ap.parse_args()
    print(f"load before: {Path('/proc/loadavg').read_text().split()[:3]}")
    with tempfile.TemporaryDirectory() as tmp:
        for steps in (int(x) for x in a.steps.split(",")):
            plain, gz = cut(a.source, steps, Path(tmp))
            text_mb = plain.stat().st_size / 2**20
            for f in (gz, plain):
                out = subprocess.run([sys.executable, "-c", CHILD, str(f), str(ROOT)], capture_output=True,
                                     text=True, check=True)
                r = json.loads(out.stdout)
                size = f.stat().st_size / 2**20
                grew = r["peak_mb"] - r["base_mb"]
                print(f"{f.name:>22}: {r['steps']:>7,} steps, {size:7.1f} MB uploaded, {text_mb:7.1f} MB of text; "
                      f"peak {r['peak_mb']:7.0f} MB RSS ({grew:6.0f} MB over the imports' {r['base_mb']:.0f}): "
                      f"{grew / size:5.2f} MB per MB uploaded, {grew / text_mb:5.2f} per MB of text")
            plain.unlink()
            gz.unlink()
    print(f"load after: {Path('/proc/loadavg').read_text().split()[:3]}")


if __name__ == "__main__":
    main()
