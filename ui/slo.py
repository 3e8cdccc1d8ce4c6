"""SLO targets on a page: three optional number inputs kept in the URL, and what a run made of
them (attainment, goodput, which requests missed and when).

    from ui.slo import SLOInputs
    SLO_IN = SLOInputs("pb")
    SETTINGS = PageSettings("pb", [..., *SLO_IN.settings()])
    with st.sidebar: SLO_IN.draw()           # an expander with TTFT / TPOT / E2E targets
    SLO_IN.report(trace)                      # nothing while no target is set
    SLO_IN.compare_report(trace_a, trace_b)   # Compare: both sides

The numbers come from sim.slo, the figure and the misses table from figures.slo.
"""
from __future__ import annotations

import streamlit as st

from figures.slo import misses_table, slo_timeline_figure
from sim.slo import SLO, TARGETS, slo_summary, slo_table
from sim.trace import Trace
from ui.labels import fmt
from ui.state import Setting

BOUNDS = (0.001, 1e9)
HELP = {"ttft": "Time to first token: arrival to the end of the step that sampled the first token.",
        "tpot": "Time per output token: the mean gap between a request's tokens after the first.",
        "e2e": "End to end: arrival to the last token."}
NAMES = {"ttft": "TTFT", "tpot": "TPOT", "e2e": "E2E"}


def _pct(v) -> str:
    return "–" if v is None else f"{100 * v:.1f}%"


class SLOInputs:
    """The SLO target widgets of one page (keys keep_<page>_slo_ttft, ..._tpot, ..._e2e)."""

    def __init__(self, page: str):
        self.page = page
        self.keys = {t: f"keep_{page}_slo_{t}" for t in TARGETS}

    def settings(self) -> list[Setting]:
        return [Setting(key, None, float, bounds=BOUNDS) for key in self.keys.values()]

    def draw(self, expanded: bool = False) -> None:
        with st.expander("SLO targets", expanded=expanded or self.slo() is not None):
            st.caption("In the run's time unit (ms with a roofline step cost, units with the lesson's). "
                       "Leave a box empty for no target. A rejected or unfinished request misses every target.")
            for t, key in self.keys.items():
                st.number_input(f"{NAMES[t]} target", min_value=BOUNDS[0], max_value=BOUNDS[1], value=None,
                                step=10.0, key=key, help=HELP[t], placeholder="none")

    def slo(self) -> SLO | None:
        """The targets set on the page, or None when none is."""
        vals = {t: st.session_state.get(key) for t, key in self.keys.items()}
        if all(v is None for v in vals.values()):
            return None
        return SLO(**vals)

    def config(self, policy: str) -> dict:
        """Config keys the SLO-minded policies read: the targets, for EDF (its deadlines)."""
        slo = self.slo()
        return {"slo": slo.to_json()} if slo is not None and policy == "edf" else {}

    # -- what a run made of them -----------------------------------------------------------
    def report(self, trace: Trace, key: str = "") -> None:
        slo = self.slo()
        if slo is None:
            return
        key = key or self.page
        tab = slo_table(trace, slo)
        s = slo_summary(trace, slo)
        st.subheader("SLO attainment")
        cols = st.columns(5)
        for col, t in zip(cols, TARGETS):
            col.metric(f"{NAMES[t]} met", _pct(s[f"slo_{t}_attainment"]), help=HELP[t])
        cols[3].metric("All targets met", _pct(s["slo_attainment"]),
                       help=f"{s['slo_met']:,} requests met every target, {s['slo_missed']:,} missed one.")
        cols[4].metric(f"Goodput ({s['goodput_unit']})", fmt(s["goodput"]),
                       help="Requests that met every target per time unit over the run (DistServe's goodput).")
        fig = slo_timeline_figure(tab, trace.time_unit, slo.ttft)
        st.caption("Each request at its arrival (x) and its time to first token (y): a red × missed a target, "
                   "a dark ▼ was rejected. Hover for which target and by how much.")
        st.plotly_chart(fig, key=f"{key}_slo_timeline", theme=None, config={"displaylogo": False})
        misses = misses_table(tab)
        with st.expander(f"Requests that missed ({len(misses):,})"):
            if misses.empty:
                st.caption("Every request met every target.")
            else:
                st.dataframe(misses, hide_index=True, key=f"{key}_slo_misses")

    def compare_report(self, a: Trace, b: Trace) -> None:
        slo = self.slo()
        if slo is None:
            return
        sa, sb = slo_summary(a, slo), slo_summary(b, slo)
        st.subheader("SLO attainment")
        row = st.columns(4)
        for col, (k, label) in zip(row, (("slo_ttft_attainment", "TTFT met"), ("slo_tpot_attainment", "TPOT met"),
                                         ("slo_attainment", "All targets met"), ("goodput", "Goodput"))):
            show = fmt if k == "goodput" else _pct
            va, vb = sa[k], sb[k]
            delta = None if va is None or vb is None else (fmt(vb - va) if k == "goodput"
                                                           else f"{100 * (vb - va):+.1f} pts")
            col.metric(label, f"{show(va)} → {show(vb)}", delta=delta, help="A → B over the same requests.")
        for side, tr, col in zip("ab", (a, b), st.columns(2, gap="large")):
            tab = slo_table(tr, slo)
            with col:
                st.markdown(f"**{side.upper()}**: {int((~tab['met']).sum()):,} requests missed")
                st.plotly_chart(slo_timeline_figure(tab, tr.time_unit, slo.ttft, height=280),
                                key=f"{self.page}_slo_timeline_{side}", theme=None, config={"displaylogo": False})
                with st.expander(f"{side.upper()}: requests that missed"):
                    st.dataframe(misses_table(tab), hide_index=True, key=f"{self.page}_slo_misses_{side}")
