"""How much of shortest-job-first's gain survives a real length predictor (the Policies page).

Oracle SJF orders the queue by the true output length, which no server knows. sjf_predicted
orders it by the true length times a seeded lognormal error exp(sigma * z); sigma 0 is the
oracle, a large sigma is a random order. The gain kept is (FCFS - policy) / (FCFS - oracle) on
the mean end-to-end latency: 100% at sigma 0, falling toward 0 (FCFS's mean) as sigma grows.

    table = predictor_sweep((0, 0.5, 1, 2), seeds=3)   # one row per (sigma, seed)
    predictor_summary(table)                           # one row per sigma
"""
from __future__ import annotations

from typing import Iterable

import pandas as pd

from ..metrics import summary
from ..simulate import simulate
from ..workload import Workload, generate

SIGMAS = (0.0, 0.25, 0.5, 1.0, 1.5, 2.0, 3.0)


def predictor_workload(n: int = 120, seed: int = 3) -> Workload:
    """A queue that builds up on four slots: short prompts, output lengths spread lognormally
    (median 60, sigma 1), where the order of service matters most."""
    return generate(n, seed=seed, arrival="poisson", rate=0.08, prompt=64,
                    output={"dist": "lognormal", "median": 60, "sigma": 1.0, "max": 1000},
                    config={"max_num_seqs": 4}, id_prefix="p")


def predictor_sweep(sigmas: Iterable[float] = SIGMAS, seeds: int = 3, workload: Workload | None = None) -> pd.DataFrame:
    """Per (sigma, predictor seed): mean E2E and the share of oracle SJF's gain over FCFS kept.
    Rows for "fcfs" and "sjf" (the oracle) come first, with sigma NaN."""
    wl = workload or predictor_workload()
    e2e = {p: summary(simulate(wl, {"policy": p}))["e2e_mean"] for p in ("fcfs", "sjf")}
    gain = e2e["fcfs"] - e2e["sjf"]
    rows = [{"policy": p, "sigma": float("nan"), "seed": -1, "e2e_mean": v,
             "gain_kept": 1.0 - (v - e2e["sjf"]) / gain if gain else float("nan")} for p, v in e2e.items()]
    for sigma in sorted(set(float(s) for s in sigmas)):
        for seed in range(1 if sigma == 0 else int(seeds)):  # sigma 0 ignores the seed
            v = summary(simulate(wl, {"policy": "sjf_predicted", "sjf_error_sigma": sigma,
                                      "predictor_seed": seed}))["e2e_mean"]
            rows.append({"policy": "sjf_predicted", "sigma": sigma, "seed": seed, "e2e_mean": v,
                         "gain_kept": (e2e["fcfs"] - v) / gain if gain else float("nan")})
    return pd.DataFrame(rows)


def predictor_summary(table: pd.DataFrame) -> pd.DataFrame:
    """Per sigma: mean E2E and gain kept (mean, lowest, highest over the predictor seeds)."""
    t = table[table["policy"] == "sjf_predicted"]
    g = t.groupby("sigma")
    return pd.DataFrame({"sigma": list(g.groups), "e2e_mean": g["e2e_mean"].mean().to_numpy(),
                         "gain_kept": g["gain_kept"].mean().to_numpy(), "gain_low": g["gain_kept"].min().to_numpy(),
                         "gain_high": g["gain_kept"].max().to_numpy()})
