"""Command line: python -m sim {trace,run,lesson} ...

  trace WORKLOAD.json -o TRACE.jsonl   per-step JSONL in the vLLM oracle's format
  run WORKLOAD.json -o FILE.trace      the full Trace file (and a summary on stdout)
  lesson --json                        every lesson example's figures, computed by the core
"""
from __future__ import annotations

import argparse
import json
import sys


def _load_workload(path: str):
    from .workload import Workload
    try:
        return Workload.load(path)
    except (OSError, ValueError, KeyError, TypeError) as e:
        raise SystemExit(f"cannot read workload {path}: {e}")


def cmd_trace(args) -> int:
    from .simulate import simulate
    wl = _load_workload(args.workload)
    try:
        if args.out and args.out != "-":
            with open(args.out, "w") as f:
                simulate(wl, oracle_out=f)
        else:
            simulate(wl, oracle_out=sys.stdout)
    except ValueError as e:
        raise SystemExit(str(e))
    return 0


def cmd_run(args) -> int:
    from .metrics import summary
    from .simulate import simulate
    wl = _load_workload(args.workload)
    overrides = json.loads(args.config) if args.config else {}
    try:
        trace = simulate(wl, overrides)
    except ValueError as e:
        raise SystemExit(str(e))
    if args.out:
        trace.save(args.out)
    print(json.dumps(summary(trace), indent=1))
    return 0


def cmd_lesson(args) -> int:
    from .lesson import figures
    out = figures()
    print(json.dumps(out, indent=None if args.json else 1))
    return 0


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="python -m sim", description="Scheduler Lab core")
    sub = ap.add_subparsers(dest="cmd", required=True)
    p = sub.add_parser("trace", help="write the oracle-format per-step JSONL for a workload")
    p.add_argument("workload")
    p.add_argument("-o", "--out", help="output JSONL (default stdout)")
    p.set_defaults(fn=cmd_trace)
    p = sub.add_parser("run", help="simulate a workload and save the Trace")
    p.add_argument("workload")
    p.add_argument("-o", "--out", help="trace file to write")
    p.add_argument("--config", help="JSON object of config overrides")
    p.set_defaults(fn=cmd_run)
    p = sub.add_parser("lesson", help="figures of the lesson's examples")
    p.add_argument("--json", action="store_true", help="one JSON object on one line")
    p.set_defaults(fn=cmd_lesson)
    args = ap.parse_args(argv)
    return args.fn(args)


if __name__ == "__main__":
    sys.exit(main())
