"""Finding a block's records, and the time of each: the reader's tokenizing half.

Per block, the C tokenizer (native.llamascan) finds the candidates and parses the frequent
records; without it the three regexes of lines.py find them all. Either way the records go, in
the order they start, to the state machine (StateMachine._apply). Start-up lines (build, context
parameters) are looked for only where a server starts. The prefixes collectors put before lines
(docker, kubectl, journald, LM Studio: prefixes.py) are taken off each line of a block first; a
log whose lines sit behind a prefix of another kind is rescanned with the unguarded regexes.
"""
from __future__ import annotations

from itertools import islice

import numpy as np

from . import native, prefixes
from .lines import LOOSE, SEC, SEC_CORE, SEC_GATES, SEC_LLAMA, START, TS, TS_COLOURED, prefix_ms, record
from .native import K_SLOW_QUE, K_SLOW_SLOT, K_SLOW_SRV, K_YDONE

MAX_EXAMPLES = 5


class Scanning:
    """LlamaLogReader's input side (a mixin: the state lives in the reader's slots)."""

    __slots__ = ()

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

    def prepare(self, buf: bytearray, end: int, guarded: bool):
        """Take the collectors' prefixes off the lines of buf[:end] (in place) and, with the C
        tokenizer, find its records: (the new end, (records, loadm, guarded) or None). The C scan
        stops at the first line that may carry a prefix; only then are they taken off (llamastrip)
        and the block scanned again, so a log without them pays nothing more."""
        scan = native.llamascan() if self.native else None
        if scan is None:
            return prefixes.strip_block(buf, end, self.prefixes), None
        found = scan(buf, end, guarded, True)
        if found is None:
            end = native.llamastrip()(buf, end, self.prefixes)
            found = scan(buf, end, guarded)
        return end, (*found, guarded)

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
        ahead by the prefetching thread (which took the prefixes off too)."""
        if scanned is None:
            if type(data) is not bytearray:
                data = bytearray(data)
            end, scanned = self.prepare(data, end, self.families is not LOOSE)
        self._read_block(data, end, scanned)
        if not self.records:   # lines count only while no record came: a log without any is all unparsed
            self.nlines += data.count(b"\n", 0, end) - 1

    def _read_block(self, data: bytes, end: int, scanned=None) -> None:
        scan = native.llamascan() if self.native else None
        if scan is None:
            self._scan_regex(data, end)
            return
        # the C tokenizer: candidates in order, the frequent records parsed
        guarded = self.families is not LOOSE
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
        ms.sort(key=START)
        self.records += self._apply(data, end, map(record, ms), [0, 0, 0])

    def _go_loose(self, data: bytes, end: int) -> bool:
        """No slot or srv record yet: are the lines behind a foreign prefix? Then rescan loosely."""
        if self.records or self.families is LOOSE or sum(1 for _ in LOOSE[0].finditer(data, 0, end)) < 5:
            return False
        self.families = LOOSE
        self._warn("the log's lines carry a foreign prefix (journald, docker, ...?): records are "
                   "read wherever they appear on a line")
        self._read_block(data, end)
        return True

    def _gate_lines(self, data: bytes, end: int):
        """Per gate, the first occurrence on each line: that line's start and end (-1: none)."""
        for g in SEC_GATES:
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
        for g, lines in zip(SEC_GATES, gated or self._gate_lines(data, end)):
            for ls, le in lines:
                if ls not in seen and (g != b"llama_" or any(data.find(w, ls, le if le >= 0 else end) >= 0
                                                             for w in SEC_LLAMA)):
                    seen.add(ls)
                    m = SEC.match(data, ls)
                    lim = min(le if le >= 0 else len(data), ls + 300)
                    if m is None and SEC_CORE.search(data, ls, lim):
                        # behind a foreign prefix (journald, docker): not inside JSON text
                        m = SEC.search(data, ls, lim)
                        if m is not None and (b'"' in data[ls:m.start()] or b"{" in data[ls:m.start()]):
                            m = None
                    if m is not None:
                        out.append(m)
        out.sort(key=START)
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

    # ------------------------------------------------------------------ the clock
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
                m = TS.search(data, max(0, s - 32), s)
                if m is None:
                    return None
                t = prefix_ms(m)
        elif data[s - 1] == 109 or data[s - 3] == 109:
            # --log-colors: ESC[34m M.SS.mmm.uuu ESC[0m, a space, ESC[3Xm L, a space (then ESC[0m after I)
            m = TS_COLOURED.search(data, max(0, s - 48), s)
            if m is None:
                return None
            t = prefix_ms(m)
        else:
            return None
        self.saw_ts = True
        t += self.t_offset
        self.last_t = t
        return t
