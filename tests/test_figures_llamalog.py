"""figures.llamalog on real llama-server logs (the bundled samples) and their re-simulations."""
from __future__ import annotations

import gzip
import os
from pathlib import Path

import numpy as np
import plotly.graph_objects as go
import pytest

import figures.llamalog as fl
from plotly_util import decode
from servers.llama_server import resim as logresim
from servers.llama_server import read_llama_log, summary, workload_from_trace
from sim.simulate import simulate

SAMPLES = Path(__file__).resolve().parents[1] / "samples" / "llama-logs"
S1 = SAMPLES / "s1_two_slots_chunked_prompt.34af94cd9.log.gz"
S3 = SAMPLES / "s3_no_cont_batching.34af94cd9.log.gz"
S6 = SAMPLES / "s6_stream_cancel_seed601.34af94cd9.log.gz"


@pytest.fixture(scope="module")
def s1():
    return read_llama_log(S1)


@pytest.fixture(scope="module")
def s3():
    return read_llama_log(S3)


@pytest.fixture(scope="module")
def s6():
    return read_llama_log(S6)


def bars(fig) -> list[dict]:
    return [t for t in fig.to_plotly_json()["data"] if t["type"] == "bar" and t.get("x") is not None
            and len(decode(t["x"])) and decode(t["x"])[0] is not None]


def test_samples_are_the_real_logs_and_small():
    files = sorted(SAMPLES.glob("*.log.gz"))
    assert len(files) >= 3 and sum(f.stat().st_size for f in files) < 2_000_000
    for f in files:  # every sample reads cleanly, and equals its fixture in tests/
        tr = read_llama_log(f)
        assert len(tr.steps) > 0 and not tr.meta["warnings"] and tr.meta["unparsed_lines"] == 0
        stem, build = f.name.removesuffix(".log.gz").rsplit(".", 1)
        fixture = Path(__file__).parent / "fixtures" / "llama-logs" / build / f"{stem}.log"
        if fixture.exists():
            assert summary(read_llama_log(fixture)) == summary(tr)


def test_batch_figure_stacks_every_entry_by_slot_and_kind(s1):
    fig = fl.batch_figure(s1)
    go.Figure(fig)  # validates
    meta = fig.layout.meta
    assert meta["calls"] == len(s1.steps) == 1500 and meta["bin"] == 1 and meta["entries"] == len(s1.batch)
    total = 0
    for t in bars(fig):
        slot = int(t["name"].split()[-1])
        kind = fl._kind_of(t)
        want = s1.batch[(s1.batch["slot"] == slot) & (s1.batch["kind"] == kind)]
        assert decode(t["y"]).sum() == want["tokens"].sum()
        assert t["marker"]["color"] in (fl.slot_colour(slot), fl._tint(fl.slot_colour(slot), 0.55))
        assert (t["marker"].get("pattern") or {}).get("shape", "") == fl.PATTERN[kind]
        total += decode(t["y"]).sum()
    assert total == s1.batch["tokens"].sum()
    limit = next(t for t in fig.data if t.name and t.name.startswith("batch limit"))
    assert list(limit.y) == [256, 256]
    names = {t.name for t in fig.data if t.showlegend}
    assert {"slot 0", "slot 1", "prompt chunk (hatched)", "decode tokens (solid)"} <= names


def test_example_11_chunks_are_bars(s1):
    """s1: the 2,400-token prompt in 9 × 255 + 105, each beside slot 0's one decode token."""
    fig = fl.batch_figure(s1, (880, 895))
    pre = next(t for t in bars(fig) if t["name"] == "slot 1" and fl._kind_of(t) == "prefill")
    dec = next(t for t in bars(fig) if t["name"] == "slot 0" and fl._kind_of(t) == "decode")
    assert decode(pre["y"]).tolist() == [255] * 9 + [105]
    assert set(decode(pre["x"]).tolist()) <= set(decode(dec["x"]).tolist())
    assert fig.layout.meta["calls"] == 16


def test_long_logs_are_binned_and_keep_the_mean(s1):
    fig = fl.batch_figure(s1, max_bars=100)
    k = fig.layout.meta["bin"]
    assert k == 15
    got = sum((decode(t["y"]) * k).sum() for t in bars(fig))
    assert got == pytest.approx(s1.batch["tokens"].sum())
    assert all(len(decode(t["x"])) <= 100 for t in bars(fig))


def test_mark_and_log_scale(s1):
    fig = fl.batch_figure(s1, (850, 910), mark=882, log_y=True)
    assert fig.layout.yaxis.type == "log"
    assert fig.layout.shapes[0].x0 == 881.5 and fig.layout.shapes[0].x1 == 882.5
    assert list(fig.layout.xaxis.range) == [849.5, 910.5]


def test_task_runs_and_lanes_show_chunks_waits_and_cancels(s1, s6):
    runs = fl.task_runs(s1)
    pre = runs[(runs["request"] == "882") & (runs["kind"] == "prefill")].iloc[0]
    assert (pre["first"], pre["last"], pre["tokens"], pre["calls"]) == (882, 891, 2400, 10)
    fig = fl.slot_lanes_figure(s1)
    assert fig.layout.meta["wall"] and fig.layout.meta["slots"] == 2
    assert fig.layout.xaxis.title.text == "seconds since the log began"
    assert fl.slot_lanes_figure(s1, "calls").layout.meta["wall"] is False

    fig6 = fl.slot_lanes_figure(s6)  # no timestamps: the clock is the call
    assert fig6.layout.meta == {"slots": 4, "runs": len(fl.task_runs(s6)), "wall": False}
    cancel = next(t for t in fig6.data if t.name == "cancelled")
    assert len(cancel.x) == (s6.events["kind"] == "cancel").sum() == 3
    lane_bars = [t for t in fig6.data if t.type == "bar" and t.base is not None]
    assert sum(len(t.base) for t in lane_bars) == len(fl.task_runs(s6))


def test_many_runs_fall_back_to_webgl(s6, monkeypatch):
    monkeypatch.setattr(fl, "MAX_LANE_BARS", 3)
    fig = fl.slot_lanes_figure(s6)
    assert {t.type for t in fig.data if t.name and t.name.startswith(("generating", "prompt"))} == {"scattergl"}


def test_task_table_puts_the_server_numbers_next_to_the_rebuilt_ones(s1, s6):
    t = fl.task_table(s1)
    assert t["task"].tolist() == ["0", "882"]
    assert t["processed (rebuilt)"].tolist() == t["prompt_n (server)"].tolist() == [25, 2400]
    assert t["generated (rebuilt)"].tolist() == t["predicted_n (server)"].tolist() == [1500, 16]
    assert t["check"].tolist() == ["✓", "✓"] and "TTFT (ms)" in t.columns
    t6 = fl.task_table(s6)
    sm = summary(s6)["tasks"]
    assert t6["task"].tolist() == [str(x["task"]) for x in sm]
    assert t6["generated (rebuilt)"].tolist() == [x["generated_tokens"] for x in sm]
    assert (t6["check"] == "–").sum() == 3 and "TTFT (ms)" not in t6.columns  # 3 cancelled, no timestamps
    assert "worst token gap (calls)" in t6.columns   # no timestamps: gaps counted in model calls


def test_task_table_shows_the_stutter_a_long_prompt_causes(s1):
    """s1 (the lesson's Example 11 on a real server): task 0 decodes while task 882's 2,400-token
    prompt goes in 255-token chunks; task 0's longest wait between two tokens is a call that
    carried one of those chunks."""
    t = fl.task_table(s1).set_index("task")
    b = s1.batch
    mine = b[(b["request"] == "0") & b["sampled"].astype(bool)].sort_values("step")
    ends = s1.steps.set_index("step").loc[mine["step"].to_numpy(), "end"].to_numpy(dtype=float)
    gaps = np.diff(ends)
    assert t.loc["0", "worst token gap (ms)"] == round(gaps.max(), 1)
    assert t.loc["0", "mean token gap (ms)"] == round(gaps.mean(), 2)
    worst_step = int(mine["step"].to_numpy()[1:][gaps.argmax()])
    chunks = b[(b["request"] == "882") & (b["kind"] == "prefill")]["step"].tolist()
    assert worst_step in chunks
    assert t.loc["0", "worst token gap (ms)"] > 3 * t.loc["0", "mean token gap (ms)"]


def test_call_tables(s1):
    entries, events, facts = fl.call_tables(s1, 882)
    assert entries[["slot", "task", "kind", "tokens"]].values.tolist() == [[0, "0", "decode tokens", 1],
                                                                          [1, "882", "prompt chunk", 255]]
    assert entries["positions"].tolist() == ["905–906", "0–255"]
    assert ["882", "admit"] in events[["task", "event"]].values.tolist()
    assert facts["tokens"] == 256 and facts["ms"] > 0


def test_step_clock_and_resim_tables(s3):
    wl = workload_from_trace(s3)
    runs = {"log": s3, "llama": simulate(wl), "vllm": simulate(wl, {"scheduler": "vllm"})}
    sc = logresim.step_clock(s3)
    assert sc.time_unit == "model calls" and s3.time_unit == "ms"
    r = sc.requests
    assert np.allclose(r["first_token_time"] - r["arrival_time"],
                       (r["first_token_step"] - r["arrival_step"]).astype(float))
    table = logresim.resim_table(runs).set_index("metric")
    assert table.loc["model calls", "log"] == len(s3.steps)
    assert table.loc["model calls", "llama"] == len(runs["llama"].steps)
    assert table.loc["mean TTFT (calls)", "llama − log"] == pytest.approx(0)  # the simulator reproduces -nocb
    assert table.loc["mean TTFT (calls)", "vllm"] < table.loc["mean TTFT (calls)", "log"]
    ttft = logresim.ttft_table(runs)
    assert len(ttft) == len(s3.requests) and list(ttft.columns) == ["task", "TTFT · log", "TTFT · llama", "TTFT · vllm"]


def test_comparison_figure_aligns_the_runs(s3):
    wl = workload_from_trace(s3)
    runs = {"log": s3, "slots x1": simulate(wl, {"max_num_seqs": 1}), "vllm": simulate(wl, {"scheduler": "vllm"})}
    fig = fl.comparison_figure(runs, log_y=True)
    go.Figure(fig)
    last = max(len(t.steps) for t in runs.values())
    assert [list(getattr(fig.layout, f"xaxis{i or ''}").range) for i in ("", 2, 3)] == [[0.5, last + 0.5]] * 3
    assert len({tuple(getattr(fig.layout, f"yaxis{i or ''}").range) for i in ("", 2, 3)}) == 1
    assert fig.layout.meta["calls"] == [len(t.steps) for t in runs.values()]
    lanes = fl.comparison_figure(runs, "lanes")
    assert lanes.layout.meta["slots"][1] == 1
    assert [a.text for a in lanes.layout.annotations] == list(runs)


def test_bad_input_still_draws(tmp_path):
    tr = read_llama_log(os.urandom(50_000), name="noise.log")
    assert len(tr.steps) == 0
    assert fl.batch_figure(tr).layout.meta["calls"] == 0
    assert fl.slot_lanes_figure(tr).layout.meta["runs"] == 0
    assert list(fl.task_table(tr).columns)[:3] == ["task", "slot", "finish"]


def test_damaged_logs_still_draw():
    """Cut at random points and shuffled: every view and table builds without raising."""
    import random

    rng = random.Random(7)
    data = gzip.decompress(S6.read_bytes())
    lines = data.splitlines(keepends=True)
    rng.shuffle(lines)
    for v in [data[:rng.randrange(len(data))] for _ in range(3)] + [b"".join(lines)]:
        tr = read_llama_log(v)
        fl.batch_figure(tr, log_y=True), fl.slot_lanes_figure(tr), fl.task_table(tr)
        if len(tr.steps):
            s = int(tr.steps["step"].iloc[len(tr.steps) // 2])
            fl.call_tables(tr, s), fl.batch_figure(tr, (s - 30, s + 30), mark=s)
        wl = workload_from_trace(tr)
        if wl.requests:
            runs = {"log": tr, "sim": simulate(wl)}
            fl.comparison_figure(runs), fl.comparison_figure(runs, "lanes"), logresim.resim_table(runs)


def test_call_time_figure_shows_which_calls_made_decoding_stutter(s1, s6):
    fig = fl.call_time_figure(s1)
    go.Figure(fig.to_dict())
    m = fig.layout.meta
    s = s1.steps
    dur = (s["end"] - s["start"]).to_numpy(dtype=float)
    b = s1.batch
    chunk_calls = sorted(set(b.loc[b["kind"] != "decode", "step"]))
    assert m["calls"] == len(s) and m["unknown"] == 0 and m["shown"] == len(s)
    plain, prompt = (next(t for t in fig.data if t.name == n) for n in ("decode-only call", "call with a prompt chunk"))
    assert sorted(int(x) for x in decode(prompt.x)) == chunk_calls
    assert len(decode(plain.x)) + len(chunk_calls) == len(s)
    assert m["worst_ms"] == pytest.approx(np.nanmax(dur)) and m["worst_has_prompt"]
    assert m["worst_call"] in chunk_calls   # Example 11: the long prompt's chunks are the slow calls
    is_chunk = s["step"].isin(chunk_calls).to_numpy()
    assert m["median_decode_ms"] == pytest.approx(np.median(dur[~is_chunk]))
    assert fig.data[-1].name.startswith("median decode-only call")
    assert fl.call_time_figure(s6).layout.meta == {"timed": False} and not fl.call_time_figure(s6).data
    # thinned: every chunk call and every call over twice the median stay
    thin = fl.call_time_figure(s1, max_points=300)
    kept = np.concatenate([decode(t.x) for t in thin.data[:2]]).astype(int)
    slow = s["step"].to_numpy()[dur > 2 * m["median_decode_ms"]]
    assert len(kept) < 400 and set(chunk_calls) <= set(kept) and set(slow) <= set(kept)
