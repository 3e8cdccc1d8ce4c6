"""Colours, colour scales and size rules shared by the figure builders.

Size rules (../shared/stack.md §6): heatmaps carry small integer codes (int8/int16), never
floats; animation frames carry only layout deltas; past ~2k bars, aggregate; cap frames.
"""
from __future__ import annotations

import numpy as np

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
