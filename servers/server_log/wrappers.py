"""What collectors put around an engine's own line, recognised (not required): the engine's record
is searched for anywhere in the line, and the text before it is classified here, for the
verdict and, where it holds one, for the year the engine itself does not print.

- docker `--timestamps` / `kubectl logs --timestamps`: an RFC 3339 time (`2026-05-12T08:01:39.33Z `);
- journald (`journalctl`): `Aug 17 10:00:00 host unit[pid]: ` (no year);
- Ray and SkyPilot: `(pid=N) `, `(RayWorkerWrapper pid=N, ip=...) `, `(head, rank=0, pid=N) `;
  and Ray's de-duplication suffix ` [repeated Nx across cluster]`;
- tqdm progress bars glued before a line (`... 2.74it/s]`, `100%|####|`);
- vLLM's own process label `(APIServer pid=N) ` is the engine's, not a wrapper (not reported).
"""
from __future__ import annotations

import re

RFC3339 = re.compile(r"(?P<y>\d{4})-(?P<mo>\d\d)-(?P<d>\d\d)T\d\d:\d\d:\d\d(?:\.\d{1,9})?(?:Z|[+-]\d\d:?\d\d)\s")
JOURNALD = re.compile(r"(?:Jan|Feb|Mar|Apr|May|Jun|Jul|Aug|Sep|Oct|Nov|Dec) [ \d]\d \d\d:\d\d:\d\d(?:\.\d{1,6})? \S+ [^\s:]+: ")
PAREN = re.compile(r"\((?P<label>[^()\n]{0,80}?)pid=\d+[^()\n]{0,60}\)\s?")
TQDM = re.compile(r"\d+(?:\.\d+)?\s?(?:it|s)/(?:s|it)\]|\d+%\||it \[\d")
REPEATED = re.compile(r"\s*\[repeated (?P<n>\d{1,9})x across cluster\]\s*$")
ENGINE_LABELS = ("APIServer", "EngineCore", "VllmWorker", "Worker")

NAMES = {"rfc3339": "docker/kubectl --timestamps (RFC 3339)", "journald": "journald",
         "ray": "Ray / SkyPilot (pid=N)", "tqdm": "tqdm bar glued before a line", "other": "other text before lines",
         "repeated": "Ray [repeated Nx across cluster]", "ansi": "ANSI colour codes",
         "cr": "carriage returns (tqdm redraws)", "wrap": "terminal hard wrap (lines rejoined)",
         "long": "over-long lines (cut at 64 KB)"}


def take_repeated(text: str) -> tuple[str, int]:
    """(the line without Ray's ` [repeated Nx across cluster]`, N) or (line, 1)."""
    if "repeated" in text:
        m = REPEATED.search(text)
        if m:
            return text[:m.start()], int(m["n"])
    return text, 1


def classify(prefix: str, seen: set[str]) -> int | None:
    """Add the kinds of wrapper in `prefix` (text before a record) to `seen`; the year it shows, if any."""
    if not prefix.strip():
        return None
    year = None
    rest = prefix
    m = RFC3339.search(rest)
    if m:
        seen.add("rfc3339")
        year = int(m["y"])
        rest = rest[:m.start()] + rest[m.end():]
    m = JOURNALD.search(rest)
    if m:
        seen.add("journald")
        rest = rest[:m.start()] + rest[m.end():]
    for m in list(PAREN.finditer(rest)):
        if not m["label"].strip().startswith(ENGINE_LABELS):
            seen.add("ray")
    rest = PAREN.sub("", rest)
    if TQDM.search(rest):
        seen.add("tqdm")
    elif rest.strip() and not re.fullmatch(r"\s*(?:INFO|DEBUG|WARNING)?[:\s]*", rest):
        seen.add("other")
    return year
