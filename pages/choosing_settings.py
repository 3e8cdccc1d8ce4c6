"""Choosing settings: which budget, max sequences, KV size and policy meet the SLOs on this traffic,
at the most goodput? A grid search over the scheduler's knobs, run here config by config.

A thin page: the grid, its checks, the runs and the best config come from sim.search, the
charts from figures.search. The search runs where the sidebar says: in this server process in
chunks (a script run does at most CHUNK_S seconds of configs, keeps the rows in the session, and
reruns itself), so Stop, or any other click, takes effect between two configs; or on local
worker processes or a Ray cluster in the background, the page polling for rows each CHUNK_S.

The page opens on a result: the default search (the default grid on the default scenario, a
second's work, cached for every visitor by st.cache_data) is already run. With the page's
defaults it is the visitor's own search; with other settings it is shown as an example until
"Run the search" runs theirs.

A Ray cluster is the server's to choose, not a visitor's: results come back from it unpickled,
so only the address in the SCHEDLAB_RAY_ADDRESS environment variable (or "local") is offered.
"""
from __future__ import annotations

import hashlib
import importlib.util
import json
import os
import time
from urllib.parse import urlencode

import streamlit as st

from figures.search import frontier_figure, goodput_heatmap
from sim.cost import COST_PRESETS, cost_from_preset
from sim.versions import GPU_DEFAULTS, gpu_blocks
from sim.search import (Grid, LocalSearch, Runner, SearchJob, best, check_configs, describe, table_rows, to_csv,
                        values_from_text)
from ui import primer
from ui.labels import fmt, inert
from ui.state import PageSettings, Setting
from ui.workloads import BUILTIN, WorkloadPicker

ss = st.session_state
CHUNK_S = 1.5  # seconds of configs per script run before it reruns itself (and sees a Stop)
RUN = "cs_run"  # session key of the search in progress or done: {"id", "rows" (index -> row), "running", "stopped",
#                 "backend", "search" (a LocalSearch or RaySearch while one runs in the background)}
CPUS = os.cpu_count() or 1
RAY_ADDRESS = os.environ.get("SCHEDLAB_RAY_ADDRESS", "").strip()
BACKENDS = {"here": "This server process, config by config", "workers": "Local worker processes",
            "ray": "Ray cluster"}

# knob -> (label, default values, Playback's URL parameter for it)
SWEEP = {
    "max_num_seqs": ("Max sequences", "8, 16, 32", "pb_max_seqs"),
    "max_num_batched_tokens": ("Token budget / step", "128, 256, 512", "pb_budget"),
    "num_gpu_blocks": ("KV blocks", "150, 300, 600", "pb_blocks"),
    "policy": ("Waiting-queue policy", "fcfs, sjf", "pb_policy"),
    "preemption_mode": ("On preemption", "recompute, swap", "pb_preemption"),
    "scheduler": ("Scheduler", "vllm, static", "pb_scheduler"),
    "long_prefill_token_threshold": ("Long-prefill threshold", "0, 128", "pb_threshold"),
    "block_size": ("Block size (tokens)", "16, 32", "pb_block_size"),
    "enable_prefix_caching": ("Prefix caching", "false, true", "pb_prefix"),
    "tenant_cap": ("Per-tenant running cap", "0, 4", "pb_tenant_cap"),
    "max_queued_requests": ("Queue limit", "0, 64", "pb_queue_limit"),
    "async_scheduling": ("Async scheduling", "false, true", "pb_async"),
    "vllm_version": ("vLLM version", "0.33, 0.34", "pb_vllm_version"),
}
DEFAULT_KNOBS = "max_num_seqs,max_num_batched_tokens"
DEFAULT_SCENARIO = "random_500"
DEFAULT_COST, DEFAULT_TTFT = "units", 4000.0


def _apply_config(config: dict, cost: str | None = None) -> None:
    if cost:
        ss["keep_cs_cost"] = cost


PICKER = WorkloadPicker("cs", _apply_config)
SETTINGS = PageSettings("cs", [
    *(Setting(s.key, DEFAULT_SCENARIO, str, choices=s.choices) if s.key == PICKER.scenario_key else s
      for s in PICKER.settings()),
    Setting("keep_cs_cost", DEFAULT_COST, str, choices=tuple(COST_PRESETS)),
    Setting("keep_cs_ttft", DEFAULT_TTFT, float, bounds=(0, 1e12)),
    Setting("keep_cs_tpot", 0.0, float, bounds=(0, 1e12)),
    Setting("keep_cs_e2e", 0.0, float, bounds=(0, 1e12)),
    Setting("keep_cs_knobs", DEFAULT_KNOBS, str),
    *(Setting(f"keep_cs_v_{k}", v[1], str) for k, v in SWEEP.items()),
    Setting("keep_cs_backend", "here", str, choices=tuple(BACKENDS)),
    Setting("keep_cs_workers", min(2, CPUS), int, bounds=(1, CPUS)),
    Setting("keep_cs_hx", "max_num_seqs", str, choices=tuple(SWEEP)),
    Setting("keep_cs_hy", "max_num_batched_tokens", str, choices=tuple(SWEEP)),
])


def _knobs() -> list[str]:
    return [k for k in str(ss.get("keep_cs_knobs", "")).split(",") if k in SWEEP]


def _knobs_picked() -> None:
    ss["keep_cs_knobs"] = ",".join(k for k in SWEEP if k in ss["cs_knob_pick"])


def _gpu_preset() -> None:
    """The "vLLM 0.34 on a GPU" button: sweep sync against async (the CUDA default) on 64-token
    blocks (FlashAttention's size), the vLLM scheduler with recompute (sim.versions.GPU_DEFAULTS),
    beside the knobs already picked; each block count is recounted to hold the same tokens."""
    d = GPU_DEFAULTS
    picked = [k for k in _knobs() if k not in ("scheduler", "preemption_mode", "vllm_version")]
    ss["keep_cs_knobs"] = ",".join(k for k in SWEEP if k in {*picked, "async_scheduling", "block_size"})
    ss["keep_cs_v_async_scheduling"] = "false, true"
    if "num_gpu_blocks" in picked:
        try:
            old = [int(x) for x in str(ss["keep_cs_v_num_gpu_blocks"]).split(",") if x.strip()]
            size = int(str(ss.get("keep_cs_v_block_size", "16")).split(",")[0])
            ss["keep_cs_v_num_gpu_blocks"] = ", ".join(str(gpu_blocks(b, size, d["block_size"])) for b in old)
        except ValueError:
            pass   # values that do not read as numbers: left for the search to refuse in one sentence
    ss["keep_cs_v_block_size"] = str(d["block_size"])


def _start(search_id: str) -> None:
    # the backend is the run's own: switching the radio mid-run does not move it
    ss[RUN] = {"id": search_id, "rows": {}, "running": True, "stopped": False, "backend": ss["keep_cs_backend"]}


def _stop() -> None:
    if RUN in ss:
        ss[RUN]["running"] = False
        ss[RUN]["stopped"] = True
        _drop_search(ss[RUN])


def _drop_search(run: dict) -> None:
    """Cancel a background search: configs not started are dropped, the workers let go."""
    search = run.pop("search", None)
    if search is not None:
        search.cancel()


def _ray_ready() -> str | None:
    """Why Ray cannot be offered here, or None."""
    if importlib.util.find_spec("ray") is None:
        return "Ray is not installed here: `pip install ray==2.58.0` (in requirements-dev.txt)."
    if not RAY_ADDRESS:
        return ("No Ray cluster is set for this server: start the dashboard with SCHEDLAB_RAY_ADDRESS=local (a "
                "cluster on this machine) or the address of a running one (`ray start --head`).")
    return None


def _start_background(job: SearchJob, configs: list[dict], backend: str):
    if backend == "ray":
        from sim.search_ray import RaySearch
        return RaySearch(job, configs, RAY_ADDRESS)
    return LocalSearch(job, configs, int(ss["keep_cs_workers"]))


def _search_of(workload, knobs: list[str], texts: dict, cost: str, targets: dict):
    """(grid, configs, job, slo, search id) of a search's settings; ValueError with one line."""
    grid = Grid.parse({k: values_from_text(k, texts[k]) for k in knobs})
    configs = grid.configs()
    check_configs(workload, configs)
    slo = {k: v for k, v in targets.items() if v}
    job = SearchJob.make(workload, cost=cost, slo=slo or None)
    search_id = hashlib.sha256(f"{job.workload_json}\0{json.dumps(grid.to_json())}\0{job.cost}\0{job.slo_json}"
                               .encode()).hexdigest()[:16]
    return grid, configs, job, slo, search_id


def _default_search():
    """The search of the page's default settings (the one it opens on)."""
    from sim import scenarios
    knobs = DEFAULT_KNOBS.split(",")
    return _search_of(scenarios.workload(DEFAULT_SCENARIO), knobs, {k: SWEEP[k][1] for k in knobs}, DEFAULT_COST,
                      {"ttft": DEFAULT_TTFT})


@st.cache_data(show_spinner="Running the default search…", max_entries=2)
def _opening_rows(search_id: str, _job: SearchJob, _configs: list[dict]) -> list[dict]:
    """The default search's rows, run once per server (about 0.4 s: 9 configs x 500 requests)."""
    runner = Runner(_job)
    return [runner.run(c) for c in _configs]


def show_results(grid, configs, rows: dict, job: SearchJob, slo: dict, knobs: list[str], example: bool) -> None:
    """The best config, the frontier, the heatmap and the table of the configs run (rows: config
    index -> its row). example: the default search shown beside other settings (fixed axes,
    its own Playback link)."""
    unit = cost_from_preset(job.cost).time_unit
    done_idx = sorted(rows)
    done = len(done_idx)
    if done < len(configs):
        st.warning(f"Stopped after {done:,} of {len(configs):,} configs: the results below are theirs.",
                   icon=":material/pause_circle:")
    if done == 0:
        primer.stop()
    configs_done = [configs[i] for i in done_idx]
    rows = [rows[i] for i in done_idx]
    b = best(rows)
    failed = sum(1 for r in rows if r.get("error"))
    if failed:
        st.warning(f"{failed:,} configs could not run to the end (their error is in the table).", icon=":material/warning:")
    if b is None:
        primer.stop()

    r = rows[b]
    has_slo = r.get("goodput") is not None
    st.subheader("The best config")
    st.markdown(f"**Config {done_idx[b] + 1}**: {describe(configs_done[b])}"
                + (" (the most goodput; ties go to more throughput, then the lower p99 TTFT)" if has_slo
                   else " (no SLO targets: the most throughput)"))
    m = st.columns(4)
    m[0].metric(f"Goodput (requests / {unit})", fmt(r.get("goodput")) if has_slo else "–")
    m[1].metric("Met the SLO", fmt(100 * r["slo_attainment"], "%") if has_slo and r.get("slo_attainment") is not None
                else "–")
    m[2].metric(f"Throughput (tokens / {unit})", fmt(r.get("throughput")))
    m[3].metric(f"p99 TTFT ({unit})", fmt(r.get("ttft_p99")))

    source, scenario = (BUILTIN, DEFAULT_SCENARIO) if example else (ss[PICKER.source_key], ss[PICKER.scenario_key])
    params = {"pb_source": source, "pb_scenario": scenario, "pb_cost": job.cost}
    for k, v in configs_done[b].items():
        params[SWEEP[k][2]] = ("true" if v else "false") if isinstance(v, bool) else str(v)
    # "./": the app's root, where the default page (Playback) is served; "playback" would open on
    # Streamlit's "page not found" before showing it
    st.link_button("Open the best config on Playback", "./?" + urlencode(params), icon=":material/open_in_new:")
    if source != BUILTIN:
        st.caption("Playback opens with these settings; upload the same workload file there.")

    st.subheader("Throughput against p99 TTFT")
    st.caption("Each point is a config. The blue line joins the frontier: the configs no other beats on both "
               "axes at once. The dashed line is the TTFT target (a request's, so a p99 left of it means at "
               "least 99% met it).")
    st.plotly_chart(frontier_figure(rows, configs_done, unit, slo.get("ttft"), b, [i + 1 for i in done_idx]),
                    key="cs_frontier", theme=None,
                    config={"displaylogo": False})

    st.subheader("Goodput over two knobs" if has_slo else "Throughput over two knobs")
    if example:   # the default search's own axes: the selectors belong to the visitor's search
        kx, ky = knobs[0], knobs[1]
        st.caption("Each cell is that pair of values' config.")
        st.plotly_chart(goodput_heatmap(rows, configs_done, kx, ky, unit, "goodput" if has_slo else "throughput"),
                        key="cs_heatmap", theme=None, config={"displaylogo": False})
    elif len(knobs) >= 1:
        for key, pos in (("keep_cs_hx", 0), ("keep_cs_hy", 1)):
            if ss.get(key) not in knobs:
                ss[key] = knobs[min(pos, len(knobs) - 1)]
        h1, h2 = st.columns(2)
        kx = h1.selectbox("Across", knobs, key="keep_cs_hx", format_func=lambda k: SWEEP[k][0])
        ky = h2.selectbox("Down", knobs, key="keep_cs_hy", format_func=lambda k: SWEEP[k][0]) if len(knobs) > 1 else None
        if ky == kx:
            ky = None
        st.caption("Each cell is the best of the configs with that pair of values (over any other knob swept).")
        st.plotly_chart(goodput_heatmap(rows, configs_done, kx, ky, unit, "goodput" if has_slo else "throughput"),
                        key="cs_heatmap", theme=None, config={"displaylogo": False})
        SETTINGS.sync_url()
    else:
        st.caption("Pick a knob to sweep on the left to see a heatmap.")

    st.subheader("Every config")
    st.dataframe(table_rows(grid, rows, done_idx), hide_index=True, key="cs_table")
    st.download_button("The table (CSV)", data=to_csv(grid, rows, done_idx), file_name="search.csv", mime="text/csv", on_click="ignore", key="cs_dl_csv",
                       icon=":material/download:")


# ---------------------------------------------------------------------------------------------
# Sidebar: workload, targets, knobs
# ---------------------------------------------------------------------------------------------

SETTINGS.init(fill=PICKER.fill)

with st.sidebar:
    PICKER.draw()
    st.header("Cost and targets")
    st.selectbox("Cost model", list(COST_PRESETS), key="keep_cs_cost", format_func=lambda k: COST_PRESETS[k].label,
                 help="How long a step takes, from what it holds; the targets below are in its time unit.")
    unit = cost_from_preset(ss["keep_cs_cost"]).time_unit
    st.caption(f"Targets in {unit}; 0 = no target. A request meets the SLO when it meets every target.")
    c1, c2, c3 = st.columns(3)
    c1.number_input("TTFT", 0.0, 1e12, step=100.0, key="keep_cs_ttft", help="Time to first token, at most.")
    c2.number_input("TPOT", 0.0, 1e12, step=1.0, key="keep_cs_tpot",
                    help="Mean time per output token after the first, at most.")
    c3.number_input("E2E", 0.0, 1e12, step=100.0, key="keep_cs_e2e", help="End-to-end latency, at most.")

    st.header("Knobs to sweep")
    ss["cs_knob_pick"] = _knobs()  # the widget follows the setting (a link, a settings file)
    st.multiselect("Knobs", list(SWEEP), key="cs_knob_pick", format_func=lambda k: SWEEP[k][0],
                   on_change=_knobs_picked, help="Every combination of the values below runs once.")
    for k in _knobs():
        st.text_input(f"{SWEEP[k][0]} ({k})", key=f"keep_cs_v_{k}", help="Comma-separated values.")
    st.button("vLLM 0.34 on a GPU: sync vs async", key="cs_gpu_preset", on_click=_gpu_preset,
              help="Sweep async scheduling (the CUDA default) against sync on 64-token KV blocks "
                   "(FlashAttention's size), with the vLLM scheduler and recompute preemption; a KV-block "
                   "sweep is recounted to hold the same tokens.")

    st.header("Where it runs")
    ray_why = _ray_ready()
    if ss.get("keep_cs_backend") == "ray" and ray_why:
        ss["keep_cs_backend"] = "here"
    st.radio("Run on", [k for k in BACKENDS if k != "ray" or not ray_why], key="keep_cs_backend",
             format_func=BACKENDS.get, help="The table is the same on each: every run is deterministic.")
    if ss["keep_cs_backend"] == "workers":
        st.number_input("Worker processes", 1, CPUS, step=1, key="keep_cs_workers",
                        help=f"At most this machine's {CPUS} CPUs.")
    st.caption(ray_why if ray_why else f"Ray: the cluster at `{RAY_ADDRESS}` (SCHEDLAB_RAY_ADDRESS).")

    st.header("Share")
    st.caption("The address bar holds every setting: copy it to share this search.")
    SETTINGS.file_panel()
SETTINGS.sync_url()

# ---------------------------------------------------------------------------------------------
# Main area
# ---------------------------------------------------------------------------------------------

st.title("Choosing settings")
st.caption(
    "Which token budget, max sequences, KV size and policy meet your targets on your traffic, with the most "
    "goodput (requests per time unit that met every target, as DistServe defines it)? Pick the knobs and their "
    "values on the left: every combination runs on the same arrivals.")
workload = PICKER.require()

knobs = _knobs()
try:
    grid, configs, job, slo, search_id = _search_of(
        workload, knobs, {k: ss[f"keep_cs_v_{k}"] for k in knobs}, ss["keep_cs_cost"],
        {k: ss.get(f"keep_cs_{k}") for k in ("ttft", "tpot", "e2e")})
except ValueError as e:
    st.error(inert(f"This search cannot run: {e}."), icon=":material/error:")
    primer.stop()

run = ss.get(RUN)
if run is not None and run["id"] != search_id:  # the settings changed: that table is not this search's
    _drop_search(ss.pop(RUN))
    run = None

b1, b2, info = st.columns([1, 1, 4], vertical_alignment="center")
running = bool(run and run["running"])
b1.button("Run the search", type="primary", icon=":material/play_arrow:", on_click=_start, args=(search_id,),
          disabled=running, key="cs_run_button")
b2.button("Stop", icon=":material/stop:", on_click=_stop, disabled=not running, key="cs_stop_button")
info.caption(f"{len(configs):,} config{'s' if len(configs) != 1 else ''} × {len(workload.requests):,} requests"
             + (f"; SLO {', '.join(f'{k} ≤ {v:,.4g} {unit}' for k, v in slo.items())}" if slo else "; no SLO targets"))
st.caption("Bigger grids: the same search from the command line, on local processes or a Ray cluster, gives the "
           "same table: `python -m sim search W.json --grid G.json --slo '{\"ttft\": 400}' -o OUT.csv "
           "[--workers N | --ray ADDRESS|local]`.")

example = None   # the default search, shown while this one has not run
if run is None:
    d_grid, d_configs, d_job, d_slo, d_id = _default_search()
    d_rows = dict(enumerate(_opening_rows(d_id, d_job, d_configs)))
    if d_id == search_id:   # the page's defaults: the opening result is this very search
        run = ss[RUN] = {"id": search_id, "rows": d_rows, "running": False, "stopped": False, "backend": "here",
                         "opening": True}
    else:
        example = (d_grid, d_configs, d_rows, d_job, d_slo, DEFAULT_KNOBS.split(","))
        st.info("Press **Run the search** to try every config of the settings on the left. Until then, below: "
                f"the default search ({len(d_configs)} configs on the built-in {DEFAULT_SCENARIO} scenario), "
                "already run.", icon=":material/tune:")
if run is not None and run.get("opening"):
    st.caption("Already run: the page's default search (a second's work, cached). Change the knobs on the left "
               "and press **Run the search**.")

if example is None:
    rows = run["rows"]  # config index -> its row
    if run["running"]:
        def progress_text():
            return f"{len(rows):,} of {len(configs):,} configs run"
        bar = st.progress(len(rows) / len(configs), text=progress_text())
        backend = run.get("backend", "here")
        if backend == "here":
            runner, t0 = Runner(job), time.perf_counter()
            while len(rows) < len(configs) and time.perf_counter() - t0 < CHUNK_S:
                rows[len(rows)] = runner.run(configs[len(rows)])  # kept in the session at once: a Stop loses nothing
                bar.progress(len(rows) / len(configs), text=progress_text())
            if len(rows) < len(configs):
                st.rerun()  # the next chunk, after any click that came meanwhile
        else:
            if run.get("search") is None:
                try:
                    run["search"] = _start_background(job, configs, backend)
                except ValueError as e:
                    run["running"] = False
                    st.error(inert(f"The search could not start: {e}"), icon=":material/error:")
                    primer.stop()
            search = run["search"]
            for i, row, _where, _sec in search.poll(CHUNK_S):
                rows[i] = row
            bar.progress(len(rows) / len(configs), text=progress_text())
            if not search.done:
                st.rerun()
            run.pop("search", None)
        run["running"] = False
        st.rerun()  # redraw the buttons: the search is done


if example is not None:
    show_results(*example, example=True)
else:
    show_results(grid, configs, run["rows"], job, slo, knobs, example=False)
