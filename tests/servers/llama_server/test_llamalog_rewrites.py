"""The reader on the real logs rewritten into the line formats of the llama.cpp builds between
the two that made them, and into other logging options (../shared/llama-logs/FORMAT.md §9
traces when each line changed). A rewrite changes only how lines are printed, so:

- every task's prompt / cached / generated counts still equal the server's timings in the
  manifest (the server said the same numbers whatever it printed);
- where the build logs every model call, the rebuilt batch table is the one rebuilt from the
  original log, entry for entry, and no batch exceeds n_batch;
- with fewer lines (lower verbosity) the per-task counts survive and no batch is invented.

Each rewrite is a model of a build's lines taken from its source; it is not a log that build
printed, so a real log of such a build can still hold surprises.
"""
from __future__ import annotations

import collections
import re
import shutil
from pathlib import Path

import pytest

from reader_check import read_llama_log
from servers.llama_server import summary
from tests.servers.llama_server.test_llamalog import FIX, NEW, OLD, manifest_of, parsed, raw_text, test_task_counts_equal_server_timings


def _sub(pattern: str, repl, text: str) -> str:
    return re.sub(pattern, repl, text, flags=re.M)


# ---------------------------------------------------------------- OLD (2025-02) -> later builds
def to_2510(s):   # 2025-10: the chunk line names n_past beside memory_seq_rm
    return _sub(r"kv cache rm \[(\d+), end\)", r"n_past = \1, memory_seq_rm [\1, end)", s)


def to_2511(s):   # 2025-10-30: n_past gives way to n_tokens everywhere
    s = _sub(r"slot decode token, n_ctx = (\d+), n_past = (\d+), n_cache_tokens = \d+,",
             r"slot decode token, n_ctx = \1, n_tokens = \2,", s)
    s = _sub(r"kv cache rm \[(\d+), end\)", r"n_tokens = \1, memory_seq_rm [\1, end)", s)
    s = _sub(r"prompt processing progress, n_past = (\d+), n_tokens = (\d+)",
             r"prompt processing progress, n_tokens = \1, batch.n_tokens = \2", s)
    s = _sub(r"prompt done, n_past = (\d+), n_tokens = (\d+)", r"prompt done, n_tokens = \1, batch.n_tokens = \2", s)
    s = _sub(r"stop processing: n_past = ", "stop processing: n_tokens = ", s)
    return _sub(r"(new prompt, [^\n]*)n_prompt_tokens = (\d+)$", r"\1task.n_tokens = \2", s)


def _with_init_sampler(s, before: bool):
    """An `init sampler` line beside each prompt-done line, with the same prefix."""
    def line(m):
        extra = (f"{m.group(1)}slot init_sampler: id {m.group(2)} | task {m.group(3)} | init sampler, took 0.01 ms, "
                 f"tokens: text = {m.group(4)}, total = {m.group(4)}")
        return f"{extra}\n{m.group(0)}" if before else f"{m.group(0)}\n{extra}"
    return _sub(r"^((?:\d+\.\d\d\.\d{3}\.\d{3} [A-Z] )?)slot update_slots: id +(\d+) \| task (\d+) \| "
                r"prompt (?:processing )?done, n_tokens = (\d+).*$", line, s)


def to_2512(s):   # 2025-12: init sampler after prompt done
    return _with_init_sampler(to_2511(s), before=False)


def to_2602(s):   # 2026-02: `prompt processing done`, init sampler before it
    s = _sub(r"prompt done, n_tokens", "prompt processing done, n_tokens", to_2511(s))
    return _with_init_sampler(s, before=True)


def to_2604(s):   # 2026-04: the decode-token line gains id= and counts before the token
    return _sub(r"slot decode token, n_ctx = (\d+), n_tokens = (\d+),",
                lambda m: f"slot decode token, id=42, n_ctx = {m.group(1)}, n_tokens = {int(m.group(2)) - 1},",
                to_2602(s))


def to_2605(s):   # 2026-05: `cached n_tokens`; the progress and done lines are gone
    s = _sub(r"\| n_tokens = (\d+), memory_seq_rm", r"| cached n_tokens = \1, memory_seq_rm", to_2604(s))
    return _sub(r"^.*\| prompt processing (?:progress|done), .*\n", "", s)


# ---------------------------------------------------------------- NEW (2026-08) -> an earlier build
def to_2607(s):   # before n_gen: n_decoded
    s = _sub(r"\| n_gen = ( *\d+), n_remaining", r"| n_decoded = \1, n_remaining", s)
    s = _sub(r"(stopped [^\n]*?)n_gen = ", r"\1n_decoded = ", s)
    return _sub(r"\| n_gen = ( *\d+), tg =", r"| n_decoded = \1, tg =", s)


# ---------------------------------------------------------------- logging options
def prefix_without_time(s):   # OLD --log-prefix alone; NEW --no-log-timestamps
    # a record glued after the chat parser's unterminated sentence has its prefix too
    return _sub(r"(^|parser\.)\d+\.\d\d\.\d{3}\.\d{3} ([A-Z] )", r"\1\2", s)


def colours(s):   # --log-colors: ANSI codes around the timestamp and the level
    level = {"I": "\x1b[32mI \x1b[0m", "W": "\x1b[35mW ", "E": "\x1b[31mE ", "D": "\x1b[33mD "}
    s = _sub(r"(^|parser\.)(\d+\.\d\d\.\d{3}\.\d{3}) ([A-Z]) ",
             lambda m: f"{m.group(1)}\x1b[34m{m.group(2)}\x1b[0m {level.get(m.group(3), m.group(3) + ' ')}", s)
    # a W/E/D record's colour is reset after its message, line end included: at the next line's start
    return _sub(r"^(\x1b\[34m[\d.]+\x1b\[0m \x1b\[3[135]m[WED] [^\n]*)\n", "\\1\n\x1b[0m", s)


def without_debug(s):   # NEW -lv 4 / OLD without -v: no DEBUG records
    s = _sub(r"^\d+\.\d\d\.\d{3}\.\d{3} D No parser definition detected, assuming pure content parser\.", "", s)
    return _sub(r"^\d+\.\d\d\.\d{3}\.\d{3} D .*\n", "", s)


def info_only(s):   # NEW -lv 3: no DEBUG and no TRACE records (TRACE prints as I)
    return _sub(r"^.*\| (?:new prompt|cached n_tokens|init sampler|sampler |n_past was set).*\n"
                r"|^.*all slots are idle.*\n", "", without_debug(s))


FULL = {   # every model call logged: the batch table must not change
    "2025-10": (OLD, to_2510), "2025-11": (OLD, to_2511), "2025-12": (OLD, to_2512),
    "2026-02": (OLD, to_2602), "2026-04": (OLD, to_2604), "2026-05": (OLD, to_2605), "2026-07": (NEW, to_2607),
    "old-prefix-no-time": (OLD, prefix_without_time), "new-prefix-no-time": (NEW, prefix_without_time),
    "old-colours": (OLD, colours), "new-colours": (NEW, colours),
}
SPARSE = {"new-lv4": (NEW, without_debug), "old-no-v": (OLD, without_debug), "new-lv3": (NEW, info_only)}
TIMED_ONLY = {"old-prefix-no-time", "new-prefix-no-time", "old-colours", "new-colours", *SPARSE}


def cases(variants):
    out = []
    for name, (build, fn) in variants.items():
        for log in sorted((FIX / build).glob("*.log")):   # the soak (.log.gz, 32 MB) is left to bench/
            if name in TIMED_ONLY and not manifest_of(log)["log_has_prefix_and_timestamps"]:
                continue   # these options change the prefix: only logs that have one
            out.append(pytest.param(name, fn, log, id=f"{name}-{build}-{log.stem}"))
    return out


def rewritten(tmp_path: Path, fn, log: Path) -> Path:
    out = tmp_path / log.name
    out.write_text(fn(raw_text(log)))
    shutil.copy(log.parent / f"{log.stem}.json", tmp_path / f"{log.stem}.json")
    return out


def batch_sums_fit(tr) -> None:
    per_call = tr.batch.groupby("step")["tokens"].sum()
    if tr.meta.get("n_batch"):
        assert (per_call <= tr.meta["n_batch"]).all()
    assert set(per_call.index) <= set(tr.steps["step"])


@pytest.mark.parametrize("name, fn, log", cases(FULL))
def test_builds_between_rebuild_the_same_batches(name, fn, log, tmp_path):
    path = rewritten(tmp_path, fn, log)
    test_task_counts_equal_server_timings(path)
    tr, base = parsed(path), parsed(log)
    assert tr.meta["unparsed_lines"] == 0, tr.meta["unparsed_examples"]
    assert tr.meta["warnings"] == base.meta["warnings"]
    for key in ("n_batch", "n_slots", "n_ctx", "build"):
        assert tr.meta.get(key) == base.meta.get(key), key
    if "no-time" in name:   # no timestamps: the clock is the model calls
        assert tr.meta["time_unit"] == "steps"
    else:   # colour codes around the timestamp included
        assert tr.meta["time_unit"] == base.meta["time_unit"]
        assert tr.steps["start"].equals(base.steps["start"]) and tr.steps["end"].equals(base.steps["end"])
    assert len(tr.steps) == len(base.steps)
    for col in ("step", "request", "slot", "kind", "tokens", "computed_before", "sampled"):
        assert tr.batch[col].tolist() == base.batch[col].tolist(), col
    batch_sums_fit(tr)
    done = tr.events[tr.events["kind"] == "prompt_done"].groupby("request").size()
    assert (done == 1).all(), "one prompt_done per task"


@pytest.mark.parametrize("name, fn, log", cases(SPARSE))
def test_lower_verbosity_keeps_the_servers_counts(name, fn, log, tmp_path):
    """No model-call lines: no batch is rebuilt (none is invented), a warning says why, and the
    per-task counts still equal the server's. The stop lines are DEBUG too: no task may claim
    a stop word or a limit the log cannot show."""
    tr = read_llama_log(rewritten(tmp_path, fn, log))
    assert len(tr.steps) == 0 and len(tr.batch) == 0
    assert any("no model-call lines" in w for w in tr.meta["warnings"])
    tasks = summary(tr)["tasks"]
    assert not {t["finish"] for t in tasks} & {"stop", "limit"}
    timings = [tm for r in manifest_of(log)["requests"] if (tm := (r.get("response") or {}).get("timings"))]
    got = collections.Counter((t["prompt_tokens"], t["generated_tokens"]) for t in tasks)
    want = collections.Counter((tm["prompt_n"], tm["predicted_n"]) for tm in timings)
    assert not want - got, f"requests without a matching task: {list((want - got).elements())[:3]}"
    got = collections.Counter((t["prompt_tokens"], t["generated_tokens"], t["cached_tokens"]) for t in tasks)
    want = collections.Counter((tm["prompt_n"], tm["predicted_n"], tm["cache_n"]) for tm in timings
                               if tm.get("cache_n") is not None)
    assert not want - got, f"cached tokens differ: {list((want - got).elements())[:3]}"
