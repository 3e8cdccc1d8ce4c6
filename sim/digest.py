"""A run's digest: what the headline metrics read, without the per-token rows.

A Trace keeps one batch row per request per step and one KV row per block change: tens of
millions of rows for a million-request run, gigabytes that a config search throws away after
reading a dozen numbers. A Digest keeps the requests and steps tables whole and, of the batch,
only what sim.metrics and sim.slo read from it: each request's inter-token gaps (mean, worst),
the service each tenant got in each step, and the slot-steps that did work. summary() and
slo_summary() take either; the simulator makes one directly (simulate(..., digest=True)) at a
small fraction of the memory, and sim.metrics.digest_of() makes one from any Trace.
"""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import pandas as pd

GAP_COLUMNS = ("mean", "max")
SERVICE_COLUMNS = ("step", "tenant", "prompt_tokens", "sampled")


@dataclass
class Digest:
    requests: pd.DataFrame
    steps: pd.DataFrame
    # index: request (those with two or more delivered tokens); mean and max of the time between them
    gaps: pd.DataFrame
    # one row per (step, tenant) that got service: prompt tokens computed (recompute excluded) and tokens sampled
    service: pd.DataFrame
    useful_slot_steps: int   # batch entries that did work (static batching's padding rows do none)
    meta: dict = field(default_factory=dict)

    @property
    def time_unit(self) -> str:
        return self.meta.get("time_unit", "steps")

    @property
    def source(self) -> str:
        return self.meta.get("source", "unknown")

    @property
    def num_steps(self) -> int:
        return int(len(self.steps))


def gaps_frame(rids: list, sums: list, counts: list, maxes: list) -> pd.DataFrame:
    n = np.asarray(counts, dtype=np.float64)
    return pd.DataFrame({"mean": np.asarray(sums, dtype=np.float64) / np.where(n > 0, n, np.nan),
                         "max": np.asarray(maxes, dtype=np.float64)},
                        index=pd.Index(np.asarray(rids, dtype=object), name="request"))

