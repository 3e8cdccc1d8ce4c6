"""Every page in sight, in a real browser at a team demo's 1280x800: the sidebar lists every page
of app.py's menu, none behind Streamlit's "View N more", each link inside the window without
scrolling and not covered by anything, on the pages with the longest sidebars too."""
from __future__ import annotations

import ast
from pathlib import Path

import pytest
from playwright.sync_api import Browser, expect
from live_app import settled  # tests/e2e is on sys.path

ROOT = Path(__file__).resolve().parents[2]
WINDOW = {"width": 1280, "height": 800}


def page_titles() -> list[str]:
    """The titles of every st.Page in app.py, in menu order (read from the source: importing app.py
    would run Streamlit)."""
    titles = []
    for node in ast.walk(ast.parse((ROOT / "app.py").read_text())):
        if isinstance(node, ast.Call) and getattr(node.func, "attr", None) == "Page":
            titles += [k.value.value for k in node.keywords if k.arg == "title"]
    return titles


# where the sidebar holds the most below the menu (the menu is folded only when it has company)
PAGES = ["", "choosing_settings", "fleet", "llama_log", "tenants"]

SEEN = r"""() => [...document.querySelectorAll('[data-testid="stSidebarNav"] a')].map(a => {
    const r = a.getBoundingClientRect();
    const hit = document.elementFromPoint(r.left + r.width / 2, r.top + r.height / 2);
    return {text: a.innerText.trim().split("\n").pop().trim(), top: r.top, bottom: r.bottom, left: r.left, right: r.right,
            onTop: !!hit && (hit === a || a.contains(hit))};
})"""


@pytest.mark.parametrize("path", PAGES, ids=[p or "home" for p in PAGES])
def test_every_page_is_in_the_sidebar_in_sight_at_1280x800(browser: Browser, app_url: str, path: str):
    titles = page_titles()
    assert len(titles) >= 15, titles
    context = browser.new_context(viewport=WINDOW)
    try:
        page = context.new_page()
        page.goto(f"{app_url}/{path}")
        nav = page.get_by_test_id("stSidebarNav")
        expect(nav).to_be_visible(timeout=120_000)
        settled(page, timeout=120_000)
        expect(page.get_by_test_id("stSidebarNavViewButton")).to_have_count(0)   # no "View N more"
        expect(nav.get_by_text("View", exact=False).filter(has_text="more")).to_have_count(0)
        links = page.evaluate(SEEN)
        assert [link["text"] for link in links] == titles, links
        out = [link for link in links
               if not (0 <= link["top"] and link["bottom"] <= WINDOW["height"] and link["right"] <= WINDOW["width"])
               or not link["onTop"]]
        assert not out, f"out of sight at 1280x800: {out}"
    finally:
        context.close()
