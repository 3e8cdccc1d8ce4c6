"""The log reader's native tokenizer (llamascan.c, beside it), built on first use and loaded with ctypes.

Nothing here is needed for correctness: without a C compiler the reader uses its regular
expressions and gives the same Trace (the reader's tests parse every input both ways). The
compiled library is cached per source hash in $SCHEDLAB_CACHE (default ~/.cache/schedlab, else a
per-user folder in the temp directory), so a machine compiles it once; only a folder and library
this user alone can write are loaded. SCHEDLAB_NATIVE=0 turns it off.

    scan = llamascan()            # None when unavailable; why_unavailable() says why
    records, loadm = scan(data, end, guarded)     # rows(records) -> (kind, start, a, b, c, e, ts)
    build_lines, llama_lines = llamagates()(data, end)   # the start-up lines' candidates
    end = llamastrip()(buf, end, state)  # collectors' line prefixes off (prefixes.strip_block)
"""
from __future__ import annotations

import ctypes
import hashlib
import os
import shutil
import struct
import subprocess
import tempfile
import threading
from pathlib import Path

import numpy as np

SOURCE = Path(__file__).with_name("llamascan.c")
CFLAGS = ["-O2", "-shared", "-fPIC", "-ffp-contract=off"]   # no FMA: stamps must equal Python's doubles

# record kinds, as in llamascan.c
K_TOK, K_DEC, K_POST, K_EFF, K_YDONE, K_DBATCH, K_RUNS = range(1, 8)
K_IGN_SLOT, K_IGN_SRV, K_SLOW_SLOT, K_SLOW_SRV, K_SLOW_QUE = range(8, 13)

_lock = threading.Lock()
_state: dict = {}


def _cache_dirs() -> list[Path]:
    env = os.environ.get("SCHEDLAB_CACHE")
    if env:
        return [Path(env)]
    uid = os.getuid() if hasattr(os, "getuid") else 0
    return [Path.home() / ".cache" / "schedlab", Path(tempfile.gettempdir()) / f"schedlab-{uid}"]


def _ours(path: Path) -> bool:
    """Only a directory or library this user owns and nobody else may write is trusted: a
    library planted in a shared temp directory would run inside the dashboard."""
    try:
        st = path.stat()
    except OSError:
        return False
    mine = not hasattr(os, "getuid") or st.st_uid == os.getuid()
    return mine and not st.st_mode & 0o022


def _compiler() -> str | None:
    for cc in (os.environ.get("CC"), "cc", "gcc", "clang"):
        if cc and shutil.which(cc):
            return cc
    return None


def _build() -> tuple[ctypes.CDLL | None, str]:
    src = SOURCE.read_bytes()
    tag = hashlib.sha256(src + " ".join(CFLAGS).encode()).hexdigest()[:16]
    for d in _cache_dirs():
        lib = d / f"llamascan-{tag}.so"
        if lib.exists() and _ours(d) and _ours(lib):
            try:
                return ctypes.CDLL(str(lib)), ""
            except OSError:
                pass
    cc = _compiler()
    if cc is None:
        return None, "no C compiler (cc, gcc or clang) on PATH"
    err = ""
    for d in _cache_dirs():
        try:
            d.mkdir(mode=0o700, parents=True, exist_ok=True)
            if not _ours(d):
                err = f"{d} is not this user's alone"
                continue
            fd, tmp = tempfile.mkstemp(suffix=".so", dir=d)
            os.close(fd)
        except OSError as e:
            err = f"cannot write to {d}: {e}"
            continue
        try:
            res = subprocess.run([cc, *CFLAGS, "-o", tmp, str(SOURCE)], capture_output=True, text=True,
                                 timeout=120)
            if res.returncode != 0:
                return None, f"{cc} failed: {res.stderr.strip()[:300]}"
            lib = d / f"llamascan-{tag}.so"
            os.chmod(tmp, 0o700)   # the linker's mode follows the umask
            os.replace(tmp, lib)   # atomic: a concurrent build of the same source lands the same file
            return ctypes.CDLL(str(lib)), ""
        except (OSError, subprocess.SubprocessError) as e:
            err = f"building with {cc} failed: {e}"
        finally:
            if os.path.exists(tmp):
                os.unlink(tmp)
    return None, err


def _load():
    with _lock:
        if "scan" in _state:
            return _state["scan"]
        fn = None
        if os.environ.get("SCHEDLAB_NATIVE", "1") == "0":
            _state["why"] = "turned off (SCHEDLAB_NATIVE=0)"
        else:
            lib, _state["why"] = _build()
            if lib is not None:
                fn = lib.llamascan
                p = ctypes.c_void_p
                fn.argtypes = [ctypes.c_void_p, ctypes.c_int64, ctypes.c_int64, ctypes.c_int32, ctypes.c_int64, p, p]
                fn.restype = ctypes.c_int64
                gates = lib.llamagates
                gates.argtypes = [ctypes.c_void_p, ctypes.c_int64, ctypes.c_int64, p, p, p]
                gates.restype = ctypes.c_int64
                _state["gates"] = _wrap_gates(gates)
                strip = lib.llamastrip
                strip.argtypes = [ctypes.c_void_p, ctypes.c_int64, p]
                strip.restype = ctypes.c_int64
                _state["strip"] = _wrap_strip(strip)
        _state["scan"] = _wrap(fn) if fn is not None else None
        return _state["scan"]


def _pointer(data):
    """bytes as they are; a bytearray (the reader's reused block buffer) through a ctypes view."""
    return (ctypes.c_char * len(data)).from_buffer(data) if isinstance(data, bytearray) else data


RECORD = struct.Struct("=6qd")   # llamascan.c's out_t: kind, start, a, b, c, e, ts


def _wrap(fn):
    def scan(data, end: int, guarded: bool, detect: bool = False):
        """(records, loadm): records an (n, 7) int64 array, one row per record (ts as a double's
        bits); iterate rows(records) for tuples. detect: None instead, as soon as a line may carry
        a collector's prefix (then llamastrip, and scan again)."""
        cap = end // 128 + 1024
        stats = np.zeros(2, np.int64)
        while True:
            out = np.empty((cap, 7), np.int64)
            stats[1] = detect
            k = fn(_pointer(data), len(data), end, int(guarded), cap, out.ctypes.data, stats.ctypes.data)
            if k >= 0:
                return out[:k], int(stats[0])
            if k == -2:
                return None
            cap *= 4
    return scan


def rows(records: np.ndarray):
    """The records as tuples (kind, start, a, b, c, e, ts), straight from the C rows."""
    return RECORD.iter_unpack(records.data)


def _wrap_gates(fn):
    def gates(data: bytes, end: int):
        cap = 4096
        while True:
            ls, le, ng = np.empty(cap, np.int64), np.empty(cap, np.int64), np.zeros(2, np.int64)
            if fn(_pointer(data), end, cap, ls.ctypes.data, le.ctypes.data, ng.ctypes.data) >= 0:
                break
            cap *= 8
        h = cap // 2
        return [list(zip(ls[g * h:g * h + ng[g]].tolist(), le[g * h:g * h + ng[g]].tolist())) for g in (0, 1)]
    return gates


def _wrap_strip(fn):
    def strip(buf: bytearray, end: int, state: np.ndarray) -> int:
        """prefixes.strip_block in C: buf (a bytearray) changed in place, state updated."""
        return fn(_pointer(buf), end, state.ctypes.data)
    return strip


def llamastrip():
    """strip(buf, end, state) -> the end of the text left, or None."""
    llamascan()
    return _state.get("strip")


def llamagates():
    """lines(data, end) -> [[(line start, line end or -1)] for "build", for "llama_"], or None."""
    llamascan()
    return _state.get("gates")


def llamascan():
    """The native scan function, or None (then the reader's regexes do the work)."""
    return _state["scan"] if "scan" in _state else _load()


def why_unavailable() -> str:
    llamascan()
    return _state.get("why", "")


def reset() -> None:
    """Forget the loaded library (tests switch SCHEDLAB_NATIVE)."""
    with _lock:
        _state.clear()
