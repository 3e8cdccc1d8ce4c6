"""The recorder (servers/vllm/recorder.py) inside another vLLM's own scheduler classes: each
workload is run, without a model, through that vLLM's Scheduler and its AsyncScheduler (with the
engine's batch queue) with the recorder plugged in, and each recording is
read back and re-simulated: every step must be the same (servers.vllm.compare.decisions). This is
how the versions in servers/vllm/format.py's CHECKED_WITH were checked. Not part of CI (it needs
a vLLM wheel in a venv of its own: bench/vllm_oracle/requirements.txt for 0.34.0).

    python bench/vllm_oracle/check_recorder.py --python /tmp/oracle034/bin/python [--out DIR] [WORKLOAD ...]

Without workloads: the committed random draws (tests/fixtures/vllm034_random; their cache-aware
admission settings are dropped for a vLLM before 0.34, which has none, and their watermark before
0.24). The loops are the project's harness: trace034.py's (it runs 0.8.0 to 0.34.0).
Prints one line per recording that differs and the counts; exits 1 if any differs. Then, for
the synchronous recordings that carry block ids, whether the simulator hands each request the same
block ids in the same steps (a block a request took and lost to preemption inside one schedule()
is left out: the recording cannot see it); those that differ are named, and counted apart.
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
HERE = Path(__file__).resolve().parent
DRAWS = ROOT / "tests" / "fixtures" / "vllm034_random"


def _record(out: Path, workloads: list[str]) -> None:
    """Child, on the vLLM's Python: write OUT/<name>.<mode>.jsonl for each workload."""
    sys.path[:0] = [str(ROOT), str(HERE), str(ROOT / "tests" / "fixtures" / "vllm")]
    import make_random
    import trace034   # vLLM's CPU environment (set before vLLM is imported), its loop (0.8-0.34; async from 0.10)
    from vllm import __version__ as version
    try:
        import vllm.v1.core.sched.async_scheduler as async_mod
    except ImportError:   # 0.9 and before: sync only
        async_mod = None
    try:
        import vllm.v1.core.sched.scheduler as sched_mod
    except ModuleNotFoundError as e:   # 0.8.1 and before: one module
        if e.name not in ("vllm.v1.core.sched", "vllm.v1.core.sched.scheduler"):
            raise
        import vllm.v1.core.scheduler as sched_mod
    from servers.vllm import recorder

    made = []   # the schedulers made, so that each recording is closed when its run ends

    def noted(cls):
        class Noted(cls):
            def __init__(self, *a, **kw):
                super().__init__(*a, **kw)
                made.append(self)
        return Noted   # (the header names the recorder's class it comes from)

    sched_mod.Scheduler = noted(recorder.RecordingScheduler)
    if async_mod is not None:
        async_mod.AsyncScheduler = noted(recorder.AsyncRecordingScheduler)
    out.mkdir(parents=True, exist_ok=True)
    for path in workloads:
        wl = json.loads(Path(path).read_text())
        if not version.startswith("0.34"):   # as that vLLM can run it (no cache-aware admission; ...)
            make_random.for_older(wl, version)
            if not trace034._has_priority() and wl["config"].get("policy") == "priority":
                continue   # (0.9.1 and before: FCFS only)
        wl.setdefault("config", {}).pop("vllm_version", None)
        name = Path(path).name.removesuffix(".workload.json")
        for mode in ("sync", "async") if async_mod is not None else ("sync",):
            os.environ["SCHEDLAB_VLLM_TRACE"] = str(out / f"{name}.{mode}.jsonl")
            try:
                with open(os.devnull, "w") as sink:
                    trace034.trace(wl, sink, mode == "async", drain=True)   # as the engine would
            except AssertionError:
                # 0.9 to 0.10.1 assert when a priority victim was already scheduled in its step: the
                # engine dies there, and so the recording has no end to hold
                print(f"STOPPED: {name}.{mode}: vLLM raised an AssertionError", flush=True)
                Path(os.environ["SCHEDLAB_VLLM_TRACE"]).unlink(missing_ok=True)
            for s in made:
                if s._rec is not None:
                    s._rec.close()
                    s._rec = None
            made.clear()


def block_ids_differ(rec) -> str | None:
    """Where the block ids the recording says each request took part from the simulator's, or None
    (the same, step by step)."""
    from servers.vllm.recording import mode_config, to_trace, to_workload
    from sim.simulate import simulate
    theirs = to_trace(rec).kv
    run = simulate(to_workload(rec), mode_config(rec))
    ours, keys = run.kv, ["step", "block", "request"]
    # a block a request took and then lost to its own preemption in the same schedule(): unseen
    pre = run.events[run.events.kind == "preempt"][["step", "request"]]
    lost = ours[ours.op == "release"].merge(pre, on=["step", "request"])[keys].drop_duplicates()
    took = ours[ours.op == "acquire"].merge(lost, on=keys, how="left", indicator=True)
    ours = took[took["_merge"] == "left_only"][keys].reset_index(drop=True)
    theirs = theirs[theirs.op == "acquire"][keys].reset_index(drop=True)
    for i, (a, b) in enumerate(zip(theirs.itertuples(index=False), ours.itertuples(index=False))):
        if tuple(map(str, a)) != tuple(map(str, b)):
            return f"acquisition {i}: recorded {tuple(a)}, simulated {tuple(b)}"
    return None if len(theirs) == len(ours) else f"{len(theirs)} acquisitions recorded, {len(ours)} simulated"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--python", help="a Python with the vLLM to check")
    ap.add_argument("--out", help="keep the recordings here (default: a temporary folder)")
    ap.add_argument("--record", help=argparse.SUPPRESS)   # the child's mode: record into this folder
    ap.add_argument("workloads", nargs="*")
    a = ap.parse_args()
    if a.record:
        _record(Path(a.record), a.workloads)
        return 0
    if not a.python:
        ap.error("--python is required")
    workloads = a.workloads or sorted(map(str, DRAWS.glob("*.workload.json")))
    sys.path.insert(0, str(ROOT))
    from servers.vllm.compare import decisions
    from servers.vllm.recording import read_recording
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(a.out or tmp)
        child = subprocess.run([a.python, __file__, "--record", str(out), *workloads], check=True,
                               capture_output=True, text=True)
        for line in child.stdout.splitlines():
            if line.startswith("STOPPED"):
                print(line)
        same = differ = ids_same = ids_differ = 0
        versions = set()
        for rec_path in sorted(out.glob("*.jsonl")):
            rec = read_recording(rec_path)
            versions.add(rec.header.get("vllm"))
            d = decisions(rec)
            if d.get("equal"):
                same += 1
            else:
                differ += 1
                print(f"DIFFERENT: {rec_path.name}: {d.get('first_difference')}")
            if rec.header.get("block_ids") and ".sync." in rec_path.name:
                where = block_ids_differ(rec)
                ids_same += where is None
                ids_differ += where is not None
                if where:
                    print(f"OTHER BLOCK IDS: {rec_path.name}: {where}")
    print(f"vLLM {', '.join(sorted(map(str, versions)))}: {same} recordings re-simulated step for step, "
          f"{differ} differ; block ids: {ids_same} sync recordings the simulator's, {ids_differ} not")
    return 1 if differ else 0


if __name__ == "__main__":
    sys.exit(main())
