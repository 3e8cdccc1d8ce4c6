"""The workload picker: a built-in scenario or an uploaded workload JSON or request trace, for any page.

    from ui.workloads import WorkloadPicker
    picker = WorkloadPicker("cmp", apply_config)       # apply_config(config: dict, cost: str | None)
    S = PageSettings("cmp", [*picker.settings(), ...])
    S.init(fill=picker.fill)                           # a link's scenario brings its own config
    with st.sidebar:
        picker.draw()                                  # before the widgets apply_config sets
    ...
    workload = picker.require()                        # main area: error / hint + st.stop, or the blurb

Widget keys: keep_<prefix>_source, keep_<prefix>_scenario, keep_<prefix>_trace_limit,
keep_<prefix>_trace_rate (settings, in the URL) and <prefix>_upload (the file; an upload cannot
live in a URL). An upload is recognised by content (sim.inputs.parse_workload): a workload JSON,
or a public request trace (Azure or BurstGPT CSV, Mooncake JSON lines, gzipped or not), read
with a progress bar; of a trace, the first trace_limit requests by arrival run, arrivals
trace_rate times as fast, and the page's cost model is set to a roofline in ms (the trace's
clock). Choosing a scenario or uploading a
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
from sim.limits import MAX_REQUESTS
from sim.public_traces import FORMATS, UnknownFormat, describe
from sim.workload import Workload

from . import primer
from .labels import inert, short_name
from .state import Setting

BUILTIN, UPLOAD = "Built-in scenario", "Upload a workload JSON"
UPLOAD_HELP = ('The vLLM oracle\'s workload format: {"config": {...}, "requests": '
               '[{"id", "arrival_step", "prompt_len", "max_tokens", "priority"}, ...]}; or a public request '
               'trace: Azure LLM inference (CSV TIMESTAMP,ContextTokens,GeneratedTokens), BurstGPT (CSV '
               'Timestamp,Model,Request tokens,Response tokens,...) or Mooncake (JSON lines with timestamp, '
               'input_length, output_length, hash_ids); .gz too')
UPLOAD_TYPES = None  # any name: the content says what a file is (traces come as .csv, .txt, .jsonl, .gz, ...)
TRACE_LIMIT = 500  # requests of a trace a page runs by default: a few minutes of traffic, seconds to simulate


def show_formats() -> None:
    """Under a refusal of a file that is none of them: the formats an upload may be."""
    st.caption("Accepted formats (plain or gzipped, any file name):\n"
               + "\n".join(f"- **{label}**: `{what}`" for label, what in FORMATS))


@st.cache_resource(max_entries=8, show_spinner=False)
def _upload_workload(digest: str, name: str, _text: str) -> Workload:
    """An upload's Workload, parsed once (a million requests take seconds to check and build), and
    shared: the pages only read a workload."""
    return Workload.from_json(json.loads(_text), name=name)


class WorkloadPicker:
    def __init__(self, prefix: str, apply_config: Callable[[dict, str | None], None]):
        self.prefix = prefix
        self.apply_config = apply_config
        self.source_key = f"keep_{prefix}_source"
        self.scenario_key = f"keep_{prefix}_scenario"
        self.upload_key = f"{prefix}_upload"
        self._json, self._name, self._digest = (f"{prefix}_upload_{w}" for w in ("json", "name", "digest"))
        self.limit_key, self.rate_key = f"keep_{prefix}_trace_limit", f"keep_{prefix}_trace_rate"
        self._cost, self._blurb, self._options = (f"{prefix}_upload_{w}" for w in ("cost", "blurb", "options"))
        self._drawn: tuple[Workload | None, str, str | None] = (None, "", None)
        self._formats_hint = False  # the last upload was none of the formats: require() lists them

    def settings(self) -> list[Setting]:
        return [Setting(self.source_key, BUILTIN, str, choices=(BUILTIN, UPLOAD)),
                Setting(self.scenario_key, scenarios.DEFAULT_SCENARIO, str, choices=tuple(scenarios.SCENARIOS)),
                Setting(self.limit_key, TRACE_LIMIT, int, bounds=(1, MAX_REQUESTS)),
                Setting(self.rate_key, 1.0, float, bounds=(0.01, 100.0))]

    def scenario_changed(self) -> None:
        sc = scenarios.get(st.session_state[self.scenario_key])
        self.apply_config(sc.build().config, sc.cost)

    def fill(self) -> None:
        """Apply the current source's config: the scenario's, or the uploaded file's."""
        ss = st.session_state
        if ss.get(self.source_key, BUILTIN) == BUILTIN:
            self.scenario_changed()
        elif ss.get(self._json):
            self.apply_config(json.loads(ss[self._json]).get("config") or {}, ss.get(self._cost))

    def draw(self) -> tuple[Workload | None, str, str | None]:
        """The widgets (call inside the sidebar). Returns (workload or None, blurb, problem)."""
        self._formats_hint = False
        self._drawn = self._draw()
        return self._drawn

    def require(self) -> Workload:
        """In the main area: the workload, after its blurb; or st.error / st.info and a stop (ui.primer.stop)."""
        workload, blurb, problem = self._drawn
        if problem:
            st.error(inert(problem), icon=":material/error:")
            if self._formats_hint:  # the refusal is one line; what each format looks like goes under it
                show_formats()
            primer.stop()
        if workload is None:
            st.info("Upload a workload JSON on the left (the vLLM oracle's format, or a request trace: Azure, "
                    "BurstGPT or Mooncake), or pick a built-in scenario.",
                    icon=":material/upload_file:")
            primer.stop()
        if blurb:
            st.markdown(blurb)
        return workload

    def _draw(self) -> tuple[Workload | None, str, str | None]:
        st.header("Workload")
        source = st.radio("Source", [BUILTIN, UPLOAD], key=self.source_key, on_change=self.fill,
                          label_visibility="collapsed")
        if source == BUILTIN:
            key = st.selectbox("Scenario", list(scenarios.SCENARIOS), key=self.scenario_key,
                               format_func=lambda k: scenarios.SCENARIOS[k].title, on_change=self.scenario_changed)
            return scenarios.workload(key), scenarios.SCENARIOS[key].blurb, None
        return self._draw_upload()

    def _draw_upload(self, limit_help: str = ("How many of the trace's requests run. A trace can hold millions; every "
                                               "step of a run is drawn, so a page runs a few minutes of traffic at a "
                                               "time.")):
        """The upload branch: a workload JSON or a public request trace (the Fleet page's picker
        draws it too)."""
        ss = st.session_state
        up = st.file_uploader("Workload JSON or request trace", type=UPLOAD_TYPES, key=self.upload_key,
                              help=UPLOAD_HELP)
        with st.expander("Request traces (CSV, JSON lines)"):
            st.number_input("Requests (the first, by arrival)", 1, MAX_REQUESTS, step=100, key=self.limit_key,
                            help=limit_help)
            st.number_input("Arrival rate ×", 0.01, 100.0, step=0.5, key=self.rate_key,
                            help="Arrivals this many times as fast as recorded (2: half the gaps).")
        if up is not None:
            data = up.getvalue()
            digest = hashlib.sha256(data).hexdigest()
            options = (int(ss[self.limit_key]), float(ss[self.rate_key]))
            if ss.get(self._digest) != digest or ss.get(self._options) != options:
                problem = self._read(data, up.name, options, new_file=ss.get(self._digest) != digest)
                if problem:
                    for k in (self._json, self._digest, self._cost, self._blurb):
                        ss.pop(k, None)
                    return None, "", problem
                ss[self._digest], ss[self._options] = digest, options
        if not ss.get(self._json):
            return None, "", None
        name = ss.get(self._name, "upload")
        workload = _upload_workload(hashlib.sha256(ss[self._json].encode()).hexdigest(), name, ss[self._json])
        if up is None:
            st.caption(f"Using {inert(name)} (uploaded earlier).")
        blurb = ss.get(self._blurb) or f"Uploaded workload **{inert(name)}**: {len(workload.requests):,} requests."
        return workload, blurb, None

    def _read(self, data: bytes, name: str, options: tuple[int, float], new_file: bool) -> str | None:
        """Parse an upload (a progress bar while a trace is read); keep it in the session, or
        return the sentence that says why not. A new file fills the page's settings."""
        ss = st.session_state
        bar = st.progress(0.0, text=f"Reading {name}…")

        def progress(done: int, total: int) -> None:
            bar.progress(min(done / max(total, 1), 1.0), text=f"Reading {name}: {done / 2**20:,.1f} of "
                                                              f"{total / 2**20:,.1f} MB")
        try:
            wl = parse_workload(data, name, limit=options[0], rate_scale=options[1], progress=progress)
        except ValueError as e:
            self._formats_hint = isinstance(e, UnknownFormat)
            return f"Could not read {short_name(name)}: {e}."
        finally:
            bar.empty()
        source = getattr(wl, "source", None)
        ss[self._json] = json.dumps(wl.to_json())
        ss[self._name] = name
        ss[self._cost] = source["cost"] if source else None
        ss[self._blurb] = (f"Uploaded trace **{inert(name)}**. {describe(source)} Steps therefore cost milliseconds: "
                           f"the step cost was set to {source['cost']} (a roofline; change it in the settings)."
                           if source else None)
        if new_file:
            self.apply_config(wl.config, ss[self._cost])
        return None
