"""The log as blocks of whole lines, from a path, bytes, a stream (gzip too) or a list of lines.

The reader never holds all the lines at once: it takes a block of a few MB, reads the whole lines
in it and carries the cut last line over to the next block (Blocks). A gzip stream is inflated
block by block (gunzip_into). From a binary stream, with the C tokenizer, a second thread reads
and tokenizes each block while the reader works through the one before (prefetched_blocks).
What these functions need of the reader: feed(bytes), room(n)/took(n) (read into its buffer),
_scan(), _warn(), and its blocks, families and nbytes.
"""
from __future__ import annotations

import io
import queue
import threading
import zlib
from typing import Callable, Iterable

from . import native
from .lines import LOOSE

BLOCK_SIZE = 4 << 20          # bytes read per block
MAX_LINE = 16 << 20           # a "line" longer than this is dropped (binary garbage, no newlines)

ProgressFn = Callable[[int, int | None], None]


class Blocks:
    """The log cut into blocks of whole lines. `buf` holds a line end (not part of the log), the
    carry (the start of a line whose end has not come yet), then the bytes just read; took()
    says how much of it is whole lines, next() starts the following block. The reader uses one
    buffer over and over (a fresh multi-MB object per block costs its page faults, about as much
    as reading the block); the prefetching thread (prefetched_blocks) hands each block over and
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


def gunzip_into(read, block: int, reader, progress, total, first: bytes = b"") -> None:
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
                # the end of a member first: when a member ends inside a call bounded by
                # max_length, zlib leaves the input after it in unconsumed_tail AND in
                # unused_data, and feeding that tail to the finished object again only grows
                # unused_data (a loop without end on `cat a.gz b.gz`; found by tests/fuzz_inputs.py)
                if d.eof:
                    if not d.unused_data:
                        break
                    rest = d.unused_data
                    d = zlib.decompressobj(31)
                    out = d.decompress(rest, block)
                elif d.unconsumed_tail:
                    out = d.decompress(d.unconsumed_tail, block)
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


def prefetched_blocks(into, block: int, reader, scan, progress, total, done: int) -> None:
    """blocks_from_stream for a binary stream with the C tokenizer: a thread reads each block
    and runs the tokenizer on it while the reader's state machine works through the blocks
    before it (readinto and the C call let go of the GIL, so the two overlap on two cores).
    The thread cuts the blocks with the reader's own Blocks, in three buffers taken in turn,
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
                    buf = blocks.buf
                    # prefixes off (the carry, after the old end, stays where it is), then the scan
                    end, scanned = reader.prepare(buf, end, reader.families is not LOOSE)
                    blocks.next()   # the carry goes on in the next buffer; this one is the reader's
                    ready.put((n, notes[:], buf, end, scanned))
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


def blocks_from_stream(f, block: int, reader, progress, total, pos_fn, start: int = 0) -> None:
    done = start
    into = getattr(f, "readinto", None) if isinstance(f, (io.BufferedIOBase, io.RawIOBase)) else None
    scan = native.llamascan() if reader.native and into is not None else None
    if scan is not None:
        prefetched_blocks(into, block, reader, scan, progress, total, done)
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


def feed_bytes(reader, data: bytes, block: int, progress) -> None:
    if data[:2] == b"\x1f\x8b":
        view = memoryview(data)
        pos = [0]

        def read(n):
            chunk = bytes(view[pos[0]:pos[0] + n])
            pos[0] += len(chunk)
            return chunk
        gunzip_into(read, 1 << 20, reader, progress, len(data))
        return
    total = len(data)
    for i in range(0, total, block):
        reader.feed(data[i:i + block])
        if progress is not None:
            progress(min(i + block, total), total)
    if not total and progress is not None:
        progress(0, 0)


def feed_lines(reader, lines: Iterable, block: int, progress) -> None:
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
