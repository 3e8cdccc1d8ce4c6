"""Read a llama-server verbose log (`-v`) and rebuild what the server did, as a Trace.

What comes out (source = "llama-server log"):
- steps:    one per scheduling iteration that called the model (OLD builds: the
            `decoding batch, n_tokens = N` line; NEW builds: the first
            `decode: n_batch (effective) = B, off = O` attempt after `posting NEXT_RESPONSE`).
            A failed attempt that the server retries with a halved batch is an event
            (kv_fail / batch_retry), not another step.
- batch:    per step, one entry per slot/task: kind "decode" (the slot's sampled token; with
            speculative decoding 1 + draft tokens) or "prefill" (a prompt chunk), its token count
            and computed_before (the slot's tokens before the entry).
- requests: one per task (the server's task id), with the slot, prompt length, cached prompt
            tokens reused, prompt tokens processed, generated tokens, finish reason
            (stop, limit, context, cancelled, error, unknown), step indices and, when the log
            has timestamps, times in ms since the logger started. Extra columns: task,
            prompt_tokens (processed, rebuilt from the chunks), server_prompt_n /
            server_predicted_n / server_prompt_ms / server_predicted_ms (what the server printed
            in its timing block, when it did).
- events:   arrive (task queued), defer, requeue, admit (slot launched), prompt_done,
            cache_hit, truncate, context_shift, kv_fail, batch_retry, decode_error, error,
            cancel, finish (slot released).

Unknown values stay NaN/<NA>/"": nothing is invented. The log formats are described in
shared/llama-logs/FORMAT.md; both corpus builds (c392e5094 "OLD", 34af94cd9 "NEW") and the
documented formats in between are understood. Lines of the scheduler's families that are not
understood are counted in meta["unparsed_lines"] with a few examples.

Speed and memory: the input is read in blocks of a few MB (never all lines at once). A tokenizer
finds each block's records; one loop (LlamaLogReader._apply) runs the state machine over them.
- The C tokenizer (sim/llamascan.c, built on first use by sim/native.py) finds the candidates
  with SIMD compares and parses the frequent records' fields (decode tokens, sampled tokens,
  model calls); the rare ones go back to the family's regex, so each line has one definition.
- Without a C compiler, the reference tokenizer runs: three compiled regexes, one per line
  family ("slot", "srv", "que"), each starting with a literal. Both give byte-identical Traces
  (the reader's tests parse every input both ways).
- From a file or a binary stream, with the C tokenizer, a second thread reads and tokenizes
  each block while the state machine works through the one before (_prefetched_blocks).
Memory is a few blocks plus the result.

Bad input never raises: bytes are decoded with errors="replace" where text is kept, binary
garbage is skipped, a cut last line / a log cut in the middle of a batch / interleaved lines are
handled, and what went wrong is said in meta["warnings"]. Token text (which may hold HTML or
JavaScript) is never interpreted.

    trace = read_llama_log("server.log")            # a path (.gz too), bytes, a file object,
    trace = read_llama_log(open(p, "rb"), progress=cb)   # or an iterator of lines
    summary(trace)                                   # the CLI's summary object
    wl = workload_from_trace(trace)                  # re-simulate: simulate(wl) / simulate(wl, {"scheduler": "vllm"})
"""
from __future__ import annotations

import io
import operator
import os
import queue
import random
import re
import threading
import zlib
from itertools import islice
from typing import Callable, Iterable

import numpy as np
import pandas as pd

from . import native
from .native import (K_DBATCH, K_DEC, K_EFF, K_IGN_SLOT, K_IGN_SRV, K_POST, K_RUNS, K_SLOW_QUE,
                     K_SLOW_SLOT, K_SLOW_SRV, K_TOK, K_YDONE)
from .trace import Trace, as_array, empty_table, table_from_columns
from .workload import MIN_TOKEN_ID, VOCAB_SIZE, Request, Workload, output_token

SOURCE = "llama-server log"
BLOCK_SIZE = 4 << 20          # bytes read per block
MAX_LINE = 16 << 20           # a "line" longer than this is dropped (binary garbage, no newlines)
MAX_EXAMPLES = 5
FINISH_REASONS = ("stop", "limit", "context", "cancelled", "error", "unknown")

# ---------------------------------------------------------------------------------------------
# The scanners. The server's lines are "slot <fn>: id N | task T | msg", "srv  <fn>: msg" and
# "que  <fn>: msg" with <fn> right-aligned in 12 characters. One pattern per family, each
# starting with a literal, lets the regex engine jump from candidate to candidate; the named
# group that closes last names the record.
# ---------------------------------------------------------------------------------------------
_SLOT_MSGS = [
    rb"(?P<dec>slot decode token, (?:id=-?\d+, )?n_ctx = \d+, n_(?P<dec_k>past|tokens) = (?P<dec_n>\d{1,15}))",
    rb"(?P<tok>n_(?:gen|decoded) = +(?P<tok_n>\d{1,15}), n_remaining = +(?P<tok_r>-?\d{1,15}), next token)",
    rb"(?P<chunk>(?:cached n_tokens|n_tokens|n_past) = (?P<chunk_x>\d{1,15}), memory_seq_rm \[)",
    rb"(?P<kvrm>kv cache rm \[(?P<kvrm_x>\d{1,15}), end\))",
    rb"(?P<prog>prompt processing progress, n_(?:past|tokens) = (?P<prog_p>\d{1,15}), (?:batch\.)?n_tokens = (?P<prog_t>\d{1,15}))",
    rb"(?P<pdone>prompt (?:processing )?done, n_(?:past|tokens) = (?P<pdone_p>\d{1,15}), (?:batch\.)?n_tokens = (?P<pdone_t>\d{1,15}))",
    rb"(?P<isamp>init sampler, took [\d.]+ ms, tokens: text = \d+, total = (?P<isamp_t>\d{1,15}))",
    rb"(?P<newp>new prompt, n_ctx_slot = (?P<newp_c>\d{1,15}), n_keep = (?P<newp_k>-?\d{1,15}), (?:task\.n_tokens|n_prompt_tokens) = (?P<newp_n>\d{1,15}))",
    rb"(?P<stop>stopped (?P<stop_k>by EOS|by limit|by time limit|by indentation limit|due to running out of context)"
    rb"(?:, n_(?:gen|decoded) = \d+, n_predict = (?P<stop_np>-?\d{1,15}))?)",
    rb"(?P<rel>stop processing: n_(?:tokens|past) = (?P<rel_n>\d{1,15}), truncated = (?P<rel_t>-?\d{1,15}))",
    rb"(?P<launch>processing task)",
    rb"(?P<lslot>launching slot : )",
    rb"(?P<draft>generate_draft: id=-?\d+, #tokens=\d+, #draft=(?P<draft_d>\d{1,15}), pos_next=(?P<draft_p>-?\d{1,15}))",
    rb"(?P<cshift>slot context shift, n_keep = (?P<cs_k>-?\d{1,15}), n_left = (?P<cs_l>-?\d{1,15}), n_discard = (?P<cs_d>-?\d{1,15}))",
    rb"(?P<trunc>input truncated, n_ctx = \d+, n_keep = -?\d+, n_left = -?\d+, n_prompt_tokens = (?P<tr_n>\d{1,15}))",
    rb"(?P<full>need to evaluate at least 1 token)",
    rb"(?P<ptime>prompt eval time = +(?P<pt_ms>[\d.]{1,24}) ms / +(?P<pt_n>\d{1,15}) tokens)",
    rb"(?P<etime> *eval time = +(?P<et_ms>[\d.]{1,24}) ms / +(?P<et_n>\d{1,15}) tokens)",
    rb"(?P<thdr>\r?\n(?:prompt eval time = +(?P<th_pms>[\d.]{1,24}) ms / +(?P<th_pn>\d{1,15}) tokens[^\n]*\n"
    rb" *eval time = +(?P<th_ems>[\d.]{1,24}) ms / +(?P<th_en>\d{1,15}) tokens)?)",
    rb"(?P<newslot>new slot,? n_ctx(?:_slot)? = (?P<ns_c>\d{1,15}))",
    rb"(?P<sother>)",
]


def _at_record_start(prefix: bytes) -> bytes:
    """After the literal `prefix`: it must begin a record: at a line start, after a level letter
    (which starts the line when the prefix has no timestamp, follows the timestamp's space, an
    ANSI colour code's `m` with --log-colors, or the chat parser's unterminated sentence), after
    that sentence itself, or after an ANSI reset."""
    p = re.escape(prefix)
    return (rb"(?:(?<=\n" + p + rb")|(?<=[\n m.][IWEDT] " + p + rb")|(?<=parser\." + p + rb")|(?<=\x1b\[0m" + p
            + rb"))")


# llama_decode failures the server gives up on (n_batch 1 and still no room, bad batch, compute
# error); builds from 2025-10 to 2026-06 print them in update_slots (`i = `), later ones in decode
_DECODE_ERRORS = rb"Context size has been exceeded|Invalid input batch|Compute error"


def _families(guarded: bool):
    """The three scanners. guarded: a record must begin a line (after the log's own prefix);
    unguarded: anywhere (logs whose lines carry a foreign prefix, e.g. journald or docker)."""
    guard = _at_record_start if guarded else (lambda prefix: b"")
    slot = re.compile(rb"slot " + guard(b"slot ") + rb"(?P<fn>[^\n]{12}): id +(?P<sid>\d{1,15}) \| task (?P<tid>-?\d{1,15}) "
                      rb"\| (?:" + b"|".join(_SLOT_MSGS) + rb")")
    srv = re.compile(
        rb"srv  " + guard(b"srv  ") + rb"(?:update_slots: (?:(?P<post>posting NEXT_RESPONSE)"
        rb"|(?P<dbatch>decoding batch, n_tokens = (?P<db_n>\d{1,15}))"
        rb"|(?P<runs>run slots completed)"
        rb"|(?P<ofail>failed to find free space in the KV cache, retrying with smaller batch size[^\n]*?, i = (?P<of_i>-?\d{1,15}), n_batch = (?P<of_b>\d{1,15}))"
        rb"|(?P<ofull>(?:failed to decode the batch|" + _DECODE_ERRORS + rb")[^\n]*)"
        rb"|(?P<decerr>decode\(\) failed: (?P<de_msg>[^\n]*))"
        rb"|(?P<uother>))"
        rb"|      decode: (?:(?P<eff>n_batch \(effective\) = (?P<eff_b>\d{1,15}), off = (?P<eff_o>\d{1,15}))"
        rb"|(?P<nfail>failed to find free space in the KV cache, retrying with smaller batch size, off = (?P<nf_o>\d{1,15}), n_batch = (?P<nf_b>\d{1,15}))"
        rb"|(?P<nctx>(?:" + _DECODE_ERRORS + rb")[^\n]*)"
        rb"|(?P<dother>))"
        rb"|  send_error: (?P<senderr>task id = (?P<se_t>\d{1,15}), error: (?P<se_msg>[^\n]*))"
        rb"|(?:        stop|cancel_tasks): (?P<cancel>cancel task, id_task = (?P<ca_t>\d{1,15}))"
        rb"|process_sing: (?P<defer>no slot is available, defer task, id_task = (?P<df_t>\d{1,15}))"
        rb"|  load_model: (?P<loadm>loading model)"
        rb"|(?:  load_model|        init): (?P<nslots>initializing(?: slots)?, n_slots = (?P<nsl>\d{1,15})))")
    que = re.compile(
        rb"que  " + guard(b"que  ") + rb"(?:yield_to_que: (?P<ydone>done yielding)"
        rb"|pop_deferred: (?P<popdef>pop deferred task, id_task = (?P<pd_t>\d{1,15}))"
        rb"|        post: (?P<arr>new task, id = (?P<ar_t>\d{1,15})/\d+, front = 0))")
    return slot, srv, que


_SLOT, _SRV, _QUE = _families(True)
_LOOSE = _families(False)
_GS = _SLOT.groupindex
_G_DEC_N, _G_DEC_K, _G_TOK_N, _G_TOK_R = _GS["dec_n"], _GS["dec_k"], _GS["tok_n"], _GS["tok_r"]
_G_SID, _G_TID, _G_DEC = _GS["sid"], _GS["tid"], _GS["dec"]

# Records, as both tokenizers give them: kind, start, then fields a, b, c, e and ts (the prefix's
# ms, -1: ask _ts). The frequent kinds carry their fields (K_* from llamascan.c); the regex
# tokenizer's other records are K_MATCH with the match in a; the C tokenizer's are SLOW.
K_MATCH = 13
_NO_TS = -1.0


def _record(m) -> tuple:
    """A regex match as a record, the frequent kinds parsed as llamascan.c parses them."""
    g, s = m.lastgroup, m.start()
    if g == "tok":
        return K_TOK, s, int(m.group(_G_SID)), int(m.group(_G_TID)), int(m.group(_G_TOK_N)), \
            int(m.group(_G_TOK_R)), _NO_TS
    if g == "dec":
        flags = 1 if m.group(_G_DEC_K) == b"past" else 2 if m.string.startswith(b"id=", m.start(_G_DEC) + 19) else 0
        return K_DEC, s, int(m.group(_G_SID)), int(m.group(_G_TID)), int(m.group(_G_DEC_N)), flags, _NO_TS
    if g == "post":
        return K_POST, s, 0, 0, 0, 0, _NO_TS
    if g == "eff":
        return K_EFF, s, 0, 0, int(m.group("eff_o")), int(m.group("eff_b")), _NO_TS
    if g == "ydone":
        return K_YDONE, s, 0, 0, 0, 0, _NO_TS
    if g == "dbatch":
        return K_DBATCH, s, 0, 0, int(m.group("db_n")), 0, _NO_TS
    if g == "runs":
        return K_RUNS, s, 0, 0, 0, 0, _NO_TS
    return K_MATCH, s, m, 0, 0, 0, _NO_TS

# Rare lines that do not start with slot/srv/que: the build, the context parameters, libllama's
# KV failures. Only tried on lines holding one of the gate substrings.
_SEC = re.compile(
    rb"(?:\d+\.\d\d\.\d{3}\.\d{3} [IWEDT] )?(?:cmn  common_param: common_params_print_info: )?(?:"
    rb"(?P<build>build:? (?P<bn>\d{1,15}) \((?P<bh>[0-9a-f]{6,40})\))"
    rb"|(?:llama_context|llama_init_from_model): +(?P<ck>n_seq_max|n_ctx|n_ctx_seq|n_ctx_per_seq|n_batch|n_ubatch"
    rb"|kv_unified|flash_attn|causal_attn) += (?P<cv>[^\s]+))"
)
_SEC_GATES = (b"build", b"llama_")
# what every _SEC match holds; it starts with a letter, so the regex engine skips to candidates,
# while _SEC (optional timestamp first) is tried at every position of the window
_SEC_CORE = re.compile(rb"build:? \d|(?:llama_context|llama_init_from_model): +(?:n_seq_max|n_ctx|n_ctx_seq"
                       rb"|n_ctx_per_seq|n_batch|n_ubatch|kv_unified|flash_attn|causal_attn) += ")
_SEC_LLAMA = (b"llama_context", b"llama_init_from_model")   # a line found by the second gate needs one
_START = operator.methodcaller("start")
_TS = re.compile(rb"(\d{1,6})\.(\d\d)\.(\d\d\d)\.(\d\d\d) [A-Z] \Z")
def _prefix_ms(m) -> float:
    return (int(m.group(1)) * 60 + int(m.group(2))) * 1000.0 + int(m.group(3)) + int(m.group(4)) * 0.001


_TS_COLOURED = re.compile(rb"(\d{1,6})\.(\d\d)\.(\d\d\d)\.(\d\d\d)\x1b\[0m \x1b\[3\dm[A-Z] (?:\x1b\[0m)?\Z")
_IGNORED_SLOT = (
    b"selected slot", b"- ", b"sampler chain", b"sampler params", b"saving idle slot", b"__TEST_TAG",
    b"clearing prompt", b"main/do_checkpoint", b"graphs reused", b"total time", b"n_gen =", b"n_decoded =",
    b"prompt token", b"created context checkpoint", b"erased invalidated", b"restored context checkpoint",
    b"prompt processing, n_tokens", b"max possible draft", b"reusing chunk", b"n_past was set to",
    b"draft acceptance", b"new slot", b"cache state", b"\r", b"\n", b"restored", b"saved", b"checkpoint",
    b"trying to reuse", b"after context reuse",
)
_IGNORED_SRV = (b"all slots are idle", b"run slots completed", b"posting", b"decoding batch",
                b"no tokens to decode")
_STOP_MAP = {b"by EOS": "stop", b"by limit": "limit", b"by time limit": "limit",
             b"by indentation limit": "limit", b"due to running out of context": "context"}

ProgressFn = Callable[[int, int | None], None]


_EMPTY: dict[str, pd.DataFrame] = {}


def _empty(name: str) -> pd.DataFrame:
    if name not in _EMPTY:
        _EMPTY[name] = empty_table(name)
    return _EMPTY[name].copy()


def _int_array(vals: list):
    return pd.array(np.array(vals, dtype=float), dtype="Int64")   # None (unknown) becomes NaN, then NA


class _Task:
    __slots__ = ("key", "task", "run", "slot", "arr_t", "arr_step", "adm_t", "adm_step", "fs_step", "fs_t",
                 "ft_step", "ft_t", "fin_step", "fin_t", "prompt_len", "prompt_sent", "n_keep", "cached",
                 "max_tokens", "n_gen", "n_dec", "stop", "error", "cancelled", "launched", "finished",
                 "waiting", "pend_idx", "pend_x", "t_pn", "t_pms", "t_en", "t_ems", "fin_ev", "deferred",
                 "truncated", "seen_order", "pdone", "rel_n", "shifted")

    def __init__(self, key: str, task: int, run: int):
        self.key, self.task, self.run = key, task, run
        self.slot = None
        self.arr_t = self.arr_step = self.adm_t = self.adm_step = None
        self.fs_step = self.fs_t = self.ft_step = self.ft_t = self.fin_step = self.fin_t = None
        self.prompt_len = self.prompt_sent = self.n_keep = self.cached = self.max_tokens = None
        self.n_gen = 0
        self.n_dec = 0
        self.stop = self.error = None
        self.cancelled = self.launched = self.finished = self.waiting = False
        self.pend_idx = -1
        self.pend_x = 0
        self.t_pn = self.t_pms = self.t_en = self.t_ems = None
        self.fin_ev = -1
        self.deferred = 0
        self.truncated = False
        self.seen_order = 0
        self.pdone = False   # its prompt_done event was made
        self.rel_n = None    # the slot's tokens at release (`stop processing`)
        self.shifted = 0     # tokens dropped by context shifts; None when the prompt was cut


class _Blocks:
    """The log cut into blocks of whole lines. `buf` holds a line end (not part of the log), the
    carry (the start of a line whose end has not come yet), then the bytes just read; took()
    says how much of it is whole lines, next() starts the following block. The reader uses one
    buffer over and over (a fresh multi-MB object per block costs its page faults, about as much
    as reading the block); the prefetching thread (_prefetched_blocks) hands each block over and
    carries on in another buffer, from `spare`."""

    __slots__ = ("buf", "have", "skip_long", "warn", "carry", "spare")

    def __init__(self, warn: Callable[[str], None], spare=None):
        self.buf = bytearray(b"\n")
        self.have = 1
        self.skip_long = False
        self.warn = warn
        self.carry = (1, 1)
        self.spare = spare   # a function giving the next buffer; None: keep this one

    def room(self, n: int) -> memoryview:
        """Where the next n bytes go (a reader can readinto it, then call took())."""
        need = self.have + n
        if need > len(self.buf):
            self.buf.extend(bytes(need - len(self.buf)))
        return memoryview(self.buf)[self.have:need]

    def took(self, n: int) -> int:
        """n bytes were written at room(): the end of the whole lines in buf (0: none yet). Then
        next() must be called before the next room()."""
        buf, total = self.buf, self.have + n
        cut = buf.rfind(b"\n", 0, total)
        if cut <= 0:
            self._keep_carry(1, total, scanned=False)
            self.carry = None
            return 0
        # keep an OLD timing block (header + 3 unprefixed lines) together with its header
        tail = buf.rfind(b"print_timing", max(0, cut - 600), cut)
        if tail > 0:
            ls = buf.rfind(b"\n", 0, tail)
            if ls > 0:
                cut = ls
        self.carry = self._keep_carry(cut + 1, total)
        return cut + 1

    def next(self) -> None:
        """The carry moves to the front of the buffer the next block is read into."""
        if self.carry is None:
            return
        a, b = self.carry
        if self.spare is None:
            self.buf[1:1 + b - a] = self.buf[a:b]   # a same-length slice: no resize
        else:
            old, self.buf = self.buf, self.spare()
            self.buf[1:1 + b - a] = old[a:b]
        self.have = 1 + b - a

    def _keep_carry(self, a: int, b: int, scanned: bool = True) -> tuple[int, int]:
        """The carry after the block: buf[a:b], less a too-long line's rest. scanned False: no
        line end came, the carry just grew (it stays in place)."""
        buf = self.buf
        if self.skip_long:
            nl = buf.find(b"\n", a, b)
            if nl < 0:
                a = b   # still inside the skipped line: nothing kept
            else:
                a = nl + 1
                self.skip_long = False
        if b - a > MAX_LINE:
            self.warn(f"a line longer than {MAX_LINE >> 20} MiB was skipped (binary data?)")
            self.skip_long = True
            a = b
        if not scanned:
            if a != 1:
                buf[1:1 + b - a] = buf[a:b]
            self.have = 1 + b - a
        return a, b


class LlamaLogReader:
    """Incremental reader: feed(bytes) any number of times, then finish() -> Trace.

    read_llama_log() wraps it for paths, bytes, file objects and line iterators."""

    # slots: the hot loop reads and writes the reader's state per record; with ~70 attributes an
    # instance dict is too large for CPython's shared-key fast path, and every access a lookup
    __slots__ = ("name", "native", "blocks", "families", "nbytes", "nlines", "warnings",
                 "unparsed", "unparsed_examples", "build", "build_number", "build_commit", "cfg", "run",
                 "run_first_step", "runs", "t_offset", "last_t", "saw_ts", "tasks", "cur_tasks", "running",
                 "waiting", "arr_since", "arr_prev", "arr_cur", "b_step", "b_req", "b_slot", "b_kind",
                 "b_tok", "b_cb", "b_samp", "n_steps", "st_start", "st_end", "st_logged", "st_running",
                 "st_waiting", "st_arrived", "st_finished", "st_attempts", "failed_steps", "phase",
                 "iter_pos", "it_dec", "it_pre", "wait_prompt", "fail_pending", "implicit_opens",
                 "abandoned", "headless_calls", "batch_checked", "batch_mismatch", "mixed_batches",
                 "nocb_evidence", "saw_tok", "saw_chunks", "dec_after", "chunk_sums", "records", "e_step",
                 "e_time", "e_req", "e_kind", "e_detail", "handlers")

    def __init__(self, name: str = "", native: bool = True):
        self.name = name
        self.native = native   # use the C tokenizer when it can be built (same records, same Trace)
        self.blocks = _Blocks(self._warn)
        self.families = (_SLOT, _SRV, _QUE)
        self.nbytes = 0
        self.nlines = 0
        self.warnings: list[str] = []
        self.unparsed = 0
        self.unparsed_examples: list[str] = []
        # config as printed
        self.build = self.build_number = self.build_commit = None
        self.cfg: dict = {}
        self.run = 1
        self.run_first_step = 1
        self.runs: list[dict] = []
        self.t_offset = 0.0
        self.last_t = None
        self.saw_ts = False
        # tasks
        self.tasks: dict[str, _Task] = {}
        self.cur_tasks: dict[int, _Task] = {}   # task id -> live record of the current run
        self.running = 0
        self.waiting = 0
        self.arr_since = 0
        self.arr_prev: list[_Task] = []
        self.arr_cur: list[_Task] = []
        # batch entries
        self.b_step: list[int] = []
        self.b_req: list[str] = []
        self.b_slot: list[int] = []
        self.b_kind: list[str] = []
        self.b_tok: list = []
        self.b_cb: list[int] = []
        self.b_samp: list[bool] = []
        # steps
        self.n_steps = 0
        self.st_start: list = []
        self.st_end: list = []
        self.st_logged: list = []
        self.st_running: list[int] = []
        self.st_waiting: list[int] = []
        self.st_arrived: list[int] = []
        self.st_finished: list[int] = []
        self.st_attempts: list[int] = []
        self.failed_steps: set[int] = set()
        self.phase = 0           # 0: between iterations, 1: building a batch, 2: model called
        self.iter_pos = 0
        self.it_dec = self.it_pre = 0   # decode tokens / prompt chunks in the batch being built
        self.wait_prompt = 0            # launched tasks whose prompt has not started
        self.fail_pending = False
        self.implicit_opens = 0
        self.abandoned = 0
        self.headless_calls = 0
        self.batch_checked = 0
        self.batch_mismatch: list[str] = []
        self.mixed_batches = 0     # batches holding decode tokens and a prompt chunk (-cb evidence)
        self.nocb_evidence = 0     # decode-only batches while a launched prompt waited (-nocb evidence)
        self.saw_tok = False
        self.saw_chunks = False
        self.dec_after = None   # decode-token n_tokens (no `id=`) counts the token itself; None: not seen
        self.chunk_sums: dict[str, int] = {}   # prompt tokens per task, for logs without model calls
        self.records = 0
        # events
        self.e_step: list[int] = []
        self.e_time: list = []
        self.e_req: list[str] = []
        self.e_kind: list[str] = []
        self.e_detail: list[str] = []
        self.handlers = {
            "chunk": self._h_chunk, "kvrm": self._h_kvrm,
            "prog": self._h_prog, "pdone": self._h_pdone, "isamp": self._h_isamp, "newp": self._h_newp,
            "stop": self._h_stop, "rel": self._h_rel, "launch": self._h_launch, "lslot": self._h_lslot,
            "draft": self._h_draft, "cshift": self._h_cshift, "trunc": self._h_trunc, "full": self._h_full,
            "ptime": self._h_ptime, "etime": self._h_etime, "thdr": self._h_thdr, "newslot": self._h_newslot,
            "sother": self._h_sother,
            "ofail": self._h_ofail, "ofull": self._h_ofull, "decerr": self._h_decerr, "uother": self._h_uother,
            "nfail": self._h_nfail, "nctx": self._h_nctx, "dother": self._h_dother,
            "senderr": self._h_senderr, "cancel": self._h_cancel, "defer": self._h_defer,
            "nslots": self._h_nslots, "popdef": self._h_popdef,
            "arr": self._h_arr, "build": self._h_build,
            "cv": self._h_cfg, "loadm": self._h_loadm,
        }

    # ------------------------------------------------------------------ input plumbing
    def feed(self, chunk: bytes) -> None:
        if not chunk:
            return
        n = len(chunk)
        with self.room(n) as view:
            view[:] = chunk
        self.took(n)

    def room(self, n: int) -> memoryview:
        """Where the next n bytes go (a reader can readinto it, then call took())."""
        return self.blocks.room(n)

    def took(self, n: int) -> None:
        """n bytes were written at room(): read every complete line they close."""
        if not n:
            return
        self.nbytes += n
        end = self.blocks.took(n)
        if end:
            self._scan(self.blocks.buf, end)
        self.blocks.next()

    def _warn(self, msg: str) -> None:
        if msg not in self.warnings and len(self.warnings) < 50:
            self.warnings.append(msg)

    def _unparsed(self, data: bytes, s: int) -> None:
        self.unparsed += 1
        if len(self.unparsed_examples) < MAX_EXAMPLES:
            ls = data.rfind(b"\n", 0, s) + 1
            le = data.find(b"\n", s)
            line = data[ls:le if le >= 0 else len(data)][:240]
            self.unparsed_examples.append(line.decode("utf-8", "replace"))

    # ------------------------------------------------------------------ the scan
    def _scan(self, data: bytes, end: int, scanned=None) -> None:
        """Read the records in data[:end]: data starts with a line end (not part of the log) and
        data[:end] ends with one. scanned: the C tokenizer's (records, loadm, guarded) for it, made
        ahead by the prefetching thread."""
        self._read_block(data, end, scanned)
        if not self.records:   # lines count only while no record came: a log without any is all unparsed
            self.nlines += data.count(b"\n", 0, end) - 1

    def _read_block(self, data: bytes, end: int, scanned=None) -> None:
        scan = native.llamascan() if self.native else None
        if scan is None:
            self._scan_regex(data, end)
            return
        # the C tokenizer: candidates in order, the frequent records parsed
        guarded = self.families is not _LOOSE
        if scanned is not None and scanned[2] == guarded:
            found, loadm = scanned[:2]
        else:   # (ahead of time it was scanned for a prefix the reader has since given up on)
            found, loadm = scan(data, end, guarded)
        if not self.records and not self._has_slot_srv(found, data, end) and self._go_loose(data, end):
            return
        secs = []
        if self.n_steps < self.run_first_step or loadm:
            secs = self._sec_matches(data, end, native.llamagates()(data, end))
        ends = [0, 0, 0]
        records = native.rows(found)
        lo = 0
        for m in secs:   # start-up lines, in their place among the records
            hi = int(np.searchsorted(found[:, 1], m.start()))
            if hi > lo:
                self.records += self._apply(data, end, islice(records, hi - lo), ends)
                lo = hi
            self.handlers[m.lastgroup](m, data, m.start())
            self.records += 1
        self.records += self._apply(data, end, records, ends)

    def _scan_regex(self, data: bytes, end: int) -> None:
        """The reference tokenizer: one regex per line family; the records in the order they start,
        the frequent kinds parsed as the C tokenizer parses them."""
        slot_re, srv_re, que_re = self.families
        srv = list(srv_re.finditer(data, 0, end))
        ms = list(slot_re.finditer(data, 0, end))
        if not ms and not srv and self._go_loose(data, end):
            return
        need_sec = self.n_steps < self.run_first_step or any(m.lastgroup == "loadm" for m in srv)
        ms.extend(srv)
        ms.extend(que_re.finditer(data, 0, end))
        if need_sec:
            ms.extend(self._sec_matches(data, end))
        ms.sort(key=_START)
        self.records += self._apply(data, end, map(_record, ms), [0, 0, 0])

    def _go_loose(self, data: bytes, end: int) -> bool:
        """No slot or srv record yet: are the lines behind a foreign prefix? Then rescan loosely."""
        if self.records or self.families is _LOOSE or sum(1 for _ in _LOOSE[0].finditer(data, 0, end)) < 5:
            return False
        self.families = _LOOSE
        self._warn("the log's lines carry a foreign prefix (journald, docker, ...?): records are "
                   "read wherever they appear on a line")
        self._read_block(data, end)
        return True

    def _gate_lines(self, data: bytes, end: int):
        """Per gate, the first occurrence on each line: that line's start and end (-1: none)."""
        for g in _SEC_GATES:
            i = data.find(g, 0, end)
            lines = []
            while i >= 0:
                le = data.find(b"\n", i, end)
                lines.append((data.rfind(b"\n", 0, i) + 1, le))
                if le < 0:
                    break
                i = data.find(g, le, end)
            yield lines

    def _sec_matches(self, data: bytes, end: int, gated=None) -> list:
        """Start-up lines (build, context parameters): looked for only where a server starts.
        gated: the gates' lines, when the native tokenizer found them."""
        out, seen = [], set()
        for g, lines in zip(_SEC_GATES, gated or self._gate_lines(data, end)):
            for ls, le in lines:
                if ls not in seen and (g != b"llama_" or any(data.find(w, ls, le if le >= 0 else end) >= 0
                                                             for w in _SEC_LLAMA)):
                    seen.add(ls)
                    m = _SEC.match(data, ls)
                    lim = min(le if le >= 0 else len(data), ls + 300)
                    if m is None and _SEC_CORE.search(data, ls, lim):
                        # behind a foreign prefix (journald, docker): not inside JSON text
                        m = _SEC.search(data, ls, lim)
                        if m is not None and (b'"' in data[ls:m.start()] or b"{" in data[ls:m.start()]):
                            m = None
                    if m is not None:
                        out.append(m)
        out.sort(key=_START)
        return out

    def _has_slot_srv(self, found, data: bytes, end: int) -> bool:
        """Does the block hold a record of the slot or srv family?"""
        for k, s in found[:, :2].tolist():
            if k == K_SLOW_SLOT or k == K_SLOW_SRV:
                if self.families[k - K_SLOW_SLOT].match(data, s, end):
                    return True
            elif k != K_YDONE and k != K_SLOW_QUE:
                return True
        return False

    def _apply(self, data: bytes, end: int, records, ends: list) -> int:
        """Run the state machine over records (kind, start, a, b, c, e, ts); returns how
        many were records. A SLOW candidate is a record when its family's regex matches there, and
        then the span it matched hides that family's candidates inside it, as re.finditer would.
        The frequent kinds are handled inline: this loop is the reader's hot path."""
        fams, handlers = self.families, self.handlers
        cur = self.cur_tasks
        b_step, b_req, b_slot, b_kind = self.b_step, self.b_req, self.b_slot, self.b_kind
        b_tok, b_cb, b_samp, st_end = self.b_tok, self.b_cb, self.b_samp, self.st_end
        slot_end, srv_end, que_end = ends
        n = 0
        for k, s, a, b, c, e, w in records:
            if k == K_TOK:   # a sampled token of task b: c generated so far, e remaining (-1: no limit)
                if s < slot_end:
                    continue
                t = cur.get(b) or self._task(b)
                self.saw_tok = True
                if c > t.n_gen:
                    t.n_gen = c
                if t.ft_step is None:
                    t.ft_step = self.n_steps
                    t.ft_t = self._when(w, data, s)
                    if e >= 0 and t.max_tokens is None:
                        t.max_tokens = c + e
                if self.phase == 2 and self.saw_ts and st_end[-1] is None:
                    st_end[-1] = self._when(w, data, s)
            elif k == K_DEC:   # slot a's decode token for task b joins the batch; c: n_tokens/n_past
                if s < slot_end:
                    continue
                if self.phase != 1:
                    self._implicit_open()
                t = cur.get(b) or self._task(b)
                t.n_dec += 1
                if t.slot is None:
                    t.slot = a
                b_step.append(self.n_steps + 1)
                b_req.append(t.key)
                b_slot.append(a)
                b_kind.append("decode")
                b_tok.append(1)
                # OLD's n_past counts the token just added (e & 1); so does n_tokens in builds without
                # `id=` (2025-10 to 2026-04, by their source), while with `id=` (e & 2) it is the count
                # before it. A task's first decode token, right after its prompt, shows which way a
                # log without `id=` counts.
                if e & 1:
                    after = True
                elif e & 2:
                    after = False
                else:
                    if self.dec_after is None and t.n_dec == 1 and t.prompt_len is not None \
                            and 0 <= c - t.prompt_len <= 1:
                        self.dec_after = c > t.prompt_len
                    after = self.dec_after is not False
                b_cb.append(c - 1 if after else c)
                b_samp.append(True)
                self.it_dec += 1
            elif k == K_POST:   # the scheduler starts building a batch
                if s < srv_end:
                    continue
                if self.phase == 1:
                    self._abandon()
                self._open()
            elif k == K_EFF:   # a model call attempt (NEW builds); c: its offset in the batch
                if s < srv_end:
                    continue
                if self.phase == 2 and (self.fail_pending or c > 0):
                    self.st_attempts[-1] += 1
                    self.fail_pending = False
                else:
                    if self.phase == 2:   # off = 0 again without a failure: the opening line was lost
                        self._open()
                        self.headless_calls += 1
                    self._model_call(self._when(w, data, s), None)
            elif k == K_YDONE:   # the model call returned
                if s < que_end:
                    continue
                if self.phase == 2 and self.saw_ts:
                    st_end[-1] = self._when(w, data, s)
            elif k == K_DBATCH:   # a model call (OLD builds) of c tokens
                if s < srv_end:
                    continue
                self._model_call(self._when(w, data, s), c)
            elif k == K_RUNS:   # the iteration ends (OLD builds)
                if s < srv_end:
                    continue
                if self.phase == 2 and st_end[-1] is None and self.saw_ts:
                    st_end[-1] = self._when(w, data, s)
                self.phase = 0
            elif k == K_IGN_SLOT:
                if s < slot_end:
                    continue
            elif k == K_IGN_SRV:
                if s < srv_end:
                    continue
            elif k == K_MATCH:   # the regex tokenizer's rare records
                handlers[a.lastgroup](a, data, s)
                cur = self.cur_tasks   # a new server run replaces it
            else:   # SLOW: the family's regex decides
                f = k - K_SLOW_SLOT
                if s < (slot_end, srv_end, que_end)[f]:
                    continue
                m = fams[f].match(data, s, end)
                if m is None:
                    continue
                if f == 0:
                    slot_end = m.end()
                elif f == 1:
                    srv_end = m.end()
                else:
                    que_end = m.end()
                rec = _record(m)
                if rec[0] == K_MATCH:
                    handlers[m.lastgroup](m, data, s)
                    cur = self.cur_tasks
                else:   # a frequent kind the C tokenizer left to the regex: the same path
                    self._apply(data, end, (rec,), [0, 0, 0])
            n += 1
        ends[:] = slot_end, srv_end, que_end
        return n

    def _when(self, w: float, data: bytes, s: int):
        """The record's time: w when the tokenizer read the prefix (ms), else _ts."""
        if w < 0:
            return self._ts(data, s)
        self.saw_ts = True
        t = w + self.t_offset
        self.last_t = t
        return t

    def _ts(self, data: bytes, s: int):
        """Milliseconds since the logger started, from the `M.SS.mmm.uuu L ` prefix before s."""
        if s < 15:
            return None
        if data[s - 1] == 32 and data[s - 3] != 109:
            seg = data[s - 15:s - 3]
            if seg[1] == 46 and seg[4] == 46 and seg[8] == 46 and 48 <= seg[0] <= 57 \
                    and (s == 15 or not 48 <= data[s - 16] <= 57):
                try:   # the usual case: one digit of minutes
                    t = (seg[0] - 48) * 60000.0 + float(seg[2:4]) * 1000.0 + float(seg[5:8]) + float(seg[9:12]) * 0.001
                except ValueError:
                    return None
            else:
                m = _TS.search(data, max(0, s - 32), s)
                if m is None:
                    return None
                t = _prefix_ms(m)
        elif data[s - 1] == 109 or data[s - 3] == 109:
            # --log-colors: ESC[34m M.SS.mmm.uuu ESC[0m, a space, ESC[3Xm L, a space (then ESC[0m after I)
            m = _TS_COLOURED.search(data, max(0, s - 48), s)
            if m is None:
                return None
            t = _prefix_ms(m)
        else:
            return None
        self.saw_ts = True
        t += self.t_offset
        self.last_t = t
        return t

    # ------------------------------------------------------------------ start-up and libllama lines
    def _run_busy(self) -> bool:
        return self.n_steps >= self.run_first_step or bool(self.cur_tasks)

    def _h_build(self, m, data, s):
        if self._run_busy():
            self._new_run()
        self.build_number = int(m.group("bn"))
        self.build_commit = m.group("bh").decode()
        self.build = f"{self.build_number} ({self.build_commit})"

    def _h_cfg(self, m, data, s):
        if self.n_steps >= self.run_first_step:
            return  # only the start-up block describes the server
        k = m.group("ck").decode()
        v = m.group("cv").decode("utf-8", "replace")
        key = {"n_ctx_seq": "n_ctx_slot", "n_ctx_per_seq": "n_ctx_slot"}.get(k, k)
        if v in ("true", "false"):
            val = v == "true"
        else:
            try:
                val = int(v)
            except ValueError:
                if k.startswith("n_"):   # a size that is no number (a damaged line): not a setting
                    self._warn(f"a start-up line gives {k} = {v[:20]!r}, not a number: ignored")
                    return
                val = v
        self.cfg[key] = val

    def _run_record(self) -> dict:
        return {"run": self.run, "first_step": self.run_first_step, "last_step": self.n_steps,
                "build": self.build, "build_number": self.build_number, "build_commit": self.build_commit,
                "config": dict(self.cfg)}

    def _new_run(self) -> None:
        """The server started again in the same file (logs concatenated or a restart)."""
        self._close_iteration()
        for t in self.cur_tasks.values():
            if not t.finished:
                self._finish(t, None, None)
        self.cur_tasks = {}
        self.running = self.waiting = self.wait_prompt = 0
        self.arr_prev, self.arr_cur = [], []
        self.runs.append(self._run_record())
        self.cfg = {}
        self.build = self.build_number = self.build_commit = None
        self.dec_after = None   # the next run may be another build
        self.run += 1
        self.run_first_step = self.n_steps + 1
        if self.last_t is not None:
            self.t_offset = self.last_t
        self._warn("the log holds more than one server run (restart or concatenated logs): task ids of "
                   "later runs are prefixed with the run number and their times continue after the previous "
                   "run's last line (the real gap is unknown)")

    # ------------------------------------------------------------------ tasks and events
    def _task(self, tid: int, create: bool = True):
        t = self.cur_tasks.get(tid)
        if t is None and create:
            key = str(tid) if self.run == 1 else f"{self.run}.{tid}"
            if key in self.tasks:
                k = 2
                while f"{key}#{k}" in self.tasks:
                    k += 1
                key = f"{key}#{k}"
            t = _Task(key, tid, self.run)
            t.seen_order = len(self.tasks)
            self.tasks[key] = t
            self.cur_tasks[tid] = t
        return t

    def _event(self, step, t, req: str, kind: str, detail: str = "") -> int:
        self.e_step.append(step)
        self.e_time.append(t)
        self.e_req.append(req)
        self.e_kind.append(kind)
        self.e_detail.append(detail)
        return len(self.e_step) - 1

    def _finish(self, t: _Task, time, step) -> None:
        if t.finished:
            return
        t.finished = True
        if t.waiting:
            t.waiting = False
            self.waiting -= 1
        if t.launched:
            self.running -= 1
            if t.fs_step is None:
                self.wait_prompt -= 1
        t.fin_t = time
        t.fin_step = step
        t.fin_ev = self._event(step if step is not None else max(self.n_steps, 1), time, t.key, "finish", "")
        if self.st_finished and step is not None and step == self.n_steps:
            self.st_finished[-1] += 1

    # ------------------------------------------------------------------ iterations
    def _open(self) -> None:
        self.phase = 1
        self.iter_pos = len(self.b_step)
        self.fail_pending = False
        self.it_dec = self.it_pre = 0

    def _implicit_open(self) -> None:
        if self.phase == 1:
            return
        if self.phase == 0 and self.n_steps == 0 and not self.b_step:
            self._open()   # the first batch of a log that starts mid-way
            return
        self.implicit_opens += 1
        self._open()

    def _abandon(self) -> None:
        """A batch was being built but no model call followed: drop its entries."""
        pos = self.iter_pos
        if len(self.b_step) > pos:
            self.abandoned += 1
            for t in self.cur_tasks.values():
                if t.pend_idx >= pos:
                    t.pend_idx = -1
            for lst in (self.b_step, self.b_req, self.b_slot, self.b_kind, self.b_tok, self.b_cb, self.b_samp):
                del lst[pos:]
        self.phase = 0

    def _close_iteration(self) -> None:
        if self.phase == 1:
            self._abandon()
        self.phase = 0

    def _model_call(self, t, logged) -> None:
        """The first decode line of an iteration: the batch becomes a step."""
        if self.phase != 1:
            # a model call without the batch-building lines (log cut, or lines lost)
            self._open()
            self.headless_calls += 1
        self.n_steps += 1
        if self.arr_prev:
            # queued before the previous model call, never deferred, still without a slot: the
            # queue handled it without a slot (not a completion task, or refused)
            for tk in self.arr_prev:
                if tk.waiting and not tk.deferred and not tk.launched:
                    tk.waiting = False
                    self.waiting -= 1
        self.arr_prev = self.arr_cur
        self.arr_cur = []
        self.st_start.append(t)
        self.st_end.append(None)
        self.st_logged.append(logged)
        self.st_running.append(self.running)
        self.st_waiting.append(self.waiting)
        self.st_arrived.append(self.arr_since)
        self.arr_since = 0
        self.st_finished.append(0)
        self.st_attempts.append(1)
        self.phase = 2
        if self.it_dec:
            if self.it_pre:
                self.mixed_batches += 1
            elif self.wait_prompt > 0 and self.it_dec < (self.cfg.get("n_batch") or 0):
                self.nocb_evidence += 1
        if logged is not None:
            toks = self.b_tok[self.iter_pos:]
            if None not in toks:
                self.batch_checked += 1
                tot = sum(toks)
                if tot != logged:
                    self.batch_mismatch.append(f"step {self.n_steps}: rebuilt {tot} tokens, the log says {logged}"
                                               if len(self.batch_mismatch) < MAX_EXAMPLES else "")

    def _entry(self, t: _Task, slot: int, kind: str, tokens, cb: int, sampled: bool) -> int:
        self.b_step.append(self.n_steps + 1 if self.phase == 1 else self.n_steps)
        self.b_req.append(t.key)
        self.b_slot.append(slot)
        self.b_kind.append(kind)
        self.b_tok.append(tokens)
        self.b_cb.append(cb)
        self.b_samp.append(sampled)
        if kind == "decode":
            self.it_dec += tokens
        else:
            self.it_pre += 1
        return len(self.b_step) - 1

    def _resolve(self, t: _Task, end: int) -> None:
        i = t.pend_idx
        if i < 0:
            return
        n = end - t.pend_x
        if n >= 0:
            self.b_tok[i] = n
        t.pend_idx = -1

    def _chunk_start(self, t: _Task, slot: int, x: int, data: bytes, s: int) -> None:
        self._implicit_open()
        self.saw_chunks = True
        if t.slot is None:
            t.slot = slot
        if t.pend_idx >= 0:
            self._resolve(t, x)
        if t.fs_step is None:
            t.fs_step = self.n_steps + 1
            t.fs_t = self._ts(data, s)
            t.cached = x
            if t.launched and not t.finished:
                self.wait_prompt -= 1
        t.pend_idx = self._entry(t, slot, "prefill", None, x, False)
        t.pend_x = x

    # ------------------------------------------------------------------ slot handlers
    def _h_draft(self, m, data, s):
        self._implicit_open()
        t = self._task(int(m.group(_G_TID)))
        t.n_dec += 1
        self._entry(t, int(m.group(_G_SID)), "decode", 1 + int(m.group("draft_d")), int(m.group("draft_p")), True)

    def _h_chunk(self, m, data, s):
        tid = int(m.group(3))
        if tid < 0:
            return
        self._chunk_start(self._task(tid), int(m.group(2)), int(m.group("chunk_x")), data, s)

    def _h_kvrm(self, m, data, s):
        tid = int(m.group(3))
        if tid < 0:
            return
        self._chunk_start(self._task(tid), int(m.group(2)), int(m.group("kvrm_x")), data, s)

    def _h_prog(self, m, data, s):
        t = self._task(int(m.group(3)))
        self._resolve(t, int(m.group("prog_p")))

    def _h_pdone(self, m, data, s):
        t = self._task(int(m.group(3)))
        p = int(m.group("pdone_p"))
        i = t.pend_idx
        self._resolve(t, p)
        if i < 0 and self.b_req and self.phase == 1:
            # find this task's last chunk in the batch being built (resolved by the progress line)
            for j in range(len(self.b_req) - 1, self.iter_pos - 1, -1):
                if self.b_req[j] == t.key and self.b_kind[j] == "prefill":
                    i = j
                    break
        if i >= 0:
            self.b_samp[i] = True
        if t.prompt_len is None:
            t.prompt_len = p
        self._prompt_done(t, p, data, s)

    def _prompt_done(self, t: _Task, p: int, data, s) -> None:
        # builds of 2025-12 to 2026-05 print both `prompt done` and `init sampler`: one event
        if not t.pdone:
            t.pdone = True
            self._event(self.n_steps + (1 if self.phase == 1 else 0), self._ts(data, s), t.key, "prompt_done",
                        f"{p} prompt tokens in the slot")

    def _h_isamp(self, m, data, s):
        t = self._task(int(m.group(3)))
        total = int(m.group("isamp_t"))
        i = t.pend_idx
        self._resolve(t, total)
        if i >= 0:
            self.b_samp[i] = True
        t.prompt_len = total
        self._prompt_done(t, total, data, s)

    def _h_newp(self, m, data, s):
        t = self._task(int(m.group(3)))
        n = int(m.group("newp_n"))
        t.prompt_len = n
        if t.prompt_sent is None:
            t.prompt_sent = n
        t.n_keep = int(m.group("newp_k"))
        if "n_ctx_slot" not in self.cfg:
            self.cfg["n_ctx_slot"] = int(m.group("newp_c"))

    def _h_stop(self, m, data, s):
        t = self._task(int(m.group(3)))
        t.stop = _STOP_MAP.get(m.group("stop_k"), "stop")
        np_ = m.group("stop_np")
        if np_ is not None and t.max_tokens is None and int(np_) >= 0:
            t.max_tokens = int(np_)

    def _h_rel(self, m, data, s):
        tid = int(m.group(3))
        if tid < 0:
            return
        t = self._task(tid)
        n = int(m.group("rel_n"))
        if t.pend_idx >= 0:
            self._resolve(t, n)
        if m.group("rel_t") != b"0":
            t.truncated = True
        t.rel_n = n
        self._finish(t, self._ts(data, s), self.n_steps or None)

    def _h_launch(self, m, data, s):
        tid = int(m.group(3))
        if tid < 0:
            return
        t = self._task(tid)
        if t.launched and t.finished:   # the same id again: a new task
            del self.cur_tasks[tid]
            t = self._task(tid)
        if t.launched:
            return
        t.launched = True
        t.slot = int(m.group(2))
        t.adm_step = self.n_steps + 1
        t.adm_t = self._ts(data, s)
        if t.waiting:
            t.waiting = False
            self.waiting -= 1
        self.running += 1
        if t.fs_step is None:
            self.wait_prompt += 1
        self._event(t.adm_step, t.adm_t, t.key, "admit", f"slot {t.slot}")

    def _h_lslot(self, m, data, s):
        tid = int(m.group(3))
        if tid < 0:
            return  # NEW builds print the slot's previous task here
        e = m.end()
        le = data.find(b"\n", e)
        seg = data[e:le if le >= 0 else len(data)]
        mt = re.search(rb'"id_task":(-?\d{1,15})', seg)
        if mt is None or int(mt.group(1)) != tid:
            return
        mp = re.search(rb'"n_predict":(-?\d{1,15})', seg)
        if mp is not None and int(mp.group(1)) >= 0:
            t = self._task(tid)
            if t.max_tokens is None:
                t.max_tokens = int(mp.group(1))

    def _h_cshift(self, m, data, s):
        t = self._task(int(m.group(3)))
        if t.shifted is not None:
            t.shifted += max(int(m.group("cs_d")), 0)
        self._event(self.n_steps + (1 if self.phase == 1 else 0), self._ts(data, s), t.key, "context_shift",
                    f"n_keep = {m.group('cs_k').decode()}, n_left = {m.group('cs_l').decode()}, "
                    f"n_discard = {m.group('cs_d').decode()}")

    def _h_trunc(self, m, data, s):
        t = self._task(int(m.group(3)))
        n = int(m.group("tr_n"))
        t.truncated = True
        t.shifted = None
        self._event(self.n_steps + (1 if self.phase == 1 else 0), self._ts(data, s), t.key, "truncate",
                    f"prompt of {t.prompt_sent if t.prompt_sent is not None else '?'} tokens cut to {n}")
        t.prompt_len = n

    def _h_full(self, m, data, s):
        t = self._task(int(m.group(3)))
        self._event(self.n_steps + (1 if self.phase == 1 else 0), self._ts(data, s), t.key, "cache_hit",
                    "whole prompt cached; the last token is evaluated again")

    def _h_ptime(self, m, data, s):
        tid = int(m.group(3))
        if tid < 0:
            return
        t = self._task(tid)
        t.t_pn = int(m.group("pt_n"))
        t.t_pms = float(m.group("pt_ms"))

    def _h_etime(self, m, data, s):
        tid = int(m.group(3))
        if tid < 0:
            return
        t = self._task(tid)
        t.t_en = int(m.group("et_n"))
        t.t_ems = float(m.group("et_ms"))

    def _h_thdr(self, m, data, s):
        if m.group("fn").strip() != b"print_timing" or m.group("th_pn") is None:
            return
        tid = int(m.group(3))
        if tid < 0:
            return
        t = self._task(tid)
        t.t_pn = int(m.group("th_pn"))
        t.t_pms = float(m.group("th_pms"))
        t.t_en = int(m.group("th_en"))
        t.t_ems = float(m.group("th_ems"))

    def _h_newslot(self, m, data, s):
        self.cfg.setdefault("n_ctx_slot", int(m.group("ns_c")))

    def _h_sother(self, m, data, s):
        e = m.end()
        msg = data[e:e + 40].lstrip(b" ")
        if not msg or msg.startswith(_IGNORED_SLOT):
            return
        self._unparsed(data, s)

    # ------------------------------------------------------------------ srv / que handlers
    def _h_nfail(self, m, data, s):
        self.fail_pending = True
        step, t = max(self.n_steps, 1), self._ts(data, s)
        self._event(step, t, "", "kv_fail", f"no room in the KV cache for the call at offset {m.group('nf_o').decode()}")
        self._event(step, t, "", "batch_retry", f"retrying with n_batch = {m.group('nf_b').decode()}")

    def _h_ofail(self, m, data, s):
        self.fail_pending = True
        step, t = max(self.n_steps, 1), self._ts(data, s)
        self._event(step, t, "", "kv_fail", "no room in the KV cache for the batch")
        self._event(step, t, "", "batch_retry", f"retrying with n_batch = {m.group('of_b').decode()}")
        if self.phase == 2:
            self.st_attempts[-1] += 1

    def _step_error(self, msg: str, data, s) -> None:
        step = max(self.n_steps, 1)
        if step in self.failed_steps:
            return
        self.failed_steps.add(step)
        self._event(step, self._ts(data, s), "", "decode_error", msg)

    def _h_nctx(self, m, data, s):
        self._step_error(m.group("nctx").decode("utf-8", "replace").strip(), data, s)

    def _h_ofull(self, m, data, s):
        self._step_error(m.group("ofull").decode("utf-8", "replace").strip(), data, s)

    def _h_decerr(self, m, data, s):
        self._step_error(m.group("de_msg").decode("utf-8", "replace").strip(), data, s)

    def _h_uother(self, m, data, s):
        e = m.end()
        msg = data[e:e + 40]
        if not msg.startswith(_IGNORED_SRV):
            self._unparsed(data, s)

    def _h_dother(self, m, data, s):
        if not data.startswith(b"no tokens to decode", m.end()):   # an empty call (NEW warns, nothing to add)
            self._unparsed(data, s)

    def _h_senderr(self, m, data, s):
        t = self._task(int(m.group("se_t")))
        msg = m.group("se_msg").decode("utf-8", "replace").strip()
        t.error = msg
        ts = self._ts(data, s)
        self._event(max(self.n_steps, 1), ts, t.key, "error", msg[:200])
        mr = re.match(r"request \((\d{1,15}) tokens\)", msg)
        if mr and t.prompt_sent is None:
            t.prompt_sent = int(mr.group(1))
        if not t.launched:
            self._finish(t, ts, self.n_steps if self.n_steps else None)

    def _h_cancel(self, m, data, s):
        t = self._task(int(m.group("ca_t")))
        if t.finished:
            return
        t.cancelled = True
        ts = self._ts(data, s)
        self._event(max(self.n_steps, 1), ts, t.key, "cancel", "cancel requested (client gone or request ended)")
        if not t.launched:
            self._finish(t, ts, self.n_steps if self.n_steps else None)

    def _h_defer(self, m, data, s):
        t = self._task(int(m.group("df_t")))
        t.deferred += 1
        self._event(self.n_steps + 1, self._ts(data, s), t.key, "defer", "no slot is available")

    def _h_popdef(self, m, data, s):
        t = self._task(int(m.group("pd_t")))
        self._event(self.n_steps + 1, self._ts(data, s), t.key, "requeue", "a slot was released")

    def _h_loadm(self, m, data, s):
        if self._run_busy():
            self._new_run()   # a restart whose build line was not seen

    def _h_nslots(self, m, data, s):
        self.cfg["n_slots"] = int(m.group("nsl"))

    def _h_arr(self, m, data, s):
        tid = int(m.group("ar_t"))
        t = self._task(tid)
        if t.arr_step is not None or t.launched:
            if not t.finished:
                return
            del self.cur_tasks[tid]
            t = self._task(tid)
        t.arr_step = self.n_steps
        t.arr_t = self._ts(data, s)
        t.waiting = True
        self.waiting += 1
        self.arr_since += 1
        self.arr_cur.append(t)
        self._event(self.n_steps + 1, t.arr_t, t.key, "arrive", "queued")

    # ------------------------------------------------------------------ the end
    def finish(self) -> Trace:
        blocks = self.blocks
        if blocks.have > 1:
            rest = bytes(blocks.buf[1:blocks.have])
            blocks.have = 1
            if not blocks.skip_long:
                # the carry may be whole lines held back with an OLD timing block: only a carry
                # without a line end is a cut line
                cut = not rest.endswith(b"\n")
                # --log-colors resets the colour after a W/E/D record's line end: a log can end so
                if cut and rest[rest.rfind(b"\n") + 1:].replace(b"\x1b[0m", b"").strip():
                    self._warn("the last line has no line end: the log may be cut")
                data = b"\n" + rest + (b"\n" if cut else b"")
                self._scan(data, len(data))
                self.nlines -= cut
        if not self.n_steps and self.b_step:
            # no model-call line in the whole log (-lv 4, or OLD without -v): no batch is known, but
            # the prompt chunks still give each task's processed prompt tokens
            for key, kind, tok in zip(self.b_req, self.b_kind, self.b_tok):
                if kind == "prefill" and tok is not None:
                    self.chunk_sums[key] = self.chunk_sums.get(key, 0) + tok
            self.iter_pos = 0
            self._abandon()
            self.abandoned = 0
        if self.phase == 1 and len(self.b_step) > self.iter_pos:
            self._warn("the log ends while a batch was being built: that batch's lines were left out")
        self._close_iteration()
        dropped = [t.pend_idx for t in self.tasks.values() if t.pend_idx >= 0]
        if dropped:
            self._warn(f"{len(dropped)} prompt chunk(s) whose size the log never states (it ends first) "
                       f"were left out of their batches")
            for t in self.tasks.values():
                t.pend_idx = -1
        if self.headless_calls:
            self._warn(f"{self.headless_calls} model call(s) without the lines that build their batch "
                       f"(log cut or lines lost): their composition is unknown")
        if self.implicit_opens:
            self._warn(f"{self.implicit_opens} batch(es) began without their `posting NEXT_RESPONSE` line "
                       f"(log cut or lines lost)")
        if self.abandoned:
            self._warn(f"{self.abandoned} batch(es) were being built but no model call line followed; "
                       f"left out")
        if self.batch_mismatch:
            self._warn(f"{len(self.batch_mismatch)} batch(es) whose rebuilt size differs from the logged "
                       f"n_tokens: " + "; ".join(x for x in self.batch_mismatch if x))
        if self.nbytes and not self.records:
            self._warn("no llama-server scheduler lines found: is this a llama-server log made with -v?")
        elif self.records and not self.n_steps:
            self._warn("no model-call lines (`decoding batch` / `decode: n_batch (effective)`): run "
                       "llama-server with -v to log every batch; only per-task figures are shown")
        if not self.records and self.nlines:
            self.unparsed = self.nlines
        live = [t for t in self.tasks.values() if not t.finished and (t.launched or t.waiting)]
        if live:
            self._warn(f"{len(live)} task(s) had not finished when the log ends")
        return self._build()

    def _build(self) -> Trace:
        steps_n = self.n_steps
        timed = self.saw_ts
        # ---- batch
        if None in self.b_tok:
            keep = [i for i, v in enumerate(self.b_tok) if v is not None]
            sel = lambda lst: [lst[i] for i in keep]  # noqa: E731
        else:
            sel = lambda lst: lst  # noqa: E731
        b_step = as_array(sel(self.b_step), np.int64)
        b_tok = as_array(sel(self.b_tok), np.int64)
        b_kind = np.asarray(sel(self.b_kind), dtype=object)
        b_samp = as_array(sel(self.b_samp), bool)
        if self.failed_steps and len(b_step):
            b_samp = b_samp & ~np.isin(b_step, np.fromiter(self.failed_steps, dtype=np.int64))
        batch = table_from_columns("batch", {
            "step": b_step, "request": sel(self.b_req), "slot": sel(self.b_slot), "kind": b_kind,
            "tokens": b_tok, "computed_before": sel(self.b_cb), "sampled": b_samp})
        # ---- steps
        idx = b_step - 1
        is_dec = b_kind == "decode"
        num = np.bincount(idx, weights=b_tok, minlength=steps_n)[:steps_n] if len(idx) else np.zeros(steps_n)
        dec = np.bincount(idx[is_dec], weights=b_tok[is_dec], minlength=steps_n)[:steps_n] if len(idx) \
            else np.zeros(steps_n)
        seqs = np.bincount(idx, minlength=steps_n)[:steps_n] if len(idx) else np.zeros(steps_n)
        step_no = np.arange(1, steps_n + 1, dtype=np.int64)
        if timed:
            start = np.array(self.st_start, dtype=float)   # None (unknown) becomes NaN
            end = np.array(self.st_end, dtype=float)
        else:
            start = (step_no - 1).astype(float)
            end = step_no.astype(float)
        steps = table_from_columns("steps", {
            "step": step_no, "start": start, "end": end, "num_tokens": num.astype(np.int64),
            "prefill_tokens": (num - dec).astype(np.int64), "decode_tokens": dec.astype(np.int64),
            "recompute_tokens": np.zeros(steps_n, dtype=np.int64), "num_seqs": seqs.astype(np.int64),
            "running": self.st_running, "waiting": self.st_waiting,
            "preempted": np.zeros(steps_n, dtype=np.int64), "finished": self.st_finished,
            "arrived": self.st_arrived, "idle": np.zeros(steps_n, dtype=bool),
            "swap_bytes": np.zeros(steps_n), "logged_tokens": _int_array(self.st_logged)})
        # ---- requests
        prefill_by_req: dict[str, int] = {}
        if len(b_step):
            pre = ~is_dec
            reqs_arr = np.asarray(sel(self.b_req), dtype=object)
            if pre.any():
                keys, inv = np.unique(reqs_arr[pre].astype(str), return_inverse=True)
                sums = np.bincount(inv, weights=b_tok[pre])
                prefill_by_req = {k: int(v) for k, v in zip(keys.tolist(), sums.tolist())}
        tasks = list(self.tasks.values())
        last_step = self.n_steps
        kept, dropped_nonslot = [], 0
        for t in tasks:
            if not t.launched and t.error is None and not t.cancelled and not t.deferred \
                    and t.arr_step is not None and t.arr_step < last_step:
                dropped_nonslot += 1  # queued but never given a slot nor refused: not a completion task
                continue
            kept.append(t)
        if dropped_nonslot:
            self._warn(f"{dropped_nonslot} queued task(s) never took a slot (not completion tasks?); left out")
        reasons, gen, proc, cached = [], [], [], []
        for t in kept:
            r = self._reason(t)
            reasons.append(r)
            never_ran = t.finished and not t.launched
            # a task none of whose `next token` lines was read falls back to the server's count
            if self.saw_tok and (t.n_gen or t.t_en is None):
                g = t.n_gen if (t.launched or t.finished or t.n_gen or t.fs_step is not None) else None
            else:
                g = t.t_en if t.t_en is not None else (0 if never_ran else None)
            gen.append(g)
            if t.fin_ev >= 0:
                self.e_detail[t.fin_ev] = r if g is None else f"{r}, {g} tokens generated"
            if t.key in prefill_by_req:
                p = prefill_by_req[t.key]
            elif t.key in self.chunk_sums:
                p = self.chunk_sums[t.key]
            elif t.fs_step is not None:
                p = None                    # its chunks' sizes were never stated
            elif never_ran or (self.saw_chunks and t.finished):
                p = 0
            else:
                p = t.t_pn
            proc.append(p)
            c = t.cached if t.cached is not None else (0 if never_ran else None)
            if c is None and None not in (t.rel_n, t.shifted, t.t_pn, t.t_en):
                # no chunk lines (-lv 3): at release the slot holds the cached prefix, the processed
                # prompt and every generated token but the last (never fed back), less what context
                # shifts dropped
                c = t.rel_n + t.shifted - t.t_pn - max(t.t_en - 1, 0)
            cached.append(c)
        # unfinished tasks: nothing is known about their end
        for t in kept:
            if not t.finished:
                t.fin_step = None
        tcol = (lambda v, st: v) if timed else (lambda v, st: None if st is None else float(st))
        rows = {
            "request": [t.key for t in kept], "tenant": ["default"] * len(kept), "priority": [0] * len(kept),
            "prompt_len": [t.prompt_len if t.prompt_len is not None else t.prompt_sent for t in kept],
            "max_tokens": [t.max_tokens for t in kept],
            "arrival_step": [t.arr_step for t in kept],
            "arrival_time": [tcol(t.arr_t, t.arr_step) for t in kept],
            "first_scheduled_step": [t.fs_step for t in kept],
            "first_scheduled_time": [tcol(t.fs_t, None if t.fs_step is None else t.fs_step - 1) for t in kept],
            "first_token_step": [t.ft_step for t in kept],
            "first_token_time": [tcol(t.ft_t, t.ft_step) for t in kept],
            "finish_step": [t.fin_step if t.finished else None for t in kept],
            "finish_time": [tcol(t.fin_t, t.fin_step) if t.finished else None for t in kept],
            "output_tokens": gen, "cached_tokens": cached,
            "preemptions": [0] * len(kept), "recomputed_tokens": [0] * len(kept),
            "rejected": [t.error is not None and t.fs_step is None for t in kept],
            "finish_reason": reasons, "slot": [t.slot for t in kept],
        }
        requests = table_from_columns("requests", {
            **rows, "task": _int_array([t.task for t in kept]), "prompt_tokens": _int_array(proc),
            "server_prompt_n": _int_array([t.t_pn for t in kept]),
            "server_predicted_n": _int_array([t.t_en for t in kept]),
            "server_prompt_ms": np.array([t.t_pms for t in kept], dtype=float),   # None becomes NaN
            "server_predicted_ms": np.array([t.t_ems for t in kept], dtype=float)})
        # cross-check the rebuilt counts against the server's own timing lines
        bad = [t.key for t, p in zip(kept, proc) if t.t_pn is not None and p is not None and p != t.t_pn]
        bad += [t.key for t, g in zip(kept, gen) if t.t_en is not None and g is not None and g != t.t_en]
        if bad:
            self._warn(f"rebuilt token counts differ from the server's timing lines for task(s) "
                       f"{', '.join(sorted(set(bad))[:10])}")
        # ---- events
        e_time = self.e_time
        if not timed:
            e_time = [float(s) for s in self.e_step]
        events = table_from_columns("events", {"step": self.e_step, "time": e_time, "request": self.e_req,
                                                "kind": self.e_kind, "detail": self.e_detail})
        if len(events):
            order = np.argsort(events["step"].to_numpy(), kind="stable")
            events = events.iloc[order].reset_index(drop=True)
        # ---- meta
        cb = True if self.mixed_batches else (False if self.nocb_evidence else None)
        runs = self.runs + [self._run_record()]
        num = steps["num_tokens"].to_numpy()
        over = 0
        for rr in runs:
            nb = rr["config"].get("n_batch")
            if nb and rr["last_step"] >= rr["first_step"]:
                over += int((num[rr["first_step"] - 1:rr["last_step"]] > nb).sum())
        if over:
            self._warn(f"{over} rebuilt batch(es) exceed the server's n_batch")
        cfg, differ = {}, []
        for k in RUN_SETTINGS:
            vals = [_run_setting(rr, k) for rr in runs]
            vals = [v for v in vals if v is not None]
            cfg[k] = vals[0] if vals and all(v == vals[0] for v in vals) else None
            if len(set(map(str, vals))) > 1:
                differ.append(k)
        if differ:
            self._warn(f"the server runs in this log differ in {', '.join(differ)}: the log as a whole has no one "
                       "value for them (each run's own are in the table of server runs)")
        cfg["cont_batching"] = cb
        first = next((rr for rr in runs if rr["build"]), {"build": None, "build_number": None, "build_commit": None})
        fmt = None
        if any(v is not None for v in self.st_logged):
            fmt = "decoding batch, n_tokens = N (builds up to 2026-06)"
        elif steps_n:
            fmt = "decode: n_batch (effective) = B, off = O (builds from 2026-06)"
        meta = {
            "source": SOURCE, "name": self.name, "build": first["build"], "build_number": first["build_number"],
            "build_commit": first["build_commit"], "time_unit": "ms" if timed else "steps",
            "time_origin": "logger start" if timed else "model-call index",
            **cfg,
            "cont_batching_evidence": ("a batch mixed decode tokens and a prompt chunk" if cb else
                                       "prompts waited while other slots generated" if cb is False else
                                       "not observed (not printed by the server)"),
            "config": cfg, "batch_format": fmt,
            "unparsed_lines": int(self.unparsed), "unparsed_examples": list(self.unparsed_examples),
            "warnings": list(self.warnings), "bytes": int(self.nbytes),
            "records": int(self.records), "decode_attempts": int(sum(self.st_attempts)),
            "failed_steps": sorted(self.failed_steps), "batches_checked_against_log": int(self.batch_checked),
            "batch_mismatches": len(self.batch_mismatch), "runs": len(runs), "server_runs": runs,
            "num_requests": len(kept), "num_blocks": 0,
        }
        return Trace(requests=requests, steps=steps, batch=batch, events=events, kv=_empty("kv"),
                     counters=_empty("counters"), meta=meta)

    def _reason(self, t: _Task) -> str:
        if not t.finished:
            return "unknown"
        if t.stop is not None:
            return t.stop
        if t.error is not None:
            return "error"
        if t.cancelled:
            return "cancelled"
        if (t.t_pn is not None or t.t_en is not None) and self.saw_tok:
            return "stop"  # a normal end without a limit/EOS/context line: a stop word
        return "unknown"  # (stop lines are DEBUG, like `next token`: a log without those cannot tell)


# ---------------------------------------------------------------------------------------------
# Entry points
# ---------------------------------------------------------------------------------------------

def _gunzip_into(read, block: int, reader: LlamaLogReader, progress, total, first: bytes = b"") -> None:
    """Decompress a gzip stream block by block into the reader. A cut or damaged stream keeps
    what was decompressed before the damage (GzipFile would drop the last block); several
    gzip members back to back are read one after the other."""
    d = zlib.decompressobj(31)
    done = 0
    comp = first or read(block)
    while comp:
        done += len(comp)
        try:
            out = d.decompress(comp, block)
            while True:
                if out:
                    reader.feed(out)
                if d.unconsumed_tail:
                    out = d.decompress(d.unconsumed_tail, block)
                elif d.eof and d.unused_data:
                    rest = d.unused_data
                    d = zlib.decompressobj(31)
                    out = d.decompress(rest, block)
                else:
                    break
        except zlib.error as e:
            reader._warn(f"the compressed data is damaged ({e}); what was read before is shown")
            return
        if progress is not None:
            progress(done, total)
        comp = read(block)
    try:
        tail = d.flush()
    except zlib.error:
        tail = b""
    if tail:
        reader.feed(tail)
    if not d.eof:
        reader._warn("the compressed file ends early (cut?); what was read is shown")


class _Stopped(Exception):
    pass


class _Failed:
    """What the prefetching thread hands over when the reading code itself failed (a bug, not
    the input): the reader's thread raises it."""

    __slots__ = ("error",)

    def __init__(self, error: BaseException):
        self.error = error


def _prefetched_blocks(into, block: int, reader: LlamaLogReader, scan, progress, total, done: int) -> None:
    """_blocks_from_stream for a binary stream with the C tokenizer: a thread reads each block
    and runs the tokenizer on it while the reader's state machine works through the blocks
    before it (readinto and the C call let go of the GIL, so the two overlap on two cores).
    The thread cuts the blocks with the reader's own _Blocks, in three buffers taken in turn,
    and scans for the line prefix the reader uses then; the reader checks that and rescans a
    block itself if it has changed its mind. Each block's warnings travel with it, so they come
    in the order a reader without the thread gives them."""
    blocks = reader.blocks
    free: queue.Queue = queue.Queue()
    for _ in range(2):
        free.put(bytearray(b"\n"))
    ready: queue.Queue = queue.Queue()   # at most three blocks: the buffers bound it
    stop = threading.Event()

    def spare() -> bytearray:
        while True:
            try:
                return free.get(timeout=0.1)
            except queue.Empty:
                if stop.is_set():
                    raise _Stopped from None

    def work() -> None:
        notes: list[str] = []
        blocks.warn, blocks.spare = notes.append, spare
        try:
            while not stop.is_set():
                with blocks.room(block) as view:
                    n = into(view) or 0
                if not n:
                    break
                end = blocks.took(n)
                if end:
                    guarded = reader.families is not _LOOSE
                    buf = blocks.buf
                    found, loadm = scan(buf, end, guarded)
                    blocks.next()   # the carry goes on in the next buffer; this one is the reader's
                    ready.put((n, notes[:], buf, end, (found, loadm, guarded)))
                else:
                    ready.put((n, notes[:], None, 0, None))
                notes.clear()
        except (EOFError, OSError, zlib.error) as e:
            ready.put(e)
        except _Stopped:
            pass
        except BaseException as e:   # noqa: BLE001 - a bug: raised again by the reader's thread
            ready.put(_Failed(e))
        finally:
            ready.put(None)

    thread = threading.Thread(target=work, name="llamalog-prefetch", daemon=True)
    thread.start()
    try:
        while (item := ready.get()) is not None:
            if isinstance(item, _Failed):
                raise item.error
            if isinstance(item, BaseException):
                reader._warn(f"the input stopped early ({type(item).__name__}: {item}); what was read is shown")
                continue
            n, notes, buf, end, scanned = item
            reader.nbytes += n
            for msg in notes:
                reader._warn(msg)
            if buf is not None:
                reader._scan(buf, end, scanned)
                free.put(buf)
            done += n
            if progress is not None:
                progress(done, total)
    finally:
        stop.set()
        thread.join()
        blocks.warn, blocks.spare = reader._warn, None


def _blocks_from_stream(f, block: int, reader: LlamaLogReader, progress, total, pos_fn, start: int = 0) -> None:
    done = start
    into = getattr(f, "readinto", None) if isinstance(f, (io.BufferedIOBase, io.RawIOBase)) else None
    scan = native.llamascan() if reader.native and into is not None else None
    if scan is not None:
        _prefetched_blocks(into, block, reader, scan, progress, total, done)
        return
    while True:
        try:
            if into is not None:   # straight into the reader's block buffer
                with reader.room(block) as view:
                    n = into(view) or 0
                if not n:
                    break
                reader.took(n)
                done = pos_fn() if pos_fn else done + n
                if progress is not None:
                    progress(done, total)
                continue
            chunk = f.read(block)
        except (EOFError, OSError, zlib.error) as e:
            reader._warn(f"the input stopped early ({type(e).__name__}: {e}); what was read is shown")
            break
        if not chunk:
            break
        n = len(chunk)   # characters for a text stream, as its size was measured
        if isinstance(chunk, str):
            chunk = chunk.encode("utf-8", "replace")
        reader.feed(chunk)
        done = pos_fn() if pos_fn else done + n
        if progress is not None:
            progress(done, total)


def read_llama_log(source, *, progress: ProgressFn | None = None, name: str | None = None,
                   block_size: int = BLOCK_SIZE, native: bool = True) -> Trace:
    """Parse a llama-server log into a Trace.

    source: a path (str / os.PathLike; .gz is decompressed, also when sniffed from the bytes),
    bytes, a binary or text file object, or an iterable of lines (str or bytes).
    progress(bytes_read, total_bytes_or_None) is called after every block.
    Bad content never raises; problems are listed in trace.meta["warnings"]. A path that
    cannot be opened raises OSError."""
    reader = LlamaLogReader(name=name or "", native=native)
    if isinstance(source, (str, os.PathLike)) and not (isinstance(source, str) and "\n" in source
                                                        and not os.path.exists(source)):
        path = os.fspath(source)
        reader.name = name or os.path.basename(path)
        total = os.path.getsize(path)
        raw = open(path, "rb")
        try:
            head = raw.read(2)
            raw.seek(0)
            if head == b"\x1f\x8b":
                _gunzip_into(raw.read, 1 << 20, reader, progress, total)
            else:
                _blocks_from_stream(raw, block_size, reader, progress, total, raw.tell)
        finally:
            raw.close()
    elif isinstance(source, str):   # log text given directly
        data = source.encode("utf-8", "replace")
        _feed_bytes(reader, data, block_size, progress)
    elif isinstance(source, (bytes, bytearray, memoryview)):
        _feed_bytes(reader, bytes(source), block_size, progress)
    elif hasattr(source, "read"):
        total = None
        try:
            here = source.tell()
            source.seek(0, os.SEEK_END)
            total = source.tell() - here
            source.seek(here)
        except (AttributeError, OSError, ValueError, io.UnsupportedOperation):
            total = None
        head = source.read(2) or b""
        if isinstance(head, str):   # a text stream
            reader.feed(head.encode("utf-8", "replace"))
            _blocks_from_stream(source, block_size, reader, progress, total, None, start=len(head))
        elif head[:2] == b"\x1f\x8b":
            _gunzip_into(source.read, 1 << 20, reader, progress, total, first=bytes(head))
        else:
            reader.feed(bytes(head))
            _blocks_from_stream(source, block_size, reader, progress, total, None, start=len(head))
    else:
        _feed_lines(reader, source, block_size, progress)
    return reader.finish()


def _feed_bytes(reader: LlamaLogReader, data: bytes, block: int, progress) -> None:
    if data[:2] == b"\x1f\x8b":
        view = memoryview(data)
        pos = [0]

        def read(n):
            chunk = bytes(view[pos[0]:pos[0] + n])
            pos[0] += len(chunk)
            return chunk
        _gunzip_into(read, 1 << 20, reader, progress, len(data))
        return
    total = len(data)
    for i in range(0, total, block):
        reader.feed(data[i:i + block])
        if progress is not None:
            progress(min(i + block, total), total)
    if not total and progress is not None:
        progress(0, 0)


def _feed_lines(reader: LlamaLogReader, lines: Iterable, block: int, progress) -> None:
    buf: list[bytes] = []
    size = done = 0
    for line in lines:
        if isinstance(line, str):
            line = line.encode("utf-8", "replace")
        elif not isinstance(line, (bytes, bytearray)):
            line = str(line).encode("utf-8", "replace")
        if not line.endswith(b"\n"):
            line = bytes(line) + b"\n"
        buf.append(line)
        size += len(line)
        if size >= block:
            reader.feed(b"".join(buf))
            done += size
            buf, size = [], 0
            if progress is not None:
                progress(done, None)
    if buf:
        reader.feed(b"".join(buf))
        done += size
    if progress is not None:
        progress(done, None)


# ---------------------------------------------------------------------------------------------
# Summary and re-simulation
# ---------------------------------------------------------------------------------------------

RUN_SETTINGS = ("n_slots", "n_batch", "n_ubatch", "n_ctx", "n_ctx_slot", "kv_unified", "flash_attn")


def _run_setting(run: dict, key: str):
    """One server run's setting as its start-up lines gave it (None: not printed)."""
    c = run["config"]
    return c.get(key, c.get("n_seq_max") if key == "n_slots" else None)


def server_runs_table(trace: Trace) -> pd.DataFrame:
    """One row per server run in the log (a restart, or logs concatenated): run, its first and
    last model call, build, and the settings its start-up lines printed (None: not printed)."""
    runs = trace.meta.get("server_runs") or []
    out = pd.DataFrame({"run": [rr["run"] for rr in runs], "first call": [rr["first_step"] for rr in runs],
                        "last call": [rr["last_step"] for rr in runs],
                        "calls": [max(0, rr["last_step"] - rr["first_step"] + 1) for rr in runs],
                        "build": [rr["build"] for rr in runs]})
    for k in RUN_SETTINGS:   # counts as whole numbers; the rest as the log wrote them (builds differ: 0 / auto)
        vals = [_run_setting(rr, k) for rr in runs]
        if all(v is None or (isinstance(v, int) and not isinstance(v, bool)) for v in vals):
            out[k] = pd.array(vals, dtype="Int64")
        else:
            out[k] = pd.Series([None if v is None else str(v).lower() for v in vals], dtype=object)
    return out


def _int_or_none(v):
    if v is None or v is pd.NA:
        return None
    try:
        if np.isnan(v):
            return None
    except TypeError:
        pass
    return int(v)


def summary(trace: Trace) -> dict:
    """The CLI's summary object: build, batches, tasks [{task, slot, prompt_tokens,
    cached_tokens, generated_tokens, finish}], unparsed_lines."""
    r = trace.requests
    tasks = []
    if len(r):
        cols = {c: r[c].tolist() for c in ("slot", "prompt_tokens", "cached_tokens", "output_tokens",
                                           "finish_reason", "task", "request") if c in r.columns}
        for i in range(len(r)):
            task = _int_or_none(cols["task"][i]) if "task" in cols else None
            tasks.append({
                "task": task if task is not None else cols["request"][i],
                "slot": _int_or_none(cols["slot"][i]),
                "prompt_tokens": _int_or_none(cols["prompt_tokens"][i]) if "prompt_tokens" in cols else None,
                "cached_tokens": _int_or_none(cols["cached_tokens"][i]),
                "generated_tokens": _int_or_none(cols["output_tokens"][i]),
                "finish": cols["finish_reason"][i] or "unknown",
            })
    return {"build": trace.meta.get("build"), "batches": int(len(trace.steps)), "tasks": tasks,
            "unparsed_lines": int(trace.meta.get("unparsed_lines", 0))}


def llama_config(trace: Trace) -> dict:
    """The server settings a re-simulation needs, as the log shows them: slots, n_batch,
    cont_batching (inferred from the batches; the server default True when not observable) and
    cache_prompt (True when any task reused cached prompt tokens)."""
    m = trace.meta
    r = trace.requests
    cached = r["cached_tokens"].astype("Float64").fillna(0).to_numpy(dtype=float) if len(r) else np.zeros(0)
    slots = m.get("n_slots") or (int(r["slot"].max()) + 1 if len(r) and r["slot"].notna().any() else 1)
    cb = m.get("cont_batching")
    return {"slots": int(slots), "n_batch": int(m.get("n_batch") or 2048), "n_ubatch": m.get("n_ubatch"),
            "cont_batching": True if cb is None else bool(cb), "cache_prompt": bool((cached > 0).any()),
            "n_ctx": m.get("n_ctx"), "n_ctx_slot": m.get("n_ctx_slot")}


def workload_from_trace(trace: Trace, *, timed: bool = False, block_size: int = 16) -> Workload:
    """The log's workload, ready for sim.simulate: one request per task that took a slot, in
    arrival order, with its prompt length and the number of tokens it generated (as max_tokens).

    Arrivals are the model-call index at which each task was queued (arrival_step), so any cost
    model works; timed=True also sets arrival_time (the log's ms; use a cost model in ms).
    Prompt token ids are built so that a task shares with the previous task of its slot exactly
    the prefix the server reused from its cache (cached_tokens): the simulated prompt caches hit
    where the real one did. The config (SchedulerConfig names) carries the server's settings:
    max_num_seqs = slots, max_num_batched_tokens = n_batch, cont_batching, enable_prefix_caching =
    cache_prompt, and scheduler "llama_slots"; pass {"scheduler": "vllm"} to simulate() to compare."""
    lc = llama_config(trace)
    r = trace.requests
    reqs: list[Request] = []
    slot_hist: dict[int, list[int]] = {}
    if len(r):
        order = np.lexsort((np.arange(len(r)),
                            r["first_scheduled_step"].astype("Float64").fillna(np.inf).to_numpy(dtype=float)))
        launched = r.iloc[order]
        for row in launched.itertuples(index=False):
            plen = _int_or_none(row.prompt_len)
            if plen is None or plen < 1 or _int_or_none(row.first_scheduled_step) is None:
                continue
            out = max(1, _int_or_none(row.output_tokens) or 1)
            rid = str(row.request)
            rng = random.Random(zlib.crc32(rid.encode()) + (1 << 41))
            cached = min(_int_or_none(row.cached_tokens) or 0, plen - 1)
            slot = _int_or_none(row.slot)
            prev = slot_hist.get(slot, []) if slot is not None else []
            k = min(cached, len(prev))
            ids = prev[:k] + [rng.randrange(MIN_TOKEN_ID, VOCAB_SIZE) for _ in range(plen - k)]
            if slot is not None:
                slot_hist[slot] = ids + [output_token(rid, i) for i in range(out)]
            arr_step = _int_or_none(row.arrival_step)
            if arr_step is None:
                arr_step = max(0, (_int_or_none(row.first_scheduled_step) or 1) - 1)
            at = None
            if timed and trace.time_unit == "ms":
                v = row.arrival_time if not pd.isna(row.arrival_time) else row.first_scheduled_time
                at = None if pd.isna(v) else float(v)
            reqs.append(Request(id=rid, prompt_len=plen, max_tokens=out, arrival_step=int(arr_step),
                                arrival_time=at, prompt_token_ids=tuple(ids)))
    # arrival order, as the server queued them (ties: the log's task order)
    pos = {rid: i for i, rid in enumerate(r["request"].tolist())} if len(r) else {}
    reqs.sort(key=lambda q: (q.arrival_time if q.arrival_time is not None else 0.0, q.arrival_step, pos[q.id]))
    # KV: the server's n_ctx cells, or at least room for every slot to hold the longest request
    # (llama-server never preempts; it shifts the context instead, which the simulator does not model)
    longest = max((q.prompt_len + q.max_tokens for q in reqs), default=1)
    blocks = lc["slots"] * -(-longest // block_size) + 2
    if lc.get("n_ctx"):
        blocks = max(blocks, -(-int(lc["n_ctx"]) // block_size) + 1)
    config = {"scheduler": "llama_slots", "max_num_seqs": lc["slots"], "max_num_batched_tokens": lc["n_batch"],
              "cont_batching": lc["cont_batching"], "enable_prefix_caching": lc["cache_prompt"],
              "num_gpu_blocks": int(blocks), "block_size": int(block_size)}
    return Workload(requests=reqs, config=config, name=f"{trace.meta.get('name') or 'llama-server log'} (tasks)")
