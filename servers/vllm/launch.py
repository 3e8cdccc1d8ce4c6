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
import time
from pathlib import Path

from .load import wait_ready

ROOT = Path(__file__).resolve().parents[2]
RECORDER = "servers.vllm.recorder.RecordingScheduler"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def spawn(python: str, model: str, trace: str | None, args: dict, *, log=None, env: dict | None = None,
          scheduler_cls: str | None = RECORDER, port: int | None = None) -> tuple[subprocess.Popen, str]:
    """The server's process and URL, started but not waited for (a fleet starts its replicas
    together, then waits: start-up is most of a short run). args: vLLM's flags without the
    dashes; True is a bare flag, False leaves it out (stats logging is off but where
    `enable-logging-iteration-details` asks for a log line per step). trace None: no recorder.
    The process is the leader of its own session, so that stop() reaches its engine's processes
    too."""
    port = port or free_port()
    cmd = [python, "-m", "vllm.entrypoints.openai.api_server", "--model", str(model), "--host", "127.0.0.1",
           "--port", str(port), "--enforce-eager",
           "--shutdown-timeout", "10"]   # drain what is in flight before stopping
    if not args.get("enable-logging-iteration-details"):   # its per-step lines come from the stats logger
        cmd.append("--disable-log-stats")
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
    return proc, f"http://127.0.0.1:{port}"


def start(python: str, model: str, trace: str | None, args: dict, *, log=None, env: dict | None = None,
          scheduler_cls: str | None = RECORDER, timeout_s: float = 300.0) -> tuple[subprocess.Popen, str]:
    """The server's process and URL (spawn), once it answers /health."""
    proc, url = spawn(python, model, trace, args, log=log, env=env, scheduler_cls=scheduler_cls)
    try:
        wait_ready(url, timeout_s, proc)
    except BaseException:
        stop(proc)
        raise
    return proc, url


ENGINE_TITLE = "VLLM::EngineCor"   # the engine core's process title (setproctitle, cut to 15 characters)


def session(pid: int) -> list[tuple[int, str, list[str]]]:
    """(pid, title, the fields of /proc/PID/stat after the title) of every live process in the
    session `pid` leads (a server started here leads its own: start_new_session)."""
    out = []
    for d in Path("/proc").iterdir():
        if not d.name.isdigit():
            continue
        try:
            fields = (d / "stat").read_text().rsplit(")", 1)[1].split()
            title = (d / "comm").read_text().strip()
        except (OSError, IndexError):
            continue
        if int(fields[3]) == pid and fields[0] != "Z":
            out.append((int(d.name), title, fields))
    return out


def _alive(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
    except (OSError, IndexError):
        return False


def stop_all(procs: list[subprocess.Popen], timeout_s: float = 60.0) -> None:
    """Stop servers together: SIGINT to each one's engine core first, so that it drains and shuts
    its scheduler down (the recorder writes its `end` line), then SIGINT to each server's
    process group, then SIGKILL to what still runs after timeout_s. A SIGINT to the whole group
    at once races: the API server's own shutdown sends the engine a SIGTERM while it tears down,
    after it has put the default handler back, and the engine dies before its scheduler's
    shutdown (vLLM 0.32.0 here, about one replica in two)."""
    live = [p for p in procs if p.poll() is None]
    engines = [pid for p in live for pid, title, _ in session(p.pid) if title.startswith(ENGINE_TITLE)]
    for pid in engines:
        try:
            os.kill(pid, signal.SIGINT)
        except ProcessLookupError:
            pass
    end = time.monotonic() + min(timeout_s, 30.0)
    while engines and time.monotonic() < end:
        engines = [pid for pid in engines if _alive(pid)]
        time.sleep(0.1)
    for p in live:
        try:
            os.killpg(p.pid, signal.SIGINT)
        except ProcessLookupError:
            pass
    end = time.monotonic() + timeout_s
    for p in live:
        try:
            p.wait(max(end - time.monotonic(), 0.1))
        except subprocess.TimeoutExpired:
            try:
                os.killpg(p.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            p.wait()


def stop(proc: subprocess.Popen, timeout_s: float = 60.0) -> int:
    """Stop one server (stop_all): the engine first, then the server; its exit status."""
    stop_all([proc], timeout_s)
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
