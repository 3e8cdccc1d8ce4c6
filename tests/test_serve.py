"""serve.py imports what the pages need before the server starts, and not torch."""
from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def run_fresh(code: str) -> subprocess.CompletedProcess:
    """`code` in a fresh interpreter (serve.py's effects are per process) at the repo root."""
    out = subprocess.run([sys.executable, "-c", "import sys; sys.path.insert(0, '.'); import serve; " + code],
                         cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    return out


def test_warm_imports_sim_and_figures_but_not_torch():
    out = run_fresh("names = serve.warm(); print(len(names), 'torch' in sys.modules, 'servers.llama_server' in sys.modules, "
                    "'figures.playback' in sys.modules, 'pandas' in sys.modules)")
    n, torch, llamalog, playback, pandas = out.stdout.split()
    assert int(n) >= 30 and torch == "False" and llamalog == playback == pandas == "True"
    assert "No runtime found" not in out.stderr  # no st.cache_data made before the runtime exists


def test_skip_repl_check_marks_streamlits_warning_as_considered():
    out = run_fresh("import streamlit.delta_generator as dg; before = dg._use_warning_has_been_displayed; "
                    "ok = serve.skip_repl_check(); print(before, ok, dg._use_warning_has_been_displayed)")
    assert out.stdout.split() == ["False", "True", "True"]


PRELOAD_CHECK = """
import re
from pathlib import Path
import streamlit.file_util as fu
from figures.common import TRACE_TYPES
orig = Path(fu.get_static_dir())
d = serve.preload_plotly()
html = (d / "index.html").read_text()
added = re.findall(r'\\n    <link rel="modulepreload" crossorigin href="\\./(static/js/[^"]+\\.js)" />', html)
stripped = html
for a in added:
    stripped = stripped.replace(f'\\n    <link rel="modulepreload" crossorigin href="./{a}" />', "", 1)
entry = (orig / re.search(r'<script type="module"[^>]*src="\\./(static/js/[^"]+)"', html).group(1)).read_text()
chunk = added[0]
files = [f.relative_to(orig) for f in orig.rglob("*") if f.is_file()]
same = [r for r in files if str(r) not in ("index.html", chunk)]
print(fu.get_static_dir() == str(d),                                   # Streamlit now serves the copy
      bool(re.fullmatch(r"static/js/PlotlyChart\\.[^/]+\\.js", chunk)),  # Plotly's chunk first,
      len(added) > 1 and all(a.split("/")[-1] in entry for a in added[1:]),  # then chunks the entry lists
      all((orig / a).is_file() for a in added),
      len(same) > 100 and all((d / r).resolve() == (orig / r).resolve() for r in same),  # every other file
                                                                       # is Streamlit's own, through a link
      not (d / chunk).is_symlink(),                                    # the chunk is the slim one
      (d / chunk).read_text() == serve.compile_plotly_early(serve.slim_plotly((orig / chunk).read_text(), TRACE_TYPES)),
      stripped == (orig / "index.html").read_text())                   # nothing else changed
"""


def test_preload_plotly_serves_an_index_that_asks_for_plotlys_chunks():
    assert run_fresh(PRELOAD_CHECK).stdout.split() == ["True"] * 8


def test_preload_plotly_without_slim_serves_plotlys_chunk_as_it_is():
    out = run_fresh("import streamlit.file_util as fu; from pathlib import Path; orig = Path(fu.get_static_dir()); "
                    "d = serve.preload_plotly(slim=False); c = next(orig.glob('static/js/PlotlyChart.*.js')); "
                    "p = d / c.relative_to(orig); print((d / 'static').is_symlink(), p.resolve() == c.resolve())")
    assert out.stdout.split() == ["True", "True"]


def _chunk_text() -> str:
    import streamlit.file_util as fu

    return next(Path(fu.get_static_dir()).glob("static/js/PlotlyChart.*.js")).read_text(encoding="utf-8")


def _registered(js: str) -> list[str]:
    """The trace types the chunk's lib/index.js registers, read off the wrappers' module names."""
    call = re.search(r'"lib/index\.js"\([\w$]+,[\w$]+\)\{var ([\w$]+)=[\w$]+\(\);\1\.register\(\[([^\]]*)\]\)', js)
    out = []
    for item in filter(None, call.group(2).split(",")):
        m = re.search(re.escape(item[:-2]) + r'=[\w$]+\(\{"lib/([a-z0-9_]+)\.js"', js)
        out.append(m.group(1))
    return out


def test_slim_plotly_registers_only_the_kept_trace_types():
    import serve

    js = _chunk_text()
    whole = _registered(js)
    assert len(whole) > 40 and {"bar", "heatmap", "scattergl", "scatter3d", "scattermap", "pie"} <= set(whole)
    slim = serve.slim_plotly(js, ("scatter", "bar", "heatmap", "scattergl"))
    assert _registered(slim) == ["bar", "heatmap", "scattergl"]   # in the bundle's order; scatter is core
    # only the register list changed: the rest of the chunk is byte for byte Plotly's
    head = js.index('"lib/index.js"')
    tail = js.index("])", head)
    assert slim[:head] == js[:head] and slim[slim.index("])", head):] == js[tail:] and len(js) - len(slim) > 200
    assert _registered(serve.slim_plotly(js, ("scatter",))) == []


def test_slim_plotly_leaves_a_chunk_it_does_not_recognise():
    import serve

    js = _chunk_text()
    assert serve.slim_plotly(js, ("scatter", "bar", "no_such_trace")) is None   # a kept type it lacks
    assert serve.slim_plotly(js.replace('"lib/index.js"', '"lib/main.js"'), ("bar",)) is None
    assert serve.slim_plotly("export default 1;", ("bar",)) is None


def test_compile_plotly_early_parenthesizes_the_bundle_factory_and_nothing_else():
    import serve

    js = _chunk_text()
    out = serve.compile_plotly_early(js)
    # the factory: the UMD call's second argument, up to the brace after `return window.Plotly=...`
    a = re.search(r"\(typeof self<`u`\?self:[\w$]+,", js).end()
    b = js.index("}", js.index("return window.Plotly=")) + 1
    assert js[a:a + 5] == "()=>{" and js[b] == ")"
    assert out == js[:a] + "(" + js[a:b] + ")" + js[b:]
    # the same on the slim chunk, and nothing it does not recognise
    slim = serve.slim_plotly(js, ("scatter", "bar"))
    assert len(serve.compile_plotly_early(slim)) == len(slim) + 2
    assert serve.compile_plotly_early(js.replace("return window.Plotly=", "return window.PlotlyX=")) is None
    assert serve.compile_plotly_early(js + js) is None   # two factories: which one?
    assert serve.compile_plotly_early("export default 1;") is None


# Plotly attribute values that are not trace types (axis, shape and button types).
NOT_TRACES = {"linear", "log", "date", "category", "multicategory", "rect", "line", "circle", "path", "buttons",
              "dropdown", "primary", "secondary", "tertiary"}


def test_the_figures_draw_only_the_trace_types_served():
    """Every trace the code can build, read off its source: go.<Trace>(...) constructors and
    "type": ... values in trace dicts (both branches of a conditional)."""
    from figures.common import TRACE_TYPES

    seen = set()
    for folder in ("figures", "pages", "ui"):
        for f in (ROOT / folder).glob("*.py"):
            text = f.read_text()
            seen |= {n.lower() for n in re.findall(r"\bgo\.([A-Z]\w*)\(", text)} - {"figure", "frame", "layout"}
            for a, b in re.findall(r'"type":\s*"(\w+)"(?:\s+if\s[^\n]*?\belse\s+"(\w+)")?', text):
                seen |= {a, b} - {""}
            seen |= set(re.findall(r'\btype="(\w+)"', text))
    traces = seen - NOT_TRACES
    assert {"scatter", "bar", "heatmap", "scattergl"} <= traces   # the scan finds what is there
    assert traces <= set(TRACE_TYPES), f"add {sorted(traces - set(TRACE_TYPES))} to figures.common.TRACE_TYPES"


def test_preload_plotly_changes_nothing_without_a_writable_temp_folder():
    out = run_fresh("import os, tempfile; import streamlit.file_util as fu; before = fu.get_static_dir(); "
                    "tempfile.tempdir = '/nonexistent/schedlab'; print(serve.preload_plotly(), "
                    "fu.get_static_dir() == before)")
    assert out.stdout.split() == ["None", "True"]


def test_route_through_app_keeps_streamlit_out_of_the_pages_folder_mode():
    """Streamlit sets the old pages/-folder mode only while the flag is unset; serve.py sets it
    first, so a PagesManager made for app.py (a folder with pages/) keeps it off."""
    out = run_fresh("from streamlit.runtime.pages_manager import PagesManager as PM; ok = serve.route_through_app(); "
                    "PM(str(serve.ROOT / 'app.py')); print(ok, PM.uses_pages_directory)")
    assert out.stdout.split() == ["True", "False"]
    # without it, the same PagesManager turns the mode on (what ui.state._ensure_router undoes)
    out = run_fresh("from streamlit.runtime.pages_manager import PagesManager as PM; "
                    "PM(str(serve.ROOT / 'app.py')); print(PM.uses_pages_directory)")
    assert out.stdout.split() == ["True"]
