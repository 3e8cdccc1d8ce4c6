"""How well the simulator replays a real llama-server log on the log's own clock.

    python bench/bench_logresim.py            # every shared log with timestamps
    python bench/bench_logresim.py FILE...    # your own logs

For each log with timestamps: the cost model fitted to its calls (servers.llama_server.resim.call_cost: ms per
call = per_step + per_token x tokens + per_context_token x context tokens, R^2 over the calls),
then its workload replayed through the simulator as llama-server slots with the server's own
settings (slots, -b, -cb, prompt cache) at the logged arrival times, and the log's mean TTFT,
mean end-to-end time and duration next to the simulator's (ratio sim / log). Logs without
timestamps are listed and skipped: their calls have no durations.
"""
from __future__ import annotations

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from servers.llama_server import read_llama_log, workload_from_trace  # noqa: E402
from servers.llama_server.resim import call_cost, has_call_times, resimulate  # noqa: E402
from sim.metrics import summary  # noqa: E402

SHARED = ROOT.parent / "shared" / "llama-logs"
FIXTURES = ROOT / "tests" / "fixtures" / "llama-logs"


def logs() -> list[Path]:
    if SHARED.is_dir():
        return sorted(SHARED.glob("*/*.log"))
    return sorted(p for p in FIXTURES.glob("*/*") if p.name.endswith((".log", ".log.gz")))


def main(argv: list[str]) -> int:
    files = [Path(a) for a in argv] or logs()
    head = (f"{'log':46s} {'calls':>5s} {'R2':>5s} {'ms/call':>7s} {'ms/tok':>6s} | {'TTFT log':>8s} {'sim':>7s} "
            f"{'x':>5s} | {'e2e log':>8s} {'sim':>7s} {'x':>5s} | {'dur log':>8s} {'sim':>7s} {'x':>5s}")
    print(head)
    print("-" * len(head))
    ratios = []
    for f in files:
        tr = read_llama_log(f)
        name = f"{f.parent.name}/{f.name}"[:46]
        if not has_call_times(tr):
            print(f"{name:46s} (no timestamps: skipped)")
            continue
        cost = call_cost(tr)
        sim = resimulate(tr, {"slots": dict(workload_from_trace(tr).config)}, wall_clock=True)["slots"]
        a, b = summary(tr), summary(sim)
        row = [(a[k], b[k], b[k] / a[k] if a[k] else float("nan")) for k in ("ttft_mean", "e2e_mean", "duration")]
        ratios.append([r[2] for r in row])
        cells = " | ".join(f"{x:8.0f} {y:7.0f} {z:5.2f}" for x, y, z in row)
        print(f"{name:46s} {len(tr.steps):5d} {cost.fit_info['r2']:5.2f} {cost.per_step:7.2f} {cost.per_token:6.3f} | "
              f"{cells}")
    if ratios:
        import numpy as np
        med = np.nanmedian(np.asarray(ratios), axis=0)
        print(f"\nmedian sim / log over {len(ratios)} logs: TTFT {med[0]:.2f}, end-to-end {med[1]:.2f}, "
              f"duration {med[2]:.2f}")
    print("Not modelled by the simulator: context shift (s4), KV-cache failures and batch retries (s9), "
          "cancelled streams (s6): expect those logs to differ.")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
