"""The config search on a Ray cluster (Ray 2.58; optional: `pip install ray==2.58.0`).

    rows = run_ray(job, configs, "local")            # starts a local cluster, stops it after
    rows = run_ray(job, configs, "10.0.0.5:6379")    # joins a running one (`ray start --head`)

One actor per CPU of the cluster, each holding the workload (sent once to the object store,
parsed once per actor), takes configs as they free up; rows come back by index, so the table
is the one sim.search.run_local makes (fleet configs too: the job is the same, and sim/fleet
travels with sim). Ray is imported here only, inside the functions: the core imports without it.

The `sim` package travels to the cluster with the job (runtime_env py_modules), so a node
needs only the same Python, numpy and pandas, not a checkout of this repo.
"""
from __future__ import annotations

import os
import time
from pathlib import Path

from .search import Progress, Runner, SearchJob, gather

SIM_DIR = str(Path(__file__).resolve().parent)
# A local cluster's shared-memory object store: the workload is the only object (a 100k-request
# workload is ~10 MB of JSON), so a small store spares /dev/shm for everyone else on the machine
LOCAL_OBJECT_STORE_BYTES = 256 * 2**20


class SearchActor:
    """Runs configs of one job on a Ray worker (made a Ray actor class in run_ray)."""

    def __init__(self, job: SearchJob):
        self.runner = Runner(job)

    def run(self, index: int, overrides: dict) -> tuple[int, dict, str, float]:
        import ray
        node = ray.get_runtime_context().get_node_id()
        t0 = time.perf_counter()
        row = self.runner.run(overrides)
        return index, row, f"{node}:{os.getpid()}", time.perf_counter() - t0


def connect(address: str, num_cpus: int | None = None):
    """ray.init for the search: "local" starts a cluster of `num_cpus` CPUs (default: all of this
    machine's), anything else is an existing cluster's address. Returns the ray module."""
    try:
        import ray
    except ImportError:
        raise ValueError("Ray is not installed: pip install ray==2.58.0 (it is in requirements-dev.txt)") from None
    runtime_env = {"py_modules": [SIM_DIR]}
    kw = dict(log_to_driver=False, runtime_env=runtime_env, ignore_reinit_error=True)
    if address in ("", "local"):
        # Ray runs its workers at nice 15: on a machine shared with other work, the search's actors
        # then get a sliver of the CPU (measured here: 1.25 s against 75 ms a tiny config). A cluster
        # of one's own starts them at the usual priority; a joined cluster keeps its nodes' setting
        # (start them with RAY_worker_niceness=0 for the same)
        os.environ.setdefault("RAY_worker_niceness", "0")
        ray.init(num_cpus=num_cpus or os.cpu_count() or 1, include_dashboard=False,
                 object_store_memory=LOCAL_OBJECT_STORE_BYTES, **kw)
    else:
        try:
            ray.init(address=address, **kw)
        except (ConnectionError, RuntimeError, ValueError) as e:
            raise ValueError(f"cannot join the Ray cluster at {address}: {e}") from None
    return ray


class RaySearch:
    """A search on a Ray cluster (see connect), started now and collected as it goes, like
    sim.search.LocalSearch: poll(), results(), cancel(); close() (or the last result) leaves the
    cluster (and stops a local one). One actor per CPU of the cluster holds the workload."""

    def __init__(self, job: SearchJob, configs: list[dict], address: str = "local", num_cpus: int | None = None):
        self.ray = ray = connect(address, num_cpus)
        try:
            from ray.util import ActorPool
            cpus = int(ray.cluster_resources().get("CPU", 1))
            actor = ray.remote(num_cpus=1)(SearchActor)
            job_ref = ray.put(job)
            self.actors = [actor.remote(job_ref) for _ in range(max(1, min(cpus, len(configs))))]
            self.pool = ActorPool(self.actors)
            for task in enumerate(configs):  # the pool hands them out as actors free up
                self.pool.submit(lambda a, t: a.run.remote(*t), task)
        except BaseException:
            ray.shutdown()
            raise
        self.left = len(configs)
        self.total = len(configs)

    @property
    def done(self) -> bool:
        return self.left == 0

    def _next(self, timeout: float | None):
        out = self.pool.get_next_unordered(timeout=timeout)
        self.left -= 1
        if not self.left:
            self.close()
        return out

    def poll(self, timeout: float) -> list[tuple]:
        """Results finished within `timeout` seconds."""
        out, t_end = [], time.perf_counter() + timeout
        while self.left:
            try:
                out.append(self._next(max(0.01, t_end - time.perf_counter())))
            except TimeoutError:
                break
            if time.perf_counter() >= t_end:
                break
        return out

    def results(self):
        while self.left:
            yield self._next(None)

    def cancel(self) -> None:
        self.left = 0
        for a in self.actors:
            self.ray.kill(a)
        self.close()

    def close(self) -> None:
        if self.ray.is_initialized():
            self.ray.shutdown()


def run_ray(job: SearchJob, configs: list[dict], address: str = "local", num_cpus: int | None = None,
            progress: Progress | None = None, placement: list | None = None,
            timings: list | None = None) -> list[dict]:
    """Every config's row, in the configs' order, run on a Ray cluster (see connect). `placement`,
    when given, gets "node_id:pid" of the actor that ran each config; `timings` the seconds each
    took in its actor."""
    search = RaySearch(job, configs, address, num_cpus)
    try:
        return gather(search.results(), len(configs), progress, placement, timings)
    finally:
        search.close()
