"""A seeded mutation fuzzer for the project's inputs (issue: robustness sweep).

`mutants(data, seed, n)` takes one input file's bytes (a sample recording, log, workload, public
trace; gzipped or not) and yields n (label, bytes) mutants, the same ones for the same seed:
truncated at a random byte, bytes flipped, lines dropped / duplicated / swapped (the header
too), a number replaced by a huge / negative / NaN / string / null one, a JSON value's type
changed (a list for an object, text for a number, ...), HTML and unicode oddities in a text
field, a BOM, UTF-16, CRLF, gzipped and the gzip cut or damaged.

`feed_cli` and `feed_reader` run one input through a CLI command (sim.__main__.main, in
process) or a page's reader and return None, or a Problem: an exception that is not the
project's plain refusal, or a refusal that is not one plain line (multi-line, over 200
characters, a Python repr or traceback in it), or a run slower than `slow_s`.

Used by tests/test_fuzz_inputs.py (a modest, fixed number of mutants); run as a script for a
wider sweep, each distinct problem printed once (and the mutant saved with --save):

    .venv/bin/python tests/fuzz_inputs.py --seed 7 --n 100 --files 4 [--kind recording llama ...]"""
from __future__ import annotations

import contextlib
import gzip
import io
import json
import os
import random
import re
import sys
import time
import traceback
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
MAX_REFUSAL = 200

# the project's inputs in the wild, by kind (each a list of files; the samples and fixtures)
SOURCES = {
    "recording": sorted((ROOT / "samples/vllm").glob("*.jsonl.gz")),
    "fleet": [ROOT / "samples/fleet/vllm-router-cache_aware/rec-8101.jsonl.gz"],
    "llama": sorted((ROOT / "samples/llama-logs").glob("*.log.gz"))
    + sorted((ROOT / "tests/fixtures/llama-logs-2024").glob("*.log.gz")),
    "server_log": sorted((ROOT / "samples/server-logs").glob("*.log.gz"))
    + sorted((ROOT / "tests/fixtures/engine_logs").glob("*/*.log")),
    "workload": sorted((ROOT / "tests/fixtures/vllm").glob("*.workload.json")),
    "public_trace": sorted((ROOT / "tests/fixtures/public_traces").glob("*.[cj]s*")),
    "trace": sorted((ROOT / "tests/fixtures/trace_v1").glob("*.trace")),
    "fleet_trace": ["<made: a small simulated fleet's Trace file>"],
    "args": ["<made: --config, --slo, --grid and --router-config JSON>"],
}
WORKLOAD = ROOT / "tests/fixtures/vllm/lesson_abc_7blocks.workload.json"   # a small workload the args go with
ARGS = {"--config": b'{"policy": "priority", "max_num_seqs": 4, "enable_prefix_caching": true}',
        "--slo": b'{"ttft": 400, "tpot": 40, "tenants": {"a": {"ttft": 100}}, "priorities": {"1": {"e2e": 900}}}',
        "--grid": b'{"max_num_seqs": [2, 4], "policy": ["fcfs", "priority"]}',
        "--router-config": b'{"cache_threshold": 0.5, "balance_abs_threshold": 32}'}
_made: dict[str, bytes] = {}


def base_input(kind: str, path) -> bytes:
    """The unmutated bytes of one input: a file, or one made here."""
    if kind == "fleet_trace":
        if "fleet_trace" not in _made:
            from sim.fleet import FleetSettings, simulate_fleet
            from sim.workload import Workload
            wl = Workload.from_json(json.loads(WORKLOAD.read_text()))
            _made["fleet_trace"] = simulate_fleet(wl, FleetSettings(replicas=2, router="round_robin")).to_bytes()
        return _made["fleet_trace"]
    if kind == "args":
        return b"\n".join(ARGS.values())   # one line each: a mutant's lines are the four arguments
    return Path(path).read_bytes()

HOSTILE_NUMBERS = [b"1e309", b"-1e309", b"NaN", b"Infinity", b"-Infinity", b"-1", b"0", b"-0", b"1e300",
                   b"99999999999999999999999999", b"9" * 400, b"0.5", b"-7.25", b'"12"', b"null", b"true",
                   b"[]", b"{}", b'"x"', b"1E5", b"18446744073709551617"]
HOSTILE_VALUES = [None, True, "", "12", "<script>alert(1)</script>", -1, 0, 1e300, float("nan"), float("inf"),
                  10**30, [], {}, [1, 2], {"a": 1}, "\u202e\u0000\ud800", 0.5, -1e-300, "x" * 3000]
ODD_TEXT = ["<script>alert('x')</script>", "<img src=x onerror=alert(1)>", "\u202egnp.exe", "\u0000",
            "\ud800", "e\u0301\u0301\u0301", "\U0001F4A9" * 50, "\ufeff", "a\r\nb", "\\", '"', "{{7*7}}",
            "%s%n", "\u2028\u2029"]


def _lines(text: bytes) -> list[bytes]:
    return text.split(b"\n")


def _json_paths(v, path=()):
    """Every (path, value) in a JSON document."""
    yield path, v
    if isinstance(v, dict):
        for k, x in v.items():
            yield from _json_paths(x, path + (k,))
    elif isinstance(v, list):
        for i, x in enumerate(v[:50]):
            yield from _json_paths(x, path + (i,))


def _set(doc, path, value):
    if not path:
        return value
    node = doc
    for k in path[:-1]:
        node = node[k]
    node[path[-1]] = value
    return doc


def _dump(doc) -> bytes:
    # ensure_ascii keeps a lone surrogate as \\ud800 (valid JSON text, an odd string once read)
    return json.dumps(doc).encode()


def _retype_line(rng: random.Random, line: bytes) -> bytes | None:
    """One JSON line with one value's type changed (or an odd string, or a hostile value)."""
    try:
        doc = json.loads(line)
    except (ValueError, RecursionError):
        return None
    paths = list(_json_paths(doc))
    path, old = rng.choice(paths)
    if isinstance(old, str) and rng.random() < 0.5:
        new = old + rng.choice(ODD_TEXT) if rng.random() < 0.5 else rng.choice(ODD_TEXT)
    elif isinstance(old, dict) and rng.random() < 0.5:
        new = list(old.values())   # a list where an object was
    elif isinstance(old, list) and old and rng.random() < 0.5:
        new = {str(i): x for i, x in enumerate(old)}   # an object where a list was
    elif isinstance(old, dict) and old and rng.random() < 0.3:
        k = rng.choice(list(old))
        new = {kk: vv for kk, vv in old.items() if kk != k}   # a key removed
    else:
        new = rng.choice(HOSTILE_VALUES)
    return _dump(_set(doc, path, new))


NUMBER = re.compile(rb"(?<![\w.])-?\d+(?:\.\d+)?(?:[eE][-+]?\d+)?")


def _mutate_text(rng: random.Random, text: bytes) -> tuple[str, bytes]:
    """One mutation of plain (unzipped) text."""
    lines = _lines(text)
    kind = rng.choice(["truncate", "flip", "drop_lines", "dup_lines", "swap_lines", "drop_first", "dup_first",
                       "number", "number", "numbers", "retype", "retype", "retype", "bom", "utf16", "crlf",
                       "empty", "odd_line", "long_line", "wrap_list", "nul", "cr_only", "tail_junk"])
    if kind == "truncate":
        return kind, text[:rng.randrange(len(text) + 1)]
    if kind == "flip":
        b = bytearray(text)
        for _ in range(rng.choice([1, 2, 8, 64])):
            if b:
                b[rng.randrange(len(b))] = rng.randrange(256)
        return kind, bytes(b)
    if kind == "drop_lines":
        k = max(1, len(lines) // rng.choice([2, 10, 100]))
        drop = set(rng.sample(range(len(lines)), min(k, len(lines))))
        return kind, b"\n".join(x for i, x in enumerate(lines) if i not in drop)
    if kind == "dup_lines":
        out = []
        for x in lines:
            out.append(x)
            if rng.random() < 0.05:
                out.append(x)
        return kind, b"\n".join(out)
    if kind == "swap_lines":
        out = list(lines)
        for _ in range(rng.choice([1, 3, 20])):
            i, j = rng.randrange(len(out)), rng.randrange(len(out))
            out[i], out[j] = out[j], out[i]
        return kind, b"\n".join(out)
    if kind == "drop_first":
        return kind, b"\n".join(lines[1:])
    if kind == "dup_first":
        return kind, b"\n".join(lines[:1] + lines)
    if kind in ("number", "numbers"):
        hits = list(NUMBER.finditer(text))
        if not hits:
            return kind, text
        chosen = [rng.choice(hits)] if kind == "number" else rng.sample(hits, min(len(hits), 20))
        b, last = [], 0
        for m in sorted(chosen, key=lambda m: m.start()):
            b += [text[last:m.start()], rng.choice(HOSTILE_NUMBERS)]
            last = m.end()
        return kind, b"".join(b) + text[last:]
    if kind == "retype":
        # a JSON document (the first non-space is { or [) or one JSON line of many
        stripped = text.strip()
        if stripped[:1] in (b"{", b"[") and b"\n" not in stripped:
            new = _retype_line(rng, stripped)
            return kind, new if new is not None else text
        for _ in range(10):
            i = rng.randrange(len(lines)) if rng.random() < 0.8 else 0
            new = _retype_line(rng, lines[i])
            if new is not None:
                return kind, b"\n".join(lines[:i] + [new] + lines[i + 1:])
        whole = _retype_line(rng, text)   # a JSON document over several lines
        return kind, whole if whole is not None else text
    if kind == "bom":
        return kind, b"\xef\xbb\xbf" + text
    if kind == "utf16":
        return kind, text.decode("utf-8", "replace").encode(rng.choice(["utf-16", "utf-16-le", "utf-16-be"]))
    if kind == "crlf":
        return kind, text.replace(b"\n", b"\r\n")
    if kind == "cr_only":
        return kind, text.replace(b"\n", b"\r")
    if kind == "empty":
        return kind, rng.choice([b"", b"\n", b"   \n\n", b"\xef\xbb\xbf", b"null", b"[]", b"{}", b'""', b"0"])
    if kind == "odd_line":
        i = rng.randrange(len(lines) + 1)
        odd = rng.choice(ODD_TEXT).encode("utf-8", "surrogatepass")
        return kind, b"\n".join(lines[:i] + [odd] + lines[i:])
    if kind == "long_line":
        i = rng.randrange(len(lines) + 1)
        return kind, b"\n".join(lines[:i] + [rng.choice([b"x", b"[", b"{", b"9", b"\xff"]) * 200_000] + lines[i:])
    if kind == "wrap_list":
        return kind, b"[" + b",".join(x for x in lines if x.strip()) + b"]"
    if kind == "nul":
        return kind, text.replace(b"\n", b"\n\x00", rng.randrange(1, 5))
    if kind == "tail_junk":
        return kind, text + bytes(rng.randrange(256) for _ in range(rng.randrange(1, 300)))
    raise AssertionError(kind)


def mutate(rng: random.Random, data: bytes) -> tuple[str, bytes]:
    """One mutant of a file's bytes: the text mutated (and gzipped again if it was), or the
    gzip itself cut or damaged."""
    gz = data[:2] == b"\x1f\x8b"
    text = gzip.decompress(data) if gz else data
    r = rng.random()
    if r < 0.15:   # the gzip layer: cut, a byte flipped, a CRC broken, gzipped twice
        z = data if gz else gzip.compress(text, mtime=0)
        kind = rng.choice(["gz_cut", "gz_flip", "gz_crc", "gz_twice", "gz_empty_member"])
        if kind == "gz_cut":
            return kind, z[:rng.randrange(1, len(z))]
        if kind == "gz_flip":
            b = bytearray(z)
            i = rng.randrange(10, len(b)) if len(b) > 10 else 0
            b[i] ^= 1 << rng.randrange(8)
            return kind, bytes(b)
        if kind == "gz_crc":
            return kind, z[:-8] + bytes(8)
        if kind == "gz_twice":
            return kind, gzip.compress(z, mtime=0)
        return kind, z + gzip.compress(b"", mtime=0) + b"\x1f\x8b"
    kind, out = _mutate_text(rng, text)
    if gz and rng.random() < 0.7:
        out = gzip.compress(out, mtime=0)
        kind += "+gz"
    return kind, out


def mutants(data: bytes, seed: int, n: int):
    """n (label, bytes) mutants of data, the same for the same seed."""
    rng = random.Random(seed)
    for k in range(n):
        kind, out = mutate(rng, data)
        yield f"{kind}#{k}", out


# --------------------------------------------------------------------------------------------
# Feeding one input and judging what came back
# --------------------------------------------------------------------------------------------

@dataclass
class Problem:
    target: str
    label: str
    what: str          # "crash", "refusal", "slow", "output"
    detail: str        # the exception's type and message, or the refusal, or the time

    def __str__(self) -> str:
        return f"{self.target} [{self.label}] {self.what}: {self.detail}"


# a refusal that shows Python's insides (a repr, a traceback) instead of a sentence
# (a value shown quoted with its odd characters escaped, '\u202e\x00', is the plain way to name it)
LEAKS = re.compile(r"Traceback|File \"| object at 0x|<class '|\bb'|\bb\"|Error\(|/work/|\.py\b")


def bad_refusal(msg: str, names=()) -> str | None:
    """Why a refusal message is not one plain line (None when it is). names: the paths the user
    gave, which a message may quote besides its 200 characters."""
    if "\n" in msg.strip() or "\r" in msg:
        return "more than one line"
    own = sum(len(n) * msg.count(n) for n in names if n)
    if len(msg) - own > MAX_REFUSAL:
        return f"{len(msg)} characters"
    if LEAKS.search(msg):
        return "a Python repr or traceback"
    if not msg.strip():
        return "empty"
    return None


def _strict(text: str) -> None:
    def refuse(name):
        raise ValueError(f"{name} in JSON output")
    json.loads(text, parse_constant=refuse)


def feed_cli(argv: list[str], *, label: str = "", json_out: bool = False, slow_s: float = 20) -> Problem | None:
    """Run `python -m sim ARGV` in process. stdout goes through a strict UTF-8 writer, as a
    terminal's would (a lone surrogate in what is printed is a crash there)."""
    from sim.__main__ import main
    target = "sim " + argv[0]
    raw_out, raw_err = io.BytesIO(), io.BytesIO()
    out = io.TextIOWrapper(raw_out, encoding="utf-8", errors="strict")
    err = io.TextIOWrapper(raw_err, encoding="utf-8", errors="backslashreplace")
    t0 = time.perf_counter()
    try:
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            rc = main(argv)
            out.flush()
    except SystemExit as e:
        code = e.code
        if isinstance(code, str):
            why = bad_refusal(code, [a for a in argv if os.path.exists(a)])
            if why:
                return Problem(target, label, "refusal", f"{why}: {code[:300]!r}")
        elif code not in (0, None, 2):   # 2: argparse's own usage error
            return Problem(target, label, "refusal", f"exit code {code!r}")
        return None
    except Hang:
        raise
    except BaseException as e:   # noqa: BLE001 - anything else is a crash
        tb = traceback.extract_tb(e.__traceback__)
        where = next((f"{Path(f.filename).relative_to(ROOT)}:{f.lineno}" for f in reversed(tb)
                      if f.filename.startswith(str(ROOT))), "?")
        return Problem(target, label, "crash", f"{type(e).__name__} at {where}: {str(e)[:200]}")
    finally:
        dt = time.perf_counter() - t0
    if dt > slow_s:
        return Problem(target, label, "slow", f"{dt:.1f} s")
    if rc not in (0, None):
        return Problem(target, label, "refusal", f"returned {rc!r}")
    if json_out:
        try:
            _strict(raw_out.getvalue().decode("utf-8"))
        except ValueError as e:
            return Problem(target, label, "output", f"not strict JSON: {str(e)[:150]}")
    return None


def feed_reader(name: str, fn, *, label: str = "", ok=(ValueError,), slow_s: float = 20) -> Problem | None:
    """Run fn() (a page's reader on one input); an exception outside `ok` is a crash, one in
    `ok` must be a plain line."""
    t0 = time.perf_counter()
    try:
        fn()
    except ok as e:
        why = bad_refusal(str(e))
        if why:
            return Problem(name, label, "refusal", f"{why}: {str(e)[:300]!r}")
    except Exception as e:   # noqa: BLE001 - anything else is a crash
        tb = traceback.extract_tb(e.__traceback__)
        where = next((f"{Path(f.filename).relative_to(ROOT)}:{f.lineno}" for f in reversed(tb)
                      if f.filename.startswith(str(ROOT))), "?")
        return Problem(name, label, "crash", f"{type(e).__name__} at {where}: {str(e)[:200]}")
    dt = time.perf_counter() - t0
    if dt > slow_s:
        return Problem(name, label, "slow", f"{dt:.1f} s")
    return None


# --------------------------------------------------------------------------------------------
# The targets: what each kind of input is fed to
# --------------------------------------------------------------------------------------------

def _page_recording(data: bytes, name: str) -> None:
    """What the vLLM server page does with an upload (pages/vllm_server.py load/verdict/downloads)."""
    from servers.vllm.compare import decisions
    from servers.vllm.live import one_id_set
    from servers.vllm.recording import (is_async, mode_config, oracle_lines, read_recording, to_trace,
                                        to_workload)
    from sim.jsonout import dumps_strict
    from sim.metrics import per_request, summary
    rec = read_recording(data, name=name, max_text=200 << 20)
    trace = one_id_set(to_trace(rec))
    summary(trace)
    per_request(trace)
    is_async(rec)
    try:
        mode_config(rec)
    except ValueError as e:
        if bad_refusal(str(e)):
            raise
        return   # played back, not re-simulated
    "".join(dumps_strict(x) + "\n" for x in oracle_lines(rec))
    to_workload(rec).dumps()
    decisions(rec)


def _page_llama(data: bytes, name: str) -> None:
    """What the llama-server log page does (read, summary, workload, the re-simulation's inputs)."""
    from servers.llama_server import read_llama_log, summary, workload_from_trace
    trace = read_llama_log(data, name=name)
    summary(trace)
    trace.to_bytes()
    try:
        workload_from_trace(trace)
    except ValueError as e:
        if bad_refusal(str(e)):
            raise


def _page_server_log(data: bytes, name: str) -> None:
    from servers.server_log import read_log
    from sim.jsonout import dumps_strict
    log = read_log(data, name)
    if log.engine != "llama-server":
        dumps_strict(log.read.to_json())
    log.trace.to_bytes()


def _page_workload(data: bytes, name: str) -> None:
    from sim.inputs import parse_workload
    wl = parse_workload(data, name, limit=500)
    wl.dumps() if hasattr(wl, "dumps") else None


def _page_fleet(tmp: Path, names: list[str]) -> None:
    """What the Fleet page does with uploaded recordings (ui.fleet_sources.read_real), without
    Streamlit's cache: read the fleet, its replicas as recorded and with costs, replayed."""
    from sim.fleet import FleetSettings, fleet_summary
    from sim.fleet.recorded import replay
    from ui.fleet_sources import _adapters
    read_fleet, replicas, as_fleet, tail = _adapters()
    try:
        real = read_fleet([str(tmp / n) for n in names], names=["a", "b"])
        fleet_summary(as_fleet(real, replicas(real, False)))
    except ValueError as e:   # the page names the uploaded files, not the server's paths (read_real's clean)
        msg = str(e)
        for n in names:
            msg = msg.replace(str(tmp / n), n)
        raise ValueError(msg) from None
    tail(real)
    list(real.workload().requests)
    try:
        reps = replicas(real, True)
    except ValueError as e:   # the page shows it (cost_error)
        if bad_refusal(str(e)):
            raise
        return
    try:
        fleet_summary(replay(reps, FleetSettings(replicas=len(reps), router="round_robin"), timing="simulated"))
    except (ValueError, RuntimeError) as e:
        if bad_refusal(str(e)):
            raise


def _trace_file(data: bytes) -> None:
    from sim.metrics import summary
    from sim.trace import Trace
    summary(Trace.from_bytes(data))


def _fleet_trace_file(data: bytes) -> None:
    """The Fleet page with a fleet trace file (ui.fleet_sources.read_fleet_file, then its summary)."""
    from sim.fleet import FleetTrace, fleet_summary
    fleet_summary(FleetTrace.from_bytes(data))


def targets(kind: str, path: Path, data: bytes, tmp: Path):
    """(target name, thunk or argv, json_out) for one mutant of a `kind` input, written under tmp
    (the cwd: argv names files relatively, so refusals that name them stay short)."""
    path = Path(path)
    ext = "".join(path.suffixes[-2:]) if path.name.endswith(".gz") else path.suffix
    fname = f"in{ext}"
    (tmp / fname).write_bytes(data)
    if kind == "recording":
        yield "sim vllm", ["vllm", fname, "--json", "-o", "o.trace", "--workload", "w.json"], True
        (tmp / "cal.jsonl.gz").write_bytes(SOURCES["recording"][0].read_bytes())   # the times fitted on a sample
        yield "sim vllm --predict", ["vllm", fname, "--predict", "cal.jsonl.gz", "--json"], True
        yield "page vllm", lambda: _page_recording(data, fname), None
    elif kind == "fleet":
        other = ROOT / "samples/fleet/vllm-router-cache_aware/rec-8102.jsonl.gz"
        (tmp / "b.jsonl.gz").write_bytes(other.read_bytes())
        yield "sim fleet rec", ["fleet", "--recordings", fname, "b.jsonl.gz", "--json"], True
        yield "sim fleet rr", ["fleet", "--recordings", fname, "b.jsonl.gz", "--router", "round_robin",
                               "--json"], True
        yield "page fleet", lambda: _page_fleet(tmp, [fname, "b.jsonl.gz"]), None
    elif kind == "llama":
        yield "sim llamalog", ["llamalog", fname, "--json", "-o", "o.trace"], True
        yield "page llama", lambda: _page_llama(data, fname), None
    elif kind == "server_log":
        yield "sim log", ["log", fname, "--json", "-o", "o.trace"], True
        yield "page server log", lambda: _page_server_log(data, fname), None
    elif kind in ("workload", "public_trace"):
        yield "sim run", ["run", fname, "--limit", "300", "-o", "o.trace"], True
        yield "page workload", lambda: _page_workload(data, fname), None
        if kind == "workload":
            yield "sim trace", ["trace", fname, "-o", "o.jsonl"], None
            yield "sim fleet", ["fleet", fname, "--replicas", "2", "--router", "cache_aware", "--json"], True
    elif kind == "trace":
        yield "Trace.from_bytes", lambda: _trace_file(data), None
    elif kind == "fleet_trace":
        yield "page fleet trace", lambda: _fleet_trace_file(data), None
    elif kind == "args":
        # argv as Linux hands it to Python: bytes decoded with surrogateescape
        texts = [x.decode("utf-8", "surrogateescape").replace("\x00", "") for x in data.split(b"\n")[:4]]
        texts += [""] * (4 - len(texts))
        (tmp / "w.json").write_bytes(WORKLOAD.read_bytes())
        conf, slo, grid, router = texts
        yield "sim run --config", ["run", "w.json", "--config", conf], True
        yield "sim run --slo", ["run", "w.json", "--slo", slo], True
        yield "sim search --grid", ["search", "w.json", "--grid", grid, "-o", "o.csv", "--quiet"], None
        yield "sim fleet --router-config", ["fleet", "w.json", "--router", "cache_aware", "--router-config", router,
                                            "--json"], True


class Hang(BaseException):
    """A run past the watchdog's time (BaseException: no reader's `except Exception` eats it)."""


@contextlib.contextmanager
def watchdog(seconds: float):
    """Raise Hang in the main thread after `seconds` (SIGALRM; off where there is none)."""
    import signal
    if not hasattr(signal, "setitimer") or seconds <= 0:
        yield
        return

    def ring(signum, frame):
        raise Hang(f"still running after {seconds:g} s")
    old = signal.signal(signal.SIGALRM, ring)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, old)


def run_one(kind: str, path, data: bytes, label: str, tmp: Path, slow_s: float = 20,
            hang_s: float = 120) -> list[Problem]:
    """Every target of a `kind` input on one mutant; the problems found. A target still running
    after hang_s is stopped and reported as a hang."""
    problems = []
    cwd = os.getcwd()
    os.chdir(tmp)
    try:
        for target, what, json_out in targets(kind, path, data, tmp):
            try:
                with watchdog(hang_s):
                    if callable(what):
                        p = feed_reader(target, what, label=label, slow_s=slow_s)
                    else:
                        p = feed_cli(what, label=label, json_out=bool(json_out), slow_s=slow_s)
            except Hang as e:
                p = Problem(target, label, "hang", str(e))
            if p:
                p.label = f"{Path(path).name} {label}"
                problems.append(p)
    finally:
        os.chdir(cwd)
    return problems


def main(argv=None) -> int:
    """python tests/fuzz_inputs.py [--seed S] [--n N] [--kind K ...] [--files F] [--save DIR] [--timing S]: a sweep, each
    problem printed once per (target, what, detail)."""
    import argparse
    import tempfile
    ap = argparse.ArgumentParser()
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--n", type=int, default=20, help="mutants per input file")
    ap.add_argument("--kind", nargs="*", default=list(SOURCES))
    ap.add_argument("--files", type=int, default=2, help="input files per kind")
    ap.add_argument("--slow", type=float, default=20, help="a target slower than this (s) is reported")
    ap.add_argument("--hang", type=float, default=120, help="a target still running after this (s) is stopped")
    ap.add_argument("--save", help="folder to save each failing mutant in")
    ap.add_argument("--timing", type=float, default=None, help="print each mutant that takes over this many s")
    args = ap.parse_args(argv)
    seen: dict[str, int] = {}
    total = 0
    for kind in args.kind:
        for path in SOURCES[kind][:args.files]:
            base = base_input(kind, path)
            for label, data in mutants(base, args.seed * 1000 + SOURCES[kind].index(path), args.n):
                total += 1
                t0 = time.perf_counter()
                with tempfile.TemporaryDirectory() as d:
                    problems = run_one(kind, path, data, label, Path(d), args.slow, args.hang)
                dt = time.perf_counter() - t0
                if args.timing is not None and dt > args.timing:
                    print(f"  {dt:.1f} s: {kind} {path.name} {label} ({len(data):,} bytes)", flush=True)
                for p in problems:
                    key = f"{p.target} {p.what} {re.sub(r'[0-9]+', 'N', p.detail)[:120]}"
                    seen[key] = seen.get(key, 0) + 1
                    if seen[key] == 1:
                        print(p, flush=True)
                        if args.save:
                            Path(args.save).mkdir(parents=True, exist_ok=True)
                            safe = re.sub(r"[^\w.#+-]", "_", f"{kind}-{p.label}")
                            (Path(args.save) / safe).write_bytes(data)
    print(f"{total} mutants, {len(seen)} distinct problems ({sum(seen.values())} in all)", file=sys.stderr)
    return 1 if seen else 0


if __name__ == "__main__":
    sys.path.insert(0, str(ROOT))
    sys.exit(main())
