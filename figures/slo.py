"""Figures and tables for SLO targets: pure functions of sim.slo.slo_table's per-request table.

- slo_timeline_figure: every request at its arrival time (x) and its TTFT (y), met ones as dots,
  missed ones as red crosses (hover: which targets, by how much, when the miss became certain),
  rejected ones as triangles on the time axis; the base TTFT target as a dashed line.
- misses_table: the requests that missed, in plain columns, in the order the misses happened.
"""
from __future__ import annotations

import html
import math

import numpy as np
import pandas as pd
import plotly.graph_objects as go

from sim.slo import TARGETS

from .common import FONT, PREEMPT, REJECT, themed

MET = "#59A14F"
MAX_POINTS = 20_000  # past this many requests, the met ones are thinned (the misses are all drawn)
LABELS = {"ttft": "TTFT", "tpot": "TPOT", "e2e": "E2E"}


def _num(v) -> str:
    return "–" if v != v else f"{v:.4g}"


def missed_texts(table: pd.DataFrame) -> list[str]:
    """Per row of slo_table: 'TTFT +12.5, TPOT +0.8' (what it missed and by how much), 'rejected'
    for a rejected request, '' for one that met every target."""
    rejected = table["rejected"].to_numpy(dtype=bool)
    cols = [(LABELS[k], table[f"met_{k}"].to_numpy(dtype=bool), table[f"{k}_over"].to_numpy(dtype=float))
            for k in TARGETS]
    out = []
    for i in range(len(table)):  # a loop over plain arrays: no per-row pandas objects
        if rejected[i]:
            out.append("rejected")
            continue
        out.append(", ".join(f"{name} +{over[i]:.4g}" if over[i] == over[i] else f"{name} (unfinished)"
                             for name, met, over in cols if not met[i]))
    return out


def misses_table(table: pd.DataFrame) -> pd.DataFrame:
    """The requests that missed a target: request, tenant, arrival, what it missed and by how
    much, and when the miss became certain; ordered by that time."""
    miss = table[~table["met"].to_numpy(dtype=bool)]
    out = pd.DataFrame({"request": miss["request"], "tenant": miss["tenant"], "arrival": miss["arrival_time"],
                        "missed": missed_texts(miss), "missed at": miss["missed_at"], "TTFT": miss["ttft"],
                        "TPOT": miss["tpot"], "E2E": miss["e2e"]})
    return out.sort_values(["missed at", "request"], kind="stable").reset_index(drop=True)


def _hover(table: pd.DataFrame) -> list[str]:
    missed = missed_texts(table)
    # names come from a user's workload: escaped, since Plotly renders tags in hover text
    return [f"{html.escape(str(r))} ({html.escape(str(t))}): arrived {_num(a)}, TTFT {_num(f)}; "
            + ("met every target" if not m else f"missed: {m} (certain at {_num(w)})")
            for r, t, a, f, m, w in zip(table["request"], table["tenant"], table["arrival_time"].to_numpy(),
                                        table["ttft"].to_numpy(), missed, table["missed_at"].to_numpy())]


def slo_timeline_figure(table: pd.DataFrame, time_unit: str, ttft_target: float | None = None,
                        height: int = 320) -> go.Figure:
    """Requests over time: x = arrival, y = TTFT; red x = missed a target, triangle = rejected.
    meta: {"met", "missed", "rejected"} counts."""
    met = table["met"].to_numpy(dtype=bool)
    rejected = table["rejected"].to_numpy(dtype=bool)
    fig = go.Figure()
    ok = table[met & ~rejected]
    if len(ok) > MAX_POINTS:
        ok = ok.iloc[:: math.ceil(len(ok) / MAX_POINTS)]
    kind = "scattergl" if len(table) > 2000 else "scatter"
    groups = [(ok, "met", MET, "circle", 6), (table[~met & ~rejected], "missed", PREEMPT, "x", 8)]
    for part, name, colour, symbol, size in groups:
        fig.add_trace({"type": kind, "x": part["arrival_time"].to_numpy(), "y": part["ttft"].to_numpy(),
                       "mode": "markers", "name": name, "marker": {"color": colour, "symbol": symbol, "size": size},
                       "text": _hover(part), "hovertemplate": "%{text}<extra></extra>"})
    rej = table[rejected]
    if len(rej):
        fig.add_trace({"type": kind, "x": rej["arrival_time"].to_numpy(), "y": np.zeros(len(rej)),
                       "mode": "markers", "name": "rejected", "text": _hover(rej),
                       "marker": {"color": REJECT, "symbol": "triangle-down", "size": 9},
                       "hovertemplate": "%{text}<extra></extra>"})
    if ttft_target is not None:
        fig.add_hline(y=ttft_target, line={"dash": "dash", "color": "#6B7280"},
                      annotation_text=f"TTFT target {ttft_target:g}", annotation_position="top left")
    themed(fig).update_layout(
        height=height, font=FONT, margin={"l": 60, "r": 20, "t": 30, "b": 50},
        xaxis={"title": {"text": f"arrival ({time_unit})"}},
        yaxis={"title": {"text": f"TTFT ({time_unit})"}, "rangemode": "tozero"},
        legend={"orientation": "h", "y": 1.12},
        meta={"met": int(met.sum()), "missed": int((~met & ~rejected).sum()), "rejected": int(rejected.sum())})
    return fig
