"""Command line: python -m sim {trace,run,lesson,llamalog,vllm} ...

  trace WORKLOAD.json -o TRACE.jsonl   per-step JSONL in the vLLM oracle's format
  run WORKLOAD.json -o FILE.trace      the full Trace file (and a summary on stdout)
      (or an Azure / BurstGPT CSV or a Mooncake JSON-lines trace; [--limit N] [--rate-scale X] [--cost P])
      [--slo JSON]                     ... with SLO attainment and goodput in the summary
  lesson --json                        every lesson example's figures, computed by the core
  llamalog SERVER.log [--json] [-o FILE.trace] [--resim]
                                       a llama-server -v log (.gz too): its batches and tasks;
                                       --resim: its workload re-simulated beside it
  log SERVER.log [--json] [-o FILE.trace] [--engine E] [--resimulate]
                                       the log an SGLang, vLLM or llama-server server wrote (plain or
                                       .gz; the engine recognised by content): its batch / stats lines;
                                       --resimulate: the workload it implies simulated beside it
  vllm RECORDING [--json] [-o FILE.trace] [--oracle-jsonl OUT] [--workload OUT] [--predict CAL]
      [--cost-form FORM]               a vLLM server's step recording: the Trace, the simulator's
                                       verdict on its decisions, its times predicted (with bands)
  fleet WORKLOAD --replicas N --router POLICY [--router-config JSON] [-o FLEET.trace] [--json]
  fleet --recordings REC1 REC2 ... [--router POLICY] [--timing recorded|simulated] [--json]
                                       a fleet behind a router: simulated, or a real one's recordings
  search WORKLOAD --grid G.json [--slo JSON] -o OUT.csv [--workers N | --ray ADDRESS|local]
                                       every combination of a grid of knobs: one CSV row per config
"""
from __future__ import annotations

import argparse
import sys

from .jsonout import dumps_strict   # strict JSON: NaN and infinities written as null


def _load_workload(path: str, **trace_options):
    """The workload in `path`: a workload JSON or a public request trace (sim/public_traces.py;
    trace_options: limit, rate_scale)."""
    from . import public_traces
    from .inputs import ignored_trace_options, parse_workload, read_capped   # the checks an upload gets
    try:
        data = read_capped(path, public_traces.MAX_UNZIPPED_BYTES)   # a trace unzips to at most this
    except OSError as e:
        raise SystemExit(f"cannot read workload {path}: {e.strerror or e}")
    except (ValueError, MemoryError) as e:
        raise SystemExit(f"cannot read workload {path}: {e or 'it does not fit in memory'}") from None
    from .limits import UnknownFormat
    try:
        wl = parse_workload(data, path, **trace_options)
        said = ignored_trace_options(wl, **trace_options)
        if said:
            print(said, file=sys.stderr)
        _say_borrowed_rules(wl.config)
        return wl
    except UnknownFormat as e:   # one line; `run --help` spells the formats out
        msg, hint = f"cannot read workload {path}: {e}", " (sim run --help lists them)"
        # the hint where the line stays within 200 characters besides the path the user typed
        raise SystemExit(msg + hint if len(msg) + len(hint) - len(path) <= 200 else msg)
    except ValueError as e:
        raise SystemExit(f"cannot read workload {path}: {e}")


def _say_borrowed_rules(config: dict) -> None:
    """On stderr: a vllm_version outside the checked ones runs under the nearest's rules."""
    from .versions import unchecked
    v = config.get("vllm_version")
    said = unchecked(v) if isinstance(v, str) else None   # (check_config has refused any other)
    if said:
        print(f"warning: {said}", file=sys.stderr)


def _run_cost(wl, preset: str | None):
    """The cost model of `sim run`: --cost's preset; else, for a public trace (arrivals in ms), a
    roofline in ms (sim.public_traces.DEFAULT_COST), said on stderr; else simulate's default (units)."""
    from .cost import cost_from_preset
    from .public_traces import describe
    source = getattr(wl, "source", None)
    if source:
        preset = preset or source["cost"]
        print(f"{describe(source)} Steps cost ms: cost model {preset}.", file=sys.stderr)
    return cost_from_preset(preset) if preset else None


def _config_overrides(text: str | None, workload) -> dict:
    """--config's JSON object, checked with the workload's own config under it."""
    from .inputs import check_config
    from .limits import load_json
    if not text:
        return {}
    try:
        overrides = load_json(text.encode(), "it", once=True)
        if not isinstance(overrides, dict):
            raise ValueError('it must be a JSON object, e.g. \'{"policy": "vtc"}\'')
        check_config({**workload.config, **overrides})
    except ValueError as e:
        raise SystemExit(f"--config: {e}")
    if "vllm_version" in overrides:
        _say_borrowed_rules(overrides)
    return overrides


def cmd_trace(args) -> int:
    from .simulate import simulate
    wl = _load_workload(args.workload)
    cost = _run_cost(wl, None)   # a public trace's ms arrivals want steps in ms (sim run's rule)
    try:
        if args.out and args.out != "-":
            with open(args.out, "w") as f:
                simulate(wl, oracle_out=f, cost=cost)
        else:
            simulate(wl, oracle_out=sys.stdout, cost=cost)
    except (ValueError, RuntimeError) as e:   # a pool too small, the step cap
        raise SystemExit(str(e))
    return 0


def cmd_run(args) -> int:
    from .metrics import summary
    from .simulate import simulate
    wl = _load_workload(args.workload, limit=args.limit, rate_scale=args.rate_scale)
    overrides = _config_overrides(args.config, wl)
    cost = _run_cost(wl, args.cost)
    slo = None
    if getattr(args, "slo", None):
        from .slo import SLO
        try:
            slo = SLO.parse(args.slo)
        except ValueError as e:
            raise SystemExit(f"--slo: {e}")
    try:
        # no trace file wanted: a Digest, the metrics' inputs without the token rows (a
        # million-request public trace in ~2 GB, not ~9)
        trace = simulate(wl, overrides, cost=cost, digest=not args.out)
    except (ValueError, RuntimeError) as e:   # a pool too small, the step cap
        raise SystemExit(str(e))
    if getattr(wl, "source", None):
        trace.meta["public_trace"] = wl.source   # which file format, rows left out, the clock
    if args.out:
        trace.save(args.out)
    print(dumps_strict(summary(trace, slo=slo), indent=1))
    return 0


def cmd_lesson(args) -> int:
    from .lessons.lesson import figures  # the lessons are above the core; only this command needs them
    out = figures()
    print(dumps_strict(out, indent=None if args.json else 1))
    return 0


def _llamalog_resim(trace, as_json: bool) -> int:
    import math

    from servers.llama_server import workload_from_trace   # a source: only the CLI may import one, lazily
    from servers.llama_server.resim import call_cost, resim_table, resimulate
    try:
        base = workload_from_trace(trace).config
    except ValueError as e:
        raise SystemExit(f"cannot re-simulate this log: {e}")
    configs = {"simulated llama-server": dict(base), "simulated vLLM": {**base, "scheduler": "vllm"}}
    try:
        cost = call_cost(trace)
    except ValueError:  # no timestamps, or too few calls to fit: the model-call clock
        cost = None
    wall = cost is not None
    try:
        runs = resimulate(trace, configs, wall_clock=wall, cost=cost)
    except (ValueError, RuntimeError) as e:
        raise SystemExit(f"cannot re-simulate this log: {e}")
    table = resim_table({"log": trace, **runs}, "ms" if wall else "calls")
    rows = [{k: (None if isinstance(v, float) and math.isnan(v) else v) for k, v in r.items()}
            for r in table.to_dict("records")]
    fit = cost.describe() if cost else None
    if as_json:
        print(dumps_strict({"clock": "ms" if wall else "model calls", "cost": fit, "rows": rows}))
        return 0
    if fit:
        print(f"cost of a call, fitted to {fit['fit']['samples']} calls: {fit['per_step']:.3g} ms + "
              f"{fit['per_token']:.3g} ms/token + {fit['per_context_token'] * 1000:.3g} us/context token "
              f"(R2 {fit['fit']['r2']:.3f})")
    else:
        print("the log has no timestamps: compared on the model-call clock")
    cols = list(table.columns[:4])
    print(f"{cols[0]:28s}" + "".join(f"{c:>24s}" for c in cols[1:]))
    for r in rows:
        print(f"{r['metric']:28s}" + "".join(f"{'-' if r[c] is None else format(r[c], ',.4g'):>24s}" for c in cols[1:]))
    return 0


def _progress(shown: bool, what: str = ""):
    """A progress(done, total) callback printing to stderr (None when not asked for)."""
    if not shown:
        return None

    def progress(done, total):
        pct = f"{100 * done / total:5.1f}%" if total else f"{done >> 20} MiB"
        print(f"\rreading {what}{pct}", end="", file=sys.stderr, flush=True)
    return progress


def cmd_llamalog(args) -> int:
    from servers.llama_server import read_llama_log, summary
    from servers.server_log.detect import detect
    progress = _progress(args.progress)
    try:
        seen = detect(args.log)
        if seen.binary and not seen.engine:   # (it read as a log of nothing, exit 0)
            raise SystemExit(f"{args.log}: not a llama-server log: {seen.reason}")
        trace = read_llama_log(args.log, progress=progress)
    except OSError as e:
        raise SystemExit(f"cannot read {args.log}: {e.strerror or e}")
    if args.progress:
        print(file=sys.stderr)
    for w in trace.meta.get("warnings", []):
        print(f"warning: {w}", file=sys.stderr)
    if args.out:
        trace.save(args.out)
    s = summary(trace)
    if args.resim:
        return _llamalog_resim(trace, args.json)
    if args.json:
        print(dumps_strict(s))
    elif not args.out:
        m = trace.meta
        print(f"build {s['build'] or 'unknown'}; {s['batches']} model calls; {len(s['tasks'])} tasks; "
              f"slots {m.get('n_slots')}, n_batch {m.get('n_batch')}, n_ubatch {m.get('n_ubatch')}, "
              f"n_ctx {m.get('n_ctx')}; time unit {m.get('time_unit')} ({m.get('clock')}); "
              f"{s['unparsed_lines']} line(s) not understood")
        print(f"{'task':>8} {'slot':>4} {'prompt':>7} {'cached':>7} {'generated':>9}  finish")
        for t in s["tasks"]:
            cell = lambda v: "?" if v is None else v  # noqa: E731
            print(f"{t['task']:>8} {cell(t['slot']):>4} {cell(t['prompt_tokens']):>7} {cell(t['cached_tokens']):>7} "
                  f"{cell(t['generated_tokens']):>9}  {t['finish']}{' (partial)' if t.get('partial') else ''}")
    return 0


def cmd_log(args) -> int:
    import os
    from servers.server_log import LABELS, read_log   # a source: only the CLI may import one, lazily
    try:
        log = read_log(args.log, name=os.path.basename(args.log), engine=args.engine,
                       progress=_progress(args.progress, f"{args.log}: "))
    except OSError as e:
        raise SystemExit(f"cannot read {args.log}: {e.strerror or e}")
    except ValueError as e:
        raise SystemExit(str(e)[:200])
    finally:
        if args.progress:
            print(file=sys.stderr)
    r = log.read
    for w in r.warnings:
        print(f"warning: {w}", file=sys.stderr)
    if args.out:
        log.trace.save(args.out)
    if getattr(args, "resimulate", False) and r.engine != "llama-server":
        return _log_resim(r, args.json)
    if r.engine == "llama-server":   # the llama-server reader's own summary, as `llamalog` prints it
        if args.json:
            print(dumps_strict({"engine": r.engine, "era": r.era, **r.extra["llama"]}))
        elif not args.out:
            print(f"engine llama-server ({r.era}); read as `python -m sim llamalog` reads it")
            return cmd_llamalog(argparse.Namespace(log=args.log, progress=False, out=None, resim=False, json=False))
        return 0
    if args.json:
        print(dumps_strict(r.to_json()))
    elif not args.out:
        n_pre = sum(b["kind"] == "prefill" for b in r.batches)
        what = (f"{len(r.batches):,} batch lines ({n_pre:,} prefill, {len(r.batches) - n_pre:,} decode)"
                if r.engine == "sglang" else f"{len(r.batches):,} iteration lines" if r.engine == "trtllm"
                else f"{r.extra['errors']['count']:,} request errors" if r.engine == "tgi"
                else f"{len(r.stats):,} stats lines, {len(r.batches):,} forward lines" if r.engine == "lmdeploy"
                else f"{r.extra['other_route_lines']:,} other routes' lines" if r.engine == "ollama"
                else f"{len(r.stats):,} stats lines"
                + (f", {len(r.batches):,} step lines" if r.batches else ""))
        print(f"engine {LABELS[r.engine]}; era {r.era}; {what}; {len(r.requests):,} request lines; "
              f"{r.not_understood:,} line(s) not understood; {r.duplicates:,} duplicate(s); "
              f"{len(r.gaps):,} unknown span(s); clock: {r.clock}")
        for t in r.traits:
            print(f"  {t}")
        for ex in r.not_understood_examples[:3]:
            print(f"  not understood (line {ex['line']}): {ex['text'][:120]}")
        print("the log cannot say: " + "; ".join(r.cannot_say))
    return 0


def _log_resim(read, as_json: bool) -> int:
    """`sim log FILE --resimulate`: the workload the log implies, simulated, beside the log."""
    from servers.server_log.resim import compare_summary, resimulate   # a source: only the CLI imports one
    try:
        res = resimulate(read)
    except (ValueError, RuntimeError) as e:
        raise SystemExit(f"cannot re-simulate this log: {e}")
    if as_json:
        print(dumps_strict(res.to_json()))
        return 0 if res.trace is not None else 1
    imp = res.implied
    if res.trace is None:
        print(f"cannot re-simulate this log: {imp.why}")
        return 1
    print(f"implied workload: {len(imp.workload.requests):,} requests; settings: "
          + ", ".join(f"{k} {v}" for k, v in imp.config.items()))
    print("totals: " + ", ".join(f"{k} {v:,}" if isinstance(v, int) else f"{k} {v}" for k, v in imp.totals.items()))
    print("assumed:")
    for a in imp.assumed:
        print(f"  - {a}")
    pre = res.preemptions
    print(f"preemptions: simulated {pre['sim']:,}; logged "
          + ("nothing" if pre["log"] is None else f"{pre['log']:,}") + f": {pre['log_is']}")
    print(f"{'gauge':24s} {'points':>6s} {'log mean':>10s} {'sim mean':>10s} {'mean |diff|':>11s}")
    for g, v in compare_summary(res.compare).items():
        f = lambda x: "-" if x is None else f"{x:,.3g}"   # noqa: E731
        print(f"{g:24s} {v['points']:6d} {f(v['log_mean']):>10s} {f(v['sim_mean']):>10s} {f(v['mean_abs_diff']):>11s}")
    return 0


def cmd_vllm(args) -> int:
    from servers.vllm.compare import decisions, predict   # a source: only the CLI may import one, lazily
    from servers.vllm.recording import is_async, oracle_lines, read_recording, to_trace, to_workload

    def load(path):
        try:
            rec = read_recording(path, progress=_progress(args.progress, f"{path}: "))
        except OSError as e:
            raise SystemExit(f"cannot read {path}: {e.strerror or e}")
        except ValueError as e:
            raise SystemExit(f"{path}: {e}")
        if args.progress:
            print(file=sys.stderr)
        for w in rec.warnings:
            print(f"warning: {path}: {w}", file=sys.stderr)
        return rec

    rec = load(args.recording)
    trace = to_trace(rec)
    if args.out:
        trace.save(args.out)
    if args.oracle_jsonl:
        with open(args.oracle_jsonl, "w") as f:
            f.writelines(dumps_strict(line) + "\n" for line in oracle_lines(rec))
    said = len(rec.warnings)
    try:   # a vLLM without rules here (or settings no vLLM starts with): played back, not re-simulated
        wl = to_workload(rec) if args.workload else None   # (decisions makes its own: not two held at once)
        verdict = decisions(rec)
    except ValueError as e:
        if args.workload:   # asked for what cannot be made
            raise SystemExit(f"{args.recording}: {e}") from None
        wl, verdict = None, {"equal": None, "not_simulated": str(e)}
        print(f"warning: {args.recording}: not re-simulated: {e}", file=sys.stderr)
    for w in rec.warnings[said:]:   # what re-simulating found (no prompts to re-make prefix hits from)
        print(f"warning: {args.recording}: {w}", file=sys.stderr)
    if args.workload:
        with open(args.workload, "w") as f:
            f.write(wl.dumps() + "\n")
    s, r = trace.steps, trace.requests
    # the mode: async recordings (AsyncRecordingScheduler) are re-simulated with async rules
    out = {"vllm": rec.header.get("vllm"), "async_scheduling": is_async(rec), "config": trace.meta["config"],
           "steps": int(len(s)), "busy_steps": int((~s["idle"]).sum()), "requests_added": int(len(r)),
           "finished": int(r["finish_reason"].astype(bool).sum()), "preemptions": int(r["preemptions"].sum()),
           "ended": rec.ended, "warnings": rec.warnings, "decisions": verdict}
    if args.predict:
        try:
            pred = predict(rec, load(args.predict), form=args.cost_form)
        except ValueError as e:
            raise SystemExit(f"{args.predict}: {e}") from None
        out.update(pred.to_json())
    if args.json:
        print(dumps_strict(out))
        return 0
    d = out["decisions"]
    print(f"vLLM {out['vllm']} ({'async' if out['async_scheduling'] else 'sync'} scheduling): {out['steps']} steps "
          f"({out['busy_steps']} busy), {out['requests_added']} requests, "
          f"{out['finished']} finished, {out['preemptions']} preemptions")
    if d.get("not_simulated"):
        print(f"simulator: not re-simulated ({d['not_simulated']})")
    elif d["equal"]:
        print(f"simulator: the same decisions at all {d['steps']} steps")
    else:
        f = d["first_difference"]
        print(f"simulator: decisions part at step {f['step']} ({f['field']}: recorded {f['recorded']}, "
              f"simulated {f['simulated']})")
    if d.get("stopped"):   # the simulator could not go on where the server did
        print(f"simulator stopped: {d['stopped']}")
    if args.predict:
        for m, e in out["errors"].items():
            print(f"predicted {m[:-3]}: mean absolute error {e['mape']:.1f}%, p90 {e['p90']:.1f}% ({e['n']} requests)")
        b = out.get("band")
        if b:
            lo_q, hi_q = (round(100 * x) for x in b["quantiles"])
            f = b["step_factors"]
            print(f"band ({lo_q}th-{hi_q}th percentile of the calibration's step residuals, re-simulated): steps "
                  f"x{f['ttft'][0]:.2f}-x{f['ttft'][1]:.2f} over {b['window_steps']['ttft']} steps (TTFT), "
                  f"x{f['e2e'][0]:.2f}-x{f['e2e'][1]:.2f} over {b['window_steps']['e2e']} (TPOT, E2E); the recorded "
                  f"time inside it: TTFT {b['coverage']['ttft_ms']:.0f}%, E2E {b['coverage']['e2e_ms']:.0f}% of requests")
            rows = out["requests"]
            for row in rows[:5]:
                print(f"  {row['id']}: TTFT {row['ttft_ms']:.0f} ms, predicted {row['predicted_ttft_ms']:.0f} "
                      f"({row['predicted_ttft_ms_low']:.0f}-{row['predicted_ttft_ms_high']:.0f}); E2E {row['e2e_ms']:.0f} "
                      f"ms, predicted {row['predicted_e2e_ms']:.0f} ({row['predicted_e2e_ms_low']:.0f}-"
                      f"{row['predicted_e2e_ms_high']:.0f})")
            if len(rows) > 5:
                print(f"  ... {len(rows) - 5} more (--json has every request's band)")
    return 0


def _real_fleet():
    from types import SimpleNamespace

    from servers.vllm.fleet import load_vocab, read_fleet   # a source: only the CLI may import one, lazily
    from servers.vllm.fleet_replay import recorded_replicas, response_tail_ms
    return SimpleNamespace(read_fleet=read_fleet, load_vocab=load_vocab, recorded_replicas=recorded_replicas,
                           response_tail_ms=response_tail_ms)


def cmd_fleet(args) -> int:
    from .fleet.cli import Sources, cmd_fleet as run
    return run(args, Sources(_load_workload, _config_overrides, _real_fleet))


def _cost_presets():
    from .cost import COST_PRESETS
    return COST_PRESETS


class _Parser(argparse.ArgumentParser):
    """A mistyped option is one line (what argparse says of it), not the usage block above it."""

    def error(self, message):
        self.exit(2, f"{self.prog}: {message} (--help lists the options)\n")


def check_outputs(args) -> None:
    """SystemExit (one sentence) when a file the command would write is one it reads, or is named
    for two outputs, or is an empty name: nothing given is overwritten or lost. A subcommand
    names its output options in `outputs`; every other path-like value is an input."""
    import os
    outs = [(d, getattr(args, d, None)) for d in getattr(args, "outputs", ())]
    outs = [(d, v) for d, v in outs if v is not None and v != "-"]
    named = {d for d, _ in outs}
    for d, v in outs:
        if not v.strip():
            raise SystemExit(f"--{d.replace('_', '-')} needs a file name")
    ins = []
    for d, v in vars(args).items():
        if d in named or d in ("fn", "outputs"):
            continue
        for x in v if isinstance(v, list) else [v]:
            if isinstance(x, str) and x and os.path.isfile(x):
                ins.append(x)
    seen: dict[str, str] = {}
    for d, v in outs:
        flag = f"--{d.replace('_', '-')}"
        real = os.path.realpath(v)
        if real in seen:
            raise SystemExit(f"{flag} and {seen[real]} name the same file ({v}): give each output its own")
        seen[real] = flag
        if os.path.exists(v):
            for x in ins:
                try:
                    same = os.path.samefile(v, x)
                except OSError:
                    same = False
                if same:
                    raise SystemExit(f"{flag} {v} is an input of this command: writing it would destroy it")


def main(argv=None) -> int:
    ap = _Parser(prog="python -m sim", description="Scheduler Lab core")
    sub = ap.add_subparsers(dest="cmd", required=True)
    from .fleet.cli import add_parser as add_fleet_parser
    add_fleet_parser(sub, cmd_fleet)
    from .limits import FORMATS_HELP   # the workload formats, spelled out under the options
    raw = argparse.RawDescriptionHelpFormatter   # keeps the epilog's lines
    p = sub.add_parser("trace", help="write the oracle-format per-step JSONL for a workload",
                       epilog=FORMATS_HELP, formatter_class=raw)
    p.add_argument("workload")
    p.add_argument("-o", "--out", help="output JSONL (default stdout)")
    p.set_defaults(fn=cmd_trace, outputs=("out",))
    p = sub.add_parser("run", help="simulate a workload and save the Trace", epilog=FORMATS_HELP,
                       formatter_class=raw)
    p.add_argument("workload")
    p.add_argument("-o", "--out", help="trace file to write")
    p.add_argument("--config", help="JSON object of config overrides")
    p.add_argument("--cost", choices=list(_cost_presets()),
                   help="step cost model (default: units; for a public trace, a100-8B-fp16, a roofline in ms)")
    p.add_argument("--limit", type=int, help="public traces: run only the first N requests by arrival")
    p.add_argument("--rate-scale", type=float, default=1.0,
                   help="public traces: arrivals this many times as fast as recorded (default 1)")
    p.add_argument("--slo", help='SLO targets in the run\'s time unit, JSON: {"ttft": 400, "tpot": 40, "e2e": ..., '
                                 '"tenants": {name: {...}}, "priorities": {n: {...}}}; adds attainment and goodput')
    p.set_defaults(fn=cmd_run, outputs=("out",))
    p = sub.add_parser("lesson", help="figures of the lesson's examples")
    p.add_argument("--json", action="store_true", help="one JSON object on one line")
    p.set_defaults(fn=cmd_lesson)
    p = sub.add_parser("llamalog", help="read a llama-server -v log: batches, tasks, the Trace")
    p.add_argument("log", help="the log file (plain or .gz)")
    p.add_argument("--json", action="store_true", help="print the summary object as JSON")
    p.add_argument("-o", "--out", help="write the Trace file")
    p.add_argument("--progress", action="store_true", help="show reading progress on stderr")
    p.add_argument("--resim", action="store_true",
                   help="re-simulate the log's workload as llama-server slots and as vLLM-style scheduling (the "
                        "server's settings), in ms with a cost fitted to the log's calls when it has timestamps, "
                        "else in model calls; print the comparison (JSON with --json)")
    p.set_defaults(fn=cmd_llamalog, outputs=("out",))
    p = sub.add_parser("log", help="read an SGLang, vLLM, TensorRT-LLM, TGI, LMDeploy, Ollama or llama-server log (engine recognised by content)")
    p.add_argument("log", help="the log file (plain or gzip, any name)")
    p.add_argument("--json", action="store_true", help="print what the log says as one JSON object")
    p.add_argument("-o", "--out", help="write the Trace file")
    p.add_argument("--engine", choices=("sglang", "vllm", "llama-server", "trtllm", "tgi", "lmdeploy", "ollama"), help="read it as this engine's log")
    p.add_argument("--resimulate", action="store_true",
                   help="simulate the workload the log implies (vLLM: request lines with --enable-log-requests and the "
                        "stats lines; SGLang: prefill batch lines) under the settings it states, and compare the "
                        "running / waiting / KV usage (and vLLM's throughputs) with the log's; says what it assumed")
    p.add_argument("--progress", action="store_true", help="show reading progress on stderr")
    p.set_defaults(fn=cmd_log, outputs=("out",))
    p = sub.add_parser("vllm", help="read a vLLM server's step recording (servers/vllm/recorder.py)")
    p.add_argument("recording", help="the recording (JSON lines, plain or .gz)")
    p.add_argument("--json", action="store_true", help="print the summary (and predictions) as JSON")
    p.add_argument("-o", "--out", help="write the Trace file")
    p.add_argument("--oracle-jsonl", help="write the recorded steps in the oracle's JSON-lines format")
    p.add_argument("--workload", help="write the workload JSON that `sim trace` re-simulates step for step")
    p.add_argument("--predict", metavar="CALIBRATION_RECORDING",
                   help="fit the cost model on another recording and predict this one's request times, each "
                        "with a band from the fit's residuals")
    p.add_argument("--cost-form", default="linear", metavar="FORM",
                   help="the fitted cost model's form (sim.cost.COST_FORMS: linear = per step + per token + per "
                        "context token; prefill_decode, per_seq, prefill_decode_seq)")
    p.add_argument("--progress", action="store_true", help="show reading progress on stderr")
    p.set_defaults(fn=cmd_vllm, outputs=("out", "oracle_jsonl", "workload"))
    from .search_cli import add_search_parser  # the config search's options and command (sim/search_cli.py)
    add_search_parser(sub)
    args = ap.parse_args(argv)
    check_outputs(args)
    try:
        return args.fn(args)
    except OSError as e:   # an output path that cannot be written (inputs say so themselves)
        raise SystemExit(f"cannot write {e.filename or 'the output'}: {e.strerror or e}") from None


if __name__ == "__main__":
    sys.exit(main())
