"""Page benchmark: every page's cold first render in a real browser, its largest figure, and the
Playback page's animation frame rate on a 5,000-step trace.

    .venv/bin/python bench/bench_pages.py                      # every page in app.py's PAGES
    .venv/bin/python bench/bench_pages.py --pages tenants,disaggregation --runs 3
    .venv/bin/python bench/bench_pages.py --warm-server --json /tmp/pages.json

The page list is read from app.py (its st.Page(...) lines) when the benchmark runs, so pages
added later are measured too.

- **First render (cold)**: a fresh `streamlit run app.py` per page (``--warm-server``: one
  server for all pages) and a fresh Chromium context (empty cache), Debian's /usr/bin/chromium
  through Playwright as in ../shared/stack.md. Time from the start of navigation
  (performance.now() in the page) to the later of: the last Plotly chart drawn (it has a
  laid-out .main-svg), and the last moment the "Running" indicator (stStatusWidget) was seen.
  The page counts as settled once its title (h1) is there, the indicator has been gone and
  the chart count unchanged for 1.5 s, and as many charts are drawn as AppTest says the page
  sends (Plotly's JS chunk loads lazily, after the script has finished). Target: under 4 s.
  Also shown: when the page's title appeared (its first text).
- **Floor**: the same measurement on a bare Streamlit app with one three-point Plotly chart (what
  Streamlit's frontend and Plotly's ~4.7 MB JavaScript cost before a page does any work), and
  with four such charts (what each further chart costs to draw); started with serve.py's
  Plotly preload (and its slim, early-compiled Plotly), like the dashboard.
  ``SCHEDLAB_PRELOAD=0`` runs both without any of these, ``SCHEDLAB_SLIM_PLOTLY=0`` with Plotly
  whole, ``SCHEDLAB_EAGER_PLOTLY=0`` with Plotly slim but compiled when first called.
- **Largest figure**: the JSON size of each st.plotly_chart the page sends (AppTest,
  ``at.get("plotly_chart")`` proto.spec), the default settings, the largest one named.
- **Animation**: the Playback page with a generated 5,000-step workload uploaded through the
  page's file uploader; ▶ Play is pressed and, for 6 s, a requestAnimationFrame loop counts the
  frames the browser paints (smoothness; target >= 20 frames/s) and how often the Plotly
  slider's "step N" label changes (how many animation frames Plotly shows per second; the
  figure's frame duration caps it).

Numbers swing with machine load (headless Chromium on shared CPUs, software WebGL): say so
when quoting them.
"""
from __future__ import annotations

import argparse
import ast
import json
import os
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tests"))

CHROMIUM = os.environ.get("CHROMIUM", "/usr/bin/chromium")
CHROME_FLAGS = ["--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage", "--disable-background-networking",
                "--disable-component-update", "--disable-sync", "--disable-quic", "--no-first-run",
                "--disable-default-apps", "--disable-extensions", "--mute-audio"]
TARGET_RENDER_S = 4.0
TARGET_FPS = 20.0
ANIM_STEPS = 5000

# Runs in every page before its own scripts: remembers when each chart was first drawn and when
# the "Running" indicator was last seen, on the page's own clock (0 = start of navigation).
PROBE = """
window.__bench = {drawn: [], lastBusy: 0, charts: 0, content: 0};
setInterval(() => {
  const t = performance.now(), b = window.__bench;
  if (document.querySelector('[data-testid="stStatusWidget"]')) b.lastBusy = t;
  if (!b.content && document.querySelector('[data-testid="stMain"] h1')) b.content = t;
  const plots = document.querySelectorAll('.js-plotly-plot');
  b.charts = plots.length;
  plots.forEach(gd => {
    if (!gd.__benchDrawn && gd._fullLayout && gd.querySelector('.main-svg')) {
      gd.__benchDrawn = t; b.drawn.push(t);
    }
  });
}, 20);
"""


def pages_from_app(app: Path = ROOT / "app.py") -> list[dict]:
    """[{path, title, url_path, default}] of every st.Page(...) call in app.py, in order."""
    calls = [n for n in ast.walk(ast.parse(app.read_text()))
             if isinstance(n, ast.Call) and getattr(n.func, "attr", None) == "Page" and n.args]
    out = []
    for node in sorted(calls, key=lambda n: (n.lineno, n.col_offset)):
        kw = {k.arg: k.value.value for k in node.keywords if isinstance(k.value, ast.Constant)}
        path = node.args[0].value
        out.append({"path": path, "title": kw.get("title", Path(path).stem),
                    "url_path": kw.get("url_path", Path(path).stem), "default": bool(kw.get("default"))})
    return out


# ---------------------------------------------------------------------------------------------
# Server
# ---------------------------------------------------------------------------------------------

# How the dashboard starts: the README's command (serve.py: modules imported before the server
# listens); BENCH_LAUNCH=streamlit: plain `streamlit run app.py` (the first visit imports them).
# Other apps (the floor) start with `streamlit run app.py`, with serve.py's Plotly preload when the
# dashboard has it (SCHEDLAB_PRELOAD=0 turns it off for both, SCHEDLAB_SLIM_PLOTLY=0 the slim
# Plotly, SCHEDLAB_EAGER_PLOTLY=0 its early compile; for A/B runs).
PLAIN = ["-m", "streamlit", "run", "app.py"]
DASHBOARD = ["serve.py"] if os.environ.get("BENCH_LAUNCH", "serve") == "serve" else PLAIN
PRELOADED = ["-c", f"import os, sys; sys.path.insert(0, {str(ROOT)!r}); import serve; "
                   "serve.preload_plotly(slim=os.environ.get('SCHEDLAB_SLIM_PLOTLY', '1') != '0', "
                   "eager=os.environ.get('SCHEDLAB_EAGER_PLOTLY', '1') != '0'); "
                   "from streamlit.web import cli; sys.argv = ['streamlit', 'run', 'app.py', *sys.argv[1:]]; "
                   "sys.exit(cli.main())"]
OTHER_APPS = PRELOADED if DASHBOARD != PLAIN and os.environ.get("SCHEDLAB_PRELOAD", "1") != "0" else PLAIN


class Server:
    """`streamlit run app.py` on a free port, stopped by killing only its own process group."""

    def __init__(self, cwd: Path = ROOT) -> None:
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            self.port = s.getsockname()[1]
        self.url = f"http://127.0.0.1:{self.port}"
        self.log = tempfile.NamedTemporaryFile(prefix="bench-pages-", suffix=".log", delete=False)
        env = {**os.environ, "STREAMLIT_BROWSER_GATHER_USAGE_STATS": "false"}
        self.proc = subprocess.Popen(
            [sys.executable, *(DASHBOARD if cwd == ROOT else OTHER_APPS), "--server.headless", "true",
             "--server.port", str(self.port), "--server.address", "127.0.0.1",
             "--browser.gatherUsageStats", "false", "--server.fileWatcherType", "none"],
            cwd=cwd, stdout=self.log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, env=env,
            start_new_session=True)
        t0 = time.monotonic()
        while True:
            try:
                with urllib.request.urlopen(f"{self.url}/_stcore/health", timeout=2) as r:
                    if r.read().strip() == b"ok":
                        break
            except OSError:
                pass
            if self.proc.poll() is not None or time.monotonic() - t0 > 60:
                self.stop()
                raise RuntimeError(f"streamlit did not start; log: {self.log.name}")
            time.sleep(0.1)
        self.startup_s = time.monotonic() - t0

    def stop(self) -> None:
        if self.proc.poll() is None:
            try:
                os.killpg(self.proc.pid, signal.SIGTERM)
                self.proc.wait(15)
            except subprocess.TimeoutExpired:
                os.killpg(self.proc.pid, signal.SIGKILL)
                self.proc.wait(5)
            except ProcessLookupError:
                pass

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.stop()


# ---------------------------------------------------------------------------------------------
# Measurements
# ---------------------------------------------------------------------------------------------

def page_url(base: str, page: dict) -> str:
    return base + "/" if page["default"] else f"{base}/{page['url_path']}"


def render_once(browser, url: str, expect_charts: int = 0, timeout_s: float = 120.0, settle_s: float = 1.5) -> dict:
    """Open `url` in a fresh context; return render time (s), charts, exceptions, settled.
    `expect_charts`: how many charts the page sends (from AppTest); the page is not settled
    before that many are drawn (Plotly's JS chunk loads lazily, after the script has finished)."""
    ctx = browser.new_context(viewport={"width": 1400, "height": 2000})
    ctx.add_init_script(PROBE)
    page = ctx.new_page()
    try:
        page.goto(url, wait_until="commit")
        t0 = time.monotonic()
        stable_since, last_count, settled = time.monotonic(), -1, False
        while time.monotonic() - t0 < timeout_s:
            time.sleep(0.1)
            b = page.evaluate("() => window.__bench")
            busy = page.locator("[data-testid=stStatusWidget]").count() > 0
            now_ms = page.evaluate("() => performance.now()")
            if not b["content"] or b["charts"] != last_count or busy or now_ms - b["lastBusy"] < settle_s * 1000 \
                    or len(b["drawn"]) < max(b["charts"], expect_charts):
                last_count = b["charts"]
                stable_since = time.monotonic()
            elif time.monotonic() - stable_since >= settle_s:
                settled = True
                break
        b = page.evaluate("() => window.__bench")
        end_ms = max([b["content"], b["lastBusy"], *b["drawn"]])
        return {"render_s": end_ms / 1000, "text_s": b["content"] / 1000,
                "script_s": max(b["content"], b["lastBusy"]) / 1000,
                "charts_s": max(b["drawn"], default=0) / 1000, "charts": b["charts"], "settled": settled,
                "exceptions": page.get_by_test_id("stException").count()}
    finally:
        ctx.close()


def figure_sizes(page: dict) -> dict:
    """Sizes of the page's figures with default settings (AppTest): largest key and bytes, total."""
    from streamlit.testing.v1 import AppTest

    at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=300)
    at.switch_page(page["path"]).run()
    sizes = {}
    for i, el in enumerate(at.get("plotly_chart")):
        sizes[getattr(el, "key", None) or f"#{i}"] = len(el.proto.spec.encode())
    if not sizes:
        return {"largest_key": "-", "largest_bytes": 0, "total_bytes": 0, "figures": 0,
                "errors": len(at.exception)}
    key = max(sizes, key=sizes.get)
    return {"largest_key": key, "largest_bytes": sizes[key], "total_bytes": sum(sizes.values()),
            "figures": len(sizes), "errors": len(at.exception)}


def animation_workload() -> tuple[bytes, int]:
    """A workload whose run takes about ANIM_STEPS steps on 8 slots (JSON bytes, its step count)."""
    from sim.simulate import simulate
    from sim.workload import generate

    wl = generate(1000, seed=5, arrival="poisson", rate=0.2, prompt={"dist": "uniform", "low": 16, "high": 96},
                  output={"dist": "uniform", "low": 20, "high": 60},
                  config={"num_gpu_blocks": 400, "block_size": 16, "max_num_batched_tokens": 256, "max_num_seqs": 8})
    steps = len(simulate(wl).steps)
    return wl.dumps().encode(), steps


def measure_animation(browser, base: str, seconds: float = 6.0) -> dict:
    """Upload the 5,000-step workload on the Playback page, press Play, count painted frames and
    slider-label changes for `seconds`."""
    data, steps = animation_workload()
    ctx = browser.new_context(viewport={"width": 1400, "height": 2000})
    page = ctx.new_page()
    try:
        page.goto(base + "/")
        page.wait_for_function("document.querySelectorAll('.js-plotly-plot').length >= 2", timeout=120_000)
        page.get_by_text("Upload a workload JSON").click()
        with tempfile.NamedTemporaryFile(suffix=".json", delete=False) as f:
            f.write(data)
        uploader = page.get_by_test_id("stFileUploader").filter(has_text="Workload JSON")
        uploader.locator("input[type=file]").set_input_files(f.name)
        t0 = time.monotonic()
        page.wait_for_function(
            f"() => {{ const l = document.querySelector('.js-plotly-plot text.slider-label');"
            f" return l && parseInt(l.textContent.replace(/[^0-9]/g, '')) > {steps // 2}; }}", timeout=300_000)
        page.wait_for_selector("[data-testid=stStatusWidget]", state="detached", timeout=300_000)
        load_s = time.monotonic() - t0
        time.sleep(1.0)
        gd = page.locator(".js-plotly-plot").first
        frames = page.evaluate("() => document.querySelector('.js-plotly-plot')._transitionData._frames.length")
        gd.locator(".updatemenu-button").filter(has_text="Play").click()
        res = page.evaluate("""(ms) => new Promise(resolve => {
            const gd = document.querySelector('.js-plotly-plot');
            const label = () => (gd.querySelector('text.slider-label') || {}).textContent;
            let n = 0, changes = 0, last = label(); const gaps = []; const t0 = performance.now(); let prev = t0;
            function tick(t) {
              n++; gaps.push(t - prev); prev = t;
              const l = label(); if (l !== last) { changes++; last = l; }
              if (t - t0 < ms) requestAnimationFrame(tick);
              else resolve({paints: n, changes, elapsed: t - t0, gaps, label: l});
            }
            requestAnimationFrame(tick);
        })""", int(seconds * 1000))
        gaps = sorted(res["gaps"][1:]) or [0.0]
        return {"steps": steps, "frames_in_figure": frames, "load_s": load_s,
                "paint_fps": res["paints"] / (res["elapsed"] / 1000),
                "plotly_frames_per_s": res["changes"] / (res["elapsed"] / 1000),
                "p95_paint_gap_ms": gaps[int(0.95 * (len(gaps) - 1))], "worst_paint_gap_ms": gaps[-1],
                "label_at_end": res["label"]}
    finally:
        ctx.close()
        os.unlink(f.name)


# The floor: a bare Streamlit app whose one page draws `n` three-point Plotly charts. Its first
# render is what Streamlit and Plotly's JavaScript cost on this machine before any page does work
# (n = 1), and what each further chart adds (n = 4).
FLOOR_APP = """import streamlit as st
st.set_page_config(layout="wide")
st.title("floor")
for i in range({n}):
    st.plotly_chart({{"data": [{{"type": "scatter", "x": [1, 2, 3], "y": [1, 3, i]}}], "layout": {{"height": 300}}}},
                    key=f"c{{i}}")
"""


def measure_floor(browser, runs: int, charts: int = 1) -> list[float]:
    with tempfile.TemporaryDirectory(prefix="bench-floor-") as d:
        Path(d, "app.py").write_text(FLOOR_APP.format(n=charts))
        out = []
        for _ in range(runs):
            with Server(Path(d)) as srv:
                out.append(render_once(browser, srv.url + "/", charts)["render_s"])
        return out


# ---------------------------------------------------------------------------------------------

def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--pages", help="comma-separated url_paths (default: every page in app.py)")
    ap.add_argument("--runs", type=int, default=1, help="cold renders per page (median reported)")
    ap.add_argument("--warm-server", action="store_true", help="one server for all pages (browser still cold)")
    ap.add_argument("--no-anim", action="store_true", help="skip the Playback animation measurement")
    ap.add_argument("--json", help="also write the results here")
    args = ap.parse_args()
    if not os.path.exists(CHROMIUM):
        print(f"chromium not found at {CHROMIUM} (apt-get install chromium)", file=sys.stderr)
        return 2
    from playwright.sync_api import sync_playwright

    load_before = os.getloadavg()
    pages = pages_from_app()
    if args.pages:
        want = set(args.pages.split(","))
        pages = [p for p in pages if p["url_path"] in want]
    results = []
    floor, floor4 = [], []
    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=CHROMIUM, args=CHROME_FLAGS)
        shared = Server() if args.warm_server else None
        try:
            floor = measure_floor(browser, args.runs)
            floor4 = measure_floor(browser, args.runs, 4)
            for p in pages:
                row = {**p, "renders": []}
                if not (ROOT / p["path"]).exists():
                    row["missing"] = True
                    results.append(row)
                    print(f"  {p['title']}: {p['path']} is missing, skipped", flush=True)
                    continue
                row.update(figure_sizes(p))  # also how many charts the browser must draw
                for _ in range(args.runs):
                    srv = shared or Server()
                    try:
                        r = render_once(browser, page_url(srv.url, p), row.get("figures", 0))
                    finally:
                        if shared is None:
                            srv.stop()
                    row["renders"].append(r)
                for k in ("render_s", "text_s", "script_s", "charts_s"):
                    row[k] = statistics.median(r[k] for r in row["renders"])
                row["settled"] = all(r["settled"] for r in row["renders"])
                row["charts"] = row["renders"][-1]["charts"]
                row["exceptions"] = max(r["exceptions"] for r in row["renders"])
                results.append(row)
                print(f"  {p['title']}: {row['render_s']:.2f} s", flush=True)
            anim = None
            if not args.no_anim:
                srv = shared or Server()
                try:
                    anim = measure_animation(browser, srv.url)
                finally:
                    if shared is None:
                        srv.stop()
        finally:
            if shared is not None:
                shared.stop()
            browser.close()

    load_after = os.getloadavg()
    print()
    print(f"machine: {os.cpu_count()} CPUs, load average {load_before[0]:.1f} before / {load_after[0]:.1f} after "
          f"(1 min); other work on the machine slows every number below")
    print(f"{'page':<42} {'first render':>12} {'title':>6} {'script':>7} {'charts':>6} {'largest figure':>26} "
          f"{'all figures':>11}  ")
    for r in results:
        if r.get("missing"):
            print(f"{r['title']:<42} {'(no file)':>12}")
            continue
        mark = "ok" if r["render_s"] < TARGET_RENDER_S else "SLOW"
        runs = "" if len(r["renders"]) == 1 else " [" + ", ".join(f"{x['render_s']:.1f}" for x in r["renders"]) + "]"
        size = (f"{r['largest_bytes'] / 1024:,.0f} KB ({r['largest_key']})" if r.get("largest_bytes")
                else ("-" if "largest_bytes" in r else "n/a"))
        total = f"{r['total_bytes'] / 1024:,.0f} KB" if r.get("total_bytes") else "-"
        flags = ("" if r["settled"] else " (never settled)") + (f" {r['exceptions']} exception(s)!" if r["exceptions"] else "")
        print(f"{r['title'][:42]:<42} {r['render_s']:>10.2f} s {r['text_s']:>4.1f} s {r['script_s']:>5.1f} s "
              f"{r['charts']:>6} {size:>26} "
              f"{total:>11}  {mark}{runs}{flags}")
    print("first render: navigation to the last chart drawn and the Running indicator gone; title: to the page's "
          "title shown (its first text); script: to the Running indicator last seen (the page's Python run)")
    if floor:
        print(f"floor: a bare Streamlit app with one 3-point Plotly chart, fresh server: "
              f"{statistics.median(floor):.2f} s ({', '.join(f'{x:.1f}' for x in floor)}); with four such charts: "
              f"{statistics.median(floor4):.2f} s ({', '.join(f'{x:.1f}' for x in floor4)})")
    print(f"target: first render under {TARGET_RENDER_S:.0f} s "
          f"({'fresh server per page' if not args.warm_server else 'one warm server'}, fresh browser context; "
          f"median of {args.runs})")
    if anim:
        print()
        print(f"Playback animation, {anim['steps']:,}-step run ({anim['frames_in_figure']} frames in the figure; "
              f"upload to drawn {anim['load_s']:.1f} s):")
        print(f"  browser paints during Play : {anim['paint_fps']:.1f} frames/s  (p95 gap {anim['p95_paint_gap_ms']:.0f} ms, "
              f"worst {anim['worst_paint_gap_ms']:.0f} ms)  {'ok' if anim['paint_fps'] >= TARGET_FPS else 'BELOW TARGET'}")
        print(f"  Plotly frames shown        : {anim['plotly_frames_per_s']:.1f} frames/s  "
              f"{'ok' if anim['plotly_frames_per_s'] >= TARGET_FPS else 'BELOW TARGET'} (capped by the figure's frame duration)")
        print(f"  target: >= {TARGET_FPS:.0f} frames/s")
    if args.json:
        Path(args.json).write_text(json.dumps({"pages": results, "floor_s": floor, "floor_4_charts_s": floor4, "animation": anim, "cpus": os.cpu_count(),
                                               "load": [load_before, load_after]}, indent=1, default=str))
    return 0


if __name__ == "__main__":
    sys.exit(main())
