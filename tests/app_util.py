"""The AppTest opening every page test shares: a fresh session on the app, the link's query
parameters set, straight to one page (as a link to it does), no exception on the way."""
from __future__ import annotations

from pathlib import Path

from streamlit.testing.v1 import AppTest

APP = str(Path(__file__).resolve().parents[1] / "app.py")


def open_page(page: str, timeout: float = 90, **params) -> AppTest:
    """`page`: its file under pages/ ("playback.py"); params: the link's query parameters."""
    at = AppTest.from_file(APP, default_timeout=timeout)
    for k, v in params.items():
        at.query_params[k] = v
    at.switch_page(f"pages/{page}").run()
    assert not at.exception, at.exception
    return at
