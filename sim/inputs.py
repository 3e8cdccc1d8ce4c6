"""User inputs the core checks before it runs them: an uploaded workload file.

Above sim.workload (which only reads and writes workloads): the check needs the scheduler's
config rules and the registered schedulers' names.
"""
from __future__ import annotations

from .scheduler import SchedulerConfig
from .simulate import scheduler_names
from .workload import Workload, read_json


def parse_workload(data: bytes, name: str = "") -> Workload:
    """An uploaded workload file (the oracle's JSON), checked; ValueError with a plain message
    if it is not one: not UTF-8, not JSON, a request missing a field, no requests, or a config
    the scheduler would refuse (unknown scheduler, policy or key; a knob out of range)."""
    doc = read_json(data)
    try:
        wl = Workload.from_json(doc, name=name)
    except (KeyError, TypeError) as e:
        raise ValueError(f"a request is missing a field or has a wrong type: {e}") from None
    if not wl.requests:
        raise ValueError("the workload has no requests")
    cfg = dict(wl.config)
    scheduler = cfg.pop("scheduler", "vllm")
    if scheduler not in scheduler_names():
        raise ValueError(f"unknown scheduler {scheduler!r} in config; known: {', '.join(scheduler_names())}")
    try:
        SchedulerConfig.from_dict(cfg).validate()
    except TypeError as e:
        raise ValueError(f"bad config: {e}") from None
    return wl
