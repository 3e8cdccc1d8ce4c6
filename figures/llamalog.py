"""Figures and tables for the llama-server log page: pure functions of a Trace (read from a log by
servers.llama_server, or simulated from its workload). No Streamlit.

- batch_figure: every model call as a stacked bar of its entries, coloured by slot; prompt chunks
  hatched and lighter than decode tokens (recomputed tokens of a simulated vLLM run cross-hatched);
  the batch limit dashed. Past `max_bars` calls, bins of k calls showing the mean per call.
- slot_lanes_figure: the slots as lanes over wall time (logs with timestamps) or model calls: each
  run of a task's prompt chunks / decode tokens is a bar, the queue wait a dotted line ending at
  the slot, cancels and preemptions marked.
- call_time_figure: how long each model call took (logs with timestamps), calls that carried a
  prompt chunk apart from decode-only ones: where the decoding tasks stuttered.
- comparison_figure: one of those views for several runs (the log and its re-simulations), one
  row per run, on one model-call axis and one y scale.
- task_table, call_tables: the tables next to them (the re-simulation's tables are in servers.llama_server.resim).

Size rules (figures/common.py): per-call bars up to MAX_BARS, then bins; lanes as SVG bars up to
MAX_LANE_BARS runs, then WebGL line segments.
"""
from __future__ import annotations

import math

import numpy as np
import pandas as pd
import plotly.graph_objects as go

from sim.metrics import per_request
from sim.trace import Trace

from .common import FONT, MAX_BARS, PREEMPT, REQUEST_PALETTE, TEMPLATE

SLOT_PALETTE = REQUEST_PALETTE
MAX_LANE_BARS = 2000
KIND_ORDER = ("decode", "prefill", "recompute")
KIND_WORDS = {"decode": "decode tokens", "prefill": "prompt chunk", "recompute": "recomputed tokens"}
PATTERN = {"decode": "", "prefill": "/", "recompute": "x"}
CANCEL = "#B91C1C"
SHIFT = "#D97706"
WAIT = "#6B7280"
CONFIG = {"displaylogo": False}


def slot_colour(slot: int) -> str:
    """A slot's colour (slot -1, unknown, is grey)."""
    return "#9CA3AF" if slot < 0 else SLOT_PALETTE[int(slot) % len(SLOT_PALETTE)]


def _tint(hex_colour: str, white: float) -> str:
    """hex_colour mixed with `white` (0..1) of white, as rgb()."""
    h = hex_colour.lstrip("#")
    r, g, b = (int(h[i:i + 2], 16) for i in (0, 2, 4))
    m = lambda c: int(round(c + (255 - c) * white))  # noqa: E731
    return f"rgb({m(r)},{m(g)},{m(b)})"


def _marker(colour: str, kind: str) -> dict:
    """Bar marker of one kind: decode solid; prompt chunks lighter and hatched; recompute darker, crossed."""
    if kind == "decode":
        return {"color": colour, "line": {"width": 0}}
    fill = _tint(colour, 0.55) if kind == "prefill" else colour
    return {"color": fill, "line": {"width": 0},
            "pattern": {"shape": PATTERN[kind], "fgcolor": colour if kind == "prefill" else "#111827",
                        "fgopacity": 0.9, "size": 6, "solidity": 0.35, "fillmode": "overlay"}}


def _layout(height: int, **kw) -> dict:
    return {"height": height, "template": TEMPLATE, "font": FONT, "hoverlabel": {"font": {"size": 12}},
            "plot_bgcolor": "white", "margin": {"l": 64, "r": 24, "t": 48, "b": 59},
            "legend": {"orientation": "h", "y": 1.02, "yanchor": "bottom", "x": 0, "bgcolor": "rgba(0,0,0,0)"},
            **kw}


def batch_limit(trace: Trace) -> int | None:
    """The most tokens one model call may hold: the log's n_batch (-b), or the simulated
    config's max_num_batched_tokens."""
    v = trace.meta.get("n_batch") or (trace.meta.get("config") or {}).get("max_num_batched_tokens")
    return int(v) if v else None


def uses_wall_time(trace: Trace) -> bool:
    """Whether the trace's steps carry real times (a log with timestamps) rather than call indices."""
    return trace.source == "llama-server log" and trace.time_unit == "ms"


def _slots(b: pd.DataFrame) -> np.ndarray:
    return b["slot"].astype("Float64").fillna(-1).to_numpy(dtype=float).astype(np.int64)


def _kinds(b: pd.DataFrame) -> np.ndarray:
    k = b["kind"].astype(str).to_numpy()
    return np.where(np.isin(k, KIND_ORDER), k, "prefill")


def _step_bounds(trace: Trace) -> tuple[int, int]:
    s = trace.steps["step"]
    return (int(s.min()), int(s.max())) if len(s) else (1, 0)


# ---------------------------------------------------------------------------------------------
# Batch composition
# ---------------------------------------------------------------------------------------------

def _bin_size(n_calls: int, max_bars: int) -> int:
    return max(1, math.ceil(n_calls / max(max_bars, 1))) if n_calls else 1


def _batch_traces(trace: Trace, lo: int, hi: int, k: int, legend: bool, axes: dict,
                  slots_seen: set | None = None) -> list[dict]:
    """Bar traces (dicts) of the entries of calls lo..hi, one per (slot, kind); k > 1: bins of k
    calls, bar = mean tokens per call. slots_seen (shared between rows) keeps one legend entry per slot."""
    b = trace.batch
    step = b["step"].to_numpy()
    b = b[(step >= lo) & (step <= hi)]
    if b.empty:
        return []
    df = pd.DataFrame({"step": b["step"].to_numpy(dtype=np.int64), "slot": _slots(b), "kind": _kinds(b),
                       "tokens": b["tokens"].to_numpy(dtype=np.int64),
                       "task": b["request"].astype(str).to_numpy(),
                       "before": b["computed_before"].astype("Float64").to_numpy(dtype=float, na_value=np.nan)})
    out: list[dict] = []
    if k == 1:
        keys = ["slot", "kind", "step"]
        if df.duplicated(keys).any():  # two entries of one slot and kind in a call (rare): one bar
            g = df.groupby(keys, sort=True).agg(tokens=("tokens", "sum"), before=("before", "min")).reset_index()
            tasks = df.groupby(keys, sort=True)["task"].agg(lambda t: ", ".join(dict.fromkeys(t)))
            g["task"] = tasks.to_numpy()
        else:
            g = df.sort_values(keys, kind="stable")
    else:
        calls = trace.steps["step"].to_numpy(dtype=np.int64)
        calls = calls[(calls >= lo) & (calls <= hi)]
        per_bin = pd.Series(np.bincount((calls - lo) // k)).replace(0, 1)
        df["bin"] = (df["step"] - lo) // k
        keys = ["slot", "kind", "bin"]
        g = df.groupby(keys, sort=True)["tokens"].sum().reset_index()
        g["tasks"] = df.drop_duplicates(keys + ["task"]).groupby(keys, sort=True).size().to_numpy()
        g["mean"] = g["tokens"] / per_bin.reindex(g["bin"]).to_numpy(dtype=float)
        g["step"] = lo + g["bin"] * k
    seen = slots_seen if slots_seen is not None else set()
    for (slot, kind), part in g.groupby(["slot", "kind"], sort=False):
        slot = int(slot)
        label = f"slot {slot}" if slot >= 0 else "slot ?"
        colour = slot_colour(slot)
        words = KIND_WORDS[kind]
        tr = {"type": "bar", "name": label, "legendgroup": label, "marker": _marker(colour, kind),
              "showlegend": legend and kind == "decode" and slot not in seen, **axes}
        if tr["showlegend"]:
            seen.add(slot)
        if k == 1:
            before = part["before"].to_numpy(dtype=float)
            pos = np.where(np.isnan(before), "",
                           " · positions " + np.nan_to_num(before).astype(np.int64).astype(str) + "–"
                           + (np.nan_to_num(before) + part["tokens"].to_numpy()).astype(np.int64).astype(str))
            tr.update(x=part["step"].to_numpy(), y=part["tokens"].to_numpy(),
                      customdata=np.stack([part["task"].to_numpy(dtype=object), pos], axis=-1),
                      hovertemplate=f"call %{{x}} · {label} · task %{{customdata[0]}}<br>{words}: "
                                    f"%{{y}} tokens%{{customdata[1]}}<extra></extra>")
        else:
            tr.update(x=part["step"].to_numpy(), y=part["mean"].to_numpy(), width=k, offset=0,
                      customdata=np.stack([part["step"].to_numpy() + k - 1, part["tasks"].to_numpy()], axis=-1),
                      hovertemplate=f"calls %{{x}}–%{{customdata[0]}} · {label}<br>{words}: "
                                    f"%{{y:.3~f}} tokens per call (%{{customdata[1]}} task(s))<extra></extra>")
        out.append(tr)
    # stack each slot's kinds together: slot 0 decode, slot 0 prompt, slot 1 decode, ...
    out.sort(key=lambda t: (t["name"] == "slot ?", t["name"], KIND_ORDER.index(_kind_of(t))))
    return out


def _kind_of(tr: dict) -> str:
    shape = (tr["marker"].get("pattern") or {}).get("shape", "")
    return {"": "decode", "/": "prefill", "x": "recompute"}[shape]


def _kind_legend(present: set[str], axes: dict) -> list[dict]:
    """Grey legend entries explaining the hatching (bars with no data)."""
    out = []
    for kind, name in (("decode", "decode tokens (solid)"), ("prefill", "prompt chunk (hatched)"),
                       ("recompute", "recomputed after preemption (crossed)")):
        if kind in present:
            out.append({"type": "bar", "x": [None], "y": [None], "name": name, "legendgroup": f"kind_{kind}",
                        "marker": _marker("#6B7280", kind), "showlegend": True, "hoverinfo": "skip", **axes})
    return out


def _limit_trace(limit: int, x0: float, x1: float, axes: dict, legend: bool) -> dict:
    return {"type": "scatter", "x": [x0, x1], "y": [limit, limit], "mode": "lines",
            "name": f"batch limit ({limit:,} tokens)", "legendgroup": "limit", "showlegend": legend,
            "line": {"color": "#6B7280", "dash": "dash", "width": 1.5}, "hoverinfo": "skip", **axes}


def _token_axis(peak: float, log_y: bool, title: str) -> dict:
    """The tokens axis: linear from 0, or logarithmic from just under 1 (a 1-token decode entry
    stays visible next to a 2,000-token prompt chunk)."""
    if log_y:
        return {"title": {"text": title + " (log)"}, "type": "log",
                "range": [math.log10(0.7), math.log10(max(peak, 2) * 1.4)], "dtick": 1}
    return {"title": {"text": title}, "rangemode": "tozero", "range": [0, max(peak, 1) * 1.06]}


def batch_figure(trace: Trace, window: tuple[int, int] | None = None, max_bars: int = MAX_BARS,
                 mark: int | None = None, log_y: bool = False, height: int = 340,
                 legend: bool = True) -> go.Figure:
    """Every model call of `window` (default: all) as a stacked bar of its entries.

    One bar trace per (slot, kind): colour = slot; decode tokens solid, prompt chunks lighter and
    hatched, recomputed tokens crossed. Past max_bars calls, bars are bins of k calls showing the
    mean tokens per call. `mark` highlights one call (the inspector's); log_y: logarithmic tokens
    axis; legend=False leaves the legend out (a second view of the same log).
    layout.meta: calls, bin, window, entries, limit.
    """
    lo, hi = window if window is not None else _step_bounds(trace)
    calls = trace.steps["step"].to_numpy()
    n_calls = int(((calls >= lo) & (calls <= hi)).sum())
    k = _bin_size(n_calls, max_bars)
    data = _batch_traces(trace, lo, hi, k, True, {})
    data += _kind_legend({_kind_of(t) for t in data}, {})
    limit = batch_limit(trace)
    if limit and n_calls:
        data.append(_limit_trace(limit, lo - 0.5, hi + 0.5, {}, True))
    shapes = []
    if mark is not None and lo <= mark <= hi:
        w = max(k, 1) / 2
        shapes.append({"type": "rect", "xref": "x", "yref": "paper", "x0": mark - w, "x1": mark + w,
                       "y0": 0, "y1": 1, "line": {"width": 1.5, "color": "#D97706"},
                       "fillcolor": "rgba(245,158,11,0.18)", "layer": "above"})
    xlabel = "model call" + (f" (bins of {k} calls; bars show the mean tokens per call)" if k > 1 else "")
    b = trace.batch["step"].to_numpy()
    s = trace.steps
    in_win = s[(s["step"].to_numpy() >= lo) & (s["step"].to_numpy() <= hi)]
    peak = max(float(in_win["num_tokens"].max()) if len(in_win) else 0.0, float(limit or 0))
    layout = _layout(height, barmode="stack", bargap=0 if n_calls > 150 or k > 1 else 0.15, shapes=shapes,
                     xaxis={"title": {"text": xlabel}, "range": [lo - 0.5, hi + 0.5], "showgrid": False,
                            "zeroline": False, **({"dtick": 1} if n_calls <= 30 else {})},
                     yaxis=_token_axis(peak, log_y, "tokens in the call"), showlegend=legend,
                     meta={"calls": n_calls, "bin": k, "window": [int(lo), int(hi)],
                           "entries": int(((b >= lo) & (b <= hi)).sum()), "limit": limit})
    return go.Figure(data=data, layout=layout, _validate=False)  # tests validate; saves ~0.5 s per figure


# ---------------------------------------------------------------------------------------------
# Time per call
# ---------------------------------------------------------------------------------------------

MAX_TIME_POINTS = 6000
PROMPT_CALL = "#D97706"
DECODE_CALL = "#4E79A7"


def call_time_figure(trace: Trace, height: int = 280, max_points: int = MAX_TIME_POINTS) -> go.Figure:
    """Each model call's logged duration (ms, from its model-call line to the line that ends it)
    against the call index: decode-only calls in blue, calls that carried a prompt chunk in
    orange, the median decode-only call dashed (last trace). Points as WebGL past 2,000 of a kind;
    past max_points, ordinary decode-only calls (at most twice the median) are thinned evenly.
    layout.meta: timed (False: no timestamps, nothing drawn), calls, unknown (calls without a
    duration), shown (points drawn), median_decode_ms, worst_ms, worst_call, worst_has_prompt."""
    if not uses_wall_time(trace) or trace.steps.empty:
        return go.Figure(layout=_layout(height, meta={"timed": False}), _validate=False)
    s = trace.steps
    step = s["step"].to_numpy(dtype=np.int64)
    dur = s["end"].to_numpy(dtype=float) - s["start"].to_numpy(dtype=float)
    prompt = (s["prefill_tokens"].astype("Float64").fillna(0).to_numpy(dtype=float)
              + s["recompute_tokens"].astype("Float64").fillna(0).to_numpy(dtype=float))
    decode = s["decode_tokens"].astype("Float64").fillna(0).to_numpy(dtype=float)
    known = np.isfinite(dur)
    has_prompt = prompt > 0
    plain_calls = dur[known & ~has_prompt]
    median = float(np.median(plain_calls)) if len(plain_calls) else None
    # past max_points, the dense band of ordinary decode-only calls is thinned evenly; every call
    # with a prompt chunk and every call over twice the median (a stutter) stays
    shown = known.copy()
    if known.sum() > max_points:
        ordinary = known & ~has_prompt & (dur <= 2 * (median or 0.0))
        keep_every = max(1, int(np.ceil(ordinary.sum() / max(1, max_points - (known & ~ordinary).sum()))))
        shown = known & (~ordinary | (np.cumsum(ordinary) % keep_every == 1) | (keep_every == 1))
    data = []
    for mask, name, colour in ((shown & ~has_prompt, "decode-only call", DECODE_CALL),
                               (shown & has_prompt, "call with a prompt chunk", PROMPT_CALL)):
        if not mask.any():
            continue
        data.append({"type": "scattergl" if mask.sum() > 2000 else "scatter", "mode": "markers", "name": name,
                     "x": step[mask].astype(np.int32), "y": dur[mask].astype(np.float32),
                     "marker": {"color": colour, "size": 5 if mask.sum() > 2000 else 7, "opacity": 0.85},
                     "customdata": np.stack([prompt[mask], decode[mask]], axis=-1).astype(np.int32),
                     "hovertemplate": "call %{x}: %{y:.1f} ms<br>%{customdata[0]:.0f} prompt + "
                                      "%{customdata[1]:.0f} decode tokens<extra></extra>"})
    if median is not None:
        data.append({"type": "scatter", "mode": "lines", "name": f"median decode-only call ({median:.3g} ms)",
                     "x": [float(step[0]) - 0.5, float(step[-1]) + 0.5], "y": [median, median], "hoverinfo": "skip",
                     "line": {"color": "#6B7280", "width": 1.5, "dash": "dash"}})
    worst = int(np.nanargmax(np.where(known, dur, -np.inf))) if known.any() else None
    layout = _layout(height, showlegend=True,
                     xaxis={"title": {"text": "model call"}, "showgrid": False, "zeroline": False},
                     yaxis={"title": {"text": "ms per call (log)"}, "type": "log", "dtick": 1},
                     meta={"timed": True, "calls": int(len(step)), "unknown": int((~known).sum()),
                           "shown": int(shown.sum()),
                           "median_decode_ms": median,
                           "worst_ms": float(dur[worst]) if worst is not None else None,
                           "worst_call": int(step[worst]) if worst is not None else None,
                           "worst_has_prompt": bool(has_prompt[worst]) if worst is not None else None})
    return go.Figure(data=data, layout=layout, _validate=False)  # tests validate


# ---------------------------------------------------------------------------------------------
# Slot lanes
# ---------------------------------------------------------------------------------------------

def task_runs(trace: Trace) -> pd.DataFrame:
    """Runs of consecutive model calls in which one task held one slot with one kind of work:
    slot, request, kind, first, last (calls), tokens, calls."""
    b = trace.batch
    cols = ["slot", "request", "kind", "first", "last", "tokens", "calls"]
    if b.empty:
        return pd.DataFrame({c: [] for c in cols})
    df = pd.DataFrame({"slot": _slots(b), "request": b["request"].astype(str).to_numpy(), "kind": _kinds(b),
                       "step": b["step"].to_numpy(dtype=np.int64), "tokens": b["tokens"].to_numpy(dtype=np.int64)})
    df = df.sort_values(["slot", "request", "step"], kind="stable").reset_index(drop=True)
    same = ((df["slot"].to_numpy()[1:] == df["slot"].to_numpy()[:-1])
            & (df["request"].to_numpy()[1:] == df["request"].to_numpy()[:-1])
            & (df["kind"].to_numpy()[1:] == df["kind"].to_numpy()[:-1])
            & (np.diff(df["step"].to_numpy()) == 1))
    run = np.concatenate([[0], np.cumsum(~same)])
    g = df.groupby(run, sort=False).agg(slot=("slot", "first"), request=("request", "first"), kind=("kind", "first"),
                                       first=("step", "min"), last=("step", "max"), tokens=("tokens", "sum"),
                                       calls=("step", "size"))
    return g.reset_index(drop=True)[cols]


def _clock(trace: Trace, clock: str) -> tuple[bool, str]:
    """(wall time?, x-axis title)."""
    wall = clock == "time" and uses_wall_time(trace)
    return wall, ("seconds since the log began" if wall else "model call")


def _lane_traces(trace: Trace, clock: str, legend: bool, axes: dict,
                 seen: set | None = None) -> tuple[list[dict], dict]:
    """Bar / line traces of the slot lanes, and info (slots, x range)."""
    wall, _ = _clock(trace, clock)
    runs = task_runs(trace)
    steps = trace.steps
    start = pd.Series(steps["start"].to_numpy(dtype=float), index=steps["step"].to_numpy())
    end = pd.Series(steps["end"].to_numpy(dtype=float), index=steps["step"].to_numpy())
    if wall:
        x0 = start.reindex(runs["first"].to_numpy()).to_numpy() / 1000.0
        x1 = end.reindex(runs["last"].to_numpy()).to_numpy() / 1000.0
    else:
        x0 = runs["first"].to_numpy(dtype=float) - 0.5
        x1 = runs["last"].to_numpy(dtype=float) + 0.5
    r = trace.requests
    req_slot = dict(zip(r["request"].astype(str), r["slot"].astype("Float64").fillna(-1).astype(float)))
    max_slot = int(max([int(runs["slot"].max()) if len(runs) else -1, *[int(v) for v in req_slot.values()], 0]))
    n_slots = max(max_slot + 1, _declared_slots(trace))
    data: list[dict] = []
    seen = seen if seen is not None else set()
    many = len(runs) > MAX_LANE_BARS
    for kind in KIND_ORDER:
        m = runs["kind"].to_numpy() == kind
        if not m.any():
            continue
        part = runs[m]
        a, z = x0[m], x1[m]
        name = {"decode": "generating (decode)", "prefill": "prompt processing (hatched)",
                "recompute": "recomputing (crossed)"}[kind]
        show = legend and kind not in seen
        seen.add(kind)
        if show and not many:
            data.append({"type": "bar", "orientation": "h", "x": [None], "y": [None], "name": name,
                         "legendgroup": f"lane_{kind}", "showlegend": True, "hoverinfo": "skip",
                         "marker": _marker("#6B7280", kind), **axes})
        if many:  # WebGL segments, one colour per kind
            xs = np.column_stack([a, z, np.full(len(a), np.nan)]).ravel()
            ys = np.repeat(part["slot"].to_numpy(dtype=float), 3)
            data.append({"type": "scattergl", "mode": "lines", "x": xs, "y": ys, "name": name, "showlegend": show,
                         "legendgroup": f"lane_{kind}", "hoverinfo": "skip",
                         "line": {"width": 14, "color": {"decode": "#4E79A7", "prefill": "#A0CBE8",
                                                         "recompute": "#23364B"}[kind]}, **axes})
            continue
        colours = [slot_colour(int(v)) for v in part["slot"]]
        marker = {"color": colours if kind == "decode" else [_tint(c, 0.55) for c in colours], "line": {"width": 0}}
        if kind != "decode":
            marker["pattern"] = {"shape": PATTERN[kind], "fgcolor": colours, "size": 6, "solidity": 0.35,
                                 "fillmode": "overlay"}
        span = ("%{customdata[2]:.3f}–%{customdata[3]:.3f} s" if wall else "")
        span_x = (np.nanmax(x1) - np.nanmin(x0)) if len(runs) else 1.0
        wide = (z - a) >= 0.06 * span_x
        text = (np.where(wide, "task " + part["request"].to_numpy(dtype=str), "")
                if kind == "decode" and len(runs) <= 200 else None)
        data.append({"type": "bar", "orientation": "h", "y": part["slot"].to_numpy(), "base": a, "x": z - a,
                     "width": 0.62, "name": name, "showlegend": False, "legendgroup": f"lane_{kind}",
                     "marker": marker,
                     **({"text": text, "textposition": "inside", "insidetextanchor": "start", "textangle": 0,
                         "textfont": {"size": 11, "color": "white"}, "texttemplate": "%{text}"}
                        if text is not None else {}),
                     "customdata": np.stack([part["request"].to_numpy(dtype=object), part["first"].to_numpy(),
                                             a, z, part["last"].to_numpy(), part["tokens"].to_numpy(),
                                             part["calls"].to_numpy()], axis=-1),
                     "hovertemplate": (f"slot %{{y}} · task %{{customdata[0]}}<br>{KIND_WORDS[kind]}: "
                                       "%{customdata[5]} tokens in %{customdata[6]} call(s), calls "
                                       "%{customdata[1]}–%{customdata[4]}" + (f"<br>{span}" if span else "")
                                       + "<extra></extra>"), **axes})
    data += _lane_marks(trace, wall, req_slot, start, end, legend, axes, seen)
    x_lo = float(np.nanmin(x0)) if len(runs) else 0.0
    x_hi = float(np.nanmax(x1)) if len(runs) else 1.0
    return data, {"slots": n_slots, "runs": int(len(runs)), "x": [x_lo, x_hi], "wall": wall}


def _declared_slots(trace: Trace) -> int:
    """The slots the server (or a simulated llama-server) had, idle ones included; 0 if unknown."""
    if trace.source == "llama-server log":
        return int(trace.meta.get("n_slots") or 0)
    if trace.meta.get("scheduler") == "llama_slots":
        return int((trace.meta.get("config") or {}).get("max_num_seqs") or 0)
    return 0


def _lane_marks(trace, wall, req_slot, start, end, legend, axes, seen) -> list[dict]:
    """Queue waits (dotted line from arrival to the first call on the slot) and event markers."""
    r = trace.requests
    out: list[dict] = []
    if len(r):
        slot = r["request"].astype(str).map(req_slot).to_numpy(dtype=float)
        if wall:
            arr = r["arrival_time"].to_numpy(dtype=float) / 1000.0
            first = start.reindex(r["first_scheduled_step"].astype("Float64").fillna(-1).to_numpy(dtype=float)
                                  .astype(np.int64)).to_numpy() / 1000.0
        else:
            arr = r["arrival_step"].astype("Float64").to_numpy(dtype=float, na_value=np.nan) + 0.5
            first = r["first_scheduled_step"].astype("Float64").to_numpy(dtype=float, na_value=np.nan) - 0.5
        ok = ~np.isnan(arr) & ~np.isnan(first) & (slot >= 0)
        if ok.any():
            y = slot[ok] - 0.42
            xs = np.column_stack([arr[ok], first[ok], np.full(ok.sum(), np.nan)]).ravel()
            waited = np.maximum(first[ok] - arr[ok], 0)
            unit = "s" if wall else "calls"
            show = legend and "wait" not in seen
            seen.add("wait")
            out.append({"type": "scatter", "mode": "lines", "x": xs, "y": np.repeat(y, 3), "name": "queued (dotted)",
                        "legendgroup": "wait", "showlegend": show, "hoverinfo": "skip",
                        "line": {"color": WAIT, "dash": "dot", "width": 1.5}, **axes})
            out.append({"type": "scatter", "mode": "markers", "x": arr[ok], "y": y, "showlegend": False,
                        "legendgroup": "wait", "name": "arrival",
                        "marker": {"symbol": "triangle-right", "size": 8, "color": WAIT},
                        "customdata": np.stack([r["request"].astype(str).to_numpy(dtype=object)[ok], waited], axis=-1),
                        "hovertemplate": f"task %{{customdata[0]}} queued<br>waited %{{customdata[1]:.3~f}} {unit} "
                                         "for its first call<extra></extra>", **axes})
    e = trace.events
    marks = {"cancel": ("cancelled", "x", CANCEL), "preempt": ("preempted", "x", PREEMPT),
             "context_shift": ("context shift", "diamond", SHIFT), "truncate": ("prompt truncated", "diamond", SHIFT),
             "kv_fail": ("KV cache full, batch retried", "star", PREEMPT)}
    for kind, (name, symbol, colour) in marks.items():
        ev = e[e["kind"].to_numpy() == kind]
        if ev.empty:
            continue
        ys = ev["request"].astype(str).map(req_slot).to_numpy(dtype=float)
        ok = ~np.isnan(ys) & (ys >= 0)
        if not ok.any():
            continue
        st = ev["step"].to_numpy(dtype=np.int64)[ok]
        xs = end.reindex(st).to_numpy() / 1000.0 if wall else st.astype(float)
        show = legend and kind not in seen
        seen.add(kind)
        out.append({"type": "scatter", "mode": "markers", "x": xs, "y": ys[ok], "name": name, "legendgroup": kind,
                    "showlegend": show,
                    "marker": {"symbol": symbol, "size": 12, "color": colour, "line": {"width": 1.5, "color": "white"}},
                    "customdata": np.stack([ev["request"].astype(str).to_numpy(dtype=object)[ok], st,
                                            ev["detail"].astype(str).to_numpy(dtype=object)[ok]], axis=-1),
                    "hovertemplate": f"task %{{customdata[0]}} {name} at call %{{customdata[1]}}<br>"
                                     "%{customdata[2]}<extra></extra>", **axes})
    return out


def _lanes_height(n_slots: int) -> int:
    return int(min(720, max(230, 130 + 44 * n_slots)))


def slot_lanes_figure(trace: Trace, clock: str = "time") -> go.Figure:
    """The slots as lanes: each task's runs of prompt chunks (hatched) and decode tokens (solid)
    in the slot's colour (as in batch_figure), labelled with the task where they are wide enough;
    queue waits dotted; cancels, preemptions and context shifts marked.

    clock "time": seconds since the log began when the trace has timestamps, else model calls;
    clock "calls": model calls. layout.meta: slots, runs, wall (bool).
    """
    data, info = _lane_traces(trace, clock, True, {})
    wall, xlabel = _clock(trace, clock)
    n = info["slots"]
    pad = (info["x"][1] - info["x"][0]) * 0.01 or 0.5
    layout = _layout(_lanes_height(n), barmode="overlay",
                     xaxis={"title": {"text": xlabel}, "showgrid": True, "gridcolor": "#F3F4F6", "zeroline": False,
                            "range": [info["x"][0] - pad, info["x"][1] + pad]},
                     yaxis={"title": {"text": "slot"}, "autorange": False, "range": [n - 0.5, -0.7],
                            "showgrid": False, "zeroline": False, "tickmode": "array", "tickvals": list(range(n))},
                     meta={"slots": n, "runs": info["runs"], "wall": wall})
    return go.Figure(data=data, layout=layout, _validate=False)


# ---------------------------------------------------------------------------------------------
# Side by side: the log and its re-simulations
# ---------------------------------------------------------------------------------------------

def comparison_figure(runs: dict[str, Trace], view: str = "batch", max_bars: int = MAX_BARS,
                      log_y: bool = False) -> go.Figure:
    """`view` ("batch" or "lanes") of each run, one row per run (label = the dict key), on one
    model-call axis; batch rows share one token scale. Rows bin calls alike (k from the longest
    run and max_bars over all rows). layout.meta: bin, calls (per row), slots (per row)."""
    labels = list(runs)
    n = max(len(labels), 1)
    last = max((_step_bounds(t)[1] for t in runs.values()), default=1)
    k = _bin_size(last * n, max_bars) if view == "batch" else 1
    rows_slots, heights = [], []
    traces: list[list[dict]] = []
    seen: set = set()
    for i, label in enumerate(labels):
        axes = {"xaxis": "x" if i == 0 else f"x{i + 1}", "yaxis": "y" if i == 0 else f"y{i + 1}"}
        tr = runs[label]
        if view == "batch":
            rows = _batch_traces(tr, 1, last, k, True, axes, seen)
            limit = batch_limit(tr)
            if limit:
                rows.append(_limit_trace(limit, 0.5, last + 0.5, axes, False))
            traces.append(rows)
            rows_slots.append(int(tr.batch["slot"].astype("Float64").max() + 1) if len(tr.batch) else 0)
            heights.append(1.0)
        else:
            rows, info = _lane_traces(tr, "calls", True, axes, seen)
            traces.append(rows)
            rows_slots.append(info["slots"])
            heights.append(0.6 + 0.25 * info["slots"])
    lay = _rows_layout(labels, heights, 0.09 if view == "batch" else 0.07)
    data = [t for rows in traces for t in rows]
    if view == "batch":
        data += _kind_legend({_kind_of(t) for t in data if t.get("type") == "bar"}, {})
        peak = max([_peak(t) for t in runs.values()] + [1])
        ax = _token_axis(peak, log_y, "tokens")
        ax["title"] = {"text": "tokens" + (" (log)" if log_y else "")}
        for i in range(n):
            lay[_axis("yaxis", i)].update(ax)
        height = 150 + 190 * n
    else:
        for i, s in enumerate(rows_slots):
            lay[_axis("yaxis", i)].update(autorange=False, range=[s - 0.5, -0.7], tickmode="array",
                                          tickvals=list(range(s)), showgrid=False, zeroline=False,
                                          title={"text": "slot"})
        height = int(min(1400, 150 + sum(70 + 40 * s for s in rows_slots)))
    for i in range(n):
        lay[_axis("xaxis", i)].update(range=[0.5, last + 0.5], showgrid=False, zeroline=False)
    lay[_axis("xaxis", n - 1)]["title"] = {
        "text": "model call" + (f" (bins of {k} calls; mean tokens per call)" if k > 1 else "")}
    layout = _layout(height, barmode="stack" if view == "batch" else "overlay", bargap=0,
                     meta={"bin": k, "calls": [int(len(t.steps)) for t in runs.values()],
                           "slots": rows_slots, "view": view})
    layout["margin"] = {**layout["margin"], "t": 96}
    layout["legend"] = {**layout["legend"], "y": 1 + 40 / max(height - 144, 1)}
    lay.update(layout)
    return go.Figure(data=data, layout=lay, _validate=False)


def _axis(name: str, i: int) -> str:
    return name if i == 0 else f"{name}{i + 1}"


def _rows_layout(titles: list[str], heights: list[float], gap: float) -> dict:
    """Axes for len(titles) rows sharing one x axis (ticks on the bottom row), heights in
    proportion to `heights`, each row titled at its top left. (make_subplots without its cost.)"""
    n = len(titles)
    free = 1.0 - gap * (n - 1)
    total = sum(heights) or 1.0
    lay: dict = {"annotations": []}
    top = 1.0
    for i, (title, h) in enumerate(zip(titles, heights)):
        bottom = max(0.0, top - free * h / total)
        x, y = _axis("xaxis", i), _axis("yaxis", i)
        lay[x] = {"domain": [0.0, 1.0], "anchor": y.replace("axis", ""), "showticklabels": i == n - 1,
                  **({"matches": "x"} if i else {})}
        lay[y] = {"domain": [bottom, top], "anchor": x.replace("axis", "")}
        lay["annotations"].append({"text": title, "x": 0, "xanchor": "left", "xref": "paper", "y": top,
                                   "yanchor": "bottom", "yref": "paper", "showarrow": False,
                                   "font": {"size": 14, "color": "#111827"}})
        top = bottom - gap
    return lay


def _peak(trace: Trace) -> float:
    s = trace.steps
    peak = float(s["num_tokens"].max()) if len(s) else 0.0
    return max(peak, float(batch_limit(trace) or 0))


# ---------------------------------------------------------------------------------------------
# Tables
# ---------------------------------------------------------------------------------------------

def _ints(col: pd.Series) -> pd.Series:
    return col.astype("Float64").round().astype("Int64")


def task_table(trace: Trace) -> pd.DataFrame:
    """One row per task: what the log shows (rebuilt) next to what the server printed in its
    timing block, TTFT, the worst and mean gap between its tokens (sim.metrics.per_request, in ms
    with timestamps, else in model calls) and the calls it spanned. "check" says whether the rebuilt prompt and
    generated counts equal the server's own (✓), differ (≠ ...), or the server printed none (–)."""
    r = trace.requests
    if r.empty:
        return pd.DataFrame(columns=["task", "slot", "finish"])
    wall = uses_wall_time(trace)

    def col(name):
        return r[name] if name in r.columns else pd.Series([pd.NA] * len(r), dtype="Float64")

    prompt, gen = _ints(col("prompt_tokens")), _ints(r["output_tokens"])
    sp, sg = _ints(col("server_prompt_n")), _ints(col("server_predicted_n"))
    checks = []
    for a, b, c, d in zip(prompt, sp, gen, sg):
        if pd.isna(b) and pd.isna(d):
            checks.append("–")
            continue
        bad = [w for w, x, y in (("prompt", a, b), ("generated", c, d)) if not pd.isna(y) and (pd.isna(x) or x != y)]
        checks.append("✓" if not bad else "≠ " + ", ".join(bad))
    out = pd.DataFrame({"task": r["task"].astype(str) if "task" in r.columns else r["request"].astype(str),
                        "slot": _ints(r["slot"]),
                        "finish": r["finish_reason"].replace("", "unknown")})
    if "partial" in r.columns and r["partial"].astype(bool).any():  # a log that begins or ends mid-run
        out["in the log"] = np.where(r["partial"].astype(bool).to_numpy(), "partial", "whole")
    out["processed (rebuilt)"] = prompt
    out["prompt_n (server)"] = sp
    out["generated (rebuilt)"] = gen
    out["predicted_n (server)"] = sg
    out["check"] = checks
    out["cached (cache_n)"] = _ints(r["cached_tokens"])
    out["prompt tokens"] = _ints(r["prompt_len"])
    out["prompt ms (server)"] = col("server_prompt_ms").astype(float).round(2)
    out["eval ms (server)"] = col("server_predicted_ms").astype(float).round(2)
    if wall:
        out["queued at (s)"] = (r["arrival_time"] / 1000.0).round(3)
        out["TTFT (ms)"] = (r["first_token_time"] - r["arrival_time"]).round(1)
    out["queued after call"] = _ints(r["arrival_step"])
    out["TTFT (calls)"] = _ints(r["first_token_step"].astype("Float64") - r["arrival_step"].astype("Float64"))
    # stutter: the longest and the mean wait between two of the task's tokens (on the log's clock)
    gaps = per_request(trace).set_index("request").reindex(r["request"].to_numpy())
    unit = "ms" if wall else "calls"
    out[f"worst token gap ({unit})"] = gaps["itl_worst"].to_numpy(dtype=float).round(1 if wall else 0)
    out[f"mean token gap ({unit})"] = gaps["itl_mean"].to_numpy(dtype=float).round(2)
    out["calls"] = (_ints(r["first_scheduled_step"]).astype(str) + "–" + _ints(r["finish_step"]).astype(str)
                    ).str.replace("<NA>", "?")
    return out.reset_index(drop=True)


def call_tables(trace: Trace, step: int) -> tuple[pd.DataFrame, pd.DataFrame, dict]:
    """(the entries of model call `step`: slot, task, kind, tokens, positions, sampled;
    its events: task, event, detail; facts: tokens, entries, logged n_tokens, start/end/duration)."""
    b = trace.batch_at(step)
    before = b["computed_before"].astype("Float64")
    entries = pd.DataFrame({
        "slot": _ints(b["slot"]).to_numpy(),
        "task": b["request"].astype(str).to_numpy(),
        "kind": [KIND_WORDS.get(k, k) for k in b["kind"].astype(str)],
        "tokens": b["tokens"].to_numpy(dtype=np.int64),
        "positions": [("?" if pd.isna(c) else f"{int(c):,}–{int(c) + int(t):,}")
                      for c, t in zip(before, b["tokens"])],
        "samples a token": b["sampled"].to_numpy(dtype=bool),
    })
    e = trace.events
    ev = e[e["step"].to_numpy() == step]
    events = pd.DataFrame({"task": ev["request"].astype(str).to_numpy(), "event": ev["kind"].to_numpy(),
                           "detail": ev["detail"].astype(str).to_numpy()})
    s = trace.steps
    row = s[s["step"].to_numpy() == step]
    facts: dict = {"step": int(step), "tokens": int(entries["tokens"].sum()), "entries": int(len(entries))}
    if len(row):
        r0 = row.iloc[0]
        if "logged_tokens" in row.columns and not pd.isna(r0["logged_tokens"]):
            facts["logged"] = int(r0["logged_tokens"])
        if uses_wall_time(trace):
            facts.update(start=float(r0["start"]), end=float(r0["end"]), ms=float(r0["end"] - r0["start"]))
    return entries, events, facts


