"""Logs of llama-server builds from 2024 (before the 2024-09-15 logging rewrite), read as a Trace.

What those builds printed, from upstream's examples/server/server.cpp of the time (read at
ggerganov/llama.cpp 0001ec37b4ae, spring 2024), the late-2023 server.cpp as copied into LocalAI's
gRPC backend, and logs pasted into llama.cpp and ik_llama.cpp issues (one of 2024-01-09 shows the
early lines below). Each 2024 line becomes the line the 2025-02 build (c392e5094, the corpus's
OLD) prints for the same event, and the reader that knows that build does the rest: the logging
rewrite of 2024-09-15 (6262d13e0) turned those LOG_INFO/LOG_VERBOSE calls into the very SLT_/SRV_
lines of c392e5094, field for field.

| 2024 record (jsonlog.py: `--log-format json` or text)            | becomes (c392e5094)              |
|---|---|
| INFO  slot is processing task {id_slot, id_task}                  | launch_slot_: processing task    |
| INFO  kv cache rm [p0, end) {id_slot, id_task, p0} (every chunk)  | kv cache rm [p0, end)            |
| VERB  prompt tokenized {n_ctx, n_keep, n_prompt_tokens}           | new prompt, ...                  |
| VERB  prompt processing progress {id_slot, n_past, n_tokens}      | prompt processing progress, ...  |
| VERB  prompt done {id_slot, n_past, n_tokens}                     | prompt done, ...                 |
| VERB  slot decode token {id_slot, id_task, n_past, ...}           | slot decode token, ...           |
| VERB  posting NEXT_RESPONSE / decoding batch {n_tokens} / run slots completed | the same srv lines   |
| VERB  next token {token, n_remain, n_decoded, stopped_eos, stopped_limit} | stopped by ... + next token |
| INFO  prompt eval time / generation eval time {n_prompt_tokens_processed, n_decoded, t_...} | print_timing block |
| INFO  slot released {id_slot, id_task, n_past, truncated}         | release: stop processing: ...    |
| INFO  slot context shift / VERB input truncated / WARN failed to find free space ... {i, n_batch} / ERR task error / VERB no slot is available {id_task} / VERB waiting for task id {id_task} / INFO build info / initializing slots / new slot | their c392e5094 lines |

`prompt processing progress` and `prompt done` carry no task id: the slot's current task is
used. Without -v only the INFO lines are there: tasks, slots, prompt chunks (a chunk ends where
the next `kv cache rm` of its task starts; the last where the timing line's prompt count says),
the server's counts, no batches. 2024 builds print no line on a cancellation: a cancelled task
just ends with `slot released`, no timings (finish reason unknown); when it also had no batch
lines its last chunk's size is unknown (it could be prompt or generated tokens) and is left out.

Builds of late 2023 to about February 2024 printed the slot events with LOG_TEE, without times or
ids on most lines: `slot 0 is processing [task id: 7]`, `slot 0 : in cache: 12 tokens | to
process: 88 tokens`, `slot 0 : kv cache rm - [12, end)`, `slot 0 : we have to evaluate at least
1 token to generate logits` (printed after the kv line, whose value is then one too high), the
`print_timings: prompt eval time = ... / N tokens`, `print_timings:        eval time = ... / M
runs` block (no slot), and at the next iteration `slot 0 released (K tokens in cache)` (K: the
prompt and every sampled token). The whole prompt went into one batch there, so a task's chunk
is its processed prompt; a timing block belongs to the next release line (the order the server
printed them in); the log gives no batches and no clock.

Lines of the builds the reader knows natively pass as they are (a log appended to after an
upgrade reads as two server runs); every other line (libllama's, a wrapper's, garbage) is
skipped, except libllama's context sizes, renamed as later builds print them.

The 2024 json/text records give the clock: their `timestamp` (whole seconds) minus the first
one, in ms. meta says which forms were read and what they could not tell (format_limits).
"""
from __future__ import annotations

import collections
import gzip
import io
import itertools
import os
import re
import zlib

import pandas as pd

from sim.trace import Trace

from .jsonlog import Record, int_field, num_field, parse_record
from .reader import MAX_UNZIPPED_BYTES, LlamaLogReader

HEAD_BYTES = 128 << 10   # the first lines are enough: 2024 builds print their records from the start
HEAD_LINES = 1000
# one of these is in the head of every 2024 log (json: `"level":`; text: the INFO lines of the start;
# early builds: their slot lines), so a later build's log is told apart by four scans of its head
MARKS = (b'"level":', b"INFO [", b"is processing [task id", b"print_timings:")
FEED_BYTES = 1 << 20

# early-2024 LOG_TEE lines (searched anywhere in a line: a tool's prefix may come first)
E_LAUNCH = re.compile(r"slot (\d{1,6}) is processing \[task id: (\d{1,15})\]")
E_KVRM = re.compile(r"slot (\d{1,6}) : kv cache rm - \[(\d{1,15}), end\)")
E_FULL = re.compile(r"slot (\d{1,6}) : we have to evaluate at least 1 token")
E_REL = re.compile(r"slot (\d{1,6}) released \((\d{1,15}) tokens in cache\)")
E_PTIME = re.compile(r"print_timings: prompt eval time = +([\d.]{1,24}) ms / +(\d{1,15}) tokens")
E_ETIME = re.compile(r"print_timings: +eval time = +([\d.]{1,24}) ms / +(\d{1,15}) runs")
E_SHIFT = re.compile(r"slot (\d{1,6}): context shift - n_keep = (-?\d{1,15}), n_left = (-?\d{1,15}), "
                     r"n_discard = (-?\d{1,15})")
E_IDLE = "all slots are idle and system prompt is empty"
EARLY = (E_LAUNCH, E_KVRM, E_REL, E_PTIME, E_ETIME)
# libllama's context lines of 2024 (llama_new_context_with_model) name what later builds print
# as llama_init_from_model
CTX = re.compile(r"llama_new_context_with_model: +(n_ctx|n_batch|n_ubatch|flash_attn|causal_attn|n_seq_max) += (\S+)")
# the build line and the scheduler lines of the builds the reader knows natively (c392e5094 and later)
BUILD = re.compile(r"^(?:\d+\.\d\d\.\d{3}\.\d{3} [IWEDT] )?build:? \d+ \([0-9a-f]{6,40}\)")
NATIVE = re.compile(r"(?:^|\s)(?:slot [\w ()~:]{12}: id +\d+ \| task -?\d+ \||srv  [\w ()~:]{12}: |que  [\w ()~:]{12}: )")

LEVEL_LETTER = {"INFO": "I", "VERB": "D", "WARN": "W", "ERR": "E"}
# the messages Translator._record turns into lines (the rest, most of a -v log, are skipped unparsed)
WANTED = frozenset({
    "slot is processing task", "prompt processing progress", "prompt done", "slot decode token", "next token",
    "posting NEXT_RESPONSE", "decoding batch", "run slots completed", "all slots are idle", "slot released",
    "slot context shift", "input truncated", "prompt tokenized", "task error", "no slot is available",
    "waiting for task id", "stopped by limit", "build info", "initializing slots", "new slot"})
WANTED_PREFIXES = ("kv cache rm", "prompt eval time", "generation eval time", "we have to evaluate at least 1 token",
                   "failed to find free space in the KV cache", "failed to decode the batch")


def wanted(msg: str) -> bool:
    return msg in WANTED or msg.startswith(WANTED_PREFIXES)
FORM_NAMES = {"text": "2024 server_log text (`INFO [function] msg | key=value`)",
              "json": "2024 server_log json (`--log-format json`)",
              "early": "late-2023/early-2024 plain slot lines (`slot N is processing [task id: T]`)"}


def _slot(fn: str, s: int, t: int, msg: str) -> str:
    return f"slot {fn[:12]:>12}: id {s:2d} | task {t} | {msg}"


def _srv(fn: str, msg: str) -> str:
    return f"srv  {fn[:12]:>12}: {msg}"


def _text(line) -> str:
    if isinstance(line, (bytes, bytearray)):
        return bytes(line).decode("utf-8", "replace")
    return line if isinstance(line, str) else str(line)


def classify(lines) -> dict | None:
    """Whether these first lines of a log are a 2024 build's: None when not (or when more of
    them are lines of the builds the reader knows natively), else the counts per form."""
    counts = collections.Counter()
    native = 0
    lines = list(lines)[:HEAD_LINES]
    blob = b"\n".join(x if isinstance(x, bytes) else _text(x).encode("utf-8", "replace") for x in lines)
    if not any(mk in blob for mk in MARKS):
        return None
    for line in lines:
        s = _text(line)
        if NATIVE.search(s):
            native += 1
            continue
        if any(p.search(s) for p in EARLY):
            counts["early"] += 1
            continue
        rec = parse_record(s)
        if rec is not None:
            counts[rec.form] += 1
    legacy = sum(counts.values())
    if not legacy or legacy <= native:
        return None
    return dict(counts)


class Translator:
    """2024 lines in, the c392e5094 lines of the same events out (see the module docstring)."""

    def __init__(self, clock: bool):
        self.clock = clock          # give the lines the prefix `M.SS.000.000 L ` from the timestamps
        self.ts0: int | None = None
        self.secs = 0
        self.went_back = False
        self.outliers = 0
        self.slot_task: dict[int, int] = {}
        self.first_p0: dict[int, int] = {}
        self.open_chunk: set[int] = set()   # tasks whose last `kv cache rm` no progress line closed
        self.pn: dict[int, tuple] = {}      # task -> (prompt tokens, ms) from its timing line
        self.stop_np: dict[int, int] = {}   # task -> n_predict from `stopped by limit`
        self.unsized: set[int] = set()      # tasks whose last chunk's size the log never states
        self.early: dict[int, dict] = {}    # early-2024: slot -> {task, x, full}
        self.timings: collections.deque = collections.deque()   # early-2024 blocks not yet released
        self.e_pending: list | None = None
        self.forms = collections.Counter()
        self.batches = 0
        self.verbose = False

    # ------------------------------------------------------------------ time
    def _prefix(self, rec: Record) -> str:
        if not self.clock:
            return ""
        if rec.ts is not None:
            if self.ts0 is None:
                self.ts0 = rec.ts
            s = rec.ts - self.ts0
            if s < self.secs:   # the clock went back (restarted server, changed clock): keep order
                self.went_back = True
                s = self.secs
            elif s > self.secs + 366 * 86400:   # a year ahead of the line before: a damaged field
                self.outliers += 1
                s = self.secs
            self.secs = s
        return f"{self.secs // 60}.{self.secs % 60:02d}.000.000 {LEVEL_LETTER.get(rec.level, 'I')} "

    # ------------------------------------------------------------------ lines
    def translate(self, raw_lines):
        """The c392e5094 lines (str, no line end) for these 2024 lines."""
        for raw in raw_lines:
            line = _text(raw)
            if len(line) > (1 << 20):
                continue
            rec = parse_record(line, wanted)
            if rec is not None:
                self.forms[rec.form] += 1
                yield from self._record(rec)
                continue
            if "slot " in line or "print_timings" in line or E_IDLE in line:
                out = self._early(line)
                if out is not None:
                    self.forms["early"] += 1
                    self.clock = False   # (when the first lines did not show it) their times are unknown
                    yield from out
                    continue
            m = CTX.search(line)
            if m:
                yield f"llama_init_from_model: {m.group(1)} = {m.group(2)}"
            elif NATIVE.search(line) or BUILD.search(line):
                # a later build's lines (the server was upgraded, its log appended to): as they are
                yield line.rstrip("\r\n")

    def _task(self, rec: Record) -> tuple[int | None, int | None]:
        s = int_field(rec, "id_slot")
        t = int_field(rec, "id_task")
        if t is None and s is not None:
            t = self.slot_task.get(s)
        return s, t

    def _record(self, rec: Record):
        msg = rec.msg
        p = self._prefix(rec)
        s, t = self._task(rec)
        if rec.level == "VERB":
            self.verbose = True
        if msg == "slot is processing task" and s is not None and t is not None:
            self.slot_task[s] = t
            yield p + _slot("launch_slot_", s, t, "processing task")
        elif msg.startswith("kv cache rm") and s is not None and t is not None:
            x = int_field(rec, "p0")
            if x is not None:
                self.slot_task[s] = t
                self.first_p0.setdefault(t, x)
                self.open_chunk.add(t)
                yield p + _slot("update_slots", s, t, f"kv cache rm [{x}, end)")
        elif msg in ("prompt processing progress", "prompt done") and s is not None and t is not None:
            past, n = int_field(rec, "n_past"), int_field(rec, "n_tokens")
            if past is not None and n is not None:
                self.open_chunk.discard(t)
                if msg == "prompt done":
                    yield p + _slot("update_slots", s, t, f"prompt done, n_past = {past}, n_tokens = {n}")
                else:
                    prog = num_field(rec, "progress") or 0.0
                    yield p + _slot("update_slots", s, t, f"prompt processing progress, n_past = {past}, "
                                                          f"n_tokens = {n}, progress = {prog:.6f}")
        elif msg == "slot decode token" and s is not None and t is not None:
            past = int_field(rec, "n_past")
            if past is not None:
                c = int_field(rec, "n_ctx") or 0
                k = int_field(rec, "n_cache_tokens") or 0
                tr = 1 if rec.extra.get("truncated") is True else 0
                yield p + _slot("update_slots", s, t, f"slot decode token, n_ctx = {c}, n_past = {past}, "
                                                      f"n_cache_tokens = {k}, truncated = {tr}")
        elif msg == "next token" and s is not None and t is not None:
            yield from self._next_token(rec, p, s, t)
        elif msg == "posting NEXT_RESPONSE":
            yield p + _srv("update_slots", "posting NEXT_RESPONSE")
        elif msg == "decoding batch":
            n = int_field(rec, "n_tokens")
            if n is not None:
                self.batches += 1
                yield p + _srv("update_slots", f"decoding batch, n_tokens = {n}")
        elif msg == "run slots completed":
            yield p + _srv("update_slots", "run slots completed")
        elif msg == "all slots are idle":
            yield p + _srv("update_slots", "all slots are idle")
        elif msg.startswith("prompt eval time") and t is not None:
            n, ms = int_field(rec, "n_prompt_tokens_processed"), num_field(rec, "t_prompt_processing")
            if n is not None:
                self.pn[t] = (n, ms or 0.0)
                if t in self.open_chunk and t in self.first_p0 and s is not None:
                    # no progress line closed the last chunk (no -v): the prompt ends where the
                    # first chunk started plus every token the server says it processed
                    self.open_chunk.discard(t)
                    end = self.first_p0[t] + n
                    yield p + _slot("update_slots", s, t, f"prompt processing progress, n_past = {end}, "
                                                          f"n_tokens = 0, progress = 1.000000")
        elif msg.startswith("generation eval time") and s is not None and t is not None:
            n, ms = int_field(rec, "n_decoded"), num_field(rec, "t_token_generation")
            if n is not None and t in self.pn:
                yield from self._timing_block(p, s, t, self.pn.pop(t), (n, ms or 0.0))
        elif msg == "slot released" and s is not None and t is not None:
            yield from self._release(rec, p, s, t)
        elif msg == "slot context shift" and s is not None and t is not None:
            k, left, d = (int_field(rec, f, True) for f in ("n_keep", "n_left", "n_discard"))
            if None not in (k, left, d):
                yield p + _slot("update_slots", s, t, f"slot context shift, n_keep = {k}, n_left = {left}, "
                                                      f"n_discard = {d}")
        elif msg == "input truncated" and s is not None and t is not None:
            v = [int_field(rec, f, f in ("n_keep", "n_left")) for f in ("n_ctx", "n_keep", "n_left", "n_prompt_tokens")]
            if None not in v:
                yield p + _slot("update_slots", s, t, "input truncated, n_ctx = {}, n_keep = {}, n_left = {}, "
                                                      "n_prompt_tokens = {}".format(*v))
        elif msg == "prompt tokenized" and s is not None and t is not None:
            v = [int_field(rec, f, f == "n_keep") for f in ("n_ctx", "n_keep", "n_prompt_tokens")]
            if None not in v:
                yield p + _slot("update_slots", s, t, "new prompt, n_ctx_slot = {}, n_keep = {}, "
                                                      "n_prompt_tokens = {}".format(*v))
        elif msg.startswith("we have to evaluate at least 1 token") and s is not None and t is not None:
            yield p + _slot("update_slots", s, t, "need to evaluate at least 1 token to generate logits")
        elif msg.startswith("failed to find free space in the KV cache"):
            i, b = int_field(rec, "i", True), int_field(rec, "n_batch")
            if i is not None and b is not None:
                yield p + _srv("update_slots", "failed to find free space in the KV cache, retrying with smaller "
                                               f"batch size - {msg.split(' - ', 1)[-1]}, i = {i}, n_batch = {b}, "
                                               f"ret = {int_field(rec, 'ret', True) or 1}")
        elif msg.startswith("failed to decode the batch"):
            yield p + _srv("update_slots", msg)
        elif msg == "task error" and int_field(rec, "id_task") is not None:
            err = str(rec.extra.get("error", "")).replace("\n", " ")
            yield p + _srv("send_error", f"task id = {int_field(rec, 'id_task')}, error: {err}")
        elif msg == "no slot is available" and int_field(rec, "id_task") is not None:
            yield p + _srv("process_sing", f"no slot is available, defer task, id_task = {int_field(rec, 'id_task')}")
        elif msg == "waiting for task id" and int_field(rec, "id_task") is not None:
            yield p + f"que  {'post':>12}: new task, id = {int_field(rec, 'id_task')}/1, front = 0"
        elif msg == "stopped by limit" and t is not None:
            np_ = int_field(rec, "n_predict", True)
            if np_ is not None:
                self.stop_np[t] = np_
        elif msg == "build info":
            b, c = int_field(rec, "build"), str(rec.extra.get("commit", ""))
            if b is not None and re.fullmatch(r"[0-9a-f]{6,40}", c):
                yield p + f"build: {b} ({c})"
        elif msg == "initializing slots" and int_field(rec, "n_slots") is not None:
            yield p + _srv("init", f"initializing slots, n_slots = {int_field(rec, 'n_slots')}")
        elif msg == "new slot" and s is not None and int_field(rec, "n_ctx_slot") is not None:
            yield p + _slot("init", s, -1, f"new slot n_ctx_slot = {int_field(rec, 'n_ctx_slot')}")

    def _next_token(self, rec: Record, p: str, s: int, t: int):
        d, r, tok = int_field(rec, "n_decoded"), int_field(rec, "n_remain", True), int_field(rec, "token", True)
        if d is None:
            return
        if rec.extra.get("stopped_eos") is True:
            yield p + _slot("process_toke", s, t, "stopped by EOS")
        elif rec.extra.get("stopped_limit") is True:
            np_ = self.stop_np.pop(t, None)
            tail = f", n_decoded = {d}, n_predict = {np_}" if np_ is not None else ""
            yield p + _slot("process_toke", s, t, "stopped by limit" + tail)
        piece = str(rec.extra.get("token_text", "")).encode("unicode_escape").decode("ascii")[:40]
        yield p + _slot("process_toke", s, t, f"n_decoded = {d}, n_remaining = {r if r is not None else -1}, "
                                              f"next token: {tok if tok is not None else -1:5d} '{piece}'")

    def _timing_block(self, p: str, s: int, t: int, prompt: tuple, gen: tuple):
        (pn, pms), (en, ems) = prompt, gen
        yield p + _slot("print_timing", s, t, "")
        yield f"prompt eval time = {pms:10.2f} ms / {pn:5d} tokens"
        yield f"       eval time = {ems:10.2f} ms / {en:5d} tokens"
        yield f"      total time = {pms + ems:10.2f} ms / {pn + en:5d} tokens"

    def _release(self, rec: Record, p: str, s: int, t: int):
        past = int_field(rec, "n_past")
        if past is None:
            return
        if t in self.open_chunk:
            self.unsized.add(t)   # the release's n_past would end it: prompt or generated tokens?
        self.open_chunk.discard(t)
        self.first_p0.pop(t, None)
        self.pn.pop(t, None)
        tr = 1 if rec.extra.get("truncated") is True else 0
        yield p + _slot("release", s, t, f"stop processing: n_past = {past}, truncated = {tr}")

    # ------------------------------------------------------------------ early 2024
    def _early(self, line: str):
        m = E_LAUNCH.search(line)
        if m:
            s, t = int(m.group(1)), int(m.group(2))
            self.slot_task[s] = t
            self.early[s] = {"task": t, "x": None, "full": False}
            return [_slot("launch_slot_", s, t, "processing task")]
        m = E_KVRM.search(line)
        if m:
            st = self.early.get(int(m.group(1)))
            if st is not None and st["x"] is None:
                st["x"] = int(m.group(2))
            return []
        m = E_FULL.search(line)
        if m:
            st = self.early.get(int(m.group(1)))
            if st is not None:
                st["full"] = True
            return []
        m = E_PTIME.search(line)
        if m:
            self.e_pending = [float(m.group(1)), int(m.group(2))]
            return []
        m = E_ETIME.search(line)
        if m:
            if self.e_pending is not None:
                self.timings.append((self.e_pending[1], self.e_pending[0], int(m.group(2)), float(m.group(1))))
                self.e_pending = None
            return []
        m = E_REL.search(line)
        if m:
            return self._early_release(int(m.group(1)), int(m.group(2)))
        m = E_SHIFT.search(line)
        if m:
            s = int(m.group(1))
            if s in self.slot_task:
                return [_slot("update_slots", s, self.slot_task[s], "slot context shift, n_keep = {}, n_left = {}, "
                                                                     "n_discard = {}".format(*m.group(2, 3, 4)))]
            return []
        if E_IDLE in line:
            return [_srv("update_slots", "all slots are idle")]
        return None

    def _early_release(self, s: int, k: int) -> list:
        st = self.early.pop(s, None)
        if st is None:
            return []
        t = st["task"]
        out = []
        timing = self.timings.popleft() if self.timings else None
        if timing is not None:
            pn, pms, en, ems = timing
            x = st["x"]
            if x is not None:
                # the kv line was printed before a full cache hit took one token back
                cached = x - 1 if st["full"] and x > 0 else x
                out.append(_slot("update_slots", s, t, f"kv cache rm [{cached}, end)"))
                out.append(_slot("update_slots", s, t, f"prompt done, n_past = {max(x + pn, cached + 1)}, "
                                                       f"n_tokens = {pn}"))
            out.extend(self._timing_block("", s, t, (pn, pms), (en, ems)))
        # K holds the prompt and every sampled token; the last one was never fed back
        out.append(_slot("release", s, t, f"stop processing: n_past = {max(k - 1, 0)}, truncated = 0"))
        return out


# ---------------------------------------------------------------------- the input
def _head_of(source):
    """(the first lines for classify, the source to read from afterwards), or None when the
    source cannot be looked at without losing what was read (a stream that cannot seek)."""
    if isinstance(source, (str, os.PathLike)) and not (isinstance(source, str) and "\n" in source
                                                        and not os.path.exists(source)):
        try:
            with open(source, "rb") as f:
                head = f.read(2)
                f.seek(0)
                if head == b"\x1f\x8b":
                    with gzip.GzipFile(fileobj=f) as g:
                        data = _read_some(g)
                else:
                    data = f.read(HEAD_BYTES)
        except OSError:
            return None   # the native reader says what is wrong with the path
        return _split(data), source
    if isinstance(source, str):
        return source[:HEAD_BYTES].splitlines()[:HEAD_LINES], source
    if isinstance(source, (bytes, bytearray, memoryview)):
        if bytes(source[:2]) == b"\x1f\x8b":
            try:
                with gzip.GzipFile(fileobj=io.BytesIO(bytes(source))) as g:
                    return _split(_read_some(g)), source
            except (OSError, EOFError, zlib.error):
                return None
        if isinstance(source, bytes) and not any(source.find(mk, 0, HEAD_BYTES) >= 0 for mk in MARKS):
            return [], source   # a later build's log, told apart without copying its head
        return _split(bytes(source[:HEAD_BYTES])), source
    if hasattr(source, "read"):
        try:
            here = source.tell()
            head = source.read(HEAD_BYTES)
            source.seek(here)
        except (AttributeError, OSError, ValueError, io.UnsupportedOperation):
            return None
        if isinstance(head, bytes) and head[:2] == b"\x1f\x8b":
            return None   # a compressed stream: the native reader's (2024 logs: give a path or bytes)
        return (head.splitlines()[:HEAD_LINES] if isinstance(head, str) else _split(head)), source
    if isinstance(source, (list, tuple)):
        return list(source[:HEAD_LINES]), source
    try:
        it = iter(source)
    except TypeError:
        return None
    first = list(itertools.islice(it, HEAD_LINES))
    return first, itertools.chain(first, it)


def _read_some(g) -> bytes:
    try:
        return g.read(HEAD_BYTES)
    except (OSError, EOFError, zlib.error):
        return b""


def _split(data: bytes) -> list[bytes]:
    if not any(mk in data for mk in MARKS):   # the usual case, a later build's log: no split at all
        return []
    return data.split(b"\n")[:HEAD_LINES]


def legacy_plan(source):
    """(source to read on with, what classify found or None). The source comes back changed only
    when it was an iterator whose first lines were taken to look at."""
    got = _head_of(source)
    if got is None:
        return source, None
    head, source = got
    return source, classify(head)


def _lines_of(source, warn):
    """(an iterator of the source's lines, its size or None, a function giving how far the input
    was read or None, the file to close or None)."""
    def guarded(it, cap: int | None = None):
        left = cap
        try:
            for line in it:
                if left is not None:
                    left -= len(line)
                    if left < 0:  # a zip bomb: the same cap as the current builds' reader
                        gib = MAX_UNZIPPED_BYTES / 2**30
                        warn(f"unzipped, the log is over {gib:g} GiB of text: only its first {gib:g} GiB are read")
                        return
                yield line
        except (OSError, EOFError, zlib.error) as e:
            warn(f"the input stopped early ({type(e).__name__}: {e}); what was read is shown")

    if isinstance(source, (str, os.PathLike)) and not (isinstance(source, str) and "\n" in source
                                                        and not os.path.exists(source)):
        raw = open(source, "rb")
        total = os.path.getsize(source)
        if raw.read(2) == b"\x1f\x8b":
            raw.seek(0)
            return guarded(gzip.GzipFile(fileobj=raw), MAX_UNZIPPED_BYTES), total, raw.tell, raw
        raw.seek(0)
        return guarded(raw), total, raw.tell, raw
    if isinstance(source, str):
        return iter(io.StringIO(source)), len(source), None, None
    if isinstance(source, (bytes, bytearray, memoryview)):
        data = bytes(source)
        if data[:2] == b"\x1f\x8b":
            bio = io.BytesIO(data)
            return guarded(gzip.GzipFile(fileobj=bio), MAX_UNZIPPED_BYTES), len(data), bio.tell, None
        return iter(io.BytesIO(data)), len(data), None, None
    if hasattr(source, "read"):
        return guarded(source), None, None, None
    return (x for item in source for x in _text(item).split("\n")), None, None, None


def read_legacy_log(source, found: dict, *, progress=None, name: str = "", native: bool = True) -> Trace:
    """A 2024 build's log (found: what classify saw in its first lines) as a Trace."""
    reader = LlamaLogReader(name=name, native=native)
    if isinstance(source, (str, os.PathLike)) and not (isinstance(source, str) and "\n" in source
                                                        and not os.path.exists(source)):
        reader.name = name or os.path.basename(os.fspath(source))
    # the early builds' slot lines carry no times: a clock from the few lines that do would mislead
    tr = Translator(clock=not found.get("early"))
    lines, total, pos, closing = _lines_of(source, reader._warn)
    buf, size, nbytes = [], 0, 0
    try:
        for raw in lines:
            nbytes += len(raw)
            for out in tr.translate((raw,)):
                b = out.encode("utf-8", "replace") + b"\n"
                buf.append(b)
                size += len(b)
            if size >= FEED_BYTES:
                reader.feed(b"".join(buf))
                buf, size = [], 0
                if progress is not None:
                    progress(pos() if pos else nbytes, total)
        if buf:
            reader.feed(b"".join(buf))
        if progress is not None:
            progress(pos() if pos else nbytes, total)
    finally:
        if closing is not None:
            closing.close()
    trace = reader.finish()
    _describe(trace, tr, nbytes)
    return trace


def _describe(trace: Trace, tr: Translator, nbytes: int) -> None:
    """Say in meta what was read and what these formats cannot tell; leave out what is unknown."""
    m = trace.meta
    m["bytes"] = int(nbytes)
    forms = [f for f in ("text", "json", "early") if tr.forms.get(f)]
    m["log_format"] = "; ".join(FORM_NAMES[f] for f in forms) or None
    m["log_forms"] = {f: int(tr.forms[f]) for f in forms}
    limits = ["2024 builds print no line when a request is cancelled: such a task ends with `slot released` "
              "and no timings, its finish reason is unknown"]
    if tr.batches:
        m["batch_format"] = "decoding batch {n_tokens} (2024 builds with -v, VERB level)"
    else:
        m["batch_format"] = None
        limits.append("no per-batch lines (`decoding batch` is printed only with -v): no batches; each task's "
                      "prompt and generated tokens are the server's own counts")
    if tr.clock and tr.ts0 is not None:
        m["time_origin"] = f"the log's first timestamp (unix time {tr.ts0} s)"
        m["time_resolution_ms"] = 1000
        limits.append("times are whole seconds (the server printed time(nullptr)): several batches share one time")
        if tr.went_back:
            m["warnings"].append("the timestamps go back somewhere (a restart or a clock change): those lines "
                                 "kept the time of the line before")
        if tr.outliers:
            m["warnings"].append(f"{tr.outliers} timestamp(s) more than a year after the line before (damaged?) "
                                 "were not used")
    elif tr.forms.get("early"):
        limits.append("early-2024 slot lines carry no times: no clock; timing blocks name no slot and are matched "
                      "to the release lines in the order the server printed them")
    if tr.unsized:
        r = trace.requests
        if len(r) and "task" in r.columns:
            hit = r["task"].isin(list(tr.unsized)).fillna(False).to_numpy(dtype=bool)
            if hit.any():
                r.loc[hit, "prompt_tokens"] = pd.NA
                limits.append(f"{int(hit.sum())} task(s) released without timings and without batch lines: the "
                              "size of their last prompt chunk is unknown, so their processed prompt is left out")
    m["format_limits"] = limits
    m["legacy_unsized_tasks"] = sorted(int(x) for x in tr.unsized)
