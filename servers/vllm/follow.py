"""Follow a recording while the recorder writes it: complete new lines only, rotation followed,
a file replaced or truncated under the follower noticed.

    f = Follower(path)
    for chunk in f.poll():       # call again every second or so; it never waits
        if chunk.begins:         # "replaced" / "truncated": start over, chunk.note says so
            ...                  # ("rotated": the recorder's own rotation, the same run goes on)
        feed(chunk.lines)        # bytes, each a whole line with its newline
    f.stopped                    # one sentence once following has stopped for good, else None

How it works, and why:
- The file stays open: a poll reads what was appended since the last one (at most READ_BYTES,
  so a poll is short; `f.behind` says more is waiting) and hands the complete lines. A line cut
  mid-way (the recorder flushes every 0.2 s, not per line) waits in a buffer for its rest.
- Rotation (recorder.py: FILE is renamed FILE.1 and a new FILE begins with the header and the
  requests still held): the path's inode changes and FILE.1 has the inode the follower holds,
  so the old file is read to its end through the open handle, then the new one from its start.
  RecordingLines below drops what the new file repeats (its header, its `earlier` adds) so the
  run reads on as one.
- Replaced (the path is another file and FILE.1 is not ours) or truncated (shorter than what
  was read, or its first line no longer the one read: a server restarted into the same file
  and written past the old length): the new content is read from its start, marked "replaced"
  or "truncated" with a sentence; the reader starts again.
- Gzip (a name ending .gz, or the magic bytes): decompressed as it grows with one
  zlib.decompressobj, to what can be decompressed; READ_BYTES of input and UNZIP_BYTES of
  output per poll. Text is bounded: MAX_TEXT_BYTES in all and MAX_LINE_BYTES a line (a gzip
  bomb of zeros is one endless line), past which following stops with one sentence.
- The file not there yet (a server still starting) is waited for.
Standard library only.
"""
from __future__ import annotations

import json
import os
import zlib
from dataclasses import dataclass, field

READ_BYTES = 8 << 20         # read per poll (a page re-reads every second: a poll stays short)
UNZIP_BYTES = 8 << 20        # decompressed per poll at most (feeding 8 MB of lines: about half a second)
MAX_TEXT_BYTES = 8 << 30     # text followed in all (an hour at 100 steps/s is 70-270 MB)
MAX_LINE_BYTES = 64 << 20    # one line (as servers.vllm.recording: an add line holds its prompt)
MAX_ROTATIONS_SEEN = 64     # FILE.1 ... FILE.64 looked at for the file followed
HEAD_CHECK = 4096            # bytes of the first line compared on each poll (a file rewritten in place)


@dataclass
class Chunk:
    lines: list[bytes] = field(default_factory=list)
    begins: str | None = None   # None: goes on; "rotated" / "replaced" / "truncated": a new file's start
    note: str = ""              # a sentence for the page when begins is set


class Follower:
    """Complete new lines of one path, poll by poll (see the module's docstring)."""

    def __init__(self, path, *, read_bytes: int = READ_BYTES, unzip_bytes: int = UNZIP_BYTES,
                 max_text_bytes: int = MAX_TEXT_BYTES, max_line_bytes: int = MAX_LINE_BYTES):
        self.path = os.fspath(path)
        self.read_bytes, self.unzip_bytes = read_bytes, unzip_bytes
        self.max_text_bytes, self.max_line_bytes = max_text_bytes, max_line_bytes
        self.f = None
        self.ino: tuple[int, int] | None = None
        self.offset = 0            # bytes of the file read
        self.text = 0              # bytes of text handed (decompressed)
        self.buf = b""             # a line's start, waiting for its end
        self.head = b""            # the file's first bytes (up to HEAD_CHECK), to notice a rewrite
        self.gz = None             # the decompressor of a gzip file
        self.gz_tail = b""         # gzip input not yet decompressed (the per-poll output cap)
        self.draining = False      # the recorder rotated: the old file is read to its end first
        self.stopped: str | None = None
        self.behind = False        # more was there than one poll reads
        self.files = 0             # files followed (1 + rotations and replacements)
        self.queue: list = []      # (handle, finished) opened at a rotation, to read after ours (oldest first)

    # ------------------------------------------------------------------ the file under the path
    def _stat(self):
        try:
            st = os.stat(self.path)
        except OSError:
            return None
        return st

    def _open(self, begins: str | None, note: str, f=None) -> Chunk | None:
        """Follow the path's file (or `f`, a handle opened already) from its start."""
        if f is None:
            try:
                f = open(self.path, "rb")
            except OSError:
                return None
        st = os.fstat(f.fileno())
        if self.f is not None and self.f is not f:
            self.f.close()
        self.f, self.ino, self.offset, self.buf, self.head = f, (st.st_dev, st.st_ino), 0, b"", b""
        self.gz_tail, self.draining = b"", False
        magic = os.pread(f.fileno(), 2, 0)
        self.gz = zlib.decompressobj(wbits=31) if (magic == b"\x1f\x8b" or self.path.endswith(".gz")) else None
        self.files += 1
        return Chunk(begins=begins, note=note) if begins else Chunk()

    def close(self) -> None:
        for f in [self.f] + [q for q, _ in self.queue]:
            if f is not None:
                f.close()
        self.f, self.queue = None, []

    def _rotated_to(self) -> int:
        """k when our file is FILE.k now (the recorder rotated it k times since the last poll), else
        0. A gap is looked past: mid-rotation FILE.1 is missing for a moment (renamed to FILE.2,
        FILE not yet renamed to it)."""
        missing = 0
        for k in range(1, MAX_ROTATIONS_SEEN + 1):
            try:
                st = os.stat(f"{self.path}.{k}")
            except OSError:
                missing += 1
                if missing > 2:
                    return 0
                continue
            missing = 0
            if (st.st_dev, st.st_ino) == self.ino:
                return k
        return 0

    def _queue_rotated(self) -> bool:
        """Ours is FILE.k: open FILE.(k-1) ... FILE.1 and FILE now (renamed or deleted later, an open
        file still reads), oldest first. Taken again if a rotation moved ours meanwhile, so no file
        is skipped; False when ours is not among the rotated ones (the file was replaced)."""
        for _ in range(20):
            k = self._rotated_to()
            if not k:
                return False
            got = []
            for name in [f"{self.path}.{j}" for j in range(k - 1, 0, -1)] + [self.path]:
                try:
                    got.append((open(name, "rb"), name != self.path))   # (handle, finished)
                except OSError:   # the gap of a rotation under way: that file is the path's, opened last
                    pass
            if self._rotated_to() == k:   # nothing moved while they were opened
                self.queue = got
                return True
            for f, _ in got:
                f.close()
        return False

    # ------------------------------------------------------------------ polling
    def poll(self) -> list[Chunk]:
        """What was written since the last poll, as chunks (usually one); [] when nothing."""
        if self.stopped:
            return []
        if self.f is None and self._open(None, "") is None:
            return []   # not there yet
        out: list[Chunk] = [Chunk()]
        if not self.draining:
            st = self._stat()
            if st is not None and (st.st_dev, st.st_ino) != self.ino:
                if self._queue_rotated():   # the recorder rotated: read ours (FILE.k) to its end, then the newer
                    self.draining = True
                else:
                    nxt = self._open("replaced", "the file was replaced by another one: reading it from its start")
                    if nxt is not None:
                        out = [nxt]
            elif st is not None and self._rewritten(st):
                nxt = self._open("truncated", "the file was truncated or rewritten under the follower: reading it "
                                 "again from its start")
                if nxt is not None:
                    out = [nxt]
        eof = self._read(out[-1].lines)
        while self.draining and eof and not self.stopped:
            note = "the recorder rotated the file: following the new one"
            if self.queue:
                f, finished = self.queue.pop(0)
                nxt = self._open("rotated", note, f)
                self.draining = finished   # a rotated file is complete: read it to its end, then the next
            else:   # the path's file could not be opened with the others (not made yet): look again
                nxt = self._open("rotated", note)
            if nxt is None:
                break   # the next poll looks again
            out.append(nxt)
            eof = self._read(nxt.lines)
        return [c for c in out if c.lines or c.begins]

    def _rewritten(self, st) -> bool:
        if st.st_size < self.offset:
            return True
        if self.head:   # the first line read must still be there (a restart writes a new header)
            try:
                return os.pread(self.f.fileno(), len(self.head), 0) != self.head
            except OSError:
                return True
        return False

    def _raw(self, budget: int) -> bytes:
        raw = self.f.read(min(budget, 1 << 20))
        if raw and self.offset < HEAD_CHECK:
            self.head += raw[:HEAD_CHECK - self.offset]
            if self.gz is None and b"\n" in self.head:   # plain text: the first line is enough
                self.head = self.head[:self.head.index(b"\n") + 1]
        self.offset += len(raw)
        return raw

    def _read(self, lines: list[bytes]) -> bool:
        """The complete lines after the offset into `lines`, up to the poll's budgets; True when the
        file's end was reached (nothing more to read now)."""
        budget_in, budget_out = self.read_bytes, self.unzip_bytes
        self.behind = False
        while not self.stopped:
            if self.gz is not None and self.gz_tail:
                raw, self.gz_tail = self.gz_tail, b""
            else:
                if budget_in <= 0:
                    self.behind = True
                    return False
                raw = self._raw(budget_in)
                if not raw:
                    return True
                budget_in -= len(raw)
            if self.gz is not None:
                data = self._unzip(raw, budget_out)
                budget_out -= len(data)
            else:
                data = raw
            if not self._split(data, lines):
                return False
            if self.gz_tail and budget_out <= 0:
                self.behind = True
                return False
        return False

    def _unzip(self, raw: bytes, budget: int) -> bytes:
        """What `raw` (more of the gzip file) decompresses to, at most `budget` bytes (the input
        left over waits in gz_tail); a file of several gzip members reads on."""
        out, n = [], 0
        data = raw
        try:
            while data and n < max(budget, 1):
                piece = self.gz.decompress(data, max(budget - n, 1))
                out.append(piece)
                n += len(piece)
                data = self.gz.unconsumed_tail
                if self.gz.eof:   # the member ended: another may follow (the rest of the input is
                    data = self.gz.unused_data   # unused_data; with max_length zlib leaves it in the tail too)
                    self.gz = zlib.decompressobj(wbits=31)
        except zlib.error as e:
            self.stopped = f"the gzip file is damaged ({e}): following stopped after what it held"
            data = b""
        self.gz_tail = data
        return b"".join(out)

    def _split(self, data: bytes, lines: list[bytes]) -> bool:
        """Complete lines of buf + data into `lines`; False once following has stopped."""
        self.text += len(data)
        if self.text > self.max_text_bytes:
            self.stopped = (f"the recording is over {self.max_text_bytes / 2**20:,.0f} MiB of text: following "
                            "stopped there (what was read stays)")
            return False
        buf = self.buf + data if self.buf else data
        end = buf.rfind(b"\n")
        if end < 0:
            self.buf = buf
        else:
            lines.extend(x + b"\n" for x in buf[:end].split(b"\n"))
            self.buf = buf[end + 1:]
        if len(self.buf) > self.max_line_bytes:
            self.stopped = (f"a line is over {self.max_line_bytes >> 20} MiB (no recorder line is; a gzip bomb "
                            "could be): following stopped there")
            self.buf = b""
            return False
        return True


# ---------------------------------------------------------------------------------------------
# The recorder's lines across files: one run read on through rotations
# ---------------------------------------------------------------------------------------------

RUN_KEYS = ("format", "vllm", "scheduler_class", "started_unix", "config")   # what one server run keeps


@dataclass
class Lines:
    lines: list[bytes] = field(default_factory=list)   # to feed the reader, in order
    restart: bool = False    # the reader starts over (before these lines): a new file, a new run
    note: str = ""           # a sentence for the page ("" when nothing to say)


class RecordingLines:
    """A Follower's chunks as the lines of one server run: a rotation's new file drops what it
    repeats (the old file's `rotate` line, the new header, the `earlier` adds), a file replaced
    or truncated restarts the reader, and a header that is not the run's (a header line half-way
    through a file, or a rotated file of another run) stops following with one sentence: what
    was read stays on the page."""

    def __init__(self, path, **kw):
        self.follower = Follower(path, **kw)
        self.header: dict | None = None
        self.stopped: str | None = None
        self.new_file = False    # after a rotation: the new file's header and `earlier` adds come first
        self.rotations = 0

    @property
    def behind(self) -> bool:
        return self.follower.behind

    def close(self) -> None:
        self.follower.close()

    def poll(self) -> Lines:
        out = Lines()
        if self.stopped:
            return out
        for c in self.follower.poll():
            if c.begins in ("replaced", "truncated"):
                out = Lines(restart=True, note=c.note)   # what came before is the old file's
                self.header, self.new_file = None, False
            elif c.begins == "rotated":
                self.rotations += 1
                out.note = out.note or c.note
                self.new_file = True
            self._take(c.lines, out)
            if self.stopped:
                break
        if self.follower.stopped and not self.stopped:
            self.stopped = self.follower.stopped
        if self.stopped:
            out.note = self.stopped
        return out

    def _take(self, lines: list[bytes], out: Lines) -> None:
        for line in lines:
            head = line[:40]
            if b'"header"' in head and _kind(line) == "header":
                h = _obj(line)
                if self.header is None:
                    self.header = h
                elif self.new_file and h is not None and self._same_run(h):
                    continue   # the same run's next file: its header repeats the first
                else:
                    self.stopped = ("the recording's header changed half-way (another server run, or files "
                                    "joined): following stopped; the steps up to it are shown")
                    return
            elif b'"rotate"' in head and _kind(line) == "rotate":
                continue   # the run goes on in the next file
            elif self.new_file and b'"add"' in head and (_obj(line) or {}).get("earlier"):
                continue   # read already, in the file before
            elif self.new_file and line.strip():
                self.new_file = False   # the new file's own lines have begun
            out.lines.append(line)

    def _same_run(self, h: dict) -> bool:
        return all(h.get(k) == self.header.get(k) for k in RUN_KEYS)


def _obj(line: bytes):
    try:
        obj = json.loads(line)
    except ValueError:
        return None
    return obj if isinstance(obj, dict) else None


def _kind(line: bytes):
    return (_obj(line) or {}).get("kind")
