"""A recording read as its lines come: RecordingStream takes complete lines, any number at a
time, and keeps the Recording (header, adds, steps as columns) and the Trace's tables
(replay.TraceBuilder) up to date; read_all reads a whole file through one.

    s = RecordingStream(name="steps.jsonl")
    s.feed(lines)          # complete lines (bytes or str), the header first; more later
    trace = s.trace()      # the Trace of what was fed so far
    rec = s.recording      # oracle_lines / to_workload / decisions work on it at any point

A second header (the server started again into the same file) raises RecordingRestarted when
fed: the stream keeps what came before it and takes nothing more (read_all, on a whole file,
says so in a warning and reads the first run). Damaged lines are skipped and said in
recording.warnings, as the whole-file reader always did.
"""
from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass, field

from sim.limits import shown

from .gcpause import no_gc
from .lines import LINE_KINDS, check_header, clean_add, clean_finish, clean_step, not_a_recording, not_text
from .replay import TraceBuilder
from .source import Unzip, lines_of, long_lines_skipped, open_source, raw_chunks, read_ahead
from .steps import StepStore

MAX_WARNINGS = 30
_scan = json.JSONDecoder().scan_once   # json.loads without its wrappers (a third of its time on short lines)
HEADER_MAX = 1 << 16   # a header line is a few hundred bytes
MAX_BAD_LINES = 100_000   # lines that are not JSON objects before reading stops (a recorder writes none)
MAX_TEXT_BYTES = 1 << 30   # of (unzipped) text read from one recording
MAX_LINE_BYTES = 64 << 20   # one line (an add line holds its prompt's ids: 10M tokens fit)


@dataclass
class Recording:
    header: dict
    adds: list[dict] = field(default_factory=list)      # in the order the scheduler got them
    steps: Sequence = field(default_factory=StepStore)  # step dicts, kept as their lines (steps.py)
    finishes: list[dict] = field(default_factory=list)  # requests finished outside a step (aborts)
    warnings: list[str] = field(default_factory=list)
    # the recorder closed the file; vLLM's engine is mostly killed before its scheduler can (every
    # line is flushed as it is written, so nothing is lost: this only says how the run ended)
    ended: bool = False
    name: str = ""
    # the Trace's tables, built as the lines were read (to_trace takes them from here)
    builder: TraceBuilder | None = field(default=None, repr=False, compare=False)

    @property
    def config(self) -> dict:
        return dict(self.header.get("config") or {})

    @property
    def continues_earlier(self) -> bool:
        """A file begun by rotation: requests added before it lack their history."""
        part = self.header.get("part")
        return type(part) is int and part > 1   # the recorder writes a whole number; anything else: part 1

    def warn(self, msg: str) -> None:
        if msg not in self.warnings and len(self.warnings) < MAX_WARNINGS:
            self.warnings.append(msg)


def parse(raw):
    """json.loads(raw): the line's text scanned straight away; anything unusual (bytes that are
    no UTF-8, leading spaces, a BOM, junk) goes through json.loads itself, which decides."""
    try:
        s = raw.decode("utf-8") if type(raw) is bytes else raw
        obj, end = _scan(s, 0)
        if end == len(s) or s[end:].isspace():
            return obj
    except (StopIteration, ValueError):
        pass
    return json.loads(raw)


class RecordingRestarted(ValueError):
    """A second header line: the server started again into the same file."""

    def __init__(self, line: int, header: dict | None):
        super().__init__(f"the recording restarted: a second header at line {line:,} (the server started again "
                         "into the same file); the steps before it are kept")
        self.line, self.header = line, header


class RecordingStream:
    """Complete lines in, the Recording and its Trace so far out (see the module's docstring)."""

    def __init__(self, name: str = "", *, max_bad_lines: int = MAX_BAD_LINES, header_max: int = HEADER_MAX):
        self.name = name
        self.recording: Recording | None = None
        self.lineno = 0
        self.bad = 0
        self.last_bad: int | None = None     # the line number of the last line that was no JSON
        self.max_bad_lines, self.header_max = max_bad_lines, header_max
        self.stopped: Exception | None = None   # a restart: raised again by feed
        self.full = False                        # too many bad lines: nothing more is taken
        self._running_n = self._waiting_len = 0
        self._last_step = -1 << 63   # the step lines' numbers rise; one that does not is skipped (_repeats)
        self._added: set[int] = set()   # the add lines' request indexes (`i`)
        self._ids: set[str] = set()     # their request ids (a reused one is numbered: the Trace's ids are unique)

    @property
    def header(self) -> dict | None:
        return self.recording.header if self.recording else None

    @property
    def num_steps(self) -> int:
        return len(self.recording.steps) if self.recording else 0

    @property
    def ended(self) -> bool:
        return bool(self.recording and self.recording.ended)

    def trace(self):
        if self.recording is None:
            raise ValueError("no recording header has been read yet")
        return self.recording.builder.trace(self.recording, keep=True)   # the next call extends this one

    def feed(self, lines) -> int:
        """Take complete lines (see the module's docstring); the step lines taken."""
        if self.stopped is not None:
            raise self.stopped
        before = self.num_steps
        with no_gc():
            for raw in lines:
                if self.full:
                    break
                self.line(raw)
        return self.num_steps - before

    def line(self, raw) -> bool:
        """Take one complete line; False when it was no JSON (counted as bad)."""
        self.lineno += 1
        rec = self.recording
        if rec is not None and self.bad > self.max_bad_lines:   # junk (blank lines read at 10-45 us a line): stop
            rec.warn(f"over {self.max_bad_lines:,} lines are not JSON objects: reading stopped there")
            self.full = True
            return True
        if rec is None:
            head = raw if isinstance(raw, bytes) else raw.encode()
            if head[:2] in (b"\xff\xfe", b"\xfe\xff"):   # json.loads would take its header, and no line after it
                raise ValueError("this file is UTF-16 text; a vLLM step recording is UTF-8 JSON lines "
                                 "(convert it, e.g. iconv -f UTF-16 -t UTF-8)")
            if head[:3] == b"\xef\xbb\xbf":   # a byte-order mark an editor added: not part of the header
                raw = raw[3:] if isinstance(raw, bytes) else raw.lstrip("\ufeff")
        try:
            obj = parse(raw) if raw and not raw.isspace() else None
        except (ValueError, UnicodeDecodeError, RecursionError):
            if rec is None:
                raise ValueError(not_a_recording(raw if isinstance(raw, bytes) else raw.encode())) from None
            self.bad += 1
            self.last_bad = self.lineno
            return False
        if rec is None:
            head = raw if isinstance(raw, bytes) else raw.encode()
            if len(head) >= self.header_max:
                raise ValueError(f"the first line is over {self.header_max >> 10} KiB: not a recording's header")
            self.recording = rec = Recording(header={}, name=self.name, builder=TraceBuilder())
            rec.header = check_header(obj, head, rec.warn)
            return True
        if type(obj) is not dict:
            self.bad += 1
            return True
        kind = obj.get("kind")
        if kind == "step" and obj.get("step") is not None:   # most lines: taken here, without a call more
            try:
                st = clean_step(obj)
            except (KeyError, TypeError, ValueError, OverflowError):
                rec.warn("a 'step' line is damaged or of another format: skipped")
                return True
            if self._repeats(rec, st["step"]):
                return True
            has_r, has_w = "running" in st, "waiting" in st
            running_n = self._running_n = len(st["running"]) if has_r else self._running_n
            waiting_len = self._waiting_len = len(st["waiting"]) if has_w else self._waiting_len
            rec.steps.append(raw, has_r, has_w, st)
            rec.builder.step(st, running_n, st.get("waiting_n", waiting_len))
            return True
        if type(kind) is not str or kind not in LINE_KINDS:   # a list or object there is unhashable
            self.bad += 1
            return True
        self._take(rec, obj, raw)
        return True

    def _repeats(self, rec: Recording, step: int) -> bool:
        """Whether a step line's number is not past the last one's: a line written twice, or lines
        out of order. Skipped, and said: the Trace's steps are unique and rising (a repeated step
        was applied twice, and the metrics' lookups by step refused the duplicate)."""
        if step > self._last_step:
            if step > self._last_step + STEP_AHEAD and self._last_step > -1 << 62:
                # the recorder numbers its steps one by one: a number far ahead is damaged, and taken
                # it would have every later (good) line skipped as going back
                rec.warn("a step line's number is far past the step before it (damaged?): skipped")
                return True
            self._last_step = step
            return False
        rec.warn("a step line repeats or goes back to an earlier step (a line written twice?): skipped")
        return True

    def _take(self, rec: Recording, obj: dict, raw) -> None:
        kind = obj["kind"]
        try:
            if kind == "step":
                if obj.get("step") is None:
                    return   # an update of a step made before the recorder started
                st = clean_step(obj)
                if self._repeats(rec, st["step"]):
                    return
                has_r, has_w = "running" in st, "waiting" in st
                running_n = len(st["running"]) if has_r else self._running_n
                waiting_len = len(st["waiting"]) if has_w else self._waiting_len
                rec.steps.append(raw, has_r, has_w, st)
                self._running_n, self._waiting_len = running_n, waiting_len
                rec.builder.step(st, running_n, st.get("waiting_n", waiting_len))
            elif kind == "add":
                a = clean_add(obj)
                if a["i"] in self._added:   # the recorder numbers each request once: a line written twice
                    rec.warn("an add line repeats an earlier request's index (a line written twice?): skipped")
                    return
                self._added.add(a["i"])
                rid = a["id"]
                if rid in self._ids:   # a client reused an id (vLLM takes it once the first has ended)
                    k = 2
                    while f"{rid} ({k})" in self._ids:
                        k += 1
                    a["id"] = f"{rid} ({k})"
                    rec.warn(f"a request id was added twice (a client reused it): the later one is "
                             f"{shown(a['id'])} here")
                self._ids.add(a["id"])
                # the recorder writes an add just before its step (last step + 1; before any step, 1
                # unless the file continues a rotated one): far past it, the number is damaged, and
                # left as it is a re-simulation ran to its step cap (minutes)
                last = self._last_step if self._last_step > -1 << 62 else None if rec.continues_earlier else 0
                if last is not None and a["before_step"] > last + ADD_AHEAD:
                    rec.warn("an add line names a step far past the steps read so far (damaged?): taken as the "
                             "next step")
                    a["before_step"] = last + 1
                rec.adds.append(a)
                rec.builder.add(a)
            elif kind == "finish":
                f = clean_finish(obj)
                rec.finishes.append(f)
                rec.builder.finish_outside(f)
            elif kind == "end":
                rec.ended = True
            elif kind == "header":
                self.stopped = RecordingRestarted(self.lineno, obj)
                raise self.stopped
            elif kind == "rotate":
                rec.ended = True
                rec.warn("the recorder rotated this file: the steps after it are in the next file")
        except (KeyError, TypeError, ValueError, OverflowError) as e:
            if isinstance(e, RecordingRestarted):
                raise
            what = repr(str(kind)[:20])
            rec.warn(f"{'an' if what[1:2] in tuple('aeiou') else 'a'} {what} line is damaged or of another "
                     "format: skipped")


ADD_AHEAD = 1000   # steps an add line's before_step may run ahead of the last step line read
STEP_AHEAD = 1000  # and a step line's number


def _why(e: BaseException) -> str:
    """Why a file could not be read to its end, as a reader says it (not Python's words)."""
    if isinstance(e, EOFError) or "ended before" in str(e):
        return "its gzip data is cut short"
    if "gzip" in type(e).__name__.lower() or "gzip" in str(e).lower() or "crc" in str(e).lower():
        return "its gzip data is damaged"
    return getattr(e, "strerror", None) or "a read error"


def read_all(source, *, progress=None, name: str | None = None, max_text: int = MAX_TEXT_BYTES,
             max_line: int = MAX_LINE_BYTES, max_bad_lines: int = MAX_BAD_LINES,
             header_max: int = HEADER_MAX) -> Recording:
    """A whole recording (path, bytes or binary file object; plain or gzip) in one pass.
    ValueError (one sentence) when it is none; what stops it early is said in its warnings."""
    f, total, fname, mine = open_source(source)
    stream = RecordingStream(name if name is not None else fname, max_bad_lines=max_bad_lines, header_max=header_max)
    unzip = Unzip(max_text)
    done = [0]

    def told(d, t):   # in the read-ahead thread: progress is told from this one (a page's bar lives here)
        done[0] = d

    stop = tail = None
    skipped = [0]   # lines over max_line, left out
    batches = read_ahead(lines_of(unzip.text(raw_chunks(f, total, told)), max_line, header_max, skipped))
    shown = 0
    try:
        with no_gc():
            for batch, tail, stop in batches:
                stream.feed(batch)
                if progress is not None and done[0] != shown:
                    shown = done[0]
                    progress(shown, total)
                if stop is not None or stream.full:
                    break
    except RecordingRestarted:
        stream.recording.warn("a second header: the file holds more than one server run; only the first is read")
        tail = stop = None
    except OSError as e:
        if stream.recording is None:
            raise ValueError(f"the file could not be read: {e}") from None
        stream.recording.warn(f"the file stops early ({_why(e)}); what was read is shown")
        tail = None
    finally:
        batches.close()
        if mine:
            f.close()
    rec = stream.recording
    if stop is not None and rec is None:
        raise ValueError(not_text(stop.head)   # binary, or an archive; else a text line too long for a header
                         or f"the first line is over {header_max >> 10} KiB: not a recording's header")
    if stop is not None:
        rec.warn(stop.reason)
    if skipped[0]:
        rec.warn(long_lines_skipped(skipped[0], max_line))
    if unzip.stop is not None:
        if rec is None:
            if unzip.stop.damaged:
                raise ValueError(f"the file could not be read: {unzip.stop.detail}")
        else:
            rec.warn(unzip.stop.reason)
        tail = None
    if tail is not None and not stream.full and stream.stopped is None:
        if not stream.line(tail) and stream.recording is not None:
            stream.bad -= 1
            stream.recording.warn("the last line is cut (the server was killed while writing?): it is left out")
        rec = stream.recording
    if rec is None:
        raise ValueError("the file is empty: no recording header")
    if stream.bad:
        rec.warn(f"{stream.bad} line(s) that are not JSON objects of the recorder's kinds were skipped")
    if progress is not None:
        progress(total if total is not None else done[0], total)
    return rec
