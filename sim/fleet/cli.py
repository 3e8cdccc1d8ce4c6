"""`python -m sim fleet`: a workload on a simulated fleet, or a real fleet's recordings under a
router policy. Strict JSON with --json (NaN and infinities as null).

The core never imports a source: sim/__main__.py hands this module what it needs of one (a
`Sources`: the workload reader of `sim run` and, lazily, the vLLM fleet reader)."""
from __future__ import annotations

import math
import sys
from dataclasses import dataclass
from typing import Callable

from ..jsonout import dumps_strict

DEFAULT_COST = "a100-8B-fp16"   # a fleet runs on a clock in ms: a roofline unless --cost says otherwise


@dataclass
class Sources:
    """What the command needs from above the core, given by sim/__main__.py."""
    load_workload: Callable          # path, limit=, rate_scale= -> Workload (SystemExit on bad input)
    config_overrides: Callable       # --config text, workload -> dict (SystemExit on bad input)
    real_fleet: Callable             # () -> namespace: read_fleet, load_vocab, recorded_replicas, response_tail_ms


def add_parser(sub, fn) -> None:
    p = sub.add_parser("fleet", help="a workload on N replicas behind a router, or a real fleet's recordings",
                       description="Simulate WORKLOAD on --replicas N behind --router POLICY, or read a real "
                                   "fleet (--recordings, one vLLM recording per replica in the router's worker "
                                   "order) and say where the policy would have sent each request.")
    p.add_argument("workload", nargs="?", help="a workload JSON or public request trace (anything `sim run` reads)")
    p.add_argument("--recordings", nargs="+", metavar="REC", help="a real fleet: one recording per replica")
    p.add_argument("--replicas", type=int, default=None, help="replicas of a simulated fleet (default 2)")
    p.add_argument("--router", default=None, help="the routing policy (default round_robin; with --recordings: none)")
    p.add_argument("--router-config", help="JSON object of the router's settings")
    p.add_argument("--config", help="JSON object of config overrides for every replica")
    p.add_argument("--replica-configs", help="JSON list, one object of overrides per replica (replicas may differ)")
    p.add_argument("--refresh-ms", type=float, default=0.0,
                   help="the router's engine signals (queue, KV use) refresh this often (0: exact)")
    p.add_argument("--tail-ms", type=float, default=None,
                   help="a response leaves the router's in-flight count this long after its last token's step "
                        "(default 0; with --recordings: fitted on them)")
    p.add_argument("--latency-ms", type=float, default=0.0, help="router -> replica delay")
    p.add_argument("--seed", type=int, default=0, help="the router's seed (random, power_of_two, ties)")
    p.add_argument("--cost", help=f"step cost model preset (default {DEFAULT_COST}, a roofline in ms)")
    p.add_argument("--calibrate", nargs="+", metavar="REC",
                   help="vLLM recordings to fit the step cost model on (one per replica, or one for all) and, "
                        "unless --tail-ms is given, the response tail")
    p.add_argument("--timing", choices=("recorded", "simulated"), default=None,
                   help="with --recordings: the router's signals from the recordings' own times, or all predicted")
    p.add_argument("--tokenizer", help="with --recordings: a tokenizer.json whose vocabulary turns prompt ids "
                                       "back into text (for a character-level router)")
    p.add_argument("--slo", help="JSON SLO targets: attainment and goodput in the metrics")
    p.add_argument("--limit", type=int, help="a public trace: its first N requests")
    p.add_argument("--rate-scale", type=float, default=1.0, help="a public trace: arrivals sped up by X")
    p.add_argument("-o", "--out", help="write the fleet Trace file")
    p.add_argument("--routes-csv", help="write the routing table as CSV")
    p.add_argument("--chrome", help="write a Chrome / Perfetto trace (a process per replica and a router track)")
    p.add_argument("--json", action="store_true", help="strict JSON on stdout")
    p.set_defaults(fn=fn, outputs=("out", "routes_csv", "chrome"))


def _json_arg(text, what, kind):
    from ..limits import load_json
    if not text:
        return None
    try:
        v = load_json(text.encode(), "it", once=True)
    except ValueError as e:
        raise SystemExit(f"{what}: {e}")
    if not isinstance(v, kind):
        raise SystemExit(f"{what} must be a JSON {'object' if kind is dict else 'list'}")
    return v


def _settings(args, replicas: int, router: str):
    from . import FleetSettings
    from .routers import make_router
    s = FleetSettings(replicas=replicas, router=router, router_config=_json_arg(args.router_config, "--router-config",
                                                                                  dict) or {},
                      seed=args.seed, refresh_interval=args.refresh_ms, response_tail=args.tail_ms or 0.0,
                      router_latency=args.latency_ms,
                      replica_configs=_json_arg(args.replica_configs, "--replica-configs", list))
    try:
        s.check()
        make_router(s.router, s.replicas, s.router_config, s.seed)   # its settings checked before any work
    except ValueError as e:
        raise SystemExit(str(e))
    return s


def _slo(args):
    if not args.slo:
        return None
    from ..slo import SLO
    try:
        return SLO.parse(args.slo)
    except ValueError as e:
        raise SystemExit(f"--slo: {e}")


def _write_outputs(fleet, args) -> None:
    from .export import fleet_chrome_trace_bytes, routes_csv
    for path, make in ((args.out, fleet.to_bytes), (args.routes_csv, lambda: routes_csv(fleet)),
                       (args.chrome, lambda: fleet_chrome_trace_bytes(fleet))):
        if path:
            try:
                data = make()
                with open(path, "wb") as f:
                    f.write(data)
            except OSError as e:
                raise SystemExit(f"cannot write {path}: {e.strerror or e}")


def _text_summary(out: dict) -> None:
    m = out["metrics"]
    unit = m.get("time_unit") or ""

    def f(v, fmt="{:.1f}"):
        return "-" if v is None or (isinstance(v, float) and math.isnan(v)) else fmt.format(v)
    print(f"{m['replicas']} replicas, {m['requests']} requests ({m['finished']} finished): "
          f"TTFT p50 {f(m['ttft_p50'])} / p99 {f(m['ttft_p99'])} {unit}, E2E mean {f(m['e2e_mean'])} {unit}, "
          f"prefix-cache hits {f(m['prefix_hit_rate'], '{:.1%}')}, load imbalance {f(m['load_imbalance'], '{:.2f}')}")
    for p in out["per_replica"]:
        print(f"  replica {p['replica']}: {p['requests']} requests, TTFT p99 {f(p['ttft_p99'])}, "
              f"busy {f(p['busy_time'])} {unit}, prefix-cache hits {f(p['prefix_hit_rate'], '{:.1%}')}")
    if out.get("routing"):
        r = out["routing"]
        if r.get("agree") is not None:
            print(f"routing: the policy agrees with the real router on {r['agree']} of {r['requests']} requests "
                  f"({r['agreement']:.1%})")


def _unused(given: dict, of: str) -> None:
    """A warning on stderr naming the options given that `of` does not use (nothing is silently
    dropped)."""
    names = [k for k, v in given.items() if v]
    if names:
        print(f"warning: {', '.join(names)} {'does' if len(names) == 1 else 'do'} not apply to {of}: ignored",
              file=sys.stderr)


def cmd_fleet(args, sources: Sources) -> int:
    if args.recordings:
        if args.workload:
            raise SystemExit("give a WORKLOAD or --recordings, not both")
        _unused({"--replicas": args.replicas is not None, "--config": args.config,
                 "--replica-configs": args.replica_configs, "--cost": args.cost, "--calibrate": args.calibrate,
                 "--limit": args.limit is not None, "--rate-scale": args.rate_scale != 1.0,
                 "--latency-ms": args.latency_ms and not (args.router and args.timing == "simulated"),
                 "--timing": args.timing and not args.router},
                "a real fleet's recordings (their replicas, settings and times are the recordings'; --timing goes "
                "with --router, --latency-ms with --timing simulated)")
        args.timing = args.timing or "recorded"
        return _cmd_recordings(args, sources.real_fleet())
    if not args.workload:
        raise SystemExit("give a WORKLOAD (a workload JSON or public trace) or --recordings REC ...")
    _unused({"--tokenizer": args.tokenizer, "--timing": args.timing}, "a simulated fleet (they go with --recordings)")
    if args.replicas is None:
        args.replicas = 2
    return _cmd_workload(args, sources)


def _cmd_workload(args, sources: Sources) -> int:
    from ..cost import cost_from_preset
    from . import fleet_summary, simulate_fleet
    from .metrics import fleet_warnings
    s = _settings(args, args.replicas, args.router or "round_robin")
    wl = sources.load_workload(args.workload, limit=args.limit, rate_scale=args.rate_scale)
    overrides = sources.config_overrides(args.config, wl)
    slo = _slo(args)
    costs = None
    if args.calibrate:
        if args.cost:
            raise SystemExit("give --cost or --calibrate, not both")
        costs, tail = _calibrated(sources.real_fleet(), args.calibrate, s.replicas)
        if args.tail_ms is None:
            s.response_tail = tail
    try:
        cost = None if costs else cost_from_preset(args.cost or (getattr(wl, "source", None) or {}).get("cost")
                                                   or DEFAULT_COST)
    except ValueError as e:
        raise SystemExit(str(e))
    wants_trace = bool(args.out or args.chrome)
    try:
        fleet = simulate_fleet(wl, s, overrides, cost=cost, costs=costs, digest=not wants_trace)
    except (ValueError, RuntimeError) as e:
        raise SystemExit(str(e))
    _write_outputs(fleet, args)
    out = fleet_summary(fleet, slo=slo)
    out["warnings"] = fleet_warnings(fleet)
    for w in out["warnings"]:
        print(f"warning: {w}", file=sys.stderr)
    out["settings"] = fleet.meta["settings"]
    out["router_config"] = fleet.meta["router_defaults"]
    out["routes"] = [{"id": i, "replica": int(r)} for i, r in zip(fleet.routes["request"], fleet.routes["replica"])]
    if args.json:
        print(dumps_strict(out))
    else:
        _text_summary(out)
    return 0


def _calibrated(io, paths: list[str], replicas: int) -> tuple[list, float]:
    """Cost models fitted on vLLM recordings (one per replica, or the one for all) and the
    response tail fitted on them."""
    read_fleet, recorded_replicas, response_tail_ms = io.read_fleet, io.recorded_replicas, io.response_tail_ms
    if len(paths) not in (1, replicas):
        raise SystemExit(f"--calibrate takes one recording, or one per replica ({replicas}), not {len(paths)}")
    try:
        real = read_fleet(paths)
        for w in real.warnings:   # what the reader noticed of the recordings the costs are fitted on
            print(f"warning: --calibrate: {w}", file=sys.stderr)
        fitted = [r.cost for r in recorded_replicas(real, with_costs=True)]
    except OSError as e:
        raise SystemExit(f"cannot read a recording: {e.strerror or e}")
    except ValueError as e:
        raise SystemExit(f"--calibrate: {e}")
    return (fitted * replicas if len(fitted) == 1 else fitted), response_tail_ms(real)


def _cmd_recordings(args, io) -> int:
    load_vocab, read_fleet = io.load_vocab, io.read_fleet
    recorded_replicas, response_tail_ms = io.recorded_replicas, io.response_tail_ms
    from . import fleet_summary
    from .metrics import fleet_warnings
    from .recorded import agreement, recorded_fleet, replay
    try:
        vocab = load_vocab(args.tokenizer) if args.tokenizer else None
        real = read_fleet(args.recordings, vocab=vocab)
    except OSError as e:
        raise SystemExit(f"cannot read a recording: {e.strerror or e}")
    except ValueError as e:
        raise SystemExit(str(e))
    for w in real.warnings:
        print(f"warning: {w}", file=sys.stderr)
    if args.tail_ms is None:
        args.tail_ms = response_tail_ms(real)
    out = {"replicas": [{"name": rep.name, "path": rep.path, "decisions": rep.decisions,
                         "requests": int(len(rep.trace.requests)), "steps": int(len(rep.trace.steps))}
                        for rep in real.replicas],
           "response_tail_ms": args.tail_ms, "vllm": real.meta.get("vllm"), "warnings": real.warnings}
    try:
        reps = recorded_replicas(real, with_costs=bool(args.router) and args.timing == "simulated")
        fleet = recorded_fleet(reps)
        if args.router:
            s = _settings(args, len(reps), args.router)
            fleet = replay(reps, s, timing=args.timing)
            out["routing"] = agreement(fleet)
            out["timing"] = args.timing
            out["router_config"] = fleet.meta.get("router_defaults")
            more = fleet_warnings(fleet)   # of the policy's run (turned away, replicas sent nothing)
            for w in more:
                print(f"warning: {w}", file=sys.stderr)
            out["warnings"] = real.warnings + more
    except (ValueError, RuntimeError) as e:
        raise SystemExit(str(e))
    _write_outputs(fleet, args)
    out.update(fleet_summary(fleet, slo=_slo(args)))
    r = fleet.routes
    served = r["served"] if "served" in r else r["replica"]
    routes = []
    for k in range(len(r)):
        row = {"id": r["request"].iloc[k], "replica": int(served.iloc[k])}
        if "predicted" in r:
            row["predicted"] = int(r["predicted"].iloc[k])
            row["reason"] = r["predicted_reason"].iloc[k]
        routes.append(row)
    out["routes"] = routes
    if args.json:
        print(dumps_strict(out))
    else:
        for rep in out["replicas"]:
            d = rep.get("decisions") or {}
            verdict = ("the same decisions at every step" if d.get("equal")
                       else "not re-simulated (its warnings say why)" if d.get("not_simulated")
                       else f"decisions part at step {(d.get('first_difference') or {}).get('step')}")
            print(f"{rep['name']}: {rep.get('requests')} requests, {rep.get('steps')} steps; simulator: {verdict}")
        _text_summary(out)
    return 0
