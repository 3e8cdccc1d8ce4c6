"""Download buttons for a run: the Trace file, its tables as CSV, and Chrome trace / Perfetto JSON.

    from ui.exports import export_panel
    export_panel(trace, "lesson_abc", key="pb")   # three buttons in a row; key keeps widget ids unique
    export_panel(lambda: run_trace(...), "run")      # or a function that makes the Trace, on a click

Every file is built only when its button is clicked (lazy callables, on_click="ignore": no
rerun), so a large trace costs nothing until someone asks for it. Pages add their own extra
buttons (a workload file, an oracle JSONL) next to the panel if they have any.
"""
from __future__ import annotations

import io
import zipfile
from typing import Callable

import streamlit as st

from sim.export import chrome_trace_bytes, table_csv
from sim.trace import TABLES, Trace


def tables_zip(trace: Trace, stem: str) -> bytes:
    """A zip of one CSV per table of the trace (<stem>.<table>.csv)."""
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", compression=zipfile.ZIP_DEFLATED) as z:
        for name in TABLES:
            info = zipfile.ZipInfo(f"{stem}.{name}.csv", date_time=(1980, 1, 1, 0, 0, 0))  # same bytes every time
            info.compress_type = zipfile.ZIP_DEFLATED
            z.writestr(info, table_csv(trace, name))
    return buf.getvalue()


def export_panel(trace: Trace | Callable[[], Trace], stem: str, key: str | None = None, label: str = "") -> None:
    """Three download buttons side by side: Trace file, CSV tables (zip), Perfetto JSON.

    `trace` may be a function that makes the Trace (called only when a button is clicked, so a
    page can offer a run it does not need itself; it should cache its result). `stem` names the
    files; `key` (default: stem) prefixes the widget keys, so a page with two runs calls it twice
    with different keys; `label` is put before each button's text.
    """
    k = key or stem
    get = (lambda: trace) if isinstance(trace, Trace) else trace
    lead = f"{label} " if label else ""
    c1, c2, c3 = st.columns(3)
    c1.download_button(f"{lead}Trace file (.trace.gz)", data=lambda: get().to_bytes(),
                       file_name=f"{stem}.trace.gz", mime="application/gzip", on_click="ignore",
                       key=f"{k}_dl_trace", icon=":material/download:", width="stretch",
                       help="Every table of the run in one file; load it with sim.trace.Trace.load.")
    c2.download_button(f"{lead}Tables as CSV (.zip)", data=lambda: tables_zip(get(), stem),
                       file_name=f"{stem}.tables.zip", mime="application/zip", on_click="ignore",
                       key=f"{k}_dl_csv", icon=":material/table_view:", width="stretch",
                       help="One CSV per table: " + ", ".join(TABLES) + ".")
    c3.download_button(f"{lead}Perfetto / Chrome trace (.json)", data=lambda: chrome_trace_bytes(get()),
                       file_name=f"{stem}.perfetto.json", mime="application/json", on_click="ignore",
                       key=f"{k}_dl_perfetto", icon=":material/timeline:", width="stretch",
                       help="Open in ui.perfetto.dev or chrome://tracing: a track per slot with a slice per "
                            "batch entry, counters for the queue and free KV blocks, preemption and "
                            "rejection markers, and arrows linking each request's chunks.")
