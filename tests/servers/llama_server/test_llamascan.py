"""The reader's C tokenizer (servers/llama_server/llamascan.c) against its regex tokenizer.

The reader's other tests parse every input both ways (tests/reader_check.py). Here: inputs made
to hit the tokenizer's edges (guards, digits, stamps, block ends), random mutations of real logs,
every fixture log concatenated, the regex deciding every record, and the build and fallback."""
from __future__ import annotations

import gzip
import random
import re
from pathlib import Path

import pytest

from reader_check import read_llama_log
from servers import llama_server as llamalog
from servers.llama_server import native
from servers.llama_server import LlamaLogReader, summary

FIX = Path(__file__).resolve().parents[2] / "fixtures" / "llama-logs"
NEW, OLD = "34af94cd9", "c392e5094"


def raw(log: Path) -> bytes:
    data = log.read_bytes()
    return gzip.decompress(data) if log.name.endswith(".gz") else data


@pytest.fixture
def fresh_native(monkeypatch, tmp_path):
    """The loader starts again with its cache in tmp_path; restored afterwards."""
    monkeypatch.setenv("SCHEDLAB_CACHE", str(tmp_path))
    native.reset()
    yield tmp_path
    monkeypatch.undo()
    native.reset()


def test_builds_once_and_loads_from_the_cache(fresh_native, monkeypatch):
    assert native.llamascan() is not None, native.why_unavailable()
    libs = list(fresh_native.glob("llamascan-*.so"))
    assert len(libs) == 1
    stamp = libs[0].stat().st_mtime_ns
    # a second process (here: a reset loader) with no compiler at all still loads the cached library
    native.reset()
    monkeypatch.setenv("PATH", str(fresh_native))
    monkeypatch.delenv("CC", raising=False)
    assert native.llamascan() is not None
    assert libs[0].stat().st_mtime_ns == stamp


def test_without_a_compiler_the_regexes_give_the_same_trace(fresh_native, monkeypatch):
    log = FIX / NEW / "s2_np4_mixed_burst_seed2211.log"
    with_c = read_llama_log(log)
    native.reset()
    monkeypatch.setenv("PATH", str(fresh_native))   # no cc, gcc or clang here, and nothing cached
    monkeypatch.delenv("CC", raising=False)
    monkeypatch.setenv("SCHEDLAB_CACHE", str(fresh_native / "empty"))
    assert native.llamascan() is None
    assert "no C compiler" in native.why_unavailable()
    assert llamalog.read_llama_log(log).to_bytes() == with_c.to_bytes()


def test_turned_off_by_the_environment(fresh_native, monkeypatch):
    monkeypatch.setenv("SCHEDLAB_NATIVE", "0")
    assert native.llamascan() is None
    assert "SCHEDLAB_NATIVE=0" in native.why_unavailable()
    tr = llamalog.read_llama_log(FIX / OLD / "s5_prompt_cache_reuse.log")
    assert tr.meta["records"] > 0 and len(tr.steps) > 0


@pytest.mark.parametrize("log", [FIX / NEW / "s1_two_slots_chunked_prompt.log",
                                 FIX / OLD / "s4_small_ctx_context_shift_default_on.log"], ids=["new", "old"])
def test_the_regex_deciding_every_candidate_gives_the_same_trace(log, monkeypatch):
    """The C tokenizer hands every candidate over as SLOW: the hot kinds then come back from the
    regex (the path a record the C parser doubts takes) and must land the same."""
    scan = native.llamascan()
    family = {native.K_TOK: native.K_SLOW_SLOT, native.K_DEC: native.K_SLOW_SLOT, native.K_IGN_SLOT: native.K_SLOW_SLOT,
              native.K_POST: native.K_SLOW_SRV, native.K_EFF: native.K_SLOW_SRV, native.K_DBATCH: native.K_SLOW_SRV,
              native.K_RUNS: native.K_SLOW_SRV, native.K_IGN_SRV: native.K_SLOW_SRV, native.K_YDONE: native.K_SLOW_QUE}
    slow = []

    def all_slow(data, end, guarded, detect=False):
        res = scan(data, end, guarded, detect)
        if res is None:   # a line that may carry a collector's prefix: strip, then scan again
            return None
        found, loadm = res
        found = found.copy()
        found[:, 0] = [family.get(k, k) for k in found[:, 0].tolist()]
        slow.append(len(found))
        return found, loadm
    ref = llamalog.read_llama_log(log)
    monkeypatch.setitem(native._state, "scan", all_slow)
    got = llamalog.read_llama_log(log)
    assert sum(slow) > 100
    assert got.to_bytes() == ref.to_bytes()


LINES = [
    # the guard: after a line end, a level letter, the chat parser's sentence, an ANSI reset
    b"0.01.000.100 D slot update_slots: id  0 | task 3 | new prompt, n_ctx_slot = 4096, n_keep = 0, task.n_tokens = 9",
    b"0.01.000.200 D srv  update_slots: posting NEXT_RESPONSE",
    b"0.01.000.300 D slot update_slots: id  0 | task 3 | n_tokens = 0, memory_seq_rm [0, end)",
    b"0.01.000.400 D slot update_slots: id  0 | task 3 | prompt processing progress, n_tokens = 9, batch.n_tokens = 9",
    b"0.01.000.500 D srv        decode: n_batch (effective) = 2048, off = 0",
    b"No parser definition detected, assuming pure content parser.0.01.000.600 D que  yield_to_que: done yielding",
    b"0.01.000.700 D slot process_toke: id  0 | task 3 | n_gen = 1, n_remaining = 9, next token:    13 'x'",
    b"\x1b[0mslot process_toke: id  0 | task 3 | n_decoded = 2, n_remaining = -1, next token: 1 'y'",
    b"0.01.000.800 D srv  update_slots: posting NEXT_RESPONSE 0.01.000.801 D slot handle_last_: id  0 | task 3 | "
    b"slot decode token, id=13, n_ctx = 4096, n_tokens = 10, truncated = 0",
    b"0.01.000.900 D srv        decode: n_batch (effective) = 2048, off = 0",
    b"0.01.001.000 D que  yield_to_que: done yielding",
    # not records: no guard, a letter that is no level, digits past 15, a broken field
    b"0.01.001.100 D xslot process_toke: id  0 | task 3 | n_gen = 3, n_remaining = 7, next token: 1 'z'",
    b"0.01.001.150 Q slot process_toke: id  0 | task 3 | n_gen = 3, n_remaining = 7, next token: 1 'z'",
    b"0.01.001.200 D slot process_toke: id  0 | task 3 | n_gen = 1234567890123456, n_remaining = 7, next token: 1 'z'",
    b"0.01.001.250 D slot process_toke: id 1234567890123456 | task 3 | n_gen = 3, n_remaining = 7, next token: 1",
    b"0.01.001.300 D srv        decode: n_batch (effective) = 2048, off = x",
    b"0.01.001.350 D srv  update_slots: decoding batch, n_tokens = ",
    b"0.01.001.400 D que          post: new task, id = 9, front = 0",
    b"0.01.001.450 D que          post: new task, id = 9/1, front = 0",
    # odd stamps: float() reads " 5" and "1_0", the C side leaves them to Python
    b"0. 5.001.500 D srv  update_slots: posting NEXT_RESPONSE",
    b"0.01.0_1.600 D slot handle_last_: id  0 | task 3 | slot decode token, n_ctx = 4096, n_past = 12",
    b"12.01.001.700 D srv        decode: n_batch (effective) = 2048, off = 0",
    b"\x1b[34m0.01.001.800\x1b[0m \x1b[35mD slot process_toke: id  0 | task 3 | n_gen = 4, n_remaining = 6, next token: 2",
    b"0.01.001.900 D slot update_slots: id  0 | task 3 | 16 digits 1234567890123456 in an unknown message",
    b"0.01.002.000 D slot update_slots: id  0 | task 3 |                                                  ",
    b"0.01.002.100 D slot update_slots: id  0 | task 3 | selected slot by lcs similarity",
    # "prompt ..." messages: one ignored per prompt token with -v, others ignored, others malformed
    b"0.01.002.110 D slot update_slots: id  0 | task 3 | prompt token   0:      1 '<s>'",
    b"0.01.002.120 D slot update_slots: id  0 | task 3 | prompt processing, n_tokens = 9",
    b"0.01.002.130 D slot update_slots: id  0 | task 3 | prompt processing progress, n_tokens = x",
    b"0.01.002.140 D slot update_slots: id  0 | task 3 | prompt done, n_tokens = 9",
    b"0.01.002.150 D slot update_slots: id  0 | task 3 | prompt eval time = soon",
    b"0.01.002.160 D slot update_slots: id  0 | task 3 | prompt tokens unknown to the reader",
    b"0.01.002.200 D srv  update_slots: run slots completed",
    b"0.01.002.300 D srv  update_slots: something new the reader does not know",
    b"0.01.002.400 D srv        decode: no tokens to decode",
    b"0.01.002.500 D slot release: id  0 | task 3 | stop processing: n_tokens = 14, truncated = 0",
    b"slot print_timing: id  0 | task 3 | ",
    b"prompt eval time =       1.00 ms /     9 tokens (    0.11 ms per token,  9000.00 tokens per second) "
    b"D slot process_toke: id  0 | task 3 | n_gen = 9, n_remaining = 1, next token: 3",
    b"       eval time =       2.00 ms /     4 tokens (    0.50 ms per token,  2000.00 tokens per second)",
    # ignored messages inside a rare record's span (the same line; a timing block's second line)
    b"0.01.002.600 D srv  update_slots: failed to decode the batch 0.01.002.601 D srv  update_slots: all slots are idle",
    b"slot print_timing: id  0 | task 3 | ",
    b"prompt eval time =       1.00 ms /     9 tokens D slot update_slots: id  0 | task 3 | selected slot by lru",
    b"       eval time =       2.00 ms /     4 tokens (    0.50 ms per token,  2000.00 tokens per second)",
    b"0.01.002.700 D slot update_slots: id  0 | task 3 | selected slot by lru, t_last = 1",
]


def test_edges_of_the_tokenizer_agree_with_the_regexes():
    text = b"\n".join(LINES) + b"\n"
    tr = read_llama_log(text)   # both tokenizers, compared
    assert tr.meta["records"] >= 20
    assert tr.meta["unparsed_lines"] >= 2   # the unknown slot and srv messages
    # a record inside the timing block's span is not one (re.finditer skips it)
    assert summary(tr)["tasks"][0]["generated_tokens"] == 4
    for block in (7, 64, 333):   # blocks ending anywhere: both tokenizers agree again
        read_llama_log(text, block_size=block)


def test_loose_lines_behind_a_foreign_prefix():
    log = FIX / NEW / "s9_kv_pressure_unified.log"
    lines = raw(log).splitlines(keepends=True)
    tr = read_llama_log(b"".join(b"<14>host llama[1]: " + ln for ln in lines))
    assert summary(tr)["batches"] == summary(read_llama_log(log))["batches"]


MUTATIONS = [b"slot ", b"srv  ", b"que  ", b" | task ", b"\n", b" D ", b"parser.", b"\x1b[0m", b"1234567890123456",
             b"-", b"n_gen = ", b", off = ", b"update_slots: ", b"      decode: ", b"yield_to_que: done yielding"]


@pytest.mark.parametrize("build, name", [(NEW, "s9_kv_pressure_unified.log"), (OLD, "s5_prompt_cache_reuse.log")])
def test_random_mutations_of_real_logs(build, name):
    data = raw(FIX / build / name)[:40_000]
    rng = random.Random(20261130)
    for _ in range(60):
        buf = bytearray(data)
        for _ in range(rng.randint(1, 40)):
            at = rng.randrange(len(buf))
            op = rng.random()
            if op < 0.4:
                buf[at:at] = rng.choice(MUTATIONS)
            elif op < 0.7:
                buf[at] = rng.randrange(256)
            else:
                del buf[at:at + rng.randint(1, 30)]
        read_llama_log(bytes(buf), block_size=rng.choice([4096, 1 << 20]))   # asserts both agree


def test_every_fixture_log_back_to_back():
    """Many server runs in one stream (start-up lines among the records, in big blocks)."""
    logs = sorted(p for p in FIX.glob("*/*") if re.search(r"\.log(\.gz)?$", p.name))
    data = b"".join(raw(p) for p in logs)
    tr = read_llama_log(data)
    assert tr.meta["runs"] == len(logs)
    assert len(tr.steps) == sum(len(read_llama_log(p).steps) for p in logs)


def test_records_of_a_block_in_order():
    """The tokenizer's candidates come in order of position, with the frequent kinds parsed."""
    data = b"\n" + raw(FIX / NEW / "s2_np4_mixed_burst_seed2211.log")
    found, _ = native.llamascan()(data, len(data), True)
    kind, pos, a, b, c, e, ts = map(list, zip(*native.rows(found)))
    assert pos == sorted(pos)
    toks = [i for i, k in enumerate(kind) if k == native.K_TOK]
    m = re.compile(rb"id +(\d+) \| task (\d+) \| n_gen = +(\d+), n_remaining = +(-?\d+)")
    for i in toks[:50]:
        g = m.search(data, pos[i])
        assert (a[i], b[i], c[i], e[i]) == tuple(int(x) for x in g.groups())
        r = LlamaLogReader()
        assert ts[i] == r._ts(data, pos[i])   # the same double as the Python stamp


def test_a_library_others_can_write_is_not_loaded(fresh_native):
    """A cached library in a directory others may write (a planted one) is rebuilt, not run."""
    assert native.llamascan() is not None
    lib = next(fresh_native.glob("llamascan-*.so"))
    native.reset()
    lib.chmod(0o777)
    stamp = lib.stat().st_mtime_ns
    assert native.llamascan() is not None
    assert lib.stat().st_mtime_ns != stamp and not lib.stat().st_mode & 0o022   # built again, this user's alone
    native.reset()
    fresh_native.chmod(0o777)
    try:
        assert native.llamascan() is None
        assert "not this user's alone" in native.why_unavailable()
    finally:
        fresh_native.chmod(0o700)


def test_the_portable_scan_finds_the_same_records(tmp_path):
    """Built without SSE2 (as on ARM), the byte-at-a-time loop gives the very same records."""
    import ctypes
    import shutil
    import subprocess
    cc = native._compiler()
    assert cc is not None and shutil.which(cc)
    lib = tmp_path / "portable.so"
    subprocess.run([cc, *native.CFLAGS, "-U__SSE2__", "-o", str(lib), str(native.SOURCE)], check=True)
    fn = ctypes.CDLL(str(lib)).llamascan
    p = ctypes.c_void_p
    fn.argtypes = [ctypes.c_void_p, ctypes.c_int64, ctypes.c_int64, ctypes.c_int32, ctypes.c_int64, p, p]
    fn.restype = ctypes.c_int64
    portable = native._wrap(fn)
    for log in (FIX / NEW / "s6_stream_cancel_seed601.log", FIX / OLD / "s2_np4_mixed_staggered_seed2201.log"):
        data = b"\n" + raw(log)
        for guarded in (True, False):
            (mine, a), (theirs, b) = portable(data, len(data), guarded), native.llamascan()(data, len(data), guarded)
            assert len(mine) > 1000 and a == b
            assert mine.tobytes() == theirs.tobytes()
