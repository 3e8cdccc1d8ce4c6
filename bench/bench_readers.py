"""The readers' cost on long files: the vLLM recording reader (read_recording + to_trace, what
the vLLM server page loads) against the parse floor, json.loads over the same lines, measured
in the same run; and the llama-server log reader against a plain scan of its lines.

    .venv/bin/python bench/bench_readers.py REC.jsonl.gz [REC2 ...] [--old DIR] [--cli] [--llama LOG]
        [--repeat 2] [--json]
    .venv/bin/python bench/bench_readers.py --digest REC [REC ...] > before.txt   # change the reader, then
    .venv/bin/python bench/bench_readers.py --digest REC [REC ...] > after.txt && diff before.txt after.txt

Every measurement runs in its own subprocess (its peak memory is that process's ru_maxrss);
each is repeated --repeat times, alternating with the floor, and the fastest is kept. Wall
time and CPU time (user + system) are both given: the machine is shared, and CPU time moves
less with the others' load; the ratios are to the floor of the same file, same run.

- floor:  the file gunzipped and split into lines as the reader does, json.loads of each line;
- reader: read_recording + to_trace (servers/vllm/recording.py);
- stream: the same lines fed to RecordingStream 1,000 at a time, then one trace();
- old:    the reader of another checkout (--old DIR: `git archive HEAD | tar -x -C DIR`), once;
- cli:    `python -m sim vllm REC --json` (the reader, the simulator's verdict on every step);
- llama:  read_llama_log on --llama LOG, against the same file's lines scanned (gunzip + split).
The load (/proc/loadavg) is printed beside each figure.

--digest (no timing): one line a recording, the sha256 of what the vLLM reader makes of it: the
Trace's bytes, the warnings, the step count, and, for files under 5 MB, the adds, the step dicts,
the oracle lines, the Trace of the same lines fed 7 at a time (and every 100 feeds on the way),
and the Trace of a Recording made by hand from the step dicts (to_trace's replay). A change to the
reader must leave every line the same.
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

WORKER = r'''
import json, resource, sys, time
kind, path = sys.argv[1], sys.argv[2]
t0, c0 = time.perf_counter(), time.process_time()
out = {}
if kind == "floor":
    import gzip, json as j
    loads = 0.0
    n = 0
    f = gzip.open(path, "rb") if path.endswith(".gz") else open(path, "rb")
    with f:
        for line in f:
            t = time.perf_counter()
            j.loads(line)
            loads += time.perf_counter() - t
            n += 1
    out.update(lines=n, loads_s=round(loads, 3))
elif kind in ("reader", "old"):
    from servers.vllm.recording import read_recording, to_trace
    rec = read_recording(path)
    t1 = time.perf_counter()
    tr = to_trace(rec)
    out.update(read_s=round(t1 - t0, 3), trace_s=round(time.perf_counter() - t1, 3), steps=len(tr.steps),
               entries=len(tr.batch), requests=len(tr.requests), warnings=len(rec.warnings))
elif kind == "stream":
    from servers.vllm.recording import RecordingStream
    from servers.vllm.reader.source import Unzip, lines_of, open_source, raw_chunks
    s = RecordingStream()
    f, total, _, _ = open_source(path)
    for batch, tail, stop in lines_of(Unzip(1 << 40).text(raw_chunks(f, total, None)), 64 << 20):
        for j in range(0, len(batch), 1000):
            s.feed(batch[j:j + 1000])
    t1 = time.perf_counter()
    tr = s.trace()
    out.update(feed_s=round(t1 - t0, 3), trace_s=round(time.perf_counter() - t1, 3), steps=len(tr.steps))
elif kind == "llama":
    from servers.llama_server import read_llama_log
    tr = read_llama_log(path)
    out.update(steps=len(tr.steps), requests=len(tr.requests))
elif kind == "scan":
    import gzip
    f = gzip.open(path, "rb") if path.endswith(".gz") else open(path, "rb")
    with f:
        out["lines"] = sum(1 for _ in f)
ru = resource.getrusage(resource.RUSAGE_SELF)
out.update(wall_s=round(time.perf_counter() - t0, 3), cpu_s=round(time.process_time() - c0, 3),
           peak_mb=round(ru.ru_maxrss / 1024, 1))
print(json.dumps(out))
'''


def load() -> str:
    return " ".join(Path("/proc/loadavg").read_text().split()[:3])


def measure(kind: str, path: str, pythonpath: str) -> dict:
    env = {**os.environ, "PYTHONPATH": pythonpath}
    before = load()
    if kind == "cli":
        code = ("import resource, runpy, sys, time, io, contextlib; t0, c0 = time.perf_counter(), time.process_time(); "
                "sys.argv = ['sim', 'vllm', sys.argv[1], '--json']; buf = io.StringIO()\n"
                "with contextlib.redirect_stdout(buf):\n"
                "    try:\n        runpy.run_module('sim', run_name='__main__')\n    except SystemExit:\n        pass\n"
                "ru = resource.getrusage(resource.RUSAGE_SELF); import json; "
                "print(json.dumps({'wall_s': round(time.perf_counter() - t0, 3), 'cpu_s': round(time.process_time() - c0, 3), "
                "'peak_mb': round(ru.ru_maxrss / 1024, 1), 'equal': json.loads(buf.getvalue())['decisions']['equal']}))")
        cmd = [sys.executable, "-c", code, path]
    else:
        cmd = [sys.executable, "-c", WORKER, kind, path]
    # run from the checkout measured: `python -c` puts the working directory first on the path
    p = subprocess.run(cmd, capture_output=True, text=True, env=env, cwd=pythonpath)
    if p.returncode != 0:
        raise SystemExit(f"{kind} on {path} failed: {p.stderr.strip().splitlines()[-1:]}")
    out = json.loads(p.stdout.strip().splitlines()[-1])
    out.update(kind=kind, file=Path(path).name, load_before=before, load_after=load())
    return out


def digest(path: str) -> str:
    import hashlib

    from servers.vllm.recording import Recording, RecordingStream, oracle_lines, read_recording, to_trace
    from servers.vllm.reader.source import Unzip, lines_of, open_source, raw_chunks

    def sha(b: bytes) -> str:
        return hashlib.sha256(b).hexdigest()[:16]

    def plain(v):
        return v.tolist() if hasattr(v, "tolist") else v

    try:
        rec = read_recording(path)
    except ValueError as e:
        return f"{path} ValueError {sha(str(e).encode())}"
    out = [path, sha(to_trace(rec).to_bytes()), sha(json.dumps(rec.warnings).encode()), str(len(rec.steps))]
    if os.path.getsize(path) < 5e6:
        out.append(sha(json.dumps([{k: plain(v) for k, v in a.items()} for a in rec.adds], default=str).encode()))
        out.append(sha(json.dumps(list(rec.steps), default=str).encode()))
        try:
            out.append(sha(json.dumps(oracle_lines(rec), default=str).encode()))
        except ValueError as e:
            out.append("oracle:" + type(e).__name__)
        f, total, _, mine = open_source(path)
        lines = []
        for batch, tail, _stop in lines_of(Unzip(1 << 40).text(raw_chunks(f, total, None)), 64 << 20):
            lines += batch
            if tail:
                lines.append(tail)
        if mine:
            f.close()
        s, on_the_way = RecordingStream(), []
        for j in range(0, len(lines), 7):
            try:
                s.feed(lines[j:j + 7])
            except ValueError:   # a second header
                break
            if j % 700 == 0 and s.recording is not None:
                on_the_way.append(sha(s.trace().to_bytes()))
        out += [sha(s.trace().to_bytes()) if s.recording else "-", sha("".join(on_the_way).encode())]
        by_hand = Recording(header=rec.header, adds=rec.adds, steps=list(rec.steps), finishes=rec.finishes,
                            name=rec.name)
        out.append(sha(to_trace(by_hand).to_bytes()))
    return " ".join(out)


def best(runs: list[dict]) -> dict:
    return min(runs, key=lambda r: r["wall_s"])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("recordings", nargs="*")
    ap.add_argument("--old", help="a checkout of the old reader (measured once, on the first recording)")
    ap.add_argument("--cli", action="store_true", help="also time `python -m sim vllm REC --json`")
    ap.add_argument("--stream", action="store_true", help="also time RecordingStream fed 1,000 lines at a time")
    ap.add_argument("--llama", help="a llama-server log to time the llama-server reader on")
    ap.add_argument("--repeat", type=int, default=2)
    ap.add_argument("--json", action="store_true")
    ap.add_argument("--digest", action="store_true", help="print what the reader makes of each recording, as digests")
    a = ap.parse_args()
    if a.digest:
        sys.path.insert(0, str(ROOT))
        for path in a.recordings:
            print(digest(path), flush=True)
        return
    here = str(ROOT)
    rows = []

    def show(r: dict, floor: dict | None = None) -> None:
        ratio = ""
        if floor:
            ratio = f"  x{r['wall_s'] / floor['wall_s']:.2f} wall, x{r['cpu_s'] / floor['cpu_s']:.2f} cpu of the floor"
        extra = {k: v for k, v in r.items() if k not in ("kind", "file", "wall_s", "cpu_s", "peak_mb", "load_before",
                                                         "load_after")}
        print(f"{r['file']}: {r['kind']:7s} {r['wall_s']:7.2f} s wall, {r['cpu_s']:7.2f} s cpu, peak "
              f"{r['peak_mb']:7.0f} MB{ratio}  (load {r['load_before']} -> {r['load_after']}) {extra}", flush=True)
        rows.append({**r, **({"ratio_wall": round(r["wall_s"] / floor["wall_s"], 2),
                              "ratio_cpu": round(r["cpu_s"] / floor["cpu_s"], 2)} if floor else {})})

    for n, path in enumerate(a.recordings):
        floors, readers, streams = [], [], []
        for _ in range(a.repeat):
            floors.append(measure("floor", path, here))
            readers.append(measure("reader", path, here))
            if a.stream:
                streams.append(measure("stream", path, here))
        floor = best(floors)
        show(floor)
        show(best(readers), floor)
        if streams:
            show(best(streams), floor)
        if a.cli:
            show(measure("cli", path, here), floor)
        if a.old and n == 0:
            show(measure("old", path, a.old), floor)
    if a.llama:
        scans, reads = [], []
        for _ in range(a.repeat):
            scans.append(measure("scan", a.llama, here))
            reads.append(measure("llama", a.llama, here))
        scan = best(scans)
        show(scan)
        show(best(reads), scan)
    if a.json:
        print(json.dumps(rows))


if __name__ == "__main__":
    t = time.perf_counter()
    main()
    print(f"(bench_readers: {time.perf_counter() - t:.0f} s)", file=sys.stderr)
