"""The server's data folder (SCHEDLAB_DATA_DIR): files bigger than a browser upload, opened from
the server's side.

    folder = data_folder()                    # None when the server was started without one
    listing = list_files(folder, kinds=RECORDINGS)
    path = resolve(folder, listing, name)     # a name the visitor picked from the listing

A visitor never types a path: a page offers the names of `list_files` (a selectbox) and opens
one with `resolve`, which takes only a name from that listing, resolves it and checks that it
stays inside the folder (no `..`, no absolute path, no symlink that leads out). Only regular
files directly in the folder are listed (no subfolders: nothing to walk). A folder of thousands
of files lists the `limit` newest by mtime, saying how many were left out; os.scandir reads each
entry's type and times in one system call per entry, so 5,000 files list in milliseconds.
No Streamlit here: a page draws the listing (a selectbox of its names).
"""
from __future__ import annotations

import heapq
import os
from dataclasses import dataclass, field
from pathlib import Path

ENV = "SCHEDLAB_DATA_DIR"
LIMIT = 200   # names offered at most (a selectbox of thousands helps nobody)
# what each page opens, by the end of the file's name (lower case); .gz of each too
RECORDINGS = (".jsonl", ".jsonl.gz", ".json", ".json.gz")
LOGS = (".log", ".log.gz", ".txt", ".txt.gz")
TRACES = (".trace", ".trace.gz")
ANY = RECORDINGS + LOGS + TRACES
MAX_NAME = 255   # a longer name is no file name on Linux


@dataclass(frozen=True)
class Entry:
    name: str      # the file's name in the folder (shown as plain text, never as HTML)
    size: int      # bytes
    mtime: float   # Unix seconds


@dataclass(frozen=True)
class Listing:
    folder: Path
    entries: tuple[Entry, ...] = ()   # newest first
    left_out: int = 0                 # matching files not listed (over the limit)
    names: frozenset = field(default=frozenset(), repr=False)

    def note(self) -> str:
        """One sentence on what is not listed ('' when everything is)."""
        if not self.left_out:
            return ""
        return (f"{self.left_out:,} older file(s) are not listed: the {len(self.entries):,} newest are. "
                "Move old files out of the folder to see them.")


def data_folder(environ=os.environ) -> Path | None:
    """The folder the server was started with, resolved; None when unset, missing or no folder."""
    raw = environ.get(ENV, "").strip()
    if not raw:
        return None
    try:
        p = Path(raw).expanduser().resolve(strict=True)
    except (OSError, RuntimeError):
        return None
    return p if p.is_dir() else None


def _kind_ok(name: str, kinds: tuple[str, ...]) -> bool:
    low = name.lower()
    return any(low.endswith(k) for k in kinds)


def list_files(folder: Path, kinds: tuple[str, ...] = ANY, limit: int = LIMIT) -> Listing:
    """The newest `limit` regular files in `folder` whose names end in one of `kinds`. Symlinks
    are listed only when they lead to a regular file inside the folder; hidden files (a leading
    dot: editors' and rsync's temporaries) are not listed."""
    folder = Path(folder)
    found: list[tuple[float, str, int]] = []
    try:
        it = os.scandir(folder)
    except OSError:
        return Listing(folder)
    with it:
        for e in it:
            name = e.name
            if name.startswith(".") or len(name) > MAX_NAME or not _kind_ok(name, kinds):
                continue
            try:
                if e.is_symlink():
                    if _inside(folder, Path(e.path)) is None:
                        continue
                if not e.is_file():   # follows a symlink already checked to stay inside
                    continue
                st = e.stat()
            except OSError:
                continue
            found.append((st.st_mtime, name, st.st_size))
    # newest first, ties by name: the same folder lists the same way every time
    top = heapq.nsmallest(limit, found, key=lambda x: (-x[0], x[1])) if limit >= 0 else []
    entries = tuple(Entry(name, size, mtime) for mtime, name, size in top)
    return Listing(folder, entries, len(found) - len(entries), frozenset(e.name for e in entries))


def _inside(folder: Path, p: Path) -> Path | None:
    """p resolved, when it is a regular file directly in the folder (after every symlink)."""
    try:
        real = p.resolve(strict=True)
        root = folder.resolve(strict=True)
    except (OSError, RuntimeError):   # missing, or a symlink loop
        return None
    if real.parent != root or not real.is_file():
        return None
    return real


def resolve(folder: Path, listing: Listing, name) -> Path:
    """The file `name` names, when it is one the listing offered and still a regular file inside
    the folder; ValueError with one plain sentence otherwise (a name never listed, a file gone
    or replaced by a symlink out since the listing)."""
    if not isinstance(name, str) or name not in listing.names or "/" in name or "\x00" in name \
            or name in (".", ".."):
        raise ValueError("that file is not in the data folder's listing: pick one from the list")
    real = _inside(Path(folder), Path(folder) / name)
    if real is None:
        raise ValueError("that file is no longer a file inside the data folder (moved, deleted or a link "
                         "that leads outside): pick another")
    return real


def size_text(n: int) -> str:
    """A file size for the listing: 1.2 MB, 340 kB, 12 B."""
    for unit, k in (("GB", 1e9), ("MB", 1e6), ("kB", 1e3)):
        if n >= k:
            return f"{n / k:,.1f} {unit}"
    return f"{n} B"
