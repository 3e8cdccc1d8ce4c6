"""Browser benchmark of the vLLM server page on a long recording (issue 27, "Figures"): the
page opened on a data-folder file in Chromium.

    .venv/bin/python bench/bench_page_long.py /tmp/issue27/data/long360k.jsonl.gz
    .venv/bin/python bench/bench_page_long.py REC.jsonl.gz --sessions 4 --json /tmp/page_long.json

A dashboard (serve.py, as tests/e2e/live_app.py starts it) is started with SCHEDLAB_DATA_DIR set
to a temporary folder holding the recording (a hard link to it, else a copy: the data folder
refuses symlinks that lead out of it), and the page is opened as /vllm_server?vs_file=NAME.
Debian's /usr/bin/chromium through Playwright, with the e2e tests' flags.

- **Overview, cold**: the first session; from just before navigation to the overview chart (the
  Plotly chart whose layout.meta has "buckets", figures/overview.py) being drawn (.main-svg).
  It includes reading and parsing the file (pages/vllm_server.py's load, st.cache_resource).
  Also: when the slot lanes (layout.meta.stride) were drawn, and when the page settled (the
  "Running" indicator gone).
- **Redraw of a typed 5,000-step window**: in that open page, "First step" and then "Last step"
  (ui/window.py's number inputs) are filled and Enter pressed; the time from the last Enter to
  the slot lanes' x values spanning the new window (their first and last x).
- **4 sessions at once**: 4 new Chromium contexts (each its own session) opened on the same link
  at the same time; time until all 4 show the overview (the file is then a cache hit).
- **Memory**: the server's RSS (VmRSS of every process in the dashboard's process group) before
  any session, after the first session loaded the file, and with the 4 more sessions open (the
  first still open); per session = (RSS with 5 - RSS with 1) / 4. What is shared: the parsed
  recording and its numbers (st.cache_resource: one object every session reads), the overview
  (st.cache_data) and the cut window (st.cache_resource).
  What is per session: the session state and the figures sent to it. Also each page's JS heap
  (performance.memory.usedJSHeapSize) and the Chromium processes' total RSS.

Numbers swing with machine load (headless Chromium on shared CPUs): the load is printed.
"""
from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tests" / "e2e"))

from live_app import dashboard  # noqa: E402

CHROMIUM = os.environ.get("CHROMIUM", "/usr/bin/chromium")
CHROME_FLAGS = ["--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage", "--disable-background-networking",
                "--disable-component-update", "--disable-sync", "--disable-quic", "--no-first-run",
                "--disable-default-apps", "--disable-extensions", "--mute-audio"]
SPAN = 5000
PLOTS = "Array.from(document.querySelectorAll('.js-plotly-plot'))"
OVERVIEW = f"{PLOTS}.find(p => p.layout && p.layout.meta && p.layout.meta.buckets !== undefined)"
LANES = f"{PLOTS}.find(p => p.layout && p.layout.meta && p.layout.meta.stride !== undefined)"
DRAWN = "(g => !!(g && g._fullLayout && g.querySelector('.main-svg')))"


def loadavg() -> str:
    return Path("/proc/loadavg").read_text().strip()


def _stat(pid: int) -> list[str]:
    s = Path(f"/proc/{pid}/stat").read_text()
    return s[s.rindex(")") + 2:].split()   # fields from "state" on


def group_rss_mb(pgid: int) -> float:
    """VmRSS of every process in process group `pgid`, in MB."""
    total = 0
    for d in Path("/proc").iterdir():
        if not d.name.isdigit():
            continue
        try:
            if int(_stat(int(d.name))[2]) != pgid:
                continue
            for line in (d / "status").read_text().splitlines():
                if line.startswith("VmRSS:"):
                    total += int(line.split()[1])
        except (OSError, ValueError, IndexError):
            continue
    return total / 1024


def server_pgid(port: int) -> int:
    """The process group of the dashboard listening on `port` (serve.py, started in its own session)."""
    for d in Path("/proc").iterdir():
        if not d.name.isdigit():
            continue
        try:
            cmd = (d / "cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        if str(port).encode() in cmd and any(b"serve.py" in c or b"streamlit" in c for c in cmd):
            return int(_stat(int(d.name))[2])
    raise RuntimeError(f"no dashboard process found for port {port}")


def chromium_rss_mb() -> float:
    """Total VmRSS of the Chromium processes under this one (Playwright's driver starts them), MB."""
    kids: dict[int, list[int]] = {}
    comm: dict[int, str] = {}
    for d in Path("/proc").iterdir():
        if d.name.isdigit():
            try:
                kids.setdefault(int(_stat(int(d.name))[1]), []).append(int(d.name))
                comm[int(d.name)] = (d / "comm").read_text().strip()
            except (OSError, ValueError, IndexError):
                continue
    total, todo = 0, list(kids.get(os.getpid(), []))
    while todo:
        pid = todo.pop()
        todo += kids.get(pid, [])
        if "chrom" in comm.get(pid, ""):
            try:
                for line in Path(f"/proc/{pid}/status").read_text().splitlines():
                    if line.startswith("VmRSS:"):
                        total += int(line.split()[1])
            except OSError:
                continue
    return total / 1024


def wait_js(page, expr: str, timeout_s: float) -> float:
    """Poll `expr` in the page until true; time.monotonic() when it was."""
    end = time.monotonic() + timeout_s
    last_err = None
    while time.monotonic() < end:
        try:
            if page.evaluate(f"() => !!({expr})"):
                return time.monotonic()
        except Exception as e:   # noqa: BLE001 - the page is navigating or redrawing
            last_err = e
        time.sleep(0.05)
    raise TimeoutError(f"not true within {timeout_s:.0f} s: {expr[:120]} (last error: {last_err})")


def exceptions(page) -> list[str]:
    return page.locator('[data-testid="stException"]').all_inner_texts()


def lane_span(page):
    return page.evaluate(f"() => {{ const p = {LANES}; if (!p || !p._fullData || !p._fullData[0]) return null;"
                         " const x = p._fullData[0].x; return [Number(x[0]), Number(x[x.length - 1])]; }")


def settle(page, timeout_s: float) -> float:
    """When the "Running" indicator was gone for 1 s (monotonic)."""
    end = time.monotonic() + timeout_s
    gone_since = None
    while time.monotonic() < end:
        busy = page.locator('[data-testid="stStatusWidget"]').count() > 0
        now = time.monotonic()
        if busy:
            gone_since = None
        elif gone_since is None:
            gone_since = now
        elif now - gone_since >= 1.0:
            return gone_since
        time.sleep(0.05)
    raise TimeoutError(f"the page was still running after {timeout_s:.0f} s")


def js_heap_mb(page) -> float | None:
    try:
        return page.evaluate("() => performance.memory ? performance.memory.usedJSHeapSize : null") / 2**20
    except Exception:   # noqa: BLE001
        return None


def open_overview(ctx, url: str, timeout_s: float) -> tuple[object, float]:
    page = ctx.new_page()
    t0 = time.monotonic()
    page.goto(url, wait_until="commit")
    t = wait_js(page, f"{DRAWN}({OVERVIEW})", timeout_s)
    return page, t - t0


def run(rec: Path, sessions: int, timeout_s: float) -> dict:
    from playwright.sync_api import sync_playwright

    out: dict = {"file": str(rec), "size_mb": rec.stat().st_size / 1e6, "load_start": loadavg()}
    with tempfile.TemporaryDirectory(prefix="bench-page-long-") as tmp:
        data = Path(tmp) / "data"
        data.mkdir()
        target = data / rec.name
        try:
            os.link(rec, target)
        except OSError:
            shutil.copyfile(rec, target)
        log = Path(tmp) / "server.log"
        with dashboard({"SCHEDLAB_DATA_DIR": str(data)}, log) as base:
            port = int(base.rsplit(":", 1)[1])
            pgid = server_pgid(port)
            url = f"{base}/vllm_server?vs_file={rec.name}"
            out["url_path"] = f"/vllm_server?vs_file={rec.name}"
            with sync_playwright() as p:
                browser = p.chromium.launch(executable_path=CHROMIUM, args=CHROME_FLAGS)
                viewport = {"viewport": {"width": 1400, "height": 2000}}
                time.sleep(2)
                out["rss_idle_mb"] = group_rss_mb(pgid)
                out["chromium_rss_idle_mb"] = chromium_rss_mb()

                # 1. cold: the first session reads the file
                ctx1 = browser.new_context(**viewport)
                page, t_ov = open_overview(ctx1, url, timeout_s)
                t0 = time.monotonic() - t_ov
                out["overview_cold_s"] = t_ov
                out["lanes_cold_s"] = wait_js(page, f"{DRAWN}({LANES})", timeout_s) - t0
                out["settled_cold_s"] = settle(page, timeout_s) - t0
                out["exceptions"] = exceptions(page)
                out["first_window"] = lane_span(page)
                out["rss_one_mb"] = group_rss_mb(pgid)
                out["js_heap_one_mb"] = js_heap_mb(page)

                # 2. a typed 5,000-step window, in the open page: "Last step" first (the window
                # grows to end there), then "First step" (the window is then a to b): that second
                # Enter is timed
                top = page.get_by_label("Last step").get_attribute("max")
                mid = (int(float(top)) // 2) if top else 10 * SPAN
                a, b = mid, mid + SPAN - 1
                span_is = ("(s => s && s[0] === {a} && s[1] === {b})((() => { const p = " + LANES + "; "
                           "if (!p || !p._fullData || !p._fullData[0]) return null; const x = p._fullData[0].x; "
                           "return [Number(x[0]), Number(x[x.length - 1])]; })())")
                box = page.get_by_label("Last step")
                box.fill(str(b))
                box.press("Enter")
                wait_js(page, f"new URLSearchParams(location.search).get('vs_win')?.endsWith('-{b}')", timeout_s)
                settle(page, timeout_s)
                box = page.get_by_label("First step")
                box.fill(str(a))
                t1 = time.monotonic()
                box.press("Enter")
                t2 = wait_js(page, span_is.replace("{a}", str(a)).replace("{b}", str(b)), timeout_s)
                out["typed_window"] = [a, b]
                out["redraw_s"] = t2 - t1
                out["redraw_settled_s"] = settle(page, timeout_s) - t1
                out["exceptions"] += exceptions(page)
                time.sleep(1)
                out["rss_one_after_redraw_mb"] = group_rss_mb(pgid)

                # 3. more sessions at once, on the same link (the file is a cache hit now)
                ctxs = [browser.new_context(**viewport) for _ in range(sessions)]
                pages = [c.new_page() for c in ctxs]
                t0 = time.monotonic()
                for pg in pages:
                    pg.goto(url, wait_until="commit")
                pending, when = set(range(sessions)), {}
                end = t0 + timeout_s
                while pending and time.monotonic() < end:
                    for i in list(pending):
                        try:
                            if pages[i].evaluate(f"() => {DRAWN}({OVERVIEW})"):
                                when[i] = time.monotonic() - t0
                                pending.discard(i)
                        except Exception:   # noqa: BLE001
                            pass
                    time.sleep(0.05)
                if pending:
                    raise TimeoutError(f"{len(pending)} of {sessions} sessions showed no overview in {timeout_s:.0f} s")
                out["sessions"] = sessions
                out["overview_each_s"] = [when[i] for i in range(sessions)]
                out["overview_all_s"] = max(when.values())
                out["settled_all_s"] = max(settle(pg, timeout_s) for pg in pages) - t0
                for pg in pages:
                    out["exceptions"] += exceptions(pg)
                time.sleep(2)
                out["rss_many_mb"] = group_rss_mb(pgid)
                out["js_heap_many_mb"] = [js_heap_mb(pg) for pg in pages]
                out["chromium_rss_many_mb"] = chromium_rss_mb()
                out["per_session_mb"] = (out["rss_many_mb"] - out["rss_one_mb"]) / sessions
                browser.close()
        out["server_log_tail"] = [ln for ln in log.read_text(errors="replace").splitlines()
                                  if "Traceback" in ln or "Error" in ln][-10:]
    out["load_end"] = loadavg()
    return out


def report(r: dict) -> str:
    n = r["sessions"]
    rows = [
        ("overview drawn, first session (cold: reads the file)", f"{r['overview_cold_s']:.1f} s"),
        ("slot lanes drawn, first session", f"{r['lanes_cold_s']:.1f} s"),
        ("page settled, first session", f"{r['settled_cold_s']:.1f} s"),
        (f"redraw after typing a {SPAN:,}-step window {r['typed_window'][0]}-{r['typed_window'][1]} "
         "(Enter to lanes on it)", f"{r['redraw_s']:.2f} s"),
        ("  ... to the page settled", f"{r['redraw_settled_s']:.2f} s"),
        (f"{n} more sessions at once: all {n} show the overview", f"{r['overview_all_s']:.1f} s "
         f"(each: {', '.join(f'{t:.1f}' for t in r['overview_each_s'])})"),
        (f"  ... all {n} settled", f"{r['settled_all_s']:.1f} s"),
        ("server RSS, no session", f"{r['rss_idle_mb']:,.0f} MB"),
        ("server RSS, 1 session on the file", f"{r['rss_one_mb']:,.0f} MB"),
        ("server RSS, 1 session after the typed window", f"{r['rss_one_after_redraw_mb']:,.0f} MB"),
        (f"server RSS, 1 + {n} sessions", f"{r['rss_many_mb']:,.0f} MB"),
        (f"server memory per further session ((RSS with {n + 1} - RSS with 1) / {n})", f"{r['per_session_mb']:,.0f} MB"),
        ("JS heap of a page (1st session; the others)", f"{r['js_heap_one_mb'] or 0:,.0f} MB; "
         + ", ".join(f"{h or 0:,.0f}" for h in r["js_heap_many_mb"]) + " MB"),
        (f"Chromium RSS, all processes: idle; with {n + 1} pages", f"{r['chromium_rss_idle_mb'] or 0:,.0f} MB; "
         f"{r['chromium_rss_many_mb'] or 0:,.0f} MB"),
    ]
    w = max(len(a) for a, _ in rows)
    lines = [f"{Path(r['file']).name} ({r['size_mb']:,.1f} MB), {r['url_path']}",
             f"load at start: {r['load_start']}; at end: {r['load_end']}"]
    lines += [f"  {a:<{w}}  {b}" for a, b in rows]
    lines.append(f"  exceptions on the page: {len(r['exceptions'])}" + (f": {r['exceptions'][:3]}" if r["exceptions"] else ""))
    if r["server_log_tail"]:
        lines.append(f"  server log errors: {r['server_log_tail']}")
    return "\n".join(lines)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("recording", type=Path, help="a recording (.jsonl or .jsonl.gz) to open from the data folder")
    ap.add_argument("--sessions", type=int, default=4, help="sessions opened at once after the first (default 4)")
    ap.add_argument("--timeout", type=float, default=600, help="seconds to wait for any one thing (default 600)")
    ap.add_argument("--json", type=Path, help="also write the numbers here")
    a = ap.parse_args(argv)
    if not a.recording.is_file():
        print(f"No recording at {a.recording}.")
        return 2
    if not os.path.exists(CHROMIUM):
        print(f"No Chromium at {CHROMIUM} (set $CHROMIUM).")
        return 2
    r = run(a.recording, a.sessions, a.timeout)
    print(report(r))
    if a.json:
        a.json.write_text(json.dumps(r, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
