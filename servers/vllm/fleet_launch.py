"""Run a small real fleet here: N recorded vLLM replicas behind a real router, driven by a seeded
open-loop client, then stopped so that every recorder ends its file (tests, fixtures).

    reps = start_replicas(model, out, 2)                    # rec-<port>.jsonl per replica, logs
    router = start_router("vllm", "cache_aware", reps, out)  # or "sglang"; router.workers: its order
    results = drive(router.url, workloads.fleet_prefixes(seed, 48), text=False)
    stop(router); stop_replicas(reps)

    python -m servers.vllm.fleet_launch record OUT --router sglang --policy cache_aware --text

The routers are the real ones of requirements-routers.txt (.venv-routers, built by
servers/vllm/make_venv.sh): vllm-router 0.1.17 (`vllm-router`) and sglang-router 0.3.2 (`smg
launch`), both on /v1/completions of plain vLLM OpenAI servers. What a replay of the fleet
needs and what is only seen at run time, found on this 2-core machine (shared/fleet/README.md):
- the router's worker order is its registry's, not the command line's, and it may change from
  one start to the next: vllm-router logs it (`Router ready | workers: [...]`), sglang-router
  answers `GET /workers` (it registers them in the background, just after it is up);
- vLLM takes the request id from the `X-Request-Id` header the routers pass on: a recording's
  add id is `cmpl-<client id>-0-<8 hex>`, which is how a request is matched to its replica;
- sglang-router refuses token-id prompts (422): it is driven with text, one word per token of
  the tiny model (tiny_model.text);
- each replica's one model thread is bound to its own core (VLLM_CPU_OMP_THREADS_BIND), both
  routers' Prometheus listeners are moved off their shared default port 29000, and everything
  listens on 127.0.0.1 only;
- a replica stopped with SIGINT drains and its recorder writes its `end` line (launch.stop).
Standard library only (the drive runs in any of the venvs).
"""
from __future__ import annotations

import argparse
import gzip
import json
import os
import re
import shutil
import subprocess
import time
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path

from . import launch, load, tiny_model, workloads

ROOT = launch.ROOT
VLLM_PY = ROOT / ".venv-vllm" / "bin" / "python"
ROUTERS_VENV = ROOT / ".venv-routers"
ROUTERS = {"vllm": ("vllm-router", "vllm-router"), "sglang": ("smg", "sglang-router")}   # kind: binary, package
# the kit's replica: a pool of 48 blocks of 32, 8 sequences, 128 tokens a step, prefix caching
# on (vLLM's default); at fleet_prefixes' defaults two replicas are busy, never full
REPLICA_ARGS = {**workloads.BASE_ARGS, "num-gpu-blocks-override": 48, "served-model-name": "m",
                "dtype": "bfloat16"}
MODEL_NAME = "m"
READY_LINE = re.compile(r"Router ready \| workers: (\[.*?\])")
ANSI = re.compile(r"\x1b\[[0-9;]*m")   # vllm-router colours its log even into a file


@dataclass
class Replica:
    proc: subprocess.Popen
    url: str
    trace: Path
    log: Path

    @property
    def port(self) -> int:
        return int(self.url.rsplit(":", 1)[1])


@dataclass
class Router:
    kind: str
    policy: str
    proc: subprocess.Popen
    url: str
    log: Path
    workers: list[str] = field(default_factory=list)   # the registry's order: the replay's replica order
    workers_json: object = None                         # sglang-router's GET /workers, as answered
    version: str = ""


def _ports(n: int) -> list[int]:
    out: list[int] = []
    while len(out) < n:
        p = launch.free_port()
        if p not in out:
            out.append(p)
    return out


def _tail(path: Path, n: int = 3000) -> str:
    try:
        return path.read_text(errors="replace")[-n:]
    except OSError:
        return ""


def start_replicas(model, out: Path, n: int = 2, *, python=VLLM_PY, args: dict | None = None,
                   timeout_s: float = 300.0) -> list[Replica]:
    """n recording vLLM servers, started together (on 2 cores, two take about a minute), each
    writing out/rec-<port>.jsonl and out/server-<port>.log; returned once all answer /health.
    If one fails, all are stopped and RuntimeError says which, with its log's end."""
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    ncpu = os.cpu_count() or 1
    reps: list[Replica] = []
    try:
        for k, port in enumerate(_ports(n)):
            trace, log = out / f"rec-{port}.jsonl", out / f"server-{port}.log"
            with open(log, "wb") as f:
                proc, url = launch.spawn(str(python), str(model), str(trace), {**REPLICA_ARGS, **(args or {})},
                                         log=f, port=port, env={"VLLM_CPU_OMP_THREADS_BIND": str(k % ncpu)})
            reps.append(Replica(proc, url, trace, log))
        end = time.monotonic() + timeout_s
        for r in reps:
            try:
                load.wait_ready(r.url, max(end - time.monotonic(), 1.0), r.proc)
            except RuntimeError as e:
                raise RuntimeError(f"replica {r.url}: {e}; its log ends:\n{_tail(r.log)}") from None
    except BaseException:
        stop_replicas(reps)
        raise
    return reps


def stop_replicas(reps: list[Replica], timeout_s: float = 60.0) -> None:
    """Stop the replicas together, each engine first so that every recorder ends its file
    (launch.stop_all)."""
    launch.stop_all([r.proc for r in reps], timeout_s)


def _get_json(url: str, timeout_s: float = 2.0):
    with urllib.request.urlopen(url, timeout=timeout_s) as r:
        return json.loads(r.read())


def sglang_workers(answer) -> list[str]:
    """The worker URLs in sglang-router's `GET /workers` answer, in its order; none until every
    listed worker is healthy (it registers them in the background and checks them first)."""
    items = answer.get("workers", answer) if isinstance(answer, dict) else answer
    items = list(items or ())
    if any(isinstance(w, dict) and w.get("is_healthy") is False for w in items):
        return []
    return [str(w.get("url")) if isinstance(w, dict) else str(w) for w in items]


def start_router(kind: str, policy: str, replicas: list[Replica], out: Path, *, venv: Path = ROUTERS_VENV,
                 extra: tuple = (), timeout_s: float = 120.0) -> Router:
    """A real router (kind "vllm" or "sglang") in front of the replicas, once it serves and knows
    its worker order (RuntimeError with its log's end if it does not within timeout_s)."""
    if kind not in ROUTERS:
        raise ValueError(f"unknown router {kind!r}; known: {', '.join(ROUTERS)}")
    binary, package = ROUTERS[kind]
    exe = Path(venv) / "bin" / binary
    if not exe.exists():
        raise RuntimeError(f"no {exe} (servers/vllm/make_venv.sh builds {venv.name})")
    port, prom = _ports(2)
    urls = [r.url for r in replicas]
    log = Path(out) / f"router-{kind}-{policy}.log"
    cmd = [str(exe)] + (["launch"] if kind == "sglang" else []) + [
        "--host", "127.0.0.1", "--port", str(port), "--worker-urls", *urls, "--policy", policy,
        "--prometheus-host", "127.0.0.1", "--prometheus-port", str(prom), "--log-level", "info", *extra]
    with open(log, "wb") as f:
        proc = subprocess.Popen(cmd, stdout=f, stderr=subprocess.STDOUT, start_new_session=True)
    router = Router(kind, policy, proc, f"http://127.0.0.1:{port}", log, version=_version(venv, package))
    try:
        load.wait_ready(router.url, timeout_s, proc)
        end = time.monotonic() + timeout_s
        while not router.workers or len(router.workers) < len(urls):
            if proc.poll() is not None or time.monotonic() > end:
                raise RuntimeError(f"the {kind} router never listed its {len(urls)} workers")
            if kind == "vllm":
                m = READY_LINE.search(ANSI.sub("", log.read_text(errors="replace")))
                router.workers = json.loads(m.group(1)) if m else []
            else:
                try:
                    router.workers_json = _get_json(router.url + "/workers")
                    router.workers = sglang_workers(router.workers_json)
                except (OSError, ValueError):
                    router.workers = []
            time.sleep(0.2)
    except BaseException as e:
        stop(router)
        if isinstance(e, RuntimeError):
            raise RuntimeError(f"{e}; its log ends:\n{_tail(log)}") from None
        raise
    return router


def _version(venv: Path, package: str) -> str:
    for d in (Path(venv) / "lib").glob(f"python*/site-packages/{package.replace('-', '_')}-*.dist-info"):
        return d.name.removesuffix(".dist-info").split("-")[1]
    return ""


def stop(router: Router) -> None:
    """SIGINT to the router's process group; its log is then rewritten without colour codes."""
    launch.stop(router.proc, timeout_s=20.0)
    try:
        router.log.write_text(ANSI.sub("", router.log.read_text(errors="replace")))
    except OSError:
        pass


def drive(url: str, requests: list[dict], *, text: bool) -> list[dict]:
    """Send the requests (workloads.fleet_prefixes) through the router, each with its id as
    X-Request-Id and its prompt as token ids or (text) as the tiny model's words; the client's
    results (load.send) with the request's group and prompt length beside."""
    sent = [{"id": r["id"], "request_id": r["id"], "max_tokens": r["max_tokens"], "at_ms": r["at_ms"],
             "prompt": tiny_model.text(r["prompt"]) if text else r["prompt"]} for r in requests]
    res = load.send(url, MODEL_NAME, sent)
    return [{**x, "group": r["group"], "prompt_len": len(r["prompt"]), "max_tokens": r["max_tokens"],
             "at_ms": r["at_ms"]} for x, r in zip(res, requests)]


def cpu_seconds(pid: int) -> float:
    """CPU seconds (user + system) used so far by every live process of the session `pid` leads."""
    return sum(int(f[11]) + int(f[12]) for _, _, f in launch.session(pid)) / os.sysconf("SC_CLK_TCK")


def _gzip(path: Path) -> Path:
    gz = path.with_name(path.name + ".gz")
    with open(path, "rb") as src, gzip.GzipFile(gz, "wb", mtime=0) as dst:
        shutil.copyfileobj(src, dst)
    path.unlink()
    return gz


def record(out: Path, kind: str, policy: str, *, text: bool, seed: int, n: int, model=None, replicas: int = 2,
           gap_s: float = 0.25, tag: str | None = None) -> dict:
    """A whole recorded run on fresh replicas: model (made if not given), replicas, router, the
    drive, the stop; the recordings, the client's file, the router's log (and sglang's
    /workers) gzipped or kept in `out`, with manifest.json, which is returned."""
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    if model is None:
        model = out / "model"
        subprocess.run([str(VLLM_PY), str(Path(__file__).with_name("tiny_model.py")), str(model)], check=True,
                       capture_output=True, timeout=300)
    tag = tag or f"{kind}-{policy}-{'text' if text else 'tokens'}"
    t0 = time.monotonic()
    reps = start_replicas(model, out, replicas)
    up_s = time.monotonic() - t0
    try:
        router = start_router(kind, policy, reps, out)
        try:
            procs = {f"rec-{r.port}": r.proc.pid for r in reps} | {"router": router.proc.pid}
            before = {k: cpu_seconds(p) for k, p in procs.items()}
            t1 = time.monotonic()
            results = drive(router.url, workloads.fleet_prefixes(seed, n, gap_s, prefix=tag), text=text)
            wall = time.monotonic() - t1
            cpu = {k: round(cpu_seconds(p) - before[k], 2) for k, p in procs.items()}
        finally:
            stop(router)
    finally:
        stop_replicas(reps)
    by_url = {r.url: r for r in reps}
    order = [by_url[u.rstrip("/")] for u in router.workers]
    client = out / f"client-{tag}.jsonl"
    client.write_text("".join(json.dumps(x) + "\n" for x in results))
    manifest = {
        "router": ROUTERS[kind][1], "version": router.version, "policy": policy,
        "prompts": "text" if text else "tokens", "seed": seed, "requests": n, "gap_s": gap_s, "tag": tag,
        "workers": router.workers, "recordings": [_gzip(r.trace).name for r in order],
        "client": _gzip(client).name, "router_log": router.log.name,
        "model": "servers/vllm/tiny_model.py (defaults)", "replica_args": REPLICA_ARGS,
        "made_by": f"python -m servers.vllm.fleet_launch record OUT --router {kind} --policy {policy}"
                   f"{' --text' if text else ''} --seed {seed} -n {n} --gap {gap_s}",
        "failed": sum(1 for x in results if x["error"]), "start_s": round(up_s, 1), "drive_s": round(wall, 1),
        "cpu_s": cpu, "loadavg": open("/proc/loadavg").read().split()[:3]}
    if router.workers_json is not None:
        (out / "workers.json").write_text(json.dumps(router.workers_json, indent=1) + "\n")
        manifest["workers_json"] = "workers.json"
    (out / "manifest.json").write_text(json.dumps(manifest, indent=1) + "\n")
    return manifest


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    p = sub.add_parser("record", help="one recorded run of a real fleet on fresh replicas (see record())")
    p.add_argument("out", type=Path)
    p.add_argument("--router", choices=list(ROUTERS), required=True)
    p.add_argument("--policy", default="cache_aware")
    p.add_argument("--text", action="store_true", help="text prompts (sglang-router needs them)")
    p.add_argument("--seed", type=int, default=7001)
    p.add_argument("-n", type=int, default=48)
    p.add_argument("--gap", type=float, default=0.25, help="mean gap between requests, seconds")
    p.add_argument("--model", type=Path, help="a tiny_model.py directory (default: made in OUT/model)")
    p.add_argument("--tag", help="request id prefix (default ROUTER-POLICY-PROMPTS)")
    a = ap.parse_args(argv)
    m = record(a.out, a.router, a.policy, text=a.text, seed=a.seed, n=a.n, model=a.model, gap_s=a.gap, tag=a.tag)
    print(json.dumps(m, indent=1))
    return 0 if not m["failed"] else 1


if __name__ == "__main__":
    raise SystemExit(main())
