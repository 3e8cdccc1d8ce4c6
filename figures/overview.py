"""The overview of a long run (sim.overview): small multiples on one shared x axis, where the
user drags across any row to pick a window, the chosen one shaded.

Rows, top to bottom: running and waiting requests; KV blocks in use (%); tokens per step (or
per second) by phase, stacked; preemptions; TTFT of the requests arriving in each bucket
(median and p90, a dot per bucket that saw arrivals). For a fleet (sim.overview.fleet_overview)
each row holds a line per replica (tokens as their sum over phases), in the replicas' colours.

The figure opens in box-select mode along x (dragmode "select", selectdirection "h"): a page
passes it to st.plotly_chart(on_select=..., selection_mode="box") and reads the dragged x range.
The tokens row is bars, which Plotly lets a box select (it selects no line-only trace).
"""
from __future__ import annotations

import numpy as np
import pandas as pd
import plotly.graph_objects as go

from .common import FONT, KIND_COLOURS, PREEMPT, themed
from .fleet import replica_colour

ROWS = ("requests", "kv", "tokens", "preemptions", "ttft")
ROW_TITLES = {"requests": "requests", "kv": "KV in use %", "tokens": "tokens / {rate}", "preemptions": "preempted",
              "ttft": "TTFT ({unit})"}
WINDOW_FILL = "rgba(37, 99, 235, 0.12)"
WAITING = "#9333EA"
RUNNING = "#2563EB"
HEIGHT = 560
GAP = 0.035


LEGEND_WIDTH = 840   # px a legend row has on the pages' main column (1400 px window, sidebar open)


def _legend_rows(names: list[str]) -> int:
    """Rows the horizontal legend takes (its items packed as Plotly does, ~7.2 px a character
    plus the symbol), so the top margin declared holds it and Plotly draws the chart once."""
    rows, used = 1, 0.0
    for name in names:
        w = 40 + 7.2 * len(name)
        if used and used + w > LEGEND_WIDTH:
            rows, used = rows + 1, 0.0
        used += w
    return rows


def _domains(n: int) -> list[list[float]]:
    h = (1 - GAP * (n - 1)) / n
    return [[max(0.0, 1 - (i + 1) * h - i * GAP), 1 - i * (h + GAP)] for i in range(n)]


def _axis(i: int) -> tuple[str, str]:
    return ("x", "y") if i == 0 else (f"x{i + 1}", f"y{i + 1}")


def _line(x, y, name, colour, row, dash=None, group=None, show=True, fmt=".4~g", width=1.5) -> dict:
    xa, ya = _axis(row)
    return {"type": "scatter", "x": x, "y": y, "name": name, "mode": "lines", "xaxis": xa, "yaxis": ya,
            "line": {"color": colour, "width": width, **({"dash": dash} if dash else {})},
            "legendgroup": group or name, "showlegend": show, "connectgaps": False,
            "hovertemplate": f"%{{x:,.0f}}: %{{y:{fmt}}} {name}<extra></extra>"}


def _dots(x, y, name, colour, row, group=None, show=True, size=5, opacity=1.0) -> dict:
    """A bucket's TTFT as a dot: most buckets of a fine overview see no arrival, and a line
    between the few that do would draw values no request had."""
    xa, ya = _axis(row)
    return {"type": "scatter", "x": x, "y": y, "name": name, "mode": "markers", "xaxis": xa, "yaxis": ya,
            "marker": {"color": colour, "size": size, "opacity": opacity}, "legendgroup": group or name,
            "showlegend": show, "hovertemplate": f"%{{x:,.0f}}: %{{y:.4~g}} {name}<extra></extra>"}


def _bar(x, y, width, name, colour, row, group=None, show=True) -> dict:
    xa, ya = _axis(row)
    return {"type": "bar", "x": x, "y": y, "width": width, "name": name, "xaxis": xa, "yaxis": ya,
            "marker": {"color": colour, "line": {"width": 0}}, "legendgroup": group or name, "showlegend": show,
            "hovertemplate": f"%{{x:,.0f}}: %{{y:.4~g}} {name}<extra></extra>"}


def _np(s: pd.Series) -> np.ndarray:
    return s.to_numpy(dtype=float, na_value=np.nan)


def overview_figure(ov: pd.DataFrame, window: tuple[float, float] | None = None, names: list[str] | None = None,
                    height: int = HEIGHT) -> go.Figure:
    """The overview chart of `ov` (sim.overview.overview, or fleet_overview with a "replica"
    column); `window` = (x0, x1) on its clock is shaded. layout.meta: clock, unit, width,
    buckets, window, replicas."""
    a = ov.attrs
    unit, width, rate = a.get("unit", "steps"), float(a.get("width", 1.0)), a.get("rate_unit", "step")
    fleet = "replica" in ov.columns
    data: list[dict] = []
    groups = [(int(r), g) for r, g in ov.groupby("replica", sort=True)] if fleet else [(None, ov)]
    for r, g in groups:
        x = _np(g["start"]) + width / 2
        label = (names[r] if names and r < len(names) else f"replica {r}") if fleet else ""
        if fleet:
            c = replica_colour(r)
            data.append(_line(x, _np(g["running"]), f"{label}", c, 0, group=label))
            data.append(_line(x, _np(g["waiting"]), f"{label} waiting", c, 0, dash="dot", group=label, show=False))
            data.append(_line(x, 100 * _np(g["kv_use"]), f"{label} KV %", c, 1, group=label, show=False))
            tok = sum(np.nan_to_num(_np(g[f"{p}_per"])) for p in ("prefill", "decode", "recompute"))
            tok = np.where(g["steps"].to_numpy() > 0, tok, np.nan)
            data.append(_bar(x, tok, width, f"{label} tokens / {rate}", c, 2, group=label, show=False))
            data.append(_bar(x, _np(g["preemptions"]), width, f"{label} preempted", c, 3, group=label, show=False))
            data.append(_dots(x, _np(g["ttft_p50"]), f"{label} TTFT p50", c, 4, group=label, show=False, size=4))
        else:
            data.append(_line(x, _np(g["running"]), "running", RUNNING, 0))
            data.append(_line(x, _np(g["waiting"]), "waiting", WAITING, 0))
            data.append(_line(x, 100 * _np(g["kv_use"]), "KV in use %", "#0F766E", 1, fmt=".1f"))
            for p in ("prefill", "decode", "recompute"):
                v = _np(g[f"{p}_per"])
                if p == "recompute" and not np.nansum(v):
                    continue
                data.append(_bar(x, v, width, f"{p} tokens / {rate}", KIND_COLOURS[p], 2))
            data.append(_bar(x, _np(g["preemptions"]), width, "preemptions", PREEMPT, 3))
            data.append(_dots(x, _np(g["ttft_p90"]), "TTFT p90 of arrivals", "#FDBA74", 4))
            data.append(_dots(x, _np(g["ttft_p50"]), "TTFT p50 of arrivals", "#B45309", 4, size=4))
    n = len(ROWS)
    lo = float(ov["start"].min()) if len(ov) else 0.0
    hi = float(ov["end"].max()) if len(ov) else 1.0
    xlabel = "step" if unit == "steps" else f"time ({unit})"
    layout: dict = {"height": height, "font": FONT, "barmode": "stack" if not fleet else "group", "bargap": 0,
                    "dragmode": "select", "selectdirection": "h", "hovermode": "closest",
                    "margin": {"l": 70, "r": 20, "t": 22 + 29 * _legend_rows(
                        [d["name"] for d in data if d.get("showlegend", True)]), "b": 55},
                    "legend": {"orientation": "h", "y": 1.02, "yanchor": "bottom", "x": 0},
                    "meta": {"clock": a.get("clock", "steps"), "unit": unit, "width": width,
                             "buckets": int(ov["start"].nunique()) if len(ov) else 0,
                             "window": list(window) if window else None,
                             "replicas": int(a.get("replicas", 0)) if fleet else 0}}
    for i, (row, dom) in enumerate(zip(ROWS, _domains(n))):
        xa, ya = _axis(i)
        xkey, ykey = xa.replace("x", "xaxis"), ya.replace("y", "yaxis")
        layout[xkey] = {"range": [lo, hi], "showgrid": False, "zeroline": False, "anchor": ya,
                        "showticklabels": i == n - 1, **({"matches": "x"} if i else {}),
                        **({"title": {"text": xlabel}} if i == n - 1 else {})}
        title = ROW_TITLES[row].format(rate=rate, unit=unit)
        layout[ykey] = {"domain": dom, "anchor": xa, "rangemode": "tozero",
                        "title": {"text": title, "font": {"size": 11}},
                        "fixedrange": True}
    if window is not None:
        x0, x1 = sorted(window)
        layout["shapes"] = [{"type": "rect", "xref": "x", "yref": "paper", "x0": x0, "x1": x1, "y0": 0, "y1": 1,
                             "fillcolor": WINDOW_FILL, "line": {"color": "#2563EB", "width": 1}, "layer": "below",
                             "name": "window"}]
    fig = go.Figure()
    fig.add_traces(data)
    fig.update_layout(**layout)
    return themed(fig)


def selected_range(selection) -> tuple[float, float] | None:
    """The x range of a box dragged on the chart, from st.plotly_chart's selection state
    ({"selection": {"box": [{"x": [x0, x1], ...}], "points": [...]}}); None without one."""
    if not selection:
        return None
    if isinstance(selection, dict):
        sel = selection.get("selection", selection)
    else:
        sel = getattr(selection, "selection", None)
    if sel is None:
        return None
    boxes = sel.get("box") or [] if isinstance(sel, dict) else getattr(sel, "box", None) or []
    xs = [float(v) for b in boxes for v in (b.get("x") or []) if isinstance(v, (int, float)) and np.isfinite(v)]
    if len(xs) >= 2:
        return min(xs), max(xs)
    points = sel.get("points") or [] if isinstance(sel, dict) else getattr(sel, "points", None) or []
    px = [float(p["x"]) for p in points if isinstance(p, dict) and isinstance(p.get("x"), (int, float))]
    if px:
        return min(px), max(px)
    return None
