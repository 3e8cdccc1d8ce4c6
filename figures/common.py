"""Colours, colour scales and size rules shared by the figure builders.

Size rules (../shared/stack.md §6): heatmaps carry small integer codes (int8/int16), never
floats; animation frames carry only layout deltas; past ~2k bars, aggregate; cap frames.
"""
from __future__ import annotations

import html

import numpy as np
import plotly.graph_objects as go
import plotly.io as pio

# Request colours: Tableau 20 without its greys, dark shades first so neighbours differ.
REQUEST_PALETTE = [
    "#4E79A7", "#F28E2B", "#59A14F", "#E15759", "#B07AA1", "#499894", "#B6992D", "#D37295",
    "#9D7660", "#A0CBE8", "#FFBE7D", "#8CD17D", "#FF9D9A", "#D4A6C8", "#86BCB6", "#F1CE63",
    "#FABFD2", "#D7B5A6",
]
EMPTY = "#F3F4F6"  # an idle slot-step
FREE = "#E5E7EB"  # a free KV block
CACHED_FREE = "#A7D8C9"  # free, but still holds a hashed prefix (reusable until evicted)
NULL_BLOCK = "#374151"  # vLLM's block 0, never allocated
PREEMPT = "#C0392B"
REJECT = "#7F1D1D"
KIND_COLOURS = {"prefill": "#4E79A7", "decode": "#59A14F", "recompute": "#E15759", "padding": "#C8CCD2"}
KINDS = ("prefill", "decode", "recompute", "padding")

MAX_DISCRETE_REQUESTS = 2000  # past this, request colours cycle by palette index
MAX_GRID_COLUMNS = 5000  # heatmap columns; longer runs show every k-th step
MAX_BARS = 2000  # past this, per-step bars are aggregated into bins
MAX_HOVER_CELLS = 60_000  # per-cell hover text only below this many cells
MAX_LABEL_CELLS = 400  # cell labels (request id in the cell) only for small grids

# The Plotly trace types the figures draw. serve.py registers only these in the browser's
# Plotly (its evaluation then skips 3D, maps and the rest); a figure that draws another type
# must add it here (tests/test_serve.py checks the figures' sources and the pages' charts).
TRACE_TYPES = ("scatter", "scattergl", "bar", "heatmap")

# Each figure declares the margins its axes, legend and controls need. Plotly widens a margin
# that is too small and then draws the whole chart again (tests/e2e/test_chart_margins.py).
CONTROLS_MARGIN_B = 139  # below the plot, for play_controls' buttons and slider (135 px) and 4 to spare


def _template() -> go.layout.Template:
    """plotly's white template, with tick labels never hidden for running past the chart.
    By default Plotly measures every tick label of a numeric axis after each draw to hide
    those past the chart's edge (ticklabeloverflow "hide past div"): 60-130 ms of KV memory's
    first draw in CPU profiles. The margins leave room for the labels, so none is hidden."""
    t = go.layout.Template(pio.templates["plotly_white"])
    t.layout.xaxis.ticklabeloverflow = "allow"
    t.layout.yaxis.ticklabeloverflow = "allow"
    return t


# Every figure's look: the template above and one font.
TEMPLATE = _template()
FONT = {"family": "Inter, Segoe UI, Helvetica, Arial, sans-serif", "size": 13, "color": "#1F2937"}


def plotly_text(values):
    """Text from a user or a log (request ids, tenants, replica names) as Plotly should show it in
    hovers, ticks, legends and titles: as written. Plotly renders a pseudo-HTML of its own there
    (<a href>, <b>, <br>, <span style>, entities); escaped, a tag is shown, never followed. A
    list or array gives a list (an object array stays one), a text gives a text. "%" is written
    as its entity too: inside a hovertemplate, a name's "%{x}" would be filled in."""
    if isinstance(values, str):
        return html.escape(values).replace("%", "&#37;")
    out = [html.escape(str(v)).replace("%", "&#37;") for v in values]
    return np.asarray(out, dtype=object) if isinstance(values, np.ndarray) else out


def tick_room(largest: float, fits: int = 2) -> int:
    """Extra margin (px) for an axis whose tick labels reach `largest`: 8 px a digit past `fits`.
    Margins are declared to hold what Plotly draws (a label wider than its margin has Plotly
    widen it and draw the chart twice), so they grow with the data's digits; too wide is harmless."""
    if not np.isfinite(largest) or largest < 10 ** fits:
        return 0
    return 8 * (len(str(int(abs(largest)))) - fits)


def themed(fig: go.Figure) -> go.Figure:
    """fig with TEMPLATE, set without validating it again: it is one of plotly's own templates,
    validated when it was made (plotly sets its default template the same way). Through
    update_layout(template=...) plotly deep-copies and checks every key again: 20-35 ms a figure,
    0.1-0.3 s of a page's first render. Same JSON either way (tests/test_figures.py)."""
    layout = fig.layout
    layout._validate = False
    try:
        layout.template = TEMPLATE
    finally:
        layout._validate = True
    return fig


def request_colour(code: int) -> str:
    return REQUEST_PALETTE[int(code) % len(REQUEST_PALETTE)]


def discrete_colorscale(colours: list[str]) -> list[list]:
    """A colorscale giving each of len(colours) consecutive integer codes its own flat band.

    Use with zmin = lowest code - 0.5 and zmax = highest code + 0.5.
    """
    m = len(colours)
    scale: list[list] = []
    for i, c in enumerate(colours):
        scale.append([i / m, c])
        scale.append([(i + 1) / m, c])
    return scale


def code_dtype(max_code: int):
    """The smallest signed integer dtype holding -8..max_code."""
    if max_code < 120:
        return np.int8
    if max_code < 32_000:
        return np.int16
    return np.int32


def colour_codes(idx: np.ndarray, n_requests: int, specials: list[str]) -> tuple[np.ndarray, list[list], float, float]:
    """Map a grid of request indices (>= 0) and special codes (-1, -2, ...) to (z, colorscale,
    zmin, zmax). specials[k] is the colour of code -(k+1).

    Up to MAX_DISCRETE_REQUESTS requests, z keeps the request index (hover and tests can read
    it); beyond, z is the palette index and the figure says so in layout.meta.
    """
    lo = -len(specials)
    if n_requests <= MAX_DISCRETE_REQUESTS:
        colours = list(reversed(specials)) + [request_colour(i) for i in range(max(n_requests, 1))]
        z = idx.astype(code_dtype(max(n_requests, 1)), copy=False)
        hi = max(n_requests, 1) - 1
    else:
        p = len(REQUEST_PALETTE)
        colours = list(reversed(specials)) + REQUEST_PALETTE
        z = np.where(idx >= 0, idx % p, idx).astype(np.int8)
        hi = p - 1
    return z, discrete_colorscale(colours), lo - 0.5, hi + 0.5


def legend_swatch(name: str, colour: str, symbol: str = "square", group: str | None = None, size: int = 12):
    """An empty scatter trace that only draws a legend entry (heatmaps have no legend)."""
    import plotly.graph_objects as go

    return go.Scatter(x=[None], y=[None], mode="markers", name=name, showlegend=True,
                      legendgroup=group or name, hoverinfo="skip",
                      marker={"symbol": symbol, "size": size, "color": colour,
                              "line": {"width": 1, "color": "#6B7280"}})


# ---------------------------------------------------------------------------------------------
# Browser-side animation: Play/Pause buttons and a step slider driving a figure's frames
# ---------------------------------------------------------------------------------------------

def pick_frames(steps: np.ndarray, max_frames: int) -> np.ndarray:
    """At most max_frames of `steps`, evenly spread, first and last included."""
    if len(steps) <= max_frames:
        return steps
    pick = np.unique(np.round(np.linspace(0, len(steps) - 1, max_frames)).astype(np.int64))
    return steps[pick]


def play_controls(frame_steps, frame_ms: int | None = None, labelled: bool = True) -> dict:
    """Layout entries (updatemenus, sliders) for frames named str(step): ▶ Play / ❚❚ Pause and a
    slider labelled "step N", opening on the last frame. frame_ms None: a whole run plays in
    about 6 s, at 2 to 33 frames per second. labelled False, for a figure that shows the step
    itself: a bare slider, no step numbers under it and no "step N" over it. Plotly measures
    every distinct label twice before it draws a slider (one forced layout each: about 0.4 s for
    200 steps here); blank labels are measured once."""
    n = len(frame_steps)
    if frame_ms is None:
        frame_ms = int(min(500, max(30, 6000 / max(n, 1))))  # >= 30 ms: up to 33 frames/s
    anim = {"frame": {"duration": frame_ms, "redraw": False}, "transition": {"duration": 0},
            "fromcurrent": True, "mode": "immediate"}
    stop = {"frame": {"duration": 0, "redraw": False}, "transition": {"duration": 0}, "mode": "immediate"}
    return {
        "updatemenus": [{"type": "buttons", "direction": "left", "showactive": False, "x": 0.13, "y": 0,
                         "xanchor": "right", "yanchor": "top", "pad": {"t": 62, "r": 10},
                         "buttons": [{"label": "▶ Play", "method": "animate", "args": [None, anim]},
                                     {"label": "❚❚ Pause", "method": "animate", "args": [[None], stop]}]}],
        "sliders": [{"active": max(n - 1, 0), "x": 0.14, "len": 0.86, "y": 0, "yanchor": "top",
                     "xanchor": "left", "pad": {"t": 50, "b": 0},
                     "currentvalue": {"prefix": "step ", "xanchor": "right", "font": {"size": 14},
                                      "visible": labelled},
                     "transition": {"duration": 0},
                     "steps": [{"label": str(int(s)) if labelled else "", "method": "animate",
                                "args": [[str(int(s))], stop]} for s in frame_steps]}],
    }
