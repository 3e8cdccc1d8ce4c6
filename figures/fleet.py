"""Figures and tables for the Fleet page: pure functions from a FleetTrace (sim.fleet) to Plotly
figures and DataFrames. Each replica's Trace is an ordinary Trace, so the single-replica figures
(figures.playback.kv_map_figure, inspector_tables; figures.compare.change_figure) draw one
replica, or a per-request A/B, as they are.

- lanes_figure: every replica's slot lanes stacked on ONE time axis (one row per replica, x in
  the fleet's ms), sampled on a time grid of at most `bins` columns over a window, the scrub
  time marked across every row. A heatmap per replica (z = a palette code of the request, -1
  idle), so its size is replicas x slots x bins, whatever the run's length.
- signals_figure: per replica over time: waiting, running, KV use, prefix-cache hit rate so far
  (a line per replica, at most `max_points` a line: the peak of each time bin).
- fleet_at: each replica's state at one time (the step running, queue, KV, the router's count).
- routing_table / decision_scores / explain_decision / scores_figure: why each request went where.
- placement_figure: where each shared-prefix group's requests landed, A beside B.
- fleet_requests / latency_stats / headline / per_replica_table / ab_table / request_changes:
  the numbers (sim.fleet.metrics.fleet_summary's, plus TTFT / TPOT / E2E p50 and p99).
"""
from __future__ import annotations

import json
import math

import numpy as np
import pandas as pd
import plotly.graph_objects as go

from sim.fleet.metrics import fleet_requests, latency_stats, request_changes  # noqa: F401 (the page's)

from .animate import assemble
from .common import (EMPTY, FONT, MAX_HOVER_CELLS, PREEMPT, REQUEST_PALETTE, TEMPLATE, discrete_colorscale,
                     plotly_text, tick_room)

MAX_LANE_BINS = 1200        # time columns of the lanes figure, whatever the window
MAX_LANE_CELLS = 400_000    # cells of all the replicas' lanes: fewer columns when there are many slots
MIN_LANE_BINS = 300
MAX_SHADED_CELLS = 600_000  # prefill / recompute shading (a second heatmap a replica) only below this
MAX_POINTS = 1500           # points a line of the signals figure (at most)
MAX_FIGURE_POINTS = 24_000  # points a signal over all replicas (64 replicas: 375 a line)
MIN_POINTS = 200
MAX_GROUPS = 40             # shared-prefix groups drawn in the placement heatmaps (the largest)
MAX_SCORE_TEXT = 16         # replicas written out in a score cell of the routing table ("…" past)
KIND_CODE = {"prefill": 0, "decode": 1, "recompute": 2, "padding": 3}
KIND_SHADE = {0: "rgba(255,255,255,0.50)", 1: "rgba(0,0,0,0)", 2: "rgba(20,20,20,0.40)", 3: "rgba(255,255,255,0.85)"}
MARK = "#111827"
PICKED, OTHER = "#1F4E79", "#A0B8CF"

# Each rule a router records (Decision.reason), in words: "<request> went to <replica> <words>".
REASON_WORDS = {
    "round_robin": "because it was next in turn (round robin, in the order requests reached the router)",
    "random": "drawn at random",
    "lower_load": "because of the two replicas drawn at random it had fewer requests in flight",
    "tie_first_drawn": "because the two replicas drawn had as many requests in flight and it was drawn first",
    "single_worker": "because it is the only replica",
    "least_loaded": "because it had the lowest load",
    "tie_first": "because it was the first of the replicas tied at the lowest load",
    "prefix_hit": "because it held the longest match of the prompt's prefix, above the cache threshold",
    "prefix_miss": "because no replica matched enough of the prompt (below the cache threshold), so the "
                   "least-loaded one got it",
    "load_imbalance": "because the loads were imbalanced past both balance thresholds, so the least-loaded "
                      "one got it, whatever the cache held",
    "hash_ring": "because its key hashed to this replica on the consistent-hash ring",
    "most_cached": "because its prefix cache held the most of the prompt's blocks",
    "no_cache_hit": "with no replica holding any of the prompt's blocks (the tie broken by load)",
    "tie_in_flight": "because it was the least loaded of the replicas tied on cached blocks",
    "tie_random": "drawn at random among the replicas tied on the best score",
    "max_score": "because its weighted score (queue + KV + prefix) was the highest",
    "lowest_cost": "because its KV cost (prefill blocks to compute + decode blocks) was the lowest",
    "softmax": "drawn by a softmax over the replicas' KV costs",
    "recorded": "as the real router sent it (a recording: the router's own reasons are not in it)",
}


def _num(v: float) -> str:
    if v is None or (isinstance(v, float) and not math.isfinite(v)):
        return "–"
    v = float(v)
    return f"{int(v):,}" if v.is_integer() and abs(v) < 1e15 else f"{v:.4g}"


def replica_colour(i: int) -> str:
    return REQUEST_PALETTE[i % len(REQUEST_PALETTE)]


def _rows_axes(heights: list[float], gap_px: float, total_px: float, titles: list[str]) -> dict:
    """One y axis per row (top to bottom), all on the single x axis "x" (anchored to the bottom
    row), domains in proportion to `heights`; each row named left of it, across (annotations)."""
    n = len(heights)
    gap = gap_px / max(total_px, 1.0)
    free = max(1.0 - gap * (n - 1), 0.05)
    total = sum(heights) or 1.0
    lay: dict = {"annotations": []}
    top = 1.0
    for i, h in enumerate(heights):
        bottom = max(0.0, top - free * h / total)
        lay["yaxis" if i == 0 else f"yaxis{i + 1}"] = {"domain": [bottom, top], "anchor": "x", "showgrid": False,
                                                       "zeroline": False}
        if titles[i]:
            lay["annotations"].append({"text": titles[i], "xref": "paper", "yref": "paper", "x": -0.008,
                                       "xanchor": "right", "y": (top + bottom) / 2, "yanchor": "middle",
                                       "showarrow": False, "font": {"size": 11, "color": "#374151"}})
        top = bottom - gap
    lay["xaxis"] = {"anchor": "y" if n == 1 else f"y{n}", "domain": [0.0, 1.0], "zeroline": False,
                    "showgrid": True, "gridcolor": "#E5E7EB", "title": {"text": "time on the fleet's clock (ms)"}}
    return lay


def _yref(i: int) -> str:
    return "y" if i == 0 else f"y{i + 1}"


def _marker(t: float | None) -> list[dict]:
    if t is None:
        return []
    return [{"type": "line", "xref": "x", "yref": "paper", "x0": t, "x1": t, "y0": 0, "y1": 1,
             "line": {"color": MARK, "width": 2}, "layer": "above", "name": "scrub"}]


# ---------------------------------------------------------------------------------------------
# Time span, the lanes
# ---------------------------------------------------------------------------------------------

def fleet_span(fleet) -> tuple[float, float]:
    """(first arrival or step start, last step end) on the fleet's clock."""
    lo, hi = math.inf, -math.inf
    for t in fleet.replicas:
        s = t.steps
        if len(s):
            lo = min(lo, float(s["start"].min()))
            hi = max(hi, float(s["end"].max()))
    r = fleet.routes
    if len(r):
        lo = min(lo, float(r["arrival"].min()))
        hi = max(hi, float(r["arrival"].max()))
    if not math.isfinite(lo):
        return 0.0, 1.0
    return lo, hi if hi > lo else lo + 1.0


def window_of(fleet, t: float | None, width: float | None) -> tuple[float, float]:
    """The time window the lanes show: the whole run (width None), else `width` ms around t,
    kept inside the run."""
    lo, hi = fleet_span(fleet)
    if width is None or width >= hi - lo:
        return lo, hi
    c = (lo + hi) / 2 if t is None else float(t)
    a = min(max(c - width / 2, lo), hi - width)
    return a, a + width


def replica_slots(trace) -> int:
    """Slots a replica's lanes need (the highest slot it used + 1, at least 1)."""
    b = trace.batch
    if not len(b):
        return 1
    s = b["slot"].astype("Float64").to_numpy(dtype=float, na_value=np.nan)
    s = s[~np.isnan(s)]
    return int(s.max()) + 1 if len(s) and s.max() >= 0 else 1


def lane_time_grid(trace, t0: float, t1: float, bins: int, n_slots: int | None = None):
    """(bin centres, request index grid [slot, bin] (-1 idle), kind grid, step row per bin or -1):
    each bin shows what ran at its centre (the state at that instant, not a blend)."""
    n_slots = n_slots or replica_slots(trace)
    bins = max(int(bins), 1)
    centres = t0 + (np.arange(bins) + 0.5) * ((t1 - t0) / bins)
    grid = np.full((n_slots, bins), -1, dtype=np.int32)
    kinds = np.full((n_slots, bins), KIND_CODE["decode"], dtype=np.int8)
    s = trace.steps
    rows = np.full(bins, -1, dtype=np.int64)
    if not len(s):
        return centres, grid, kinds, rows
    start = s["start"].to_numpy(dtype=float)
    end = s["end"].to_numpy(dtype=float)
    k = np.searchsorted(start, centres, side="right") - 1
    kc = np.maximum(k, 0)
    ok = (k >= 0) & (centres < end[kc]) & ~s["idle"].to_numpy(dtype=bool)[kc]
    rows[ok] = k[ok]
    if not ok.any():
        return centres, grid, kinds, rows
    needed = np.unique(k[ok])
    step_nums = s["step"].to_numpy(dtype=np.int64)
    b = trace.batch
    bstep = b["step"].to_numpy(dtype=np.int64)
    lo_i = int(np.searchsorted(bstep, step_nums[needed[0]], side="left"))
    hi_i = int(np.searchsorted(bstep, step_nums[needed[-1]], side="right"))
    part = b.iloc[lo_i:hi_i]
    if len(part):
        prow = np.searchsorted(step_nums, part["step"].to_numpy(dtype=np.int64))
        pos = np.minimum(np.searchsorted(needed, prow), len(needed) - 1)
        slot = part["slot"].astype("Float64").to_numpy(dtype=float, na_value=-1.0)
        hit = (needed[pos] == prow) & (slot >= 0) & (slot < n_slots)
        req = pd.Index(trace.requests["request"]).get_indexer(part["request"])
        kind = part["kind"].map(KIND_CODE).fillna(1).to_numpy(dtype=np.int8)
        sub = np.full((n_slots, len(needed)), -1, dtype=np.int32)
        subk = np.full((n_slots, len(needed)), KIND_CODE["decode"], dtype=np.int8)
        si, pi = slot[hit].astype(np.int64), pos[hit]
        sub[si, pi] = req[hit]
        subk[si, pi] = kind[hit]
        col = np.searchsorted(needed, k[ok])
        grid[:, ok] = sub[:, col]
        kinds[:, ok] = subk[:, col]
    return centres, grid, kinds, rows


def lanes_figure(fleet, t: float | None = None, window: tuple[float, float] | None = None,
                 bins: int = MAX_LANE_BINS) -> go.Figure:
    """The replicas' slot lanes, one row per replica on one time axis, over `window` (default
    the whole run), sampled on `bins` time columns (at most MAX_LANE_BINS, and fewer past
    MAX_LANE_CELLS cells in all, down to MIN_LANE_BINS); colour = request (a palette, so that
    neighbours differ), prefill lighter and recompute darker, preemptions as red ×, the scrub
    time `t` a line across every row. layout.meta: replicas, names, slots, window, bins, cells, t."""
    names = fleet.names
    shown = plotly_text(names)
    n = fleet.num_replicas
    t0, t1 = window or fleet_span(fleet)
    slots = [replica_slots(tr) for tr in fleet.replicas]
    bins = max(1, min(int(bins), MAX_LANE_BINS, max(MIN_LANE_BINS, MAX_LANE_CELLS // max(sum(slots), 1))))
    cells = sum(slots) * bins
    hover = cells <= MAX_HOVER_CELLS
    shade_ok = cells <= MAX_SHADED_CELLS
    p = len(REQUEST_PALETTE)
    scale = discrete_colorscale([EMPTY] + REQUEST_PALETTE)
    shade_scale = discrete_colorscale([KIND_SHADE[k] for k in range(4)])
    data: list[dict] = []
    for i, tr in enumerate(fleet.replicas):
        centres, grid, kinds, _ = lane_time_grid(tr, t0, t1, bins, slots[i])
        z = np.where(grid >= 0, grid % p, -1).astype(np.int8)
        y = np.arange(slots[i])
        heat = {"type": "heatmap", "name": shown[i], "z": z, "x": centres.astype(np.float64), "y": y,
                "colorscale": scale, "zmin": -1.5, "zmax": p - 0.5, "showscale": False,
                "xaxis": "x", "yaxis": _yref(i), "ygap": 1 if slots[i] <= 16 else 0}
        if hover:
            ids = plotly_text(np.asarray(tr.requests["request"].astype(str).to_numpy(), dtype=object))
            kind_word = np.array(["prefill", "decode", "recompute", "padding"], dtype=object)
            if len(ids):
                txt = np.where(grid >= 0, ids[np.maximum(grid, 0)] + " · " + kind_word[kinds], "idle")
            else:   # a replica the router sent nothing: every cell idle
                txt = np.full(grid.shape, "idle", dtype=object)
            heat["customdata"] = txt
            heat["hovertemplate"] = (f"{shown[i]} · slot %{{y}}<br>%{{x:.1f}} ms<br>%{{customdata}}<extra></extra>")
        else:
            heat["hovertemplate"] = f"{shown[i]} · slot %{{y}}<br>%{{x:.1f}} ms<extra></extra>"
        data.append(heat)
        if shade_ok:
            shade = np.where((grid >= 0) & (kinds != KIND_CODE["decode"]), kinds, 1).astype(np.int8)
            if (shade != 1).any():
                data.append({"type": "heatmap", "name": f"{shown[i]} kind", "z": shade,
                             "x": centres.astype(np.float64), "y": y, "zmin": -0.5, "zmax": 3.5,
                             "colorscale": shade_scale, "showscale": False, "hoverinfo": "skip",
                             "xaxis": "x", "yaxis": _yref(i), "ygap": heat["ygap"]})
        data += _preempt_marks(tr, t0, t1, i, shown[i])
    heights = [float(min(max(9 * s, 34), 150)) for s in slots]
    plot_px = sum(heights) + 6 * (n - 1)
    height = int(plot_px + 110)
    layout = {"height": height, "template": TEMPLATE, "font": FONT, "hoverlabel": {"font": {"size": 12}},
              "margin": {"l": 96, "r": 20, "t": 30, "b": 64}, "showlegend": False,
              **_rows_axes(heights, 6, plot_px, [plotly_text(_short(nm)) for nm in names]),
              "shapes": _marker(t), "meta": {"replicas": n, "names": names, "slots": slots, "window": [t0, t1],
                                             "bins": bins, "cells": cells, "t": t, "hover": hover}}
    layout["xaxis"]["range"] = [t0, t1]
    for i, s in enumerate(slots):
        ax = layout["yaxis" if i == 0 else f"yaxis{i + 1}"]
        ax.update({"range": [s - 0.5, -0.5], "autorange": False, "showticklabels": False})
    return assemble(data, layout)


def _short(name: str) -> str:
    return name if len(name) <= 12 else name[:11] + "…"


def _preempt_marks(tr, t0: float, t1: float, i: int, name: str) -> list[dict]:
    ev = tr.events
    pre = ev[ev["kind"].to_numpy() == "preempt"]
    if pre.empty:
        return []
    s = tr.steps.set_index("step")
    at = s["end"].reindex(pre["step"].to_numpy()).to_numpy(dtype=float)
    b = tr.batch
    last = b.drop_duplicates("request", keep="last").set_index("request")["slot"]
    slot = pre["request"].map(last).astype("Float64").to_numpy(dtype=float, na_value=np.nan)
    ok = (at >= t0) & (at <= t1) & ~np.isnan(slot)
    if not ok.any():
        return []
    return [{"type": "scatter", "mode": "markers", "name": "preempted",
             "x": at[ok], "y": slot[ok], "xaxis": "x", "yaxis": _yref(i),
             "marker": {"symbol": "x", "size": 8, "color": PREEMPT},
             "customdata": plotly_text(pre["request"].astype(str).to_numpy()[ok]),
             "hovertemplate": f"{name}: %{{customdata}} preempted at %{{x:.1f}} ms<extra></extra>"}]


# ---------------------------------------------------------------------------------------------
# Per replica over time
# ---------------------------------------------------------------------------------------------

SIGNALS = {"waiting": "waiting (queue)", "running": "running", "kv": "KV blocks in use (%)",
           "hit_rate": "prefix-cache hit rate so far (%)"}


def usable_blocks(trace) -> int:
    cfg = trace.meta.get("config") or {}
    return max(int(cfg.get("num_gpu_blocks") or trace.meta.get("num_blocks") or 1) - 1, 1)


def replica_signals(trace) -> pd.DataFrame:
    """Per step of one replica: t (its end), waiting, running, kv (% of the usable blocks in use)."""
    s = trace.steps
    free = s["free_blocks"].astype("Float64").to_numpy(dtype=float, na_value=np.nan)
    use = usable_blocks(trace)
    return pd.DataFrame({"t": s["end"].to_numpy(dtype=float), "waiting": s["waiting"].to_numpy(dtype=float),
                         "running": s["running"].to_numpy(dtype=float), "kv": 100.0 * (use - free) / use})


def hit_rate_curve(trace) -> pd.DataFrame:
    """t (first scheduled), the prefix-cache hit rate so far (% of prompt tokens found cached)."""
    r = trace.requests
    c = r["cached_tokens"].astype("Float64").to_numpy(dtype=float, na_value=np.nan)
    t = r["first_scheduled_time"].to_numpy(dtype=float)
    ok = ~np.isnan(c) & ~np.isnan(t)
    if not ok.any():
        return pd.DataFrame({"t": [], "hit_rate": []})
    order = np.argsort(t[ok], kind="stable")
    prompt = r["prompt_len"].to_numpy(dtype=float)[ok][order]
    return pd.DataFrame({"t": t[ok][order], "hit_rate": 100.0 * np.cumsum(c[ok][order]) / np.cumsum(prompt)})


def _envelope(t: np.ndarray, v: np.ndarray, lo: float, hi: float, points: int) -> tuple[np.ndarray, np.ndarray]:
    """At most `points` points: each time bin's peak, at the bin's centre (the raw points if fewer)."""
    if len(t) <= points:
        return t, v
    edges = np.linspace(lo, hi, points + 1)
    idx = np.clip(np.searchsorted(edges, t, side="right") - 1, 0, points - 1)
    peak = np.full(points, -np.inf)
    np.maximum.at(peak, idx, np.nan_to_num(v, nan=-np.inf))
    keep = np.isfinite(peak)
    return ((edges[:-1] + edges[1:]) / 2)[keep], peak[keep]


def signals_figure(fleet, t: float | None = None, max_points: int = MAX_POINTS) -> go.Figure:
    """Waiting, running, KV use and prefix-cache hit rate over time: one row per signal, a line
    per replica (its colour the same in every row; the legend toggles a replica in all rows).
    Past max_points steps (fewer with many replicas: MAX_FIGURE_POINTS a signal) a line shows each
    time bin's peak. layout.meta: signals, replicas, points (all lines), max_points (a line)."""
    names = plotly_text(fleet.names)
    lo, hi = fleet_span(fleet)
    data: list[dict] = []
    points = 0
    # SVG lines, never WebGL: a scrub redraws the figure, and WebGL without a GPU (Chromium's
    # software rendering) took 5-8 s to redraw 64 lines where SVG took 0.3 s (16 replicas)
    max_points = max(MIN_POINTS, min(int(max_points), MAX_FIGURE_POINTS // max(fleet.num_replicas, 1)))
    kind = "scatter"
    for i, tr in enumerate(fleet.replicas):
        sig = replica_signals(tr)
        hr = hit_rate_curve(tr)
        for row, key in enumerate(SIGNALS):
            src = hr if key == "hit_rate" else sig
            x, y = _envelope(src["t"].to_numpy(dtype=float), src[key].to_numpy(dtype=float), lo, hi, max_points)
            points += len(x)
            data.append({"type": kind, "mode": "lines", "name": names[i], "legendgroup": names[i],
                         "showlegend": row == 0, "x": x.astype(np.float32), "y": y.astype(np.float32),
                         "line": {"color": replica_colour(i), "width": 1.5,
                                  "shape": "linear" if key == "hit_rate" else "hv"},
                         "xaxis": "x", "yaxis": _yref(row),
                         "hovertemplate": f"{names[i]}<br>%{{x:.1f}} ms: %{{y:.4~g}}<extra>{SIGNALS[key]}</extra>"})
    heights = [1.0] * len(SIGNALS)
    plot_px = 4 * 120 + 3 * 28
    layout = {"height": plot_px + 108 + 22 * math.ceil(fleet.num_replicas / 9), "template": TEMPLATE, "font": FONT, "hoverlabel": {"font": {"size": 12}},
              "margin": {"l": 70, "r": 20, "t": 54 + 22 * math.ceil(fleet.num_replicas / 9), "b": 64},
              "legend": {"orientation": "h", "y": 1.0 + 34 / plot_px, "yanchor": "bottom", "x": 0,
                         "font": {"size": 11}},
              **_rows_axes(heights, 28, plot_px, ["" for _ in SIGNALS]),
              "shapes": _marker(t),
              "meta": {"signals": list(SIGNALS), "replicas": fleet.num_replicas, "points": points,
                       "max_points": max_points}}
    layout["xaxis"]["range"] = [lo, hi]
    top = 1.0
    gap = 28 / plot_px
    each = (1.0 - gap * 3) / 4
    for row, key in enumerate(SIGNALS):
        layout["annotations"].append({"text": SIGNALS[key], "x": 0, "xanchor": "left", "xref": "paper",
                                      "y": top, "yanchor": "bottom", "yref": "paper", "showarrow": False,
                                      "font": {"size": 12, "color": "#111827"}})
        ax = layout["yaxis" if row == 0 else f"yaxis{row + 1}"]
        ax["rangemode"] = "tozero"
        if key in ("kv", "hit_rate"):
            ax["range"] = [0, 100]
        top -= each + gap
    return assemble(data, layout)


# ---------------------------------------------------------------------------------------------
# The fleet at one time
# ---------------------------------------------------------------------------------------------

def step_at(trace, t: float) -> int | None:
    """The step running at time t, else the last one before it (None before the first)."""
    s = trace.steps
    if not len(s):
        return None
    k = int(np.searchsorted(s["start"].to_numpy(dtype=float), t, side="right")) - 1
    return None if k < 0 else int(s["step"].iloc[k])


def busiest_time(fleet, samples: int = 400) -> float:
    """A time worth opening on: of `samples` evenly spread times, the one with the most requests
    in the replicas (running + waiting, all replicas together)."""
    lo, hi = fleet_span(fleet)
    ts = np.linspace(lo, hi, samples)
    load = np.zeros(samples)
    for tr in fleet.replicas:
        s = tr.steps
        if not len(s):
            continue
        k = np.searchsorted(s["start"].to_numpy(dtype=float), ts, side="right") - 1
        v = (s["running"].to_numpy(dtype=float) + s["waiting"].to_numpy(dtype=float))[np.maximum(k, 0)]
        load += np.where(k >= 0, v, 0.0)
    return float(ts[int(np.argmax(load))])


def fleet_at(fleet, t: float) -> pd.DataFrame:
    """One row per replica at time t: the step running (or the last before t), its state, queue,
    KV use, and the router's view: requests in flight and routed so far."""
    r = fleet.routes
    rep = r["replica"].to_numpy()
    arrived = r["arrival"].to_numpy(dtype=float) <= t
    released = r["released"].to_numpy(dtype=float)
    live = arrived & ~(released <= t)
    rows = []
    for i, tr in enumerate(fleet.replicas):
        s = tr.steps
        k = int(np.searchsorted(s["start"].to_numpy(dtype=float), t, side="right")) - 1 if len(s) else -1
        st = None if k < 0 else int(s["step"].iloc[k])
        if st is None:
            rows.append({"replica": fleet.names[i], "step": None, "state": "not started", "running": 0,
                         "waiting": 0, "KV in use %": 0.0, "in flight (router)": int((live & (rep == i)).sum()),
                         "routed so far": int((arrived & (rep == i)).sum())})
            continue
        row = s.iloc[k]
        busy = float(row["start"]) <= t < float(row["end"]) and not bool(row["idle"])
        use = usable_blocks(tr)
        free = row["free_blocks"]
        rows.append({"replica": fleet.names[i], "step": st,
                     "state": f"in step {st} ({int(row['num_tokens'])} tokens)" if busy else "between steps",
                     "running": int(row["running"]), "waiting": int(row["waiting"]),
                     "KV in use %": round(100.0 * (use - float(free)) / use, 1) if pd.notna(free) else None,
                     "in flight (router)": int((live & (rep == i)).sum()),
                     "routed so far": int((arrived & (rep == i)).sum())})
    out = pd.DataFrame(rows)
    out["step"] = out["step"].astype("Int64")
    return out


# ---------------------------------------------------------------------------------------------
# Routing decisions
# ---------------------------------------------------------------------------------------------

def _score(x) -> float:
    """One replica's score as the file gave it: a number, or NaN (not scored, or not a number:
    a hand-edited file)."""
    return float(x) if isinstance(x, (int, float)) and not isinstance(x, bool) else math.nan


def decision_scores(text) -> dict[str, list[float]]:
    """A routing row's `scores` JSON: scorer -> one score per replica (NaN where not scored)."""
    doc = _detail(text)
    return {str(k): [_score(x) for x in v] for k, v in doc.items() if isinstance(v, list)}


def _detail(text) -> dict:
    """A routing row's JSON text as a dict ({} when there is none or it is not an object)."""
    if not isinstance(text, str) or not text:
        return {}
    try:
        doc = json.loads(text)
    except ValueError:
        return {}
    return doc if isinstance(doc, dict) else {}


def _g(x) -> str:
    if not isinstance(x, (int, float)) or isinstance(x, bool) or x != x or x in (math.inf, -math.inf):
        return "–"
    return "%d" % x if x == int(x) and abs(x) < 1e15 else "%.4g" % x


def _score_text(v: list) -> str:
    s = " · ".join(map(_g, v[:MAX_SCORE_TEXT]))
    return s + (f" · … ({len(v)} replicas)" if len(v) > MAX_SCORE_TEXT else "")


def routing_table(fleet) -> pd.DataFrame:
    """The routing table for people: request, tenant, prompt, arrival at the router (ms), the
    replica (by name), the rule, the candidates, and one text column per scorer with its score
    for each replica in worker order ("1 · 0 · 2"). A replayed real fleet adds the policy's
    prediction beside the replica that served each request."""
    r = fleet.routes
    names = np.asarray(fleet.names, dtype=object)
    predicted = "predicted" in r
    out = pd.DataFrame({"request": r["request"].astype(str).to_numpy(), "tenant": r["tenant"].astype(str).to_numpy(),
                        "prompt": r["prompt_len"].to_numpy(), "arrival (ms)": r["arrival"].round(3).to_numpy(),
                        ("served by" if predicted else "replica"): names[r["replica"].to_numpy()]})
    if predicted:
        out["policy picks"] = names[r["predicted"].to_numpy()]
        out["agree"] = r["predicted"].to_numpy() == r["served"].to_numpy()
        out["policy's rule"] = r["predicted_reason"].astype(str).to_numpy()
    else:
        out["rule"] = r["reason"].astype(str).to_numpy()
    cand = r["candidates"].astype(str)
    out["candidates"] = np.where(cand.str.count(",").to_numpy() + 1 >= fleet.num_replicas, "all",
                                 cand.to_numpy()) if fleet.num_replicas > 1 else cand.to_numpy()
    texts = [x if isinstance(x, str) and x.startswith("{") else "{}" for x in r["scores"].tolist()]
    if any(x != "{}" for x in texts):
        try:
            parsed = json.loads("[" + ",".join(texts) + "]")   # one parse for the whole table
        except ValueError:
            parsed = [decision_scores(x) for x in texts]
        scorers = list(dict.fromkeys(k for p in parsed[:1000] for k in p))
        scorers += [k for k in dict.fromkeys(k for p in parsed[1000:] for k in p) if k not in scorers]
        for k in scorers:
            out[f"score: {k}"] = [_score_text(p[k]) if isinstance(p.get(k), list) else "" for p in parsed]
    return out


def routing_row(fleet, request: str) -> pd.Series | None:
    r = fleet.routes
    hit = np.flatnonzero(r["request"].astype(str).to_numpy() == str(request))
    return None if not len(hit) else r.iloc[int(hit[0])]


def explain_decision(fleet, request: str, router: str | None = None) -> str:
    """One plain sentence (or two): where `request` went and the rule that sent it there, with
    the numbers the rule compared."""
    row = routing_row(fleet, request)
    if row is None:
        return f"No request {request} in this fleet's routing table."
    names = fleet.names
    pred = "predicted" in row.index and pd.notna(row.get("predicted"))
    picked = int(row["predicted"]) if pred else int(row["replica"])
    reason = str(row["predicted_reason"] if pred else row["reason"])
    words = REASON_WORDS.get(reason, f"by the rule {reason}")
    scores = decision_scores(row["scores"])
    detail = _detail(row["detail"])
    who = router or (fleet.meta.get("settings") or {}).get("router") or "the router"
    if pred:
        served = names[int(row["served"])]
        agree = picked == int(row["served"])
        head = (f"{request} reached the router at {row['arrival']:,.1f} ms and was served by {served}; {who} "
                f"would have sent it to {names[picked]} {words}" + (" (the same replica)." if agree else
                                                                   " (another replica)."))
    else:
        head = f"{request} reached the router at {row['arrival']:,.1f} ms and {who} sent it to {names[picked]} {words}."
    facts = []
    if "match_rate" in detail:
        facts.append(f"it matched {_num(detail.get('matched'))} of its {_num(detail.get('prompt_len'))} prompt "
                     f"tokens (a match rate of {float(detail['match_rate']):.0%})")
    for k, v in scores.items():
        facts.append(f"{k} per replica: {_score_text(v)}")
    if "key" in detail:
        facts.append(f"hash key {detail['key']}")
    return head + (" Scores: " + "; ".join(facts) + "." if facts else "")


def scores_figure(fleet, request: str) -> go.Figure:
    """One request's decision: each scorer's score per replica as bars (one small panel per
    scorer, scales differ), the picked replica dark. layout.meta: request, scorers, picked."""
    row = routing_row(fleet, request)
    names = fleet.names
    shown = plotly_text(names)
    scores = decision_scores(row["scores"]) if row is not None else {}
    pred = row is not None and "predicted" in row.index
    picked = (int(row["predicted"]) if pred else int(row["replica"])) if row is not None else None
    keys = list(scores)
    n = max(len(keys), 1)
    cols = min(n, 4)
    nrows = math.ceil(n / cols)
    data, lay = [], {}
    gap = 0.06
    w = (1.0 - gap * (cols - 1)) / cols
    hgap = 0.18 if nrows > 1 else 0.0
    h = (1.0 - hgap * (nrows - 1)) / nrows
    annotations = []
    for j, k in enumerate(keys):
        r_, c_ = divmod(j, cols)
        ax = "" if j == 0 else str(j + 1)
        x0 = c_ * (w + gap)
        y1 = 1.0 - r_ * (h + hgap)
        lay[f"xaxis{ax}"] = {"domain": [x0, x0 + w], "anchor": f"y{ax}", "type": "category",
                             "showticklabels": len(names) <= 16, "tickangle": -45 if len(names) > 4 else 0}
        lay[f"yaxis{ax}"] = {"domain": [y1 - h, y1], "anchor": f"x{ax}", "rangemode": "tozero", "zeroline": True}
        v = np.asarray(scores[k], dtype=float)
        colours = [PICKED if i == picked else OTHER for i in range(len(v))]
        data.append({"type": "bar", "x": shown[:len(v)], "y": np.where(np.isnan(v), None, v).tolist(), "name": k,
                     "marker": {"color": colours}, "xaxis": f"x{ax}", "yaxis": f"y{ax}",
                     "hovertemplate": f"%{{x}}<br>{k}: %{{y:.4~g}}<extra></extra>"})
        annotations.append({"text": k, "x": x0, "xanchor": "left", "xref": "paper", "y": y1, "yanchor": "bottom",
                            "yref": "paper", "showarrow": False, "font": {"size": 12}})
    height = 90 + 230 * nrows
    peak = max((np.nanmax(np.asarray(v, float)) for v in scores.values() if np.isfinite(np.asarray(v, float)).any()),
               default=0.0)
    layout = {"height": height, "template": TEMPLATE, "font": FONT, "showlegend": False,
              "margin": {"l": 50 + tick_room(peak), "r": 20, "t": 40, "b": 80 if len(names) > 4 else 50},
              "annotations": annotations, "bargap": 0.25,
              "meta": {"request": str(request), "scorers": keys,
                       "picked": None if picked is None else names[picked]}, **lay}
    if not keys:
        layout["annotations"] = [{"text": "This decision recorded no scores.", "showarrow": False,
                                  "xref": "paper", "yref": "paper", "x": 0.5, "y": 0.5}]
        layout["xaxis"] = {"visible": False}
        layout["yaxis"] = {"visible": False}
    return assemble(data, layout)


def first_of_reason(fleet, prefer: tuple[str, ...] = ("prefix_hit", "load_imbalance", "lower_load", "most_cached",
                                                       "max_score", "lowest_cost")) -> str | None:
    """A request worth explaining first: the first decided by one of `prefer`'s rules, else the
    first request."""
    r = fleet.routes
    if not len(r):
        return None
    col = r["predicted_reason"] if "predicted_reason" in r else r["reason"]
    reasons = col.astype(str).to_numpy()
    for p in prefer:
        hit = np.flatnonzero(reasons == p)
        if len(hit):
            return str(r["request"].iloc[int(hit[0])])
    return str(r["request"].iloc[0])


# ---------------------------------------------------------------------------------------------
# Shared-prefix groups
# ---------------------------------------------------------------------------------------------

def placement_figure(tables: list[pd.DataFrame], titles: list[str], names: list[list[str]]) -> go.Figure:
    """Where each shared-prefix group landed: one heatmap per side (groups x replicas, the number
    of the group's requests each replica got), side by side, the same groups in the same rows
    (the MAX_GROUPS largest). layout.meta: groups, groups_total, spread (per side: the mean
    number of replicas a group's requests went to)."""
    total = pd.concat([t.sum(axis=1) for t in tables], axis=1).fillna(0).sum(axis=1) if tables else pd.Series()
    order = total.sort_values(ascending=False, kind="stable").index[:MAX_GROUPS]
    k = len(tables)
    gap = 0.08
    w = (1.0 - gap * (k - 1)) / max(k, 1)
    data, lay, annotations, spread = [], {}, [], []
    labels = [str(g) for g in order]
    for j, (tab, title) in enumerate(zip(tables, titles)):
        t = tab.reindex(order).fillna(0).astype(np.int64)
        spread.append(float((tab > 0).sum(axis=1).mean()) if len(tab) else math.nan)
        ax = "" if j == 0 else str(j + 1)
        x0 = j * (w + gap)
        lay[f"xaxis{ax}"] = {"domain": [x0, x0 + w], "anchor": f"y{ax}", "type": "category",
                             "title": {"text": "replica"}, "tickangle": -45 if len(names[j]) > 6 else 0}
        lay[f"yaxis{ax}"] = {"domain": [0, 1], "anchor": f"x{ax}", "type": "category", "autorange": "reversed",
                             "showticklabels": j == 0}
        z = t.to_numpy(dtype=np.int32)
        small = z.size <= 600
        data.append({"type": "heatmap", "z": z, "x": plotly_text([names[j][c] for c in t.columns]), "y": labels,
                     "colorscale": [[0, "#FFFFFF"], [0.001, "#DCE6F0"], [1, "#1F4E79"]], "zmin": 0,
                     "zmax": max(int(z.max()) if z.size else 1, 1), "showscale": False, "xgap": 1, "ygap": 1,
                     "xaxis": f"x{ax}", "yaxis": f"y{ax}",
                     **({"text": np.where(z > 0, z.astype(str), ""), "texttemplate": "%{text}"} if small else {}),
                     "hovertemplate": f"{title}<br>group %{{y}} → %{{x}}: %{{z}} requests<extra></extra>"})
        annotations.append({"text": title, "x": x0, "xanchor": "left", "xref": "paper", "y": 1.0, "yanchor": "bottom",
                            "yref": "paper", "showarrow": False, "font": {"size": 13}})
    longest = max((len(s) for s in labels), default=4)
    layout = {"height": int(min(900, max(260, 110 + 18 * len(labels)))), "template": TEMPLATE, "font": FONT,
              "margin": {"l": 20 + 7 * min(longest, 24), "r": 20, "t": 40, "b": 90},
              "annotations": annotations,
              "meta": {"groups": len(labels), "groups_total": int(len(total)), "spread": spread}, **lay}
    return assemble(data, layout)


# ---------------------------------------------------------------------------------------------
# Numbers
# ---------------------------------------------------------------------------------------------

# key -> (label, which way is better: -1 lower, +1 higher, 0 neither)
FLEET_METRICS = {
    "requests": ("requests", 0), "finished": ("finished", +1), "rejected": ("rejected", -1),
    "ttft_p50": ("TTFT p50", -1), "ttft_p99": ("TTFT p99", -1), "tpot_p50": ("TPOT p50", -1),
    "tpot_p99": ("TPOT p99", -1), "e2e_p50": ("E2E p50", -1), "e2e_p99": ("E2E p99", -1),
    "ttft_mean": ("TTFT mean", -1), "e2e_mean": ("E2E mean", -1), "throughput": ("output tokens per ms", +1),
    "prefix_hit_rate": ("prefix-cache hit rate", +1), "cached_prompt_tokens": ("cached prompt tokens", +1),
    "load_imbalance": ("load imbalance (max / mean busy time)", -1),
    "request_imbalance": ("request imbalance (max / mean requests)", -1),
    "busy_time_max": ("busiest replica's busy time (ms)", -1), "preemptions": ("preemptions", -1),
    "duration": ("duration (ms)", -1),
}


def headline(fleet, summ: dict) -> dict:
    """The fleet's row of fleet_summary (it holds the TTFT / TPOT / E2E percentiles)."""
    return dict(summ["metrics"])


def per_replica_table(fleet, summ: dict) -> pd.DataFrame:
    """One row per replica: requests, TTFT / TPOT / E2E p50 and p99, prefix-cache hit rate,
    busy time and its share of the busiest's, preemptions."""
    rows = []
    busiest = max((p["busy_time"] for p in summ["per_replica"]), default=0.0) or math.nan
    for i, p in enumerate(summ["per_replica"]):
        lat = p   # fleet_summary's per-replica rows hold the percentiles
        rows.append({"replica": fleet.names[i], "requests": p["requests"], "finished": p["finished"],
                     "TTFT p50": lat["ttft_p50"], "TTFT p99": lat["ttft_p99"], "TPOT p50": lat["tpot_p50"],
                     "TPOT p99": lat["tpot_p99"], "E2E p50": lat["e2e_p50"], "E2E p99": lat["e2e_p99"],
                     "prefix hit %": 100.0 * p["prefix_hit_rate"], "busy (ms)": p["busy_time"],
                     "busy / busiest %": 100.0 * p["busy_time"] / busiest, "preemptions": p["preemptions"]})
    return pd.DataFrame(rows)


def metrics_table(*heads: dict, sides: tuple[str, ...] = ("A", "B")) -> pd.DataFrame:
    """The fleet's numbers, one column per side; with two sides, B - A and which side is better."""
    rows = []
    for key, (label, way) in FLEET_METRICS.items():
        vals = [h.get(key, math.nan) for h in heads]
        vals = [math.nan if v is None else float(v) for v in vals]
        if key == "prefix_hit_rate":
            vals = [100.0 * v for v in vals]
            label += " (%)"
        row = {"metric": label, **{s: v for s, v in zip(sides, vals)}}
        if len(heads) == 2:
            a, b = vals
            d = b - a
            row["B - A"] = d
            row["better"] = ("same" if abs(d) <= 1e-9 * max(abs(a), abs(b), 1) else
                             ("B" if d * way > 0 else "A")) if way and not math.isnan(d) else ""
        rows.append(row)
    return pd.DataFrame(rows)
