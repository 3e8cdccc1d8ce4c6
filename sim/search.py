"""Config search: every combination of a grid of scheduler knobs over one workload, one row of
metrics (and goodput, given an SLO) per combination.

    grid = Grid.parse('{"max_num_seqs": [8, 16], "policy": ["fcfs", "sjf"]}')
    job = SearchJob.make(workload, cost="units", slo='{"ttft": 400}')
    configs = grid.configs()                    # the grid's product order: the last knob varies fastest
    check_configs(job.workload(), configs)      # ValueError naming the first bad one, before any run
    rows = run_local(job, configs, workers=2)   # rows[i] is configs[i]'s, whatever ran it
    text = to_csv(grid, rows)

A knob is any SchedulerConfig key (sim/scheduler.py: the budget, max sequences, KV blocks,
policy, preemption mode, ...) or "scheduler" (a registered kind). A row depends only on the
workload, its config, the cost preset and the SLO: every run is deterministic, so the table is the
same byte for byte on one process, several (run_local) or a Ray cluster (sim/search_ray.py).

Fleets (sim/fleet): a config that sets any fleet knob runs N replicas behind a router
(simulate_fleet, a Digest, no per-decision scores) and its row is the fleet's
(sim.fleet.fleet_summary's "metrics": every `sim run` number over the whole fleet, plus replicas,
load_imbalance, request_imbalance, prefix_hit_rate, ...; goodput for the whole fleet given an SLO).
Every replica gets the config's scheduler knobs. The fleet knobs:

    replicas                 1 to 1,024 (default 2)
    router                   a registered policy (sim.fleet.router_names(); default round_robin)
    router.<setting>         one of a router's settings (ROUTERS[name].defaults), e.g.
                             router.cache_threshold, router.balance_abs_threshold, router.signal
    refresh_interval         how often the router's engine-reported signals refresh (0: exact)
    response_tail            last token's step end -> the router's in-flight count drops
    router_latency           router decision -> the request reaches its replica
    router_seed              the router's seed (random, power_of_two), default 0

(times in the run's time unit; a knob the grid does not set is FleetSettings' default). The
"router." prefix keeps a router's settings apart from the scheduler's keys (policy, ...): a
SchedulerConfig key never has a dot. A router setting must belong to the config's router: to
the one router of the grid (given, or round_robin by default), else it is an error. When the
grid varies the router, a setting must belong to at least one of them and applies to those
that have it: the grid's configs leave it out for the others (their cell in the table is
empty), and configs that then come out the same are one config, so
{"router": ["round_robin", "cache_aware"], "router.cache_threshold": [0.3, 0.5]} is three
configs: round_robin, cache_aware at 0.3, cache_aware at 0.5. A config list given directly
(check_configs, run_local) is held to the strict rule.

Local workers are processes (forked from a single-threaded caller, else from a forkserver), each
handed the workload once (the pool's initializer), not once per config; LocalSearch runs them
in the background for a caller that polls (the Choosing settings page).
"""
from __future__ import annotations

import csv
import io
import itertools
import json
import math
import multiprocessing
import os
import socket
import threading
import time
from concurrent.futures import FIRST_COMPLETED, ProcessPoolExecutor, as_completed, wait
from dataclasses import dataclass, fields
from typing import Callable, Iterable

from .cost import COST_PRESETS, cost_from_preset
from .limits import MAX_JSON_DEPTH, shown, unique_keys
from .metrics import summary
from .scheduler import SchedulerConfig
from .simulate import check_fits, max_model_len_for, resolve_config, scheduler_names, simulate
from .slo import SLO, slo_summary
from .workload import Workload

MAX_CONFIGS = 10_000
MAX_STEPS = 10_000_000
_FIELD_DEFAULTS = {f.name: f.default for f in fields(SchedulerConfig)}
# columns of summary()/slo_summary() the table leaves out: the SLO itself is an input, the same in every row
_DROPPED = {"slo"}


def knob_names() -> list[str]:
    """Every scheduler knob a grid may sweep: the scheduler kind, then SchedulerConfig's keys
    (the fleet's: fleet_knob_names)."""
    return ["scheduler", *_FIELD_DEFAULTS]


# -- fleet knobs -------------------------------------------------------------------------------
FLEET_KNOBS = ("replicas", "router", "refresh_interval", "response_tail", "router_latency", "router_seed")
ROUTER_SETTING = "router."   # router.<setting>: a setting of the router (its ROUTERS[name].defaults)
_FLEET_TIMES = ("refresh_interval", "response_tail", "router_latency")


def _routers() -> dict:
    """name -> router class, every registered router (imported here: sim.fleet is only needed
    by a fleet search)."""
    from .fleet import ROUTERS, router_names
    return {n: ROUTERS[n] for n in router_names()}


def default_router() -> str:
    from .fleet.fleet import FleetSettings
    return FleetSettings().router


def router_setting_names() -> list[str]:
    """Every router setting as a knob ("router.cache_threshold", ...), each once, in the
    routers' registration order."""
    seen: dict[str, None] = {}
    for cls in _routers().values():
        seen.update((ROUTER_SETTING + k, None) for k in cls.defaults)
    return list(seen)


def fleet_knob_names() -> list[str]:
    """Every fleet knob a grid may sweep: replicas, router, the routers' settings, the signals'
    timing and the router's seed."""
    return [*FLEET_KNOBS[:2], *router_setting_names(), *FLEET_KNOBS[2:]]


def is_fleet_knob(knob: str) -> bool:
    return knob in FLEET_KNOBS or knob.startswith(ROUTER_SETTING)


def is_fleet(config: dict) -> bool:
    """Whether a config runs a fleet (it sets a fleet knob)."""
    return any(is_fleet_knob(k) for k in config)


def routers_with(setting: str) -> list[str]:
    """The routers that have `setting` (without the "router." prefix)."""
    return [n for n, cls in _routers().items() if setting in cls.defaults]


def fleet_settings(config: dict):
    """A fleet config as (sim.fleet.FleetSettings, the scheduler knobs every replica gets).
    The settings are not checked here (FleetSettings.check and make_router do that)."""
    from .fleet.fleet import FleetSettings
    d = FleetSettings()
    sched = {k: v for k, v in config.items() if not is_fleet_knob(k)}
    s = FleetSettings(replicas=config.get("replicas", d.replicas), router=config.get("router", d.router),
                      router_config={k[len(ROUTER_SETTING):]: v for k, v in config.items()
                                     if k.startswith(ROUTER_SETTING)},
                      seed=config.get("router_seed", d.seed), record_scores=False,
                      **{k: config.get(k, getattr(d, k)) for k in _FLEET_TIMES})
    return s, sched


def _check_fleet_value(knob: str, v, routers: list | None = None) -> None:
    """ValueError unless `v` suits the fleet knob (a router setting: as `routers` check it)."""
    from .fleet.fleet import MAX_REPLICAS
    if knob == "replicas":
        if isinstance(v, bool) or not isinstance(v, int) or not 1 <= v <= MAX_REPLICAS:
            raise ValueError(f"replicas must be a whole number from 1 to {MAX_REPLICAS:,}, not {_brief(v)}")
    elif knob == "router":
        names = list(_routers())
        if v not in names:
            raise ValueError(f"router {_brief(v)} is not one; known: {', '.join(names)}")
    elif knob in _FLEET_TIMES:
        if isinstance(v, bool) or not isinstance(v, (int, float)) or not _finite(v) or v < 0:
            raise ValueError(f"{knob} must be a time, 0 or more (in the run's time unit), not {_brief(v)}")
    elif knob == "router_seed":
        if isinstance(v, bool) or not isinstance(v, int) or not 0 <= v < 2**63:
            raise ValueError(f"router_seed must be a whole number, 0 or more, not {_brief(v)}")
    elif routers is not None:   # router.<setting>: as each of `routers` that has it checks it
        setting = knob[len(ROUTER_SETTING):]
        classes = _routers()
        for name in routers:
            if setting in classes[name].defaults:
                classes[name].check_config({setting: v})


def _finite(v) -> bool:
    """A finite number, a float() of it included (a JSON integer of 400 digits is not)."""
    return abs(v) <= 1e308 if isinstance(v, int) else math.isfinite(v)


def _brief(v) -> str:
    """A value as a one-line message shows it: its JSON, cut to 24 characters."""
    try:
        text = json.dumps(v)
    except (TypeError, ValueError):
        text = repr(v)
    return text if len(text) <= 24 else text[:21] + "..."


def _unknown_knob(knob: str) -> str:
    """One line: the unknown knob, the nearest known ones; `python -m sim search --help` lists them all."""
    import difflib
    if knob.startswith(ROUTER_SETTING):
        names = [k[len(ROUTER_SETTING):] for k in router_setting_names()]
        near = difflib.get_close_matches(knob[len(ROUTER_SETTING):], names, n=3)
        return (f"{knob if len(knob) <= 40 else knob[:37] + '...'} is not a setting of any router"
                + (f"; did you mean {', '.join(near)}?" if near else "") + " (sim search --help lists them)")
    near = difflib.get_close_matches(knob, list(knob_names()) + list(FLEET_KNOBS), n=3)
    return (f"unknown knob {shown(knob)} in the grid" + (f"; did you mean {', '.join(near)}?" if near else "")
            + " (sim search --help lists them)")


def knobs_help() -> str:
    """Every knob a grid may sweep, for `python -m sim search --help`."""
    import textwrap
    parts = [f"scheduler knobs: {', '.join(knob_names())}",
             f"fleet knobs: {', '.join(FLEET_KNOBS)}",
             f"router settings (router.<name>): {', '.join(k[len(ROUTER_SETTING):] for k in router_setting_names())}"]
    return "\n".join(textwrap.fill(p, 100, initial_indent="  ", subsequent_indent="    ") for p in parts)


def _check_router_settings(obj: dict) -> None:
    """The grid's router settings against its routers: each must belong to one of them."""
    settings = [k for k in obj if k.startswith(ROUTER_SETTING)]
    if not settings:
        return
    routers = obj.get("router") or [default_router()]
    classes = _routers()
    for knob in settings:
        setting = knob[len(ROUTER_SETTING):]
        if not any(setting in classes[r].defaults for r in routers):
            whose = ", ".join(routers_with(setting))
            theirs = (f"the grid's router{'s' if len(routers) > 1 else ''} ({', '.join(routers)})" if "router" in obj
                      else f"the default router ({routers[0]}: the grid sets no router)")
            raise ValueError(f"{knob} is a setting of {whose}, not of {theirs}; add {whose.split(', ')[0]} "
                             f"to the grid's router")
        for v in obj[knob]:
            try:
                _check_fleet_value(knob, v, routers)
            except ValueError as e:
                raise ValueError(f"in the grid: {e}") from None


def _check_value(knob: str, v) -> None:
    """ValueError unless `v` has the knob's type (bounds and names are SchedulerConfig.validate's)."""
    if is_fleet_knob(knob):
        _check_fleet_value(knob, v)
        return
    if knob == "scheduler":
        if v not in scheduler_names():
            raise ValueError(f"scheduler {shown(v)} is not one; known: {', '.join(scheduler_names())}")
        return
    default = _FIELD_DEFAULTS[knob]
    if knob == "max_model_len":
        ok = v is None or (isinstance(v, int) and not isinstance(v, bool) and v >= 1)
        want = "a whole number of at least 1, or null"
    elif default is None:  # an optional object (the admission's SLO targets): checked by the scheduler
        ok, want = v is None or isinstance(v, dict), "a JSON object or null"
    elif isinstance(default, bool):
        ok, want = isinstance(v, bool), "true or false"
    elif isinstance(default, int):
        ok, want = isinstance(v, int) and not isinstance(v, bool), "a whole number"
    elif isinstance(default, float):
        ok = isinstance(v, (int, float)) and not isinstance(v, bool) and _finite(v)
        want = "a number"
    else:
        ok, want = isinstance(v, str), "text"
    if not ok:
        raise ValueError(f"{knob} must be {want}, not {_brief(v)}")


def values_from_text(knob: str, text: str) -> list:
    """A knob's values typed as a comma-separated list ("8, 16, 32"; "fcfs, sjf"; "true, false"),
    as the knob's type wants them; ValueError with a plain message."""
    if knob not in knob_names() and knob not in fleet_knob_names():
        raise ValueError(f"unknown knob {shown(knob)}")
    parts = [p.strip() for p in str(text).split(",") if p.strip()]
    if not parts:
        raise ValueError(f"give {knob} at least one value")
    if knob in ("replicas", "router_seed"):
        default = 0
    elif knob in _FLEET_TIMES:
        default = 0.0
    elif knob.startswith(ROUTER_SETTING):
        classes = _routers()
        setting = knob[len(ROUTER_SETTING):]
        default = classes[routers_with(setting)[0]].defaults[setting]
    else:
        default = _FIELD_DEFAULTS.get(knob, "")
    out = []
    for p in parts:
        try:
            if isinstance(default, bool):
                if p.lower() not in ("true", "false"):
                    raise ValueError
                out.append(p.lower() == "true")
            elif isinstance(default, int) or knob == "max_model_len":
                out.append(int(p))
            elif isinstance(default, float):
                out.append(float(p))
            else:
                out.append(p)
        except ValueError:
            want = "true or false" if isinstance(default, bool) else "whole numbers" if isinstance(
                default, int) or knob == "max_model_len" else "numbers"
            raise ValueError(f"{knob} takes {want}, not {shown(p)}") from None
    return out


@dataclass(frozen=True)
class Grid:
    """Knob -> the values to try, in the order given."""

    knobs: tuple[str, ...]
    values: tuple[tuple, ...]

    @classmethod
    def parse(cls, obj) -> "Grid":
        """From a dict or JSON text {"knob": [value, ...], ...}; ValueError with a plain message."""
        if isinstance(obj, (str, bytes)):
            try:
                obj = json.loads(obj, object_pairs_hook=unique_keys)   # a knob twice: said, not last-wins
            except (json.JSONDecodeError, UnicodeDecodeError) as e:
                raise ValueError(f"the grid is not valid JSON ({getattr(e, 'msg', e)})") from None
            except RecursionError:   # 200,000 "[" in a row (sim.limits.load_json says the same)
                raise ValueError(f"the grid nests lists or objects too deep; at most {MAX_JSON_DEPTH} levels "
                                 "are read") from None
            except ValueError as e:   # a key twice, or an integer of over 4,300 digits
                if "twice in one object" in str(e):
                    raise ValueError(f"the grid {e}") from None
                raise ValueError("the grid holds a number of thousands of digits") from None
        if not isinstance(obj, dict):
            raise ValueError('the grid must be a JSON object of knob -> list of values, like {"max_num_seqs": [8, 16]}')
        known = set(knob_names())
        if any(is_fleet_knob(k) for k in obj):
            known.update(fleet_knob_names())
        unknown = [k for k in obj if k not in known]
        if unknown:
            raise ValueError(_unknown_knob(unknown[0]))
        n = 1
        for knob, vals in obj.items():
            if not isinstance(vals, list) or not vals:
                raise ValueError(f"the grid's {knob} must be a non-empty list of values, not {_brief(vals)}")
            for v in vals:
                try:
                    _check_value(knob, v)
                except ValueError as e:
                    raise ValueError(f"in the grid: {e}") from None
            texts = [json.dumps(v) for v in vals]
            if len(set(texts)) != len(texts):
                raise ValueError(f"the grid's {knob} lists a value twice")
            n *= len(vals)
        if n > MAX_CONFIGS:
            raise ValueError(f"the grid has {n:,} combinations; at most {MAX_CONFIGS:,}")
        _check_router_settings(obj)
        return cls(tuple(obj), tuple(tuple(v) for v in obj.values()))

    def configs(self) -> list[dict]:
        """Every combination as config overrides, in product order (the last knob fastest). A
        router setting is left out of the combinations whose router does not have it, and a
        combination that then repeats an earlier one is dropped (see the module's docstring)."""
        combos = [dict(zip(self.knobs, combo)) for combo in itertools.product(*self.values)]
        if not any(k.startswith(ROUTER_SETTING) for k in self.knobs):
            return combos
        classes, default = _routers(), default_router()
        out, seen = [], set()
        for c in combos:
            cls = classes.get(c.get("router", default))
            if cls is not None:
                c = {k: v for k, v in c.items()
                     if not k.startswith(ROUTER_SETTING) or k[len(ROUTER_SETTING):] in cls.defaults}
            key = json.dumps(c, sort_keys=True)
            if key not in seen:
                seen.add(key)
                out.append(c)
        return out

    def __len__(self) -> int:
        if any(k.startswith(ROUTER_SETTING) for k in self.knobs):
            return len(self.configs())
        return math.prod(len(v) for v in self.values)

    def to_json(self) -> dict:
        return {k: list(v) for k, v in zip(self.knobs, self.values)}


def describe(config: dict) -> str:
    return ", ".join(f"{k}={json.dumps(v)}" for k, v in config.items()) or "the workload's own config"


def _describe_brief(config: dict, room: int = 100) -> str:
    """describe() for a one-line refusal: each value cut, at most `room` characters (12 or more) in all."""
    room = max(room, 12)
    text = ", ".join(f"{k}={_brief(v)}" for k, v in config.items()) or "the workload's own config"
    return text if len(text) <= room else text[:room - 3] + "..."


def check_configs(workload: Workload, configs: Iterable[dict]) -> None:
    """Every config over `workload` as the simulator will read it: known values in range, a KV pool
    that holds the longest request. ValueError naming the first that fails."""
    configs = list(configs)
    for i, overrides in enumerate(configs):
        try:
            sched = overrides
            if is_fleet(overrides):
                from .fleet import make_router
                settings, sched = fleet_settings(overrides)
                settings.check()
                make_router(settings.router, settings.replicas, settings.router_config, settings.seed)
            cfg, mode = resolve_config(workload, sched)
            if mode not in scheduler_names():
                raise ValueError(f"unknown scheduler {shown(mode)}; known: {', '.join(scheduler_names())}")
            cfg.validate()
            check_fits(workload, cfg, max_model_len_for(workload, cfg))
        except (ValueError, TypeError) as e:
            head = f"config {i + 1} of {len(configs)}"
            room = 200 - len(f"{head} (): {e}")   # the whole refusal one line of at most 200 characters
            raise ValueError(f"{head} ({_describe_brief(overrides, room)}): {e}") from None


@dataclass(frozen=True)
class SearchJob:
    """What every worker needs, sent once to each: the workload (as JSON text), the cost preset
    and the SLO (its canonical JSON, or "" for none)."""

    workload_json: str
    name: str = ""
    cost: str = "units"
    slo_json: str = ""

    @classmethod
    def make(cls, workload: Workload, cost: str = "units", slo=None) -> "SearchJob":
        if cost not in COST_PRESETS:
            raise ValueError(f"unknown cost preset {cost!r}; known: {', '.join(COST_PRESETS)}")
        parsed = None if slo is None or slo == "" else SLO.parse(slo)
        slo_json = json.dumps(parsed.to_json(), sort_keys=True) if parsed is not None and not parsed.empty else ""
        return cls(json.dumps(workload.to_json()), workload.name, cost, slo_json)

    def workload(self) -> Workload:
        return Workload.from_json(json.loads(self.workload_json), name=self.name)


class Runner:
    """Runs configs of one job (the workload parsed once)."""

    def __init__(self, job: SearchJob):
        self.job = job
        self.workload = job.workload()
        self.slo = SLO.parse(job.slo_json) if job.slo_json else None

    def run(self, overrides: dict) -> dict:
        """One config's flat metrics row; {"error": message} when it cannot run to the end."""
        if is_fleet(overrides):
            return self.run_fleet(overrides)
        try:
            # a Digest, not the Trace: the row reads a dozen numbers, not tens of millions of token rows
            trace = simulate(self.workload, overrides, cost=cost_from_preset(self.job.cost), max_steps=MAX_STEPS,
                             digest=True)
        except (ValueError, RuntimeError) as e:
            return {"error": str(e)}
        row = summary(trace)
        if self.slo is not None:
            row.update(slo_summary(trace, self.slo))
        return {k: v for k, v in row.items() if k not in _DROPPED}

    def run_fleet(self, overrides: dict) -> dict:
        """A fleet config's row: fleet_row of its run (a Digest per replica, no scores kept)."""
        from .fleet.fleet import simulate_fleet
        settings, sched = fleet_settings(overrides)
        try:
            fleet = simulate_fleet(self.workload, settings, sched, cost=cost_from_preset(self.job.cost), digest=True)
        except (ValueError, RuntimeError) as e:
            return {"error": str(e)}
        return {k: v for k, v in fleet_row(fleet, self.slo).items() if k not in _DROPPED}


def fleet_row(fleet, slo: SLO | None = None) -> dict:
    """sim.fleet.fleet_summary(fleet, slo)["metrics"], without the per-replica tenant-fairness
    numbers the fleet's row leaves out (a steps x tenants x tenants pass: minutes and gigabytes
    at 64 replicas x 100k requests with many tenants)."""
    from .fleet import fleet_summary
    return fleet_summary(fleet, slo, fairness=False)["metrics"]


def where() -> str:
    """Which process ran a config (host:pid), for a placement log."""
    return f"{socket.gethostname()}:{os.getpid()}"


# -- local worker processes ------------------------------------------------------------------
_RUNNER: Runner | None = None


def _init_worker(job: SearchJob) -> None:
    global _RUNNER
    _RUNNER = Runner(job)


def _run_in_worker(index: int, overrides: dict) -> tuple[int, dict, str, float]:
    t0 = time.perf_counter()
    row = _RUNNER.run(overrides)
    return index, row, where(), time.perf_counter() - t0


Progress = Callable[[int, int, int, str], None]  # (done, total, index, where)


def gather(results: Iterable[tuple[int, dict, str, float]], n: int, progress: Progress | None = None,
           placement: list | None = None, timings: list | None = None) -> list[dict]:
    """Rows of (index, row, where, seconds) results as they finish, put back in the configs' order;
    every backend's one way of reporting progress, placement and timings."""
    rows: list = [None] * n
    where_ran: list = [None] * n
    seconds: list = [None] * n
    for done, (i, row, w, sec) in enumerate(results, 1):
        rows[i], where_ran[i], seconds[i] = row, w, sec
        if progress:
            progress(done, n, i, w)
    if placement is not None:
        placement[:] = where_ran
    if timings is not None:
        timings[:] = seconds
    return rows


def run_local(job: SearchJob, configs: list[dict], workers: int = 1, progress: Progress | None = None,
              placement: list | None = None, timings: list | None = None) -> list[dict]:
    """Every config's row, in the configs' order. workers=1 runs them here; more: that many
    processes. `placement`, when given, gets where each config ran (by index); `timings` the
    seconds each took where it ran (what a backend adds is the rest of the wall time)."""
    if workers < 1:
        raise ValueError("workers must be at least 1")
    if workers == 1 or len(configs) <= 1:
        runner = Runner(job)

        def here():
            for i, overrides in enumerate(configs):
                t0 = time.perf_counter()
                row = runner.run(overrides)
                yield i, row, where(), time.perf_counter() - t0
        return gather(here(), len(configs), progress, placement, timings)
    with LocalSearch(job, configs, workers) as search:
        return gather(search.results(), len(configs), progress, placement, timings)


def _mp_context():
    """fork where this process has one thread (the CLI, a benchmark): the workers start in
    milliseconds with sim already imported and the job already in memory. Else a forkserver: a
    clean process per worker (no threads forked mid-lock, no copy of a big parent such as a
    Streamlit server); the job then travels once per worker, in initargs."""
    if threading.active_count() == 1 and "fork" in multiprocessing.get_all_start_methods():
        return multiprocessing.get_context("fork")
    return multiprocessing.get_context("forkserver")


class LocalSearch:
    """A search on local worker processes, started now and collected as it goes: poll() for the
    results finished so far, results() for all of them as they finish, cancel() to drop the
    configs not yet started. Results are (index, row, where, seconds), as gather() takes them."""

    def __init__(self, job: SearchJob, configs: list[dict], workers: int):
        self.total = len(configs)
        self.pool = ProcessPoolExecutor(max_workers=max(1, min(workers, len(configs))), mp_context=_mp_context(),
                                        initializer=_init_worker, initargs=(job,))
        self.pending = {self.pool.submit(_run_in_worker, i, c) for i, c in enumerate(configs)}

    @property
    def done(self) -> bool:
        return not self.pending

    def poll(self, timeout: float) -> list[tuple]:
        """Results finished within `timeout` seconds (at least one if any finishes in that time)."""
        if not self.pending:
            return []
        finished, self.pending = wait(self.pending, timeout=timeout, return_when=FIRST_COMPLETED)
        out = [f.result() for f in finished]
        if not self.pending:
            self.pool.shutdown(wait=False)
        return out

    def results(self):
        for f in as_completed(list(self.pending)):
            self.pending.discard(f)
            yield f.result()

    def cancel(self) -> None:
        """Drop the configs not started; those running finish in the background and are dropped."""
        self.pending = set()
        self.pool.shutdown(wait=False, cancel_futures=True)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.pool.shutdown(wait=True, cancel_futures=True)


# -- the table ---------------------------------------------------------------------------------

def columns(grid_knobs: Iterable[str], rows: list[dict]) -> list[str]:
    """config, the knobs, the metrics (in the order the rows first name them), error."""
    knobs = list(grid_knobs)
    metrics: dict[str, None] = {}
    for r in rows:
        metrics.update((k, None) for k in r if k != "error" and k not in knobs)
    return ["config", *knobs, *metrics, "error"]


def _cell(v) -> str:
    if v is None:
        return ""
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, float):
        return "" if math.isnan(v) else repr(v)
    if isinstance(v, (dict, list)):
        return json.dumps(v, sort_keys=True)
    return str(v)


def table_rows(grid: Grid, rows: list[dict], indices: list[int] | None = None) -> list[dict]:
    """Each row with its config number (1-based) and knob values, in columns() order. `indices`:
    which configs of the grid the rows are (default: the first len(rows)), for a search stopped
    with a scattered few done."""
    cols = columns(grid.knobs, rows)
    configs = grid.configs()
    out = []
    for i, row in zip(range(len(rows)) if indices is None else indices, rows):
        full = {"config": i + 1, **configs[i], **row}
        out.append({c: full.get(c) for c in cols})
    return out


def to_csv(grid: Grid, rows: list[dict], indices: list[int] | None = None) -> str:
    """The search table as CSV text: one row per config, in the grid's order."""
    buf = io.StringIO()
    w = csv.writer(buf, lineterminator="\n")
    trows = table_rows(grid, rows, indices)
    cols = columns(grid.knobs, rows)
    w.writerow(cols)
    for r in trows:
        w.writerow([_cell(r[c]) for c in cols])
    return buf.getvalue()


def _num(v) -> float:
    return float(v) if isinstance(v, (int, float)) and not isinstance(v, bool) and not math.isnan(v) else -math.inf


def best(rows: list[dict]) -> int | None:
    """The index of the best config: most goodput (most throughput when there is no SLO), then
    most throughput, then lowest p99 TTFT, then the first in the grid's order. None if none ran."""
    ok = [i for i, r in enumerate(rows) if not r.get("error")]
    if not ok:
        return None
    has_goodput = any(r.get("goodput") is not None for r in rows)

    def key(i):
        r = rows[i]
        ttft = _num(r.get("ttft_p99"))
        return (_num(r.get("goodput")) if has_goodput else 0.0, _num(r.get("throughput")),
                -ttft if ttft > -math.inf else -math.inf, -i)
    return max(ok, key=key)


def frontier(rows: list[dict], x: str = "ttft_p99", y: str = "throughput") -> list[int]:
    """Indices of the Pareto frontier: no other config has both a lower `x` and a higher `y`
    (ties kept); sorted by `x`. Configs without both numbers are left out."""
    pts = [(rows[i][x], rows[i][y], i) for i in range(len(rows))
           if not rows[i].get("error") and all(isinstance(rows[i].get(k), (int, float))
                                               and not math.isnan(rows[i][k]) for k in (x, y))]
    pts.sort(key=lambda p: (p[0], -p[1], p[2]))
    out, top = [], -math.inf
    for px, py, i in pts:
        if py > top or (out and py == top and px == rows[out[-1]][x]):
            out.append(i)
            top = max(top, py)
    return out
