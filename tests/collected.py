"""A real log as a user collects it, rewritten here for the page tests (AppTest and Chromium):
`docker logs -t --since ...` of a server run without its own timestamps: the excerpt starts a third
of the way in (tasks already running), and every line carries an RFC 3339 time with nanoseconds."""
from __future__ import annotations

import re
from pathlib import Path

SOURCE = Path(__file__).resolve().parent / "fixtures" / "llama-logs" / "34af94cd9" / "s2_np4_mixed_staggered_seed2201.log"


def docker_excerpt(src: Path = SOURCE) -> bytes:
    ls = src.read_bytes().splitlines(keepends=True)
    ls = [re.sub(rb"^\d+\.\d+\.\d+\.\d+ ", b"", ln) for ln in ls]  # the server's own times off: the prefix's are the clock
    cut = ls[len(ls) // 3:]
    return b"".join(b"2026-11-30T08:%02d:%02d.%09dZ " % (i // 6000 % 60, i // 100 % 60, i % 100 * 10_000_000) + ln
                    for i, ln in enumerate(cut))
