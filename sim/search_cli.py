"""`python -m sim search`: the config search's command (sim/search.py, sim/search_ray.py).

    python -m sim search W.json --grid G.json --slo '{"ttft": 400, "tpot": 40}' -o OUT.csv
    python -m sim search W.json --grid G.json --workers 2            # two local processes
    python -m sim search W.json --grid G.json --ray local            # a local Ray cluster
    python -m sim search W.json --grid G.json --ray 10.0.0.5:6379    # an existing Ray cluster
    python -m sim search W.json --grid '{"replicas": [2, 4, 8], "router": ["round_robin", "cache_aware"]}'
                                                                     # fleets: how many replicas, which router

A grid key is a scheduler config key, "scheduler", or a fleet knob (replicas, router,
router.<a router's setting>, refresh_interval, response_tail, router_latency, router_seed: see
sim/search.py); a config with a fleet knob runs a fleet and its row is the whole fleet's.

Everything is checked (workload, grid, SLO, every config against the workload) before any run.
"""
from __future__ import annotations

import json
import os
import sys
import time

HELP = ("run every combination of a grid of scheduler (or fleet: replicas, router) knobs over a workload: "
        "one CSV row per config")


def add_search_parser(sub) -> None:
    import argparse

    from .limits import FORMATS_HELP
    from .search import knobs_help
    p = sub.add_parser("search", help=HELP, description=HELP,
                       epilog=f"{FORMATS_HELP}\n\nThe knobs a grid may sweep:\n{knobs_help()}",
                       formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("workload", help="a workload file (anything the dashboard's upload reads; below)")
    p.add_argument("--grid", required=True,
                   help='JSON object (a file, or the text itself) of knob -> values, e.g. {"max_num_seqs": [8, 16], '
                        '"policy": ["fcfs", "sjf"], "preemption_mode": ["recompute", "swap"], "num_gpu_blocks": '
                        '[512, 1024], "scheduler": ["vllm", "static"]}; any scheduler config key is a knob. Fleets: '
                        '"replicas" (1-1024), "router" (a policy of `sim fleet`), "router.<setting>" (a router\'s '
                        'setting, e.g. "router.cache_threshold": it applies to the grid\'s routers that have it), '
                        '"refresh_interval", "response_tail", "router_latency" (the run\'s time unit), "router_seed": '
                        'a config with any of them runs a fleet of replicas behind the router, each with the config\'s '
                        'scheduler knobs, and its row is the fleet\'s')
    p.add_argument("--slo", help='SLO targets in the run\'s time unit (a file, or JSON such as {"ttft": 400, '
                                 '"tpot": 40}): adds attainment and goodput to every row')
    p.add_argument("--cost", help="the cost preset (sim.cost.COST_PRESETS; default units, for a public trace "
                                  "a100-8B-fp16, a roofline in ms)")
    p.add_argument("--limit", type=int, help="public traces: only the first N requests by arrival")
    p.add_argument("--rate-scale", type=float, default=1.0,
                   help="public traces: arrivals this many times as fast as recorded (default 1)")
    p.add_argument("-o", "--out", help="the CSV to write (default stdout)")
    where = p.add_mutually_exclusive_group()
    where.add_argument("--workers", type=int, default=None, help="local worker processes (default: CPU count)")
    where.add_argument("--ray", metavar="ADDRESS", help="run on Ray: 'local' starts a local cluster, else the "
                                                        "address of a running one (host:port)")
    p.add_argument("--placement", metavar="FILE",
                   help="write which node/process ran each config (JSON lines: config, where)")
    p.add_argument("--quiet", action="store_true", help="no progress on stderr")
    p.set_defaults(fn=cmd_search, outputs=("out", "placement"))


def _json_arg(text: str, what: str):
    """A JSON argument given inline or as a file name (read as any JSON a user gives: at most
    MAX_JSON_BYTES, a byte-order mark allowed, valid UTF-8)."""
    from .inputs import read_capped
    from .limits import MAX_JSON_BYTES, shown
    if text.lstrip().startswith(("{", "[")):
        return text
    if not os.path.exists(text):
        # a name of 200,000 characters (an argument gone wrong) is shown cut
        raise SystemExit(f"there is no {what} file {text if len(text) <= 80 else shown(text)} "
                         "(give a file, or the JSON itself)")
    try:
        data = read_capped(text, MAX_JSON_BYTES)
    except OSError as e:
        raise SystemExit(f"cannot read the {what} file {text}: {e.strerror or e}")
    except ValueError as e:
        raise SystemExit(f"cannot read the {what} file {text}: {e}")
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError:
        raise SystemExit(f"the {what} file {text} is not UTF-8 text") from None


def cmd_search(args) -> int:
    from .inputs import parse_workload
    from .search import Grid, SearchJob, best, check_configs, describe, run_local, to_csv

    from . import public_traces
    from .inputs import ignored_trace_options, read_capped
    try:
        data = read_capped(args.workload, public_traces.MAX_UNZIPPED_BYTES)
    except OSError as e:
        raise SystemExit(f"cannot read workload {args.workload}: {e.strerror or e}")
    except ValueError as e:
        raise SystemExit(f"cannot read workload {args.workload}: {e}")
    try:
        workload = parse_workload(data, args.workload, limit=args.limit, rate_scale=args.rate_scale)
        said = ignored_trace_options(workload, limit=args.limit, rate_scale=args.rate_scale)
        if said:
            print(said, file=sys.stderr)
        source = getattr(workload, "source", None)   # a public trace: ms arrivals want steps in ms
        cost = args.cost or (source["cost"] if source else "units")
        grid = Grid.parse(_json_arg(args.grid, "grid"))
        job = SearchJob.make(workload, cost=cost, slo=_json_arg(args.slo, "SLO") if args.slo else None)
        configs = grid.configs()
        check_configs(workload, configs)
    except ValueError as e:
        raise SystemExit(str(e))
    if args.workers is not None and args.workers < 1:
        raise SystemExit("--workers must be at least 1")

    t0 = time.perf_counter()

    def progress(done, total, index, where):
        if not args.quiet:
            print(f"\rconfigs done: {done}/{total}", end="", file=sys.stderr, flush=True)

    placement: list = []
    if args.ray:
        from .search_ray import run_ray
        try:
            rows = run_ray(job, configs, args.ray, progress=progress, placement=placement)
        except ValueError as e:
            raise SystemExit(str(e))
        backend = f"Ray ({args.ray})"
    else:
        workers = args.workers or os.cpu_count() or 1
        rows = run_local(job, configs, workers=workers, progress=progress, placement=placement)
        backend = f"{workers} local worker{'s' if workers != 1 else ''}"
    if not args.quiet:
        print(file=sys.stderr)
    text = to_csv(grid, rows)
    if args.out and args.out != "-":
        with open(args.out, "w", newline="") as f:
            f.write(text)
    else:
        sys.stdout.write(text)
    if args.placement:
        with open(args.placement, "w") as f:
            f.writelines(json.dumps({"config": i + 1, "where": w}) + "\n" for i, w in enumerate(placement))
    failed = sum(1 for r in rows if r.get("error"))
    b = best(rows)
    info = sys.stderr if not args.out or args.out == "-" else sys.stdout
    print(f"{len(rows)} config{'s' if len(rows) != 1 else ''} on {backend} in {time.perf_counter() - t0:.1f} s"
          + (f"; {failed} could not run (see the error column)" if failed else ""), file=info)
    if b is not None:
        r = rows[b]
        what = (f"goodput {r['goodput']:.4g} {r.get('goodput_unit', '')}" if r.get("goodput") is not None
                else f"throughput {r['throughput']:.4g} tokens/{r.get('time_unit', '')}")
        print(f"best: config {b + 1} ({describe(configs[b])}): {what}", file=info)
    return 0
