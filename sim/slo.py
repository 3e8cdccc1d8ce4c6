"""Service-level objectives: targets for TTFT, TPOT and end-to-end latency, met or missed per
request, and goodput per run.

Targets are in the run's time unit (ms on a timed cost model, the cost model's units or steps
otherwise). TPOT is the mean time between a request's output tokens after the first (metrics'
itl_mean); a request with one output token has no such gap and meets any TPOT target.
A rejected request, or one that did not finish, misses every target that applies to it.

Goodput is DistServe's (Zhong et al., OSDI 2024): the requests per time unit that met every
target that applies to them, over the run's span.

Overrides: per tenant or per priority class, a partial SLO whose targets replace the base
ones; when both match a request, the tenant's wins (it is the more specific contract).

    slo = SLO.parse('{"ttft": 400, "tpot": 40, "tenants": {"batch": {"ttft": 5000}}}')
    slo_summary(trace, slo)["goodput"]
"""
from __future__ import annotations

import json
import math
from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from .limits import shown
from .metrics import per_request
from .trace import Trace

TARGETS = ("ttft", "tpot", "e2e")
_REL_TOL = 1e-9  # step times are float sums: a target equal to the latency counts as met


def _cut(name: str) -> str:
    """A name as a one-line message shows it: at most 24 characters."""
    return name if len(name) <= 24 else name[:21] + "..."


def _target(name: str, v, where: str) -> float | None:
    if v is None:
        return None
    if isinstance(v, bool) or not isinstance(v, (int, float)):
        raise ValueError(f"SLO {where}{name} must be a number, not {shown(v)}")
    if isinstance(v, int) and abs(v) > 1e308:   # float() of it would overflow
        raise ValueError(f"SLO {where}{name} must be a positive finite number, not {shown(v)}")
    v = float(v)
    if not math.isfinite(v) or v <= 0:
        raise ValueError(f"SLO {where}{name} must be a positive finite number, not {v!r}")
    return v


@dataclass(frozen=True)
class SLO:
    ttft: float | None = None
    tpot: float | None = None
    e2e: float | None = None
    per_tenant: dict = field(default_factory=dict)  # tenant -> SLO (its targets replace the base ones)
    per_priority: dict = field(default_factory=dict)  # priority -> SLO

    def __post_init__(self):
        for name in TARGETS:
            object.__setattr__(self, name, _target(name, getattr(self, name), ""))
        for attr, what, key in (("per_tenant", "tenant", str), ("per_priority", "priority", int)):
            d = getattr(self, attr)
            if not isinstance(d, dict):
                raise ValueError(f"SLO {attr} must map a {what} to its targets")
            # plain dicts of targets are welcome too: SLO(per_tenant={"batch": {"ttft": 5000}})
            object.__setattr__(self, attr, {key(k): v if isinstance(v, SLO) else SLO._from_dict(v, f"{what} {k} ", False)
                                            for k, v in d.items()})

    def __hash__(self):  # dict fields: hash the canonical JSON instead
        return hash(json.dumps(self.to_json(), sort_keys=True))

    # -- reading ---------------------------------------------------------------------
    @classmethod
    def parse(cls, obj) -> "SLO":
        """From a dict or a JSON string: {"ttft": .., "tpot": .., "e2e": .., "tenants": {name:
        {...}}, "priorities": {number: {...}}}. ValueError with a plain message when bad."""
        if isinstance(obj, SLO):
            return obj
        if isinstance(obj, (str, bytes)):
            try:
                obj = json.loads(obj)
            except (json.JSONDecodeError, UnicodeDecodeError) as e:
                raise ValueError(f"SLO is not valid JSON ({getattr(e, 'msg', e)})") from None
            except RecursionError:   # 200,000 "[" in a row (sim.limits.load_json says the same)
                raise ValueError("SLO nests lists or objects too deep") from None
            except ValueError:   # an integer of over 4,300 digits
                raise ValueError("SLO holds a number of thousands of digits") from None
        if obj is None:
            return cls()
        return cls._from_dict(obj, "", nested=True)

    @classmethod
    def _from_dict(cls, d, where: str, nested: bool) -> "SLO":
        if not isinstance(d, dict):
            raise ValueError(f"SLO {where or ''}must be a JSON object like {{\"ttft\": 400, \"tpot\": 40}}")
        allowed = set(TARGETS) | ({"tenants", "priorities"} if nested else set())
        unknown = sorted(str(k) for k in set(d) - allowed)
        if unknown:
            names = ", ".join(_cut(u) for u in unknown[:3]) + (", ..." if len(unknown) > 3 else "")
            raise ValueError(f"unknown SLO keys {where}: {names} (known: {', '.join(sorted(allowed))})"
                             .replace(" :", ":"))
        targets = {k: _target(k, d.get(k), where) for k in TARGETS}
        tenants, priorities = {}, {}
        if nested:
            t = d.get("tenants") or {}
            if not isinstance(t, dict):
                raise ValueError("SLO tenants must be an object: tenant name -> targets")
            tenants = {str(k): cls._from_dict(v, f"tenant {_cut(str(k))} ", nested=False) for k, v in t.items()}
            p = d.get("priorities") or {}
            if not isinstance(p, dict):
                raise ValueError("SLO priorities must be an object: priority number -> targets")
            for k, v in p.items():
                try:
                    key = int(k)
                except (TypeError, ValueError):
                    raise ValueError(f"SLO priority {shown(k)} is not a whole number") from None
                if isinstance(k, float) or str(key) != str(k).strip():
                    raise ValueError(f"SLO priority {shown(k)} is not a whole number")
                priorities[key] = cls._from_dict(v, f"priority {shown(key)} ", nested=False)
        return cls(**targets, per_tenant=tenants, per_priority=priorities)

    def to_json(self) -> dict:
        out = {k: getattr(self, k) for k in TARGETS if getattr(self, k) is not None}
        if self.per_tenant:
            out["tenants"] = {k: v.to_json() for k, v in sorted(self.per_tenant.items())}
        if self.per_priority:
            out["priorities"] = {str(k): v.to_json() for k, v in sorted(self.per_priority.items())}
        return out

    # -- using ------------------------------------------------------------------------
    @property
    def empty(self) -> bool:
        return not any(self.has_target(k) for k in TARGETS)

    def has_target(self, name: str) -> bool:
        return (getattr(self, name) is not None or any(getattr(o, name) is not None for o in self.per_tenant.values())
                or any(getattr(o, name) is not None for o in self.per_priority.values()))

    def targets_for(self, tenant: str = "default", priority: int = 0) -> dict:
        """{"ttft": .., "tpot": .., "e2e": ..} for one request (None: no target)."""
        out = {k: getattr(self, k) for k in TARGETS}
        for o in (self.per_priority.get(int(priority)), self.per_tenant.get(str(tenant))):
            if o is not None:  # tenant last: it wins
                out.update({k: getattr(o, k) for k in TARGETS if getattr(o, k) is not None})
        return out

    def ttft_for(self, tenant: str = "default", priority: int = 0) -> float | None:
        return self.targets_for(tenant, priority)["ttft"]

    def summarize(self, trace: Trace) -> dict:
        """slo_summary(trace, self): what sim.metrics.summary(trace, slo=self) merges in."""
        return slo_summary(trace, self)


def _met(value: np.ndarray, target: np.ndarray, ok: np.ndarray, missing_meets: bool = False) -> np.ndarray:
    """Per request: True where no target, else finished (ok) and value within the target."""
    within = value <= target * (1 + _REL_TOL)
    if missing_meets:
        within = within | np.isnan(value)
    return np.where(np.isnan(target), True, ok & within)


def slo_table(trace: Trace, slo: SLO) -> pd.DataFrame:
    """Per request: its targets (NaN: none), its ttft/tpot/e2e, met_ttft/met_tpot/met_e2e, met
    (all), `<target>_over` = value - target (positive: missed by that much, negative: the margin
    left; NaN when there is no target or no value), and `missed_at`: when the miss became certain
    (the TTFT or E2E deadline, the finish for TPOT, the arrival for a rejected request; NaN when met)."""
    slo = SLO.parse(slo)
    pr = per_request(trace)
    r = trace.requests
    arrival = r["arrival_time"].to_numpy(dtype=float)
    finish = r["finish_time"].to_numpy(dtype=float)
    rejected = pr["rejected"].to_numpy(dtype=bool)
    finished = ~rejected & ~np.isnan(finish)
    out = pd.DataFrame({"request": pr["request"], "tenant": pr["tenant"],
                        "priority": r["priority"].to_numpy(), "arrival_time": arrival})
    # one lookup per (tenant, priority) class, not per request (runs of a million requests)
    t_codes, tenants = pd.factorize(pr["tenant"].to_numpy())
    p_codes, prios = pd.factorize(r["priority"].to_numpy())
    pairs, codes = np.unique(t_codes * max(len(prios), 1) + p_codes, return_inverse=True)
    per_class = [slo.targets_for(str(tenants[c // max(len(prios), 1)]), int(prios[c % max(len(prios), 1)]))
                 for c in pairs]
    targets = {k: np.array([np.nan if c[k] is None else c[k] for c in per_class], dtype=float)[codes]
               if len(r) else np.zeros(0) for k in TARGETS}
    values = {"ttft": pr["ttft"].to_numpy(dtype=float), "tpot": pr["itl_mean"].to_numpy(dtype=float),
              "e2e": pr["e2e"].to_numpy(dtype=float)}
    for k in TARGETS:
        out[f"{k}_target"] = targets[k]
    for k in TARGETS:
        out[k] = values[k]
    met_all = np.ones(len(r), dtype=bool)
    for k in TARGETS:
        m = _met(values[k], targets[k], finished, missing_meets=(k == "tpot"))
        out[f"met_{k}"] = m
        met_all &= m
    out["met"] = met_all
    for k in TARGETS:
        # by how much: positive = missed by that much, negative = margin left; NaN: no target or unknown
        out[f"{k}_over"] = values[k] - targets[k]
    missed_at = np.full(len(r), np.nan)
    end = float(trace.steps["end"].max()) if len(trace.steps) else np.nan
    for k, when in (("tpot", np.where(np.isnan(finish), end, finish)), ("e2e", arrival + targets["e2e"]),
                    ("ttft", arrival + targets["ttft"])):
        miss = ~out[f"met_{k}"].to_numpy()
        missed_at = np.where(miss, np.fmin(missed_at, when), missed_at)
    missed_at = np.where(rejected & ~met_all, arrival, missed_at)
    out["missed_at"] = missed_at
    out["finished"] = finished
    out["rejected"] = rejected
    return out


def _fraction(mask: np.ndarray, applies: np.ndarray):
    n = int(applies.sum())
    return None if n == 0 else float(mask[applies].sum() / n)


def slo_summary(trace: Trace, slo: SLO) -> dict:
    """Flat, JSON-friendly: attainment per target and of all targets (fractions of the requests
    a target applies to; None when none has it), goodput (requests that met every target per
    time unit over the run's span) and its unit, and the counts behind them."""
    slo = SLO.parse(slo)
    tab = slo_table(trace, slo)
    out = {}
    any_target = np.zeros(len(tab), dtype=bool)
    for k in TARGETS:
        applies = tab[f"{k}_target"].notna().to_numpy()
        any_target |= applies
        out[f"slo_{k}_attainment"] = _fraction(tab[f"met_{k}"].to_numpy(), applies)
    met = tab["met"].to_numpy() & any_target
    out["slo_attainment"] = _fraction(met, any_target)
    s = trace.steps
    span = float(s["end"].max() - s["start"].min()) if len(s) else math.nan
    n_met = int(met.sum())
    out["slo_met"] = n_met
    out["slo_missed"] = int((any_target & ~met).sum())
    out["goodput"] = (n_met / span if span > 0 else None) if any_target.any() and math.isfinite(span) else None
    out["goodput_unit"] = f"requests/{trace.time_unit}"
    out["slo"] = json.dumps(slo.to_json(), sort_keys=True)
    return out
