"""Scheduler Lab: the Streamlit entry point. A router; each page lives in pages/.

Run: .venv/bin/python -m streamlit run app.py
"""
import streamlit as st

from ui import primer
from ui.guard import guarded

st.set_page_config(page_title="Scheduler Lab", page_icon="🗓️", layout="wide")  # page_icon: no font fetch

# The page list. Add a page: one st.Page line here (pages stay thin: pages -> figures -> sim).
PAGES = {
    "Watch a scheduler": [
        st.Page("pages/playback.py", title="Playback", icon=":material/play_circle:", url_path="playback",
                default=True),
        st.Page("pages/compare.py", title="Compare", icon=":material/compare:", url_path="compare"),
        st.Page("pages/fleet.py", title="Fleet", icon=":material/hub:", url_path="fleet"),
        st.Page("pages/choosing_settings.py", title="Choosing settings", icon=":material/tune:", url_path="choosing_settings"),
        st.Page("pages/llama_log.py", title="llama-server log", icon=":material/receipt_long:", url_path="llama_log"),
        st.Page("pages/server_log.py", title="Server log (vLLM, SGLang, more)", icon=":material/article:",
                url_path="server_log"),
        st.Page("pages/vllm_server.py", title="vLLM server", icon=":material/dns:", url_path="vllm_server"),
        st.Page("pages/live_engine.py", title="Live engine", icon=":material/memory_alt:", url_path="live_engine"),
    ],
    "Ideas, one page each": [
        st.Page("pages/why_batch.py", title="Why batch", icon=":material/stacked_bar_chart:", url_path="why_batch"),
        st.Page("pages/batching.py", title="Static vs continuous batching", icon=":material/view_week:",
                url_path="batching"),
        st.Page("pages/chunked_prefill.py", title="Prefill interference and chunked prefill",
                icon=":material/vertical_split:", url_path="chunked_prefill"),
        st.Page("pages/policies.py", title="Policies and starvation", icon=":material/low_priority:", url_path="policies"),
        st.Page("pages/admission.py", title="Admission and Little's law", icon=":material/input:", url_path="admission"),
        st.Page("pages/kv_memory.py", title="KV memory and preemption", icon=":material/memory:", url_path="kv_memory"),
        st.Page("pages/tenants.py", title="Tenants and fairness", icon=":material/groups:", url_path="tenants"),
        st.Page("pages/disaggregation.py", title="Disaggregation", icon=":material/swap_horiz:", url_path="disaggregation"),
    ],
}

# Streamlit drops a widget's value when its page is not rendered, so settings would reset on a
# page switch. Re-assigning the keys here keeps them (stack.md §2). Convention: a widget whose
# value should survive page switches gets a key starting with "keep_" (never a file uploader or
# button: their values cannot be assigned).
for _key in [k for k in st.session_state if isinstance(k, str) and k.startswith("keep_")]:
    st.session_state[_key] = st.session_state[_key]

# Start loading Plotly's JavaScript now, while the page computes (ui/primer.py).
primer.send()
try:
    # expanded=True: every page in the sidebar, never behind "View N more" (Streamlit folds a
    # menu of more than 12 pages when the sidebar holds other widgets too)
    guarded(st.navigation(PAGES, expanded=True).run)  # an error no page expected: one plain line, details in the log
finally:
    primer.clear()
