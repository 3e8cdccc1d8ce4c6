"""User inputs the core checks before it runs them: an uploaded workload file.

Above sim.workload (which only reads and writes workloads): the check needs the scheduler's
config rules and the registered schedulers' names.
"""
from __future__ import annotations

from . import public_traces
from .scheduler import SchedulerConfig
from .simulate import scheduler_names
from .limits import check_config_values
from .versions import check_options
from .workload import Workload, read_json


def read_capped(path: str, max_bytes: int) -> bytes:
    """A user's file, read up to `max_bytes` (/dev/zero, or a file of gigabytes, stops there):
    ValueError (one sentence) past it; OSError as open() gives it."""
    with open(path, "rb") as f:
        data = f.read(max_bytes + 1)
    if len(data) > max_bytes:
        size = f"{max_bytes >> 30} GiB" if max_bytes >= 1 << 30 else f"{max_bytes >> 20} MB"
        raise ValueError(f"it is over {size}, more than such a file read here may be")
    return data


def ignored_trace_options(workload, **options) -> str | None:
    """The warning for --limit / --rate-scale given with a workload JSON (they are a public
    trace's: a workload JSON keeps its own arrivals and every request), or None."""
    given = [f"--{k.replace('_', '-')}" for k, v in options.items()
             if v is not None and v != (1.0 if k == "rate_scale" else None)]
    if not given or getattr(workload, "source", None):
        return None
    return (f"warning: {', '.join(given)} {'applies' if len(given) == 1 else 'apply'} to public traces, not to a "
            "workload JSON: ignored")


def parse_workload(data: bytes, name: str = "", *, limit: int | None = None, rate_scale: float = 1.0,
                   progress=None) -> Workload:
    """An uploaded workload file (the oracle's JSON), checked; ValueError with a plain message
    if it is not one: not UTF-8, not JSON, a request missing a field, no requests, or a config
    the scheduler would refuse (unknown scheduler, policy or key; a knob out of range).

    Recognised by content (plain or gzip): a public request trace (Azure, BurstGPT, Mooncake)
    becomes a sim.public_traces.TraceWorkload (its first `limit` requests, arrivals sped up by
    `rate_scale`, progress(done, total) in bytes while reading); text that is neither a trace
    nor JSON is refused with one line naming the formats read here (a
    sim.public_traces.UnknownFormat: public_traces.FORMATS spells them out)."""
    data = public_traces.unzip(data)
    kind = public_traces.sniff(data)
    if kind is not None:
        return public_traces.read_trace(data, name, kind=kind, limit=limit, rate_scale=rate_scale, progress=progress)
    if data.removeprefix(b"\xef\xbb\xbf").lstrip()[:1] not in (b"{", b"["):  # no JSON: say what would be read
        raise public_traces.UnknownFormat(public_traces.not_a_known_format(data))
    try:
        doc = read_json(data)
    except ValueError:  # JSON lines that are no trace read here: say what would have been
        problem = public_traces.json_lines_problem(data)
        if problem is None:
            raise
        raise public_traces.UnknownFormat(problem) from None
    try:
        wl = Workload.from_json(doc, name=name)
    except (KeyError, TypeError) as e:
        raise ValueError(f"a request is missing a field or has a wrong type: {e}") from None
    if not wl.requests:
        raise ValueError("the workload has no requests")
    check_config(wl.config)
    return wl


def check_config(config) -> None:
    """ValueError with a plain message for a config the scheduler would refuse: not an object,
    an unknown scheduler, policy or key, a knob of the wrong type or out of range."""
    check_config_values(config)  # types and ranges of the knobs validate() leaves alone (sim/limits.py)
    cfg = dict(config)
    scheduler = cfg.pop("scheduler", "vllm")
    if scheduler not in scheduler_names():
        raise ValueError(f"unknown scheduler {scheduler!r} in config; known: {', '.join(scheduler_names())}")
    try:
        check_options(SchedulerConfig.from_dict(cfg).validate(), scheduler)  # async needs the vllm scheduler
    except TypeError as e:
        raise ValueError(f"bad config: {e}") from None
