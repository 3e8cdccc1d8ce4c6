"""Every page's export buttons, built as if clicked: the Trace file loads back, the CSV zip
holds one readable table per Trace table, and the Perfetto file is strict JSON with a slice per
batch entry. (The buttons build their files lazily, on click; AppTest does not click download
buttons, so the panel is wrapped to keep the traces it was given.)"""
from __future__ import annotations

import io
import json
import zipfile
from pathlib import Path

import pandas as pd
import pytest
from streamlit.testing.v1 import AppTest

import ui.exports
from sim.export import chrome_trace_bytes
from sim.trace import TABLES, Trace

APP = str(Path(__file__).resolve().parents[1] / "app.py")
PAGES = ["playback", "compare", "llama_log", "batching", "chunked_prefill", "policies", "admission",
         "kv_memory", "tenants"]


def refuse(name):
    raise ValueError(f"{name} is not JSON")


@pytest.mark.parametrize("page", PAGES)
def test_every_export_of_the_default_run_builds_and_parses(page, monkeypatch):
    given = []
    original = ui.exports.export_panel

    def keep(trace, stem, key=None, label=""):
        given.append((trace, stem))
        original(trace, stem, key=key, label=label)

    monkeypatch.setattr(ui.exports, "export_panel", keep)
    at = AppTest.from_file(APP, default_timeout=180)
    at.switch_page(f"pages/{page}.py").run()
    assert not at.exception, at.exception
    assert given, f"{page}: no export panel on the default run"
    assert len(at.get("download_button")) >= 3 * len(given)
    for trace, stem in given:
        if not isinstance(trace, Trace):   # a page that makes its run on a click (Admission)
            trace = trace()
        back = Trace.from_bytes(trace.to_bytes())
        assert back.source == trace.source and len(back.batch) == len(trace.batch)
        pd.testing.assert_frame_equal(back.steps.reset_index(drop=True), trace.steps.reset_index(drop=True),
                                      check_dtype=False)
        with zipfile.ZipFile(io.BytesIO(ui.exports.tables_zip(trace, stem))) as z:
            assert sorted(z.namelist()) == sorted(f"{stem}.{t}.csv" for t in TABLES)
            batch = pd.read_csv(z.open(f"{stem}.batch.csv"))
            assert len(batch) == len(trace.batch)
        doc = json.loads(chrome_trace_bytes(trace), parse_constant=refuse)
        slices = [e for e in doc["traceEvents"] if e["ph"] == "X"]
        assert len(slices) == len(trace.batch)
