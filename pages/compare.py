"""Compare: two configurations on the same arrivals, played in lock-step.

A thin page: the workload comes from ui.workloads (a scenario or an upload), both runs from
ui.runs, the comparison from sim.analysis.compare, every chart from figures.compare and
figures.playback; settings live in the URL (ui.state).
"""
from __future__ import annotations

import streamlit as st

from figures.compare import change_figure, diff_table, first_difference, lockstep_figure
from figures.playback import inspector_tables, kv_map_figure
from sim.analysis import compare
from sim.cost import COST_PRESETS
from sim.policies import POLICIES
from sim.scheduler import CONFIG_BOUNDS as BOUNDS, PREEMPTION_MODES, SchedulerConfig
from sim.simulate import scheduler_names
from sim.trace import Trace
from sim.workload import effective_config
from ui import primer, vllm_mode
from ui.exports import export_panel
from ui.labels import POLICY_LABELS, SCHEDULER_LABELS, fmt, inert
from ui.runs import run_key, run_trace
from ui.scrub import step_scrubber
from ui.slo import SLOInputs
from ui.state import PageSettings, Setting
from ui.window import WindowPicker, cut
from ui.workloads import WorkloadPicker

ss = st.session_state
SIDES = ("a", "b")
# per-side knob -> scheduler config key
KNOBS = {"scheduler": "scheduler", "policy": "policy", "budget": "max_num_batched_tokens",
         "blocks": "num_gpu_blocks", "max_seqs": "max_num_seqs", "preemption": "preemption_mode",
         "prefix": "enable_prefix_caching", "queue": "max_queued_requests",
         "version": "vllm_version", "async": "async_scheduling",   # these two: ui/vllm_mode.py
         "block_size": "block_size"}
CHANGE_LABELS = {"e2e": "End-to-end latency", "ttft": "Time to first token"}
_D = SchedulerConfig()


def k(side: str, knob: str) -> str:
    return f"keep_cmp_{side}_{knob}"


def _apply_config(config: dict, cost: str | None = None) -> None:
    """A workload's config into both sides; B starts with twice A's KV blocks."""
    c = {**_D.to_dict(), **effective_config(config)}
    for side in SIDES:
        ss[k(side, "scheduler")] = str(config.get("scheduler", "vllm"))
        ss[k(side, "policy")] = str(c["policy"])
        ss[k(side, "preemption")] = str(c["preemption_mode"])
        ss[k(side, "prefix")] = bool(c["enable_prefix_caching"])
        for knob in ("budget", "blocks", "max_seqs", "queue", "block_size"):
            ss[k(side, knob)] = int(c[KNOBS[knob]])
        vllm_mode.load(c, k(side, "version"), k(side, "async"))
        if cost:
            ss[k(side, "cost")] = cost
    ss[k("b", "blocks")] = min(2 * int(c["num_gpu_blocks"]), BOUNDS["num_gpu_blocks"][1])


PICKER = WorkloadPicker("cmp", _apply_config)
SLO_IN = SLOInputs("cmp")  # one set of targets for both sides
WIN = WindowPicker("cmp")  # long runs: one window of steps for both sides, picked on the longer run's overview
SETTINGS = PageSettings("cmp", [
    *PICKER.settings(),
    *SLO_IN.settings(),
    *[s for side in SIDES for s in (
        Setting(k(side, "scheduler"), "vllm", str, choices=tuple(scheduler_names())),
        Setting(k(side, "policy"), _D.policy, str, choices=tuple(POLICIES)),
        *vllm_mode.settings(k(side, "version"), k(side, "async")),
        *(Setting(k(side, knob), getattr(_D, KNOBS[knob]), int, bounds=BOUNDS[KNOBS[knob]])
          for knob in ("budget", "blocks", "max_seqs", "queue", "block_size")),
        Setting(k(side, "preemption"), _D.preemption_mode, str, choices=PREEMPTION_MODES),
        Setting(k(side, "prefix"), _D.enable_prefix_caching, bool),
        Setting(k(side, "cost"), "units", str, choices=tuple(COST_PRESETS)),
    )],
    Setting("keep_cmp_step", None, int, bounds=(0, 10**9)),
    Setting("keep_cmp_change", "e2e", str, choices=tuple(CHANGE_LABELS)),
    *WIN.settings(),
])


def side_config(side: str) -> dict:
    return {name: (bool(ss[k(side, knob)]) if knob in ("prefix", "async") else ss[k(side, knob)])
            for knob, name in KNOBS.items()}


def sync_vs_async() -> None:
    """The button's on_click: A as it is, sync; B the same config, async (both on vLLM 0.34's rules,
    the vLLM scheduler and recompute preemption, the only ones async scheduling is modelled with)."""
    ss[k("a", "scheduler")], ss[k("a", "version")], ss[k("a", "async")] = "vllm", "0.34", False
    ss[k("a", "preemption")] = "recompute"
    for knob in (*KNOBS, "cost"):
        ss[k("b", knob)] = ss[k("a", knob)]
    ss[k("b", "async")] = True


def side_title(side: str) -> str:
    c = side_config(side)
    short = {"vllm": "vLLM v1", "static": "static batching", "llama_slots": "llama slots"}
    return (f"{side.upper()}: {short.get(c['scheduler'], c['scheduler'])} · {c['policy']} · "
            f"budget {c['max_num_batched_tokens']:,} · {c['num_gpu_blocks']:,} blocks of {c['block_size']} · "
            f"{c['max_num_seqs']} seqs · {c['preemption_mode']}" + (" · prefix cache" if c["enable_prefix_caching"] else "")
            + (f" · queue ≤ {c['max_queued_requests']:,}" if c["max_queued_requests"] else "")
            + (f" · vLLM {c['vllm_version']} {'async' if c['async_scheduling'] else 'sync'}"
               if c["scheduler"] == "vllm" else ""))


def side_widgets(side: str) -> None:
    st.markdown(f"#### Configuration {side.upper()}")
    st.selectbox("Scheduler", scheduler_names(), key=k(side, "scheduler"),
                 format_func=lambda s: SCHEDULER_LABELS.get(s, s))
    st.selectbox("Waiting-queue policy", list(POLICIES), key=k(side, "policy"),
                 format_func=lambda p: POLICY_LABELS.get(p, p))
    vllm_mode.widgets(k(side, "version"), k(side, "async"))
    c1, c2, c3 = st.columns(3)
    c1.number_input("Token budget / step", *BOUNDS["max_num_batched_tokens"], step=8, key=k(side, "budget"))
    c2.number_input("KV blocks", *BOUNDS["num_gpu_blocks"], step=1, key=k(side, "blocks"))
    c3.number_input("Max sequences", *BOUNDS["max_num_seqs"], step=1, key=k(side, "max_seqs"))
    c1, c2 = st.columns([3, 2], vertical_alignment="bottom")
    c1.radio("On preemption", PREEMPTION_MODES, key=k(side, "preemption"), horizontal=True)
    c2.toggle("Prefix caching", key=k(side, "prefix"))
    c1, c2, c3 = st.columns([3, 2, 2])
    c1.selectbox("Step cost", list(COST_PRESETS), key=k(side, "cost"), format_func=lambda c: COST_PRESETS[c].label)
    c2.number_input("Queue limit (0 = none)", *BOUNDS["max_queued_requests"], step=1, key=k(side, "queue"),
                    help="max_queued_requests: an arrival that finds this many waiting is rejected (HTTP 503).")
    c3.number_input("Block size (tokens)", *BOUNDS["block_size"], step=1, key=k(side, "block_size"))
    st.button(vllm_mode.GPU_PRESET_LABEL, key=f"cmp_{side}_gpu_preset", help=vllm_mode.GPU_PRESET_HELP,
              on_click=vllm_mode.apply_gpu_preset, args=({
                  "scheduler": k(side, "scheduler"), "version": k(side, "version"), "async": k(side, "async"),
                  "preemption": k(side, "preemption"), "block_size": k(side, "block_size"),
                  "blocks": k(side, "blocks")},))


# ---------------------------------------------------------------------------------------------
# Settings, workload
# ---------------------------------------------------------------------------------------------

SETTINGS.init(fill=PICKER.fill)
with st.sidebar:
    PICKER.draw()
    SLO_IN.draw()
    st.header("Share")
    st.caption("The address bar holds both configurations and the scrubbed step: copy it to share this comparison.")
    SETTINGS.file_panel()
SETTINGS.sync_url()

st.title("Compare")
st.caption(
    "Two configurations serve exactly the same requests, arriving at the same steps. Everything that "
    "differs below is caused by the settings alone: which requests share a forward pass, who waits, who is "
    "preempted, and so how soon each request gets its first token and its last. B starts as A with twice the "
    "KV blocks; change either side.")

workload = PICKER.require()

st.button("Sync vs async: B = A with async scheduling", key="cmp_sync_async", on_click=sync_vs_async,
          icon=":material/sync_alt:",
          help="Sets B to A's settings with vLLM's async scheduling on (the default on GPUs), A sync, both "
               "on vLLM 0.34's rules with the vLLM scheduler and recompute preemption: what a GPU user's "
               "default costs or saves on these arrivals.")
cols = st.columns(2, gap="large")
for side, col in zip(SIDES, cols):
    with col.container(border=True):
        side_widgets(side)

traces: dict[str, Trace] = {}
keys: dict[str, str] = {}
for side in SIDES:
    try:
        cfg = {**side_config(side), **SLO_IN.config(ss[k(side, "policy")])}
        traces[side] = run_trace(workload, cfg, ss[k(side, "cost")])
        keys[side] = run_key(workload, cfg, ss[k(side, "cost")])
    except Exception as e:  # noqa: BLE001 - a user's run that cannot finish is reported, never a crash
        st.error(inert(f"Configuration {side.upper()} cannot run: {e}"), icon=":material/error:")
if len(traces) < 2:
    primer.stop()
ta, tb = traces["a"], traces["b"]
if ta.time_unit != tb.time_unit:
    st.warning(f"A's times are in {ta.time_unit} and B's in {tb.time_unit}: choose the same step cost on both "
               "sides to compare latencies.", icon=":material/warning:")
unit = ta.time_unit
st.caption(f"Scheduling: A {vllm_mode.describe(ta)}; B {vllm_mode.describe(tb)}."
           + (" Async scheduling frees a finished request's slot and blocks one step later and ends each busy "
              "period with a drain call that only applies the last output, so the runs part even on the same settings."
              if vllm_mode.mode(ta)[1] != vllm_mode.mode(tb)[1] else ""))

# ---------------------------------------------------------------------------------------------
# Headline numbers
# ---------------------------------------------------------------------------------------------



@st.cache_resource(max_entries=8, show_spinner="Adding up both runs' numbers…")
def both_numbers(key_a: str, key_b: str, _a: Trace, _b: Trace):
    """compare() and the first step where the runs part, once per pair of runs (a long run's window
    moves without computing them again; shared, not copied: the pages only read them)."""
    return compare(_a, _b), first_difference(_a, _b)


(metrics, per_req), diff_step = both_numbers(keys["a"], keys["b"], ta, tb)  # summary() of both, per-request changes
ma, mb = (dict(zip(metrics["metric"], metrics[side])) for side in ("A", "B"))
HEAD = [("steps", "Steps", True), ("ttft_mean", "Mean TTFT", True), ("ttft_p99", "p99 TTFT", True),
        ("itl_worst", "Worst token gap", True), ("e2e_mean", "Mean end-to-end", True),
        ("throughput", "Tokens / " + (unit[:-1] if unit == "units" else unit), False),
        ("preemptions", "Preemptions", True)]
rejecting = bool(ma["rejected"] or mb["rejected"])
if rejecting:  # latencies count only the requests served: say how many each side turned away
    HEAD.append(("rejected", "Rejected (queue full or SLO)", True))
for i, (key, label, lower_better) in enumerate(HEAD):
    if i % 4 == 0:
        row = st.columns(4)
    va, vb = ma[key], mb[key]
    row[i % 4].metric(label, f"{fmt(va)} → {fmt(vb)}", delta=fmt(vb - va) if vb == vb and va == va else None,
               delta_color="inverse" if lower_better else "normal", help="A → B; the delta is B − A.")
st.caption(f"Times are in {unit}" + (" (the lesson's abstract cost units)" if unit == "units" else "") + "."
           + (" Latencies count the requests each side served: a side that turns requests away serves fewer, "
              "and looks faster for it." if rejecting else ""))

SLO_IN.compare_report(ta, tb)

# ---------------------------------------------------------------------------------------------
# Lock-step animation
# ---------------------------------------------------------------------------------------------

# a long run: its overview, and one window of steps cut from both runs (the numbers above stay whole)
longer = "a" if ta.num_steps >= tb.num_steps else "b"
view = WIN.pick(traces[longer], key=keys[longer], around=diff_step)
w = view.meta.get("window")
va, vb = (cut(keys[s], w["first"], w["last"], traces[s]) for s in SIDES) if w else (ta, tb)

st.subheader("Both runs, step by step")
st.caption(
    "A's slot lanes above, B's below, on one step axis: one row per slot, one column per step, the colour "
    "says which request ran there (the same request has the same colour on both sides), a lighter shade is "
    "prompt work, a darker one recomputation, a red × a preemption"
    + (", a dark ▼ above a side's lanes arrivals it turned away (queue full or SLO admission)" if rejecting else "")
    + ". ▶ Play moves both sides together.")
st.plotly_chart(lockstep_figure(va, vb, titles=(side_title("a"), side_title("b"))), key="lockstep",
                theme=None, config={"displaylogo": False})

st.subheader("Scrub both sides")
in_window = diff_step if diff_step is None or not w or w["first"] <= diff_step <= w["last"] else None
st.caption("One scrubber drives both sides: the KV block map and the batch of the same step in A and B. "
           + ("A and B schedule exactly the same work at every step." if diff_step is None else
              f"It opens on step {diff_step:,}, the first step where A and B schedule differently." if in_window
              is not None else f"A and B first schedule differently at step {diff_step:,}, outside this window."))


@st.fragment
def lockstep_inspector(a: Trace, b: Trace, first_diff: int | None) -> None:
    lo = min(int(a.steps["step"].min()), int(b.steps["step"].min()))
    hi = max(int(a.steps["step"].max()), int(b.steps["step"].max()))
    step = step_scrubber("keep_cmp_step", lo, hi, default=first_diff, buttons="cmp",
                         help="Scrub to any step: both sides follow.")
    SETTINGS.sync_url()
    for side, tr, col in zip(SIDES, (a, b), st.columns(2, gap="large")):
        with col:
            last = int(tr.steps["step"].max())
            s = min(step, last)
            row = tr.steps[tr.steps["step"] == s].iloc[0]
            done = f" (all done at step {last}; showing its end)" if step > last else ""
            st.markdown(f"**{side.upper()} at step {s}**{done}: {int(row['num_tokens'])} tokens, "
                        f"{int(row['num_seqs'])} requests; {int(row['running'])} running, {int(row['waiting'])} waiting")
            fig = kv_map_figure(tr, s)
            meta = fig.layout.meta
            st.caption(f"KV blocks: {meta['used']} in use, {meta['free']} free"
                       + (f", {meta['cached_free']} cached-free" if meta["cached_free"] else "")
                       + f" of {meta['blocks'] - 1}")
            st.plotly_chart(fig, key=f"kv_{side}", theme=None, config={"displaylogo": False})
            batch, _events = inspector_tables(tr, s)
            if tr.requests["tenant"].nunique() <= 1:
                batch = batch.drop(columns="tenant")
            if step > last or batch.empty:
                st.caption("Nothing ran in this step." if step <= last else "")
            else:
                st.dataframe(batch, hide_index=True, key=f"cmp_batch_{side}")


lockstep_inspector(va, vb, in_window)

# ---------------------------------------------------------------------------------------------
# Differences
# ---------------------------------------------------------------------------------------------

st.subheader("What changed")
st.caption("Every headline number of both runs, B − A, and which side is better (lower latency, fewer "
           "preemptions, higher throughput). Latencies are in " + unit + ".")
table = diff_table(metrics).drop(columns="key")
st.dataframe(table, hide_index=True, key="cmp_diff_table",
             column_config={"A": st.column_config.NumberColumn(format="%.4g"),
                            "B": st.column_config.NumberColumn(format="%.4g"),
                            "B - A": st.column_config.NumberColumn(format="%+.4g"),
                            "change %": st.column_config.NumberColumn(format="%+.1f%%")})

st.subheader("Which requests got faster or slower")
metric = st.radio("Latency", list(CHANGE_LABELS), key="keep_cmp_change", horizontal=True,
                  format_func=CHANGE_LABELS.get, label_visibility="collapsed")
fig = change_figure(per_req, metric, unit)
c = fig.layout.meta
st.caption(f"Each bar is one request's {CHANGE_LABELS[metric].lower()} under B minus under A, sorted: green "
           f"bars (left) got faster with B, red (right) got slower. {c['faster']:,} faster, {c['slower']:,} slower, "
           f"{c['same']:,} unchanged" + (f"; {c['missing']:,} without a value on one side (rejected or unfinished)"
                                         if c["missing"] else "") + ".")
st.plotly_chart(fig, key="change", theme=None, config={"displaylogo": False})

st.subheader("Downloads")
stem = (workload.name or "workload").rsplit("/", 1)[-1].removesuffix(".json").removesuffix(".workload")
if w:
    st.caption(f"The files hold the window shown, steps {w['first']:,} to {w['last']:,} (press Whole run "
               "above for all of it).")
    stem = f"{stem}.steps{w['first']}-{w['last']}"
export_panel(va, f"{stem}.A", key="cmp_a", label="A:")
export_panel(vb, f"{stem}.B", key="cmp_b", label="B:")
SETTINGS.sync_url()
