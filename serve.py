"""Start the dashboard warm: import what every page needs, then run `streamlit run app.py`.

    .venv/bin/python serve.py [streamlit options, e.g. --server.port 8600]

`streamlit run app.py` imports a page's modules (pandas, Plotly, the simulator, the figure
builders) during the first visitor's first page, which then waits for them. Imported here,
before the server listens, they cost the server's start instead (torch stays lazy: the Live
engine page loads it in the background). It also skips a check Streamlit makes on its first
element (skip_repl_check), routes a first link to any page through app.py at once
(route_through_app), and has the browser fetch Plotly's chunk while the frontend boots, with
only the trace types the figures draw registered in it, compiled off the main thread
(preload_plotly, slim_plotly and compile_plotly_early; SCHEDLAB_PRELOAD=0 turns all three off,
SCHEDLAB_SLIM_PLOTLY=0 the last two, SCHEDLAB_EAGER_PLOTLY=0 the last).
"""
from __future__ import annotations

import importlib
import os
import pkgutil
import sys
import threading
from pathlib import Path

ROOT = Path(__file__).resolve().parent


def warm() -> list[str]:
    """Import the packages the pages use and every module of sim (its lessons too), of the
    llama-server reader and of figures; their names. (Not ui: its st.cache_data functions must be
    made once Streamlit's runtime exists. Of servers.vllm only the reader: its recorder needs vLLM.)"""
    sys.path.insert(0, str(ROOT))
    names = ["numpy", "pandas", "plotly.graph_objects", "plotly.io", "streamlit.emojis"]
    for pkg in ("sim", "sim.lessons", "servers.llama_server", "figures"):
        folder = ROOT.joinpath(*pkg.split("."))
        names += [f"{pkg}.{m.name}" for m in pkgutil.iter_modules([str(folder)])
                  if m.name != "__main__" and not m.ispkg]
    names += ["servers.vllm.recording", "servers.vllm.compare"]   # the vLLM page's reader (not the recorder)
    for name in names:
        importlib.import_module(name)
    return names


def skip_repl_check() -> bool:
    """Tell Streamlit its "run me with `streamlit run`" warning was already considered.

    On the first element a server process sends, Streamlit checks whether it runs in a REPL
    with inspect.stack(), which reads the source file of every frame on the script thread's
    stack: 0.12-0.18 s of the first visitor's first page (cProfile of a page's first run). This
    process is `streamlit run`, never a REPL. True when the flag was there to set."""
    import streamlit.delta_generator as dg

    if not hasattr(dg, "_use_warning_has_been_displayed"):  # another Streamlit: leave it be
        return False
    dg._use_warning_has_been_displayed = True
    return True


def route_through_app() -> bool:
    """Have a link to any page run app.py (and its st.navigation) on the server's first visit.

    Until app.py has run once in a process, Streamlit runs a linked page's file alone, the way
    of apps with a pages/ folder and no st.navigation; ui.state._ensure_router then switches that
    mode off and reruns. Switched off here, before the first visit, that first partial run and
    its rerun are not needed. True when the flag was there to set."""
    try:
        from streamlit.runtime.pages_manager import PagesManager
    except ImportError:  # a Streamlit without the old mode
        return False
    if not hasattr(PagesManager, "uses_pages_directory"):
        return False
    PagesManager.uses_pages_directory = False
    return True


def _plotly_chunks(static: Path, html: str) -> list[str] | None:
    """Plotly's chunk and the chunks it imports, as index.html names them ("static/js/..."):
    read off the frontend's entry module (index.html's module script), which lists each lazy
    chunk's dependencies for its own preloading (`__vite__mapDeps`). None when the files are
    not laid out as expected."""
    import json
    import re

    js = static / "static" / "js"
    chunks = sorted(js.glob("PlotlyChart.*.js"))
    scripts = re.findall(r'<script type="module"[^>]*\ssrc="\./(static/js/[^"]+\.js)"', html)
    if len(chunks) != 1 or len(scripts) != 1 or not (static / scripts[0]).is_file():
        return None
    entry = (static / scripts[0]).read_text(encoding="utf-8")
    files = re.search(r"m\.f=(\[[^\]]*\])", entry)
    deps = re.search(re.escape(chunks[0].name) + r"`\),__vite__mapDeps\((\[[0-9,]*\])\)", entry)
    names = [chunks[0].name]
    if files and deps:
        try:
            listed = json.loads(files.group(1))
            names += [listed[i].removeprefix("./") for i in json.loads(deps.group(1))]
        except (ValueError, IndexError):
            pass
    return [f"static/js/{n}" for n in dict.fromkeys(names) if n.endswith(".js") and (js / n).is_file()]


def slim_plotly(js: str, keep) -> str | None:
    """Plotly's chunk with only the trace types in `keep` registered (scatter is in Plotly's core).

    The chunk bundles all 47 of plotly.js's trace modules, each wrapped so that it runs only when
    first required, and its `lib/index.js` requires them all in one `register([...])` call when
    the chunk is evaluated: 3D, maps, geo, parcoords and the rest, which no figure here draws.
    Only that call's list is shortened; the code stays, unevaluated. None when the chunk is not
    laid out so (one such call, every entry a module named `lib/<type>.js`, every kept type
    among them): the caller then serves it whole."""
    import re

    names = {}   # wrapper function -> trace type, from `Iu=_({"lib/bar.js"(e,t){...`
    for m in re.finditer(r'\(\{"lib/([a-z0-9_]+)\.js"\(', js):
        var = re.search(r"([\w$]+)=[\w$]+$", js[max(0, m.start() - 64):m.start()])
        if var:
            names[var.group(1)] = m.group(1)
    calls = list(re.finditer(r'"lib/index\.js"\([\w$]+,[\w$]+\)\{var ([\w$]+)=[\w$]+\(\);\1\.register\(\[([^\]]*)\]\)', js))
    if len(calls) != 1:
        return None
    items = calls[0].group(2).split(",")
    types = [names.get(i[:-2]) if i.endswith("()") else None for i in items]
    want = set(keep) - {"scatter"}
    if None in types or not want <= set(types):
        return None
    kept = ",".join(i for i, t in zip(items, types) if t in want)
    return js[:calls[0].start(2)] + kept + js[calls[0].end(2):]


def compile_plotly_early(js: str) -> str | None:
    """Plotly's chunk with its bundle factory wrapped in parentheses, so that Chromium compiles
    it while the chunk streams in, on a background thread, instead of on the main thread when
    the first chart mounts.

    plotly.js is a UMD bundle: one arrow function, passed as an argument, holds all of its
    4.7 MB. V8 compiles a function only when it is first called, on the main thread, unless the
    function literal is parenthesized: it then guesses the function is called at once and
    compiles it eagerly, during the script's streaming compile (the "PIFE" heuristic,
    https://v8.dev/blog/preparser#pife; it applies to arrow functions too). Measured in Chrome
    traces, the chunk's evaluation on the main thread went from 470-680 ms to 230-370 ms.
    Parentheses around a function expression do not change what it means. None when the
    factory is not found exactly once (the caller then leaves the chunk as it is)."""
    import re

    starts = list(re.finditer(r"\(typeof self<`u`\?self:[\w$]+,\(\)=>\{", js))
    ends = list(re.finditer(r"return window\.Plotly=([\w$]+),\1\}\)", js))
    if len(starts) != 1 or len(ends) != 1 or ends[0].start() < starts[0].end():
        return None
    a = starts[0].end() - len("()=>{")
    b = ends[0].end() - 1   # the factory's closing brace is followed by the call's `)`
    return js[:a] + "(" + js[a:b] + ")" + js[b:]


def _link_all(src: Path, dst: Path, skip: set[str]) -> None:
    """dst (made here) holds a link to each entry of src but those named in skip."""
    dst.mkdir(exist_ok=True)
    for entry in src.iterdir():
        if entry.name not in skip:
            (dst / entry.name).symlink_to(entry)


def preload_plotly(slim: bool = True, eager: bool = True) -> Path | None:
    """Serve Streamlit's frontend with an index.html that asks for Plotly's chunk at once, and
    (slim) that chunk with only the trace types figures.common.TRACE_TYPES names registered and
    (eager, with slim) its bundle compiled off the main thread (compile_plotly_early).

    Streamlit's frontend imports its Plotly chunk (4.7 MB) only when the first chart arrives,
    after the page has booted and connected: the parse then starts ~1.5 s after navigation,
    and the evaluation waits for the chunks Plotly's imports, fetched among the page's widget
    chunks. <link rel="modulepreload"> lines let the browser fetch and parse them all while the
    frontend boots (the evaluation, 1.0-1.3 s on the main thread, still waits for the first
    chart: done in the first idle moment instead, it held back the page's first text by about
    a second). The slim chunk's evaluation skips the 44 trace modules no figure uses
    (slim_plotly). The static folder is a temporary copy made of links to Streamlit's files,
    but index.html and the slim chunk; Streamlit's static route follows links. Returns the
    folder, or None (and changes nothing) when this Streamlit's files are not laid out as
    expected or the copy cannot be made."""
    import atexit
    import shutil
    import tempfile

    import streamlit.file_util as file_util

    src = Path(file_util.get_static_dir())
    index = src / "index.html"
    if not index.is_file():
        return None
    html = index.read_text(encoding="utf-8")
    chunks = _plotly_chunks(src, html)
    if not chunks or html.count("<head>") != 1:
        return None
    links = "".join(f'\n    <link rel="modulepreload" crossorigin href="./{c}" />' for c in chunks
                    if f'href="./{c}"' not in html)
    slim_js = None
    if slim:
        from figures.common import TRACE_TYPES

        slim_js = slim_plotly((src / chunks[0]).read_text(encoding="utf-8"), TRACE_TYPES)
        if slim_js is not None and eager:
            slim_js = compile_plotly_early(slim_js) or slim_js
    try:
        dst = Path(tempfile.mkdtemp(prefix="schedlab-static-"))
        atexit.register(shutil.rmtree, dst, True)
        if slim_js is None:
            _link_all(src, dst, {"index.html"})
        else:   # static/js/ becomes a folder of links, all but the slim chunk
            chunk = Path(chunks[0])
            _link_all(src, dst, {"index.html", chunk.parts[0]})
            _link_all(src / chunk.parts[0], dst / chunk.parts[0], {chunk.parts[1]})
            _link_all(src / chunk.parent, dst / chunk.parent, {chunk.name})
            (dst / chunk).write_text(slim_js, encoding="utf-8")
        (dst / "index.html").write_text(html.replace("<head>", "<head>" + links, 1), encoding="utf-8")
    except OSError:  # no writable temp folder, no symlinks: Streamlit's own files, as they are
        return None
    file_util.get_static_dir = lambda: str(dst)
    return dst


if __name__ == "__main__":
    warm()
    # the log reader's C tokenizer: built (first run only) or loaded now, not on the first upload
    threading.Thread(target=importlib.import_module("servers.llama_server.native").llamascan, daemon=True).start()
    skip_repl_check()
    route_through_app()
    if os.environ.get("SCHEDLAB_PRELOAD", "1") != "0":  # 0: Streamlit's own index.html (for A/B runs)
        preload_plotly(slim=os.environ.get("SCHEDLAB_SLIM_PLOTLY", "1") != "0",
                       eager=os.environ.get("SCHEDLAB_EAGER_PLOTLY", "1") != "0")
    from streamlit.web import cli

    sys.argv = ["streamlit", "run", str(ROOT / "app.py"), *sys.argv[1:]]
    sys.exit(cli.main())
