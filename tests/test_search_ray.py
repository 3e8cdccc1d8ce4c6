"""The config search on a real two-node Ray cluster on this machine: `ray start --head` and a second
`ray start --address`, then `python -m sim search --ray ADDRESS`; its CSV must equal the local
`--workers 2` one byte for byte, and both nodes must have run configs.

What Ray 2.58 needs here (2 cores, 24 GB RAM, a 24 GB /dev/shm), found while writing this:
- each node starts ~8 processes (GCS, raylet, monitors, agents) taking ~6 s on 2 loaded cores; a
  cluster of two is up in ~11-15 s, a search of 8 small configs on it takes ~10 s (the whole test:
  56 s with the machine at load ~3, 104 s at load ~6);
- the object store defaults to 30% of RAM in /dev/shm per node: --object-store-memory keeps it at
  100 MB (the search puts one object, the workload);
- Ray runs its workers at nice 15 (RAY_worker_niceness): with other work on the machine they got
  a sixteenth of the CPU (1.25 s against 75 ms a tiny config); the nodes here start them at 0;
- --num-cpus=1 per node makes the search's one-actor-per-CPU land one actor on each node;
- `ray start --block` keeps each node's processes in the process group it started in, so the
  test stops exactly its own cluster (killpg on the ids it started) and never `ray stop`, which
  would stop every Ray on the machine; its output goes to a file: a full pipe stalls its shutdown;
- the head gets its own --temp-dir (the second node finds it through the head), so nothing is
  left in /tmp/ray; it must be short: Ray puts unix sockets under it and a socket's path may not
  pass 107 bytes (pytest's tmp_path is too long); usage stats are off (no network).
"""
from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
RAY = str(Path(sys.executable).with_name("ray"))
GRID = {"max_num_seqs": [4, 8], "policy": ["fcfs", "sjf"], "num_gpu_blocks": [64, 128]}
SLO = '{"ttft": 400, "tpot": 40}'


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _start_node(args: list[str], log: Path, env: dict) -> subprocess.Popen:
    with open(log, "wb") as f:
        proc = subprocess.Popen([RAY, "start", "--block", "--num-cpus=1", "--object-store-memory=100000000",
                                 "--disable-usage-stats", *args], stdout=f, stderr=subprocess.STDOUT,
                                stdin=subprocess.DEVNULL, env=env, start_new_session=True)
    deadline = time.monotonic() + 90
    while b"Ray runtime started" not in log.read_bytes():
        if proc.poll() is not None or time.monotonic() > deadline:
            _stop(proc)
            pytest.fail(f"ray start {' '.join(args)} did not come up:\n{log.read_text(errors='replace')[-4000:]}")
        time.sleep(0.2)
    return proc


def _stop(proc: subprocess.Popen) -> None:
    """Stop one node: the process group `ray start --block` leads (only what this test started)."""
    if proc.poll() is None:
        try:
            os.killpg(proc.pid, signal.SIGTERM)
            proc.wait(30)
        except subprocess.TimeoutExpired:
            pass
        except ProcessLookupError:
            return
    try:
        os.killpg(proc.pid, signal.SIGKILL)  # whatever of the group is left
    except ProcessLookupError:
        pass


def _alive_nodes(address: str, env: dict) -> int:
    code = (f"import ray; ray.init(address={address!r}, log_to_driver=False); "
            f"print(sum(1 for n in ray.nodes() if n['Alive']))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=60)
    return int(out.stdout.strip().splitlines()[-1]) if out.returncode == 0 else -1


def _page_search(address: str, monkeypatch) -> tuple[str, object]:
    """The Choosing settings page's search of GRID on the cluster the server names; its CSV."""
    from streamlit.testing.v1 import AppTest

    from sim.search import Grid, to_csv
    monkeypatch.setenv("SCHEDLAB_RAY_ADDRESS", address)
    at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=150)
    params = {"cs_scenario": "random_500", "cs_knobs": ",".join(GRID), "cs_ttft": "400", "cs_tpot": "40",
              "cs_backend": "ray", **{f"cs_v_{k}": ", ".join(map(str, v)) for k, v in GRID.items()}}
    for k, v in params.items():
        at.query_params[k] = v
    at.switch_page("pages/choosing_settings.py").run()
    assert not at.exception and not at.error, (at.exception, at.error)
    assert at.radio(key="keep_cs_backend").value == "ray"
    at.button(key="cs_run_button").click().run()
    assert not at.exception and not at.error, (at.exception, at.error)
    run = at.session_state["cs_run"]
    assert not run["running"] and sorted(run["rows"]) == list(range(8))
    return to_csv(Grid.parse(GRID), [run["rows"][i] for i in range(8)]), at


@pytest.mark.timeout(300)
def test_search_on_a_two_node_ray_cluster_equals_the_local_table(tmp_path, monkeypatch):
    from sim import scenarios
    wl = tmp_path / "w.json"
    wl.write_text(scenarios.workload("random_500").dumps())
    grid = tmp_path / "grid.json"
    grid.write_text(json.dumps(GRID))
    node_env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    node_env["RAY_USAGE_STATS_ENABLED"] = "0"
    node_env["RAY_worker_niceness"] = "0"   # Ray's default, 15, starves its workers on a shared machine
    env = {**node_env, "PYTHONPATH": str(ROOT)}   # the driver's; the nodes' workers get sim from the job
    search = [sys.executable, "-m", "sim", "search", str(wl), "--grid", str(grid), "--slo", SLO, "--quiet"]

    local = subprocess.run([*search, "-o", str(tmp_path / "local.csv"), "--workers", "2"], cwd=ROOT, env=env,
                           capture_output=True, text=True, timeout=120)
    assert local.returncode == 0, local.stderr

    ray_tmp = tempfile.mkdtemp(prefix="ray", dir="/tmp")   # short: see the socket-path note above
    port = _free_port()
    address = f"127.0.0.1:{port}"
    nodes = []
    try:
        nodes.append(_start_node(["--head", f"--port={port}", "--include-dashboard=false",
                                  f"--temp-dir={ray_tmp}"], tmp_path / "head.log", node_env))
        nodes.append(_start_node([f"--address={address}"], tmp_path / "node2.log", node_env))
        deadline = time.monotonic() + 60
        while (alive := _alive_nodes(address, env)) != 2 and time.monotonic() < deadline:
            time.sleep(1)
        assert alive == 2, f"{alive} Ray nodes alive, want 2"
        # run from another directory: the workers must get `sim` from the job (py_modules), not the cwd
        ray_run = subprocess.run([*search, "-o", str(tmp_path / "ray.csv"), "--ray", address,
                                  "--placement", str(tmp_path / "where.jsonl")], cwd=tmp_path, env=env,
                                 capture_output=True, text=True, timeout=150)
        assert ray_run.returncode == 0, ray_run.stderr[-4000:]
        # the Choosing settings page, on the same cluster (named by the server: SCHEDLAB_RAY_ADDRESS)
        page_csv, page = _page_search(address, monkeypatch)
    finally:
        for proc in reversed(nodes):
            _stop(proc)
        shutil.rmtree(ray_tmp, ignore_errors=True)

    local_csv, ray_csv = (tmp_path / "local.csv").read_bytes(), (tmp_path / "ray.csv").read_bytes()
    assert ray_csv == local_csv
    assert local_csv.count(b"\n") == 1 + 8   # a header and a row per config
    where = [json.loads(line) for line in (tmp_path / "where.jsonl").read_text().splitlines()]
    assert [w["config"] for w in where] == list(range(1, 9))
    node_ids = {w["where"].split(":")[0] for w in where}
    assert len(node_ids) == 2, where   # both nodes ran configs
    assert f"on Ray ({address})" in ray_run.stdout
    assert page_csv.encode() == local_csv
    assert any(f"the cluster at `{address}`" in c.value for c in page.sidebar.caption)
