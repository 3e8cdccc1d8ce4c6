"""Line prefixes added by the tools a server runs under, recognised and stripped line by line.

People collect llama-server's output through other programs, and each puts its own text before
every line (mixed in one file too, e.g. logs of two collectors pasted together):
- `docker logs -t`, `kubectl logs --timestamps`: an RFC 3339 time, any fraction of a second (Go's
  RFC3339Nano trims trailing zeros, so the width varies line to line), `Z` or `+hh:mm`, a space:
  `2026-08-17T10:00:00.123456789Z slot ...`;
- journald (`journalctl`'s short and short-precise formats): `Aug 17 10:00:00 host unit[pid]: `
  (no year; the day space- or zero-padded);
- llama-server's router mode (and other supervisors) before a child's lines: `[pid] `, here
  before the child's own `M.SS.mmm.uuu L ` prefix;
- LM Studio's developer log: a space before a line of the engine's (after its own
  `YYYY-MM-DD HH:MM:SS [LEVEL]` header line, which, like its own messages and ollama's
  `time=... level=... msg=...` lines, holds no record and is left as it is).
strip_block() takes them off each line of a block, in place, before the line families are looked
for, so every record is found where the server's own text begins. When the server printed no
timestamps of its own (its lines begin with `slot `/`srv  `/`que  ` right after the prefix), the
prefix's time becomes the clock: such a line gets the server's prefix `M.SS.mmm.uuu I `, counted
from the first prefixed line, so the reader times it as any other. Which way a log goes is
decided by its first prefixed scheduler line, and a prefix of another kind than the first never
gives a time (two clocks cannot be told apart).

The C tokenizer has the same function (llamastrip in llamascan.c): both give the same bytes, and
the reader's tests compare them. The state (what was decided, the clock's origin, the kinds seen)
is an int64 array that both read and update, block after block.
"""
from __future__ import annotations

import datetime
import re

import numpy as np

# the state array: the decision, the clock's origin, and the kinds of prefix seen
MODE, HAS_ORIGIN, ORIGIN_US, ORIGIN_STYLE, STYLES, STRIPPED = range(6)
STATE_SIZE = 6
UNDECIDED, SERVER_CLOCK, PREFIX_CLOCK = 0, 1, 2
RFC3339, JOURNALD, PID, SPACE = 1, 2, 4, 8
STYLE_NAMES = {RFC3339: "docker/kubectl RFC 3339 time", JOURNALD: "journald", PID: "[pid]",
               SPACE: "leading space (LM Studio)"}

_MONTHS = (b"Jan", b"Feb", b"Mar", b"Apr", b"May", b"Jun", b"Jul", b"Aug", b"Sep", b"Oct", b"Nov", b"Dec")
_CUM_DAYS = (0, 31, 59, 90, 120, 151, 181, 212, 243, 273, 304, 334)   # journald has no year: 365 days
_DAY_US = 86_400_000_000
_MAX_MINUTES = 999_999          # the server's prefix has at most 6 digits of minutes

# lines that may carry a prefix (a superset, found fast; PREFIX decides)
_GATE = re.compile(rb"\n(?=\d{4}-\d\d-\d\dT|(?:" + b"|".join(_MONTHS) + rb") [ \d]\d \d\d:|\[\d"
                   rb"| (?:slot |srv  |que  |\d))")
_PREFIX = re.compile(
    rb"(?:(?P<rfc>(?P<y>\d{4})-(?P<mo>\d\d)-(?P<d>\d\d)T(?P<h>\d\d):(?P<mi>\d\d):(?P<s>\d\d)(?:\.(?P<f>\d{1,9}))?"
    rb"(?:Z|(?P<zs>[+-])(?P<zh>\d\d):(?P<zm>\d\d)) )"
    rb"|(?P<jd>(?P<jmo>" + b"|".join(_MONTHS) + rb") (?P<jd1>[ \d])(?P<jd2>\d) (?P<jh>\d\d):(?P<jmi>\d\d):(?P<js>\d\d)"
    rb"(?:\.(?P<jf>\d{1,6}))? [^ \n]{1,64} [^ \n\[:]{1,64}(?:\[\d{1,10}\])?: ))?"
    rb"(?P<pid>\[\d{1,10}\] )?"
    rb"(?P<sp> (?=slot |srv  |que  |\d{1,6}\.\d\d\.\d\d\d\.\d\d\d [A-Z] ))?")
_SERVER_TS = re.compile(rb"\d{1,6}\.\d\d\.\d\d\d\.\d\d\d [A-Z] ")
_FAMILIES = (b"slot ", b"srv  ", b"que  ")


def new_state() -> np.ndarray:
    return np.zeros(STATE_SIZE, np.int64)


def days_from_civil(y: int, m: int, d: int) -> int:
    """Days since 1970-01-01 of a proleptic Gregorian date (the same integer steps as llamascan.c)."""
    y -= m <= 2
    era = (y if y >= 0 else y - 399) // 400
    yoe = y - era * 400
    doy = (153 * (m - 3 if m > 2 else m + 9) + 2) // 5 + d - 1
    return era * 146097 + yoe * 365 + yoe // 4 - yoe // 100 + doy - 719468


def _fraction_us(f) -> int:
    return int((f + b"000000")[:6]) if f else 0   # nanoseconds and finer: cut to microseconds


def _rfc3339_us(m):
    """UTC microseconds since 1970 of a matched RFC 3339 time, or None if a field is out of range."""
    y, mo, d = int(m["y"]), int(m["mo"]), int(m["d"])
    h, mi, s = int(m["h"]), int(m["mi"]), int(m["s"])
    if not (1 <= mo <= 12 and 1 <= d <= 31 and h <= 23 and mi <= 59 and s <= 60):
        return None
    off = 0
    if m["zs"] is not None:
        zh, zm = int(m["zh"]), int(m["zm"])
        if zh > 23 or zm > 59:
            return None
        off = (zh * 3600 + zm * 60) * (1 if m["zs"] == b"+" else -1)
    return (days_from_civil(y, mo, d) * 86400 + h * 3600 + mi * 60 + s - off) * 1_000_000 + _fraction_us(m["f"])


def _journald_us(m):
    """Microseconds since Jan 1 (00:00, local time) of a matched journald time, or None."""
    mon = _MONTHS.index(m["jmo"])
    d1 = m["jd1"]
    day = (0 if d1 == b" " else int(d1)) * 10 + int(m["jd2"])
    h, mi, s = int(m["jh"]), int(m["jmi"]), int(m["js"])
    if not (1 <= day <= 31 and h <= 23 and mi <= 59 and s <= 60):
        return None
    return ((_CUM_DAYS[mon] + day - 1) * 86400 + h * 3600 + mi * 60 + s) * 1_000_000 + _fraction_us(m["jf"])


def server_prefix(rel_us: int) -> bytes:
    """The server's own `M.SS.mmm.uuu I ` prefix for a time rel_us after the clock's origin."""
    minutes, rest = divmod(rel_us, 60_000_000)
    return b"%d.%02d.%03d.%03d I " % (minutes, rest // 1_000_000, rest // 1000 % 1000, rest % 1000)


def strip_block(buf: bytearray, end: int, st: np.ndarray) -> int:
    """Take the recognised prefixes off every line of buf[:end] (buf[0] is a line end, buf[:end]
    ends with one), in place; returns the end of the text left. st: the state (new_state()),
    updated. The reference for llamascan.c's llamastrip."""
    mode, has_origin, origin, ostyle, styles, stripped = (int(v) for v in st)
    parts = []
    last = 0
    for g in _GATE.finditer(buf, 0, end):
        ls = g.start() + 1
        m = _PREFIX.match(buf, ls, end)
        pe = m.end()
        if pe == ls:
            continue
        outer, t_us = 0, 0
        if m["rfc"] is not None:
            outer, t_us = RFC3339, _rfc3339_us(m)
        elif m["jd"] is not None:
            outer, t_us = JOURNALD, _journald_us(m)
            if t_us is not None and has_origin and ostyle == JOURNALD and t_us < origin - 182 * _DAY_US:
                t_us += 365 * _DAY_US   # the year turned (journald prints none)
        if t_us is None:
            continue   # not a time after all: the line is left as it is
        styles |= outer | (PID if m["pid"] is not None else 0) | (SPACE if m["sp"] is not None else 0)
        stripped += 1
        if outer and not has_origin:
            has_origin, origin, ostyle = 1, t_us, outer
        synth = b""
        if buf.startswith(_FAMILIES, pe):   # the server printed no time of its own
            if outer and mode == UNDECIDED:
                mode = PREFIX_CLOCK
            if mode == PREFIX_CLOCK and outer == ostyle and 0 <= t_us - origin \
                    and (t_us - origin) // 60_000_000 <= _MAX_MINUTES:
                synth = server_prefix(t_us - origin)
        elif outer and mode == UNDECIDED and _SERVER_TS.match(buf, pe, end):
            mode = SERVER_CLOCK
        parts.append(buf[last:ls])
        if synth:
            parts.append(synth)
        last = pe
    st[:] = (mode, has_origin, origin, ostyle, styles, stripped)
    if not parts:
        return end
    parts.append(buf[last:end])
    new = b"".join(parts)
    buf[:len(new)] = new
    return len(new)


def styles_seen(st: np.ndarray) -> list[str]:
    return [name for bit, name in STYLE_NAMES.items() if int(st[STYLES]) & bit]


def clock_from_prefix(st: np.ndarray) -> bool:
    return int(st[MODE]) == PREFIX_CLOCK


def origin_text(st: np.ndarray) -> str:
    """The clock's origin, as the first prefixed line gave it."""
    us = int(st[ORIGIN_US])
    if int(st[ORIGIN_STYLE]) == RFC3339:
        t = datetime.datetime(1970, 1, 1) + datetime.timedelta(microseconds=us)
        return t.strftime("%Y-%m-%dT%H:%M:%S.%fZ")
    day, rest = divmod(us, _DAY_US)
    mon = max(i for i, c in enumerate(_CUM_DAYS) if c <= day % 365)
    secs, frac = divmod(rest, 1_000_000)
    return (f"{_MONTHS[mon].decode()} {day % 365 - _CUM_DAYS[mon] + 1:02d} {secs // 3600:02d}:{secs // 60 % 60:02d}:"
            f"{secs % 60:02d}.{frac:06d} (local time, no year)")
