"""The cyclic garbage collector paused while a recording is read (see no_gc)."""
from __future__ import annotations

import gc
import threading
from contextlib import contextmanager

_paused = [0]
_pause_lock = threading.Lock()


@contextmanager
def no_gc():
    """The cyclic garbage collector paused while lines are read: reading makes millions of
    short-lived lists and dicts and keeps a growing heap of acyclic ones, and the collector's
    passes over that heap took a fifth of the reading time (150k steps: 1.2 s of 6). Nothing
    read makes a cycle. Counted, so that readers in several threads resume it once, at the end."""
    with _pause_lock:
        _paused[0] += 1
        if _paused[0] == 1:
            _paused.append(gc.isenabled())
            gc.disable()
    try:
        yield
    finally:
        with _pause_lock:
            _paused[0] -= 1
            if _paused[0] == 0 and _paused.pop():
                gc.enable()
