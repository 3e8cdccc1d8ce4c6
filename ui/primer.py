"""Start loading Plotly's JavaScript before a page computes.

Streamlit's frontend loads Plotly (4.7 MB of JavaScript) lazily, when the first chart arrives, and
pages send their charts at the end of their run: on a fresh browser the load would start only
after the Python work. app.py sends an empty chart first (send) and removes it after the page
(clear). A page that ends early calls stop() instead of st.stop(), which would skip the removal.
Measured with bench/bench_pages.py: first render 0.3-0.45 s sooner.
"""
from __future__ import annotations

import streamlit as st

_SLOT = "_plotly_primer_slot"
_EMPTY = {"data": [{"type": "scatter", "x": [], "y": []}],
          "layout": {"height": 10, "margin": {"l": 0, "r": 0, "t": 0, "b": 0}}}


def send() -> None:
    """On a session's first run only: the empty chart, in a placeholder kept in session state.
    The placeholder itself is made on every run, so the page's elements keep their positions
    from one run to the next (a shift would let the browser show stale copies during a rerun)."""
    slot = st.empty()
    if st.session_state.get("_plotly_primed"):
        return
    st.session_state["_plotly_primed"] = True
    slot.plotly_chart(_EMPTY, config={"staticPlot": True, "displayModeBar": False}, key="_plotly_primer")
    st.session_state[_SLOT] = slot


def clear() -> None:
    slot = st.session_state.pop(_SLOT, None)
    if slot is not None:
        slot.empty()


def stop() -> None:
    """st.stop(), after removing the primer."""
    clear()
    st.stop()
