"""Figures for the "Why batch" page (lesson Example 1): a decode step vs batch size on the roofline.

- decode_figure: four panels over batch size (step time with its memory and compute parts,
  throughput in total and per sequence, FLOP utilisation, bytes read per step split into
  weights and KV cache) above a bar of the card's memory (weights, the batch's KV caches,
  what is left). Frames, one per batch size, move a marker on every curve and regrow the
  memory bar: only a dozen numbers per frame.

Input: sim.lessons.sweeps.decode_sweep's table and decode_limits' dict.
"""
from __future__ import annotations

import numpy as np
import pandas as pd
import plotly.graph_objects as go

from .animate import assemble
from .common import CONTROLS_MARGIN_B, FONT, TEMPLATE, pick_frames, play_controls

WEIGHTS, KV, STEP, MEMORY, COMPUTE, OVER = "#4E79A7", "#F28E2B", "#111827", "#4E79A7", "#E15759", "#C0392B"
FREE_MEM = "#E5E7EB"
PER_SEQ = "#9333EA"
PANELS = {  # trace axes of each panel: (xaxis, yaxis); "per_seq" is the throughput panel's right axis
    "step": ("x", "y"), "throughput": ("x2", "y2"), "util": ("x3", "y3"), "bytes": ("x4", "y4"), "memory": ("x5", "y5"),
    "per_seq": ("x2", "y6"),
}
TITLES = {"step": "Decode step time (ms)", "throughput": "Tokens per second", "util": "FLOP utilisation (%)",
          "bytes": "Bytes read per step (GB)"}


def _ax(panel: str) -> dict:
    x, y = PANELS[panel]
    return {"xaxis": x, "yaxis": y}


def _rect(x0: float, x1: float) -> tuple[list, list]:
    return [x0, x1, x1, x0, x0], [0, 0, 1, 1, 0]


MEM_AXIS_PX = 800  # about how wide the memory bar is drawn; decides which labels fit inside their box


def _memory_state(batch: int, limits: dict, span: float) -> dict:
    """The memory bar at `batch`: rectangles (weights, KV caches, free, the part over capacity),
    a short label inside each box that is wide enough for it, and a summary line above the bar
    (`span`: the axis length in GB)."""
    w, kv_seq, mem = limits["weights_gb"], limits["kv_per_seq_gb"], limits["memory_gb"]
    kv = batch * kv_seq
    end = w + kv
    none = ([None], [None])

    def inside(x0: float, x1: float, text: str) -> tuple[float, str]:
        fits = (x1 - x0) / span * MEM_AXIS_PX >= 6.6 * len(text) + 8
        return (x0 + x1) / 2, text if fits else ""

    boxes = [inside(0, min(w, mem), f"weights {w:.2f} GB"), inside(min(w, mem), min(end, mem), f"KV {kv:.2f} GB")]
    if end <= mem:
        boxes.append(inside(end, mem, f"free {mem - end:.2f} GB"))
        left = f"{mem - end:.2f} GB free"
    else:
        boxes.append(inside(mem, end, f"{end - mem:.2f} GB over"))
        left = f"{end - mem:.2f} GB more than the card has"
    summary = (f"batch {batch}: weights {w:.2f} GB + KV {batch} × {kv_seq:.3f} GB = {end:.2f} GB of "
               f"{mem:.0f} GB, {left}")
    return {"weights": _rect(0, w), "kv": _rect(w, end) if kv > 0 else none,
            "free": _rect(end, mem) if end < mem else none, "over": _rect(mem, end) if end > mem else none,
            "text_x": [x for x, _ in boxes] + [0], "text": [t for _, t in boxes] + [summary],
            "text_pos": ["middle center"] * 3 + ["top right"]}


def decode_figure(sweep: pd.DataFrame, limits: dict, max_frames: int = 200, frame_ms: int | None = None,
                  start_batch: int | None = None) -> go.Figure:
    """Step time, throughput, FLOP utilisation and bytes per step over batch size, and the
    card's memory at one batch size, animated over batch sizes.

    Trace names: "step time", "memory time", "compute time", "tok/s total", "tok/s per sequence",
    "FLOP utilisation", "weights", "KV cache", then the animated ones ("cursor …", "mem …").
    layout.meta: fit_sequences, kv_over_weights_batch, compute_bound_batch, frames, batches.
    """
    b = sweep["batch"].to_numpy(dtype=np.int64)
    x_lo, x_hi = float(b[0]) - 0.5, float(b[-1]) + 0.5
    fit = int(limits["fit_sequences"])
    data: list[dict] = []

    def line(panel, y, name, colour, dash="solid", width=2.5, hover="", fill=None, group=None, legend=True):
        t = {"type": "scatter", "x": b, "y": np.asarray(y, dtype=float), "name": name, "mode": "lines",
             "line": {"color": colour, "dash": dash, "width": width}, "legendgroup": group or name,
             "showlegend": legend, "hovertemplate": "batch %{x}<br>" + hover + "<extra></extra>", **_ax(panel)}
        if fill:
            t.update(fill=fill, stackgroup="bytes", line={"color": colour, "width": 1})
        data.append(t)

    line("step", sweep["step_ms"], "step time", STEP, width=3, hover="step %{y:.2f} ms")
    line("step", sweep["memory_ms"], "memory time (bytes / bandwidth)", MEMORY, "dash", 1.8,
         "reading the bytes: %{y:.2f} ms")
    line("step", sweep["compute_ms"], "compute time (FLOPs / peak)", COMPUTE, "dot", 1.8, "arithmetic: %{y:.2f} ms")
    line("throughput", sweep["tok_s"], "tok/s, all sequences", "#59A14F", hover="%{y:,.0f} tok/s in total")
    line("per_seq", sweep["tok_s_per_seq"], "tok/s, per sequence (right axis)", PER_SEQ, "dash", 2,
         "%{y:,.1f} tok/s per sequence")
    line("util", sweep["flop_util_pct"], "FLOP utilisation", "#E15759", hover="%{y:.2f}% of peak FLOP/s",
         legend=False)
    line("bytes", sweep["weights_gb"], "weights (read once per step)", WEIGHTS, hover="weights %{y:.2f} GB",
         fill="tozeroy")
    line("bytes", sweep["kv_gb"], "KV cache (every sequence's own)", KV, hover="KV cache %{y:.2f} GB", fill="tonexty")

    # --- animated traces: a marker per curve and the memory bar -----------------------------------
    mem_hi = max(limits["memory_gb"], limits["weights_gb"] + float(b[-1]) * limits["kv_per_seq_gb"]) * 1.01
    frame_batches = pick_frames(b, max_frames)
    start = int(start_batch) if start_batch is not None and start_batch in set(frame_batches.tolist()) \
        else int(frame_batches[-1])
    by_batch = sweep.set_index("batch")

    def cursor(batch: int) -> list[dict]:
        r = by_batch.loc[batch]
        return [{"x": [batch], "y": [r["step_ms"]]}, {"x": [batch], "y": [r["tok_s"]]},
                {"x": [batch], "y": [r["flop_util_pct"]]}, {"x": [batch], "y": [r["bytes_gb"]]},
                {"x": [batch], "y": [r["tok_s_per_seq"]]}]

    def memory(batch: int) -> list[dict]:
        m = _memory_state(batch, limits, mem_hi)
        return [{"x": m[k][0], "y": m[k][1]} for k in ("weights", "kv", "free", "over")] + [
            {"x": m["text_x"], "y": [0.5, 0.5, 0.5, 1.2], "text": m["text"], "textposition": m["text_pos"]}]

    first_animated = len(data)
    cur0 = cursor(start)
    hovers = ["batch %{x}: step %{y:.2f} ms", "batch %{x}: %{y:,.0f} tok/s", "batch %{x}: %{y:.2f}%",
              "batch %{x}: %{y:.2f} GB per step", "batch %{x}: %{y:,.1f} tok/s per sequence"]
    # every panel animates a marker; an overlaying axis (per_seq) left without one loses its line on redraw
    for panel, xy, hv in zip(("step", "throughput", "util", "bytes", "per_seq"), cur0, hovers):
        edge = PER_SEQ if panel == "per_seq" else STEP
        data.append({"type": "scatter", "mode": "markers", "name": f"cursor {panel}", "showlegend": False, **xy,
                     "marker": {"size": 12 if panel != "per_seq" else 10, "color": "white",
                                "line": {"width": 3, "color": edge}},
                     "hovertemplate": hv + "<extra></extra>", **_ax(panel)})
    mem0 = memory(start)
    fills = [("mem weights", WEIGHTS), ("mem KV", KV), ("mem free", FREE_MEM), ("mem over", "rgba(192,57,43,0.55)")]
    for (name, colour), xy in zip(fills, mem0[:4]):
        data.append({"type": "scatter", "mode": "lines", "name": name, "showlegend": False, "fill": "toself",
                     "fillcolor": colour, "line": {"width": 1, "color": "white"}, "hoverinfo": "skip", **xy,
                     **_ax("memory")})
    data.append({"type": "scatter", "mode": "text", "name": "mem labels", "showlegend": False, **mem0[4],
                 "cliponaxis": False,
                 "textfont": {"size": 13, "color": "#111827"}, "hoverinfo": "skip", **_ax("memory")})
    animated = list(range(first_animated, len(data)))
    frames = [{"name": str(int(n)), "data": cursor(int(n)) + memory(int(n)), "traces": animated}
              for n in frame_batches]

    # --- layout ---------------------------------------------------------------------------------
    col, gap = [0.0, 0.46], [0.54, 1.0]
    rows = {"top": [0.70, 1.0], "mid": [0.33, 0.60], "mem": [0.0, 0.13]}
    xcommon = {"range": [x_lo, x_hi], "showgrid": True, "gridcolor": "#F3F4F6", "zeroline": False}
    layout: dict = {
        "height": 900, "template": TEMPLATE, "font": FONT, "hoverlabel": {"font": {"size": 12}},
        "margin": {"l": 80, "r": 70, "t": 109, "b": CONTROLS_MARGIN_B}, "hovermode": "closest",
        "legend": {"orientation": "h", "y": 1.05, "yanchor": "bottom", "x": 0, "bgcolor": "rgba(0,0,0,0)"},
        "xaxis": {**xcommon, "domain": col, "anchor": "y"},
        "yaxis": {"domain": rows["top"], "anchor": "x", "rangemode": "tozero", "title": {"text": "ms"}},
        "xaxis2": {**xcommon, "domain": gap, "anchor": "y2"},
        "yaxis2": {"domain": rows["top"], "anchor": "x2", "rangemode": "tozero", "title": {"text": "tokens / s"}},
        "yaxis6": {"overlaying": "y2", "side": "right", "anchor": "x2", "rangemode": "tozero", "showgrid": False,
                   "title": {"text": "per sequence", "font": {"color": PER_SEQ}}, "tickfont": {"color": PER_SEQ},
                   "tickformat": ",.0f", "tickmode": "auto"},   # round ticks, not the left axis' grid ("sync": 62, 125)
        "xaxis3": {**xcommon, "domain": col, "anchor": "y3", "title": {"text": "batch size (sequences decoding together)"}},
        "yaxis3": {"domain": rows["mid"], "anchor": "x3", "rangemode": "tozero", "title": {"text": "% of peak"}},
        "xaxis4": {**xcommon, "domain": gap, "anchor": "y4", "title": {"text": "batch size (sequences decoding together)"}},
        "yaxis4": {"domain": rows["mid"], "anchor": "x4", "rangemode": "tozero", "title": {"text": "GB"}},
        "xaxis5": {"domain": [0, 1], "anchor": "y5", "range": [0, mem_hi], "showgrid": False, "zeroline": False,
                   "title": {"text": "GB of GPU memory"}, "ticksuffix": ""},
        "yaxis5": {"domain": rows["mem"], "anchor": "x5", "range": [0, 1.75], "visible": False, "fixedrange": True},
    }
    ann = [{"text": f"<b>{TITLES[p]}</b>", "xref": "paper", "yref": "paper", "x": c[0], "y": r[1],
            "xanchor": "left", "yanchor": "bottom", "showarrow": False, "font": {"size": 14}}
           for p, c, r in (("step", col, rows["top"]), ("throughput", gap, rows["top"]), ("util", col, rows["mid"]),
                           ("bytes", gap, rows["mid"]))]
    ann.append({"text": f"<b>{limits['hardware']} memory ({limits['memory_gb']:.0f} GB) at the chosen batch size</b>",
                "xref": "paper", "yref": "paper", "x": 0, "y": rows["mem"][1] + 0.035, "xanchor": "left",
                "yanchor": "bottom", "showarrow": False, "font": {"size": 14}})
    shapes = [{"type": "line", "xref": "x5", "yref": "y5", "x0": limits["memory_gb"], "x1": limits["memory_gb"],
               "y0": -0.1, "y1": 1.1, "line": {"color": "#111827", "width": 2}}]
    if fit + 0.5 < x_hi:  # the batches whose KV caches do not fit next to the weights
        for x, y in list(PANELS.values())[:4]:
            shapes.append({"type": "rect", "xref": x, "yref": f"{y} domain", "x0": max(fit + 0.5, x_lo), "x1": x_hi,
                           "y0": 0, "y1": 1, "fillcolor": "rgba(192,57,43,0.07)", "line": {"width": 0},
                           "layer": "below"})
        ann.append({"text": (f"more than {fit} sequences<br>do not fit in memory" if fit else
                             "not even one sequence<br>fits in memory"), "xref": "x3", "yref": "y3 domain",
                    "x": max(fit + 0.5, x_lo), "y": 0.04, "xanchor": "left", "yanchor": "bottom", "showarrow": False,
                    "font": {"size": 11, "color": OVER}, "align": "left", "xshift": 4})
    kv_x = limits["weights_gb"] / limits["kv_per_seq_gb"] if limits["kv_per_seq_gb"] else None
    if kv_x is not None and x_lo < kv_x < x_hi:
        shapes.append({"type": "line", "xref": "x4", "yref": "y4 domain", "x0": kv_x, "x1": kv_x, "y0": 0, "y1": 1,
                       "line": {"color": KV, "dash": "dash", "width": 1.5}})
        ann.append({"text": f"KV > weights from batch {limits['kv_over_weights_batch']}", "xref": "x4",
                    "yref": "y4 domain", "x": kv_x, "y": 0.98, "xanchor": "left", "yanchor": "top",
                    "showarrow": False, "font": {"size": 11, "color": "#9A5B13"}, "xshift": 4})
    cb = limits.get("compute_bound_batch")
    if cb is not None and x_lo < cb < x_hi:
        shapes.append({"type": "line", "xref": "x", "yref": "y domain", "x0": cb - 0.5, "x1": cb - 0.5, "y0": 0,
                       "y1": 1, "line": {"color": COMPUTE, "dash": "dot", "width": 1.5}})
        ann.append({"text": f"compute bound from batch {cb}", "xref": "x", "yref": "y domain", "x": cb - 0.5,
                    "y": 0.02, "xanchor": "left", "yanchor": "bottom", "showarrow": False,
                    "font": {"size": 11, "color": COMPUTE}, "xshift": 4})
    controls = play_controls(frame_batches, frame_ms)
    slider = controls["sliders"][0]
    slider["currentvalue"]["prefix"] = "batch "
    slider["active"] = int(np.flatnonzero(frame_batches == start)[0])
    layout.update(annotations=ann, shapes=shapes, **controls,
                  meta={"fit_sequences": fit, "kv_over_weights_batch": limits["kv_over_weights_batch"],
                        "compute_bound_batch": cb, "frames": len(frames), "batches": [int(b[0]), int(b[-1])],
                        "start_batch": start})
    return assemble(data, layout, frames)
