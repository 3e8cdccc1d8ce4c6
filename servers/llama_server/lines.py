"""The lines a llama-server log is read by: three line families and the records found in them.

The server's scheduler lines are "slot <fn>: id N | task T | msg", "srv  <fn>: msg" and
"que  <fn>: msg", with <fn> right-aligned in 12 characters (shared/llama-logs/FORMAT.md lists
every line that matters, per build). Each family is one compiled regex starting with a literal,
so the regex engine jumps from candidate to candidate; the named group that closes last names
the record. These regexes are the reference tokenizer and the one definition of every line:
the C tokenizer (llamascan.c, loaded by native.py) parses the frequent records itself and hands
every rare one back to its family's regex here.

A record, from either tokenizer, is a tuple (kind, start, a, b, c, e, ts): kind is a K_* of
native.py or K_MATCH (a regex match in a, for the handlers), ts the prefix's ms (NO_TS: ask the
reader's clock). `record(m)` turns a regex match into one.
"""
from __future__ import annotations

import operator
import re

from .native import K_DBATCH, K_DEC, K_EFF, K_POST, K_RUNS, K_TOK, K_YDONE

# the slot family's messages, one named group each
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
        rb"|(?P<decerr>(?P<de_stage>pre_|post_)?decode\(\) failed: (?P<de_msg>[^\n]*))"
        rb"|(?P<uother>))"
        rb"|      decode: (?:(?P<eff>n_batch \(effective\) = (?P<eff_b>\d{1,15}), off = (?P<eff_o>\d{1,15}))"
        rb"|(?P<nfail>failed to find free space in the KV cache, retrying with smaller batch size, off = (?P<nf_o>\d{1,15}), n_batch = (?P<nf_b>\d{1,15}))"
        rb"|(?P<nctx>(?:" + _DECODE_ERRORS + rb")[^\n]*)"
        rb"|(?P<dother>))"
        rb"|  send_error: (?P<senderr>task id = (?P<se_t>\d{1,15}), error: (?P<se_msg>[^\n]*))"
        rb"|(?:        stop|cancel_tasks): (?P<cancel>cancel task, id_task = (?P<ca_t>\d{1,15}))"
        # deferred: no free slot; the slot it is pinned to (id_slot) is busy; too few free slots for
        # its child tasks (n_cmpl > 1, builds from 2026)
        rb"|process_sing: (?P<defer>(?P<df_why>no slot is available|requested slot is unavailable"
        rb"|not enough free slots for child tasks, n_free = \d{1,15}, n_children = \d{1,15}), defer task, "
        rb"id_task = (?P<df_t>\d{1,15}))"
        rb"|  load_model: (?P<loadm>loading model)"
        rb"|(?:  load_model|        init): (?P<nslots>initializing(?: slots)?, n_slots = (?P<nsl>\d{1,15})))")
    que = re.compile(
        rb"que  " + guard(b"que  ") + rb"(?:yield_to_que: (?P<ydone>done yielding)"
        rb"|pop_deferred: (?P<popdef>pop deferred task(?: \(use slot \d{1,15}\))?, id_task = (?P<pd_t>\d{1,15}))"
        rb"|        post: (?P<arr>new task, id = (?P<ar_t>\d{1,15})/\d+, front = 0))")
    return slot, srv, que


SLOT, SRV, QUE = _families(True)
LOOSE = _families(False)
_GS = SLOT.groupindex
_G_DEC_N, _G_DEC_K, _G_TOK_N, _G_TOK_R = _GS["dec_n"], _GS["dec_k"], _GS["tok_n"], _GS["tok_r"]
G_SID, G_TID, _G_DEC = _GS["sid"], _GS["tid"], _GS["dec"]

# Records, as both tokenizers give them: kind, start, then fields a, b, c, e and ts (the prefix's
# ms, -1: ask the reader's clock). The frequent kinds carry their fields (K_* from llamascan.c); the regex
# tokenizer's other records are K_MATCH with the match in a; the C tokenizer's are SLOW.
K_MATCH = 13
NO_TS = -1.0


def record(m) -> tuple:
    """A regex match as a record, the frequent kinds parsed as llamascan.c parses them."""
    g, s = m.lastgroup, m.start()
    if g == "tok":
        return K_TOK, s, int(m.group(G_SID)), int(m.group(G_TID)), int(m.group(_G_TOK_N)), \
            int(m.group(_G_TOK_R)), NO_TS
    if g == "dec":
        flags = 1 if m.group(_G_DEC_K) == b"past" else 2 if m.string.startswith(b"id=", m.start(_G_DEC) + 19) else 0
        return K_DEC, s, int(m.group(G_SID)), int(m.group(G_TID)), int(m.group(_G_DEC_N)), flags, NO_TS
    if g == "post":
        return K_POST, s, 0, 0, 0, 0, NO_TS
    if g == "eff":
        return K_EFF, s, 0, 0, int(m.group("eff_o")), int(m.group("eff_b")), NO_TS
    if g == "ydone":
        return K_YDONE, s, 0, 0, 0, 0, NO_TS
    if g == "dbatch":
        return K_DBATCH, s, 0, 0, int(m.group("db_n")), 0, NO_TS
    if g == "runs":
        return K_RUNS, s, 0, 0, 0, 0, NO_TS
    return K_MATCH, s, m, 0, 0, 0, NO_TS


# Rare lines that do not start with slot/srv/que: the build, the context parameters, libllama's
# KV failures. Only tried on lines holding one of the gate substrings.
SEC = re.compile(
    rb"(?:\d+\.\d\d\.\d{3}\.\d{3} [IWEDT] )?(?:cmn  common_param: common_params_print_info: )?(?:"
    rb"(?P<build>build:? (?P<bn>\d{1,15}) \((?P<bh>[0-9a-f]{6,40})\))"
    rb"|(?:llama_context|llama_init_from_model): +(?P<ck>n_seq_max|n_ctx|n_ctx_seq|n_ctx_per_seq|n_batch|n_ubatch"
    rb"|kv_unified|flash_attn|causal_attn) += (?P<cv>[^\s]+))"
)
SEC_GATES = (b"build", b"llama_")
# what every SEC match holds; it starts with a letter, so the regex engine skips to candidates,
# while SEC (optional timestamp first) is tried at every position of the window
SEC_CORE = re.compile(rb"build:? \d|(?:llama_context|llama_init_from_model): +(?:n_seq_max|n_ctx|n_ctx_seq"
                      rb"|n_ctx_per_seq|n_batch|n_ubatch|kv_unified|flash_attn|causal_attn) += ")
SEC_LLAMA = (b"llama_context", b"llama_init_from_model")   # a line found by the second gate needs one
START = operator.methodcaller("start")

# the logger's own prefix, `M.SS.mmm.uuu L ` (minutes since it started), plain or --log-colors
TS = re.compile(rb"(\d{1,6})\.(\d\d)\.(\d\d\d)\.(\d\d\d) [A-Z] \Z")


def prefix_ms(m) -> float:
    return (int(m.group(1)) * 60 + int(m.group(2))) * 1000.0 + int(m.group(3)) + int(m.group(4)) * 0.001


TS_COLOURED = re.compile(rb"(\d{1,6})\.(\d\d)\.(\d\d\d)\.(\d\d\d)\x1b\[0m \x1b\[3\dm[A-Z] (?:\x1b\[0m)?\Z")

# messages of the families that say nothing about batches (llamascan.c ignores the same ones)
IGNORED_SLOT = (
    b"selected slot", b"- ", b"sampler chain", b"sampler params", b"saving idle slot", b"__TEST_TAG",
    b"clearing prompt", b"main/do_checkpoint", b"graphs reused", b"total time", b"n_gen =", b"n_decoded =",
    b"prompt token", b"created context checkpoint", b"erased invalidated", b"restored context checkpoint",
    b"prompt processing, n_tokens", b"max possible draft", b"reusing chunk", b"n_past was set to",
    b"draft acceptance", b"new slot", b"cache state", b"\r", b"\n", b"restored", b"saved", b"checkpoint",
    b"trying to reuse", b"after context reuse",
    # builds of late 2026: child tasks, speculative decoding's per-step lines, context checkpoints,
    # the radix cache, media chunks
    b"waiting for parent slot", b"accepted ", b"add accepted tokens", b"created speculative checkpoint",
    b"restoring speculative checkpoint", b"acc per pos", b"erasing ", b"superseding", b"checking checkpoint",
    b"appended ", b"encoding mtmd", b"try adding media", b"selected empty slot", b"radix alias",
    b"cache reuse is not supported", b"empty prompt",   # (its release and timing lines follow)
)
IGNORED_SRV = (b"all slots are idle", b"run slots completed", b"posting", b"decoding batch",
               b"no tokens to decode")
STOP_MAP = {b"by EOS": "stop", b"by limit": "limit", b"by time limit": "limit",
            b"by indentation limit": "limit", b"due to running out of context": "context"}
