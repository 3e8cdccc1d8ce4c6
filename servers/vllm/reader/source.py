"""A recording's bytes as batches of complete lines, in one pass with bounded memory.

- the source is a path, bytes or a binary file object; gzip is recognised by its magic bytes
  (several members, as `cat a.gz b.gz` makes, are read one after the other);
- decompression is bounded: at most max_text bytes of text come out (a 64 MB upload can unzip
  to 64 GB), and never more than a few MiB at a time;
- a line longer than max_line (no recorder line is) is skipped without being kept whole, so
  one endless line cannot fill the memory, and the lines after it are read (the text's cap
  bounds how long an endless one is read for);
- progress(done, total) is told the bytes of the file consumed (compressed bytes for gzip, so
  the fraction is known before the text's length is), about every MiB.

The caller gets Stop (what stopped the reading, as a sentence) or the end; the last piece
without a newline comes as `tail` (a cut last line, or a file without a final newline).
"""
from __future__ import annotations

import io
import os
import queue
import threading
import zlib
from dataclasses import dataclass
from typing import Callable, Iterator

READ = 1 << 20         # bytes of the file read at a time
UNZIP_STEP = 4 << 20   # text unzipped at a time (a bomb's 1 MiB can hold 1 GiB)

ProgressFn = Callable[[int, "int | None"], None]


@dataclass
class Stop:
    """Why reading stopped before the end: the sentence, and whether it is an error of the file
    (gzip damaged or cut) rather than a limit."""
    reason: str
    damaged: bool = False
    detail: str = ""       # the decompressor's own words (damaged)
    head: bytes = b""      # the first bytes of an over-long first line (to tell binary from text)


def open_source(source):
    """(binary file, its size or None, its name, whether we opened it)."""
    if isinstance(source, (str, os.PathLike)):
        path = os.fspath(source)
        f = open(path, "rb")
        try:
            total = os.fstat(f.fileno()).st_size
        except OSError:
            total = None
        return f, total, os.path.basename(path), True
    if isinstance(source, (bytes, bytearray, memoryview)):
        data = bytes(source)
        return io.BytesIO(data), len(data), "", True
    if hasattr(source, "read"):
        total = None
        try:   # a seekable file: what is left of it
            pos = source.tell()
            total = source.seek(0, os.SEEK_END) - pos
            source.seek(pos)
        except (AttributeError, OSError, ValueError):
            total = None
        return source, total, str(getattr(source, "name", "") or ""), False
    raise TypeError("a recording is a path, bytes or a binary file object")


def raw_chunks(f, total, progress: ProgressFn | None) -> Iterator[bytes]:
    done = 0
    while True:
        b = f.read(READ)
        if isinstance(b, str):
            raise TypeError("open the recording in binary mode")
        if not b:
            break
        done += len(b)
        yield b
        if progress is not None:
            progress(done, total)


class Unzip:
    """Text from the file's chunks: plain, or gzip with at most `limit` bytes out."""

    def __init__(self, limit: int):
        self.limit = limit
        self.out = 0          # text bytes given
        self.stop: Stop | None = None

    def text(self, chunks: Iterator[bytes]) -> Iterator[bytes]:
        first = b""
        for first in chunks:
            if first:
                break
        if first[:2] == b"\x1f\x8b" or (len(first) == 1 and first == b"\x1f"):
            yield from self._gunzip(first, chunks)
        elif first:
            yield from self._capped(first)
            for c in chunks:
                yield from self._capped(c)
                if self.stop:
                    return

    def _capped(self, data: bytes) -> Iterator[bytes]:
        room = self.limit - self.out
        if len(data) > room:
            data = data[:max(room, 0)]
            self.stop = Stop(f"the recording is over {self.limit / 2**30:g} GiB of text: only its first "
                             f"{self.limit / 2**30:g} GiB are read")
        self.out += len(data)
        if data:
            yield data

    def _gunzip(self, first: bytes, chunks: Iterator[bytes]) -> Iterator[bytes]:
        d = zlib.decompressobj(wbits=31)
        pending = first
        while True:
            if not pending:
                pending = next(chunks, b"")
                if not pending:
                    break
            try:
                if d.eof:   # the next gzip member (or trailing zeros, which gzip also allows)
                    if not pending.strip(b"\x00"):
                        pending = b""
                        continue
                    d = zlib.decompressobj(wbits=31)
                before = d.copy()   # to go back and keep what decompresses before damaged data
                data = d.decompress(pending, UNZIP_STEP)
                pending = d.unconsumed_tail or d.unused_data
            except zlib.error as e:
                yield from self._capped(_up_to_damage(before, pending))
                self.stop = Stop("the file stops early (its gzip data is damaged); what was read is shown", True, str(e))
                return
            if data:
                yield from self._capped(data)
                if self.stop:
                    return
        if not d.eof:
            why = "Compressed file ended before the end-of-stream marker was reached"
            self.stop = Stop("the file stops early (its gzip data is cut short); what was read is shown", True, why)


def _up_to_damage(d, data: bytes, piece: int = 1 << 12) -> bytes:
    """What `data` decompresses to before the damaged byte in it (`d` as it stood before it),
    fed a few KB at a time: zlib raises on the call that meets the damage and gives nothing of
    it, so a call of megabytes lost all of them (a file damaged in its first 4 MiB lost its
    header)."""
    out = []
    for i in range(0, len(data), piece):
        try:
            out.append(d.decompress(data[i:i + piece]))
        except zlib.error:
            break
    return b"".join(out)


def lines_of(text: Iterator[bytes], max_line: int, first_max: int | None = None,
             skipped: list | None = None) -> Iterator[tuple[list[bytes], bytes | None, Stop | None]]:
    """Batches of complete lines (without their newline); the last item carries the tail (text
    after the last newline, or None) or a Stop for a first line over first_max (when given).
    A later line over max_line is left out, and counted in skipped[0] (when given)."""
    carry: list[bytes] = []
    carried = 0
    limit = first_max or max_line
    skipping = False   # inside an over-long line: its bytes are dropped up to its newline
    skipped = skipped if skipped is not None else [0]
    for chunk in text:
        if skipping:
            nl = chunk.find(b"\n")
            if nl < 0:
                continue
            chunk, skipping = chunk[nl + 1:], False
        cut = chunk.rfind(b"\n")
        if cut < 0:
            carry.append(chunk)
            carried += len(chunk)
            if carried >= limit:
                if limit != max_line:   # the first line: not a recording's header
                    yield [], None, _long(limit, b"".join(carry)[:512])
                    return
                skipped[0] += 1
                carry, carried, skipping = [], 0, True
            continue
        head = chunk[:cut]
        if carry:
            carry.append(head)
            head = b"".join(carry)
            carry, carried = [], 0
        try:   # text, in one go for the batch (json then skips decoding each line)
            batch = head.decode("utf-8").split("\n")
        except UnicodeDecodeError:
            batch = head.split(b"\n")
        if limit != max_line and len(batch[0]) >= limit:
            first = batch[0][:512]
            yield [], None, _long(limit, first.encode() if isinstance(first, str) else first)
            return
        limit = max_line
        if len(head) >= max_line and any(len(x) >= max_line for x in batch):
            kept = [x for x in batch if len(x) < max_line]
            skipped[0] += len(batch) - len(kept)
            batch = kept
        rest = chunk[cut + 1:]
        if rest:
            carry, carried = [rest], len(rest)
        yield batch, None, None
    tail = b"".join(carry) if carry else None
    if tail is not None and len(tail) >= limit:
        if limit != max_line:
            yield [], None, _long(limit, tail[:512])
            return
        skipped[0] += 1
        tail = None
    yield [], tail, None


def read_ahead(items: Iterator, depth: int = 4) -> Iterator:
    """`items` made in a thread, at most `depth` ahead (bounded memory): reading and unzipping
    the file, which let go of the GIL, overlap the parsing. Its errors come out here. Close it
    (or read it to the end) to stop the thread."""
    q: queue.Queue = queue.Queue(depth)
    done = threading.Event()

    def put(x) -> bool:
        while not done.is_set():
            try:
                q.put(x, timeout=0.05)
                return True
            except queue.Full:
                continue
        return False

    def run() -> None:
        try:
            for x in items:
                if not put((True, x)):
                    return
            put((False, None))
        except BaseException as e:   # noqa: BLE001 - handed to the reader's thread, raised there
            put((False, e))

    t = threading.Thread(target=run, name="recording-read-ahead", daemon=True)
    t.start()
    try:
        while True:
            more, x = q.get()
            if not more:
                if x is not None:
                    raise x
                return
            yield x
    finally:
        done.set()
        t.join()


def _long(limit: int, head: bytes) -> Stop:
    """A first line over first_max; head: its start (to tell binary from text)."""
    return Stop("first line too long", head=head)


def long_lines_skipped(count: int, max_line: int) -> str:
    """The warning for over-long lines left out."""
    if count == 1:
        return f"a line is over {max_line >> 20} MiB (no recorder line is): it was skipped"
    return f"{count:,} lines are over {max_line >> 20} MiB (no recorder line is): they were skipped"
