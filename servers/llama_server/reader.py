"""The llama-server log reader: LlamaLogReader, and read_llama_log for any kind of input."""
from __future__ import annotations

import io
import os

from sim.trace import Trace

from .blocks import BLOCK_SIZE, Blocks, ProgressFn, blocks_from_stream, feed_bytes, feed_lines, gunzip_into
from .build import build_trace
from .handlers import Handlers
from .lines import QUE, SLOT, SRV
from .machine import StateMachine, Task
from .prefixes import new_state
from .scan import Scanning


class LlamaLogReader(Scanning, StateMachine, Handlers):
    """Incremental reader: feed(bytes) any number of times, then finish() -> Trace.

    read_llama_log() wraps it for paths, bytes, file objects and line iterators. Its methods come
    from three mixins, one per concern: Scanning (scan.py: blocks to records, and their times),
    StateMachine (machine.py: tasks, slots, model calls) and Handlers (handlers.py: the rare
    records); the Trace is built from its state by build.py."""

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
                 "e_time", "e_req", "e_kind", "e_detail", "handlers", "prefixes")

    def __init__(self, name: str = "", native: bool = True):
        self.name = name
        self.native = native   # use the C tokenizer when it can be built (same records, same Trace)
        self.blocks = Blocks(self._warn)
        self.families = (SLOT, SRV, QUE)
        self.prefixes = new_state()   # collectors' line prefixes: what was seen and decided (prefixes.py)
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
        self.tasks: dict[str, Task] = {}
        self.cur_tasks: dict[int, Task] = {}   # task id -> live record of the current run
        self.running = 0
        self.waiting = 0
        self.arr_since = 0
        self.arr_prev: list[Task] = []
        self.arr_cur: list[Task] = []
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
        live = [t for t in self.tasks.values() if not t.finished and (t.launched or t.waiting or t.midrun)]
        if live:
            self._warn(f"{len(live)} task(s) had not finished when the log ends")
        return build_trace(self)


MAX_UNZIPPED_BYTES = 1 << 30   # of log text from a gzip file: a 64 MB upload could unzip to 64 GB (a zip bomb)


class _Unzipped(Exception):
    pass


class _Capped:
    """The reader as gunzip_into sees it: feed() stops once MAX_UNZIPPED_BYTES came out."""

    __slots__ = ("reader", "left")

    def __init__(self, reader):
        self.reader, self.left = reader, MAX_UNZIPPED_BYTES

    def feed(self, chunk: bytes) -> None:
        if len(chunk) > self.left:
            raise _Unzipped
        self.left -= len(chunk)
        self.reader.feed(chunk)

    def _warn(self, msg: str) -> None:
        self.reader._warn(msg)


def _gunzip_capped(read, reader, progress, total, first: bytes = b"") -> None:
    """gunzip_into that stops once MAX_UNZIPPED_BYTES of text came out, and says so."""
    try:
        gunzip_into(read, 1 << 20, _Capped(reader), progress, total, first=first)
    except _Unzipped:
        gib = MAX_UNZIPPED_BYTES / 2**30
        reader._warn(f"unzipped, the log is over {gib:g} GiB of text: only its first {gib:g} GiB are read "
                     f"(a bigger log: unzip it and read it with python -m sim llamalog)")


def read_llama_log(source, *, progress: ProgressFn | None = None, name: str | None = None,
                   block_size: int = BLOCK_SIZE, native: bool = True) -> Trace:
    """Parse a llama-server log into a Trace.

    source: a path (str / os.PathLike; .gz is decompressed, also when sniffed from the bytes),
    bytes, a binary or text file object, or an iterable of lines (str or bytes).
    progress(bytes_read, total_bytes_or_None) is called after every block.
    Bad content never raises; problems are listed in trace.meta["warnings"]. A path that
    cannot be opened raises OSError."""
    # builds of 2024 print other lines (`slot 0 is processing [task id: 0]`, `INFO [update_slots]
    # ... | key=value`, --log-format json): legacy.py, told apart by the first lines; imported
    # here because it builds on this module
    from .legacy import legacy_plan, read_legacy_log
    source, legacy = legacy_plan(source)
    if legacy is not None:
        return read_legacy_log(source, legacy, progress=progress, name=name or "", native=native)
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
                _gunzip_capped(raw.read, reader, progress, total)
            else:
                blocks_from_stream(raw, block_size, reader, progress, total, raw.tell)
        finally:
            raw.close()
    elif isinstance(source, str):   # log text given directly
        data = source.encode("utf-8", "replace")
        feed_bytes(reader, data, block_size, progress)
    elif isinstance(source, (bytes, bytearray, memoryview)):
        data = bytes(source)
        if data[:2] == b"\x1f\x8b":
            chunks = io.BytesIO(data)
            _gunzip_capped(chunks.read, reader, progress, len(data))
        else:
            feed_bytes(reader, data, block_size, progress)
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
            blocks_from_stream(source, block_size, reader, progress, total, None, start=len(head))
        elif head[:2] == b"\x1f\x8b":
            _gunzip_capped(source.read, reader, progress, total, first=bytes(head))
        else:
            reader.feed(bytes(head))
            blocks_from_stream(source, block_size, reader, progress, total, None, start=len(head))
    else:
        feed_lines(reader, source, block_size, progress)
    return reader.finish()
