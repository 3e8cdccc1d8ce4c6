"""Page settings that live in the URL, survive page switches, and save/load as a small file.

Every run on a page is a deterministic scenario fixed by its settings. A page declares them
once and drives its widgets with the setting keys:

    from ui.state import PageSettings, Setting

    S = PageSettings("cmp", [
        Setting("keep_cmp_scenario", "lesson_abc", str, choices=tuple(scenarios.SCENARIOS)),
        Setting("keep_cmp_budget_b", 8, int, bounds=(1, 1_000_000)),
        Setting("keep_cmp_step", None, int),            # None default: optional, left out when unset
    ])
    S.init(fill=apply_scenario)   # first thing on the page, before any widget
    st.number_input("Budget", 1, 1_000_000, key="keep_cmp_budget_b")   # no value=: the key holds it
    ...
    S.sync_url()                  # after the widgets; again inside a fragment that changes a setting
    with st.sidebar: S.file_panel()   # download / upload the settings as JSON

- `init` on the session's first visit to the page sets each widget key from `st.query_params`
  (the parameter name is the key without "keep_": ?cmp_budget_b=64) or else the default; `fill`
  (optional) runs between defaults and URL values, for values derived from other settings (a
  scenario's own config). Bad URL values are ignored with a warning. On later runs it leaves
  the values alone: keys start with "keep_", which app.py re-assigns every run, so they survive
  page switches.
- `sync_url` writes the current values into the URL (the page owns the whole query string), so
  a copied link reproduces the run.
- `file_panel` offers the settings as `<page>.settings.json` and loads one back (validated;
  a bad file shows st.error and changes nothing).
- `reset` puts every setting back to its default (a button's on_click).
- `given(key)` says whether this run's value of `key` came from the URL or a loaded file (a
  page that resets a value when the run changes, such as a scrub step, keeps a given one).

The pure parts (Setting.parse/check/encode, url_params, settings_json, parse_settings_json)
import no Streamlit state and are unit-tested.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Callable, Iterable

import streamlit as st

from sim.jsonout import dumps_strict
from sim.limits import shown
from sim.workload import read_json

from .labels import inert, short_name

FORMAT = "scheduler-lab-settings"
MAX_SETTINGS_BYTES = 64 * 1024
_TRUE, _FALSE = ("true", "1", "yes", "on"), ("false", "0", "no", "off")


@dataclass(frozen=True)
class Setting:
    """One setting: the widget key that holds it, its default and type, and what it may be.

    type is int, float, bool or str. choices (if any) lists the allowed values; bounds (lo, hi)
    limits numbers. A default of None makes the setting optional (unset = None).
    """

    key: str
    default: Any
    type: type = str
    choices: tuple = ()
    bounds: tuple[float, float] | None = None

    def __post_init__(self) -> None:
        if not self.key.startswith("keep_"):
            raise ValueError(f"setting key {self.key!r} must start with 'keep_' (survives page switches)")
        if self.type not in (int, float, bool, str):
            raise ValueError(f"setting {self.key!r}: type must be int, float, bool or str")

    @property
    def param(self) -> str:
        """Its name in the URL and in a settings file."""
        return self.key.removeprefix("keep_")

    def check(self, value: Any) -> Any:
        """A value (from JSON or code) as this setting's type; ValueError if it does not fit."""
        if value is None:
            if self.default is None:
                return None
            raise ValueError(f"{self.param} must be set")
        t = self.type
        if t is bool:
            if not isinstance(value, bool):
                raise ValueError(f"{self.param} must be true or false, not {shown(value)}")
        elif t is int:
            if isinstance(value, float) and value.is_integer():
                value = int(value)
            if isinstance(value, bool) or not isinstance(value, int):
                raise ValueError(f"{self.param} must be a whole number, not {shown(value)}")
        elif t is float:
            if isinstance(value, bool) or not isinstance(value, (int, float)) or (
                    isinstance(value, int) and abs(value) > 1e308) or not math.isfinite(value):
                raise ValueError(f"{self.param} must be a number, not {shown(value)}")
            value = float(value)
        elif not isinstance(value, str):
            raise ValueError(f"{self.param} must be text, not {shown(value)}")
        if self.choices and value not in self.choices:
            raise ValueError(f"{self.param} must be one of {', '.join(map(str, self.choices))}, not {shown(value)}")
        if self.bounds is not None and not self.bounds[0] <= value <= self.bounds[1]:
            lo, hi = self.bounds
            raise ValueError(f"{self.param} must be from {lo:,} to {hi:,}, not {shown(value)}")
        return value

    def parse(self, raw: str) -> Any:
        """A URL query value (text) as this setting's value; ValueError if it is not one."""
        raw = raw.strip()
        if raw == "" and self.default is None:
            return None
        t = self.type
        try:
            if t is bool:
                low = raw.lower()
                if low not in _TRUE + _FALSE:
                    raise ValueError
                value: Any = low in _TRUE
            elif t is int:
                value = int(raw)
            elif t is float:
                value = float(raw)
            else:
                value = raw
        except ValueError:
            kind = {bool: "true or false", int: "a whole number", float: "a number"}[t]
            raise ValueError(f"{self.param} must be {kind}, not {shown(raw)}") from None
        return self.check(value)

    def encode(self, value: Any) -> str:
        """The URL text of a value (parse(encode(v)) == v)."""
        if value is None:
            return ""
        if self.type is bool:
            return "true" if value else "false"
        if self.type is float:
            return repr(float(value))
        return str(value)


def url_params(settings: Iterable[Setting], values: dict[str, Any]) -> dict[str, str]:
    """{param: text} for the URL, from {key: value}; unset optional settings left out."""
    return {s.param: s.encode(values[s.key]) for s in settings if values.get(s.key) is not None}


def from_url(settings: Iterable[Setting], params: dict[str, Any]) -> tuple[dict[str, Any], list[str]]:
    """({key: value} for the settings present in a query-parameter dict, [problems])."""
    out: dict[str, Any] = {}
    problems: list[str] = []
    for s in settings:
        if s.param not in params:
            continue
        raw = params[s.param]
        if isinstance(raw, list):
            raw = raw[-1] if raw else ""
        try:
            out[s.key] = s.parse(str(raw))
        except ValueError as e:
            problems.append(str(e))
    return out, problems


def settings_json(page: str, settings: Iterable[Setting], values: dict[str, Any]) -> bytes:
    """The settings file: {"format", "page", "settings": {param: value}} (unset ones left out)."""
    doc = {"format": FORMAT, "page": page,
           "settings": {s.param: values[s.key] for s in settings if values.get(s.key) is not None}}
    return (dumps_strict(doc, indent=1) + "\n").encode()


def parse_settings_json(data: bytes, page: str, settings: Iterable[Setting]) -> dict[str, Any]:
    """{key: value} from a settings file for this page; ValueError with a plain message if the
    file is not one (too big, not JSON, another page's, an unknown or out-of-range setting)."""
    if len(data) > MAX_SETTINGS_BYTES:
        raise ValueError(f"a settings file is at most {MAX_SETTINGS_BYTES // 1024} KB")
    doc = read_json(data)
    if not isinstance(doc, dict) or doc.get("format") != FORMAT or not isinstance(doc.get("settings"), dict):
        raise ValueError(f'not a settings file (expected {{"format": "{FORMAT}", "page": ..., "settings": {{...}}}})')
    if doc.get("page") != page:
        raise ValueError(f"these are settings for the {shown(doc.get('page'))} page, not {page!r}")
    by_param = {s.param: s for s in settings}
    unknown = sorted(set(doc["settings"]) - set(by_param))
    if unknown:
        names = ", ".join(u if len(u) <= 24 else u[:21] + "..." for u in unknown[:3]) + (
            f" and {len(unknown) - 3:,} more" if len(unknown) > 3 else "")
        raise ValueError(f"unknown settings: {names}")
    return {by_param[p].key: by_param[p].check(v) for p, v in doc["settings"].items()}


# ---------------------------------------------------------------------------------------------
# The Streamlit side
# ---------------------------------------------------------------------------------------------

def _ensure_router() -> None:
    """Run the page through app.py's router even when a link opens it straight away.

    Until app.py has run once in the server process, Streamlit treats the pages/ folder the old
    way: a link to /compare runs pages/compare.py alone (no st.set_page_config, no keep_ loop,
    a navigation list of file names). Switch that mode off and rerun; the rerun runs app.py,
    whose st.navigation finds the same page again (a page's id is its url_path, so each
    st.Page's url_path must equal its file's stem).
    """
    try:
        from streamlit.runtime.pages_manager import PagesManager
    except ImportError:  # a Streamlit without the old mode
        return
    if PagesManager.uses_pages_directory:
        PagesManager.uses_pages_directory = False
        st.rerun()


class PageSettings:
    """A page's declared settings, bound to st.session_state and st.query_params."""

    def __init__(self, page: str, settings: Iterable[Setting]):
        self.page = page
        self.settings = list(settings)
        self.by_key = {s.key: s for s in self.settings}
        self._fill: Callable[[], None] | None = None
        self._given: set[str] = set()
        # this helper's own state keys (not widgets: plain session_state survives page switches)
        self._k_loaded, self._k_given, self._k_error = (f"_ui_{w}_{page}" for w in ("loaded", "given", "file_error"))
        self.upload_key = f"ui_{page}_settings_file"  # the settings-file uploader's widget key

    def _apply(self, values: dict[str, Any]) -> None:
        ss = st.session_state
        ss.update(values)
        if self._fill is not None:
            self._fill()
            ss.update(values)  # what was given wins over what fill derived

    def init(self, fill: Callable[[], None] | None = None) -> None:
        """Before any widget: on the first visit, URL values (else defaults, then `fill`);
        after a settings file was loaded, remember which values it gave."""
        _ensure_router()
        ss = st.session_state
        self._fill = fill
        if not ss.get(self._k_loaded):
            ss[self._k_loaded] = True
            for s in self.settings:
                if s.key not in ss:
                    ss[s.key] = s.default
            given, problems = from_url(self.settings, st.query_params.to_dict())
            self._apply(given)
            self._given = set(given)
            for p in problems:
                st.warning(inert(f"Ignored a setting in the link: {p}."), icon=":material/link_off:")
        else:
            for s in self.settings:  # e.g. a key another page or a test removed
                if s.key not in ss:
                    ss[s.key] = s.default
            self._given = set(ss.pop(self._k_given, ()))

    def reset(self) -> None:
        """Every setting back to its default: the on_click of a "Back to the defaults" button."""
        ss = st.session_state
        for s in self.settings:
            ss[s.key] = s.default

    def given(self, key: str) -> bool:
        """Whether this run's value of `key` came from the link or a loaded settings file."""
        return key in self._given

    def values(self) -> dict[str, Any]:
        """{key: current value}."""
        ss = st.session_state
        return {s.key: ss.get(s.key, s.default) for s in self.settings}

    def sync_url(self) -> None:
        """Write the current values into the URL (only when they differ from what it holds)."""
        want = url_params(self.settings, self.values())
        if st.query_params.to_dict() != want:
            st.query_params.from_dict(want)

    def _load_file(self) -> None:
        """file_uploader on_change: apply a settings file before the widgets are drawn."""
        ss = st.session_state
        up = ss.get(self.upload_key)
        ss.pop(self._k_error, None)
        if up is None:
            return
        try:
            values = parse_settings_json(up.getvalue(), self.page, self.settings)
        except ValueError as e:
            ss[self._k_error] = f"Could not load {short_name(up.name)}: {e}."
            return
        self._apply(values)
        ss[self._k_given] = list(values)

    def file_panel(self) -> None:
        """Download the settings as JSON; upload one to restore them."""
        data = settings_json(self.page, self.settings, self.values())
        st.download_button("Download settings", data=data, file_name=f"{self.page}.settings.json",
                           mime="application/json", on_click="ignore", key=f"ui_{self.page}_settings_dl",
                           icon=":material/download:", width="stretch",
                           help="These settings as a small JSON file; load it here later, or send it to a "
                                "colleague. The page's link (the address bar) holds the same settings.")
        st.file_uploader("Load settings", type=["json"], key=self.upload_key, on_change=self._load_file,
                         help="A file saved with 'Download settings' on this page.")
        err = st.session_state.get(self._k_error)
        if err:
            st.error(inert(err), icon=":material/error:")
