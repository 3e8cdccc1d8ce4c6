"""A one-page app for test_window_pin.py: ui.window's picker on a run that grows, as a page that
follows a recording sees it. The vLLM sample recording is cut to its first N steps, N growing by
GROW_BY each time the fragment reruns (every RUN_EVERY_S), up to the whole recording.

    streamlit run tests/e2e/window_pin_app.py      # from the repository root
"""
from __future__ import annotations

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

import streamlit as st  # noqa: E402

from servers.vllm.recording import read_recording, to_trace  # noqa: E402
from sim.window import window  # noqa: E402
from ui.window import WindowPicker  # noqa: E402

START, GROW_BY, RUN_EVERY_S = 120, 40, 0.5
WIN = WindowPicker("pin")


@st.cache_resource
def whole():
    return to_trace(read_recording(ROOT / "samples" / "vllm" / "fcfs_kv_pressure.jsonl.gz"))


@st.fragment(run_every=RUN_EVERY_S)
def growing() -> None:
    ss = st.session_state
    full = whole()
    n = min(ss.get("pin_n", START - GROW_BY) + GROW_BY, full.num_steps)
    ss["pin_n"] = n
    trace = window(full, 1, n) if n < full.num_steps else full
    view = WIN.pick(trace, key=f"grow:{n}", clock="time")
    st.caption(f"Grown to {n} steps; the view holds steps {int(view.steps['step'].min())}"
               f"-{int(view.steps['step'].max())}.")


st.session_state.setdefault(WIN.key, st.query_params.get("win", "1-100"))   # the picker opens on a window, so the overview shows
growing()
