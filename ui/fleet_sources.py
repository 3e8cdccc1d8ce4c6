"""Where the Fleet page's fleet comes from: a built-in fleet scenario (sim.fleet.scenarios), an
uploaded workload JSON or public request trace (as every page reads them: ui.workloads), or a
real fleet's recordings (one vLLM recording per replica, bundled in samples/fleet/ or uploaded,
read by servers.vllm.fleet.read_fleet).

    picker = FleetPicker("fleet", apply_config, apply_scenario)
    S = PageSettings("fleet", [*picker.settings(), ...]); S.init(fill=picker.fill)
    with st.sidebar: picker.draw()
    if picker.real is not None: real = read_real(*picker.real_input())   # {"fleet", "reps", ...} or {"error"}
    else: workload = picker.require()

Widget keys: keep_fleet_source, keep_fleet_scenario, keep_fleet_trace_limit, keep_fleet_trace_rate,
keep_fleet_real (settings), fleet_upload and fleet_recordings (files). An uploaded recording is
written to a temporary folder for the reader (which reads paths) and the folder is removed
after; the reader's sentences name the uploaded file, never the server's path.
"""
from __future__ import annotations

import hashlib
import json
import re
import tempfile
from functools import lru_cache
from pathlib import Path

import streamlit as st

from sim.fleet.scenarios import DEFAULT_FLEET_SCENARIO, FLEET_SCENARIOS, get_fleet_scenario
from sim.limits import MAX_REQUESTS
from sim.workload import Workload

from .state import Setting
from .workloads import TRACE_LIMIT, WorkloadPicker

SCENARIO, UPLOAD = "Built-in fleet scenario", "Upload a workload JSON"
REAL, REAL_UPLOAD = "A real fleet (bundled recordings)", "A real fleet (upload recordings)"
FILE = "A saved fleet trace file"
SOURCES = (SCENARIO, UPLOAD, REAL, REAL_UPLOAD, FILE)
MAX_FLEET_FILE_BYTES = 512 << 20   # a saved fleet trace the page opens (its tables unzip to a few times that)
SAMPLE_DIR = Path(__file__).resolve().parents[1] / "samples" / "fleet"
MAX_RECORDINGS = 64          # uploaded recordings (replicas) a page reads


@lru_cache(maxsize=1)
def bundled() -> dict[str, dict]:
    """samples/fleet/<name>/manifest.json, by folder name: title, blurb, router, policy,
    router_config, prompts, workers (the recordings in the router's worker order), router_log."""
    out = {}
    for d in sorted(SAMPLE_DIR.glob("*/manifest.json")):
        try:
            doc = json.loads(d.read_text())
        except (OSError, ValueError):
            continue
        if isinstance(doc, dict) and isinstance(doc.get("workers"), list):
            out[d.parent.name] = doc
    return out


@st.cache_data(max_entries=4, show_spinner=False)
def scenario_workload(key: str) -> Workload:
    return get_fleet_scenario(key).workload()


class FleetPicker(WorkloadPicker):
    """ui.workloads.WorkloadPicker with the fleet scenarios and real fleets as sources."""

    def __init__(self, prefix: str, apply_config, apply_scenario):
        super().__init__(prefix, apply_config)
        self.apply_scenario = apply_scenario
        self.real_key = f"keep_{prefix}_real"
        self.recordings_key = f"{prefix}_recordings"
        self.real: tuple[str, object] | None = None

    def settings(self) -> list[Setting]:
        samples = tuple(bundled()) or ("none",)
        return [Setting(self.source_key, SCENARIO, str, choices=SOURCES),
                Setting(self.scenario_key, DEFAULT_FLEET_SCENARIO, str, choices=tuple(FLEET_SCENARIOS)),
                Setting(self.limit_key, TRACE_LIMIT, int, bounds=(1, MAX_REQUESTS)),
                Setting(self.rate_key, 1.0, float, bounds=(0.01, 100.0)),
                Setting(self.real_key, samples[0], str, choices=samples)]

    def scenario_changed(self) -> None:
        sc = get_fleet_scenario(st.session_state[self.scenario_key])
        self.apply_config({**scenario_workload(sc.key).config, **sc.config}, sc.cost)
        self.apply_scenario(sc)

    def fill(self) -> None:
        ss = st.session_state
        source = ss.get(self.source_key, SCENARIO)
        if source == SCENARIO:
            self.scenario_changed()
        elif source == UPLOAD and ss.get(self._json):
            self.apply_config(json.loads(ss[self._json]).get("config") or {}, ss.get(self._cost))

    def is_real(self) -> bool:
        return st.session_state.get(self.source_key) in (REAL, REAL_UPLOAD)

    def is_file(self) -> bool:
        return st.session_state.get(self.source_key) == FILE

    def _draw(self):
        ss = st.session_state
        self.real = None
        st.header("Source")
        source = st.radio("Source", SOURCES, key=self.source_key, on_change=self.fill, label_visibility="collapsed")
        if source == SCENARIO:
            key = st.selectbox("Scenario", list(FLEET_SCENARIOS), key=self.scenario_key,
                               format_func=lambda k: FLEET_SCENARIOS[k].title, on_change=self.scenario_changed)
            return scenario_workload(key), FLEET_SCENARIOS[key].blurb, None
        if source == REAL:
            samples = bundled()
            if not samples:
                return None, "", "No real fleet is bundled with this copy (samples/fleet/ is empty)."
            key = st.selectbox("Recorded fleet", list(samples), key=self.real_key,
                               format_func=lambda k: samples[k].get("title", k))
            self.real = ("bundled", key)
            return None, "", None
        if source == FILE:
            up = st.file_uploader("Fleet trace file", type=None, key=f"{self.prefix}_fleet_file",
                                  help="A fleet trace saved by this page's download or by `python -m sim fleet ... "
                                       "-o FILE`: the routing table and every replica's Trace in one file.")
            self.real = ("file", up)
            return None, "", None
        if source == REAL_UPLOAD:
            files = st.file_uploader("Recordings, one per replica", type=None, accept_multiple_files=True,
                                     key=self.recordings_key,
                                     help="Each replica's SCHEDLAB_VLLM_TRACE file (JSON lines, or .gz), in the "
                                          "router's worker order: the order you add them in. Requests are matched "
                                          "across files by id.")
            self.real = ("upload", list(files or []))
            return None, "", None
        return self._draw_upload()

    def _draw_upload(self):
        return super()._draw_upload(limit_help="How many of the trace's requests run (a page runs at most 50,000).")

    def real_input(self) -> tuple[str, tuple[str, ...], tuple[bytes, ...], dict]:
        """(cache key, display names, file contents, manifest) of the real fleet chosen; ValueError
        (one sentence) when there is none to read."""
        kind, what = self.real
        if kind == "bundled":
            man = bundled()[what]
            names = tuple(str(w) for w in man["workers"])
            datas = tuple((SAMPLE_DIR / what / n).read_bytes() for n in names)
        else:
            files = what
            if not files:
                raise ValueError("Add the fleet's recordings on the left: one vLLM recording per replica, in the "
                                 "router's worker order.")
            if len(files) > MAX_RECORDINGS:
                raise ValueError(f"{len(files)} recordings were added; the page reads at most {MAX_RECORDINGS} "
                                 "(one per replica).")
            names = tuple(f.name for f in files)
            datas = tuple(f.getvalue() for f in files)
            man = {}
        h = hashlib.blake2b(digest_size=16)
        for n, d in zip(names, datas):
            h.update(n.encode() + b"\0" + hashlib.sha256(d).digest())
        return h.hexdigest(), names, datas, man


def _stem(name: str) -> str:
    n = name
    for ext in (".gz", ".jsonl", ".json", ".txt"):
        n = n.removesuffix(ext)
    return re.sub(r"[^A-Za-z0-9._-]+", "_", n)[:60] or "replica"


def _adapters():
    """The real-fleet helpers, wherever this copy has them (servers.vllm.fleet_replay's
    functions, or the same as RealFleet methods)."""
    from servers.vllm import fleet as real_fleet
    try:
        from servers.vllm import fleet_replay as replay_mod
    except ImportError:
        replay_mod = None
    try:
        from sim.fleet.recorded import recorded_fleet
    except ImportError:
        recorded_fleet = None

    def replicas(real, with_costs):
        if replay_mod is not None and hasattr(replay_mod, "recorded_replicas"):
            return replay_mod.recorded_replicas(real, with_costs=with_costs)
        return real.recorded_replicas(with_costs)

    def as_fleet(real, reps):
        if recorded_fleet is not None:
            return recorded_fleet(reps)
        return real.as_fleet()

    def tail(real):
        if replay_mod is not None and hasattr(replay_mod, "response_tail_ms"):
            return float(replay_mod.response_tail_ms(real))
        return float(real.response_tail_ms())

    return real_fleet.read_fleet, replicas, as_fleet, tail


@st.cache_data(max_entries=6, show_spinner="Reading the recordings…")
def read_real(key: str, names: tuple[str, ...], _datas: tuple[bytes, ...]) -> dict:
    """The real fleet of these recordings: {"fleet" (as it ran, a FleetTrace), "reps" (for
    sim.fleet.recorded.replay), "reps_costs" (with cost models fitted, or None and "cost_error"),
    "tail" (the response tail fitted, ms), "warnings", "verdicts", "meta", "requests"}; or
    {"error": one sentence}."""
    read_fleet, replicas, as_fleet, tail = _adapters()
    stems, seen = [], {}
    for n in names:
        s = _stem(n)
        seen[s] = seen.get(s, 0) + 1
        stems.append(s if seen[s] == 1 else f"{s} ({seen[s]})")
    with tempfile.TemporaryDirectory(prefix="schedlab-fleet-") as tmp:
        paths = []
        for i, (n, d) in enumerate(zip(names, _datas)):
            p = Path(tmp) / f"{i:03d}" / (re.sub(r"[^A-Za-z0-9._-]+", "_", Path(n).name)[:80] or "recording")
            p.parent.mkdir()
            p.write_bytes(d)
            paths.append(str(p))

        def clean(text: str) -> str:
            for p, n in zip(paths, names):
                text = text.replace(p, n)
            return text.replace(tmp + "/", "").replace(tmp, "")

        try:
            real = read_fleet(paths, names=stems)
            reps = replicas(real, False)
            fleet = as_fleet(real, reps)
        except (ValueError, OSError) as e:
            return {"error": clean(str(e))}
        try:
            reps_costs, cost_error = replicas(real, True), None
        except ValueError as e:
            reps_costs, cost_error = None, clean(str(e))
        verdicts = []
        for rep in real.replicas:
            d = rep.decisions or {}
            equal = None if d.get("not_simulated") else bool(d.get("equal"))   # None: a vLLM without rules here
            verdicts.append({"replica": rep.name, "file": names[rep.index], "requests": int(len(rep.trace.requests)),
                             "steps": int(len(rep.trace.steps)), "equal": equal,
                             "compared steps": d.get("steps"),
                             "first difference": (d.get("first_difference") or {}).get("step")})
        meta = {k: v for k, v in real.meta.items() if k != "paths"}
        return {"fleet": fleet, "reps": reps, "reps_costs": reps_costs, "cost_error": cost_error,
                "tail": tail(real), "warnings": [clean(w) for w in real.warnings], "verdicts": verdicts,
                "meta": meta, "requests": list(real.workload().requests)}


@st.cache_data(max_entries=4, show_spinner="Opening the fleet trace…")
def read_fleet_file(digest: str, _data: bytes) -> dict:
    """{"fleet": FleetTrace} of a saved fleet trace file, or {"error": one sentence}."""
    from sim.fleet import FleetTrace
    if len(_data) > MAX_FLEET_FILE_BYTES:
        return {"error": f"the file is {len(_data) / 2**20:,.0f} MB; the page opens fleet traces of at most "
                         f"{MAX_FLEET_FILE_BYTES >> 20} MB (`python -m sim fleet` reads any size)"}
    try:
        return {"fleet": FleetTrace.from_bytes(_data)}
    except (ValueError, MemoryError) as e:
        return {"error": str(e)}
