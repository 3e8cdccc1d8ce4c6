"""The llama-server log page reads the logs of 2024 builds (AppTest; servers/llama_server/legacy.py):
a --log-format text log run with -v shows its batches, an early-2024 one its tasks."""
from __future__ import annotations

from pathlib import Path

from streamlit.testing.v1 import AppTest

from plotly_util import chart_specs
from servers.llama_server import read_llama_log, summary

ROOT = Path(__file__).resolve().parents[1]
APP = str(ROOT / "app.py")
Y2024 = ROOT / "tests" / "fixtures" / "llama-logs-2024"
TEXT = Y2024 / "s6_stream_cancel_seed603.text.log.gz"
EARLY = Y2024 / "s2_np4_mixed_staggered_seed2201.early.log.gz"


def metric(at, label: str) -> str:
    return next(m.value for m in at.metric if m.label == label)


def table_with(at, column: str):
    return next(d.value for d in at.dataframe if column in d.value.columns)


def test_the_page_reads_2024_logs():
    at = AppTest.from_file(APP, default_timeout=90)
    at.switch_page("pages/llama_log.py").run()
    assert not at.exception
    # --log-format text, -v: batches, tasks, the clock from the timestamps
    at.sidebar.file_uploader[0].upload(TEXT.name, TEXT.read_bytes(), "application/gzip").run()
    assert not at.exception and not at.error
    sm = summary(read_llama_log(TEXT))
    assert metric(at, "Model calls") == f"{sm['batches']:,}" and sm["batches"] > 100
    assert metric(at, "Tasks") == str(len(sm["tasks"]))
    assert metric(at, "Unparsed lines") == "0"
    assert chart_specs(at)["ll_batches"]["layout"]["meta"]["calls"] == sm["batches"]
    tasks = table_with(at, "processed (rebuilt)")
    assert tasks["slot"].tolist() == [t["slot"] for t in sm["tasks"]]
    assert tasks["generated (rebuilt)"].tolist() == [t["generated_tokens"] for t in sm["tasks"]]
    captions = " ".join(c.value.replace("\\", "") for c in at.caption)
    assert "2024 server" in captions and "whole seconds" in captions
    assert "wall-clock timestamps" in " ".join(md.value for md in at.markdown)
    # early 2024: no batch lines, so the page says so and still lists every task on its slot
    at.sidebar.file_uploader[0].upload(EARLY.name, EARLY.read_bytes(), "application/gzip").run()
    assert not at.exception
    assert metric(at, "Model calls") == "0"
    assert any("No model calls" in e.value for e in at.error)
    sm = summary(read_llama_log(EARLY))
    tasks = next(d.value for d in at.dataframe if "slot" in d.value.columns)
    assert tasks["slot"].tolist() == [t["slot"] for t in sm["tasks"]] and len(sm["tasks"]) == 10
    assert "early-2024" in " ".join(c.value.replace("\\", "") for c in at.caption)
