"""Figures for the Compare page: two runs of the same requests, side by side.

- lockstep_figure: both runs' slot lanes as two subplots of ONE figure sharing one set of
  frames and one slider, so ▶ Play advances A and B together (frames move 4 shapes: a veil
  and a cursor per side).
- first_difference: the first step where A and B put different work in the batch.
- diff_table: sim.analysis.compare's metrics with a readable name, the relative change and
  which side is better.
- change_figure: per request, the change B - A of end-to-end latency or TTFT, sorted, faster
  requests in green and slower in red (a line of markers past MAX_BARS requests).
"""
from __future__ import annotations

import math

import numpy as np
import pandas as pd
import plotly.graph_objects as go

from sim.trace import Trace

from .animate import assemble
from .common import CONTROLS_MARGIN_B, FONT, MAX_BARS, TEMPLATE, pick_frames, play_controls, plotly_text, themed
from .playback import lane_traces

MAX_POINTS = 20_000   # markers drawn of a long sorted change curve (change_figure)

FASTER, SLOWER, SAME = "#2E7D32", "#C0392B", "#9CA3AF"

# summary() key -> (label, which way is better: -1 lower, +1 higher, 0 neither)
METRICS = {
    "finished": ("requests finished", +1), "rejected": ("requests rejected", -1),
    "steps": ("steps", -1), "duration": ("duration", -1),
    "ttft_mean": ("TTFT, mean", -1), "ttft_p50": ("TTFT, median", -1), "ttft_p99": ("TTFT, p99", -1),
    "itl_mean": ("inter-token gap, mean", -1), "itl_worst": ("inter-token gap, worst", -1),
    "e2e_mean": ("end-to-end latency, mean", -1), "wait_mean": ("wait before first step, mean", -1),
    "throughput": ("throughput (tokens per time unit)", +1), "tokens_per_step": ("tokens per busy step", 0),
    "slot_utilization": ("slot use", +1), "preemptions": ("preemptions", -1),
    "recomputed_tokens": ("tokens recomputed", -1), "L": ("L, mean requests in system", -1),
    "lambda": ("λ, completions per time unit", +1), "W": ("W, mean time in system", -1),
    "jain_index": ("Jain's fairness index", +1), "max_service_gap": ("largest service gap between tenants", -1),
}


# ---------------------------------------------------------------------------------------------
# Lock-step animation
# ---------------------------------------------------------------------------------------------

def _veil(step: int, x_end: float, axis: str) -> list[dict]:
    """A veil over the steps not yet played and a cursor, on one subplot (axis "" or "2")."""
    x, y = f"x{axis}", f"y{axis} domain"
    return [
        {"type": "rect", "xref": x, "yref": y, "x0": step + 0.5, "x1": x_end, "y0": 0, "y1": 1,
         "fillcolor": "rgba(255,255,255,0.82)", "line": {"width": 0}, "layer": "above"},
        {"type": "line", "xref": x, "yref": y, "x0": step + 0.5, "x1": step + 0.5, "y0": 0, "y1": 1,
         "line": {"color": "#111827", "width": 2}, "layer": "above"},
    ]


def lockstep_figure(a: Trace, b: Trace, titles: tuple[str, str] = ("A", "B"), max_frames: int = 200,
                    frame_ms: int | None = None) -> go.Figure:
    """A's slot lanes above B's, one step axis, one set of frames: Play moves both veils together.

    Data: A's traces on axes x/y (its heatmap first), then B's on x2/y2 (its heatmap is the
    first trace with yaxis "y2"). A legend entry B shares with A is shown once.
    layout.meta: {"frames", "last_step": [A's, B's], "slots": [A's, B's]}.
    """
    data_a, info_a = lane_traces(a)
    data_b, info_b = lane_traces(b)
    names_a = {t.get("name") for t in data_a}
    for t in data_a:
        t.update(xaxis="x", yaxis="y")
    for t in data_b:
        t.update(xaxis="x2", yaxis="y2")
        if t.get("name") in names_a:
            t["showlegend"] = False
    sa, sb = info_a["steps"], info_b["steps"]
    steps = np.union1d(sa, sb)
    x_start = float(steps[0]) - 0.5 if len(steps) else 0.5
    x_end = float(steps[-1]) + 0.5 if len(steps) else 1.5
    fsteps = pick_frames(steps, max_frames)
    frames = [{"name": str(int(s)), "layout": {"shapes": _veil(int(s), x_end, "") + _veil(int(s), x_end, "2")}}
              for s in fsteps]
    slots = (info_a["slots"], info_b["slots"])
    rows = [max(2.0, float(n)) for n in slots]
    gap = 0.12
    h_a = (1 - gap) * rows[0] / sum(rows)
    plot_px = int(min(900, max(320, 110 + 30 * sum(rows))))
    stride = max(info_a["stride"], info_b["stride"])
    last = [int(sa[-1]) if len(sa) else 0, int(sb[-1]) if len(sb) else 0]

    def yaxis(n_slots: int, domain: list[float], title: str) -> dict:
        return {"domain": domain, "title": {"text": title}, "autorange": "reversed", "showgrid": False,
                "zeroline": False, **({"tickmode": "array", "tickvals": list(range(n_slots))} if n_slots <= 24 else {})}

    xcommon = {"range": [x_start, x_end], "showgrid": False, "zeroline": False,
               **({"dtick": 1} if len(steps) <= 30 else {})}
    annotations = [
        {"text": f"<b>{titles[0]}</b>", "xref": "paper", "yref": "paper", "x": 0, "y": 1, "yanchor": "bottom",
         "xanchor": "left", "showarrow": False, "font": {"size": 14}},
        {"text": f"<b>{titles[1]}</b>", "xref": "paper", "yref": "paper", "x": 0, "y": 1 - h_a - gap,
         "yanchor": "bottom", "xanchor": "left", "showarrow": False, "font": {"size": 14}},
    ]
    for i, (lst, axis) in enumerate(zip(last, ("", "2"))):
        if lst and lst < steps[-1]:  # the shorter run: say where it ended
            annotations.append({"text": f"all done at step {lst}", "xref": f"x{axis}", "yref": f"y{axis} domain",
                                "x": lst + 0.5, "y": 0.5, "xanchor": "left", "showarrow": False,
                                "font": {"size": 12, "color": "#6B7280"}})
    layout = {
        "height": plot_px + 190, "template": TEMPLATE, "font": FONT, "hoverlabel": {"font": {"size": 12}},
        "margin": {"l": 90, "r": 20, "t": 70, "b": CONTROLS_MARGIN_B},
        "legend": {"orientation": "h", "y": 1.06, "yanchor": "bottom", "x": 0, "bgcolor": "rgba(0,0,0,0)"},
        "xaxis": {**xcommon, "anchor": "y", "matches": "x2", "showticklabels": True},
        "xaxis2": {**xcommon, "anchor": "y2",
                   "title": {"text": "step" + (f" (every {stride}th shown)" if stride > 1 else "")}},
        "yaxis": yaxis(slots[0], [1 - h_a, 1], "A: slot"),
        "yaxis2": yaxis(slots[1], [0, 1 - h_a - gap], "B: slot"),
        "annotations": annotations,
        "shapes": frames[-1]["layout"]["shapes"] if frames else [],
        **play_controls(fsteps, frame_ms),
        "meta": {"frames": len(frames), "last_step": last, "slots": list(slots)},
    }
    return assemble(data_a + data_b, layout, frames)


def first_difference(a: Trace, b: Trace) -> int | None:
    """The first step at which A's batch and B's differ (requests, kinds or tokens), or where one
    run has a step the other has not; None if every step matches."""
    def per_step(t: Trace) -> dict[int, tuple]:
        bt = t.batch.sort_values(["step", "request"], kind="stable")
        keys = list(zip(bt["request"], bt["kind"], bt["tokens"].astype(int)))
        out: dict[int, list] = {}
        for s, k in zip(bt["step"].to_numpy(), keys):
            out.setdefault(int(s), []).append(k)
        return {s: tuple(v) for s, v in out.items()}

    pa, pb = per_step(a), per_step(b)
    steps_a = set(a.steps["step"].astype(int))
    steps_b = set(b.steps["step"].astype(int))
    for s in sorted(steps_a | steps_b):
        if s not in steps_a or s not in steps_b or pa.get(s, ()) != pb.get(s, ()):
            return s
    return None


# ---------------------------------------------------------------------------------------------
# Metrics difference
# ---------------------------------------------------------------------------------------------

def diff_table(m: pd.DataFrame) -> pd.DataFrame:
    """compare()'s metrics (metric, A, B, B - A) as a table for people: metric label, A, B,
    B - A, change (%) and better ("A", "B", "same" or "" where neither way is better).
    Rows where neither run has a value are dropped; unlisted metrics keep their key as label."""
    rows = []
    for r in m.itertuples(index=False):
        key, va, vb = r.metric, float(r.A), float(r.B)
        if key not in METRICS or (math.isnan(va) and math.isnan(vb)):
            continue
        label, way = METRICS[key]
        d = vb - va
        pct = 100 * d / abs(va) if va and not math.isnan(va) and not math.isnan(vb) else math.nan
        if math.isnan(d) or way == 0:
            better = ""
        elif abs(d) <= 1e-9 * max(1.0, abs(va)):
            better = "same"
        else:
            better = "B" if d * way > 0 else "A"
        rows.append({"metric": label, "A": va, "B": vb, "B - A": d, "change %": pct, "better": better,
                     "key": key})
    return pd.DataFrame(rows, columns=["metric", "A", "B", "B - A", "change %", "better", "key"])


def change_figure(diff: pd.DataFrame, metric: str = "e2e", unit: str = "", max_bars: int = MAX_BARS,
                  max_points: int = MAX_POINTS) -> go.Figure:
    """Per request, B - A of `metric` ("e2e" or "ttft"), sorted from most faster to most slower.

    Bars (one per request, x = request id) up to max_bars requests, a line of Scattergl markers
    (x = rank) past it, at most max_points of them (evenly spaced ranks, the first and last kept). Requests without the metric on both sides (rejected, unfinished) are
    left out. layout.meta: {"metric", "faster", "slower", "same", "missing"}.
    """
    col, ca, cb = f"{metric}_change", f"{metric}_A", f"{metric}_B"
    d = diff[[ca, cb, col]].copy()
    d["request"] = diff.index.astype(str) if "request" not in diff.columns else diff["request"].astype(str)
    missing = int(d[col].isna().sum())
    d = d[d[col].notna()].sort_values(col, kind="stable")
    v = d[col].to_numpy(dtype=float)
    colour = np.where(v < -1e-9, FASTER, np.where(v > 1e-9, SLOWER, SAME))
    shown = plotly_text(np.asarray(d["request"].to_numpy(), dtype=object))   # ids as written, never as markup
    custom = np.stack([shown, d[ca].to_numpy(dtype=float), d[cb].to_numpy(dtype=float)], axis=-1)
    label = {"e2e": "end-to-end latency", "ttft": "time to first token"}.get(metric, metric)
    u = f" {unit}" if unit else ""
    hover = ("%{customdata[0]}<br>A %{customdata[1]:.4~g}" + u + " → B %{customdata[2]:.4~g}" + u
             + "<br>change %{y:+.4~g}" + u + "<extra></extra>")
    fig = go.Figure()
    if len(d) <= max_bars:
        fig.add_trace(go.Bar(x=shown, y=v, marker_color=colour, marker_line_width=0, customdata=custom,
                             hovertemplate=hover, name="B - A"))
        fig.update_xaxes(type="category", title_text="request (sorted by the change)",
                         showticklabels=len(d) <= 60, tickangle=-45)
    else:
        # past max_points, evenly spaced ranks of the sorted curve (its ends kept): a million
        # requests' markers would be a hundred MB of figure for a curve a few thousand points draw
        rank = np.arange(len(d))
        if len(d) > max_points:
            rank = np.unique(np.linspace(0, len(d) - 1, max_points).round().astype(np.int64))
        fig.add_trace(go.Scattergl(x=rank, y=v[rank], mode="markers", customdata=custom[rank],
                                   marker={"color": colour[rank], "size": 4}, hovertemplate=hover, name="B - A"))
        fig.update_xaxes(title_text=f"requests, sorted by the change ({len(d):,}"
                                    + (f"; {len(rank):,} evenly spaced shown" if len(rank) < len(d) else "") + ")")
    fig.add_hline(y=0, line_color="#6B7280", line_width=1)
    themed(fig).update_layout(height=320, font=FONT, showlegend=False, bargap=0.1,
                      margin={"l": 71, "r": 20, "t": 30, "b": 80},
                      yaxis={"title": {"text": f"B - A, {label}{u}"}, "zeroline": False},
                      meta={"metric": metric, "faster": int((v < -1e-9).sum()), "slower": int((v > 1e-9).sum()),
                            "same": int((np.abs(v) <= 1e-9).sum()), "missing": missing})
    return fig
