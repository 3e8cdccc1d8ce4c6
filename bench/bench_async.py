"""What async scheduling (vLLM's GPU default) costs or saves against sync, on the same arrivals:
steps, preemptions, TTFT (mean, p99) and mean end-to-end latency, for the built-in scenarios and the 11 workloads
of the async conformance cases (the simulator's runs, held to vLLM 0.34.0's by
tests/test_vllm_versions.py and tests/test_vllm034_random.py).

  python bench/bench_async.py            # one markdown table

Each workload runs under its own config with vllm_version 0.34, once sync and once async, step
costs from the units model (the lesson's); latencies are in the trace's time unit. Preemption
mode is set to recompute, the only mode async is modelled with.

What it shows is the decision side of async only: a finished request frees its slot and blocks a
call later, the last token's slot is held, a busy period ends with a drain. The simulator prices
every engine call at its batch's step time and has no CPU scheduling time for async to hide
behind the GPU's, which is what async buys on a real server; that gain is not in these numbers.
"""
from __future__ import annotations

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from sim import scenarios  # noqa: E402
from sim.metrics import summary  # noqa: E402
from sim.simulate import simulate  # noqa: E402
from sim.workload import Workload  # noqa: E402

CASES = ROOT / "tests" / "fixtures" / "vllm_async034"


def workloads():
    for name in scenarios.SCENARIOS:
        yield name, scenarios.workload(name)
    for p in sorted(CASES.glob("*.workload.json")):
        yield p.name[: -len(".workload.json")], Workload.load(str(p))


def main() -> None:
    print("| workload | requests | steps sync -> async | preemptions | TTFT mean | TTFT p99 | E2E mean |")
    print("|---|---:|---:|---:|---:|---:|---:|")
    for name, wl in workloads():
        base = {"vllm_version": "0.34", "preemption_mode": "recompute"}
        if wl.config.get("scheduler", "vllm") != "vllm":
            continue
        try:
            s = summary(simulate(wl, {**base, "async_scheduling": False}))
            a = summary(simulate(wl, {**base, "async_scheduling": True}))
        except ValueError as e:   # a scenario async is not modelled for: say so, go on
            print(f"| {name} | | not run: {e} | | | | |")
            continue

        def pct(key):
            return f"{s[key]:.1f} -> {a[key]:.1f} ({100 * (a[key] - s[key]) / s[key]:+.1f}%)" if s[key] else "-"
        print(f"| {name} | {s['requests']} | {s['steps']} -> {a['steps']} | {s['preemptions']} -> {a['preemptions']} | "
              f"{pct('ttft_mean')} | {pct('ttft_p99')} | {pct('e2e_mean')} |")


if __name__ == "__main__":
    main()
