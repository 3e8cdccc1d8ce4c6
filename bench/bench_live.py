"""Live following: the delay from a step's line being flushed to the file to the vLLM server page
(followed in Chromium) showing it.

    .venv/bin/python bench/bench_live.py [--seconds 30] [--rate 100] [--source REC.jsonl.gz]

A writer thread replays a recording's lines in order (by default /tmp/issue27/data/long150k.jsonl.gz,
made by bench/make_long_recording.py with vLLM's own scheduler class and the recorder, else the
bundled fcfs sample) into a file of a temporary data folder at
--rate steps a second, flushing every 0.2 s as the recorder does (recorder.FLUSH_S); the dashboard
is started with SCHEDLAB_DATA_DIR on that folder and the page follows the file. A watcher notes when
each step line became readable; the page's "Steps" metric is read every 50 ms. Printed: the delay
(median, p90, max) for every step count the page showed, the interval between page updates, and
the machine's load. No vLLM server: the page's own cost, apart from a server's load on the CPU
(tests/e2e/test_live_vllm.py prints the same delay beside a real one).

    .venv/bin/python bench/bench_live.py --refresh-cost [--at 1000,20000,100000] [--code DIR]

--refresh-cost: no browser; what one refresh of a followed recording costs once N steps are in:
the recording's lines are fed to a RecordingStream up to N steps (the verdict and the Trace made
there once, as a page following it would have), then, --refreshes times, --per-refresh steps more
(300: 3 s of a busy server, the charts' refresh) are fed and the simulator's verdict on the run so
far and RecordingStream.trace() are timed. --code DIR runs another checkout's servers/ (the code
before: its verdict re-simulates the whole run, servers.vllm.compare.decisions).

    .venv/bin/python bench/bench_live.py --refresh-cost --predict [--at ...] [--code DIR]

--predict: the time prediction instead of the verdict. This code: live_predict.LivePrediction made
where a follower would be at N steps (fitted there, simulated to there), then each refresh's update
(PREDICT_BUDGET_S of simulating at most, the copy run to the end of the requests read, the table)
timed, and a refit's cost (its fit, and its catching up over refreshes) apart. --code DIR of the code
before: compare.predict(rec, rec), the whole run fitted and re-simulated (3 runs: the point and the
band), what each of its refreshes cost (it was held past 20,000 steps).
"""
from __future__ import annotations

import argparse
import gzip
import os
import statistics
import sys
import tempfile
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests" / "e2e"))
sys.path.insert(0, str(ROOT))

from live_app import FileSteps, dashboard, delays  # noqa: E402

CHROMIUM = os.environ.get("CHROMIUM", "/usr/bin/chromium")
FLUSH_S = 0.2


def writer(path: Path, source: Path, rate: float, seconds: float, stop: threading.Event) -> None:
    """The recording's lines in their order, the n-th step line due at n / rate seconds, flushed
    every FLUSH_S (as the recorder flushes)."""
    f_in = gzip.open(source, "rb") if source.suffix == ".gz" else open(source, "rb")
    with f_in, open(path, "ab") as f:
        t0 = last_flush = time.monotonic()
        k = 0
        for line in f_in:
            if stop.is_set() or time.monotonic() - t0 > seconds:
                break
            if b'"kind":"step"' in line[:20]:
                k += 1
                while time.monotonic() < t0 + k / rate:
                    if time.monotonic() - last_flush >= FLUSH_S:
                        f.flush()
                        last_flush = time.monotonic()
                    time.sleep(0.002)
            f.write(line)
            if time.monotonic() - last_flush >= FLUSH_S:
                f.flush()
                last_flush = time.monotonic()
        f.flush()


def pct(xs: list[float], q: float) -> float:
    xs = sorted(xs)
    return xs[min(len(xs) - 1, max(0, round(q * (len(xs) - 1))))]


def step_lines(source: Path):
    """The recording's lines, each with whether it is a step line."""
    f = gzip.open(source, "rb") if source.suffix == ".gz" else open(source, "rb")
    with f:
        for line in f:
            yield line, b'"kind":"step"' in line[:20]


def feeder(lines, stream):
    """feed(n): the next lines, up to n more step lines, to the stream."""
    def feed(steps: int) -> None:
        batch, n = [], 0
        for line, is_step in lines:
            batch.append(line)
            n += is_step
            if n >= steps:
                break
        stream.feed(batch)
    return feed


def refresh_cost(source: Path, points: list[int], refreshes: int, per_refresh: int, code: Path | None) -> None:
    if code is not None:
        sys.path.insert(0, str(code))
    from servers.vllm import compare
    from servers.vllm.recording import RecordingStream
    try:
        from servers.vllm.live_check import LiveDecisions
        check = LiveDecisions()
        verdict, how = check.update, "step by step (live_check.LiveDecisions)"
    except ImportError:
        verdict, how = compare.decisions, "the whole run re-simulated (compare.decisions)"
    print(f"code: {compare.__file__.rsplit('/servers/', 1)[0]}; verdict: {how}")
    stream = RecordingStream("bench")
    feed = feeder(step_lines(source), stream)

    for target in points:
        t = time.monotonic()
        feed(target - stream.num_steps)
        rec = stream.recording
        t_feed = time.monotonic() - t
        t = time.monotonic()
        verdict(rec)   # where a page following it is: its verdict and Trace made at every refresh so far
        stream.trace()
        t_catch = time.monotonic() - t
        v_cost, t_cost = [], []
        for _ in range(refreshes):
            feed(per_refresh)
            t = time.monotonic()
            v = verdict(rec)
            v_cost.append(time.monotonic() - t)
            t = time.monotonic()
            tr = stream.trace()
            t_cost.append(time.monotonic() - t)
        load = Path("/proc/loadavg").read_text().split()[0]
        print(f"{target:>8,} steps in (to {stream.num_steps:,}), {len(tr.batch):>10,} batch rows: verdict {statistics.median(v_cost):7.3f} s, "
              f"trace {statistics.median(t_cost):6.3f} s (median of {refreshes} refreshes of {per_refresh} steps; "
              f"max {max(v_cost):.3f} / {max(t_cost):.3f}); equal so far: {v['equal'] or v['first_difference']['field'] == 'steps'}; "
              f"feeding {t_feed:.1f} s, first verdict + trace there {t_catch:.1f} s; load {load}", flush=True)


def predict_cost(source: Path, points: list[int], refreshes: int, per_refresh: int, code: Path | None) -> None:
    if code is not None:
        sys.path.insert(0, str(code))
    from servers.vllm import compare
    from servers.vllm.recording import RecordingStream
    try:
        from servers.vllm.live_predict import PREDICT_BUDGET_S, LivePrediction
    except ImportError:
        LivePrediction = None
    print(f"code: {compare.__file__.rsplit('/servers/', 1)[0]}; prediction: "
          + ("kept up to date (live_predict.LivePrediction)" if LivePrediction else "the whole run (compare.predict)"))
    stream = RecordingStream("bench")
    feed = feeder(step_lines(source), stream)

    load = lambda: Path("/proc/loadavg").read_text().split()[0]   # noqa: E731
    for target in points:
        feed(target - stream.num_steps)
        rec = stream.recording
        if LivePrediction is None:
            t = time.monotonic()
            p = compare.predict(rec, rec)
            print(f"{target:>8,} steps: compare.predict(rec, rec) {time.monotonic() - t:7.2f} s "
                  f"({p.errors['e2e_ms']['n']:,} requests); load {load()}", flush=True)
            continue
        live = LivePrediction()
        t = time.monotonic()
        live.update(rec, stream.trace(), budget_s=None)   # a follower there: fitted at N, simulated to N
        t_catch = time.monotonic() - t
        steady, refit, fits = [], [], 0
        fit_s, catch_s = [], 0.0
        for _ in range(refreshes):
            feed(per_refresh)
            tr = stream.trace()
            before, was = live.fitted_at, live.refitting
            t = time.monotonic()
            live.update(rec, tr, PREDICT_BUDGET_S)
            dt = time.monotonic() - t
            if live.refitting or live.fitted_at != before:
                refit.append(dt)
                if not was:
                    fit_s.append(live.fit_s)
            else:
                steady.append(dt)
            fits += live.fitted_at != before
        while live.refitting:   # a refit started: how long its catching up takes, refresh by refresh
            t = time.monotonic()
            live.update(rec, stream.trace(), PREDICT_BUDGET_S)
            refit.append(time.monotonic() - t)
        med = f"{statistics.median(steady):6.3f} s (max {max(steady):.3f})" if steady else "-"
        ref = (f"; refreshes during a refit {len(refit)}: {statistics.median(refit):.3f} s median, first "
               f"{refit[0]:.2f} s (its fit {fit_s[0] if fit_s else float('nan'):.2f} s)") if refit else ""
        e = live.prediction.errors["e2e_ms"] if live.prediction is not None else {"n": 0}
        print(f"{target:>8,} steps in (to {stream.num_steps:,}): refresh {med} over {len(steady)} refreshes of "
              f"{per_refresh} steps{ref}; fitted at {live.fitted_at:,}; {e['n']:,} requests predicted; "
              f"there from scratch {t_catch:.1f} s; restarts {live.restarts}; load {load()}", flush=True)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--refresh-cost", action="store_true", help="time one refresh's verdict and Trace (no browser)")
    ap.add_argument("--at", default="1000,20000,100000", help="--refresh-cost: the step counts, comma-separated")
    ap.add_argument("--refreshes", type=int, default=5)
    ap.add_argument("--per-refresh", type=int, default=300)
    ap.add_argument("--code", type=Path, help="--refresh-cost: another checkout's root (the code before)")
    ap.add_argument("--predict", action="store_true", help="--refresh-cost: the time prediction, not the verdict")
    ap.add_argument("--seconds", type=float, default=30.0)
    ap.add_argument("--screenshot", type=Path, help="save the page as it looks at the end")
    ap.add_argument("--rate", type=float, default=100.0, help="steps a second (a busy vLLM server: ~100)")
    long = next((p for p in (Path("/tmp/issue27/data/long150k.jsonl.gz"), Path("/tmp/issue27/long150k.jsonl.gz"))
                 if p.exists()), Path("/tmp/issue27/data/long150k.jsonl.gz"))
    ap.add_argument("--source", type=Path,
                    default=long if long.exists() else ROOT / "samples" / "vllm" / "fcfs_kv_pressure.jsonl.gz")
    a = ap.parse_args()
    if a.refresh_cost and a.predict:
        predict_cost(a.source, [int(x) for x in a.at.split(",")], a.refreshes, a.per_refresh, a.code)
        return
    if a.refresh_cost:
        refresh_cost(a.source, [int(x) for x in a.at.split(",")], a.refreshes, a.per_refresh, a.code)
        return
    from playwright.sync_api import sync_playwright

    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp) / "data"
        folder.mkdir()
        rec = folder / "live.jsonl"
        rec.write_bytes(b"")
        with dashboard({"SCHEDLAB_DATA_DIR": str(folder)}, Path(tmp) / "app.log") as url, sync_playwright() as pw:
            browser = pw.chromium.launch(executable_path=CHROMIUM, args=["--no-sandbox", "--disable-gpu",
                                                                          "--disable-dev-shm-usage"])
            page = browser.new_page(viewport={"width": 1400, "height": 2000})
            page.goto(f"{url}/vllm_server?vs_file=live.jsonl&vs_follow=true")
            page.get_by_text("Waiting for", exact=False).first.wait_for(timeout=90_000)
            watch = FileSteps(rec)
            threading.Thread(target=watch.run, daemon=True).start()
            stop = threading.Event()
            w = threading.Thread(target=writer, args=(rec, a.source, a.rate, a.seconds, stop), daemon=True)
            load0 = Path("/proc/loadavg").read_text().split()[:3]
            w.start()
            counts = []
            while w.is_alive():
                try:
                    m = page.get_by_test_id("stMetric").filter(has_text="Steps").first
                    v = m.get_by_test_id("stMetricValue").text_content(timeout=2_000) or "0"
                    counts.append((time.monotonic(), int(v.replace(",", "").replace("–", "0"))))
                except Exception:   # noqa: BLE001 - not drawn yet (the header's first refresh)
                    pass
                time.sleep(0.05)
            stop.set()
            watch.stop()
            if a.screenshot:
                page.wait_for_timeout(2000)
                page.screenshot(path=str(a.screenshot), full_page=True)
            load1 = Path("/proc/loadavg").read_text().split()[:3]
            browser.close()
    d = delays(watch, counts)
    changes = [t for (t, n), (_, m) in zip(counts[1:], counts) if n != m]
    gaps = [b - a for a, b in zip(changes, changes[1:])]
    print(f"writer: {a.rate:g} steps/s for {a.seconds:g} s, flushed every {FLUSH_S} s; "
          f"{max(watch.seen, default=0):,} steps written")
    if d:
        print(f"flushed-to-page delay over {len(d)} page updates: median {statistics.median(d):.2f} s, "
              f"p90 {pct(d, 0.9):.2f} s, max {max(d):.2f} s")
    if gaps:
        print(f"page updates every {statistics.median(gaps):.2f} s (median; p90 {pct(gaps, 0.9):.2f} s)")
    print(f"load average before {' '.join(load0)}, after {' '.join(load1)} (2 cores)")


if __name__ == "__main__":
    main()
