"""Start the dashboard warm: import what every page needs, then run `streamlit run app.py`.

    .venv/bin/python serve.py [streamlit options, e.g. --server.port 8600]

`streamlit run app.py` imports a page's modules (pandas, Plotly, the simulator, the figure
builders) during the first visitor's first page, which then waits for them. Imported here,
before the server listens, they cost the server's start instead (torch stays lazy: the Live
engine page loads it in the background).
"""
from __future__ import annotations

import importlib
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


if __name__ == "__main__":
    warm()
    skip_repl_check()
    from streamlit.web import cli

    sys.argv = ["streamlit", "run", str(ROOT / "app.py"), *sys.argv[1:]]
    sys.exit(cli.main())
