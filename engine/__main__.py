"""Command line: python -m engine run WORKLOAD.json [-o FILE.trace] [--model tiny] [--config JSON]

Runs a workload (the simulator's workload JSON) through the real engine and saves the
measured Trace (source engine, time unit ms); prints the metrics summary and where it ran.
"""
from __future__ import annotations

import argparse
import json
import sys


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="python -m engine", description="Scheduler Lab engine")
    sub = ap.add_subparsers(dest="cmd", required=True)
    p = sub.add_parser("run", help="run a workload through the engine and save the Trace")
    p.add_argument("workload")
    p.add_argument("-o", "--out", help="trace file to write")
    p.add_argument("--model", default="tiny", help="preset (tiny, m100) or a local checkpoint directory")
    p.add_argument("--device", default="auto")
    p.add_argument("--dtype", default="auto")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--attention", default="gather", choices=("gather", "flex"),
                   help="flex: FlexAttention on the block table (compiled on CUDA), after its self-test")
    p.add_argument("--ignore-eos", action="store_true")
    p.add_argument("--config", help="JSON object of scheduler config overrides")
    p.add_argument("--tokens", help="write the generated token ids (JSON) here")
    args = ap.parse_args(argv)

    from sim.jsonout import dumps_strict
    from sim.metrics import summary
    from sim.workload import Workload
    from .config import EngineConfig
    from .engine import LLMEngine
    try:
        wl = Workload.load(args.workload)
    except (OSError, ValueError, KeyError, TypeError) as e:
        raise SystemExit(f"cannot read workload {args.workload}: {e}")
    eng = LLMEngine(EngineConfig(model=args.model, device=args.device, dtype=args.dtype, seed=args.seed,
                                 ignore_eos=args.ignore_eos, attention=args.attention))
    try:
        overrides = json.loads(args.config) if args.config else None
    except (ValueError, RecursionError):
        raise SystemExit('--config is not a JSON object, e.g. \'{"preemption_mode": "swap"}\'')
    try:
        res = eng.run(wl, overrides)
    except (ValueError, RuntimeError) as e:
        raise SystemExit(str(e))
    if args.out:
        res.trace.save(args.out)
    if args.tokens:
        with open(args.tokens, "w") as f:
            json.dump(res.tokens, f)
    m = res.trace.meta
    print(f"# {m['device']} {m['dtype']}, {m['threads']} thread(s), model {args.model} "
          f"({m['model_params'] / 1e6:.1f}M parameters)", file=sys.stderr)
    print(dumps_strict(summary(res.trace), indent=1))   # strict JSON: NaN as null
    return 0


if __name__ == "__main__":
    sys.exit(main())
