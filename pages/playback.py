"""Playback: run a workload through the scheduler and play its decisions back step by step.

A thin page: the workload comes from sim.scenarios or an upload, the run from sim.simulate,
the numbers from sim.metrics, and every chart from figures.playback.
"""
from __future__ import annotations

import math

import streamlit as st

from figures.playback import inspector_tables, kv_map_figure, occupancy_figure, step_tokens_figure
from sim.cost import COST_PRESETS
from sim.policies import POLICIES
from sim.scheduler import CONFIG_BOUNDS as BOUNDS, PREEMPTION_MODES, SchedulerConfig
from sim.simulate import oracle_jsonl, scheduler_names
from sim.trace import Trace
from sim.workload import Workload, effective_config
from ui import primer, vllm_mode
from ui.exports import export_panel
from ui.labels import POLICY_LABELS, SCHEDULER_LABELS, fmt, inert
from ui.runs import run_key, run_trace, whole_numbers
from ui.scrub import step_scrubber
from ui.slo import SLOInputs
from ui.state import PageSettings, Setting
from ui.tables import capped_table
from ui.window import WindowPicker
from ui.workloads import WorkloadPicker

ss = st.session_state

# widget key -> scheduler config key
KNOBS = {"keep_pb_scheduler": "scheduler", "keep_pb_policy": "policy", "keep_pb_budget": "max_num_batched_tokens",
         "keep_pb_blocks": "num_gpu_blocks", "keep_pb_block_size": "block_size", "keep_pb_max_seqs": "max_num_seqs",
         "keep_pb_preemption": "preemption_mode", "keep_pb_prefix": "enable_prefix_caching",
         "keep_pb_threshold": "long_prefill_token_threshold", "keep_pb_tenant_cap": "tenant_cap",
         "keep_pb_queue_limit": "max_queued_requests"}
_D = SchedulerConfig()
VERSION_KEY, ASYNC_KEY = "keep_pb_vllm_version", "keep_pb_async"  # the mode (ui/vllm_mode.py)


def _apply_config(config: dict, cost: str | None = None) -> None:
    """Put a workload's config into the setting widgets (before they are drawn)."""
    c = {**_D.to_dict(), **effective_config(config)}
    ss["keep_pb_scheduler"] = str(config.get("scheduler", "vllm"))
    for key, name in KNOBS.items():
        if name == "scheduler":
            continue
        v = c.get(name)
        ss[key] = bool(v) if name == "enable_prefix_caching" else (str(v) if isinstance(v, str) else int(v or 0))
    vllm_mode.load(c, VERSION_KEY, ASYNC_KEY)
    if cost:
        ss["keep_pb_cost"] = cost


PICKER = WorkloadPicker("pb", _apply_config)
SLO_IN = SLOInputs("pb")
WIN = WindowPicker("pb")  # a long run opens on its overview; the views below show the window
SETTINGS = PageSettings("pb", [
    *PICKER.settings(),
    *SLO_IN.settings(),
    Setting("keep_pb_scheduler", "vllm", str, choices=tuple(scheduler_names())),
    Setting("keep_pb_policy", _D.policy, str, choices=tuple(POLICIES)),
    *vllm_mode.settings(VERSION_KEY, ASYNC_KEY),
    *(Setting(key, getattr(_D, name), int, bounds=BOUNDS[name]) for key, name in KNOBS.items() if name in BOUNDS),
    Setting("keep_pb_preemption", _D.preemption_mode, str, choices=PREEMPTION_MODES),
    Setting("keep_pb_prefix", _D.enable_prefix_caching, bool),
    Setting("keep_pb_cost", "units", str, choices=tuple(COST_PRESETS)),
    Setting("keep_pb_step", None, int, bounds=(0, 10**9)),
    *WIN.settings(),
])


# ---------------------------------------------------------------------------------------------
# Sidebar: workload and settings
# ---------------------------------------------------------------------------------------------

SETTINGS.init(fill=PICKER.fill)  # the link's settings on a first visit; kept ones after

with st.sidebar:
    PICKER.draw()

    st.header("Scheduler")
    st.selectbox("Scheduler", scheduler_names(), key="keep_pb_scheduler",
                 format_func=lambda k: SCHEDULER_LABELS.get(k, k),
                 help="Continuous batching refills a slot as soon as a request finishes; static batching "
                      "waits for the whole group to finish.")
    vllm_mode.widgets(VERSION_KEY, ASYNC_KEY)
    st.button(vllm_mode.GPU_PRESET_LABEL, key="pb_gpu_preset", help=vllm_mode.GPU_PRESET_HELP,
              on_click=vllm_mode.apply_gpu_preset, args=({
                  "scheduler": "keep_pb_scheduler", "version": VERSION_KEY, "async": ASYNC_KEY,
                  "preemption": "keep_pb_preemption", "block_size": "keep_pb_block_size",
                  "blocks": "keep_pb_blocks"},))
    st.selectbox("Waiting-queue policy", list(POLICIES), key="keep_pb_policy",
                 format_func=lambda p: POLICY_LABELS.get(p, p))
    c1, c2 = st.columns(2)
    c1.number_input("Token budget / step", *BOUNDS["max_num_batched_tokens"], step=8, key="keep_pb_budget",
                    help="max_num_batched_tokens: tokens one forward pass may hold (prompt chunks + decodes).")
    c2.number_input("Max sequences", *BOUNDS["max_num_seqs"], step=1, key="keep_pb_max_seqs",
                    help="max_num_seqs: how many requests may run at once (the slot lanes).")
    c1.number_input("KV blocks", *BOUNDS["num_gpu_blocks"], step=1, key="keep_pb_blocks",
                    help="num_gpu_blocks, including vLLM's null block 0.")
    c2.number_input("Block size (tokens)", *BOUNDS["block_size"], step=1, key="keep_pb_block_size")
    st.radio("On preemption", PREEMPTION_MODES, key="keep_pb_preemption", horizontal=True,
             help="recompute: drop the victim's KV and compute it again later (vLLM). swap: copy it to CPU "
                  "memory over PCIe and back.")
    st.toggle("Prefix caching", key="keep_pb_prefix",
              help="Reuse the KV blocks of an identical prompt prefix computed earlier.")
    with st.expander("More settings"):
        st.number_input("Long-prefill threshold (0 = off)", *BOUNDS["long_prefill_token_threshold"], step=16, key="keep_pb_threshold",
                        help="long_prefill_token_threshold: cap on one request's prompt chunk per step.")
        st.number_input("Per-tenant running cap (0 = off)", *BOUNDS["tenant_cap"], step=1, key="keep_pb_tenant_cap")
        st.number_input("Queue limit (0 = none)", *BOUNDS["max_queued_requests"], step=1, key="keep_pb_queue_limit",
                        help="max_queued_requests: an arrival that finds this many requests waiting is rejected "
                             "(HTTP 503), marked ▼ above the slot lanes.")
    SLO_IN.draw()
    st.header("Step cost")
    st.selectbox("Cost model", list(COST_PRESETS), key="keep_pb_cost", format_func=lambda k: COST_PRESETS[k].label,
                 help="How long a step takes, from what it holds. Units: the lesson's toy model. Roofline: "
                      "max(bytes / bandwidth, FLOPs / peak) on a GPU preset.")

    st.header("Share")
    st.caption("The address bar holds every setting (and the scrubbed step): copy it to share this run.")
    SETTINGS.file_panel()
SETTINGS.sync_url()

# ---------------------------------------------------------------------------------------------
# Main area
# ---------------------------------------------------------------------------------------------

st.title("Playback")
st.caption(
    "Each step, the scheduler decides which requests go into the next forward pass and how many tokens "
    "each one contributes, within a token budget, a cap on running requests and the KV cache's free "
    "blocks. Pick a workload and settings on the left; the run below replays those decisions step by step.")

workload = PICKER.require()

config = {name: ss[key] for key, name in KNOBS.items()}
config["enable_prefix_caching"] = bool(config["enable_prefix_caching"])
config.update(vllm_mode.config(VERSION_KEY, ASYNC_KEY))  # which vLLM's rules, sync or async
config.update(SLO_IN.config(config["policy"]))  # EDF's deadlines come from the TTFT target
cost_key = ss.get("keep_pb_cost", "units")
try:
    trace = run_trace(workload, config, cost_key)
except Exception as e:  # noqa: BLE001 - any failure of a user's run is reported, never a crash
    st.error(inert(f"This configuration cannot run: {e}"), icon=":material/error:")
    primer.stop()


run_id = run_key(workload, config, cost_key)
m, per_req = whole_numbers(run_id, trace)   # once per run: a long run's window moves without them
unit = trace.time_unit
st.caption(f"Scheduling: {vllm_mode.describe(trace)}.")
cols = st.columns(7)
cols[0].metric("Steps", fmt(m["steps"]), help="Scheduler iterations (forward passes, idle ticks included).")
cols[1].metric("Mean TTFT", fmt(m["ttft_mean"]), help="Time to first token: arrival to the end of "
               "the step that sampled the request's first token.")
cols[2].metric("p99 TTFT", fmt(m["ttft_p99"]))
cols[3].metric("Worst token gap", fmt(m["itl_worst"]),
               help="The longest wait between two tokens of one request (inter-token latency).")
cols[4].metric("Tokens / " + (unit[:-1] if unit == "units" else unit), fmt(m["throughput"]),
               help="Throughput: output tokens per time unit.")
cols[5].metric("Slot use", fmt(100 * m["slot_utilization"], "%") if not math.isnan(m["slot_utilization"]) else "–",
               help="Batch entries per step divided by max sequences, over busy steps.")
cols[6].metric("Preemptions", fmt(m["preemptions"]),
               help=f"{m['recomputed_tokens']:,} tokens recomputed because of them.")
st.caption(f"Times are in {unit}" + (" (the lesson's abstract cost units)" if unit == "units" else "")
           + f". {m['finished']:,} of {m['requests']:,} requests finished"
           + (f", {m['rejected']:,} rejected" if m["rejected"] else "")
           + (f"; {m['recomputed_tokens']:,} tokens recomputed after preemptions." if m["recomputed_tokens"] else "."))


def _interesting_step(tr: Trace) -> int:
    """Where to put the scrubber on a new run: the first step with the fewest free blocks."""
    s = tr.steps
    if s.empty:
        return 1
    free = s["free_blocks"].astype("Float64").fillna(float("inf"))
    return int(s["step"].iloc[int(free.to_numpy(dtype=float).argmin())])


if ss.get("pb_run_id") != run_id:  # a new run opens on its most interesting step, unless the link gave one
    ss["pb_run_id"] = run_id
    if not SETTINGS.given("keep_pb_step"):
        ss["keep_pb_step"] = _interesting_step(trace)
    if not SETTINGS.given(WIN.key):   # and, if it is long, on the window around that step
        ss[WIN.key] = None
view = WIN.pick(trace, key=run_id, around=int(ss.get("keep_pb_step") or _interesting_step(trace)))
SETTINGS.sync_url()  # the window is part of the link

st.subheader("Slot lanes")
st.caption(
    "One row per slot (a running request's place in the batch), one column per step. The colour says which "
    "request ran there; a lighter shade is prompt work (prefill), full colour is decoding one token, a dark "
    "shade is recomputing what a preemption threw away, and a red × marks a preemption. "
    + ("A dark ▼ above the lanes marks arrivals turned away because the queue was full (they never ran). "
       if m["rejected"] else "")
    + "Press ▶ Play to reveal the run step by step, or drag the slider under the chart.")
st.plotly_chart(occupancy_figure(view), key="occupancy", theme=None, config={"displaylogo": False})

st.subheader("Tokens per step")
st.caption("What each forward pass held, against the token budget (dashed); the purple line is the waiting queue.")
st.plotly_chart(step_tokens_figure(view), key="step_tokens", theme=None, config={"displaylogo": False})
SLO_IN.report(trace)


@st.fragment
def step_inspector(tr: Trace) -> None:
    steps = tr.steps["step"]
    step = step_scrubber("keep_pb_step", int(steps.min()), int(steps.max()), default=_interesting_step(tr),
                         help="Scrub to any step: the block map and the tables below follow.", buttons="pb")
    SETTINGS.sync_url()  # the scrubbed step is part of the link
    row = tr.steps[steps == step].iloc[0]
    left, right = st.columns([1, 1], gap="large")
    with left:
        fig = kv_map_figure(tr, step)
        meta = fig.layout.meta
        st.markdown(f"**KV blocks at the end of step {step}**: {meta['used']} in use, {meta['free']} free"
                    + (f", {meta['cached_free']} free with a cached prefix" if meta["cached_free"] else "")
                    + f" (of {meta['blocks'] - 1}, plus the null block)")
        st.plotly_chart(fig, key="kv_map", theme=None, config={"displaylogo": False})
    with right:
        batch, events = inspector_tables(tr, step)
        if tr.requests["tenant"].nunique() <= 1:
            batch = batch.drop(columns="tenant")
        st.markdown(f"**Batch of step {step}**: {int(row['num_tokens'])} tokens, {int(row['num_seqs'])} requests; "
                    f"{int(row['running'])} running and {int(row['waiting'])} waiting afterwards")
        if batch.empty:
            st.caption("Nothing ran in this step (the engine was idle).")
        else:
            st.dataframe(batch, hide_index=True, key="pb_batch_table",
                         column_config={"computed before": st.column_config.NumberColumn(
                             help="Tokens of this request already in the KV cache when the step began")})
        st.markdown("**Events**")
        if events.empty:
            st.caption("No arrivals, admissions, preemptions or finishes in this step.")
        else:
            st.dataframe(events, hide_index=True, key="pb_events_table")


st.subheader("Step inspector")
step_inspector(view)

with st.expander("All metrics"):
    rows = [{"metric": k, "value": fmt(v) if not isinstance(v, str) else v} for k, v in m.items()]
    st.dataframe(rows, hide_index=True, key="pb_metrics_table")
with st.expander("Per request"):
    capped_table(per_req, key="pb_requests_table", what="requests",
                 file_name=f"{(workload.name or 'workload').rsplit('/', 1)[-1].removesuffix('.json')}.requests.csv")

st.subheader("Downloads")
stem = (workload.name or "workload").rsplit("/", 1)[-1].removesuffix(".json").removesuffix(".workload")
w = view.meta.get("window")
if w:
    st.caption(f"The Trace file, tables and Perfetto trace hold the window shown, steps {w['first']:,} to "
               f"{w['last']:,} (press Whole run above for all of it); the JSONL and the workload are the whole run's.")
export_panel(view, f"{stem}.steps{w['first']}-{w['last']}" if w else stem, key="pb")
d1, d2, _ = st.columns(3)
d1.download_button("Per-step JSONL (vLLM oracle format)", data=lambda: oracle_jsonl(workload, config),
                   file_name=f"{stem}.jsonl", mime="application/x-ndjson", on_click="ignore", key="pb_dl_jsonl",
                   icon=":material/download:", width="stretch",
                   help="One line per step, as the vLLM conformance harness writes it.")
d2.download_button("Workload JSON", data=lambda: Workload(workload.requests, {**workload.config, **config}).dumps(),
                   file_name=f"{stem}.workload.json", mime="application/json", on_click="ignore",
                   key="pb_dl_workload", icon=":material/download:", width="stretch",
                   help="This workload with the settings above; upload it again to reproduce the run.")
SETTINGS.sync_url()
