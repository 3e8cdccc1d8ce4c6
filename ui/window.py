"""Windowed playback: a long run opens on its overview, and the page's detailed views (slot lanes,
KV block map, step inspector, Chrome export) show the window picked there.

    WIN = WindowPicker("pb")                      # the page's prefix
    SETTINGS = PageSettings("pb", [..., *WIN.settings()])      # the window is in the link: ?pb_win=12000-17000
    ...
    view = WIN.pick(trace, key=run_id, around=interesting_step)   # the overview (long runs), then a Trace
    st.plotly_chart(occupancy_figure(view)); export_panel(view, ...)

A run of more than LONG_RUN_STEPS steps (or any run whose link names a window) shows the
overview first (sim.overview, figures.overview): drag across it to pick a window, or type its
first and last step (the keyboard's way), or press "Whole run" / "Last N steps" ("last N" stays
pinned to the end as a run grows). The window is the setting keep_<page>_win: "A-B" (steps A to
B), "all", or "lastN". A shorter run without one is returned as it is, and the page looks as it
always did.

The pure parts (parse_window, encode_window, resolve) import no Streamlit state and are
unit-tested in tests/test_window.py.
"""
from __future__ import annotations

import re

import numpy as np
import streamlit as st

from figures.common import MAX_GRID_COLUMNS
from figures.overview import overview_figure, selected_range
from sim.overview import fleet_overview, overview, step_span
from sim.trace import Trace
from sim.window import clamp, step_range, window

from .labels import inert
from .state import Setting

# Past MAX_GRID_COLUMNS (5,000) steps the slot lanes show every k-th step, not every one: so a
# run longer than that opens on its overview, and a window of at most that many steps draws in full.
LONG_RUN_STEPS = MAX_GRID_COLUMNS
DEFAULT_SPAN = LONG_RUN_STEPS
_RANGE = re.compile(r"^\s*(\d{1,12})\s*-\s*(\d{1,12})\s*$")
_LAST = re.compile(r"^\s*last\s*(\d{1,12})\s*$")


def parse_window(text: str | None):
    """The window a setting's text names: None (unset), "all", ("last", n) or (first, last);
    ValueError (one plain sentence) for anything else."""
    if text is None or not str(text).strip():
        return None
    t = str(text).strip().lower()
    if t == "all":
        return "all"
    m = _LAST.match(t)
    if m and int(m.group(1)) >= 1:
        return ("last", int(m.group(1)))
    m = _RANGE.match(t)
    if m:
        a, b = int(m.group(1)), int(m.group(2))
        return (min(a, b), max(a, b))
    raise ValueError(f"the window must be FIRST-LAST (steps, e.g. 12000-17000), lastN or all, "
                     f"not {str(text)[:40]!r}")


def encode_window(w) -> str | None:
    if w is None:
        return None
    if w == "all":
        return "all"
    if w[0] == "last":
        return f"last{int(w[1])}"
    return f"{int(w[0])}-{int(w[1])}"


def resolve(w, lo: int, hi: int, around: int | None = None, span: int = DEFAULT_SPAN) -> tuple[int, int]:
    """The (first, last) steps of window `w` in a run of steps lo..hi. Unset: `span` steps
    centred on `around` (else the first `span`)."""
    if w == "all":
        return lo, hi
    if w is None:
        c = lo + span // 2 if around is None else int(around)
        a = max(lo, min(c - span // 2, hi - span + 1))
        return a, min(hi, a + span - 1)
    if w[0] == "last":
        return max(lo, hi - int(w[1]) + 1), hi
    a, b = w
    a, b = max(lo, min(a, hi)), max(lo, min(b, hi))
    return min(a, b), max(a, b)


@st.cache_data(max_entries=16, show_spinner=False)
def _overview(key: str, clock: str, _trace: Trace):
    return overview(_trace, clock)


@st.cache_resource(max_entries=8, show_spinner="Cutting the window…")
def _window(key: str, first: int, last: int, _trace: Trace) -> Trace:
    # a resource (not a copy): a window of a long run is itself big, and the pages only read it
    return window(_trace, first, last)


def cut(key: str, first: int, last: int, trace: Trace) -> Trace:
    """The steps first..last of `trace` (clamped to its steps; the trace itself when that is all
    of it), cached under the run's `key`: a second run cut where the picker cut the first."""
    first, last = clamp(trace, first, last)
    return trace if (first, last) == step_range(trace) else _window(key, first, last, trace)


class WindowPicker:
    """One page's window setting and the overview that sets it."""

    def __init__(self, page: str, label: str = "step"):
        self.page = page
        self.key = f"keep_{page}_win"
        self.label = label

    def settings(self) -> list[Setting]:
        return [Setting(self.key, None, str)]

    def current(self):
        """The window the setting names (a bad value, e.g. from a link, is dropped with a warning)."""
        ss = st.session_state
        try:
            return parse_window(ss.get(self.key))
        except ValueError as e:
            st.warning(inert(f"Ignored the window in the link: {e}."), icon=":material/link_off:")
            ss[self.key] = None
            return None

    def _set(self, w) -> None:
        st.session_state[self.key] = encode_window(w)

    def _typed(self, lo: int, hi: int) -> None:
        ss = st.session_state
        a, b = int(ss[f"{self.page}_win_first"]), int(ss[f"{self.page}_win_last"])
        drawn = ss.get(f"{self.page}_win_drawn") or []
        if (a, b) in drawn:
            return
        self._set((max(lo, min(a, b)), min(hi, max(a, b))))

    def _dragged(self, ov, chart_key: str) -> None:
        rng = selected_range(st.session_state.get(chart_key))
        if rng is None:
            return
        span = step_span(ov, *rng)
        if span is not None:
            self._set(span)

    def shows_overview(self, trace: Trace) -> bool:
        return trace.num_steps > LONG_RUN_STEPS or self.current() is not None

    def pick(self, trace: Trace, key: str, around: int | None = None, clock: str = "steps",
             follow_end: bool = False) -> Trace:
        """Draw the overview when the run is long (or a window is set) and return the window's
        Trace; the trace itself otherwise. `key` names the run (cache key); `around`: where the
        default window is centred; `clock`: "steps" or "time" (a server's ms) for the overview;
        `follow_end`: the default window is the last DEFAULT_SPAN steps, kept on the end as the
        trace grows (a recording followed live)."""
        if not self.shows_overview(trace):
            return trace
        ss = st.session_state
        lo, hi = step_range(trace)
        w = self.current()
        if w is None and follow_end:
            w = ("last", DEFAULT_SPAN)
        first, last = resolve(w, lo, hi, around)
        # the default window stays put (scrubbing does not move it) and goes in the link
        ss[self.key] = encode_window(w if w is not None else (first, last))
        ov = _overview(key, clock, trace)
        on_time = ov.attrs.get("clock") == "time"
        st.subheader("Overview")
        n = trace.num_steps
        st.caption(f"The whole run, {n:,} {self.label}s, in {len(ov):,} buckets of {ov.attrs['width']:,.4g} "
                   f"{ov.attrs['unit']}. Drag across the chart to pick a window (or type its first and last "
                   f"{self.label} below): the views under it show that window in full detail, every {self.label}.")
        shade = (first, last + 1) if not on_time else self._times(trace, first, last)
        chart_key = f"{self.page}_overview"
        st.plotly_chart(overview_figure(ov, shade), key=chart_key, theme=None,
                        on_select=lambda: self._dragged(ov, chart_key), selection_mode="box",
                        config={"displaylogo": False})
        ss[f"{self.page}_win_first"], ss[f"{self.page}_win_last"] = first, last
        ss[f"{self.page}_win_drawn"] = [*(ss.get(f"{self.page}_win_drawn") or [])[-3:], (first, last)]
        c1, c2, c3, c4 = st.columns([2, 2, 1, 1], vertical_alignment="bottom")
        c1.number_input(f"First {self.label}", lo, hi, step=1, key=f"{self.page}_win_first",
                        on_change=self._typed, args=(lo, hi))
        c2.number_input(f"Last {self.label}", lo, hi, step=1, key=f"{self.page}_win_last",
                        on_change=self._typed, args=(lo, hi))
        c3.button("Whole run", key=f"{self.page}_win_all", on_click=self._set, args=("all",), width="stretch",
                  help="Every step in the views below (a long run's lanes then show every k-th step).")
        c4.button(f"Last {DEFAULT_SPAN:,}", key=f"{self.page}_win_last_n", on_click=self._set,
                  args=(("last", DEFAULT_SPAN),), width="stretch",
                  help=f"The last {DEFAULT_SPAN:,} {self.label}s; stays on the end as a run grows.")
        size = last - first + 1
        st.caption(f"Window: {self.label}s **{first:,} to {last:,}** ({size:,} of {n:,})."
                   + (f" More than {LONG_RUN_STEPS:,}: the lanes below show every k-th {self.label}."
                      if size > LONG_RUN_STEPS else "")
                   + " The numbers above the overview are the whole run's; the views below are the window's.")
        return _window(key, first, last, trace) if (first, last) != (lo, hi) else trace

    @staticmethod
    def _times(trace: Trace, first: int, last: int) -> tuple[float, float]:
        s = trace.steps
        step = s["step"].to_numpy()
        inside = (step >= first) & (step <= last)
        start = s["start"].to_numpy(dtype=float, na_value=float("nan"))[inside]
        end = s["end"].to_numpy(dtype=float, na_value=float("nan"))[inside]
        return float(np.nanmin(start, initial=np.inf)), float(np.nanmax(end, initial=-np.inf))


class FleetWindowPicker:
    """A fleet's window on its shared clock (ms): the overview per replica, a span dragged on it.

        FW = FleetWindowPicker("fleet")            # setting keep_fleet_span: "T0-T1" (ms), in the link
        span = FW.pick(fleet, key)                 # None: no overview, or none picked (the page's own window)
    """

    def __init__(self, page: str, time_key: str | None = None):
        self.page = page
        self.key = f"keep_{page}_span"
        self.time_key = time_key   # the page's scrub-time setting, moved into a span dragged

    def settings(self) -> list[Setting]:
        return [Setting(self.key, None, str)]

    def current(self) -> tuple[float, float] | None:
        ss = st.session_state
        try:
            w = parse_window(ss.get(self.key))
        except ValueError as e:
            st.warning(inert(f"Ignored the time window in the link: {e}."), icon=":material/link_off:")
            ss[self.key] = None
            return None
        if w is None or w == "all" or w[0] == "last":
            return None
        return float(w[0]), float(w[1])

    def _set(self, span) -> None:
        ss = st.session_state
        if span is None:
            ss[self.key] = None
            return
        a, b = int(np.floor(span[0])), int(np.ceil(span[1]))
        ss[self.key] = f"{a}-{max(a + 1, b)}"
        if self.time_key:
            t = ss.get(self.time_key)
            if t is None or not a <= t <= b:
                ss[self.time_key] = (a + b) // 2

    def _dragged(self, chart_key: str) -> None:
        rng = selected_range(st.session_state.get(chart_key))
        if rng is not None:
            self._set(rng)

    def pick(self, fleet, key: str) -> tuple[float, float] | None:
        """The overview (when a replica ran more than LONG_RUN_STEPS steps, or a span is set) and
        the span picked on it, in ms; None for the page's own window."""
        reps = [t for t in fleet.replicas if isinstance(t, Trace)]
        span = self.current()
        if not reps or (max(t.num_steps for t in reps) <= LONG_RUN_STEPS and span is None):
            return None
        ov = _fleet_overview(key, fleet)
        st.markdown(f"**Overview**: every replica over the whole run, in {ov['start'].nunique():,} buckets of "
                    f"{ov.attrs.get('width', 0):,.4g} {ov.attrs.get('unit', 'ms')}, a line per replica. Drag across "
                    "it to pick a time window for the lanes, signals and tables below.")
        chart_key = f"{self.page}_overview"
        st.plotly_chart(overview_figure(ov, span, names=fleet.names), key=chart_key, theme=None,
                        on_select=lambda: self._dragged(chart_key), selection_mode="box",
                        config={"displaylogo": False})
        c1, c2 = st.columns([4, 1], vertical_alignment="center")
        c1.caption(f"Window: **{span[0]:,.0f} to {span[1]:,.0f} ms**." if span else
                   "No window dragged: the lanes show the window chosen beside the scrubber.")
        c2.button("Whole run", key=f"{self.page}_span_all", on_click=self._set, args=(None,), width="stretch",
                  disabled=span is None)
        return span


@st.cache_data(max_entries=8, show_spinner=False)
def _fleet_overview(key: str, _fleet):
    return fleet_overview(_fleet)
