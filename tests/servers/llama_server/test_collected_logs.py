"""llama-server logs as people collect them: begun mid-run (a rotated log, `tail -n`, `docker logs
--since`, the last screen pasted) and behind the prefixes of the tools the server ran under
(docker/kubectl timestamps, journald, a supervisor's `[pid] `, LM Studio, ollama's own lines).

Every input here is a real log of the corpus, rewritten in the test: its tail cut at several
places (inside tasks too), a prefix of each kind put before its lines, several kinds mixed in one
file, wrapper lines interleaved. The prefixes' shapes follow public output of those tools:
`kubectl logs --timestamps` prints RFC3339Nano (`2024-03-18T15:46:14.238135024Z line`; docker's
`-t` trims trailing zeros, so widths vary); journalctl's short format prints `Dec 02 12:10:21 kamala
llama-server[24689]: slot update_slots: ...` (llama.cpp issue 10547), and ollama's runner lines
come through it the same way (ollama issue 16897); llama-server's router mode puts `[41907] ` before
its children's lines (llama.vim issue 128); LM Studio's developer log puts a `YYYY-MM-DD HH:MM:SS
[DEBUG]` header line before a chunk of engine output whose first line starts with a space
(lmstudio-bug-tracker issue 2006).
"""
from __future__ import annotations

import json
import random
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from servers.llama_server import native, prefixes, summary
from tests.reader_check import read_llama_log

ROOT = Path(__file__).resolve().parents[3]
FIX = ROOT / "tests" / "fixtures" / "llama-logs"
OLD, NEW = "c392e5094", "34af94cd9"
# (build, log, whether the server printed its own timestamps)
LOGS = [(OLD, "s5_prompt_cache_reuse.log", False), (NEW, "s5_prompt_cache_reuse.log", False),
        (NEW, "s9_kv_pressure_unified.log", True), (OLD, "s6_stream_cancel_seed603.log", True),
        (NEW, "s2_np4_mixed_staggered_seed2201.log", False)]
COUNTS = ["slot", "prompt_len", "prompt_tokens", "cached_tokens", "output_tokens", "finish_reason",
          "server_prompt_n", "server_predicted_n", "max_tokens"]
TIME_COLS = {"requests": ["arrival_time", "first_scheduled_time", "first_token_time", "finish_time"],
             "steps": ["start", "end"], "events": ["time"]}
NAMED = re.compile(rb"slot [^\n]{12}: id +(\d+) \| task (\d+) \|")
MODEL_CALL = re.compile(rb"srv  update_slots: decoding batch|srv        decode: n_batch \(effective\) = \d+, off = 0")

_cache: dict = {}


def lines(build, name) -> list[bytes]:
    return (FIX / build / name).read_bytes().splitlines(keepends=True)


def original(build, name):
    key = (build, name)
    if key not in _cache:
        _cache[key] = read_llama_log(FIX / build / name)
    return _cache[key]


# ---------------------------------------------------------------- the rewrites
BASE_US = 1_786_960_800_000_000   # 2026-08-17T10:00:00Z


def rfc3339(us: int, digits: int = 9, trim: bool = True, offset_min: int = 0) -> bytes:
    """`docker logs -t` (RFC3339Nano, trailing zeros trimmed) / kubectl / an offset zone."""
    local = us + offset_min * 60_000_000
    s, frac = divmod(local, 1_000_000)
    days, s = divmod(s, 86400)
    y, m, d = _civil(days)
    f = f"{frac * 1000 + us % 7:09d}"[:digits]   # nanoseconds beyond the microsecond: cut by the reader
    if trim:
        f = f.rstrip("0")
    zone = "Z" if not offset_min else f"{'+' if offset_min > 0 else '-'}{abs(offset_min) // 60:02d}:{abs(offset_min) % 60:02d}"
    return (f"{y:04d}-{m:02d}-{d:02d}T{s // 3600:02d}:{s // 60 % 60:02d}:{s % 60:02d}"
            f"{'.' + f if f else ''}{zone} ").encode()


def _civil(days: int):
    import datetime
    t = datetime.date(1970, 1, 1) + datetime.timedelta(days=days)
    return t.year, t.month, t.day


def journald(us: int, precise: bool = False, unit: bytes = b"llama-server[4242]") -> bytes:
    s, frac = divmod(us, 1_000_000)
    days, s = divmod(s, 86400)
    y, m, d = _civil(days)
    mon = "Jan Feb Mar Apr May Jun Jul Aug Sep Oct Nov Dec".split()[m - 1]
    return (f"{mon} {d:2d} {s // 3600:02d}:{s // 60 % 60:02d}:{s % 60:02d}{f'.{frac:06d}' if precise else ''} "
            f"gpu-box-7 ").encode() + unit + b": "


def line_time(i: int) -> int:
    return BASE_US + i * 1_337 + (i * i) % 977   # ~1.3 ms a line, uneven


STYLES = {
    "docker": lambda i: rfc3339(line_time(i)),
    "kubectl": lambda i: rfc3339(line_time(i), trim=False),
    "offset": lambda i: rfc3339(line_time(i), digits=6, offset_min=330),
    "journald": lambda i: journald(line_time(i)),
    "journald-precise": lambda i: journald(line_time(i), precise=True),
    "router": lambda i: b"[41907] ",
}


def prefixed(ls: list[bytes], style) -> bytes:
    fn = STYLES[style] if isinstance(style, str) else style
    return b"".join(fn(i) + ln for i, ln in enumerate(ls))


def _starts_record(ln: bytes) -> bool:
    return bool(re.match(rb"(?:\d+\.\d\d\.\d{3}\.\d{3} [A-Z] )?(?:slot |srv  |que  )", ln))


def lm_studio(ls: list[bytes], seed: int = 7) -> bytes:
    """LM Studio's developer log: a header line per chunk of engine output, the chunk's first line
    after a space; its own messages in between. A chunk never splits a record's continuation lines."""
    rng = random.Random(seed)
    out, i = [], 0
    while i < len(ls):
        j = i + 1
        while j < len(ls) and (rng.random() < 0.3 or not _starts_record(ls[j])):
            j += 1
        stamp = f"2026-06-04 12:{i // 600 % 60:02d}:{i // 10 % 60:02d} [DEBUG]\n".encode()
        out += [stamp, b" " + ls[i], *ls[i + 1:j]]
        if rng.random() < 0.05:
            out += [stamp.replace(b"DEBUG", b"INFO"), b" [LM STUDIO SERVER] Running chat completion on conversation "
                    b"with 1 messages.\n", stamp, b" LlamaV4: server assigned slot 0 to task 163\n"]
        i = j
    return b"".join(out)


def ollama(ls: list[bytes], seed: int = 11) -> bytes:
    """ollama running llama-server, as journald shows it: its own slog lines among the runner's."""
    rng = random.Random(seed)
    msgs = [b'level=INFO source=server.go:1339 msg="llama runner started in 29.96 seconds"',
            b'level=DEBUG source=sched.go:575 msg="evaluating already loaded" model=/root/.ollama/models/blobs/x',
            b'level=INFO source=routes.go:1287 msg="slot 0 busy; request queued"']
    out = []
    for i, ln in enumerate(ls):
        pre = journald(line_time(i), unit=b"ollama[1636975]")
        if rng.random() < 0.1 and _starts_record(ln):   # (a record's lines come in one write)
            t = rfc3339(line_time(i), digits=3).strip()
            out.append(pre + b"time=" + t + b" " + rng.choice(msgs) + b"\n")
        out.append(pre + ln)
    return b"".join(out)


# ---------------------------------------------------------------- comparisons
def tables_equal(a, b, times: bool = True) -> None:
    for name in ("requests", "batch", "steps", "events"):
        x, y = getattr(a, name), getattr(b, name)
        if not times:
            x, y = x.drop(columns=TIME_COLS.get(name, [])), y.drop(columns=TIME_COLS.get(name, []))
        pd.testing.assert_frame_equal(x, y, obj=name)
    for k in ("build", "n_batch", "n_slots", "n_ctx", "cont_batching", "unparsed_lines", "runs"):
        assert a.meta[k] == b.meta[k], k


def expected_ms(rel_us: int) -> float:
    """The reader's milliseconds for a prefix rel_us after the first line (lines.prefix_ms)."""
    minutes, rest = divmod(rel_us, 60_000_000)
    return (minutes * 60 + rest // 1_000_000) * 1000.0 + rest // 1000 % 1000 + (rest % 1000) * 0.001


# ---------------------------------------------------------------- logs that begin mid-run
def _tails(build, name):
    ls = lines(build, name)
    ref = original(build, name)
    # a cut inside a task's decoding and one inside a long prompt, besides plain fractions
    toks = [i for i, ln in enumerate(ls) if b"next token" in ln]
    chunks = [i for i, ln in enumerate(ls) if b"kv cache rm [" in ln or b"memory_seq_rm [" in ln]
    cuts = sorted({int(len(ls) * f) for f in (0.1, 0.37, 0.62, 0.9)} | {toks[len(toks) // 2], chunks[len(chunks) // 3]})
    return ls, ref, cuts


@pytest.mark.parametrize("build, name, _ts", LOGS)
def test_a_log_that_begins_mid_run(build, name, _ts):
    ls, ref, cuts = _tails(build, name)
    rr = ref.requests.set_index("request")
    partial_seen = 0
    for cut in cuts:
        text = b"".join(ls[cut:])
        tr = read_llama_log(text)   # both tokenizers, and read ahead on a thread
        r = tr.requests.set_index("request")
        # every task the lines name comes back, on the slot they name
        named = {(int(t), int(sl)) for sl, t in NAMED.findall(text)}
        assert {(int(k), int(v)) for k, v in r["slot"].items()} >= named
        for key, row in r.iterrows():
            assert row["slot"] == rr.loc[key, "slot"], (cut, key)
            if row["partial"]:
                partial_seen += 1
                if pd.isna(row["arrival_step"]) and row["finish_reason"] != "unknown":
                    # its counts are only what the log holds: never more than the whole run's
                    for c in ("prompt_tokens", "output_tokens"):
                        if not pd.isna(row[c]) and not pd.isna(rr.loc[key, c]):
                            assert row[c] <= rr.loc[key, c]
                    assert pd.isna(row["cached_tokens"]) or row["cached_tokens"] == rr.loc[key, "cached_tokens"]
                continue
            for c in COUNTS:   # all its lines are here: the same counts as the whole log's
                assert str(row[c]) == str(rr.loc[key, c]), (cut, key, c)
        # batches from the first model call the log holds on: the whole log's, call for call
        off = len(ref.steps) - len(tr.steps)
        assert 0 <= off <= sum(1 for ln in ls[:cut] if MODEL_CALL.search(ln))   # (retries print it again)
        b = tr.batch.assign(step=tr.batch["step"] + off)
        rb = ref.batch[ref.batch["step"] > off + 1].reset_index(drop=True)
        # categories are the values each table holds: compare the values
        pd.testing.assert_frame_equal(b[b["step"] > off + 1].reset_index(drop=True), rb, check_categorical=False)
        first = b[b["step"] == off + 1].drop(columns="step")
        whole = ref.batch[ref.batch["step"] == off + 1].drop(columns="step")
        assert len(first.merge(whole)) == len(first)   # the first call: the lines the log holds, no more
        assert tr.steps["num_tokens"].tolist()[1:] == ref.steps["num_tokens"].tolist()[off + 1:]
        if r["partial"].any():
            assert any("began before the log" in w for w in tr.meta["warnings"])
    assert partial_seen   # the cuts did fall inside tasks


def test_a_task_seen_only_mid_decode_has_no_invented_start():
    build, name = NEW, "s2_np4_mixed_staggered_seed2201.log"
    ls, ref = lines(build, name), original(build, name)
    # cut where task 0 is decoding: its launch, prompt and first token are before the log
    at = next(i for i, ln in enumerate(ls) if b"| task 0 | n_gen = 50," in ln)
    tr = read_llama_log(b"".join(ls[at:]))
    row = tr.requests.set_index("request").loc["0"]
    whole = ref.requests.set_index("request").loc["0"]
    assert bool(row["partial"]) and row["slot"] == whole["slot"]
    for c in ("arrival_step", "first_scheduled_step", "first_token_step", "cached_tokens", "prompt_tokens"):
        assert pd.isna(row[c]), c   # before the log: unknown, not guessed
    assert row["output_tokens"] == whole["output_tokens"]   # the server's own n_gen counter says so
    assert row["finish_reason"] == whole["finish_reason"]
    assert tr.batch[tr.batch["request"] == "0"]["kind"].eq("decode").all()
    s = summary(tr)
    task0 = next(t for t in s["tasks"] if t["task"] == 0)
    assert task0["partial"] is True and task0["slot"] == whole["slot"]
    assert not any(t["partial"] for t in summary(ref)["tasks"])


def test_no_task_of_a_whole_log_is_partial():
    for p in sorted(FIX.glob("*/*.log")):
        tr = read_llama_log(p)
        assert not tr.requests["partial"].any(), p.name
        assert not any("began before the log" in w for w in tr.meta["warnings"])


def test_the_cli_json_marks_partial_tasks(tmp_path):
    ls = lines(OLD, "s5_prompt_cache_reuse.log")
    cut = [i for i, ln in enumerate(ls) if b"| task 46 | n_decoded" in ln][10]   # task 46 is generating
    path = tmp_path / "tail.log"
    path.write_bytes(b"".join(STYLES["docker"](i) + ln for i, ln in enumerate(ls[cut:])))
    out = subprocess.run([sys.executable, "-m", "sim", "llamalog", str(path), "--json"], cwd=ROOT,
                         capture_output=True, text=True, check=True)
    s = json.loads(out.stdout)
    assert s["clock"] == "docker/kubectl RFC 3339 time prefix"
    part = {t["task"]: t["partial"] for t in s["tasks"]}
    assert part[46] is True and part[99] is False
    assert "began before the log" in out.stderr


# ---------------------------------------------------------------- prefixes
@pytest.mark.parametrize("style", sorted(STYLES))
@pytest.mark.parametrize("build, name, has_ts", LOGS[:3])
def test_each_prefix_gives_the_original_tables(build, name, has_ts, style):
    ls, ref = lines(build, name), original(build, name)
    tr = read_llama_log(prefixed(ls, style))
    clock = style != "router" and not has_ts
    tables_equal(tr, ref, times=not clock)
    assert tr.meta["line_prefixes"] and tr.meta["line_prefixes"][0] == {
        "router": "[pid]", "journald": "journald", "journald-precise": "journald"}.get(style, "docker/kubectl RFC 3339 time")
    if not clock:
        assert tr.meta["clock"] == ref.meta["clock"] and tr.meta["time_origin"] == ref.meta["time_origin"]
        return
    # the server printed no times: the prefix's are the clock, counted from the first line
    assert ref.time_unit == "steps" and tr.time_unit == "ms"
    assert tr.meta["clock"].endswith(" prefix") and "first prefixed line" in tr.meta["time_origin"]
    calls = [i for i, ln in enumerate(ls) if MODEL_CALL.search(ln)]
    assert len(calls) == len(tr.steps)
    res = 1_000_000 if style == "journald" else 1
    want = [expected_ms(line_time(i) // res * res - line_time(0) // res * res) for i in calls]
    assert tr.steps["start"].tolist() == want
    assert (np.diff(tr.steps["start"].to_numpy()) >= 0).all()


def test_prefixes_mixed_line_by_line():
    rng = random.Random(20261201)
    kinds = ["docker", "kubectl", "offset", "journald", "journald-precise", "router", None]
    for build, name, has_ts in LOGS[:3]:
        ls, ref = lines(build, name), original(build, name)
        choice = [rng.choice(kinds) for _ in ls]
        text = b"".join((STYLES[k](i) if k else b"") + ln for i, (k, ln) in enumerate(zip(choice, ls)))
        tr = read_llama_log(text)
        tables_equal(tr, ref, times=has_ts)
        assert len(tr.meta["line_prefixes"]) == 3   # RFC 3339, journald, [pid]
        for block in (4096, 65536):   # lines cut across blocks
            assert summary(read_llama_log(text, block_size=block)) == summary(tr)


@pytest.mark.parametrize("build, name, has_ts", LOGS[:4])
def test_wrapper_lines_are_theirs(build, name, has_ts):
    ls, ref = lines(build, name), original(build, name)
    for text in (lm_studio(ls), ollama(ls)):
        tr = read_llama_log(text)
        tables_equal(tr, ref, times=has_ts or text.startswith(b"2026-06-04"))
        assert tr.meta["unparsed_lines"] == ref.meta["unparsed_lines"] == 0


def test_docker_logs_since_begins_mid_run_behind_a_prefix():
    """`docker logs -t --since`: both at once; with more than ten minutes of prefix clock (the C
    tokenizer reads minutes of several digits itself)."""
    build, name = NEW, "s2_np4_mixed_staggered_seed2201.log"
    ls, ref = lines(build, name), original(build, name)
    cut = len(ls) // 3
    slow = lambda i: rfc3339(BASE_US + i * 250_000)   # noqa: E731 - a quarter second a line: 22 minutes
    tr = read_llama_log(prefixed(ls[cut:], slow))
    plain = read_llama_log(b"".join(ls[cut:]))
    tables_equal(tr, plain, times=False)
    assert tr.steps["start"].max() > 10 * 60_000
    assert tr.requests["partial"].any()
    assert set(tr.requests["request"]) <= set(ref.requests["request"])


def test_the_c_and_python_prefix_strippers_agree():
    strip = native.llamastrip()
    assert strip is not None, native.why_unavailable()
    ls = lines(OLD, "s5_prompt_cache_reuse.log")[:400]
    rng = random.Random(5)
    kinds = list(STYLES)
    base = b"".join(STYLES[rng.choice(kinds)](i) + ln for i, ln in enumerate(ls))
    base += lm_studio(ls[:50]) + ollama(ls[:50])
    noise = [b"\n", b" ", b"[", b"]", b"T", b"Z", b"+", b"-", b":", b".", b"0", b"9", b"Jan ", b"Dec  ", b"slot ",
             b"srv  ", b"1.02.003.004 I ", b"1234567.00.000.000 I ", b"2026-02-30T25:00:00Z ", b"x" * 70]
    for trial in range(150):
        buf = bytearray(base)
        for _ in range(rng.randint(0, 60)):
            at = rng.randrange(len(buf))
            if rng.random() < 0.6:
                buf[at:at] = rng.choice(noise)
            else:
                del buf[at:at + rng.randint(1, 8)]
        a = bytearray(b"\n" + bytes(buf) + b"\n")
        b = bytearray(a)
        sa, sb = prefixes.new_state(), prefixes.new_state()
        if trial % 3:
            sa[:] = sb[:] = (prefixes.PREFIX_CLOCK, 1, BASE_US, prefixes.JOURNALD, 0, 0)
        ea, eb = prefixes.strip_block(a, len(a), sa), strip(b, len(b), sb)
        assert (ea, bytes(a[:ea]), sa.tolist()) == (eb, bytes(b[:eb]), sb.tolist()), trial
        if trial % 10 == 0:
            read_llama_log(bytes(buf), block_size=rng.choice([4096, 1 << 20]))   # whole Traces agree too


def test_a_prefix_never_grows_a_line_and_lines_without_one_are_untouched():
    text = (FIX / NEW / "s9_kv_pressure_unified.log").read_bytes()
    buf = bytearray(b"\n" + text)
    st = prefixes.new_state()
    assert native.llamastrip()(buf, len(buf), st) == len(buf) and bytes(buf[1:]) == text
    assert st.tolist() == [0] * prefixes.STATE_SIZE
    # the shortest RFC 3339 time, a clock of 999,999 minutes: the server's prefix still fits
    assert len(prefixes.server_prefix(999_999 * 60_000_000 + 59_999_999)) <= len(b"2026-08-17T10:00:00Z ")


def test_the_portable_prefix_stripper_agrees(tmp_path):
    """Built without SSE2 (as on ARM), llamastrip's byte-at-a-time newline search: the same bytes."""
    import ctypes
    import shutil
    cc = native._compiler()
    assert cc is not None and shutil.which(cc)
    lib = tmp_path / "portable.so"
    subprocess.run([cc, *native.CFLAGS, "-U__SSE2__", "-o", str(lib), str(native.SOURCE)], check=True)
    fn = ctypes.CDLL(str(lib)).llamastrip
    fn.argtypes = [ctypes.c_void_p, ctypes.c_int64, ctypes.c_void_p]
    fn.restype = ctypes.c_int64
    portable = native._wrap_strip(fn)
    ls = lines(NEW, "s9_kv_pressure_unified.log")
    rng = random.Random(3)
    for text in (b"".join(ls), prefixed(ls, lambda i: STYLES[rng.choice(list(STYLES))](i) if i % 5 else b""),
                 lm_studio(ls), ollama(ls)):
        a, b = bytearray(b"\n" + text), bytearray(b"\n" + text)
        sa, sb = prefixes.new_state(), prefixes.new_state()
        ea, eb = portable(a, len(a), sa), native.llamastrip()(b, len(b), sb)
        assert (ea, bytes(a[:ea]), sa.tolist()) == (eb, bytes(b[:eb]), sb.tolist())
