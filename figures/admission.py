"""Figures for the Admission page: Little's law live on the lesson's slotted server.

- littles_figure: for one or more runs on the same arrivals (sim.lessons.admission.curves), three
  rows sharing the tick axis: requests in the system (rejections marked), the running
  estimates L and λW, and W, under a line of live values. The curves are drawn once; frames
  move a veil and a cursor and rewrite the live L, λ, W, λW and rejected counts (a text trace:
  small, and animated without a redraw).
- lesson_table: the lesson's Example 7 rows (sim.lessons.lesson.littles_law) as a table for display.
"""
from __future__ import annotations

import math

import numpy as np
import pandas as pd
import plotly.graph_objects as go

from .animate import assemble, axes, axis_key, subplot_layout
from .common import FONT, REJECT, TEMPLATE, pick_frames, play_controls

RUN_COLOURS = ["#C0392B", "#2563EB", "#059669", "#9333EA"]
MAX_POINTS = 2000  # points per curve; longer runs are thinned (every k-th tick, the last kept)
MAX_MARKERS = 2000  # rejection markers; more are thinned evenly


def _thin(n: int, max_points: int) -> np.ndarray:
    if n <= max_points:
        return np.arange(n)
    idx = np.arange(0, n, math.ceil(n / max_points))
    return idx if idx[-1] == n - 1 else np.append(idx, n - 1)


def _fmt(v: float, digits: int) -> str:
    return "–" if v is None or (isinstance(v, float) and math.isnan(v)) else f"{v:,.{digits}f}"


LIVE_COLUMNS = ("in_system", "L", "lambda", "W", "lambda_W", "rejected", "arrived")


def live_text(runs: dict[str, pd.DataFrame] | dict[str, dict], step: int) -> str:
    """The live box: each run's L, λ, W, λW and rejected / arrived at `step`. `runs`: curves, or
    their columns as arrays already (_columns: a figure's frames read them hundreds of times)."""
    lines = [f"<b>tick {step:,}</b>"]
    for i, (label, c) in enumerate(_columns(runs).items()):
        k = min(int(np.searchsorted(c["step"], step, side="right")) - 1, len(c["step"]) - 1)
        if k < 0:
            continue
        r = {name: c[name][k] for name in LIVE_COLUMNS}
        col = RUN_COLOURS[i % len(RUN_COLOURS)]
        lines.append(f"<span style='color:{col}'><b>{label}</b></span>: in system {int(r['in_system']):,} · "
                     f"L {_fmt(float(r['L']), 2)} · λ {_fmt(float(r['lambda']), 4)} · W {_fmt(float(r['W']), 2)} · "
                     f"λW {_fmt(float(r['lambda_W']), 2)} · rejected {int(r['rejected']):,} of {int(r['arrived']):,}")
    return "<br>".join(lines)


def _columns(runs: dict[str, pd.DataFrame] | dict[str, dict]) -> dict[str, dict]:
    """{label: {column: ndarray}} of the live columns (runs given that way already pass through)."""
    return {label: c if isinstance(c, dict) else {name: c[name].to_numpy() for name in ("step", *LIVE_COLUMNS)}
            for label, c in runs.items()}


def _live(runs: dict[str, pd.DataFrame], step: int, x0: float = 0.0) -> dict:
    """The live values as a text trace on the top row (frames update its text: no redraw)."""
    return {"type": "scatter", "mode": "text", "x": [x0], "y": [0.5], "text": [live_text(runs, step)],
            "textposition": "middle right", "textfont": {"size": 13, "color": "#111827"}, "hoverinfo": "skip",
            "showlegend": False, "name": "live values", **axes(1)}


def _cursor(step: float, x_end: float, top: float) -> list[dict]:
    """A veil over the ticks not yet played and a cursor line, over the three chart rows (up to `top`)."""
    return [
        {"type": "rect", "xref": "x", "yref": "paper", "x0": step, "x1": x_end, "y0": 0, "y1": top,
         "fillcolor": "rgba(255,255,255,0.78)", "line": {"width": 0}, "layer": "above"},
        {"type": "line", "xref": "x", "yref": "paper", "x0": step, "x1": step, "y0": 0, "y1": top,
         "line": {"color": "#111827", "width": 2}, "layer": "above"},
    ]


def _line(x, y, name: str, colour: str, row: int, hover: str, group: str, dash: str | None = None,
          width: float = 2, legend: bool = False) -> dict:
    return {"type": "scatter", "mode": "lines", "x": x, "y": y, "name": name, "legendgroup": group,
            "showlegend": legend, "line": {"color": colour, "width": width, **({"dash": dash} if dash else {})},
            "hovertemplate": hover, **axes(row)}


def littles_figure(runs: dict[str, pd.DataFrame], rejections: dict[str, pd.DataFrame] | None = None,
                   limits: dict[str, int] | None = None, slots: int | None = None,
                   max_points: int = MAX_POINTS, max_frames: int = 200, frame_ms: int | None = None) -> go.Figure:
    """Runs {label: sim.lessons.admission.curves} on the same arrivals, animated over ticks.

    Row 1 (y): a text trace with the live values (trace 0). Row 2 (y2): requests in the system,
    the cap limit + slots dashed for limited runs, rejections as markers on the curve. Row 3
    (y3): L solid and λW dotted per run; they meet when the run is stable. Row 4 (y4): W, log
    scale. Frames are named by tick; each carries two shapes (veil and cursor) and the live
    text (trace 0's text, which animates without a redraw). layout.meta: frames, final
    figures per run.
    """
    rejections = rejections or {}
    limits = limits or {}
    data: list[dict] = [{}]  # trace 0: the live values, filled in below
    x_end = max([float(c["step"].max()) for c in runs.values() if len(c)] + [1.0])
    final = {}
    for i, (label, c) in enumerate(runs.items()):
        col = RUN_COLOURS[i % len(RUN_COLOURS)]
        idx = _thin(len(c), max_points)
        t = c["step"].to_numpy()[idx]
        g = f"run{i}"
        data.append(_line(t, c["in_system"].to_numpy()[idx], label, col, 2,
                          f"{label}<br>tick %{{x:,}}: %{{y:,}} in the system<extra></extra>", g, width=1.6,
                          legend=True))
        lim = limits.get(label)
        if lim and slots:
            data.append({**_line([0, x_end], [lim + slots] * 2, f"{label}: queue limit + slots ({lim + slots})", col,
                                 2, "", g, dash="dash", width=1), "hoverinfo": "skip"})
        rej = rejections.get(label)
        if rej is not None and len(rej):
            rr = rej.iloc[_thin(len(rej), MAX_MARKERS)]
            at = c.set_index("step")["in_system"].reindex(rr["step"].to_numpy()).to_numpy()
            data.append({"type": "scatter", "mode": "markers", "x": rr["step"].to_numpy(), "y": at,
                         "name": f"{label}: rejected (HTTP 503)", "legendgroup": g,
                         "marker": {"symbol": "x-thin", "size": 6, "color": REJECT, "opacity": 0.7,
                                    "line": {"width": 1.2, "color": REJECT}},
                         "customdata": np.stack([rr["request"].astype(str).to_numpy(),
                                                 rr["waiting"].astype(str).to_numpy(),
                                                 rr["tenant"].astype(str).to_numpy(),
                                                 rr["tokens"].astype(str).to_numpy()], axis=-1),
                         "hovertemplate": ("<b>%{customdata[0]}</b> · tenant %{customdata[2]} · %{customdata[3]} "
                                           "tokens<br>rejected at tick %{x:,} (HTTP 503): %{customdata[1]} "
                                           "already waiting<extra></extra>"), **axes(2)})
        data.append(_line(t, c["L"].to_numpy()[idx], f"{label}: L", col, 3,
                          f"{label}<br>tick %{{x:,}}: L = %{{y:.2f}}<extra></extra>", g))
        data.append(_line(t, c["lambda_W"].to_numpy()[idx], f"{label}: λW", col, 3,
                          f"{label}<br>tick %{{x:,}}: λW = %{{y:.2f}}<extra></extra>", g, dash="dot"))
        data.append(_line(t, c["W"].to_numpy()[idx], f"{label}: W", col, 4,
                          f"{label}<br>tick %{{x:,}}: W = %{{y:.2f}} ticks<extra></extra>", g))
        if len(c):
            last = c.iloc[-1]
            final[label] = {k: float(last[k]) for k in ("L", "lambda", "W", "lambda_W")} | {
                "rejected": int(last["rejected"]), "arrived": int(last["arrived"])}
    data.append({**_line([None], [None], "L (solid) · λW (dotted)", "#6B7280", 3, "", "key", dash="dot",
                         legend=True), "hoverinfo": "skip"})
    steps = np.unique(np.concatenate([c["step"].to_numpy() for c in runs.values()])) if runs else np.array([1])
    fsteps = pick_frames(steps, max_frames)
    cols = _columns(runs)
    data[0] = _live(cols, int(fsteps[-1]))
    layout = subplot_layout(4, 1, shared_xaxes=True, vertical_spacing=0.05, row_heights=[0.09, 0.38, 0.30, 0.23])
    top = layout["yaxis2"]["domain"][1]
    frames = [{"name": str(int(s)), "data": [{"type": "scatter", "text": [live_text(cols, int(s))]}], "traces": [0],
               "layout": {"shapes": _cursor(float(s), x_end, top)}} for s in fsteps]
    grid = {"showgrid": True, "gridcolor": "#EEF0F3", "zeroline": False}
    layout["xaxis"].update(range=[0, x_end], visible=False)
    layout["yaxis"].update(range=[0, 1], visible=False, fixedrange=True)
    for r, title, extra in ((2, "in the system", {"rangemode": "tozero"}), (3, "L and λW", {"rangemode": "tozero"}),
                            (4, "W (ticks)", {"type": "log"})):
        layout[axis_key(r)].update({"range": [0, x_end], **grid})
        layout[axis_key(r, axis="y")].update({"title": {"text": title}, **grid, **extra})
    layout[axis_key(4)]["title"] = {"text": "ticks elapsed (one scheduler step each)"}
    layout.update(
        height=860, template=TEMPLATE, font=FONT, hoverlabel={"font": {"size": 12}}, hovermode="closest",
        margin={"l": 91, "r": 29, "t": 30, "b": 165},
        legend={"orientation": "h", "yref": "container", "y": 0.005, "yanchor": "bottom", "x": 0.5,
                "xanchor": "center"},
        # the live box shows the tick: the slider goes bare (cheaper to draw, see play_controls)
        shapes=_cursor(float(fsteps[-1]), x_end, top), **play_controls(fsteps, frame_ms, labelled=False),
        meta={"frames": len(fsteps), "final": final},
    )
    return assemble(data, layout, frames)


def lesson_table(rows: list[dict]) -> pd.DataFrame:
    """sim.lessons.lesson.littles_law rows as the lesson prints them (limit None -> "none")."""
    df = pd.DataFrame(rows)
    df["limit"] = df["limit"].map(lambda v: "none" if v is None or (isinstance(v, float) and math.isnan(v))
                                  else str(int(v)))
    return df[["p", "limit", "L", "lambda", "W", "lambda_W", "rejected", "arrived"]]
