"""A page's link reproduces its settings, on the pages whose own tests do not check it: change a
control, the setting appears in st.query_params; open that link in a new session, the control
comes back with the value; the page offers its settings as a file and takes one back."""
from __future__ import annotations

import json
from pathlib import Path

import pytest
from streamlit.testing.v1 import AppTest

APP = str(Path(__file__).resolve().parents[1] / "app.py")

# page, widget key, new value, URL parameter, its text in the link, settings-panel name
CASES = [
    ("tenants", "keep_ten_slots", 6, "ten_slots", "6", "ten"),
    ("disaggregation", "keep_dis_eff", 0.3, "dis_eff", "0.3", "dis"),
    ("admission", "keep_adm_limit", 8, "adm_limit", "8", "adm"),
    ("live_engine", "keep_le_seed", 7, "le_seed", "7", "le"),
]


def widget(at, key):
    for kind in ("number_input", "slider", "selectbox", "toggle", "radio"):
        for w in at.get(kind):
            if getattr(w, "key", None) == key:
                return w
    raise KeyError(key)


@pytest.mark.parametrize("page, key, value, param, text, panel", CASES, ids=[c[0] for c in CASES])
def test_link_reproduces_a_changed_setting(page, key, value, param, text, panel):
    at = AppTest.from_file(APP, default_timeout=180)
    at.switch_page(f"pages/{page}.py").run()
    assert not at.exception, at.exception
    assert widget(at, key).value != value
    widget(at, key).set_value(value).run()
    assert not at.exception, at.exception
    assert at.query_params[param] == [text] or at.query_params[param] == text
    link = {k: (v[0] if isinstance(v, list) else v) for k, v in at.query_params.items()}

    again = AppTest.from_file(APP, default_timeout=180)
    for k, v in link.items():
        again.query_params[k] = v
    again.switch_page(f"pages/{page}.py").run()
    assert not again.exception, again.exception
    assert widget(again, key).value == value
    keys = {getattr(b, "key", None) for b in again.get("download_button")}
    assert f"ui_{panel}_settings_dl" in keys
    assert any("settings" in (getattr(u, "key", "") or "") for u in again.get("file_uploader"))


@pytest.mark.parametrize("page, key, value, param, text, panel", CASES[:3], ids=[c[0] for c in CASES[:3]])
def test_a_changed_setting_survives_a_visit_to_another_page(page, key, value, param, text, panel):
    at = AppTest.from_file(APP, default_timeout=180)
    at.switch_page(f"pages/{page}.py").run()
    widget(at, key).set_value(value).run()
    at.switch_page("pages/why_batch.py").run()
    assert not at.exception, at.exception
    assert param not in at.query_params   # the other page's link holds its own settings only
    at.switch_page(f"pages/{page}.py").run()
    assert not at.exception, at.exception
    assert widget(at, key).value == value
    assert at.query_params[param] in (text, [text])


@pytest.mark.parametrize("page, key, value, param, text, panel", CASES, ids=[c[0] for c in CASES])
def test_a_settings_file_restores_a_setting(page, key, value, param, text, panel):
    from ui.state import FORMAT
    at = AppTest.from_file(APP, default_timeout=180)
    at.switch_page(f"pages/{page}.py").run()
    doc = {"format": FORMAT, "page": panel, "settings": {param: value}}
    at.file_uploader(key=f"ui_{panel}_settings_file").upload("s.json", json.dumps(doc).encode(),
                                                              "application/json").run()
    assert not at.exception and not at.error, (at.exception, at.error)
    assert widget(at, key).value == value
    assert at.query_params[param] in (text, [text])
    other = {**doc, "page": "pb"}   # another page's file changes nothing here, and says why
    at.file_uploader(key=f"ui_{panel}_settings_file").upload("o.json", json.dumps(other).encode(),
                                                              "application/json").run()
    assert at.error and "Could not load o.json" in at.error[0].value
    assert widget(at, key).value == value
