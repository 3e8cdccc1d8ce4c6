"""A server-side step scrubber: ◀ ▶ buttons and a slider on one setting key.

    @st.fragment
    def inspector(trace):
        step = step_scrubber("keep_cmp_step", lo, hi, default=first_interesting)
        S.sync_url()              # the step is part of the link
        ... draw the views of `step` ...

Use it inside an @st.fragment so moving it reruns only the views that depend on the step.
The key should be a page setting (ui.state), so the step is in the link and survives page
switches. The buttons' keys are <buttons>_prev / <buttons>_next (default: the key without "keep_").
"""
from __future__ import annotations

import streamlit as st


def _nudge(key: str, delta: int, lo: int, hi: int) -> None:
    ss = st.session_state
    ss[key] = min(hi, max(lo, int(ss.get(key) or lo) + delta))


def step_scrubber(key: str, lo: int, hi: int, default: int | None = None, label: str = "Step",
                  help: str | None = None, buttons: str | None = None) -> int:
    """The chosen step in [lo, hi]; a missing or out-of-range value becomes `default` (else lo)."""
    ss = st.session_state
    v = ss.get(key)
    if v is None or not lo <= v <= hi:
        ss[key] = default if default is not None and lo <= default <= hi else lo
    if hi <= lo:
        return lo
    name = buttons or key.removeprefix("keep_")
    b1, b2, sl = st.columns([1, 1, 12], vertical_alignment="bottom")
    b1.button("◀", key=f"{name}_prev", on_click=_nudge, args=(key, -1, lo, hi), help="Previous step",
              width="stretch")
    b2.button("▶", key=f"{name}_next", on_click=_nudge, args=(key, 1, lo, hi), help="Next step", width="stretch")
    return int(sl.slider(label, lo, hi, key=key, help=help))
