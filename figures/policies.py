"""Figures for the Policies page: one server, several waiting-queue policies, and starvation.

- service_figure: one row per policy, the jobs as bars on the time axis (a faint bar while a
  job waits, full colour while it runs, its name on it), mean wait in the row label; frames
  move a curtain over time (layout shapes only).
- waiting_age_figure: for each run, requests x time coloured by how long the request has gone
  unserved (sim.analysis.waiting_ages), dark cells where it runs; a growing ramp is starvation.
  One subplot per run sharing one time axis, one colour scale and one set of frames.
"""
from __future__ import annotations

import math

import numpy as np
import pandas as pd
import plotly.graph_objects as go

from sim.analysis import waiting_ages
from sim.trace import Trace

from .animate import assemble, axes, axis_key, subplot_layout
from .common import CONTROLS_MARGIN_B, FONT, MAX_HOVER_CELLS, TEMPLATE, pick_frames, play_controls, request_colour
from .playback import _curtain

RUNNING = "#1F2937"  # a cell where the request is being served
AGE_SCALE = [[0.0, "#FFF7BC"], [0.25, "#FEC44F"], [0.5, "#FB8C3C"], [0.75, "#E3452B"], [1.0, "#7F0000"]]
MAX_AGE_CELLS = 400_000  # past this, the age heatmap shows every k-th time unit


def _veil(t: float, x_end: float) -> list[dict]:
    """Curtain shapes hiding what happens after time t (the playback curtain on a time axis)."""
    return _curtain(t - 0.5, x_end)  # _curtain puts its edge at step + 0.5


# ---------------------------------------------------------------------------------------------
# Order of service
# ---------------------------------------------------------------------------------------------

def service_figure(runs: dict[str, pd.DataFrame], mean_waits: dict[str, float], jobs: list[str],
                   max_frames: int = 200, frame_ms: int | None = None) -> go.Figure:
    """Runs {row label: sim.lessons.starvation.service_table} on one server, top to bottom.

    Row i (y = i) holds the server's lane: one bar per job while it runs, its name on it.
    Under the lane, a triangle marks each job's arrival, so the gap to its bar is its wait.
    One bar trace and one arrival trace per job (legend = jobs; colour by the job's place in
    `jobs`). layout.meta has the order of service and mean wait per row.
    """
    labels = list(runs)
    ypos = {lab: i for i, lab in enumerate(labels)}
    t_end = max([float(t["end"].max()) for t in runs.values() if len(t)] + [1.0])
    colour = {j: request_colour(i) for i, j in enumerate(jobs)}
    show_names = len(jobs) <= 30
    hover = ("<b>%{customdata[0]}</b> · tenant %{customdata[1]} · %{customdata[2]} tokens · priority "
             "%{customdata[3]}<br>arrived at %{customdata[4]}, ran from %{customdata[5]} to %{customdata[7]}, "
             "waited %{customdata[6]}<extra>%{customdata[8]}</extra>")
    data: list[dict] = []
    for j in jobs:
        rows = [(lab, t[t["job"] == j].iloc[0]) for lab, t in runs.items() if (t["job"] == j).any()]
        if not rows:
            continue
        y = np.array([ypos[lab] for lab, _ in rows], dtype=float)
        start = np.array([x["start"] for _, x in rows], dtype=float)
        end = np.array([x["end"] for _, x in rows], dtype=float)
        arrival = np.array([x["arrival"] for _, x in rows], dtype=float)
        info = np.array([[j, x["tenant"], int(x["length"]), int(x["priority"]), int(x["arrival"]), int(x["start"]),
                          int(x["wait"]), int(x["end"]), lab] for lab, x in rows], dtype=object)
        bar = {"type": "bar", "orientation": "h", "y": y, "x": end - start, "base": start, "width": 0.5, "name": j,
               "legendgroup": j, "marker": {"color": colour[j], "line": {"width": 1, "color": "white"}},
               "customdata": info, "hovertemplate": hover}
        if show_names:
            bar.update(text=[j] * len(rows), textposition="inside", insidetextanchor="middle",
                       textfont={"color": "white", "size": 13})
        data.append(bar)
        data.append({"type": "scatter", "mode": "markers", "x": arrival, "y": y + 0.36, "name": f"{j} arrives",
                     "legendgroup": j, "showlegend": False, "customdata": info, "hovertemplate": hover,
                     "marker": {"symbol": "triangle-up", "size": 9, "color": colour[j],
                                "line": {"width": 0.5, "color": "#374151"}}})
    times = np.arange(0, int(math.ceil(t_end)) + 1)
    fsteps = pick_frames(times, max_frames)
    x_end = t_end + 0.5
    frames = [{"name": str(int(s)), "layout": {"shapes": _veil(float(s), x_end)}} for s in fsteps]
    layout = {
        "height": int(170 + 78 * len(labels)), "template": TEMPLATE, "font": FONT, "barmode": "overlay",
        "margin": {"l": 150, "r": 20, "t": 51, "b": CONTROLS_MARGIN_B}, "hoverlabel": {"font": {"size": 12}},
        "legend": {"orientation": "h", "y": 1.02, "yanchor": "bottom", "x": 0, "title": {"text": "job "}},
        "xaxis": {"title": {"text": "time (one unit = one step of one job); ▲ = arrival"}, "range": [-0.5, x_end],
                  "showgrid": True, "gridcolor": "#EEF0F3", "zeroline": False},
        "yaxis": {"tickmode": "array", "tickvals": list(range(len(labels))),
                  "ticktext": [f"<b>{lab}</b><br>mean wait {mean_waits[lab]:.2f}" for lab in labels],
                  "range": [len(labels) - 0.45, -0.45], "showgrid": False, "zeroline": False},
        "shapes": _veil(float(fsteps[-1]), x_end), **play_controls(fsteps, frame_ms),
        "meta": {"order": {lab: runs[lab]["job"].tolist() for lab in labels}, "mean_wait": dict(mean_waits)},
    }
    return assemble(data, layout, frames)


# ---------------------------------------------------------------------------------------------
# Waiting ages
# ---------------------------------------------------------------------------------------------

def age_grid(trace: Trace, max_cells: int = MAX_AGE_CELLS):
    """(time of each column, ages [request, column] with NaN where not waiting, served mask,
    stride): sim.analysis.waiting_ages on the lesson's clock (column t = step t + 1)."""
    ages = waiting_ages(trace)
    steps = ages.columns.to_numpy(dtype=np.int64)
    n_req = max(len(ages), 1)
    stride = max(1, math.ceil(len(steps) * n_req / max_cells)) if len(steps) else 1
    cols = np.arange(0, len(steps), stride)
    a = ages.to_numpy(dtype=float)[:, cols]
    served = np.zeros(ages.shape, dtype=bool)
    b = trace.batch
    if len(b) and len(steps):
        idx = {r: i for i, r in enumerate(ages.index)}
        ri = b["request"].map(idx).to_numpy()
        ci = b["step"].to_numpy(dtype=np.int64) - int(steps[0])
        ok = (ci >= 0) & (ci < len(steps))
        served[ri[ok].astype(np.int64), ci[ok]] = True
    return steps[cols] - 1, a, served[:, cols], stride


def waiting_age_figure(runs: dict[str, Trace], max_frames: int = 200, frame_ms: int | None = None,
                       mark: str | None = None) -> go.Figure:
    """One subplot per run {title: trace} (same requests): waiting age per request and time.

    Per subplot: heatmap of ages (shared colour axis; z = ages as float32, NaN blank), heatmap
    of served cells (dark), and, when `mark` names a request, a marker and a label where it
    first runs. Frames move one curtain across all subplots. layout.meta["starts"][title] is
    when `mark` started, on the lesson's clock.
    """
    titles = list(runs)
    n = len(titles)
    zmax, t_end, starts, grids = 1.0, 1.0, {}, {}
    for title, tr in runs.items():
        t, a, served, stride = age_grid(tr)
        grids[title] = (t, a, served, stride)
        if np.isfinite(a).any():
            zmax = max(zmax, float(np.nanmax(a)))
        if len(t):
            t_end = max(t_end, float(t[-1]) + stride)
    layout = subplot_layout(n, 1, shared_xaxes=True, vertical_spacing=0.1, subplot_titles=titles)
    annotations = list(layout.get("annotations", []))
    data: list[dict] = []
    x_end = t_end + 0.5
    for i, (title, tr) in enumerate(runs.items(), start=1):
        t, a, served, stride = grids[title]
        reqs = tr.requests["request"].astype(str).tolist()
        gaps = {"xgap": 1 if len(t) <= 150 else 0, "ygap": 1 if len(reqs) <= 60 else 0}
        tenants = tr.requests["tenant"].astype(str).unique()
        who = f" · tenant {tenants[0]}" if len(tenants) == 1 else ""
        heat = {"type": "heatmap", "z": a.astype(np.float32), "x": t, "y": reqs, "coloraxis": "coloraxis",
                "name": "waiting", **gaps, **axes(i)}
        if a.size <= MAX_HOVER_CELLS:  # tokens of the row's job, as small ints (base64 in the JSON)
            tokens = tr.requests["max_tokens"].to_numpy(dtype=np.int32)
            heat["customdata"] = np.repeat(tokens[:, None], len(t), axis=1)
            heat["hovertemplate"] = (f"<b>%{{y}}</b>{who} · %{{customdata}} tokens<br>time %{{x}}: waiting, "
                                     "unserved for %{z:.0f}<extra></extra>")
        else:
            heat["hovertemplate"] = f"<b>%{{y}}</b>{who}<br>time %{{x}}: waiting, unserved for %{{z:.0f}}<extra></extra>"
        data.append(heat)
        data.append({"type": "heatmap", "z": np.where(served, 1, np.nan).astype(np.float32), "x": t, "y": reqs,
                     "colorscale": [[0, RUNNING], [1, RUNNING]], "showscale": False, "name": "running", **gaps,
                     "hovertemplate": "<b>%{y}</b><br>time %{x}: running<extra></extra>", **axes(i)})
        if mark is not None:
            first = tr.requests.set_index("request")["first_scheduled_step"]
            if mark in first.index and not pd.isna(first[mark]):
                s = int(first[mark]) - 1
                starts[title] = s
                data.append({"type": "scatter", "mode": "markers", "x": [s], "y": [mark], "showlegend": False,
                             "name": f"{mark} starts", "hovertemplate": f"{mark} starts at %{{x}}<extra></extra>",
                             "marker": {"symbol": "triangle-right", "size": 13, "color": "#2563EB",
                                        "line": {"width": 1, "color": "white"}}, **axes(i)})
                ax = axes(i)
                annotations.append({"x": s, "y": mark, "xref": ax["xaxis"], "yref": ax["yaxis"],
                                    "text": f"{mark} starts at {s}", "showarrow": True, "arrowhead": 2,
                                    "arrowcolor": "#2563EB", "ax": 40, "ay": 28, "xanchor": "left",
                                    "bgcolor": "rgba(255,255,255,0.92)", "bordercolor": "#2563EB",
                                    "font": {"size": 13, "color": "#1E3A8A"}})
        layout[axis_key(i, axis="y")].update(autorange="reversed", showgrid=False,
                                             tickfont={"size": 10 if len(reqs) > 30 else 12},
                                             title={"text": "request"})
        layout[axis_key(i)].update(range=[-0.5, x_end], showgrid=False, zeroline=False)
    layout[axis_key(n)]["title"] = {"text": "time (lesson units: one step each)"}
    times = np.arange(0, int(math.ceil(t_end)) + 1)
    fsteps = pick_frames(times, max_frames)
    frames = [{"name": str(int(s)), "layout": {"shapes": _veil(float(s), x_end)}} for s in fsteps]
    n_req = max(len(tr.requests) for tr in runs.values())
    per_plot = int(min(520, max(200, 40 + 9 * n_req)))
    layout.update(
        height=per_plot * n + 170, template=TEMPLATE, font=FONT, hoverlabel={"font": {"size": 12}},
        margin={"l": 105, "r": 125, "t": 40, "b": CONTROLS_MARGIN_B}, annotations=annotations,
        coloraxis={"colorscale": AGE_SCALE, "cmin": 0, "cmax": zmax,
                   "colorbar": {"title": {"text": "units<br>unserved", "side": "top"}, "thickness": 14, "len": 0.6}},
        shapes=_veil(float(fsteps[-1]), x_end), **play_controls(fsteps, frame_ms),
        meta={"starts": starts, "max_age": zmax},
    )
    return assemble(data, layout, frames)


# ---------------------------------------------------------------------------------------------
# Shortest-first on a predicted length
# ---------------------------------------------------------------------------------------------

def predictor_gain_figure(table: pd.DataFrame, summary: pd.DataFrame, mark: float | None = None) -> go.Figure:
    """Share of oracle SJF's gain over FCFS kept (y, %) against the predictor's error sigma (x):
    a dot per predictor seed (sim.lessons.predictor.predictor_sweep), the mean as a line, and
    `mark` (the page's chosen sigma) as a dashed line. meta: {sigma: mean gain kept}."""
    runs = table[table["policy"] == "sjf_predicted"]
    fig = go.Figure()
    fig.add_trace(go.Scatter(x=runs["sigma"], y=100 * runs["gain_kept"], mode="markers", name="one predictor seed",
                             marker={"color": "#A0CBE8", "size": 7},
                             hovertemplate="sigma %{x}: %{y:.1f}% of the gain kept<extra></extra>"))
    fig.add_trace(go.Scatter(x=summary["sigma"], y=100 * summary["gain_kept"], mode="lines+markers",
                             name="mean over seeds", line={"color": "#4E79A7", "width": 3},
                             hovertemplate="sigma %{x}: %{y:.1f}% kept on average<extra></extra>"))
    if mark is not None:
        fig.add_vline(x=mark, line={"dash": "dash", "color": "#6B7280"}, annotation_text=f"sigma {mark:g}")
    fig.update_layout(template=TEMPLATE, font=FONT, height=340, margin={"l": 66, "r": 20, "t": 48, "b": 58},
                      xaxis={"title": {"text": "predictor error sigma (lognormal, multiplicative)"}},
                      yaxis={"title": {"text": "SJF's gain over FCFS kept (%)"}, "range": [-5, 105]},
                      legend={"orientation": "h", "y": 1.12},
                      meta={"gain_kept": {f"{s:g}": float(g) for s, g in zip(summary["sigma"], summary["gain_kept"])}})
    return fig
