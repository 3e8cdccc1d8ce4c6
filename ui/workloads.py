"""The workload picker: a built-in scenario or an uploaded workload JSON, for any page.

    from ui.workloads import WorkloadPicker
    picker = WorkloadPicker("cmp", apply_config)       # apply_config(config: dict, cost: str | None)
    S = PageSettings("cmp", [*picker.settings(), ...])
    S.init(fill=picker.fill)                           # a link's scenario brings its own config
    with st.sidebar:
        picker.draw()                                  # before the widgets apply_config sets
    ...
    workload = picker.require()                        # main area: error / hint + st.stop, or the blurb

Widget keys: keep_<prefix>_source, keep_<prefix>_scenario (both settings, in the URL) and
<prefix>_upload (the file; an upload cannot live in a URL). Choosing a scenario or uploading a
file calls apply_config with its config (and the scenario's cost preset), so the page's
setting widgets show what the workload asks for. A bad file gives `problem` (a plain sentence
for st.error) and no workload; `require()` shows it (or a hint when no file came yet) and stops
the page, else shows the scenario's blurb and returns the workload.
"""
from __future__ import annotations

import hashlib
import json
from typing import Callable

import streamlit as st

from sim import scenarios
from sim.inputs import parse_workload
from sim.workload import Workload

from . import primer
from .state import Setting

BUILTIN, UPLOAD = "Built-in scenario", "Upload a workload JSON"
UPLOAD_HELP = ('The vLLM oracle\'s workload format: {"config": {...}, "requests": '
               '[{"id", "arrival_step", "prompt_len", "max_tokens", "priority"}, ...]}')


class WorkloadPicker:
    def __init__(self, prefix: str, apply_config: Callable[[dict, str | None], None]):
        self.prefix = prefix
        self.apply_config = apply_config
        self.source_key = f"keep_{prefix}_source"
        self.scenario_key = f"keep_{prefix}_scenario"
        self.upload_key = f"{prefix}_upload"
        self._json, self._name, self._digest = (f"{prefix}_upload_{w}" for w in ("json", "name", "digest"))
        self._drawn: tuple[Workload | None, str, str | None] = (None, "", None)

    def settings(self) -> list[Setting]:
        return [Setting(self.source_key, BUILTIN, str, choices=(BUILTIN, UPLOAD)),
                Setting(self.scenario_key, scenarios.DEFAULT_SCENARIO, str, choices=tuple(scenarios.SCENARIOS))]

    def scenario_changed(self) -> None:
        sc = scenarios.get(st.session_state[self.scenario_key])
        self.apply_config(sc.build().config, sc.cost)

    def fill(self) -> None:
        """Apply the current source's config: the scenario's, or the uploaded file's."""
        ss = st.session_state
        if ss.get(self.source_key, BUILTIN) == BUILTIN:
            self.scenario_changed()
        elif ss.get(self._json):
            self.apply_config(json.loads(ss[self._json]).get("config") or {}, None)

    def draw(self) -> tuple[Workload | None, str, str | None]:
        """The widgets (call inside the sidebar). Returns (workload or None, blurb, problem)."""
        self._drawn = self._draw()
        return self._drawn

    def require(self) -> Workload:
        """In the main area: the workload, after its blurb; or st.error / st.info and a stop (ui.primer.stop)."""
        workload, blurb, problem = self._drawn
        if problem:
            st.error(problem, icon=":material/error:")
            primer.stop()
        if workload is None:
            st.info("Upload a workload JSON on the left (the vLLM oracle's format), or pick a built-in scenario.",
                    icon=":material/upload_file:")
            primer.stop()
        if blurb:
            st.markdown(blurb)
        return workload

    def _draw(self) -> tuple[Workload | None, str, str | None]:
        ss = st.session_state
        st.header("Workload")
        source = st.radio("Source", [BUILTIN, UPLOAD], key=self.source_key, on_change=self.fill,
                          label_visibility="collapsed")
        if source == BUILTIN:
            key = st.selectbox("Scenario", list(scenarios.SCENARIOS), key=self.scenario_key,
                               format_func=lambda k: scenarios.SCENARIOS[k].title, on_change=self.scenario_changed)
            return scenarios.workload(key), scenarios.SCENARIOS[key].blurb, None
        up = st.file_uploader("Workload JSON", type=["json"], key=self.upload_key, help=UPLOAD_HELP)
        if up is not None:
            data = up.getvalue()
            digest = hashlib.sha256(data).hexdigest()
            if ss.get(self._digest) != digest:
                try:
                    wl = parse_workload(data, up.name)
                except ValueError as e:
                    for k in (self._json, self._digest):
                        ss.pop(k, None)
                    return None, "", f"Could not read {up.name}: {e}."
                ss[self._json] = json.dumps(wl.to_json())
                ss[self._name] = up.name
                ss[self._digest] = digest
                self.apply_config(wl.config, None)
        if not ss.get(self._json):
            return None, "", None
        name = ss.get(self._name, "upload")
        workload = Workload.from_json(json.loads(ss[self._json]), name=name)
        if up is None:
            st.caption(f"Using {name} (uploaded earlier).")
        return workload, f"Uploaded workload **{name}**: {len(workload.requests):,} requests.", None
