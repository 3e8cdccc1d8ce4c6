"""serve.py imports what the pages need before the server starts, and not torch."""
from __future__ import annotations

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
    out = run_fresh("names = serve.warm(); print(len(names), 'torch' in sys.modules, 'sim.llamalog' in sys.modules, "
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
orig = Path(fu.get_static_dir())
d = serve.preload_plotly()
html = (d / "index.html").read_text()
added = re.findall(r'\\n    <link rel="modulepreload" crossorigin href="\\./(static/js/[^"]+\\.js)" />', html)
stripped = html
for a in added:
    stripped = stripped.replace(f'\\n    <link rel="modulepreload" crossorigin href="./{a}" />', "", 1)
entry = (orig / re.search(r'<script type="module"[^>]*src="\\./(static/js/[^"]+)"', html).group(1)).read_text()
print(fu.get_static_dir() == str(d),                                   # Streamlit now serves the copy
      bool(re.fullmatch(r"static/js/PlotlyChart\\.[^/]+\\.js", added[0])),   # Plotly's chunk first,
      len(added) > 1 and all(a.split("/")[-1] in entry for a in added[1:]),  # then chunks the entry lists
      all((orig / a).is_file() and (d / a).resolve() == (orig / a).resolve() for a in added),
      all((d / e.name).is_symlink() for e in orig.iterdir() if e.name != "index.html"),
      stripped == (orig / "index.html").read_text())                   # nothing else changed
"""


def test_preload_plotly_serves_an_index_that_asks_for_plotlys_chunks():
    assert run_fresh(PRELOAD_CHECK).stdout.split() == ["True"] * 6


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
