"""Fleet: N replicas behind a router, on one clock. What each replica did, and why each request
went where; two router settings on identical arrivals; a real fleet's recordings beside a
router policy's prediction.

A thin page: the fleet comes from ui.fleet_sources (a fleet scenario, an upload, or real
recordings read by servers.vllm.fleet), runs from ui.fleet_runs (sim.fleet, cached), every chart
and table from figures.fleet (and figures.playback / figures.compare for one replica or a
per-request A/B); settings live in the URL (ui.state). Nothing from a workload, a recording or
a log is rendered as HTML: ids reach the page through tables, figures and escaped text.
"""
from __future__ import annotations

import hashlib
import json

import streamlit as st

from figures.animate import from_spec
from figures.compare import change_figure
from figures.fleet import (busiest_time, explain_decision, first_of_reason, fleet_at, fleet_span, lanes_figure,
                           metrics_table, placement_figure, request_changes, scores_figure, signals_figure, step_at,
                           window_of)
from figures.playback import inspector_tables, kv_map_figure
from sim.cost import COST_PRESETS
from sim.fleet.export import fleet_chrome_trace_bytes, routes_csv
from sim.fleet.metrics import fleet_warnings, group_placement, prefix_groups
from sim.fleet.recorded import TIMINGS
from sim.limits import load_json
from sim.scheduler import CONFIG_BOUNDS as BOUNDS, SchedulerConfig
from sim.workload import effective_config
from ui import primer
from ui.fleet_controls import MAX_MS, MAX_PAGE_REPLICAS, RouterSide, router_label, time_scrubber
from ui.fleet_runs import (MAX_PAGE_REQUESTS, MAX_PROMPT_TOKENS, MAX_TOKEN_ROWS, fleet_agreement, fleet_key, fleet_numbers,
                           predicted_fleet, run_fleet)
from ui.fleet_sources import FleetPicker, read_fleet_file, read_real
from ui.labels import fmt, inert, plain
from ui.state import PageSettings, Setting
from ui.window import FleetWindowPicker

ss = st.session_state
A, B = RouterSide("a", "cache_aware"), RouterSide("b", "round_robin")
CHANGE_LABELS = {"e2e": "End-to-end latency", "ttft": "Time to first token"}
WINDOWS = {"all": None, "60000": 60_000.0, "10000": 10_000.0, "2000": 2_000.0, "500": 500.0}
WINDOW_LABELS = {"all": "the whole run", "60000": "60 s around the scrub time", "10000": "10 s around it",
                 "2000": "2 s around it", "500": "0.5 s around it"}
TIMING_LABELS = {"recorded": "recorded: the router's signals from the recordings (checks the rule)",
                 "simulated": "simulated: every replica predicted (a cost model fitted on its recording)"}
CHART = {"displaylogo": False}
_D = SchedulerConfig()
CFG_KEYS = {"blocks": "num_gpu_blocks", "max_seqs": "max_num_seqs", "budget": "max_num_batched_tokens"}


def apply_config(config: dict, cost: str | None = None) -> None:
    """A workload's config into the replicas' common settings (and its cost preset)."""
    c = {**_D.to_dict(), **effective_config(config)}
    for knob, name in CFG_KEYS.items():
        ss[f"keep_fleet_{knob}"] = int(c[name])
    ss["keep_fleet_prefix"] = bool(c["enable_prefix_caching"])
    ss["keep_fleet_async"] = bool(c.get("async_scheduling", False))
    if cost:
        ss["keep_fleet_cost"] = cost


def apply_scenario(sc) -> None:
    A.apply(sc.a)
    B.apply(sc.b)


PICKER = FleetPicker("fleet", apply_config, apply_scenario)
SPAN = FleetWindowPicker("fleet", time_key="keep_fleet_t")  # a long fleet's overview, and the span dragged on it
SETTINGS = PageSettings("fleet", [
    *PICKER.settings(),
    Setting("keep_fleet_cost", "a100-8B-fp16", str, choices=tuple(COST_PRESETS)),
    *(Setting(f"keep_fleet_{knob}", getattr(_D, name), int, bounds=BOUNDS[name]) for knob, name in CFG_KEYS.items()),
    Setting("keep_fleet_prefix", _D.enable_prefix_caching, bool),
    Setting("keep_fleet_async", _D.async_scheduling, bool),
    Setting("keep_fleet_replica_configs", "", str),
    *A.settings(), *B.settings(),
    Setting("keep_fleet_ab", True, bool),
    Setting("keep_fleet_view", "a", str, choices=("a", "b")),
    Setting("keep_fleet_t", None, int, bounds=(0, 10**13)),
    Setting("keep_fleet_window", "all", str, choices=tuple(WINDOWS)),
    Setting("keep_fleet_request", None, str),
    Setting("keep_fleet_inspect", 0, int, bounds=(0, MAX_PAGE_REPLICAS - 1)),
    Setting("keep_fleet_predict", False, bool),
    Setting("keep_fleet_timing", "recorded", str, choices=TIMINGS),
    Setting("keep_fleet_real_tail", None, float, bounds=(0.0, MAX_MS)),
    Setting("keep_fleet_change", "e2e", str, choices=tuple(CHANGE_LABELS)),
    *SPAN.settings(),
])


def common_config() -> dict:
    return {**{name: int(ss[f"keep_fleet_{knob}"]) for knob, name in CFG_KEYS.items()},
            "enable_prefix_caching": bool(ss["keep_fleet_prefix"]), "async_scheduling": bool(ss["keep_fleet_async"])}


def replica_overrides() -> list | None:
    """keep_fleet_replica_configs: a JSON list of per-replica config overrides, or None."""
    text = (ss.get("keep_fleet_replica_configs") or "").strip()
    if not text:
        return None
    try:   # the upload rules (size, depth, valid Unicode), as every JSON a user gives
        doc = load_json(text.encode("utf-8", "surrogatepass"), "the replicas' own settings", max_bytes=64 * 1024,
                        once=True)
    except ValueError as e:
        raise ValueError(f"{e}: give a JSON list of objects, such as "
                         '[{}, {"num_gpu_blocks": 500}] (replica 1 with 500 KV blocks)') from None
    if not isinstance(doc, list) or not all(isinstance(c, dict) for c in doc) or len(doc) > MAX_PAGE_REPLICAS:
        raise ValueError(f"the replicas' own settings must be a JSON list of up to {MAX_PAGE_REPLICAS} objects, "
                         "one per replica in worker order")
    return doc


# ---------------------------------------------------------------------------------------------
# The views every source shares
# ---------------------------------------------------------------------------------------------

@st.cache_data(max_entries=16, show_spinner=False)
def signals_spec(key: str, _fleet) -> dict:
    return signals_figure(_fleet).to_plotly_json()


@st.cache_data(max_entries=16, show_spinner=False)
def lanes_spec(key: str, window: tuple[float, float], _fleet) -> dict:
    return lanes_figure(_fleet, None, window).to_plotly_json()


@st.cache_data(max_entries=8, show_spinner=False)
def busiest(key: str, _fleet) -> float:
    return busiest_time(_fleet)


@st.cache_data(max_entries=8, show_spinner="Comparing every request…")
def changes(key_a: str, key_b: str, _a, _b):
    return request_changes(_a, _b)


def with_marker(spec: dict, t: float):
    """A cached figure with the scrub time marked across it."""
    fig = from_spec(spec)
    fig.layout.shapes = [{"type": "line", "xref": "x", "yref": "paper", "x0": t, "x1": t, "y0": 0, "y1": 1,
                          "line": {"color": "#111827", "width": 2}, "layer": "above", "name": "scrub"}]
    fig.layout.meta = {**(spec["layout"].get("meta") or {}), "t": t}
    return fig


@st.fragment
def timeline(fleet, key: str, title: str) -> None:
    """The lanes, the signals and the fleet at the scrubbed time: one scrubber drives them all."""
    span = SPAN.pick(fleet, key)
    lo, hi = fleet_span(fleet)
    if span is not None and span[0] < hi and span[1] > lo:   # the scrubber stays inside the span dragged
        lo, hi = max(lo, span[0]), min(hi, span[1])
    st.caption(f"Showing {plain(title)}. One row per replica (top to bottom in worker order), one line per slot, "
               "on one time axis: the colour says which request held the slot at that moment (neighbours differ; "
               "hover for its id), lighter is prompt work, darker recomputation, a red × a preemption. The dark "
               "line is the scrubbed time, on every row.")
    c1, c2 = st.columns([3, 1], vertical_alignment="bottom")
    with c1:
        t, step = time_scrubber("keep_fleet_t", lo, hi, default=busiest(key, fleet),
                                help="Scrub the fleet's clock: the marker moves on every replica's lanes and "
                                     "signals, and the tables below show that moment.")
    c2.selectbox("Lanes show", list(WINDOWS), key="keep_fleet_window", format_func=WINDOW_LABELS.get,
                 disabled=span is not None, help="The span dragged on the overview wins while there is one.")
    SETTINGS.sync_url()
    window = (lo, hi) if span else window_of(fleet, t, WINDOWS[ss["keep_fleet_window"]])
    spec = lanes_spec(key, (round(window[0], 3), round(window[1], 3)), fleet)
    fig = with_marker(spec, float(t))
    meta = fig.layout.meta
    st.plotly_chart(fig, key="fleet_lanes", theme=None, config=CHART)
    span = window[1] - window[0]
    st.caption(f"{meta['bins']:,} time columns over {span:,.0f} ms (each {span / meta['bins']:,.1f} ms: the state at "
               "its middle). Zoom in with the box tool, or narrow the window to the scrubbed time."
               + ("" if meta["hover"] else " Too many cells for per-cell request ids: the tables below name them."))
    st.markdown(f"**The fleet at {t:,} ms**")
    st.dataframe(fleet_at(fleet, float(t)), hide_index=True, key="fleet_at",
                 column_config={"KV in use %": st.column_config.NumberColumn(format="%.1f")})
    st.markdown("**Per replica over time**: waiting and running requests, KV blocks in use, and the share of "
                "prompt tokens each replica found in its prefix cache so far (each line at most "
                "1,500 points, fewer with many replicas: the peak of each time bin). Click a replica in the legend "
                "to hide it.")
    st.plotly_chart(with_marker(signals_spec(key, fleet), float(t)), key="fleet_signals", theme=None, config=CHART)
    names = fleet.names
    if ss.get("keep_fleet_inspect", 0) >= len(names):
        ss["keep_fleet_inspect"] = 0
    pick = st.selectbox("Look inside one replica at this time", list(range(len(names))), key="keep_fleet_inspect",
                        format_func=lambda i: names[i])
    SETTINGS.sync_url()
    tr = fleet.replicas[pick]
    s = step_at(tr, float(t))
    if s is None:
        st.caption(f"{plain(names[pick])} has run no step yet at {t:,} ms.")
        return
    left, right = st.columns(2, gap="large")
    with left:
        fig = kv_map_figure(tr, s)
        # half the page's width: its legend takes two or three rows, as the browser's fonts set
        # them (room for three declared, so Plotly draws it once)
        fig.update_layout(margin={"t": 104, "b": 16})
        m = fig.layout.meta
        st.markdown(f"**{plain(names[pick])}, KV blocks after step {s}**: {m['used']} in use, {m['free']} free"
                    + (f", {m['cached_free']} cached-free" if m["cached_free"] else ""))
        st.plotly_chart(fig, key="fleet_kv", theme=None, config=CHART)
    with right:
        batch, events = inspector_tables(tr, s)
        st.markdown(f"**Batch of step {s}**")
        st.dataframe(batch.drop(columns="tenant", errors="ignore"), hide_index=True, key="fleet_batch")
        if len(events):
            st.dataframe(events, hide_index=True, key="fleet_events")


@st.fragment
def routing(fleet, table, router: str) -> None:
    """The routing table, and one request's decision explained."""
    st.dataframe(table, hide_index=True, key="fleet_routes", height=320,
                 column_config={"arrival (ms)": st.column_config.NumberColumn(format="%.1f")})
    ids = table["request"].tolist()
    if not ids:
        return
    if ss.get("keep_fleet_request") not in set(ids):
        ss["keep_fleet_request"] = first_of_reason(fleet)
    rid = st.selectbox("Explain one decision", ids, key="keep_fleet_request",
                       help="Any request of the table: the rule that sent it and every scorer's score per replica.")
    SETTINGS.sync_url()
    st.markdown(plain(explain_decision(fleet, rid, router)))
    fig = scores_figure(fleet, rid)
    if fig.layout.meta["scorers"]:
        st.plotly_chart(fig, key="fleet_scores", theme=None, config=CHART)


def exports(fleet, stem: str, side: str, label: str) -> None:
    c1, c2, c3 = st.columns(3)
    c1.download_button(f"{label} Fleet trace (.fleet.gz)", data=lambda: fleet.to_bytes(),
                       file_name=f"{stem}.fleet.gz", mime="application/gzip", on_click="ignore",
                       key=f"fleet_{side}_dl_trace", icon=":material/download:", width="stretch",
                       help="The routing table and every replica's Trace in one file (sim.fleet.FleetTrace.load).")
    c2.download_button(f"{label} Routing table (.csv)", data=lambda: routes_csv(fleet),
                       file_name=f"{stem}.routes.csv", mime="text/csv", on_click="ignore",
                       key=f"fleet_{side}_dl_routes", icon=":material/table_view:", width="stretch",
                       help="One row per request: arrival, replica, rule, candidates, scores (JSON), detail.")
    c3.download_button(f"{label} Perfetto / Chrome trace (.json)", data=lambda: fleet_chrome_trace_bytes(fleet),
                       file_name=f"{stem}.perfetto.json", mime="application/json", on_click="ignore",
                       key=f"fleet_{side}_dl_perfetto", icon=":material/timeline:", width="stretch",
                       help="A process per replica (its slots, queue and KV counters) and a router process "
                            "marking every decision and counting each replica's in-flight requests.")


def headline_row(h: dict, other: dict | None = None) -> None:
    items = [("requests", "Requests", None, False), ("ttft_p99", "p99 TTFT", "ms", True),
             ("tpot_p99", "p99 TPOT", "ms", True), ("e2e_p99", "p99 end-to-end", "ms", True),
             ("prefix_hit_rate", "Prefix-cache hits", "%", False), ("load_imbalance", "Load imbalance", "", True)]
    cols = st.columns(len(items))
    for col, (k, label, unit, lower) in zip(cols, items):
        v = h.get(k)
        scale = 100.0 if unit == "%" else 1.0
        val = fmt(v * scale if isinstance(v, float) else v, unit or "")
        delta = None
        if other is not None and k != "requests" and isinstance(v, (int, float)) and isinstance(other.get(k), (int, float)):
            d = (other[k] - v) * scale
            delta = fmt(float(d)) if d == d else None   # B - A (a sign Streamlit reads for the arrow)
        col.metric(label, val, delta=delta, delta_color="inverse" if lower else "normal",
                   help={"load_imbalance": "max / mean busy time over the replicas (1 = even)",
                         "tpot_p99": "time per output token: a request's mean gap between tokens after its first",
                         "prefix_hit_rate": "prompt tokens found in the replicas' prefix caches / prompt tokens"
                         }.get(k, "the fleet's, over every request") + (" · delta: B − A" if delta else ""))


def show(fleets: dict, keys: dict, titles: dict, groups, routers: dict, stem: str) -> None:
    """Everything below the settings: the same for a simulated fleet and a real one."""
    nums = {s: fleet_numbers(keys[s], f) for s, f in fleets.items()}
    both = "b" in fleets
    st.subheader("The fleet's numbers")
    headline_row(nums["a"]["headline"], nums["b"]["headline"] if both else None)
    if both:
        st.caption(f"{plain(titles['a'])}; the deltas are B − A ({plain(titles['b'])}).")
    view = "a"
    if both:
        view = st.radio("Show", ["a", "b"], key="keep_fleet_view", horizontal=True,
                        format_func=lambda s: titles[s], help="Which fleet the lanes, signals and routing table show.")
    elif ss.get("keep_fleet_view") != "a":
        ss["keep_fleet_view"] = "a"
    fleet = fleets[view]
    st.subheader("Every replica on one clock")
    timeline(fleet, keys[view], titles[view])

    st.subheader("Why each request went where")
    st.caption("The routing table: when each request reached the router, the replica it went to, the rule that "
               "picked it, the replicas the rule considered, and each scorer's score for every replica in worker "
               "order (separated by ·; – where a scorer did not score a replica).")
    routing(fleet, nums[view]["routes"], routers[view])

    if both:
        ab_section(fleets, keys, titles, nums, groups)
    elif groups is not None and len(groups):
        st.subheader("Where each shared-prefix group landed")
        fig = placement_figure([group_placement(fleets["a"], groups)], [titles["a"]], [fleets["a"].names])
        st.plotly_chart(fig, key="fleet_placement", theme=None, config=CHART)

    st.subheader("Per replica")
    st.caption("Each replica's requests and latencies in ms (TPOT: a request's mean gap between tokens after its "
               "first), its prefix-cache hit rate, and its busy time (in steps that did work) beside the busiest's.")
    for s in fleets:
        if both:
            st.markdown(f"**{plain(titles[s])}**")
        st.dataframe(nums[s]["per_replica"], hide_index=True, key=f"fleet_per_replica_{s}",
                     column_config={c: st.column_config.NumberColumn(format="%.1f") for c in
                                    ("TTFT p50", "TTFT p99", "TPOT p50", "TPOT p99", "E2E p50", "E2E p99",
                                     "prefix hit %", "busy (ms)", "busy / busiest %")})

    st.subheader("Downloads")
    for s, f in fleets.items():
        exports(f, f"{stem}.{s.upper()}", s, f"{s.upper()}:" if both else "")
    limits()


def ab_section(fleets, keys, titles, nums, groups) -> None:
    fa, fb = fleets["a"], fleets["b"]
    st.subheader("Router A/B on identical arrivals")
    st.caption(f"A: {plain(titles['a'])}. B: {plain(titles['b'])}. The same requests arrive at the same times; "
               "what differs is where the router sends them.")
    st.dataframe(metrics_table(nums["a"]["headline"], nums["b"]["headline"]), hide_index=True, key="fleet_ab_metrics",
                 column_config={c: st.column_config.NumberColumn(format="%.4g") for c in ("A", "B", "B - A")})
    metric = st.radio("Per-request change", list(CHANGE_LABELS), key="keep_fleet_change", horizontal=True,
                      format_func=CHANGE_LABELS.get)
    fig = change_figure(changes(keys["a"], keys["b"], fa, fb), metric, "ms")
    c = fig.layout.meta
    st.caption(f"Each request's {CHANGE_LABELS[metric].lower()} under B minus under A, sorted: green got faster "
               f"with B, red slower. {c['faster']:,} faster, {c['slower']:,} slower, {c['same']:,} unchanged"
               + (f"; {c['missing']:,} without a value on one side" if c["missing"] else "") + ".")
    st.plotly_chart(fig, key="fleet_change", theme=None, config=CHART)
    if groups is None or not len(groups):
        st.caption("No shared-prefix groups in this workload (requests that open with the same prompt blocks, "
                   "prompt seed or first 64 token ids), so there is no placement to compare.")
        return
    fig = placement_figure([group_placement(fa, groups), group_placement(fb, groups)], ["A", "B"], [fa.names, fb.names])
    m = fig.layout.meta
    st.markdown("**Where each shared-prefix group landed**")
    st.caption(f"One row per group of requests sharing a prompt prefix ({m['groups']:,} of {m['groups_total']:,} "
               f"shown, the largest), one column per replica, the count of the group's requests it got. A group on "
               f"one replica computes its prefix once. Under A a group went to {m['spread'][0]:.2f} replicas on "
               f"average, under B to {m['spread'][1]:.2f}.")
    st.plotly_chart(fig, key="fleet_placement", theme=None, config=CHART)


def limits() -> None:
    with st.expander("Limits of this page"):
        st.markdown(
            f"- A run takes at most **{MAX_PAGE_REQUESTS:,} requests** on at most **{MAX_PAGE_REPLICAS} replicas**, "
            f"prompts of at most **{MAX_PROMPT_TOKENS:,} tokens** in all, and at most **{MAX_TOKEN_ROWS:,} token "
            "rows** (each request's output tokens plus its prompt's chunks), both checked before it runs: one "
            "visitor cannot take the server's memory (16 replicas x 20,000 chat requests, 22M prompt tokens, peaked "
            "at 2.1 GB under the cache-aware router). `python -m sim fleet` runs more, keeping only the numbers.\n"
            "- The lanes draw at most 1,200 time columns a replica, whatever the window (the state at each column's "
            "middle); the signals at most 1,500 points a line and 24,000 a signal (the peak of each time bin). "
            "Per-cell request ids on hover below 60,000 cells.\n"
            "- A real fleet: up to 64 recordings, each read as the vLLM server page reads one.\n"
            "- Runs are cached by their inputs (4 fleets, their numbers and figures beside), so a setting visited "
            "again does not simulate again.")


# ---------------------------------------------------------------------------------------------
# Settings
# ---------------------------------------------------------------------------------------------

SETTINGS.init(fill=PICKER.fill)
with st.sidebar:
    PICKER.draw()
    if not (PICKER.is_real() or PICKER.is_file()):
        st.header("Every replica")
        st.selectbox("Step cost", list(COST_PRESETS), key="keep_fleet_cost", format_func=lambda c: COST_PRESETS[c].label,
                     help="Every replica's step-time model: the fleet runs on one clock in ms.")
        c1, c2 = st.columns(2)
        c1.number_input("KV blocks", *BOUNDS["num_gpu_blocks"], step=100, key="keep_fleet_blocks")
        c2.number_input("Max sequences", *BOUNDS["max_num_seqs"], step=1, key="keep_fleet_max_seqs")
        st.number_input("Token budget / step", *BOUNDS["max_num_batched_tokens"], step=64, key="keep_fleet_budget")
        # the toggles take the sidebar's width: in half of it their labels were cut ("Prefix cac…")
        st.toggle("Prefix caching", key="keep_fleet_prefix")
        st.toggle("Async scheduling", key="keep_fleet_async",
                  help="vLLM's async scheduling (its default on GPUs in 0.34): each step is planned before the "
                       "previous step's tokens are back, so a request finishes one engine call later.")
        with st.expander("Replicas that differ"):
            st.text_input("Per-replica overrides (JSON list)", key="keep_fleet_replica_configs",
                          placeholder='[{}, {"num_gpu_blocks": 500}]',
                          help="One object of config overrides per replica, in worker order, over the settings "
                               "above; replicas past the list's end keep them.")
    st.header("Share")
    st.caption("The address bar holds the source, both routers, every setting and the scrubbed time (not an "
               "uploaded file): copy it to share this fleet.")
    SETTINGS.file_panel()
SETTINGS.sync_url()

st.title("Fleet")
st.caption("N replicas behind a router, on one clock in ms: each replica is a full scheduler with its own KV pool; "
           "the router sees what a real one would (its own in-flight counts, engine signals as stale as their refresh, "
           "the prefix caches) and records why it sent each request where it did.")


def simulated_fleet() -> None:
    workload = PICKER.require()
    config = common_config()
    try:
        overrides = replica_overrides()
    except ValueError as e:
        st.error(f"Replicas that differ: {plain(e)}.", icon=":material/error:")
        primer.stop()
    left, right = st.columns(2, gap="large")
    with left.container(border=True):
        st.markdown("#### Router A")
        A.draw()
    with right.container(border=True):
        st.toggle("Router A/B: a second router on the same arrivals", key="keep_fleet_ab")
        if ss["keep_fleet_ab"]:
            st.markdown("#### Router B")
            B.draw()
    fleets, keys, titles, routers = {}, {}, {}, {}
    for side in (A, B) if ss["keep_fleet_ab"] else (A,):
        s = side.side
        try:
            fs = side.fleet_settings(overrides)
        except ValueError as e:
            st.error(f"Router {s.upper()}'s settings: {plain(e)}.", icon=":material/error:")
            continue
        try:
            fleet, secs = run_fleet(workload, fs, config, ss["keep_fleet_cost"])
        except (ValueError, RuntimeError) as e:
            st.error(f"Fleet {s.upper()} cannot run: {plain(e)}.", icon=":material/error:")
            continue
        fleets[s], keys[s] = fleet, fleet_key(workload, fs, config, ss["keep_fleet_cost"])
        titles[s], routers[s] = side.title(), fs.router
        if s == "a":
            n_async = sum(bool((t.meta.get("config") or {}).get("async_scheduling")) for t in fleet.replicas)
            mode = ("sync scheduling" if not n_async else "async scheduling" if n_async == fs.replicas
                    else f"async scheduling on {n_async} of them")
            st.caption(f"Fleet A: {len(workload.requests):,} requests on {fs.replicas} replicas ({mode}), simulated "
                       f"in {secs:,.1f} s (cached after).")
        for w in fleet_warnings(fleet):
            st.info(f"Fleet {s.upper()}: {inert(w)}.", icon=":material/info:")
    if "a" not in fleets:
        primer.stop()
    if ss["keep_fleet_ab"] and "b" not in fleets:
        st.warning("Showing A alone: B cannot run (above).", icon=":material/warning:")
    run_id = keys["a"] + keys.get("b", "")
    if ss.get("fleet_run_id") != run_id:
        ss["fleet_run_id"] = run_id
        if not SETTINGS.given("keep_fleet_t"):
            ss["keep_fleet_t"] = None
        if not SETTINGS.given(SPAN.key):
            ss[SPAN.key] = None
    show(fleets, keys, titles, prefix_groups(workload.requests), routers,
         (workload.name or "fleet").rsplit("/", 1)[-1].removesuffix(".json"))


def real_fleet() -> None:
    try:
        real_key, names, datas, man = PICKER.real_input()
    except ValueError as e:
        st.info(inert(str(e)), icon=":material/upload_file:")
        primer.stop()
    info = read_real(real_key, names, datas)
    if "error" in info:
        st.error(f"These recordings cannot be read as one fleet: {plain(info['error'])}", icon=":material/error:")
        primer.stop()
    base = info["fleet"]
    n = base.num_replicas
    if ss.get("fleet_real_id") != real_key:
        ss["fleet_real_id"] = real_key
        if man.get("policy") and not SETTINGS.given("keep_fleet_a_router"):
            ss[A.k("router")] = man["policy"]
            ss[A.k("router_config")] = json.dumps(man.get("router_config") or {}, sort_keys=True) \
                if man.get("router_config") else ""
        if not SETTINGS.given("keep_fleet_t"):
            ss["keep_fleet_t"] = None
        if not SETTINGS.given(SPAN.key):
            ss[SPAN.key] = None
    if man:
        st.markdown(f"**{plain(man.get('title', ''))}**\n\n{plain(man.get('blurb', ''))}")
    st.caption(f"{n} recordings of vLLM {plain(info['meta'].get('vllm'))}, {len(base.routes):,} requests, on one clock "
               "(each shifted by its recorder's start). Below each replica, the simulator's verdict on it: whether it "
               "makes the same decisions at every step.")
    st.dataframe(info["verdicts"], hide_index=True, key="fleet_verdicts")
    if info["warnings"]:
        st.warning("**What the reader could not use.** What it could is shown below.\n\n"
                   + "\n".join(f"- {plain(w)}" for w in info["warnings"]), icon=":material/warning:")
    st.toggle("Predict each request's replica with a router policy", key="keep_fleet_predict",
              help="Replay the recorded arrivals through a router policy and say, request by request, whether it "
                   "picks the replica the real router picked.")
    fleets, keys = {"a": base}, {"a": f"real:{real_key}"}
    real_router = man.get("router") or "the real router"
    titles = {"a": f"the real fleet ({real_router}" + (f", {man['policy']})" if man.get("policy") else ")")}
    routers = {"a": real_router}
    if ss["keep_fleet_predict"]:
        with st.container(border=True):
            st.markdown("#### The policy")
            A.draw(fixed_replicas=n, real=True)
            c1, c2 = st.columns([2, 1])
            c1.radio("Timing", TIMINGS, key="keep_fleet_timing", format_func=TIMING_LABELS.get)
            c2.number_input("Response tail (ms)", 0.0, MAX_MS, key="keep_fleet_real_tail",
                            placeholder=f"fitted: {info['tail']:.2f}", format="%g",
                            help="A request leaves the router's in-flight count this long after its last step. "
                                 "Empty: fitted on the recordings (the front end's median time on the way in).")
        timing = ss["keep_fleet_timing"]
        reps = info["reps"] if timing == "recorded" else info["reps_costs"]
        tail = ss["keep_fleet_real_tail"] if ss["keep_fleet_real_tail"] is not None else info["tail"]
        try:
            if reps is None:
                raise ValueError(info["cost_error"] or "no cost model could be fitted on the recordings")
            fs = A.fleet_settings(replicas=n, tail=tail)
            pred = predicted_fleet(real_key, json.dumps(fs.to_json(), sort_keys=True), timing, reps)
        except (ValueError, RuntimeError) as e:   # the real fleet is still shown, as recorded
            st.error(f"The policy cannot replay this fleet: {plain(e)}. Below: the real fleet as it ran.",
                     icon=":material/error:")
            pred = None
        if pred is None:
            show(fleets, keys, titles, prefix_groups(info["requests"]), routers, "real-fleet")
            return
        ag = fleet_agreement(pred)
        pk = f"pred:{real_key}:{json.dumps(fs.to_json(), sort_keys=True)}:{timing}"
        c1, c2 = st.columns([1, 3])
        c1.metric("Agreement with the real router", f"{ag['agree']} of {ag['requests']}",
                  delta=f"{ag['agreement']:.1%}" if ag["agreement"] is not None else None, delta_color="off")
        c2.caption(f"{router_label(fs.router)} ({timing} timing) sends {ag['agree']} of the {ag['requests']} "
                   "requests to the replica the real router sent them to. "
                   + ("With recorded timing the policy sees what the real router saw: each replica's in-flight "
                      "count from where the requests really went and when their responses ended (+ the tail)."
                      if timing == "recorded" else
                      "With simulated timing every replica is predicted from its own fitted cost model, and the "
                      "policy's own picks feed back into what it sees: the A/B below sets it beside the real fleet.")
                   + (f" {ag['drawn']} of its picks were its own random draw, which the real router's draws match only "
                      f"by chance; over the other {ag['by_rule']['requests']}: {ag['by_rule']['agree']} agree."
                      if ag.get("drawn") else ""))
        for w in fleet_warnings(pred) if timing == "simulated" else ():
            st.info(f"{router_label(fs.router)} on simulated replicas: {inert(w)}.", icon=":material/info:")
        if timing == "recorded":
            fleets["a"], keys["a"] = pred, pk
            titles["a"] += f", with {router_label(fs.router)}'s prediction"
        else:
            fleets["b"], keys["b"] = pred, pk
            titles["b"] = f"{router_label(fs.router)} on simulated replicas"
            routers["b"] = fs.router
        routers["a"] = fs.router if timing == "recorded" else real_router
    show(fleets, keys, titles, prefix_groups(info["requests"]), routers, "real-fleet")


def fleet_file() -> None:
    """A saved fleet trace, shown as it was saved (nothing re-run)."""
    up = PICKER.real[1]
    if up is None:
        st.info("Add a fleet trace file on the left: the download below a fleet, or `python -m sim fleet ... -o FILE`.",
                icon=":material/upload_file:")
        primer.stop()
    data = up.getvalue()
    digest = hashlib.sha256(data).hexdigest()
    info = read_fleet_file(digest, data)
    if "error" in info:
        st.error(f"This file cannot be opened as a fleet trace: {plain(info['error'])}", icon=":material/error:")
        primer.stop()
    fleet = info["fleet"]
    router = (fleet.meta.get("settings") or {}).get("router") or "the router"
    st.caption(f"A saved fleet trace: {fleet.num_replicas} replicas, {len(fleet.routes):,} requests, "
               f"{plain(fleet.meta.get('source') or 'unknown source')}, routed by {plain(router)}.")
    show({"a": fleet}, {"a": f"file:{digest}"}, {"a": f"the saved fleet ({router})"}, None, {"a": router},
         "fleet-file")


if PICKER.is_file():
    fleet_file()
elif PICKER.is_real():
    real_fleet()
else:
    simulated_fleet()
SETTINGS.sync_url()
