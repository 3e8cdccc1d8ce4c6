"""The llama-server log reader, checked against the server's own numbers.

Fixtures: tests/fixtures/llama-logs/<build>/ hold real `llama-server -v` logs of two builds
(c392e5094 of 2025-02 and 34af94cd9 of 2026-08) with the client's manifests of what was sent and
what the server answered (copied from shared/llama-logs; the 32 MB soak is stored gzipped).
"""
from __future__ import annotations

import gzip
import io
import json
import random
import re
import subprocess
import sys
import threading
from functools import lru_cache
from pathlib import Path

import numpy as np
import pytest

from reader_check import read_llama_log
from servers.llama_server import LlamaLogReader, server_runs_table, summary, workload_from_trace
from sim.simulate import simulate
from sim.trace import Trace

ROOT = Path(__file__).resolve().parents[3]
FIX = ROOT / "tests" / "fixtures" / "llama-logs"
LOGS = sorted(p for p in FIX.glob("*/*") if p.name.endswith((".log", ".log.gz")))
LOG_IDS = [f"{p.parent.name}/{p.name.split('.')[0]}" for p in LOGS]
SMALL = FIX / "34af94cd9" / "s9_kv_pressure_unified.log"
NEW, OLD = "34af94cd9", "c392e5094"


def manifest_of(log: Path) -> dict:
    stem = log.name.split(".")[0]
    return json.loads((log.parent / f"{stem}.json").read_text())


@lru_cache(maxsize=None)
def parsed(log: Path) -> Trace:
    return read_llama_log(log)


def raw_text(log: Path) -> str:
    data = log.read_bytes()
    if log.name.endswith(".gz"):
        data = gzip.decompress(data)
    return data.decode("utf-8", "replace")


def expected_finish(req: dict) -> str:
    resp = req.get("response") or {}
    if req.get("http_status", 200) >= 400 or "error" in resp:
        return "error"
    if not resp:
        return "cancelled" if req.get("client_cancelled") else "unknown"
    reason = resp.get("stop_type") or resp.get("finish_reason")
    return {"eos": "stop", "word": "stop", "stop": "stop", "limit": "limit", "length": "limit"}.get(reason, reason)


def match_tasks(log: Path):
    """Map manifest requests to rebuilt tasks: arrival order, allowing requests sent within a
    few milliseconds of each other to swap, and checking slot and counts."""
    man = manifest_of(log)
    reqs = sorted(man["requests"], key=lambda r: (r.get("t_send", 0.0), r["index"]))
    tasks = summary(parsed(log))["tasks"]
    assert len(tasks) == len(reqs), "one task per request"
    free = list(range(len(tasks)))
    pairs = []
    for i, req in enumerate(reqs):
        resp = req.get("response") or {}
        tm = resp.get("timings")
        want = expected_finish(req)
        cands = [j for j in free if abs(j - i) <= 6]
        pick = None
        for j in sorted(cands, key=lambda j: abs(j - i)):
            t = tasks[j]
            if tm:
                if (t["prompt_tokens"], t["generated_tokens"]) != (tm["prompt_n"], tm["predicted_n"]):
                    continue
                if tm.get("cache_n") is not None and t["cached_tokens"] != tm["cache_n"]:
                    continue
                if resp.get("id_slot") is not None and t["slot"] != resp["id_slot"]:
                    continue
            elif t["finish"] != want:
                continue
            pick = j
            break
        assert pick is not None, f"request {req['index']} ({want}, {tm}) has no matching task near position {i}"
        free.remove(pick)
        pairs.append((req, tasks[pick]))
    return pairs


# ------------------------------------------------------------------------------------------
# Ground truth: the server's timings for every request
# ------------------------------------------------------------------------------------------

@pytest.mark.parametrize("log", LOGS, ids=LOG_IDS)
def test_task_counts_equal_server_timings(log):
    pairs = match_tasks(log)
    checked = 0
    for req, task in pairs:
        tm = (req.get("response") or {}).get("timings")
        assert task["finish"] == expected_finish(req), (req["index"], task)
        if not tm:
            continue
        checked += 1
        assert task["prompt_tokens"] == tm["prompt_n"]
        assert task["generated_tokens"] == tm["predicted_n"]
        if tm.get("cache_n") is not None:
            assert task["cached_tokens"] == tm["cache_n"]
    assert checked == sum(1 for r in manifest_of(log)["requests"] if (r.get("response") or {}).get("timings"))


@pytest.mark.parametrize("log", LOGS, ids=LOG_IDS)
def test_rebuilt_batches_account_for_every_token(log):
    """Per task, the batch entries themselves sum to the server's counts: prompt chunks to
    prompt_n, decode entries + 1 to predicted_n; and the server's own timing lines agree."""
    tr = parsed(log)
    b = tr.batch
    pre = b[b["kind"] == "prefill"].groupby("request")["tokens"].sum()
    dec = b[b["kind"] == "decode"].groupby("request")["tokens"].sum()
    r = tr.requests.set_index("request")
    for req, task in match_tasks(log):
        tm = (req.get("response") or {}).get("timings")
        if not tm:
            continue
        key = r.index[r["task"].to_numpy() == task["task"]][0]
        assert int(pre.get(key, 0)) == tm["prompt_n"]
        assert int(dec.get(key, 0)) + 1 == tm["predicted_n"]
        assert r.loc[key, "server_prompt_n"] == tm["prompt_n"]
        assert r.loc[key, "server_predicted_n"] == tm["predicted_n"]
    assert tr.meta["warnings"] == []
    assert tr.meta["unparsed_lines"] == 0


@pytest.mark.parametrize("log", LOGS, ids=LOG_IDS)
def test_batch_sizes_against_the_log(log):
    tr = parsed(log)
    text = raw_text(log)
    steps = tr.steps
    n_batch = tr.meta["n_batch"]
    cmd = manifest_of(log)["server_command"]
    mb = re.search(r" -b (\d+)", cmd)
    n_ctx = int(re.search(r" -c (\d+)", cmd).group(1))
    assert n_batch == min(int(mb.group(1)) if mb else 2048, n_ctx)   # llama.cpp caps n_batch at n_ctx
    assert (steps["num_tokens"] <= n_batch).all()
    assert (steps["num_tokens"] > 0).all()
    logged = [int(x) for x in re.findall(r"srv  update_slots: decoding batch, n_tokens = (\d+)", text)]
    if logged:  # OLD: the server prints each batch's size; the rebuilt entries sum to it
        assert steps["num_tokens"].tolist() == logged
        assert steps["logged_tokens"].tolist() == logged
    else:       # NEW: one model call per `posting NEXT_RESPONSE` iteration that reached llama_decode
        parts = text.split("srv  update_slots: posting NEXT_RESPONSE")[1:]
        assert len(steps) == sum(1 for p in parts if "decode: n_batch (effective) = " in p)
    assert tr.meta["batch_mismatches"] == 0


def test_soak_has_every_model_call():
    tr = parsed(FIX / NEW / "s8_soak.log.gz")
    assert len(tr.steps) == 11419
    assert len(tr.requests) == 300
    assert (tr.requests["finish_reason"] == "cancelled").sum() == 24


@pytest.mark.parametrize("build", [NEW, OLD])
def test_example_11_long_prompt_in_chunks_beside_one_decode_token(build):
    """s1: -b 256; slot 0 generates while a 2,400-token prompt arrives for slot 1: it is
    processed in 9 x 255 + 105 chunks, each beside slot 0's single decode token."""
    tr = parsed(FIX / build / "s1_two_slots_chunked_prompt.log")
    r = tr.requests
    long_key = r.loc[r["prompt_len"] == 2400, "request"].iloc[0]
    b = tr.batch
    chunks = b[(b["request"] == long_key) & (b["kind"] == "prefill")]
    assert chunks["tokens"].tolist() == [255] * 9 + [105]
    assert chunks["computed_before"].tolist() == [255 * i for i in range(10)]
    assert chunks["sampled"].tolist() == [False] * 9 + [True]
    steps = tr.steps.set_index("step")
    for k, s in enumerate(chunks["step"]):
        batch = b[b["step"] == s]
        assert steps.loc[s, "decode_tokens"] == 1
        assert batch.loc[batch["kind"] == "decode", "slot"].tolist() == [0]
        assert steps.loc[s, "num_tokens"] == (256 if k < 9 else 106)
    assert list(chunks["step"]) == list(range(chunks["step"].iloc[0], chunks["step"].iloc[0] + 10))


# ------------------------------------------------------------------------------------------
# What the server printed, and the task life cycle
# ------------------------------------------------------------------------------------------

@pytest.mark.parametrize("log", LOGS, ids=LOG_IDS)
def test_meta_as_printed(log):
    tr = parsed(log)
    man = manifest_of(log)
    m = tr.meta
    assert m["source"] == "llama-server log"
    assert m["build"] == f"{man['llama_cpp']['build_number']} ({man['llama_cpp']['short']})"
    assert m["time_unit"] == ("ms" if man["log_has_prefix_and_timestamps"] else "steps")
    cmd = man["server_command"]
    assert m["n_slots"] == int(re.search(r" -np (\d+)", cmd).group(1))
    assert m["n_ctx"] == int(re.search(r" -c (\d+)", cmd).group(1))
    mub = re.search(r" -ub (\d+)", cmd)
    assert m["n_ubatch"] == (int(mub.group(1)) if mub else 512)
    if "-nocb" in cmd:
        assert m["cont_batching"] is False
    else:
        assert m["cont_batching"] in (True, None)
    steps = tr.steps
    if m["time_unit"] == "ms":
        assert steps["start"].notna().all() and steps["end"].notna().all()
        assert (steps["end"] >= steps["start"]).all()
        assert (np.diff(steps["start"].to_numpy()) >= 0).all()
    else:
        assert steps["start"].tolist() == list(range(len(steps)))
    r = tr.requests
    done = r[r["finish_reason"].isin(["stop", "limit"])]
    assert (done["first_scheduled_step"] <= done["first_token_step"]).all()
    assert (done["first_token_step"] <= done["finish_step"]).all()
    assert (r["arrival_step"].dropna() <= r["first_scheduled_step"].reindex(r["arrival_step"].dropna().index)
            .fillna(10**9)).all()


def test_no_cont_batching_prompts_wait_for_generation():
    tr = parsed(FIX / NEW / "s3_no_cont_batching.log")
    per = tr.batch.groupby("step")["kind"].agg(set)
    assert not any(kinds == {"decode", "prefill"} for kinds in per)


def events_of(tr, kind):
    return tr.events[tr.events["kind"] == kind]


def test_kv_pressure_failed_call_is_events_not_steps():
    tr = parsed(SMALL)
    text = raw_text(SMALL)
    assert len(tr.steps) == 5   # 5 iterations called the model; the last one failed 10 times
    assert len(events_of(tr, "kv_fail")) == text.count("failed to find free space in the KV cache")
    retries = events_of(tr, "batch_retry")["detail"].tolist()
    assert retries[0].endswith("n_batch = 256") and retries[-1].endswith("n_batch = 1")
    assert events_of(tr, "decode_error")["step"].tolist() == [5]
    assert tr.meta["failed_steps"] == [5]
    assert set(tr.requests["finish_reason"]) == {"error"}
    assert not tr.batch.loc[tr.batch["step"] == 5, "sampled"].any()
    # the chunk cut short by the error ends at the slot's size on release (632 - 122)
    assert 510 in tr.batch.loc[tr.batch["step"] == 5, "tokens"].tolist()


def test_life_cycle_events():
    s6 = parsed(FIX / NEW / "s6_stream_cancel_seed601.log")
    assert len(events_of(s6, "cancel")) == 3
    assert (s6.requests["finish_reason"] == "cancelled").sum() == 3
    kinds = set(s6.events["kind"])
    assert {"arrive", "admit", "prompt_done", "finish", "cancel"} <= kinds
    s4 = parsed(FIX / NEW / "s4_small_ctx_context_shift_on.log")
    assert len(events_of(s4, "context_shift")) == 4
    err = s4.requests[s4.requests["finish_reason"] == "error"]
    assert len(err) == 1 and bool(err["rejected"].iloc[0]) and err["prompt_len"].iloc[0] == 700
    o4 = parsed(FIX / OLD / "s4_small_ctx_context_shift_default_on.log")
    assert len(events_of(o4, "truncate")) == 1
    assert len(events_of(o4, "batch_retry")) == 4 and len(events_of(o4, "context_shift")) == 4
    s5 = parsed(FIX / NEW / "s5_prompt_cache_reuse.log")
    assert len(events_of(s5, "cache_hit")) == 1
    burst = parsed(FIX / NEW / "s2_np4_mixed_burst_seed2211.log")
    assert len(events_of(burst, "defer")) == 8 and len(events_of(burst, "requeue")) == 8
    r = burst.requests
    assert r["max_tokens"].notna().all()
    assert (r["arrival_time"] <= r["first_scheduled_time"]).all()
    assert (r["first_scheduled_time"] < r["first_token_time"]).all()


def test_trace_round_trip():
    tr = parsed(FIX / OLD / "s6_stream_cancel_seed603.log")
    back = Trace.from_bytes(tr.to_bytes())
    assert back.to_bytes() == tr.to_bytes()
    assert summary(back) == summary(tr)


# ------------------------------------------------------------------------------------------
# Inputs: path, .gz, bytes, file objects, line iterators; progress; concatenated runs
# ------------------------------------------------------------------------------------------

def test_every_kind_of_input_gives_the_same_trace(tmp_path):
    log = FIX / OLD / "s5_prompt_cache_reuse.log"
    data = log.read_bytes()
    ref = summary(read_llama_log(log))
    gz = tmp_path / "x.log.gz"
    gz.write_bytes(gzip.compress(data))
    text = data.decode("utf-8")
    seen = []
    variants = [
        read_llama_log(str(log), progress=lambda d, t: seen.append((d, t))),
        read_llama_log(gz), read_llama_log(data), read_llama_log(gzip.compress(data)),
        read_llama_log(io.BytesIO(data)), read_llama_log(io.StringIO(text)),
        read_llama_log(iter(text.splitlines(keepends=True))), read_llama_log(iter(data.splitlines())),
        read_llama_log(log, block_size=4096),
        read_llama_log(io.TextIOWrapper(io.BytesIO(data), encoding="utf-8")),
        read_llama_log(io.BytesIO(gzip.compress(data))),
    ]
    for v in variants:
        assert summary(v) == ref
    assert seen[-1] == (len(data), len(data))
    assert all(a[0] <= b[0] for a, b in zip(seen, seen[1:]))


def test_a_line_too_long_is_skipped_the_same_way_when_read_ahead():
    """A 17 MiB run of bytes without a line end: skipped with one warning, the lines around it
    read; blocks of 1 MiB, so the skip spans many blocks (bytes: block by block on the reader's
    thread; as a stream: cut and tokenized ahead on another thread, compared in reader_check)."""
    log = FIX / NEW / "s5_prompt_cache_reuse.log"
    data = log.read_bytes()
    mid = data.index(b"\n", len(data) // 2) + 1
    tr = read_llama_log(data[:mid] + b"x" * (17 << 20) + data[mid:], block_size=1 << 20)
    assert [w for w in tr.meta["warnings"] if "longer than" in w] == [
        "a line longer than 16 MiB was skipped (binary data?)"]
    ref = summary(parsed(log))
    # the one line after the skipped bytes is lost with them (it has no line end of its own)
    assert len(summary(tr)["tasks"]) == len(ref["tasks"]) and summary(tr)["batches"] >= ref["batches"] - 1


class _FailingStream(io.RawIOBase):
    """A binary stream that fails after `ok` bytes, as a network file system or a cut pipe can."""

    def __init__(self, data: bytes, ok: int):
        self.data, self.ok, self.pos = data, ok, 0

    def readable(self):
        return True

    def readinto(self, b):
        if self.pos >= self.ok:
            raise OSError("connection reset")
        n = min(len(b), self.ok - self.pos)
        b[:n] = self.data[self.pos:self.pos + n]
        self.pos += n
        return n


def test_a_stream_that_fails_keeps_what_was_read():
    data = (FIX / OLD / "s5_prompt_cache_reuse.log").read_bytes()
    cut = data.index(b"\n", len(data) // 2) + 1
    tr = read_llama_log(_FailingStream(data, cut), block_size=4096)
    assert any(w.startswith("the input stopped early (OSError: connection reset)") for w in tr.meta["warnings"])
    assert summary(tr) == summary(read_llama_log(data[:cut]))   # everything up to the failure is kept
    assert not [t for t in threading.enumerate() if t.name == "llamalog-prefetch"]   # the reading thread is done


def test_a_stream_that_breaks_its_contract_raises_as_without_the_thread():
    """Not the input's fault (a stream whose readinto raises ValueError, e.g. closed): the error
    reaches the caller as it is, from the reader's thread, and the reading thread is gone."""
    class Closed(_FailingStream):
        def readinto(self, b):
            raise ValueError("I/O operation on closed file")

    with pytest.raises(ValueError, match="closed file"):
        read_llama_log(Closed(b"", 0))
    assert not [t for t in threading.enumerate() if t.name == "llamalog-prefetch"]


def test_concatenated_logs_are_separate_runs():
    a, b = FIX / OLD / "s5_prompt_cache_reuse.log", FIX / NEW / "s9_kv_unified_small_ubatch.log"
    tr = read_llama_log(a.read_bytes() + b.read_bytes())
    assert tr.meta["runs"] == 2
    assert len(tr.steps) == len(parsed(a).steps) + len(parsed(b).steps)
    assert len(tr.requests) == len(parsed(a).requests) + len(parsed(b).requests)
    assert tr.requests["request"].is_unique
    runs = tr.meta["server_runs"]
    assert [r["config"]["n_batch"] for r in runs] == [parsed(a).meta["n_batch"], parsed(b).meta["n_batch"]]
    assert [r["build"] for r in runs] == [parsed(a).meta["build"], parsed(b).meta["build"]]
    assert runs[1]["first_step"] == len(parsed(a).steps) + 1
    assert tr.meta["n_batch"] is None   # the runs differ: see server_runs
    differ = [w for w in tr.meta["warnings"] if w.startswith("the server runs in this log differ in ")]
    assert len(differ) == 1 and "n_batch" in differ[0]   # one warning naming every differing setting
    table = server_runs_table(tr)
    assert table["run"].tolist() == [1, 2] and table["n_batch"].tolist() == [r["config"]["n_batch"] for r in runs]
    assert table["calls"].tolist() == [len(parsed(a).steps), len(parsed(b).steps)]
    assert table["first call"].tolist() == [1, len(parsed(a).steps) + 1]
    assert table["build"].tolist() == [parsed(a).meta["build"], parsed(b).meta["build"]]
    assert len(server_runs_table(parsed(a))) == 1
    assert not any("exceed" in w for w in tr.meta["warnings"])
    assert (np.diff(tr.steps["start"].dropna().to_numpy()) >= 0).all() or tr.time_unit == "steps"


# ------------------------------------------------------------------------------------------
# Bad input never raises
# ------------------------------------------------------------------------------------------

@pytest.mark.parametrize("seed", range(6))
def test_random_bytes(seed):
    rng = random.Random(seed)
    data = bytes(rng.getrandbits(8) for _ in range(rng.choice([0, 1, 7, 500, 20000])))
    tr = read_llama_log(data)
    assert len(tr.steps) == 0
    if data.strip():
        assert tr.meta["warnings"]


def test_binary_and_garbage_mixed_into_a_real_log():
    lines = SMALL.read_bytes().splitlines(keepends=True)
    rng = random.Random(5)
    for i in sorted(rng.sample(range(len(lines)), 40), reverse=True):
        lines.insert(i, bytes(rng.getrandbits(8) for _ in range(rng.randint(1, 300))))
    lines.insert(900, b"\x00" * 70000)   # a long binary run without newlines
    tr = read_llama_log(b"".join(lines))
    assert len(tr.steps) >= 1
    assert (tr.batch["tokens"] >= 0).all()


def test_truncation_at_every_line_of_a_small_log():
    data = SMALL.read_bytes()
    starts = [0] + [m.end() for m in re.finditer(rb"\n", data)]
    first_task = data.index(b"new task, id = 0/1")
    cuts = [p for i, p in enumerate(starts) if p >= first_task - 2000 or i % 100 == 0]
    n_batch = parsed(SMALL).meta["n_batch"]
    prev_steps = 0
    for k, p in enumerate(cuts):
        for cut in ((p, p + 7) if k % 8 == 0 else (p,)):   # at every line start; inside every 8th line
            tr = read_llama_log(data[:cut])
            s = tr.steps
            assert (s["num_tokens"] <= n_batch).all()
            assert (tr.batch["tokens"] >= 0).all()
            assert set(tr.requests["finish_reason"]) <= {"stop", "limit", "context", "cancelled", "error",
                                                          "unknown"}
        assert len(s) >= prev_steps
        prev_steps = len(s)
    assert prev_steps == 5


def test_truncation_at_every_line_of_an_old_build_log():
    """The 2025-02 build's layout (OLD line families): cut at every line start through the first
    tasks, then at every 3rd (every 50th in the start-up block), and inside every 8th cut line;
    the rebuild grows with the cut, never breaks its invariants, and ends as the whole log's."""
    log = FIX / OLD / "s5_prompt_cache_reuse.log"
    data = log.read_bytes()
    starts = [0] + [m.end() for m in re.finditer(rb"\n", data)]
    first_task = data.index(b"new task, id = 0/1")
    near = data.count(b"\n", 0, first_task) + 300   # every line of the first tasks, then every 3rd
    cuts = [p for i, p in enumerate(starts) if (p >= first_task - 500 and (i < near or i % 3 == 0)) or i % 50 == 0]
    cuts.append(len(data))
    full = parsed(log)
    n_batch = full.meta["n_batch"]
    prev_steps = 0
    for k, p in enumerate(cuts):
        for cut in ((p, p + 7) if k % 8 == 0 else (p,)):
            tr = read_llama_log(data[:cut])
            s = tr.steps
            assert (s["num_tokens"] <= n_batch).all()
            assert (tr.batch["tokens"].dropna() >= 0).all()
            assert set(tr.requests["finish_reason"]) <= {"stop", "limit", "context", "cancelled", "error",
                                                          "unknown"}
        assert len(s) >= prev_steps
        prev_steps = len(s)
    assert prev_steps == len(full.steps) and len(tr.batch) == len(full.batch)


def test_cut_in_the_middle_of_a_batch_is_reported():
    data = (FIX / NEW / "s1_two_slots_chunked_prompt.log").read_bytes()
    i = data.index(b"cached n_tokens = 1020")
    tr = read_llama_log(data[:i + 40])
    assert any("batch was being built" in w for w in tr.meta["warnings"])
    assert any("had not finished" in w for w in tr.meta["warnings"])
    assert set(tr.requests["finish_reason"]) == {"unknown"}
    assert tr.requests["finish_time"].isna().all()


@pytest.mark.parametrize("log, seed", [(f"{OLD}/s6_stream_cancel_seed603.log", s) for s in range(3)]
                         + [(f"{NEW}/s2_np4_mixed_staggered_seed2201.log", s) for s in range(2)])
def test_shuffled_lines(log, seed):
    lines = (FIX / log).read_bytes().splitlines(keepends=True)
    random.Random(seed).shuffle(lines)
    tr = read_llama_log(b"".join(lines))
    assert (tr.batch["tokens"].dropna() >= 0).all()
    assert set(tr.requests["finish_reason"]) <= {"stop", "limit", "context", "cancelled", "error", "unknown"}
    s = tr.steps
    assert (s["num_tokens"].dropna() >= 0).all() and s["step"].is_monotonic_increasing
    summary(tr)


def test_interleaved_pairs_of_lines_still_rebuild():
    """Lines of other threads between a batch's lines do not break the rebuild."""
    log = FIX / NEW / "s2_np4_mixed_staggered_seed2201.log"
    lines = log.read_bytes().splitlines(keepends=True)
    noise = [b"srv    operator(): http: streamed chunk: data: {\"content\":\"x\"}\n", b"\n",
             b"res  add_waiting_: add task 999999 to waiting list. current waiting = 0 (before add)\n"]
    out = []
    for i, ln in enumerate(lines):
        out.append(ln)
        if i % 3 == 0:
            out.append(noise[i % 2])
    assert summary(read_llama_log(b"".join(out))) == summary(parsed(log))


def test_html_and_javascript_in_token_text_are_plain_data():
    evil = "<script>alert('x')</script><img src=x onerror=alert(1)>"
    fake = "slot update_slots: id  0 | task 77 | kv cache rm [0, end)"
    log = FIX / OLD / "s5_prompt_cache_reuse.log"
    lines = log.read_text().splitlines(keepends=True)
    out = []
    for ln in lines:
        out.append(ln)
        if "next token:" in ln:
            out.append(f"srv  log_server_r: response: {{\"content\":\"{evil} {fake}\"}}\n")
    out.append(f"slot update_slots: id  0 | task 5 | {evil}\n")   # a slot line nobody understands
    tr = read_llama_log("".join(out))
    assert summary(tr)["tasks"] == summary(parsed(log))["tasks"]
    assert "77" not in set(tr.requests["request"])
    assert tr.meta["unparsed_lines"] == 1
    assert evil in tr.meta["unparsed_examples"][0]


def test_unknown_build_degrades_and_reports():
    """An in-between build (2025-10 .. 2026-05 formats, per FORMAT.md section 9): batch totals,
    `n_tokens = X, memory_seq_rm`, `prompt processing progress, n_tokens = P, batch.n_tokens = T`;
    plus a line family nobody knows."""
    text = "\n".join([
        "build: 6900 (abcdef123) with cc for x86_64",
        "srv  update_slots: posting NEXT_RESPONSE",
        "slot update_slots: id  0 | task 3 | new prompt, n_ctx_slot = 4096, n_keep = 0, task.n_tokens = 300",
        "slot update_slots: id  0 | task 3 | n_tokens = 0, memory_seq_rm [0, end)",
        "slot update_slots: id  0 | task 3 | prompt processing progress, n_tokens = 300, batch.n_tokens = 300, "
        "progress = 1.0",
        "slot update_slots: id  0 | task 3 | prompt done, n_tokens = 300, batch.n_tokens = 300",
        "slot update_slots: id  0 | task 3 | some brand new message = 12",
        "srv  update_slots: decoding batch, n_tokens = 300",
        "slot process_toke: id  0 | task 3 | n_decoded = 1, n_remaining = 4, next token:   450 'x'",
        "srv  update_slots: posting NEXT_RESPONSE",
        "slot update_slots: id  0 | task 3 | slot decode token, n_ctx = 4096, n_tokens = 301, truncated = 0",
        "srv  update_slots: decoding batch, n_tokens = 1",
        "srv  update_slots: frobnicating the batch",
        "",
    ])
    tr = read_llama_log(text)
    s = summary(tr)
    assert s["build"] == "6900 (abcdef123)" and s["batches"] == 2
    assert s["tasks"] == [{"task": 3, "slot": 0, "prompt_tokens": 300, "cached_tokens": 0, "generated_tokens": 1,
                           "finish": "unknown", "partial": True}]   # still running when the log ends
    assert tr.steps["num_tokens"].tolist() == [300, 1] and tr.meta["batch_mismatches"] == 0
    assert tr.batch["computed_before"].tolist() == [0, 300]
    assert s["unparsed_lines"] == 2


# ------------------------------------------------------------------------------------------
# CLI and re-simulation
# ------------------------------------------------------------------------------------------

def test_cli_json_and_trace(tmp_path):
    log = FIX / NEW / "s9_kv_unified_small_ubatch.log"
    path = tmp_path / "t.trace"
    out = subprocess.run([sys.executable, "-m", "sim", "llamalog", str(log), "--json", "-o", str(path)], cwd=ROOT,
                         capture_output=True, text=True, check=True)
    s = json.loads(out.stdout)
    assert set(s) == {"build", "clock", "batches", "tasks", "unparsed_lines"}
    assert s == summary(parsed(log))
    assert set(s["tasks"][0]) == {"task", "slot", "prompt_tokens", "cached_tokens", "generated_tokens", "finish",
                                  "partial"}
    back = Trace.load(str(path))
    assert back.source == "llama-server log" and summary(back) == s
    bad = subprocess.run([sys.executable, "-m", "sim", "llamalog", str(tmp_path / "missing.log")], cwd=ROOT,
                         capture_output=True, text=True)
    assert bad.returncode != 0 and "cannot read" in bad.stderr


def test_resimulate_as_llama_slots_and_vllm():
    tr = parsed(FIX / NEW / "s1_two_slots_chunked_prompt.log")
    wl = workload_from_trace(tr)
    assert [r.prompt_len for r in wl.requests] == [25, 2400]
    assert [r.max_tokens for r in wl.requests] == [1500, 16]
    assert wl.config["max_num_seqs"] == 2 and wl.config["max_num_batched_tokens"] == 256
    sim = simulate(wl)   # llama_slots
    b = sim.batch
    long_id = wl.requests[1].id
    assert b[(b["request"] == long_id) & (b["kind"] == "prefill")]["tokens"].tolist() == [255] * 9 + [105]
    vl = simulate(wl, {"scheduler": "vllm"})
    assert (vl.requests["output_tokens"].tolist() == [1500, 16])


def test_resimulation_reproduces_prompt_cache_hits():
    tr = parsed(FIX / NEW / "s5_prompt_cache_reuse.log")
    wl = workload_from_trace(tr)
    assert wl.config["enable_prefix_caching"] is True
    sim = simulate(wl)
    real = tr.requests.set_index("request")["cached_tokens"]
    got = sim.requests.set_index("request")["cached_tokens"]
    assert int(got.sum()) > 0
    assert int(got.sum()) <= int(real.sum())
    for wl_name in ("s3_no_cont_batching", "s9_kv_unified_small_ubatch"):
        w = workload_from_trace(parsed(FIX / NEW / f"{wl_name}.log"))
        simulate(w)
        simulate(w, {"scheduler": "vllm"})
    assert workload_from_trace(parsed(FIX / NEW / "s3_no_cont_batching.log")).config["cont_batching"] is False


def test_reader_feed_in_tiny_pieces():
    data = (FIX / OLD / "s2_np4_mixed_staggered_seed2201.log").read_bytes()
    r = LlamaLogReader()
    for i in range(0, len(data), 997):
        r.feed(data[i:i + 997])
    assert summary(r.finish()) == summary(parsed(FIX / OLD / "s2_np4_mixed_staggered_seed2201.log"))


def test_foreign_line_prefixes_and_crlf():
    """journald-style prefixes before every line, and Windows line ends."""
    for log in (FIX / OLD / "s6_stream_cancel_seed603.log", FIX / NEW / "s5_prompt_cache_reuse.log"):
        ref = parsed(log)
        lines = log.read_bytes().splitlines(keepends=True)
        journald = b"".join(b"Aug 17 10:00:00 host llama-server[4242]: " + ln for ln in lines)
        tr = read_llama_log(journald)
        assert {**summary(tr), "clock": None} == {**summary(ref), "clock": None}
        assert tr.meta["n_batch"] == ref.meta["n_batch"] and tr.meta["n_slots"] == ref.meta["n_slots"]
        if ref.time_unit == "steps":   # no timestamps: records are found behind the foreign prefix,
            assert any("foreign prefix" in w for w in tr.meta["warnings"])   # whose times are the clock
            assert tr.meta["clock"] == "journald prefix" and tr.time_unit == "ms"
        else:
            assert tr.meta["clock"] == ref.meta["clock"] == "server timestamps"
        assert summary(read_llama_log(log.read_bytes().replace(b"\n", b"\r\n"))) == summary(ref)


def test_cut_or_damaged_gzip_and_absurd_numbers():
    data = (FIX / OLD / "s5_prompt_cache_reuse.log").read_bytes()
    gz = gzip.compress(data)
    full = len(parsed(FIX / OLD / "s5_prompt_cache_reuse.log").steps)
    half = read_llama_log(gz[:len(gz) // 2])
    assert 0 < len(half.steps) < full
    assert any("ends early" in w for w in half.meta["warnings"])
    assert len(read_llama_log(gzip.compress(data[:99999]) + gzip.compress(data[99999:])).steps) == full
    read_llama_log(gz[:300] + bytes(300) + gz[600:])
    huge = data.replace(b"kv cache rm [1540, end)", b"kv cache rm [99999999999999999999999999, end)")
    huge = huge.replace(b"n_tokens = 1, progress", b"n_tokens = 123456789012345678901234567890, progress")
    tr = read_llama_log(huge)
    assert len(tr.steps) == full and tr.meta["warnings"]


def test_reading_streams_with_bounded_memory():
    """The 32 MB soak log (gzipped here) parsed in a fresh process: the parse adds well under the
    file's own size to the resident set (it reads blocks, never the whole file or its lines;
    bench/bench_llamalog.py measured 22 MB for it and 42 MB for a 61 MB log)."""
    import subprocess
    import sys
    code = ("import resource, sys; sys.path.insert(0, sys.argv[1]); from servers.llama_server import read_llama_log; "
            "base = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss; tr = read_llama_log(sys.argv[2]); "
            "print(len(tr.steps), resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - base)")
    out = subprocess.run([sys.executable, "-c", code, str(Path(__file__).resolve().parents[3]),
                          str(FIX / NEW / "s8_soak.log.gz")], capture_output=True, text=True, check=True)
    steps, added_kb = map(int, out.stdout.split())
    assert steps > 10_000
    assert added_kb < 64 * 1024, f"the parse added {added_kb / 1024:.0f} MB for a 32 MB log"
