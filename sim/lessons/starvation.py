"""Scheduling policies on one server, and starvation (the lesson's Example 6), for the
Policies page.

A job ``(name, arrival, length, priority)`` is a request with a 1-token prompt generating
``length`` tokens on a server running one request at a time (sim.lessons.lesson.jobs_workload), so
the waiting-queue policy alone decides the order. Times are on the lesson's clock: a job that
the trace first schedules in step s started at s - 1 and ended at its finish step.

    jobs = parse_jobs("A,0,40,1; B,1,5,0")        # or LESSON_JOBS
    trace = simulate(jobs_workload(jobs), run_config("sjf", aging=1.0))
    service_table(trace)                          # order of service, starts, waits
    mean_wait(trace)
"""
from __future__ import annotations

import math
import re
from typing import Sequence

import pandas as pd

from ..limits import shown
from ..trace import Trace
from ..workload import Workload
from .lesson import LESSON_JOBS, jobs_workload, printed

Job = tuple[str, int, int, int]  # name, arrival, length, priority

MAX_JOBS = 60
JOB_BOUNDS = {"arrival": (0, 100_000), "length": (1, 10_000), "priority": (-1000, 1000)}
_NAME = re.compile(r"^[A-Za-z0-9_.-]{1,16}$")

# The lesson's second part: one long job at 0, then a short job every `every` units.
STREAM_DEFAULTS = {"long_length": 30, "count": 40, "every": 2, "length": 2}
STREAM_BOUNDS = {"long_length": (1, 2000), "count": (1, 500), "every": (1, 100), "length": (1, 100)}
LONG = "LONG"


def format_jobs(jobs: Sequence[Job]) -> str:
    """Jobs as text: ``name,arrival,length,priority`` separated by ``;`` (parse_jobs reads it back)."""
    return "; ".join(f"{n},{a},{ln},{p}" for n, a, ln, p in jobs)


def parse_jobs(text: str) -> list[Job]:
    """Jobs from text: one job per ``;`` or line, its fields ``name, arrival, length,
    priority`` separated by commas or spaces (priority may be left out: 0). ValueError with a
    plain message if the text is not that."""
    jobs: list[Job] = []
    for part in re.split(r"[;\n]+", text or ""):
        part = part.strip()
        if not part:
            continue
        fields = [f for f in re.split(r"[,\s]+", part) if f]
        if len(fields) not in (3, 4):
            raise ValueError(f"{part!r}: a job is name, arrival, length[, priority]")
        name = fields[0]
        if not _NAME.match(name):
            raise ValueError(f"{name!r}: a job name is 1-16 letters, digits, '_', '-' or '.'")
        try:
            nums = [int(f) for f in fields[1:]]
        except ValueError:
            raise ValueError(f"{part!r}: arrival, length and priority are whole numbers") from None
        arrival, length, prio = (nums + [0])[:3]
        for what, v in (("arrival", arrival), ("length", length), ("priority", prio)):
            lo, hi = JOB_BOUNDS[what]
            if not lo <= v <= hi:
                raise ValueError(f"job {name}: {what} must be from {lo:,} to {hi:,}, not {shown(v)}")
        jobs.append((name, arrival, length, prio))
    if not jobs:
        raise ValueError("no jobs given")
    if len(jobs) > MAX_JOBS:
        raise ValueError(f"at most {MAX_JOBS} jobs")
    names = [j[0] for j in jobs]
    dup = sorted({n for n in names if names.count(n) > 1})
    if dup:
        raise ValueError(f"job names must differ: {', '.join(dup)} repeated")
    return jobs


def stream_jobs(long_length: int = 30, count: int = 40, every: int = 2, length: int = 2) -> list[Job]:
    """The lesson's starvation case: LONG (``long_length``) at time 0, then ``count`` short jobs
    s0, s1, ... of ``length`` arriving every ``every`` units from 0 (all priority 1)."""
    for key, v in (("long_length", long_length), ("count", count), ("every", every), ("length", length)):
        lo, hi = STREAM_BOUNDS[key]
        if not lo <= v <= hi:
            raise ValueError(f"{key} must be from {lo:,} to {hi:,}, not {v}")
    return [(LONG, 0, long_length, 1)] + [(f"s{t}", t * every, length, 1) for t in range(count)]


def run_config(policy: str, aging: float = 0.0) -> dict:
    """The scheduler settings of one run: the policy, with `aging` for the keyed policies."""
    return {"max_num_seqs": 1, "policy": policy, "aging": float(aging)}


def service_table(trace: Trace) -> pd.DataFrame:
    """One row per job in the order it started: job, tenant, priority, arrival, length, start,
    end and wait (start - arrival), on the lesson's clock; jobs that never ran are left out."""
    r = trace.requests
    first = r["first_scheduled_step"].astype("Float64")
    ran = first.notna().to_numpy()
    r = r[ran]
    start = r["first_scheduled_step"].to_numpy(dtype="int64") - 1
    out = pd.DataFrame({
        "job": r["request"].astype(str).to_numpy(),
        "tenant": r["tenant"].astype(str).to_numpy(),
        "priority": r["priority"].to_numpy(dtype="int64"),
        "arrival": r["arrival_step"].to_numpy(dtype="int64"),
        "length": r["max_tokens"].to_numpy(dtype="int64"),
        "start": start,
        "end": r["finish_step"].to_numpy(dtype="float64"),
    })
    out["wait"] = out["start"] - out["arrival"]
    return out.sort_values(["start", "arrival"], kind="stable").reset_index(drop=True)


def mean_wait(trace: Trace, decimals: int | None = 2) -> float:
    """Mean wait (start - arrival) over all jobs, printed as the lesson prints it (None: unrounded)."""
    t = service_table(trace)
    if t.empty:
        return math.nan
    w = float(t["wait"].mean())
    return printed(w, decimals) if decimals is not None else w


def start_of(trace: Trace, job: str) -> int | None:
    """When `job` started on the lesson's clock (None if it never ran)."""
    t = service_table(trace).set_index("job")
    return int(t.loc[job, "start"]) if job in t.index else None


def workload(jobs: Sequence[Job], name: str = "jobs") -> Workload:
    """jobs_workload with a name (for file names and the run cache)."""
    wl = jobs_workload(jobs)
    wl.name = name
    return wl
