"""What the engine readers share: the result (LogRead), the log's clock, the line loop with its
hard-wrap rejoining, and the unknown spans between logged lines.

An engine reader (servers.sglang_log, servers.vllm_log) subclasses LineReader with `parse`
(is this line one of its records? complete?) and `take` (keep a complete record), and `other`
for the lines that are no record (request lines, the rest).

Hard wrap: a terminal that wraps at its width leaves a record on two or more physical lines. A
record line that is not complete is joined with the lines after it (up to 6) that do not begin
like a line of their own, until it is; one that is complete but long is joined with the next
line when the join is complete too (the wrap fell just after a number). A record line that stays
incomplete (a cut line, damage) is counted as not understood, with an example; nothing is guessed.
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field

from . import fields
from . import text as textmod
from .wrappers import NAMES, classify, take_repeated
from ..llama_server.prefixes import days_from_civil   # the one civil-date rule of the log readers

MAX_EXAMPLES = 10
EXAMPLE_CHARS = 300
WRAP_MIN = 60            # a line shorter than this was not wrapped by a terminal
_NEW_LINE = re.compile(r"\s*(?:\[(?:\d|gpu_id)|\([^()]{0,80}pid=|\d{4}-\d\d-\d\d|(?:INFO|DEBUG|WARNING|ERROR)\b"
                       r"|[A-Z][a-z]{2} [ \d]\d \d\d:)")
MAX_JOINS = 6


class Clock:
    """Seconds on the log's clock (from its first timed record) from what the engine printed: a full
    date, a month-day without year (vLLM: the year from a docker prefix when there is one, else a
    leap year; December -> January turns it), or a time of day only (2024 SGLang: midnight turns
    the day). Times are those the engine printed; sub-second digits are kept when printed."""

    def __init__(self) -> None:
        self.origin: float | None = None
        self.origin_text: str | None = None
        self.last: float | None = None
        self.year: int | None = None
        self.year_known = False
        self.day = 0
        self.kinds: set[str] = set()
        self._memo: tuple | None = None
        self._abs: float | None = None

    def at(self, date: str | None, md: str | None, hms: str, year_hint: int | None = None) -> float | None:
        """Seconds from the first record (None for an impossible time). The same arguments as the
        call before give its answer again: nothing can have turned the day or year in between (a
        log prints many lines in one second)."""
        key = (date, md, hms, year_hint)
        memo = self._memo
        if memo is not None and memo[0] == key:
            return memo[1]
        self._abs = None
        t = self._at(date, md, hms, year_hint)
        # memo only where a second call could not turn the day (or year): its time is not half a day
        # behind the latest seen (a log mixing clocks can be)
        self._memo = (key, t) if self._abs is None or self._abs >= self.last - 12 * 3600 else None
        return t

    def _at(self, date: str | None, md: str | None, hms: str, year_hint: int | None = None) -> float | None:
        try:
            h, mi, s = hms.split(":")
            secs = int(h) * 3600 + int(mi) * 60 + float(s)
            if int(h) > 23 or int(mi) > 59 or float(s) >= 61:
                return None
            if date:
                y, mo, d = (int(x) for x in date.split("-"))
                if not (1 <= mo <= 12 and 1 <= d <= 31):
                    return None
                self.kinds.add("date")
                t = days_from_civil(y, mo, d) * 86400.0 + secs
                text = f"{date} {hms}"
            elif md:
                mo, d = (int(x) for x in md.split("-"))
                if not (1 <= mo <= 12 and 1 <= d <= 31):
                    return None
                self.kinds.add("month-day")
                if self.year is None:
                    self.year, self.year_known = (year_hint, True) if year_hint else (2000, False)
                t = days_from_civil(self.year, mo, d) * 86400.0 + secs
                if self.last is not None and t < self.last - 180 * 86400:
                    self.year += 1
                    t = days_from_civil(self.year, mo, d) * 86400.0 + secs
                text = f"{self.year if self.year_known else '(no year)'}-{md} {hms}"
            else:
                self.kinds.add("time")
                t = self.day * 86400.0 + secs
                if self.last is not None and t < self.last - 12 * 3600:
                    self.day += 1
                    t += 86400.0
                text = f"{hms} (no date)"
        except ValueError:
            return None
        if self.origin is None:
            self.origin, self.origin_text = t, text
        self.last = t if self.last is None else max(self.last, t)
        self._abs = t
        return round(t - self.origin, 6)

    def describe(self) -> str:
        if not self.kinds:
            return "no timestamps: records in file order"
        if "date" in self.kinds:
            return "the engine's timestamps (date and time, 1 s resolution), seconds from the first record"
        if "month-day" in self.kinds:
            return ("the engine's timestamps (month-day and time, 1 s resolution; "
                    + ("year from the collector's prefix" if self.year_known else "no year printed: the year is unknown")
                    + "), seconds from the first record")
        return "the engine's time of day only (no date; midnight turns the day), seconds from the first record"


@dataclass
class Parsed:
    complete: bool
    record: dict | None = None
    prefix: str = ""
    kind: str = ""          # a reader's own tag (e.g. "batch", "stats", "spec")


@dataclass
class LogRead:
    """What a server log says, as read: the CLI's JSON (to_json) and the page's input."""
    engine: str
    name: str = ""
    era: str = "unknown"
    traits: list[str] = field(default_factory=list)
    batches: list[dict] = field(default_factory=list)
    stats: list[dict] = field(default_factory=list)
    spec_decoding: list[dict] = field(default_factory=list)
    requests: list[dict] = field(default_factory=list)
    not_understood: int = 0
    not_understood_examples: list[dict] = field(default_factory=list)
    other_lines: int = 0
    other_engine_lines: dict = field(default_factory=dict)
    duplicates: int = 0
    duplicate_note: str = ""
    rejoined: int = 0
    wrappers: list[str] = field(default_factory=list)
    cannot_say: list[str] = field(default_factory=list)
    would_tell_more: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    clock: str = ""
    time_origin: str | None = None
    gaps: list[list[float]] = field(default_factory=list)
    gap_rule: str = ""
    lanes: list[str] = field(default_factory=list)
    physical_lines: int = 0
    bytes_read: int = 0
    complete: bool = True
    extra: dict = field(default_factory=dict)

    def to_json(self) -> dict:
        return {"engine": self.engine, "file": self.name, "era": self.era, "traits": self.traits,
                "clock": self.clock, "time_origin": self.time_origin, "lanes": self.lanes,
                "lines": self.physical_lines, "bytes_read": self.bytes_read, "complete": self.complete,
                "batches": self.batches, "stats": self.stats, "spec_decoding": self.spec_decoding,
                "requests": self.requests,
                "not_understood": {"count": self.not_understood, "examples": self.not_understood_examples},
                "other_lines": self.other_lines, "other_engine_lines": self.other_engine_lines,
                "duplicates": {"count": self.duplicates, "rule": self.duplicate_note},
                "rejoined_lines": self.rejoined, "wrappers": self.wrappers,
                "unknown_spans": {"spans": self.gaps, "rule": self.gap_rule},
                "cannot_say": self.cannot_say, "would_tell_more": self.would_tell_more,
                "warnings": self.warnings, **self.extra}


def unknown_spans(times: list[float], threshold: float) -> list[list[float]]:
    """[start, end] of each silence between consecutive logged times longer than `threshold`."""
    ts = sorted(t for t in times if t is not None)
    return [[a, b] for a, b in zip(ts, ts[1:]) if b - a > threshold]


def wrap_width(head: bytes, is_record=lambda line: False) -> int | None:
    """The width a terminal hard-wrapped the log at, when it did: no line is longer than it, at
    least 3 lines are exactly that long, and most of those are followed by a continuation (a line
    that neither begins like a line of its own nor holds a record). None otherwise."""
    text = head.decode("utf-8", errors="replace")
    ls = [x.rstrip("\r") for x in text.split("\n")]
    if len(ls) > 1 and not text.endswith("\n"):
        ls = ls[:-1]          # the head may end inside a line
    if not ls:
        return None
    w = max(len(x) for x in ls)
    if w < WRAP_MIN:
        return None
    at_w = [i for i, x in enumerate(ls[:-1]) if len(x) == w]
    cont = sum(1 for i in at_w if ls[i + 1].strip() and not _NEW_LINE.match(ls[i + 1]) and not is_record(ls[i + 1]))
    return w if cont >= 3 and cont * 3 >= 2 * len(at_w) else None


def median(xs: list[float]) -> float | None:
    xs = sorted(xs)
    if not xs:
        return None
    n = len(xs)
    return xs[n // 2] if n % 2 else (xs[n // 2 - 1] + xs[n // 2]) / 2


class LineReader:
    """The line loop; subclasses say what their records are."""
    engine = ""
    hold_kinds: frozenset = frozenset()     # the kinds of record a hard wrap may continue

    def __init__(self, name: str = "") -> None:
        self.out = LogRead(engine=self.engine, name=name)
        self.src = textmod.Source(name=name)
        self.clock = Clock()
        self.seen: set[str] = set()
        self.year_hint: int | None = None
        self.seen_keys: set[tuple] = set()     # recent records' keys (seen_before)

    # -- for subclasses ---------------------------------------------------------------------
    def parse(self, text: str) -> Parsed | None:
        raise NotImplementedError

    def take(self, p: Parsed, no: int, repeat: int) -> None:
        raise NotImplementedError

    def other(self, no: int, text: str) -> None:
        self.out.other_lines += 1

    def finish(self) -> None:
        pass

    # -- shared -------------------------------------------------------------------------------
    def bad(self, no: int, text: str, why: str) -> None:
        self.out.not_understood += 1
        if len(self.out.not_understood_examples) < MAX_EXAMPLES:
            t = text if len(text) <= EXAMPLE_CHARS else text[:EXAMPLE_CHARS - 1] + "…"
            self.out.not_understood_examples.append({"line": no, "why": why, "text": t})

    def seen_before(self, key: tuple) -> bool:
        """Whether a record with this key came lately (then it is counted as a duplicate): several
        API servers print the same line, a log may be collected twice. The keys of the last 8,192
        records or so are kept."""
        if key in self.seen_keys:
            self.out.duplicates += 1
            return True
        self.seen_keys.add(key)
        if len(self.seen_keys) > 8192:
            self.seen_keys.clear()
        return False

    def prefix_year(self, prefix: str) -> int | None:
        y = classify(prefix, self.seen)
        if y is not None and self.year_hint is None:
            self.year_hint = y
        return y

    def _emit(self, p: Parsed, no: int, text: str, repeat: int, joined: bool) -> None:
        self.prefix_year(p.prefix)
        if joined:
            self.out.rejoined += 1
            self.seen.add("wrap")
        self.take(p, no, repeat)

    def unwrap(self, lines, width: int | None):
        """Lines of exactly the terminal's `width` joined with the continuation lines after them."""
        if not width:
            yield from lines
            return
        buf: tuple[int, str] | None = None
        for no, text in lines:
            if buf is not None:
                if not _NEW_LINE.match(text) and text.strip():
                    buf = (buf[0], buf[1] + text)
                    self.out.rejoined += 1
                    self.seen.add("wrap")
                    if len(text) != width:
                        yield buf
                        buf = None
                    continue
                yield buf
                buf = None
            if len(text) == width:
                buf = (no, text)
            else:
                yield no, text
        if buf is not None:
            yield buf

    def read(self, src, progress=None) -> LogRead:
        """The log read; progress(done, total): bytes of the file read and its size (text.py)."""
        self.src.progress = progress
        fields.reset()        # this log's own key templates (fields.Templates)
        pending: tuple[int, str, int, int] | None = None     # (line, text, repeat, joins): incomplete
        held: tuple[int, str, int, Parsed] | None = None      # complete, may continue on the next line
        width = wrap_width(textmod.read_head(src, 1 << 20), lambda x: self.parse(x) is not None)
        for no, raw in self.unwrap(textmod.logical_lines(src, self.src), width):
            text, repeat = take_repeated(raw)
            if repeat > 1:
                self.seen.add("repeated")
            own = self.parse(text)     # a line holding a record of its own is no continuation
            cont = own is None and not _NEW_LINE.match(text) and bool(text.strip())
            if pending is not None:
                p0, t0, r0, j0 = pending
                pending = None
                if cont:
                    joined = t0 + text
                    p = self.parse(joined)
                    if p is not None and p.complete:
                        self.out.rejoined += 1
                        self.seen.add("wrap")
                        held = (p0, joined, max(r0, repeat), p)   # it may go on over one more line
                        continue
                    if p is not None and j0 < MAX_JOINS:
                        pending = (p0, joined, max(r0, repeat), j0 + 1)
                        continue
                self.bad(p0, t0, "incomplete record (cut or damaged line)")
            if held is not None:
                h0, ht, hr, hp = held
                held = None
                if cont and len(ht) >= WRAP_MIN:
                    p = self.parse(ht + text)
                    if p is not None and p.complete and p.kind == hp.kind:
                        self._emit(p, h0, ht + text, max(hr, repeat), True)
                        continue
                self._emit(hp, h0, ht, hr, False)
            p = own
            if p is None:
                self.other(no, text)
            elif p.complete and p.kind in self.hold_kinds:
                held = (no, text, repeat, p)
            elif p.complete:
                self._emit(p, no, text, repeat, False)
            else:
                pending = (no, text, repeat, 0)
        if held is not None:
            self._emit(held[3], held[0], held[1], held[2], False)
        if pending is not None:
            self.bad(pending[0], pending[1], "incomplete record (cut or damaged line)")
        self.finish()
        o, s = self.out, self.src
        o.physical_lines, o.bytes_read, o.complete = s.physical_lines, s.bytes_read, s.complete
        o.warnings = list(s.warnings) + o.warnings
        if s.ansi_lines:
            self.seen.add("ansi")
        if s.cr_lines:
            self.seen.add("cr")
        if s.long_lines:
            self.seen.add("long")
            o.warnings.append(f"{s.long_lines:,} line(s) longer than 64 KB were cut there")
        if s.nul_lines:
            o.warnings.append(f"{s.nul_lines:,} line(s) held NUL bytes (binary data); they were dropped from those lines")
        o.wrappers = [NAMES[k] for k in NAMES if k in self.seen]
        o.clock = self.clock.describe()
        o.time_origin = self.clock.origin_text
        return o
