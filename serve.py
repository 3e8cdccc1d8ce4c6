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


if __name__ == "__main__":
    warm()
    from streamlit.web import cli

    sys.argv = ["streamlit", "run", str(ROOT / "app.py"), *sys.argv[1:]]
    sys.exit(cli.main())
