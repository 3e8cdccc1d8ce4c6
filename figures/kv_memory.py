"""Figures for the KV memory page: the block map played step by step, preemptions, and what
recompute and swap cost.

- memory_figure: ONE figure, two subplots sharing one slider: the KV block map (the Playback
  page's kv_map_figure, whose heatmap the frames replace with each step's small grid) and the
  blocks each request holds over steps, with each preemption marked by its victim and the
  tokens it will recompute. Only for maps and runs inside the size rules (fits_frames);
  otherwise the page scrubs kv_map_figure on the server beside timeline_figure.
- timeline_figure: the blocks-held timeline alone, a cursor at one step (the scrubber's view).
- victims_figure: the same timeline for several runs stacked (vLLM's FCFS vs priority victims).
- cost_figure: swap (out and back over a link) vs recompute (a prefill) against context length,
  the lesson's 2,000-token point and this run's preemptions on the curves.
"""
from __future__ import annotations

import math

import numpy as np
import pandas as pd
import plotly.graph_objects as go

from sim.analysis import block_owner_frames
from sim.trace import Trace

from .animate import assemble, axes, axis_key, subplot_layout, with_redraw
from .common import (CACHED_FREE, CONTROLS_MARGIN_B, FONT, FREE, NULL_BLOCK, PREEMPT, TEMPLATE, colour_codes,
                     pick_frames, play_controls, plotly_text, request_colour)
from .playback import kv_map_figure

MAX_FRAME_BLOCKS = 32 * 32  # block maps up to 32x32 animate in the browser
MAX_FRAMES = 2000  # at most this many frames (longer runs: every k-th step)
MAX_HOVER_FRAME_CELLS = 40_000  # per-frame hover text only while blocks x frames stays below this
MAX_STACKED_REQUESTS = 24  # the timeline stacks one area per request up to here, else one total
SWAP, RECOMPUTE = "#0F766E", "#B45309"
SPECIALS = [FREE, CACHED_FREE, NULL_BLOCK, "#FFFFFF"]  # codes -1..-4, as kv_map_figure draws them


def fits_frames(trace: Trace, max_blocks: int = MAX_FRAME_BLOCKS) -> bool:
    """Whether the block map may animate in the browser (else: a server-side scrubber)."""
    return 0 < trace.num_blocks <= max_blocks


# ---------------------------------------------------------------------------------------------
# Timeline: blocks held per request
# ---------------------------------------------------------------------------------------------

def _timeline_traces(held: pd.DataFrame, pre: pd.DataFrame, usable: int, ax: dict, legend: bool = True,
                     label_preemptions: bool = True) -> tuple[list[dict], list[dict]]:
    """(traces, annotations) of the blocks-held timeline on axes `ax`."""
    steps = held.index.to_numpy()
    data: list[dict] = []
    reqs = list(held.columns)
    if len(reqs) <= MAX_STACKED_REQUESTS:
        for i, q in enumerate(reqs):
            v = held[q].to_numpy()
            if not v.any():
                continue
            shown = plotly_text(str(q))   # an id as written, never as Plotly's markup
            data.append({"type": "scatter", "mode": "lines", "x": steps, "y": v, "stackgroup": ax["yaxis"],
                         "name": shown, "legendgroup": shown, "showlegend": legend,
                         "line": {"width": 0.5, "color": request_colour(i), "shape": "hv"},
                         "fillcolor": request_colour(i),
                         "hovertemplate": f"<b>{shown}</b> · step %{{x}}: %{{y}} blocks<extra></extra>", **ax})
    else:
        data.append({"type": "scatter", "mode": "lines", "x": steps, "y": held.sum(axis=1).to_numpy(),
                     "name": "blocks in use", "showlegend": legend, "fill": "tozeroy",
                     "line": {"color": "#4E79A7", "width": 1, "shape": "hv"},
                     "hovertemplate": "step %{x}: %{y} blocks in use<extra></extra>", **ax})
    if len(steps):
        data.append({"type": "scatter", "mode": "lines", "x": [steps[0] - 0.5, steps[-1] + 0.5], "y": [usable, usable],
                     "name": f"usable blocks ({usable})", "showlegend": legend, "hoverinfo": "skip",
                     "line": {"color": "#111827", "width": 1.5, "dash": "dash"}, **ax})
    notes: list[dict] = []
    if len(pre):
        used_before = held.sum(axis=1).reindex(pre["step"].to_numpy() - 1).fillna(0).to_numpy()
        cd = np.stack([plotly_text(pre["victim"].astype(str).to_numpy()), pre["kv_tokens"].astype(str),
                       pre["blocks_freed"].astype(str), pre["mode"].astype(str),
                       plotly_text(pre["tenant"].astype(str).to_numpy()), pre["swap_ms"].map("{:.1f}".format),
                       pre["recompute_ms"].map("{:.1f}".format)], axis=-1)
        data.append({"type": "scatter", "mode": "markers", "x": pre["step"].to_numpy(), "y": used_before,
                     "name": "preemption", "showlegend": legend, "legendgroup": "preemption",
                     "marker": {"symbol": "x", "size": 14, "color": PREEMPT, "line": {"width": 1.5, "color": "white"}},
                     "customdata": cd, "hovertemplate": (
                         "<b>step %{x}: %{customdata[0]} preempted</b> (tenant %{customdata[4]})<br>frees "
                         "%{customdata[2]} blocks holding %{customdata[1]} KV tokens<br>%{customdata[3]}: "
                         "recompute them ≈ %{customdata[6]} ms, or swap out and back ≈ %{customdata[5]} ms"
                         "<extra></extra>"), **ax})
        if label_preemptions and len(pre) <= 12:
            for k, ((_, p), y) in enumerate(zip(pre.iterrows(), used_before)):
                what = (f"{int(p['kv_tokens'])} tok to recompute" if p["mode"] == "recompute"
                        else f"{int(p['kv_tokens'])} tok swapped out")
                notes.append({"x": int(p["step"]), "y": float(y), "xref": ax["xaxis"], "yref": ax["yaxis"],
                              "text": f"<b>{plotly_text(str(p['victim']))}</b>: {what}", "showarrow": True,
                              "arrowhead": 2,
                              "arrowcolor": PREEMPT, "ax": 0, "ay": -20 - 20 * (k % 2),
                              "bgcolor": "rgba(255,255,255,0.9)",
                              "bordercolor": PREEMPT, "font": {"size": 12, "color": "#7F1D1D"}})
    return data, notes


def _veil(step: float, x_end: float, ax: dict) -> list[dict]:
    yd = f"{ax['yaxis']} domain"
    return [{"type": "rect", "xref": ax["xaxis"], "yref": yd, "x0": step + 0.5, "x1": x_end, "y0": 0, "y1": 1,
             "fillcolor": "rgba(255,255,255,0.8)", "line": {"width": 0}, "layer": "above"},
            {"type": "line", "xref": ax["xaxis"], "yref": yd, "x0": step + 0.5, "x1": step + 0.5, "y0": 0, "y1": 1,
             "line": {"color": "#111827", "width": 2}, "layer": "above"}]


def _timeline_axes(layout: dict, row: int, col: int, cols: int, steps: np.ndarray, usable: int,
                   x_title: bool = True) -> None:
    x0, x1 = (float(steps[0]) - 0.5, float(steps[-1]) + 0.5) if len(steps) else (0.5, 1.5)
    layout[axis_key(row, col, cols)].update(range=[x0, x1], showgrid=False, zeroline=False,
                                            **({"title": {"text": "step"}} if x_title else {}))
    layout[axis_key(row, col, cols, "y")].update(range=[0, usable * 1.4 + 1], title={"text": "KV blocks held"},
                                                 showgrid=True, gridcolor="#EEF0F3", zeroline=False)


def timeline_figure(held: pd.DataFrame, pre: pd.DataFrame, usable: int, cursor: int | None = None) -> go.Figure:
    """Blocks held per request over steps (stacked), usable blocks dashed, preemptions marked
    and labelled with victim and tokens; a cursor line at `cursor`."""
    ax = axes(1)
    data, notes = _timeline_traces(held, pre, usable, ax)
    steps = held.index.to_numpy()
    layout = {"height": 360, "template": TEMPLATE, "font": FONT, "hoverlabel": {"font": {"size": 12}},
              "margin": {"l": 60, "r": 20, "t": 40, "b": 50}, "annotations": notes,
              "legend": {"orientation": "h", "y": 1.02, "yanchor": "bottom", "x": 0},
              "xaxis": {}, "yaxis": {}, "meta": {"cursor": cursor}}
    _timeline_axes(layout, 1, 1, 1, steps, usable)
    if cursor is not None and len(steps):
        layout["shapes"] = [{"type": "line", "xref": "x", "yref": "y domain", "x0": cursor, "x1": cursor, "y0": 0,
                             "y1": 1, "line": {"color": "#111827", "width": 2}}]
    return assemble(data, layout)


def victims_figure(runs: dict[str, tuple[pd.DataFrame, pd.DataFrame]], usable: int) -> go.Figure:
    """Runs {title: (blocks_held, preemption_table)} of the same requests, one timeline each,
    stacked with a shared step axis (legend once)."""
    titles = list(runs)
    layout = subplot_layout(len(titles), 1, shared_xaxes=True, vertical_spacing=0.14, subplot_titles=titles)
    annotations = list(layout.get("annotations", []))
    data: list[dict] = []
    steps = np.array([], dtype=np.int64)
    for i, (title, (held, pre)) in enumerate(runs.items(), start=1):
        d, notes = _timeline_traces(held, pre, usable, axes(i), legend=i == 1)
        data += d
        annotations += notes
        if len(held.index) > len(steps):
            steps = held.index.to_numpy()
    for i in range(1, len(titles) + 1):
        _timeline_axes(layout, i, 1, 1, steps, usable, x_title=i == len(titles))
    layout.update(height=280 * len(titles) + 110, template=TEMPLATE, font=FONT, annotations=annotations,
                  hoverlabel={"font": {"size": 12}}, margin={"l": 60, "r": 20, "t": 90, "b": 59},
                  legend={"orientation": "h", "y": 0.99, "yanchor": "top", "x": 0, "yref": "container"},
                  meta={"victims": {t: runs[t][1]["victim"].tolist() for t in titles}})
    return assemble(data, layout)


# ---------------------------------------------------------------------------------------------
# The animated block map
# ---------------------------------------------------------------------------------------------

def _block_hover(codes: np.ndarray, reqs: list[str], tenants: list[str], tok: np.ndarray, kind: np.ndarray) -> list:
    out = []
    for b, c in enumerate(codes):
        if b == 0:
            out.append("block 0 · the null block (never allocated)")
        elif c >= 0:
            out.append(f"block {b} · <b>{reqs[c]}</b> (tenant {tenants[c]}) · {int(tok[c])} KV tokens · {kind[c]}")
            # (reqs and tenants come escaped: block_map_figure passes them through plotly_text)
        elif c == -2:
            out.append(f"block {b} · free, cached prefix")
        else:
            out.append(f"block {b} · free")
    return out


def memory_figure(trace: Trace, held: pd.DataFrame, tokens: pd.DataFrame, kinds: pd.DataFrame, pre: pd.DataFrame,
                  max_frames: int = MAX_FRAMES, frame_ms: int | None = None) -> go.Figure:
    """The block map (left) and the blocks-held timeline (right), played by one slider.

    Trace 0 is the block map heatmap (kv_map_figure's encoding: request index, -1 free, -2
    cached-free, -3 null block, -4 padding); each frame replaces its z (an int8/int16 grid of
    the blocks) and, while small, its hover text, and moves a veil and cursor on the timeline.
    """
    steps = held.index.to_numpy()
    fsteps = pick_frames(steps, max_frames)
    base_fig = kv_map_figure(trace, int(fsteps[-1]))  # axes, colours and legend of the Playback block map
    rows, cols = np.shape(base_fig.data[0].z)
    base = base_fig.to_plotly_json()
    heat = base["data"][0]
    n_req = len(trace.requests)
    reqs = plotly_text(trace.requests["request"].astype(str).tolist())   # as written in hovers, not as markup
    tenants = plotly_text(trace.requests["tenant"].astype(str).tolist())
    codes = block_owner_frames(trace, fsteps)  # (frames, blocks)
    n = codes.shape[1]
    with_hover = n * len(fsteps) <= MAX_HOVER_FRAME_CELLS
    tok = tokens.reindex(fsteps).to_numpy()
    knd = kinds.reindex(fsteps).to_numpy()
    hover_tpl = "%{customdata}<extra></extra>" if with_hover else "block %{customdata} · request #%{z}<extra></extra>"

    def grid(f: int) -> tuple[np.ndarray, np.ndarray | None]:
        flat = np.full(rows * cols, -4, dtype=np.int64)
        flat[:n] = codes[f]
        z, *_ = colour_codes(flat.reshape(rows, cols), n_req, SPECIALS)
        if not with_hover:
            return z, None
        h = np.full(rows * cols, "", dtype=object)
        h[:n] = _block_hover(codes[f], reqs, tenants, tok[f], knd[f])
        return z, h.reshape(rows, cols)

    # open on the first preemption (memory full, the victim's blocks just freed), else the last step
    first_pre = int(pre["step"].min()) if len(pre) else None
    start = int(np.searchsorted(fsteps, first_pre)) if first_pre is not None else len(fsteps) - 1
    start = min(start, len(fsteps) - 1)
    z_last, h_last = grid(start)
    block_ids = np.where(np.arange(rows * cols) < n, np.arange(rows * cols), -1).reshape(rows, cols)
    heat.update(z=z_last, customdata=h_last if with_hover else block_ids, hovertemplate=hover_tpl,
                xaxis="x", yaxis="y")
    data = [heat]
    for tr in base["data"][1:]:  # the legend swatches (and shared-block markers, drawn for the last step)
        if tr.get("name") == "shared (2+ holders)":
            continue
        data.append({**tr, "xaxis": "x", "yaxis": "y"})
    ax2 = axes(1, 2, 2)
    tl, notes = _timeline_traces(held, pre, n - 1, ax2, legend=True)
    data += tl
    x_end = float(steps[-1]) + 0.5 if len(steps) else 1.5
    frames = []
    for f, s in enumerate(fsteps):
        z, h = grid(f)
        fd = {"type": "heatmap", "z": z}
        if h is not None:
            fd["customdata"] = h
        frames.append({"name": str(int(s)), "data": [fd], "traces": [0],
                       "layout": {"shapes": _veil(float(s), x_end, ax2)}})
    controls = with_redraw(play_controls(fsteps, frame_ms))  # frames change the heatmap's z
    controls["sliders"][0]["active"] = start
    layout = subplot_layout(1, 2, column_widths=[0.4, 0.6], horizontal_spacing=0.08)
    base_l = base["layout"]
    layout["xaxis"].update({k: v for k, v in base_l.get("xaxis", {}).items() if k != "domain"})
    layout["yaxis"].update({k: v for k, v in base_l.get("yaxis", {}).items() if k != "domain"})
    _timeline_axes(layout, 1, 2, 2, steps, n - 1)
    height = max(int(base_l.get("height", 300)) + 40, 380) + 110
    layout.update(
        height=height, template=TEMPLATE, font=FONT, hoverlabel={"font": {"size": 12}}, plot_bgcolor="white",
        margin={"l": 90, "r": 20, "t": 87, "b": CONTROLS_MARGIN_B}, annotations=notes,
        legend={"orientation": "h", "y": 1.04, "yanchor": "bottom", "x": 0},
        shapes=_veil(float(fsteps[start]), x_end, ax2), **controls,
        meta={"frames": len(fsteps), "blocks": n, "grid": [rows, cols], "hover_per_frame": with_hover,
              "opens_at": int(fsteps[start]),
              "frame_steps": [int(s) for s in fsteps[:: max(1, math.ceil(len(fsteps) / 50))]]},
    )
    return assemble(data, layout, frames)


# ---------------------------------------------------------------------------------------------
# Recompute vs swap
# ---------------------------------------------------------------------------------------------

def cost_figure(curve: pd.DataFrame, pre: pd.DataFrame, mark_tokens: float | None = 2000,
                link_label: str = "", gpu_label: str = "") -> go.Figure:
    """swap_ms and recompute_ms (sim.preemption.swap_vs_recompute) against context tokens,
    with the run's preemptions (kv_tokens) on both curves and a note at `mark_tokens`."""
    data = [
        {"type": "scatter", "mode": "lines", "x": curve["tokens"], "y": curve["recompute_ms"],
         "name": "recompute (prefill again" + (f" on {gpu_label}" if gpu_label else "") + ")",
         "line": {"color": RECOMPUTE, "width": 3}, "hovertemplate": "%{x:,.0f} tokens: recompute %{y:.1f} ms<extra></extra>"},
        {"type": "scatter", "mode": "lines", "x": curve["tokens"], "y": curve["swap_ms"],
         "name": "swap out and back" + (f" over {link_label}" if link_label else ""),
         "line": {"color": SWAP, "width": 3}, "hovertemplate": "%{x:,.0f} tokens: swap %{y:.1f} ms<extra></extra>"},
    ]
    if len(pre):
        cd = np.stack([plotly_text(pre["victim"].astype(str).to_numpy()), pre["step"].astype(str)], axis=-1)
        for col, colour, what in (("recompute_ms", RECOMPUTE, "recompute"), ("swap_ms", SWAP, "swap")):
            data.append({"type": "scatter", "mode": "markers", "x": pre["kv_tokens"], "y": pre[col],
                         "name": f"this run's preemptions ({what})", "showlegend": what == "recompute",
                         "legendgroup": "pre", "customdata": cd,
                         "marker": {"symbol": "x", "size": 12, "color": PREEMPT, "line": {"width": 1, "color": "white"}},
                         "hovertemplate": (f"step %{{customdata[1]}}: %{{customdata[0]}}, %{{x}} tokens<br>{what} "
                                           "%{y:.2f} ms<extra></extra>")})
    notes = []
    if mark_tokens is not None and len(curve):
        at = curve.iloc[(curve["tokens"] - mark_tokens).abs().argmin()]
        notes = [{"x": float(at["tokens"]), "y": float(at["recompute_ms"]), "text":
                  f"{at['tokens']:,.0f} tokens: recompute {at['recompute_ms']:.1f} ms", "showarrow": True,
                  "arrowhead": 2, "ax": -70, "ay": -30, "bgcolor": "rgba(255,255,255,0.9)", "bordercolor": RECOMPUTE},
                 {"x": float(at["tokens"]), "y": float(at["swap_ms"]), "text":
                  f"swap {at['swap_ms']:.1f} ms", "showarrow": True, "arrowhead": 2, "ax": 40, "ay": -36,
                  "bgcolor": "rgba(255,255,255,0.9)", "bordercolor": SWAP}]
    layout = {"height": 380, "template": TEMPLATE, "font": FONT, "hoverlabel": {"font": {"size": 12}},
              "margin": {"l": 70, "r": 33, "t": 81, "b": 59}, "annotations": notes, "hovermode": "closest",
              "legend": {"orientation": "h", "y": 1.02, "yanchor": "bottom", "x": 0},
              "xaxis": {"title": {"text": "context tokens of the preempted request"}, "rangemode": "tozero",
                        "showgrid": True, "gridcolor": "#EEF0F3"},
              "yaxis": {"title": {"text": "milliseconds"}, "rangemode": "tozero", "showgrid": True,
                        "gridcolor": "#EEF0F3"},
              "meta": {"mark": None if mark_tokens is None or not len(curve) else
                       {"tokens": float(at["tokens"]), "swap_ms": float(at["swap_ms"]),
                        "recompute_ms": float(at["recompute_ms"])}}}
    return assemble(data, layout)
