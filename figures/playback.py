"""Figures for the Playback page: pure functions from a Trace to Plotly figures (and tables).

- occupancy_figure: slot lanes x steps heatmap (colour = request), prefill/recompute/padding
  shaded over it, preemptions marked, rejected arrivals marked in a strip above the lanes, animated by a
  moving curtain (frames carry 2 shapes).
- step_tokens_figure: tokens per step by kind (stacked), the token budget, the waiting queue,
  preemption and rejection markers.
- kv_map_figure: the KV block map at the end of one step.
- inspector_tables: the batch and the events of one step.
"""
from __future__ import annotations

import math

import numpy as np
import pandas as pd
import plotly.graph_objects as go

from sim.trace import Trace

from .animate import assemble
from .common import (CACHED_FREE, CONTROLS_MARGIN_B, EMPTY, FONT, FREE, KIND_COLOURS, MAX_BARS, MAX_DISCRETE_REQUESTS,
                     MAX_GRID_COLUMNS, MAX_HOVER_CELLS, MAX_LABEL_CELLS, NULL_BLOCK, PREEMPT, REJECT, TEMPLATE,
                     colour_codes, discrete_colorscale, legend_swatch, pick_frames, play_controls, plotly_text,
                     request_colour, themed, tick_room)

KIND_CODE = {"prefill": 0, "decode": 1, "recompute": 2, "padding": 3}
# drawn over the request colour: prefill lighter, recompute darker, padding almost blank
KIND_SHADE = {0: "rgba(255,255,255,0.50)", 1: "rgba(0,0,0,0)", 2: "rgba(20,20,20,0.40)",
              3: "rgba(255,255,255,0.85)"}


def request_index(trace: Trace) -> dict[str, int]:
    """Request id -> its colour code (workload order): the same colour in every figure."""
    return {r: i for i, r in enumerate(trace.requests["request"].tolist())}


def _base_layout(fig: go.Figure, height: int, **kw) -> None:
    themed(fig).update_layout(height=height, font=FONT,
                      margin={"l": 60, "r": 20, "t": 30, "b": 50}, hoverlabel={"font_size": 12}, **kw)


# ---------------------------------------------------------------------------------------------
# Slot lanes
# ---------------------------------------------------------------------------------------------

def lane_grid(trace: Trace, max_columns: int = MAX_GRID_COLUMNS):
    """(steps shown, request-index grid [slot, column] with -1 = idle, kind grid, entries used).

    Runs longer than max_columns show every k-th step (the state at that step, not a blend).
    """
    steps_all = trace.steps["step"].to_numpy(dtype=np.int64)
    stride = max(1, math.ceil(len(steps_all) / max_columns)) if len(steps_all) else 1
    steps = steps_all[::stride]
    b = trace.batch
    slot = b["slot"].astype("Float64").to_numpy(dtype=float, na_value=np.nan)
    ok = ~np.isnan(slot) & (slot >= 0)
    b = b[ok]
    slot = slot[ok].astype(np.int64)
    col = np.searchsorted(steps, b["step"].to_numpy(dtype=np.int64))
    col_ok = (col < len(steps)) & (steps[np.minimum(col, max(len(steps) - 1, 0))] == b["step"].to_numpy()) \
        if len(steps) else np.zeros(len(b), dtype=bool)
    b, slot, col = b[col_ok], slot[col_ok], col[col_ok]
    n_slots = int(slot.max()) + 1 if len(slot) else 1
    ridx = request_index(trace)
    req = b["request"].map(ridx).to_numpy(dtype=np.int64)
    grid = np.full((n_slots, len(steps)), -1, dtype=np.int64)
    kinds = np.full((n_slots, len(steps)), KIND_CODE["decode"], dtype=np.int8)
    grid[slot, col] = req
    kinds[slot, col] = b["kind"].map(KIND_CODE).fillna(1).to_numpy(dtype=np.int8)
    used = b.assign(_slot=slot, _col=col)
    return steps, grid, kinds, used, stride


def _curtain(step: int, x_end: float) -> list[dict]:
    """The two shapes of one animation frame: a veil over the steps not yet played, and a cursor."""
    return [
        {"type": "rect", "xref": "x", "yref": "paper", "x0": step + 0.5, "x1": x_end, "y0": 0, "y1": 1,
         "fillcolor": "rgba(255,255,255,0.82)", "line": {"width": 0}, "layer": "above"},
        {"type": "line", "xref": "x", "yref": "paper", "x0": step + 0.5, "x1": step + 0.5, "y0": 0, "y1": 1,
         "line": {"color": "#111827", "width": 2}, "layer": "above"},
    ]


def _preemptions(trace: Trace) -> pd.DataFrame:
    """Preempt events with the slot the victim held just before (its last batch entry)."""
    ev = trace.events
    pre = ev[ev["kind"].to_numpy() == "preempt"][["step", "request", "detail"]]
    if pre.empty:
        return pre.assign(slot=pd.Series([], dtype=float))
    b = trace.batch[["step", "request", "slot"]]
    # only the victims' rows, ids as text: the tables' categorical ids have each their own categories
    b = b[b["request"].isin(pre["request"].unique())].astype({"request": object})
    pre = pre.astype({"request": object})
    b = b.sort_values("step", kind="stable")
    b = b.assign(slot=b["slot"].astype("Float64").astype(float))
    pre = pre.sort_values("step", kind="stable")
    m = pd.merge_asof(pre.assign(_s=pre["step"] - 1), b.rename(columns={"step": "_s"}), on="_s",
                      by="request", direction="backward")
    return m.drop(columns="_s")


def rejected_per_step(trace: Trace) -> pd.DataFrame:
    """Arrivals turned away (queue full, or by SLO admission), per step, from the trace's reject events: step, count, and
    who (the first few names). (sim.lessons.admission.rejections lists them one row per request.)"""
    ev = trace.events
    rej = ev[ev["kind"].to_numpy() == "reject"]
    if rej.empty:
        return pd.DataFrame({"step": pd.Series([], dtype=np.int64), "count": pd.Series([], dtype=np.int64),
                             "who": pd.Series([], dtype=object)})
    g = rej.groupby("step", sort=True)["request"]
    who = g.agg(lambda r: ", ".join(map(str, r.iloc[:4])) + (f" and {len(r) - 4} more" if len(r) > 4 else ""))
    return pd.DataFrame({"step": g.size().index.to_numpy(dtype=np.int64), "count": g.size().to_numpy(),
                         "who": who.to_numpy()})


def _rejection_marks(rej: pd.DataFrame, y, size: int, **axes) -> dict:
    return {"type": "scattergl" if len(rej) > 2000 else "scatter", "name": "rejected (queue full or SLO admission)",
            "x": rej["step"].to_numpy(), "y": y, "mode": "markers", "cliponaxis": False,
            "marker": {"symbol": "triangle-down", "size": size, "color": REJECT, "line": {"width": 1, "color": "white"}},
            "customdata": np.stack([rej["count"].to_numpy(), plotly_text(rej["who"].astype(str).to_numpy())], axis=-1),
            "hovertemplate": "step %{x}: %{customdata[0]} arrival(s) rejected, the queue was full"
                             "<br>%{customdata[1]}<extra></extra>", **axes}


def lane_traces(trace: Trace) -> tuple[list[dict], dict]:
    """The slot-lane traces as plain dicts (heatmap first, then kind shading, legend swatches and
    preemption markers, rejection markers above the lanes, on axes x/y) and facts about
    them: steps shown, slots, stride.

    Shared by occupancy_figure and any figure that puts lanes in a subplot (set each dict's
    "xaxis"/"yaxis").
    """
    steps, grid, kinds, used, stride = lane_grid(trace)
    n_req = len(trace.requests)
    n_slots, n_cols = grid.shape
    z, scale, zmin, zmax = colour_codes(grid, n_req, [EMPTY])
    cells = n_slots * n_cols
    lanes = np.arange(n_slots)
    gaps = {"xgap": 1 if n_cols <= 200 else 0, "ygap": 2 if n_slots <= 40 else 0}
    heat = {"type": "heatmap", "name": "slot lanes", "z": z, "x": steps, "y": lanes, "colorscale": scale,
            "zmin": zmin, "zmax": zmax, "showscale": False, **gaps}
    if cells <= MAX_HOVER_CELLS:
        hover = np.full(grid.shape, "idle", dtype=object)
        if len(used):
            tok = used["tokens"].to_numpy()
            cb = used["computed_before"].astype("Float64").to_numpy(dtype=float, na_value=np.nan)
            tenant = used["request"].map(trace.requests.set_index("request")["tenant"]).astype(str).to_numpy()
            txt = (plotly_text(used["request"].astype(str).to_numpy()) + " · tenant " + plotly_text(tenant) + " · "
                   + used["kind"].astype(str).to_numpy() + " " + tok.astype(str) + " tok"
                   + np.where(np.isnan(cb), "", " · computed before " + np.nan_to_num(cb).astype(int).astype(str)))
            hover[used["_slot"].to_numpy(), used["_col"].to_numpy()] = txt
        heat["customdata"] = hover
        heat["hovertemplate"] = "step %{x} · slot %{y}<br>%{customdata}<extra></extra>"
    else:
        heat["hovertemplate"] = "step %{x} · slot %{y}<br>request #%{z}<extra></extra>"
    if cells <= MAX_LABEL_CELLS and n_cols <= 16 and len(used):
        label = np.full(grid.shape, "", dtype=object)
        kind = used["kind"].astype(str).to_numpy()
        label[used["_slot"].to_numpy(), used["_col"].to_numpy()] = (
            plotly_text(used["request"].astype(str).to_numpy()) + "<br>" + np.where(kind == "padding", "pad", kind)
            + np.where(kind == "decode", "", " " + used["tokens"].astype(str).to_numpy()))
        labels = {"text": label, "texttemplate": "%{text}",
                  "textfont": {"size": 12 if n_cols <= 12 else 10, "color": "#111827"}}
    else:
        labels = {}
    data = [heat]

    # Kind shading over the request colour (one int8 grid; decode and idle cells transparent).
    shade = np.where((grid >= 0) & (kinds != KIND_CODE["decode"]), kinds, 1).astype(np.int8)
    if (shade != 1).any():
        data.append({"type": "heatmap", "name": "kind shading", "z": shade, "x": steps, "y": lanes,
                     "zmin": -0.5, "zmax": 3.5, "showscale": False, "hoverinfo": "skip",
                     "colorscale": discrete_colorscale([KIND_SHADE[k] for k in range(4)]), **gaps, **labels})
    else:
        heat.update(labels)  # cell labels go on the top heatmap so the shading does not veil them
    present = set(used["kind"].unique()) if len(used) else set()
    swatch = {"prefill": ("prefill (lighter)", "#A6BCD3"), "decode": ("decode (full colour)", "#4E79A7"),
              "recompute": ("recompute (darker)", "#23364B"), "padding": ("padding (faded)", "#E4EAF1")}
    for k in ("prefill", "decode", "recompute", "padding"):
        if k in present:
            data.append(legend_swatch(swatch[k][0], swatch[k][1]).to_plotly_json())

    pre = _preemptions(trace)
    pre = pre[pre["slot"].notna()] if len(pre) else pre
    if len(pre):
        data.append({"type": "scattergl" if len(pre) > 2000 else "scatter", "name": "preempted here",
                     "x": pre["step"].to_numpy(), "y": pre["slot"].to_numpy(), "mode": "markers",
                     "marker": {"symbol": "x", "size": 13 if n_slots <= 40 else 8, "color": PREEMPT,
                                "line": {"width": 1, "color": "white"}},
                     "customdata": np.stack([plotly_text(pre["request"].astype(str).to_numpy()),
                                             plotly_text(pre["detail"].astype(str).to_numpy())], axis=-1),
                     "hovertemplate": "step %{x}: %{customdata[0]} preempted<br>%{customdata[1]}<extra></extra>"})
    rej = rejected_per_step(trace)
    if len(rej):   # a rejected request never held a slot: its mark sits in a strip above slot 0
        data.append(_rejection_marks(rej, np.full(len(rej), -0.85), 11 if n_slots <= 40 else 8))

    return data, {"steps": steps, "slots": n_slots, "stride": stride}


def occupancy_figure(trace: Trace, max_frames: int = 200, frame_ms: int | None = None) -> go.Figure:
    """Slot lanes over steps: who runs where, what kind of work, and who got preempted.

    Trace 0 is the heatmap (z = request index, -1 = idle slot). Frames move a curtain and a
    cursor (two layout shapes each), never the grid. Built from plain dicts and assembled once
    without plotly's per-key validation (which deep-copies every array: 0.5 s on a 32x1000 run);
    tests validate the result.
    """
    data, info = lane_traces(trace)
    steps, n_slots, stride = info["steps"], info["slots"], info["stride"]
    n_req, n_cols = len(trace.requests), len(steps)
    x_end = float(steps[-1]) + 0.5 if len(steps) else 1.5
    x_start = float(steps[0]) - 0.5 if len(steps) else 0.5
    fsteps = pick_frames(steps, max_frames)
    n_frames = len(fsteps)
    frames = [{"name": str(int(s)), "layout": {"shapes": _curtain(int(s), x_end)}} for s in fsteps]
    height = int(min(720, max(260, 150 + 34 * n_slots))) + 90
    layout = {
        "height": height, "template": TEMPLATE, "font": FONT, "hoverlabel": {"font": {"size": 12}},
        "margin": {"l": 90, "r": 20, "t": 49, "b": CONTROLS_MARGIN_B},
        "legend": {"orientation": "h", "y": 1.02, "yanchor": "bottom", "x": 0, "bgcolor": "rgba(0,0,0,0)"},
        "xaxis": {"title": {"text": "step" + (f" (every {stride}th shown)" if stride > 1 else "")},
                  "range": [x_start, x_end], "showgrid": False, "zeroline": False,
                  **({"dtick": 1} if n_cols <= 30 else {})},
        "yaxis": {"title": {"text": "slot"}, "autorange": "reversed", "showgrid": False, "zeroline": False,
                  **({"tickmode": "array", "tickvals": list(range(n_slots))} if n_slots <= 40 else {})},
        "shapes": _curtain(int(fsteps[-1]), x_end) if n_frames else [],
        **play_controls(fsteps, frame_ms),
        "meta": {"stride": stride, "frames": n_frames,
                 "requests_coloured_by": "index" if n_req <= MAX_DISCRETE_REQUESTS else "palette"},
    }
    return assemble(data, layout, frames)


# ---------------------------------------------------------------------------------------------
# Tokens per step
# ---------------------------------------------------------------------------------------------

def step_tokens_figure(trace: Trace, max_bars: int = MAX_BARS) -> go.Figure:
    """Tokens per step, stacked by kind, with the token budget, the waiting queue and preemptions.

    Past max_bars steps, bars are bins of k steps showing the mean tokens per step.
    """
    s = trace.steps
    steps = s["step"].to_numpy(dtype=np.int64)
    cols = {"prefill": s["prefill_tokens"].to_numpy(dtype=float), "decode": s["decode_tokens"].to_numpy(dtype=float),
            "recompute": s["recompute_tokens"].to_numpy(dtype=float)}
    waiting = s["waiting"].to_numpy(dtype=float)
    preempted = s["preempted"].to_numpy(dtype=float)
    k = max(1, math.ceil(len(steps) / max_bars)) if len(steps) else 1
    if k > 1:
        nb = math.ceil(len(steps) / k)
        pad = nb * k - len(steps)

        def binned(a, how):
            a = np.concatenate([a, np.full(pad, np.nan)]).reshape(nb, k)
            return how(a, axis=1)
        x = binned(steps.astype(float), np.nanmin)
        cols = {n: binned(v, np.nanmean) for n, v in cols.items()}
        waiting = binned(waiting, np.nanmean)
        preempted = binned(preempted, np.nansum)
        width = k
        xlabel = f"step (bins of {k} steps; bars show the mean per step)"
    else:
        x = steps
        width = None
        xlabel = "step"
    fig = go.Figure()
    for name, v in cols.items():
        if name == "recompute" and not v.any():
            continue
        fig.add_trace(go.Bar(x=x, y=v, name=f"{name} tokens", marker_color=KIND_COLOURS[name],
                             marker_line_width=0, width=width, offset=0 if width else None,
                             hovertemplate=f"step %{{x}}<br>{name}: %{{y:.4~g}} tokens<extra></extra>"))
    budget = (trace.meta.get("config") or {}).get("max_num_batched_tokens")
    total = sum(cols.values())
    if budget and len(x):
        fig.add_trace(go.Scatter(x=[x[0] - 0.5, x[-1] + (width or 1) - 0.5], y=[budget, budget], mode="lines",
                                 name=f"token budget ({budget})", line={"color": "#6B7280", "dash": "dash", "width": 1.5},
                                 hoverinfo="skip"))
    if preempted.any():
        hit = preempted > 0
        fig.add_trace(go.Scatter(x=x[hit], y=total[hit], mode="markers", name="preemption",
                                 marker={"symbol": "x", "size": 11, "color": PREEMPT, "line": {"width": 1, "color": "white"}},
                                 customdata=preempted[hit],
                                 hovertemplate="step %{x}: %{customdata:.0f} preempted<extra></extra>"))
    fig.add_trace(go.Scatter(x=x, y=waiting, mode="lines", yaxis="y2",
                             name="waiting requests", line={"color": "#9333EA", "width": 1.5, "shape": "hv"},
                             hovertemplate="step %{x}<br>%{y:.4~g} waiting<extra></extra>"))
    rej = rejected_per_step(trace)
    if len(rej):   # on the waiting line: the queue was full when they came
        if k > 1:
            b = np.minimum((rej["step"].to_numpy() - steps[0]) // k, len(x) - 1)
            rej = rej.assign(step=x[b].astype(np.int64)).groupby("step", as_index=False).agg(
                count=("count", "sum"), who=("who", lambda w: "; ".join(w.iloc[:2]) + ("; …" if len(w) > 2 else "")))
            y = waiting[np.minimum((rej["step"].to_numpy() - steps[0]) // k, len(x) - 1)]
        else:
            y = pd.Series(waiting, index=steps).reindex(rej["step"].to_numpy()).to_numpy()
        fig.add_trace(_rejection_marks(rej, y, 9, yaxis="y2"))
    _base_layout(fig, 300, barmode="stack", bargap=0.15 if k == 1 and len(x) <= 200 else 0,
                 legend={"orientation": "h", "y": 1.02, "yanchor": "bottom", "x": 0, "traceorder": "normal"},
                 yaxis2={"title": {"text": "waiting", "font": {"color": "#9333EA"}}, "overlaying": "y",
                         "side": "right", "showgrid": False, "rangemode": "tozero",
                         "tickfont": {"color": "#9333EA"},
                         **({"tickmode": "linear", "dtick": 1} if np.nanmax(waiting, initial=0) <= 8
                            else {"tickmode": "auto"})})
    # the axes' top ticks may pass the data a little (a bar of 98 tokens gets a 100 tick)
    top = float(np.nanmax(np.nansum(np.vstack(list(cols.values())), axis=0), initial=0)) if len(x) else 0.0
    budget_line = float(trace.meta.get("config", {}).get("max_num_batched_tokens") or 0)
    fig.update_layout(margin={"l": 60 + tick_room(1.15 * max(top, budget_line)),
                              "r": 60 + tick_room(1.15 * float(np.nanmax(waiting, initial=0))), "t": 70, "b": 59})
    fig.update_xaxes(title_text=xlabel, showgrid=False, dtick=1 if len(x) <= 30 else None)
    fig.update_layout(yaxis={"title": {"text": "tokens in the step"}, "rangemode": "tozero"})
    return fig


# ---------------------------------------------------------------------------------------------
# KV block map
# ---------------------------------------------------------------------------------------------

def _kv_columns(n: int) -> int:
    if n <= 16:
        return max(n, 1)
    return int(min(100, math.ceil(math.sqrt(n * 3))))


def kv_state(trace: Trace, step: int) -> dict:
    """Block map at the end of `step` as codes: request index (first holder), -1 free,
    -2 cached-free, -3 null block; plus holders, cached flags and counts."""
    count, cached, holders = trace.block_map(step)
    n = len(count)
    ridx = request_index(trace)
    code = np.full(n, -1, dtype=np.int64)
    held = count > 0
    for b in np.flatnonzero(held):
        code[b] = ridx.get(holders[b][0], 0)
    code[(~held) & cached] = -2
    if n:
        code[0] = -3
    real = np.arange(n) > 0  # block 0 is the null block: neither free nor used
    return {"code": code, "count": count, "cached": cached, "holders": holders,
            "free": int((real & ~held & ~cached).sum()), "cached_free": int((real & ~held & cached).sum()),
            "used": int((real & held).sum()), "blocks": n}


def kv_map_figure(trace: Trace, step: int) -> go.Figure:
    """The KV block map at the end of `step`: a grid of blocks coloured by owner.

    Trace 0 is the heatmap; z codes: request index of the (first) holder, -1 free,
    -2 cached-free (reusable prefix), -3 the null block, -4 padding after the last block.
    """
    st = kv_state(trace, step)
    n = st["blocks"]
    cols = _kv_columns(n)
    rows = max(1, math.ceil(n / cols))
    flat = np.full(rows * cols, -4, dtype=np.int64)
    flat[:n] = st["code"]
    grid = flat.reshape(rows, cols)
    z, scale, zmin, zmax = colour_codes(grid, len(trace.requests), [FREE, CACHED_FREE, NULL_BLOCK, "#FFFFFF"])
    hover = np.full(rows * cols, "", dtype=object)
    for b in range(n):
        if b == 0:
            hover[b] = "block 0 · the null block (never allocated)"
            continue
        h = plotly_text(st["holders"][b])
        state = ("held by " + ", ".join(h)) if h else ("free, cached prefix" if st["cached"][b] else "free")
        hover[b] = f"block {b} · {state}" + (" · hashed (cached)" if h and st["cached"][b] else "")
    fig = go.Figure()
    heat = {"z": z, "colorscale": scale, "zmin": zmin, "zmax": zmax, "showscale": False,
            "xgap": 2 if cols <= 64 else 1, "ygap": 2 if rows <= 64 else 1,
            "customdata": hover.reshape(rows, cols), "hovertemplate": "%{customdata}<extra></extra>",
            "name": "KV blocks"}
    if n <= 64:  # label cells: block id, and the holder when the cells are wide enough
        lab = np.full(rows * cols, "", dtype=object)
        for b in range(n):
            h = plotly_text(st["holders"][b])
            who = "null" if b == 0 else ("+".join(h) if h else ("cached" if st["cached"][b] else "free"))
            lab[b] = f"{b}<br>{who}" if n <= 16 else str(b)
        heat["text"] = lab.reshape(rows, cols)
        heat["texttemplate"] = "%{text}"
        heat["textfont"] = {"size": 11 if n <= 16 else 10}
    fig.add_trace(go.Heatmap(**heat))
    shared = np.flatnonzero(st["count"] > 1)
    if len(shared):
        fig.add_trace(go.Scatter(x=shared % cols + 0.28, y=shared // cols - 0.26, mode="markers",
                                 name="shared (2+ holders)",
                                 marker={"symbol": "diamond", "size": 7 if cols <= 40 else 5, "color": "white",
                                         "line": {"width": 1.5, "color": "#111827"}},
                                 hoverinfo="skip"))
    fig.add_trace(legend_swatch("held (request colour)", request_colour(0)))
    fig.add_trace(legend_swatch("free", FREE))
    if trace.meta.get("config", {}).get("enable_prefix_caching") or st["cached_free"]:
        fig.add_trace(legend_swatch("free, cached prefix", CACHED_FREE))
    fig.add_trace(legend_swatch("null block", NULL_BLOCK))
    cell = 46 if cols <= 16 else (26 if cols <= 40 else 9)
    height = int(min(640, max(170, 90 + rows * cell)))
    _base_layout(fig, height,
                 legend={"orientation": "h", "y": 1.02, "yanchor": "bottom", "x": 0},
                 meta={"step": int(step), "free": st["free"], "cached_free": st["cached_free"],
                       "used": st["used"], "blocks": n})
    fig.update_layout(margin={"l": 50 + tick_room((rows - 1) * cols, fits=1), "r": 10, "t": 46, "b": 10},
                      plot_bgcolor="white")
    fig.update_xaxes(visible=False, range=[-0.5, cols - 0.5])
    # a label (the row's first block) every k rows, k such that labels stand ~18 px apart: a row is
    # what is left of the height after the margins and a legend of up to three lines, shared out
    every = max(1, math.ceil(18 / max((height - 150) / rows, 0.5)))
    fig.update_yaxes(autorange="reversed", showgrid=False, zeroline=False, title_text="block row",
                     tickmode="array", tickvals=list(range(0, rows, every)),
                     ticktext=[str(r * cols) for r in range(0, rows, every)])
    return fig


# ---------------------------------------------------------------------------------------------
# Step inspector
# ---------------------------------------------------------------------------------------------

def inspector_tables(trace: Trace, step: int) -> tuple[pd.DataFrame, pd.DataFrame]:
    """(the batch of `step`: request, tenant, slot, kind, tokens, computed before, sampled;
    the events of `step`: request, event, detail)."""
    b = trace.batch_at(step)
    tenants = trace.requests.set_index("request")["tenant"]
    batch = pd.DataFrame({
        "request": b["request"].to_numpy(),
        "tenant": tenants.reindex(b["request"]).to_numpy(),
        "slot": b["slot"].to_numpy(),
        "kind": b["kind"].to_numpy(),
        "tokens": b["tokens"].to_numpy(),
        "computed before": b["computed_before"].to_numpy(),
        "sampled": b["sampled"].to_numpy(),
    })
    e = trace.events
    ev = e[e["step"].to_numpy() == step]
    events = pd.DataFrame({"request": ev["request"].to_numpy(), "event": ev["kind"].to_numpy(),
                           "detail": ev["detail"].to_numpy()})
    return batch, events
