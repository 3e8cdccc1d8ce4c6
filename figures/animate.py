"""Assemble animated figures from plain dicts, skipping Plotly's per-key validation.

Validation deep-copies every array and costs about 10 ms per frame (2 s for 200 frames that
carry a few shapes and an annotation; another second to re-wrap validated traces). The
figures of the Policies, Admission and KV memory pages are therefore built as dicts, like
figures.playback.occupancy_figure, and assembled once; the unit tests validate each one with
go.Figure(fig.to_dict()).
"""
from __future__ import annotations

import copy
import functools
import json

import plotly.graph_objects as go


def subplot_layout(rows: int, cols: int = 1, **kw) -> dict:
    """The layout dict plotly.subplots.make_subplots would give (axis domains, matches, titles),
    a fresh copy for the caller to add to. make_subplots builds and validates a whole figure
    (40-90 ms); a grid asked for again is copied from the first answer."""
    return copy.deepcopy(_subplot_layout(json.dumps({"rows": rows, "cols": cols, **kw}, sort_keys=True)))


@functools.lru_cache(maxsize=64)
def _subplot_layout(spec: str) -> dict:
    from plotly.subplots import make_subplots

    return make_subplots(**json.loads(spec)).layout.to_plotly_json()


def axes(row: int, col: int = 1, cols: int = 1) -> dict:
    """{"xaxis": "x<i>", "yaxis": "y<i>"} for a trace in subplot (row, col) of a grid `cols` wide."""
    i = (row - 1) * cols + col
    s = "" if i == 1 else str(i)
    return {"xaxis": f"x{s}", "yaxis": f"y{s}"}


def axis_key(row: int, col: int = 1, cols: int = 1, axis: str = "x") -> str:
    """The layout key of subplot (row, col)'s axis: "xaxis", "yaxis2", ..."""
    i = (row - 1) * cols + col
    return f"{axis}axis" + ("" if i == 1 else str(i))


def assemble(data: list[dict], layout: dict, frames: list[dict] | None = None) -> go.Figure:
    """One figure from dict traces, a layout dict and frames {"name", "layout"/"data"/"traces"}.

    go.Figure(frames=...) validates every frame again even with _validate=False (0.36 s for
    200 frames of 8 shapes on a quiet machine), so the frames are set directly: 0.008 s. This
    reaches into plotly's figure (plotly is pinned at 7.1.0); the figure tests validate every
    assembled figure with go.Figure(fig.to_dict()).
    """
    fig = go.Figure(data=data, layout=layout, _validate=False)
    if frames:
        fig._frame_objs = tuple(go.Frame(f, _validate=False) for f in frames)
    return fig


def from_spec(spec: dict) -> go.Figure:
    """A figure again from its to_plotly_json() dict (how a page caches figures: a pickled
    go.Figure is validated again when it is unpickled), without validating it again:
    st.plotly_chart validates a dict it is given, 0.1-0.2 s for a figure of a few thousand bars."""
    return assemble(spec.get("data", []), spec.get("layout", {}), spec.get("frames"))


def with_redraw(controls: dict) -> dict:
    """figures.common.play_controls' buttons and slider, redrawing the plot on every frame.

    Needed when frames change what a partial update does not redraw: a heatmap's z, or layout
    annotations (only shapes and scatter data update with redraw=False)."""
    for menu in controls.get("updatemenus", []):
        for b in menu["buttons"]:
            if len(b["args"]) > 1 and "frame" in b["args"][1]:
                b["args"][1]["frame"]["redraw"] = True
    for slider in controls.get("sliders", []):
        for st in slider["steps"]:
            st["args"][1]["frame"]["redraw"] = True
    return controls
