"""The llama-server log reader on line variants the corpus logs do not hold: log styles (prefix
without timestamps, colours), the formats of builds between the two corpus builds (FORMAT.md
section 9) and lower verbosity levels. Each log is a small synthetic snippet built here."""
from __future__ import annotations

import pytest

from reader_check import read_llama_log
from servers.llama_server import summary

# ANSI colours as common/log.cpp prints them with --log-colors: INFO resets after the level,
# WARN/ERROR/DEBUG reset at the end of the record
_COL = {"I": ("\x1b[32mI \x1b[0m", ""), "W": ("\x1b[35mW ", "\x1b[0m"), "E": ("\x1b[31mE ", "\x1b[0m"),
        "D": ("\x1b[33mD ", "\x1b[0m")}


def styled(records, style: str) -> str:
    """records: (level, text) pairs; a tuple of pairs is several records glued on one line."""
    out = []
    for i, rec in enumerate(records):
        parts = rec if isinstance(rec[0], tuple) else (rec,)
        line = ""
        for level, text in parts:
            ts = f"0.00.{i + 1:03d}.000"
            if style == "none":
                line += text
            elif style == "prefix":      # --log-prefix alone (OLD) / --no-log-timestamps (NEW)
                line += f"{level} {text}"
            elif style == "ts":
                line += f"{ts} {level} {text}"
            else:                        # colours
                pre, post = _COL[level]
                line += f"\x1b[34m{ts}\x1b[0m {pre}{text}{post}"
        out.append(line)
    return "\n".join(out) + "\n"


def slot(fn: str, sid: int, tid: int, msg: str) -> str:
    return f"slot {fn:>12}: id {sid:2d} | task {tid} | {msg}"


def task_row(tr, task: int) -> dict:
    return next(t for t in summary(tr)["tasks"] if t["task"] == task)


# ---------------------------------------------------------------------------------------------
# Log styles: a NEW-build log (3 model calls) written four ways
# ---------------------------------------------------------------------------------------------

NEW_LOG = [
    ("I", "srv    load_model: initializing, n_slots = 1, n_ctx_slot = 4096, kv_unified = 'false'"),
    ("D", "que          post: new task, id = 0/1, front = 0"),
    ("I", slot("launch_slot_", 0, 0, "processing task, is_child = 0")),
    ("D", "srv  update_slots: posting NEXT_RESPONSE"),
    ("I", slot("operator()", 0, 0, "new prompt, n_ctx_slot = 4096, n_keep = 0, task.n_tokens = 10")),
    ("I", slot("operator()", 0, 0, "cached n_tokens = 0, memory_seq_rm [0, end)")),
    ("I", slot("init_sampler", 0, 0, "init sampler, took 0.01 ms, tokens: text = 10, total = 10")),
    ("D", "srv        decode: n_batch (effective) = 2048, off = 0"),
    ("D", slot("process_toke", 0, 0, "n_gen = 1, n_remaining = 2, next token:   450 'x'")),
    ("D", "srv  update_slots: posting NEXT_RESPONSE"),
    ("D", slot("handle_last_", 0, 0, "slot decode token, id=450, n_ctx = 4096, n_tokens = 10, truncated = 0")),
    ("D", "srv        decode: n_batch (effective) = 2048, off = 0"),
    # the chat parser's sentence has no line end: the next record is glued to it
    (("D", "No parser definition detected, assuming pure content parser."),
     ("D", slot("process_toke", 0, 0, "n_gen = 2, n_remaining = 1, next token:   451 'y'"))),
    ("D", "srv  update_slots: posting NEXT_RESPONSE"),
    ("D", slot("handle_last_", 0, 0, "slot decode token, id=451, n_ctx = 4096, n_tokens = 11, truncated = 0")),
    ("D", "srv        decode: n_batch (effective) = 2048, off = 0"),
    ("D", slot("process_toke", 0, 0, "stopped by limit, n_gen = 3, n_predict = 3")),
    ("D", slot("process_toke", 0, 0, "n_gen = 3, n_remaining = 0, next token:   452 'z'")),
    ("I", slot("print_timing", 0, 0, "prompt eval time =       1.00 ms /    10 tokens (    0.10 ms per token, "
                                     "10000.00 tokens per second)")),
    ("I", slot("print_timing", 0, 0, "       eval time =       2.00 ms /     3 tokens (    0.67 ms per token,  "
                                     "1500.00 tokens per second)")),
    ("I", slot("print_timing", 0, 0, "      total time =       3.00 ms /    13 tokens")),
    ("I", slot("release", 0, 0, "stop processing: n_tokens = 12, truncated = 0")),
]


@pytest.mark.parametrize("style", ["none", "ts", "prefix", "colors"])
def test_log_styles(style):
    """Before the fix a level letter at the very start of a line (prefix without timestamps) or
    after a colour code was not a record start: nothing, or only some lines, were read. (With
    colours the times are not read: time_unit stays steps.) A log ending within a few lines
    of a timing line also warned of a cut last line it did not have."""
    tr = read_llama_log(styled(NEW_LOG, style))
    assert tr.steps["num_tokens"].tolist() == [10, 1, 1]
    assert tr.batch["computed_before"].tolist() == [0, 10, 11]
    assert task_row(tr, 0) == {"task": 0, "slot": 0, "prompt_tokens": 10, "cached_tokens": 0,
                               "generated_tokens": 3, "finish": "limit", "partial": False}
    assert tr.meta["n_slots"] == 1
    assert tr.meta["unparsed_lines"] == 0 and tr.meta["warnings"] == []
    assert tr.meta["time_unit"] == ("ms" if style in ("ts", "colors") else "steps")


# ---------------------------------------------------------------------------------------------
# Formats of builds between the corpus builds (FORMAT.md section 9)
# ---------------------------------------------------------------------------------------------

def between_log(first_decode_n: int, init_sampler: str = "") -> str:
    """A 2025-10-30 .. 2026-04 build: `n_tokens = X, memory_seq_rm`, progress/done lines with
    batch.n_tokens, `decoding batch`, `n_decoded`; optionally `init sampler` before or after the
    prompt-done line (builds of 2025-12 .. 2026-05 print both)."""
    isamp = slot("init_sampler", 0, 0, "init sampler, took 0.01 ms, tokens: text = 10, total = 10")
    done = slot("update_slots", 0, 0, "prompt processing done, n_tokens = 10, batch.n_tokens = 10")
    lines = [
        "srv  update_slots: posting NEXT_RESPONSE",
        slot("update_slots", 0, 0, "new prompt, n_ctx_slot = 4096, n_keep = 0, task.n_tokens = 10"),
        slot("update_slots", 0, 0, "n_tokens = 0, memory_seq_rm [0, end)"),
        slot("update_slots", 0, 0, "prompt processing progress, n_tokens = 10, batch.n_tokens = 10, progress = 1.0"),
        *([isamp, done] if init_sampler == "before" else [done, isamp] if init_sampler == "after" else [done]),
        "srv  update_slots: decoding batch, n_tokens = 10",
        slot("process_toke", 0, 0, "n_decoded = 1, n_remaining = 2, next token:   450 'x'"),
        "srv  update_slots: run slots completed",
    ]
    for k in range(2):
        lines += [
            "srv  update_slots: posting NEXT_RESPONSE",
            slot("update_slots", 0, 0, f"slot decode token, n_ctx = 4096, n_tokens = {first_decode_n + k}, "
                                       "truncated = 0"),
            "srv  update_slots: decoding batch, n_tokens = 1",
            slot("process_toke", 0, 0, f"n_decoded = {k + 2}, n_remaining = {1 - k}, next token:   45{k + 1} 'y'"),
            "srv  update_slots: run slots completed",
        ]
    lines.insert(-2, slot("process_toke", 0, 0, "stopped by limit, n_decoded = 3, n_predict = 3"))
    lines.insert(-1, slot("release", 0, 0, "stop processing: n_tokens = 12, truncated = 0"))
    return "\n".join(lines) + "\n"


def test_decode_token_without_id_counts_the_token_just_added():
    """Builds of 2025-10 .. 2026-04 add the sampled token to the slot before printing n_tokens:
    after a 10-token prompt the first decode line says 11. Was read as 11 tokens before it."""
    tr = read_llama_log(between_log(11))
    assert tr.steps["num_tokens"].tolist() == [10, 1, 1] and tr.meta["batch_mismatches"] == 0
    assert tr.batch["computed_before"].tolist() == [0, 10, 11]
    assert task_row(tr, 0)["generated_tokens"] == 3 and task_row(tr, 0)["finish"] == "limit"
    assert tr.meta["unparsed_lines"] == 0 and tr.meta["warnings"] == []


@pytest.mark.parametrize("order", ["before", "after"])
def test_prompt_done_and_init_sampler_make_one_event(order):
    """Builds of 2025-12 .. 2026-05 print both `prompt (processing) done` and `init sampler` for
    the chunk that completes a prompt: one prompt_done event, not two."""
    tr = read_llama_log(between_log(11, init_sampler=order))
    ev = tr.events
    assert (ev["kind"] == "prompt_done").sum() == 1
    assert tr.batch["tokens"].tolist() == [10, 1, 1] and tr.batch["sampled"].tolist() == [True] * 3
    assert task_row(tr, 0)["prompt_tokens"] == 10
    assert tr.meta["unparsed_lines"] == 0


def test_decode_errors_of_builds_before_and_after_the_batch_refactor():
    """llama_decode failures the server gives up on: builds of 2025-10 .. 2026-06 print them in
    update_slots (`i = `), later ones in decode (`off = `); all three messages. They were
    unparsed lines and no decode_error event."""
    old = "\n".join([
        "srv  update_slots: posting NEXT_RESPONSE",
        slot("update_slots", 0, 0, "new prompt, n_ctx_slot = 4096, n_keep = 0, task.n_tokens = 900"),
        slot("update_slots", 0, 0, "n_tokens = 0, memory_seq_rm [0, end)"),
        slot("update_slots", 0, 0, "prompt processing progress, n_tokens = 512, batch.n_tokens = 512, progress = 0.57"),
        "srv  update_slots: decoding batch, n_tokens = 512",
        "srv  update_slots: failed to find free space in the KV cache, retrying with smaller batch size, "
        "i = 0, n_batch = 1, ret = 1",
        "srv  update_slots: Context size has been exceeded. i = 0, n_batch = 1, ret = 1",
        "srv    send_error: task id = 0, error: Context size has been exceeded.",
        slot("release", 0, 0, "stop processing: n_tokens = 512, truncated = 0"),
        "srv  update_slots: no tokens to decode",
        "",
    ])
    tr = read_llama_log(old)
    err = tr.events[tr.events["kind"] == "decode_error"]
    assert err["detail"].tolist() == ["Context size has been exceeded. i = 0, n_batch = 1, ret = 1"]
    assert task_row(tr, 0)["finish"] == "error"
    assert tr.meta["unparsed_lines"] == 0
    for msg, ret in (("Invalid input batch.", -1), ("Compute error.", -3)):
        new = "\n".join([
            "srv  update_slots: posting NEXT_RESPONSE",
            slot("handle_last_", 0, 0, "slot decode token, id=5, n_ctx = 4096, n_tokens = 20, truncated = 0"),
            "srv        decode: n_batch (effective) = 512, off = 0",
            f"srv        decode: {msg} off = 0, n_batch = 512, ret = {ret}",
            "srv        decode: no tokens to decode",
            "",
        ])
        tr = read_llama_log(new)
        err = tr.events[tr.events["kind"] == "decode_error"]
        assert err["detail"].tolist() == [f"{msg} off = 0, n_batch = 512, ret = {ret}"]
        assert tr.meta["unparsed_lines"] == 0


def test_late_2026_defer_reasons_requeues_step_failures_and_per_step_lines():
    """Builds of late 2026 (llama.cpp's server-context.cpp after PR #27261; the first two reasons and
    the slot-naming pop are older): a task pinned to a busy slot, or whose child tasks find too few
    free slots, is deferred with its own sentence, and the queue pops a pinned one back naming its
    slot; update_slots' pre_decode() / post_decode() can fail; child tasks, speculative decoding,
    context checkpoints, the radix cache and an empty prompt (its release lines follow) print lines
    that carry nothing the trace needs. The first three were dropped without a word, the rest
    counted as lines not understood."""
    log = "\n".join([
        "que          post: new task, id = 0/1, front = 0",
        "srv  process_sing: requested slot is unavailable, defer task, id_task = 0",
        "que          post: new task, id = 1/1, front = 0",
        "srv  process_sing: not enough free slots for child tasks, n_free = 1, n_children = 2, defer task, "
        "id_task = 1",
        "que  pop_deferred: pop deferred task (use slot 0), id_task = 0",
        "que  pop_deferred: pop deferred task, id_task = 1",
        slot("update_slots", 1, 2, "waiting for parent slot to complete"),
        slot("update_slots", 0, 0, "accepted 3/4 draft tokens, new n_tokens = 40"),
        slot("update_slots", 0, 0, "add accepted tokens: sampled=4, ids.size=4, n_draft=4"),
        slot("update_slots", 0, 0, "created speculative checkpoint (pos_min = 0, pos_max = 39, size = 0.100 MiB)"),
        slot("update_slots", 0, 0, "restoring speculative checkpoint (pos_min = 0, pos_max = 39, size = 0.100 MiB)"),
        slot("update_slots", 0, 0, "     acc per pos = (1.00, 0.50)"),
        slot("update_slots", 0, 0, "erasing old context checkpoint (pos_min = 0, pos_max = 10, size = 0.100 MiB)"),
        slot("update_slots", 0, 0, "selected empty slot for radix alias, donor_lcp = 12"),
        slot("update_slots", 0, 0, "radix alias from slot 1, n_shared = 12, p1 = 12"),
        slot("update_slots", 1, 3, "empty prompt - releasing slot"),
        "srv  update_slots: pre_decode() failed: out of memory",
        "",
    ])
    tr = read_llama_log(log)
    ev = tr.events
    assert ev[ev["kind"] == "defer"]["detail"].tolist() == [
        "requested slot is unavailable", "not enough free slots for child tasks, n_free = 1, n_children = 2"]
    assert (ev["kind"] == "requeue").sum() == 2
    assert ev[ev["kind"] == "decode_error"]["detail"].tolist() == ["pre_decode() failed: out of memory"]
    assert tr.meta["unparsed_lines"] == 0


def test_cache_reuse_debug_lines_are_known():
    """--cache-reuse prints `trying to reuse chunks ...` / `after context reuse, new n_past = N`
    (DEBUG, OLD and later builds): known lines that carry nothing the trace needs."""
    log = "\n".join([
        slot("update_slots", 0, 0, "trying to reuse chunks with size > 256, n_past = 40"),
        slot("update_slots", 0, 0, "after context reuse, new n_past = 40"),
        slot("update_slots", 0, 0, "trying to reuse chunks with size > 256, slot.n_past = 40"),
        slot("update_slots", 0, 0, "after context reuse, new slot.n_past = 40"),
        "",
    ])
    assert read_llama_log(log).meta["unparsed_lines"] == 0


# ---------------------------------------------------------------------------------------------
# Lower verbosity: no model-call lines
# ---------------------------------------------------------------------------------------------

TIMING_NEW = [
    slot("print_timing", 0, 0, "prompt eval time =      10.00 ms /   299 tokens (    0.03 ms per token, "
                               "29900.00 tokens per second)"),
    slot("print_timing", 0, 0, "       eval time =      20.00 ms /     5 tokens (    4.00 ms per token,   "
                               "250.00 tokens per second)"),
    slot("print_timing", 0, 0, "      total time =      30.00 ms /   304 tokens"),
    slot("print_timing", 0, 0, "   graphs reused =          4"),
]


def test_new_build_at_trace_level_keeps_prompt_counts():
    """-lv 4 (NEW): the chunk lines are TRACE (printed as I) but the decode lines are DEBUG. The
    prompt chunks were kept in an unfinished batch that was then dropped, so prompt_tokens
    was lost. Now: per-task counts from the chunks, no batch (none is known)."""
    recs = [("I", x) for x in [
        slot("launch_slot_", 0, 0, "processing task, is_child = 0"),
        slot("operator()", 0, 0, "new prompt, n_ctx_slot = 4096, n_keep = 0, task.n_tokens = 300"),
        slot("operator()", 0, 0, "cached n_tokens = 1, memory_seq_rm [1, end)"),
        slot("operator()", 0, 0, "cached n_tokens = 256, memory_seq_rm [256, end)"),
        slot("init_sampler", 0, 0, "init sampler, took 0.01 ms, tokens: text = 300, total = 300"),
        *TIMING_NEW,
        slot("release", 0, 0, "stop processing: n_tokens = 304, truncated = 0"),
        "srv  update_slots: all slots are idle",
    ]]
    tr = read_llama_log(styled(recs, "ts"))
    assert task_row(tr, 0) == {"task": 0, "slot": 0, "prompt_tokens": 299, "cached_tokens": 1,
                               "generated_tokens": 5, "finish": "unknown", "partial": False}
    assert len(tr.steps) == 0 and len(tr.batch) == 0
    assert len(tr.meta["warnings"]) == 1 and "no model-call lines" in tr.meta["warnings"][0]


def test_old_build_without_v_keeps_prompt_counts():
    """OLD at default verbosity: the chunk lines are INFO, the decode lines DEBUG (not shown)."""
    log = "\n".join([
        slot("launch_slot_", 0, 0, "processing task"),
        slot("update_slots", 0, 0, "new prompt, n_ctx_slot = 4096, n_keep = 0, n_prompt_tokens = 300"),
        slot("update_slots", 0, 0, "kv cache rm [0, end)"),
        slot("update_slots", 0, 0, "prompt processing progress, n_past = 256, n_tokens = 256, progress = 0.853333"),
        slot("update_slots", 0, 0, "kv cache rm [256, end)"),
        slot("update_slots", 0, 0, "prompt processing progress, n_past = 300, n_tokens = 45, progress = 1.000000"),
        slot("update_slots", 0, 0, "prompt done, n_past = 300, n_tokens = 45"),
        slot("print_timing", 0, 0, ""),
        "prompt eval time =      10.00 ms /   300 tokens (    0.03 ms per token, 30000.00 tokens per second)",
        "       eval time =      20.00 ms /     5 tokens (    4.00 ms per token,   250.00 tokens per second)",
        "      total time =      30.00 ms /   305 tokens",
        slot("release", 0, 0, "stop processing: n_past = 304, truncated = 0"),
        "srv  update_slots: all slots are idle",
        "",
    ])
    tr = read_llama_log(log)
    assert task_row(tr, 0) == {"task": 0, "slot": 0, "prompt_tokens": 300, "cached_tokens": 0,
                               "generated_tokens": 5, "finish": "unknown", "partial": False}
    assert len(tr.steps) == 0 and len(tr.batch) == 0


def test_new_build_at_info_level_cached_tokens_from_the_release_count():
    """-lv 3 (NEW): no chunk lines at all. At release the slot holds the cached prefix, the
    processed prompt and every generated token but the last, less what context shifts dropped;
    cached_tokens was unknown before."""
    recs = [("I", slot("launch_slot_", 0, 0, "processing task, is_child = 0")),
            *[("I", x) for x in TIMING_NEW],
            ("I", slot("release", 0, 0, "stop processing: n_tokens = 304, truncated = 0")),
            ("I", slot("launch_slot_", 1, 2, "processing task, is_child = 0")),
            ("W", slot("operator()", 1, 2, "slot context shift, n_keep = 1, n_left = 510, n_discard = 255")),
            *[("I", x.replace("task 0", "task 2").replace("id  0", "id  1").replace("/     5", "/   400"))
              for x in TIMING_NEW],
            ("I", slot("release", 1, 2, "stop processing: n_tokens = 443, truncated = 1"))]
    tr = read_llama_log(styled(recs, "ts"))
    assert task_row(tr, 0)["cached_tokens"] == 304 - 299 - 4 and task_row(tr, 0)["prompt_tokens"] == 299
    assert task_row(tr, 2)["cached_tokens"] == 443 + 255 - 299 - 399
    assert task_row(tr, 2)["generated_tokens"] == 400
