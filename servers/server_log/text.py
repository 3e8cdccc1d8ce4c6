"""The input as text lines: a path, bytes or a binary stream, plain or gzip (by its magic bytes,
whatever the name), read line by line with hard limits, so no input can exhaust memory or time.

- at most MAX_BYTES of (unzipped) text are read: a gzip bomb or a huge file is a partial read,
  said in `Source.warnings`, never an error;
- a physical line longer than MAX_LINE is cut there (the rest is skipped unread into memory) and
  counted: a real scheduler line is a few hundred characters;
- bytes are decoded as UTF-8 with errors="replace"; NUL bytes are counted (a binary file);
- a damaged or cut gzip stream ends the read at the damage, with a warning;
- `Source.progress`, when set, is told progress(done, total): the bytes of the file read
  (compressed bytes of a gzip) and its size (None for a stream that cannot tell), about every MiB
  and once at the end (done == total there), as servers/vllm's reader tells it.

`logical_lines()` then splits each physical line at carriage returns (tqdm redraws its bar with
`\\r`, so a scheduler line may follow a bar on the same physical line) and takes ANSI colour codes
(and their residue when the escape byte was lost in a paste, `[32m`) off.
"""
from __future__ import annotations

import gzip
import io
import os
import re
import zlib
from dataclasses import dataclass, field
from typing import Callable

MAX_BYTES = 512 << 20        # unzipped text read at most (a 1 GiB bomb stops here)
MAX_LINE = 64 << 10          # a physical line's characters kept
HEAD_BYTES = 4 << 20         # what the detector looks at
# the codes, and their residue where a paste lost the escape byte (or CloudWatch wrote it as `#033`)
_ANSI = re.compile(r"\x1b\[[0-9;?]*[ -/]*[@-~]|\x1b[()][A-Za-z0-9]|\x1b[=>78]|(?:#033)?\[\d{1,3}(?:;\d{1,3}){0,4}m")


@dataclass
class Source:
    """What was read and what went wrong (filled while the lines are read)."""
    name: str = ""
    bytes_read: int = 0
    physical_lines: int = 0
    long_lines: int = 0
    nul_lines: int = 0
    ansi_lines: int = 0
    cr_lines: int = 0
    gzip: bool = False
    complete: bool = True
    warnings: list[str] = field(default_factory=list)
    progress: Callable[[int, int | None], None] | None = field(default=None, repr=False, compare=False)


PROGRESS_EVERY = 1 << 20    # bytes of text between two progress calls


def read_head(src, limit: int = HEAD_BYTES) -> bytes:
    """The first `limit` bytes of text of the input (unzipped), for the detector; b"" if unreadable."""
    try:
        stream, _ = _open(src)
    except OSError:
        return b""
    parts, n = [], 0
    try:
        while n < limit:      # in pieces: a cut gzip stream still gives what came before the cut
            piece = stream.read(min(1 << 16, limit - n))
            if not piece:
                break
            parts.append(piece)
            n += len(piece)
    except (OSError, EOFError, zlib.error):
        pass
    finally:
        _close(src, stream)
    return b"".join(parts)


def _raw_stream(src):
    if isinstance(src, (bytes, bytearray, memoryview)):
        return io.BytesIO(bytes(src))
    if isinstance(src, (str, os.PathLike)):
        return open(src, "rb")
    return src   # a binary file object


def _open(src):
    return _open_raw(src)[:2]


def _open_raw(src):
    """(the text stream, whether it is gzip, the file's own stream under it)."""
    raw = _raw_stream(src)
    magic = raw.peek(2)[:2] if hasattr(raw, "peek") else None
    if magic is None:
        pos = raw.tell()
        magic = raw.read(2)
        raw.seek(pos)
    if magic == b"\x1f\x8b":
        return gzip.GzipFile(fileobj=raw, mode="rb"), True, raw
    return raw, False, raw


def _size(src, raw) -> int | None:
    """The file's size in bytes, None when its stream cannot say."""
    if isinstance(src, (bytes, bytearray, memoryview)):
        return len(src)
    try:
        return os.fstat(raw.fileno()).st_size
    except (AttributeError, OSError, ValueError, io.UnsupportedOperation):
        return None


def _position(raw, fallback: int) -> int:
    try:
        return int(raw.tell())
    except (AttributeError, OSError, ValueError, io.UnsupportedOperation):
        return fallback


def _close(src, stream) -> None:
    if isinstance(src, (str, os.PathLike)):
        try:
            stream.close()
        except OSError:
            pass


def physical_lines(src, source: Source, max_bytes: int | None = None):
    """(line number from 1, text) for each physical line; limits and damage go into `source`."""
    max_bytes = max_bytes or MAX_BYTES
    try:
        stream, source.gzip, raw_file = _open_raw(src)
    except OSError as e:
        source.complete = False
        source.warnings.append(f"cannot open the file: {e.strerror or e}")
        return
    progress = source.progress
    total = _size(src, raw_file) if progress is not None else None
    done = 0
    next_at = PROGRESS_EVERY
    try:
        while True:
            if progress is not None and source.bytes_read >= next_at:
                next_at = source.bytes_read + PROGRESS_EVERY
                now = _position(raw_file, source.bytes_read)
                if now > done:
                    done = now
                    progress(done, total)
            if source.bytes_read >= max_bytes:
                source.complete = False
                source.warnings.append(f"only the first {max_bytes >> 20} MB of text were read; the rest of the "
                                       "file was not")
                return
            try:
                raw = stream.readline(MAX_LINE)
                if raw and not raw.endswith(b"\n") and len(raw) >= MAX_LINE:
                    source.long_lines += 1
                    while True:   # skip the rest of an over-long line without keeping it
                        more = stream.readline(1 << 20)
                        source.bytes_read += len(more)
                        if not more or more.endswith(b"\n") or source.bytes_read >= max_bytes:
                            break
            except (OSError, EOFError, zlib.error) as e:
                source.complete = False
                what = "the gzip stream is damaged or cut" if source.gzip else "the file could not be read to its end"
                source.warnings.append(f"{what} after {source.bytes_read / 1e6:,.1f} MB ({type(e).__name__}); "
                                       "what came before was read")
                return
            if not raw:
                return
            source.bytes_read += len(raw)
            source.physical_lines += 1
            if b"\x00" in raw:
                source.nul_lines += 1
                raw = raw.replace(b"\x00", b"")
            yield source.physical_lines, raw.decode("utf-8", errors="replace").rstrip("\r\n")
    finally:
        if progress is not None:
            progress(total if total is not None else max(done, _position(raw_file, source.bytes_read)), total)
        _close(src, stream)


def clean(text: str, source: Source | None = None) -> str:
    """A line without ANSI colour codes (or their residue)."""
    if "\x1b" in text or "m" in text and "[" in text:
        out = _ANSI.sub("", text)
        if out != text and source is not None:
            source.ansi_lines += 1
        return out
    return text


def logical_lines(src, source: Source, max_bytes: int | None = None):
    """(physical line number, text) per logical line: split at carriage returns, colours off."""
    for no, text in physical_lines(src, source, max_bytes):
        if "\r" in text:
            source.cr_lines += 1
            for part in text.split("\r"):
                if part.strip():
                    yield no, clean(part, source)
            continue
        yield no, clean(text, source)
