"""Make the long vLLM recordings the reader benchmarks read: vLLM's own Scheduler class with the
recorder plugged in, driven without a model by the oracle harness's loop (as
tests/servers/vllm/drive_recorder.py drives it), on a seeded "production day" workload.

    .venv-vllm/bin/python bench/make_long_recording.py OUT.jsonl.gz [--requests 27000] [--steps 126000] [--seed 1]

The defaults give ~150,000 recorded steps and 27,000 requests; `--requests 65000 --steps 302000`
gives the hour-long one (~360,000 steps). The arrival rate swings over the run (a day's peaks
and troughs, 3x between them) and the KV pool is small enough that the peaks preempt, so the
reader meets every line kind a busy server writes. Prompts are recorded as token ids (the
recorder's default). The recording is written plain, then gzipped to OUT (the plain file is
removed). Prints what it made as JSON.
"""
from __future__ import annotations

import argparse
import gzip
import json
import math
import os
import random
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

CONFIG = {"num_gpu_blocks": 400, "block_size": 16, "max_num_batched_tokens": 2048, "max_num_seqs": 64,
          "policy": "fcfs", "enable_prefix_caching": False, "enable_chunked_prefill": True}


def workload(n: int, steps: int, seed: int) -> dict:
    """n requests over ~`steps` steps: arrival gaps exponential around steps/n, the rate swinging
    3x over the run; prompts and outputs lognormal (long tails), all from one seed."""
    rng = random.Random(seed)
    mean_gap = steps / n
    t, reqs = 0.0, []
    for k in range(n):
        phase = math.sin(2 * math.pi * 3 * k / n)          # three peaks a run
        rate = (1.0 + 0.5 * phase) / mean_gap            # 0.5x .. 1.5x the mean rate
        t += rng.expovariate(rate)
        prompt = min(4000, max(8, int(rng.lognormvariate(5.4, 0.8))))   # median ~220 tokens
        out = min(1000, max(1, int(rng.lognormvariate(3.6, 0.9))))      # median ~37 tokens
        reqs.append({"id": f"r{k:06d}", "prompt_len": prompt, "max_tokens": out, "arrival_step": int(t)})
    return {"name": f"long day ({n} requests, seed {seed})", "config": dict(CONFIG), "requests": reqs}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("out")
    ap.add_argument("--requests", type=int, default=27000)
    ap.add_argument("--steps", type=int, default=126000,
                    help="the steps the arrivals are spread over (the run takes ~1.19x as many)")
    ap.add_argument("--seed", type=int, default=1)
    a = ap.parse_args()
    out = Path(a.out)
    plain = out.with_suffix("") if out.suffix == ".gz" else out.with_name(out.name + ".plain")
    os.environ["SCHEDLAB_VLLM_TRACE"] = str(plain)
    os.environ["SCHEDLAB_VLLM_MAX_MB"] = "1000000"   # one file: no rotation
    sys.path[:0] = [str(ROOT), str(ROOT / "tests" / "servers" / "vllm")]
    import drive_recorder   # noqa: E402  (puts the harness on the path, sets vLLM's CPU environment)
    from servers.vllm import recorder   # noqa: E402

    drive_recorder._patch(recorder.RecordingScheduler)
    wl = workload(a.requests, a.steps, a.seed)
    t0 = time.perf_counter()
    with open(os.devnull, "w") as sink:
        rc = drive_recorder.vllm_trace.run(wl, sink, 10 * a.steps)
    drive_s = time.perf_counter() - t0
    if rc not in (None, 0):
        raise SystemExit(f"the harness stopped early (code {rc})")
    steps = adds = 0
    with open(plain, "rb") as f, gzip.GzipFile(out, "wb", mtime=0, compresslevel=6) as gz:
        for line in f:
            steps += line.startswith(b'{"kind": "step"') or line.startswith(b'{"kind":"step"')
            adds += line.startswith(b'{"kind": "add"') or line.startswith(b'{"kind":"add"')
            gz.write(line)
    size = plain.stat().st_size
    plain.unlink()
    print(json.dumps({"out": str(out), "step_lines": steps, "add_lines": adds, "text_mb": round(size / 2**20, 1),
                      "gzip_mb": round(out.stat().st_size / 2**20, 1), "drive_s": round(drive_s, 1),
                      "load": open("/proc/loadavg").read().split()[:3]}))


if __name__ == "__main__":
    main()
