"""Start the dashboard warm: import what every page needs, then run `streamlit run app.py`.

    .venv/bin/python serve.py [streamlit options, e.g. --server.port 8600]

`streamlit run app.py` imports a page's modules (pandas, Plotly, the simulator, the figure
builders) during the first visitor's first page, which then waits for them. Imported here,
before the server listens, they cost the server's start instead (torch stays lazy: the Live
engine page loads it in the background). It also skips a check Streamlit makes on its first
element (skip_repl_check), routes a first link to any page through app.py at once
(route_through_app), and has the browser fetch Plotly's chunk while the frontend boots
(preload_plotly; SCHEDLAB_PRELOAD=0 turns that off).
"""
from __future__ import annotations

import importlib
import os
import pkgutil
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent


def warm() -> list[str]:
    """Import the packages the pages use and every module of sim and figures; their names. (Not
    ui: its st.cache_data functions must be made once Streamlit's runtime exists.)"""
    sys.path.insert(0, str(ROOT))
    names = ["numpy", "pandas", "plotly.graph_objects", "plotly.io", "streamlit.emojis"]
    for pkg in ("sim", "figures"):
        names += [f"{pkg}.{m.name}" for m in pkgutil.iter_modules([str(ROOT / pkg)]) if m.name != "__main__"]
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


def preload_plotly() -> Path | None:
    """Serve Streamlit's frontend with an index.html that asks for Plotly's chunk at once.

    Streamlit's frontend imports its Plotly chunk (4.7 MB) only when the first chart arrives,
    after the page has booted and connected: the parse then starts ~1.5 s after navigation,
    and the evaluation waits for the chunks Plotly's imports, fetched among the page's widget
    chunks. <link rel="modulepreload"> lines let the browser fetch and parse them all while the
    frontend boots (the evaluation, 1.0-1.3 s on the main thread, still waits for the first
    chart: done in the first idle moment instead, it held back the page's first text by about
    a second). The static folder is a temporary copy made of links to Streamlit's files, all
    but index.html; Streamlit's static route follows links. Returns the folder, or None (and
    changes nothing) when this Streamlit's files are not laid out as expected or the copy cannot
    be made."""
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
    try:
        dst = Path(tempfile.mkdtemp(prefix="schedlab-static-"))
        atexit.register(shutil.rmtree, dst, True)
        for entry in src.iterdir():
            if entry.name != "index.html":
                (dst / entry.name).symlink_to(entry)
        (dst / "index.html").write_text(html.replace("<head>", "<head>" + links, 1), encoding="utf-8")
    except OSError:  # no writable temp folder, no symlinks: Streamlit's own files, as they are
        return None
    file_util.get_static_dir = lambda: str(dst)
    return dst


if __name__ == "__main__":
    warm()
    skip_repl_check()
    route_through_app()
    if os.environ.get("SCHEDLAB_PRELOAD", "1") != "0":  # 0: Streamlit's own index.html (for A/B runs)
        preload_plotly()
    from streamlit.web import cli

    sys.argv = ["streamlit", "run", str(ROOT / "app.py"), *sys.argv[1:]]
    sys.exit(cli.main())
