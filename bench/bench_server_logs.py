"""The SGLang, vLLM and TensorRT-LLM log readers' speed on large logs, as a ratio to `grep -c` on the same file
in the same run, and their peak memory.

    .venv/bin/python bench/bench_server_logs.py [--dir DIR] [--mb 100] [--repeat 1] [--gz] [--json]

Makes (once, seeded: bench/gen_server_logs.py, every era of each engine in one file) DIR/sglang.log
(`--decode-log-interval 1` lines: one per decode step), DIR/vllm.log (a stats line every second
and every request's lines) and DIR/vllm-steps.log (the same, mid-2025 form only, with an
`Iteration(N):` line per step: `--enable-logging-iteration-details`) and DIR/trtllm.log (an
iteration line per executor step, `print_iter_log`, three eras) and DIR/tgi.log (a router
`Success` line per request, text and JSON) and DIR/lmdeploy.log (the PyTorch engine at DEBUG: a
forward line per step, request lines, stats) and DIR/ollama.log (gin's access lines), then times,
each in its own
process (wall, CPU = user + system, peak RSS from wait4), alternating, the fastest of --repeat
kept:
- grep:   `grep -c PATTERN FILE` (the engine's record lines: `batch[.,] |#running-req: ` /
          `Avg prompt throughput` / that or `Iteration(`), the floor of finding the lines;
- read:   servers.server_log.read_log(FILE) (detect, read every line, the Trace);
- cli:    `python -m sim log FILE --json > /dev/null` (the same and the JSON printed);
- gz:     (--gz) the cli on FILE.gz;
- old:    (--old DIR) read_log of another checkout's readers (`git archive REV servers | tar -x -C DIR`).
The load average (/proc/loadavg) is printed beside each figure: the machine is shared.
"""
from __future__ import annotations

import argparse
import gzip
import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "bench"))
from gen_server_logs import generate  # noqa: E402

PY = sys.executable
PATTERNS = {"sglang": r"batch[.,] \|#running-req: ", "vllm": "Avg prompt throughput",
            "vllm-steps": r"Avg prompt throughput\|Iteration(",   # vLLM with an Iteration line per step
            "trtllm": "iter = ",                                    # TensorRT-LLM's iteration lines
            "tgi": "Success",                                       # TGI's request lines
            "lmdeploy": r"Avg \|Sending forward",                   # LMDeploy's stats and forward lines
            "ollama": r"\[GIN\]"}                                    # Ollama's access lines
READ = ("import sys; from servers.server_log import read_log; log = read_log(sys.argv[1]); "
        "print(len(log.read.batches) + len(log.read.stats) + (len(log.read.requests) if log.engine in ('tgi', 'ollama') "
        "else 0), "
        "log.read.not_understood)")


def load() -> float:
    return float(Path("/proc/loadavg").read_text().split()[0])


def measure(cmd: list[str], stdout=subprocess.DEVNULL) -> dict:
    """Wall and CPU seconds, peak RSS (MB) of one process; its stdout (when captured)."""
    la = load()
    t0 = time.perf_counter()
    p = subprocess.Popen(cmd, stdout=stdout, stderr=subprocess.PIPE, cwd=ROOT)
    out = p.stdout.read() if p.stdout else b""
    err = p.stderr.read()
    _, status, ru = os.wait4(p.pid, 0)
    wall = time.perf_counter() - t0
    if os.waitstatus_to_exitcode(status) not in (0, 1):   # grep -c says 1 when it counts nothing
        raise SystemExit(f"{' '.join(cmd)} failed: {err.decode()[-500:]}")
    return {"wall_s": wall, "cpu_s": ru.ru_utime + ru.ru_stime, "peak_mb": ru.ru_maxrss / 1024,
            "load": la, "out": out.decode().strip()}


def best(runs: list[dict]) -> dict:
    return min(runs, key=lambda r: r["wall_s"])


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--dir", type=Path, default=Path("/tmp/schedlab-logbench"))
    ap.add_argument("--mb", type=float, default=100.0)
    ap.add_argument("--repeat", type=int, default=1)
    ap.add_argument("--gz", action="store_true")
    ap.add_argument("--only", choices=tuple(PATTERNS))
    ap.add_argument("--json", action="store_true")
    ap.add_argument("--old", type=Path, help="a directory holding another checkout's servers/ package")
    a = ap.parse_args()
    a.dir.mkdir(parents=True, exist_ok=True)
    rows = []
    for engine, pat in PATTERNS.items():
        if a.only and engine != a.only:
            continue
        f = a.dir / f"{engine}-{a.mb:g}mb.log"
        if not f.exists():
            generate(engine.split("-")[0], f, a.mb, seed=1, era="v1steps" if engine == "vllm-steps" else "mix")
        if a.gz and not Path(f"{f}.gz").exists():
            with open(f, "rb") as src, gzip.open(f"{f}.gz", "wb", compresslevel=6) as dst:
                shutil.copyfileobj(src, dst)
        size = f.stat().st_size
        runs: dict[str, list] = {"grep": [], "read": [], "cli": [], "gz": [], "old": []}
        for _ in range(a.repeat):
            runs["grep"].append(measure(["grep", "-c", pat, str(f)], subprocess.PIPE))
            runs["read"].append(measure([PY, "-c", READ, str(f)], subprocess.PIPE))
            runs["cli"].append(measure([PY, "-m", "sim", "log", str(f), "--json"]))
            if a.old:
                runs["old"].append(measure([PY, "-c", f"import sys; sys.path.insert(0, {str(a.old)!r}); " + READ, str(f)],
                                           subprocess.PIPE))
            if a.gz:
                runs["gz"].append(measure([PY, "-m", "sim", "log", f"{f}.gz", "--json"]))
        g = best(runs["grep"])
        for k, rs in runs.items():
            if not rs:
                continue
            b = best(rs)
            rows.append({"engine": engine, "file_mb": round(size / 1e6, 1), "what": k, "wall_s": round(b["wall_s"], 2),
                         "cpu_s": round(b["cpu_s"], 2), "x_grep_wall": round(b["wall_s"] / g["wall_s"], 1),
                         "x_grep_cpu": round(b["cpu_s"] / max(g["cpu_s"], 1e-3), 1),
                         "mb_per_s": round(size / 1e6 / b["wall_s"], 1), "peak_mb": round(b["peak_mb"]),
                         "load": b["load"], "out": b["out"][:60]})
    if a.json:
        print(json.dumps(rows, indent=1))
        return 0
    head = f"{'engine':7s} {'MB':>6s} {'what':5s} {'wall s':>7s} {'cpu s':>7s} {'x grep':>7s} {'x cpu':>7s} " \
           f"{'MB/s':>6s} {'peak MB':>8s} {'load':>5s}  out"
    print(head)
    for r in rows:
        print(f"{r['engine']:7s} {r['file_mb']:6.1f} {r['what']:5s} {r['wall_s']:7.2f} {r['cpu_s']:7.2f} "
              f"{r['x_grep_wall']:7.1f} {r['x_grep_cpu']:7.1f} {r['mb_per_s']:6.1f} {r['peak_mb']:8d} {r['load']:5.2f}  "
              f"{r['out']}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
