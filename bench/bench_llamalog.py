"""llama-server log reader: parse throughput and peak memory, next to `grep -c` (the I/O floor).

  python bench/bench_llamalog.py           # the largest shared log, a ~60 MB concatenation, and the
                                           # same behind docker's `logs -t` prefix (~61 MB)
  python bench/bench_llamalog.py --quick   # only the largest log
  python bench/bench_llamalog.py FILE...   # your own logs

Files: the largest log in ../shared/llama-logs (else the gzipped soak fixture, unpacked to /tmp),
and /tmp/llamalog_bench_60mb.log, made by concatenating the real shared logs (several server
runs back to back, as a log that spans restarts would be), and /tmp/llamalog_bench_60mb_docker.log:
that file's lines, each behind the RFC 3339 time `docker logs -t` puts before it (nanoseconds,
trailing zeros trimmed, so the width varies), up to the same ~60 MB.

Each parse runs in a fresh Python process, `--repeat` times, twice: with the C tokenizer (C,
the reader's default; servers/llama_server/llamascan.c, built on first use) and with the regexes only (re, the
reader on a machine without a C compiler). The time is read_llama_log's wall time (interpreter
start and imports excluded; the best run), the memory is the child's peak RSS (ru_maxrss:
interpreter + numpy + pandas + the parse) and how much the parse added to the RSS measured after
the imports. Then, in the same child, the tokenizer alone is run over the whole file, after the
collectors' prefixes are taken off its lines (what is left is the Python state machine). grep: `grep -c -e 'decoding batch' -e 'n_batch (effective)' FILE`,
the number of model calls, best of `--repeat` runs, wall time including process start. The
"cpu" columns compare CPU time (user + sys), which a busy machine disturbs less than wall time.
"""
from __future__ import annotations

import argparse
import gzip
import json
import resource
import shutil
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SHARED = ROOT.parent / "shared" / "llama-logs"
FIXTURES = ROOT / "tests" / "fixtures" / "llama-logs"
BIG = Path("/tmp/llamalog_bench_60mb.log")
TARGET_BYTES = 60_000_000

CHILD = r"""
import json, resource, sys, time
sys.path.insert(0, sys.argv[1])
from servers.llama_server import native, prefixes
from servers.llama_server import read_llama_log
use_c = sys.argv[3] == "native"
if use_c and native.llamascan() is None:
    print(json.dumps({"error": "the native tokenizer is not available: " + native.why_unavailable()}))
    sys.exit(0)
base = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
t0, c0 = time.perf_counter(), time.process_time()
tr = read_llama_log(sys.argv[2], native=use_c)
dt, cpu = time.perf_counter() - t0, time.process_time() - c0
peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
# the tokenizer alone over the whole file (after the peak was read): the C scan, or the reader's
# three line-family regexes (the regex reader's lower bound: the rest is Python per record)
import gzip
from servers.llama_server.lines import QUE as _QUE, SLOT as _SLOT, SRV as _SRV
raw = open(sys.argv[2], "rb").read()
raw = bytearray(b"\n" + (gzip.decompress(raw) if raw[:2] == b"\x1f\x8b" else raw))
t0 = time.perf_counter()
end = (native.llamastrip() if use_c else prefixes.strip_block)(raw, len(raw), prefixes.new_state())
if use_c:
    records = len(native.llamascan()(raw, end, True)[0])
else:
    records = sum(sum(1 for _ in rx.finditer(raw, 0, end)) for rx in (_SLOT, _SRV, _QUE))
scan = time.perf_counter() - t0
print(json.dumps({"seconds": dt, "cpu": cpu, "peak_kb": peak, "base_kb": base, "steps": len(tr.steps),
                  "tasks": len(tr.requests), "warnings": len(tr.meta["warnings"]), "scan": scan,
                  "records": records}))
"""


def largest_log() -> Path:
    logs = sorted(SHARED.glob("*/*.log"), key=lambda p: p.stat().st_size) if SHARED.is_dir() else []
    if logs:
        return logs[-1]
    out = Path("/tmp/llamalog_bench_s8_soak.log")
    if not out.exists():
        with gzip.open(FIXTURES / "34af94cd9" / "s8_soak.log.gz", "rb") as src, open(out, "wb") as dst:
            shutil.copyfileobj(src, dst)
    return out


def concatenated() -> Path:
    if BIG.exists() and TARGET_BYTES * 0.95 <= BIG.stat().st_size <= TARGET_BYTES * 1.05:
        return BIG
    parts = sorted(SHARED.glob("*/*.log"), key=lambda p: -p.stat().st_size) if SHARED.is_dir() else []
    if not parts:
        parts = [largest_log()] + sorted(FIXTURES.glob("*/*.log"))
    size = 0
    with open(BIG, "wb") as out:
        while size < TARGET_BYTES:
            added = False
            for p in parts:   # whole logs, largest first, as long as they fit in the target
                n = p.stat().st_size
                if size + n <= TARGET_BYTES * 1.02:
                    out.write(p.read_bytes())
                    size += n
                    added = True
            if not added:
                break
    return BIG


def docker_time(i: int) -> bytes:
    """`docker logs -t`'s time for line i: RFC3339Nano, UTC, trailing zeros trimmed."""
    ns = i * 997_003 + (i * 7919) % 1000
    sec, frac = divmod(ns, 1_000_000_000)
    f = f"{frac:09d}".rstrip("0")
    return (f"2026-08-17T{10 + sec // 3600:02d}:{sec // 60 % 60:02d}:{sec % 60:02d}{'.' + f if f else ''}Z ").encode()


def prefixed_concatenation() -> Path:
    """The concatenation's lines behind docker's prefix, up to the same size."""
    out_path = BIG.with_name(BIG.stem + "_docker.log")
    if out_path.exists() and TARGET_BYTES * 0.95 <= out_path.stat().st_size <= TARGET_BYTES * 1.05:
        return out_path
    size = 0
    with open(concatenated(), "rb") as src, open(out_path, "wb") as out:
        for i, line in enumerate(src):
            rec = docker_time(i) + line
            out.write(rec)
            size += len(rec)
            if size >= TARGET_BYTES:
                break
    return out_path


def _children_cpu() -> float:
    r = resource.getrusage(resource.RUSAGE_CHILDREN)
    return r.ru_utime + r.ru_stime


def grep_seconds(path: Path, repeat: int) -> tuple[float, float, int]:
    """Best wall time and best CPU time (user + sys) of grep -c over the file."""
    best = best_cpu = None
    count = 0
    for _ in range(repeat):
        t0, c0 = time.perf_counter(), _children_cpu()
        out = subprocess.run(["grep", "-c", "-e", "decoding batch", "-e", "n_batch (effective)", str(path)],
                             capture_output=True, text=True)
        dt, cpu = time.perf_counter() - t0, _children_cpu() - c0
        count = int(out.stdout.strip() or 0)
        best = dt if best is None else min(best, dt)
        best_cpu = cpu if best_cpu is None else min(best_cpu, cpu)
    return best, best_cpu, count


def parse_stats(path: Path, repeat: int, mode: str = "native") -> dict:
    """mode: "native" (the C tokenizer, as the reader runs by default) or "regex"."""
    runs = []
    for _ in range(repeat):
        out = subprocess.run([sys.executable, "-c", CHILD, str(ROOT), str(path), mode], capture_output=True,
                             text=True, check=True)
        runs.append(json.loads(out.stdout.strip().splitlines()[-1]))
        if "error" in runs[-1]:
            return runs[-1]
    best = min(runs, key=lambda r: r["seconds"])
    best["cpu"] = min(r["cpu"] for r in runs)
    best["peak_kb"] = max(r["peak_kb"] for r in runs)
    best["added_kb"] = max(r["peak_kb"] - r["base_kb"] for r in runs)
    best["scan"] = min(r["scan"] for r in runs)
    return best


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("files", nargs="*", help="logs to measure (default: the largest shared log and a 60 MB one)")
    ap.add_argument("--quick", action="store_true", help="only the largest shared log")
    ap.add_argument("--repeat", type=int, default=3)
    args = ap.parse_args(argv)
    files = [Path(f) for f in args.files] or ([largest_log()] if args.quick else
                                              [largest_log(), concatenated(), prefixed_concatenation()])
    head = (f"{'file':26s} {'MB':>5s} {'grep s':>7s} {'parse s':>8s} {'MB/s':>5s} {'x grep':>6s} "
            f"{'grep cpu':>8s} {'parse cpu':>9s} {'x':>5s} {'peak RSS MB':>11s} {'parse +MB':>9s} {'calls':>6s}")
    print(head)
    print("-" * len(head))
    for f in files:
        mb = f.stat().st_size / 1e6
        g, gcpu, calls_grep = grep_seconds(f, max(args.repeat, 3))
        for mode in ("native", "regex"):
            p = parse_stats(f, args.repeat, mode)
            label = f.name[:20] + (" (C)" if mode == "native" else " (re)")
            if "error" in p:
                print(f"{label:26s} {p['error']}")
                continue
            print(f"{label:26s} {mb:5.1f} {g:7.3f} {p['seconds']:8.3f} {mb / p['seconds']:5.0f} "
                  f"{p['seconds'] / g:6.1f} {gcpu:8.3f} {p['cpu']:9.3f} {p['cpu'] / max(gcpu, 1e-3):5.1f} "
                  f"{p['peak_kb'] / 1024:11.0f} {p['added_kb'] / 1024:9.0f} {p['steps']:6d}")
            what = ("the C tokenizer alone (prefixes off, candidates, the frequent records parsed)"
                    if mode == "native" else "the three line-family regexes alone (prefixes off, finditer)")
            print(f"  {what}: {p['scan']:.3f} s = {p['scan'] / g:.1f}x grep, {p['records']:,} records; "
                  f"the rest is the Python state machine")
        if calls_grep != p.get("steps", calls_grep):
            print(f"  note: grep counts {calls_grep} decode lines (retries of failed calls included), "
                  f"the reader {p['steps']} model calls")
    print("\nTargets: within 3x of grep's time, under 400 MB peak.")
    return 0


if __name__ == "__main__":
    sys.exit(main())
