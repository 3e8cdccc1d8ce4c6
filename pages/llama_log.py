"""llama-server log: upload a real `llama-server -v` log and see every batch it ran; then
re-simulate its workload as llama-server slots and as vLLM-style scheduling.

A thin page: the log is read by servers.llama_server (cached, with a progress bar), the re-simulations
run through ui.runs, every chart and table comes from figures.llamalog; settings live in the URL
(ui.state). Nothing from the log is rendered as HTML: token text and log lines only reach the
page through st.dataframe / st.code, and the few log-derived words in markdown are escaped.
"""
from __future__ import annotations

import json
import re
from pathlib import Path

import streamlit as st

from figures.animate import from_spec
from figures.llamalog import (CONFIG, batch_figure, call_tables, call_time_figure, comparison_figure, slot_lanes_figure,
                              task_table, uses_wall_time)
from servers.llama_server import llama_config, read_llama_log, server_runs_table, workload_from_trace
from servers.llama_server.resim import call_cost, has_call_times, resim_table, resimulate, ttft_table
from sim.scheduler import CONFIG_BOUNDS as BOUNDS, PREEMPTION_MODES
from sim.trace import Trace
from sim.workload import Workload
from ui import data_dir, primer
from ui.data_pick import FolderPicker
from ui.exports import export_panel
from ui.labels import fmt, inert, plain
from ui.runs import MAX_STEPS, run_trace
from ui.scrub import step_scrubber
from ui.state import PageSettings, Setting
from ui.window import WindowPicker

ss = st.session_state
SAMPLE_DIR = Path(__file__).resolve().parents[1] / "samples" / "llama-logs"
# key -> (file in samples/llama-logs, title, what it shows)
SAMPLES = {
    "s1_new": ("s1_two_slots_chunked_prompt.34af94cd9.log.gz", "s1 · chunked prompt (2026 build)",
               "`-np 2 -b 256`: slot 0 generates 1,500 tokens; a 2,400-token prompt arrives for slot 1 and is "
               "processed in 255-token chunks (9 × 255 + 105) that share each batch with slot 0's one decode "
               "token. Timestamps on."),
    "s1_old": ("s1_two_slots_chunked_prompt.c392e5094.log.gz", "s1 · chunked prompt (2025 build)",
               "The same run on the February 2025 build, whose log has the older line format "
               "(`decoding batch, n_tokens = N`)."),
    "s3_nocb": ("s3_no_cont_batching.34af94cd9.log.gz", "s3 · no continuous batching",
                "`-np 4 -nocb`: six requests; a prompt is only batched when no slot is generating, so tasks "
                "queue behind running ones. Timestamps on."),
    "s6_cancel": ("s6_stream_cancel_seed601.34af94cd9.log.gz", "s6 · cancelled streams",
                  "`-np 4`: the client drops two streams mid-generation and one 2,800-token prompt right after "
                  "the headers, next to requests that finish normally. No timestamps: the clock is the model call."),
}
UPLOAD_KEY = "ll_upload"
CLOCKS = {"time": "Wall time (when the log has timestamps)", "calls": "Model calls"}
LOG_LABEL, LLAMA_LABEL, VLLM_LABEL = "Real log", "Simulated llama-server", "Simulated vLLM"
WIN = WindowPicker("ll", label="model call")  # a long log opens on its overview; the views below show the window
FOLDER = FolderPicker("keep_ll_file", data_dir.LOGS, "logs")   # files past the upload cap

SETTINGS = PageSettings("ll", [
    Setting("keep_ll_sample", "s1_new", str, choices=tuple(SAMPLES)),
    Setting("keep_ll_logy", True, bool),
    Setting("keep_ll_clock", "time", str, choices=tuple(CLOCKS)),
    Setting("keep_ll_step", None, int, bounds=(0, 10**9)),
    Setting("keep_ll_resim", False, bool),  # one click away: the log itself first
    Setting("keep_ll_slots", 2, int, bounds=BOUNDS["max_num_seqs"]),
    Setting("keep_ll_nbatch", 2048, int, bounds=BOUNDS["max_num_batched_tokens"]),
    Setting("keep_ll_cb", True, bool),
    Setting("keep_ll_v_budget", 2048, int, bounds=BOUNDS["max_num_batched_tokens"]),
    Setting("keep_ll_v_seqs", 2, int, bounds=BOUNDS["max_num_seqs"]),
    Setting("keep_ll_v_blocks", 1024, int, bounds=BOUNDS["num_gpu_blocks"]),
    Setting("keep_ll_v_preempt", "recompute", str, choices=PREEMPTION_MODES),
    FOLDER.setting(),
    *WIN.settings(),
])
KNOBS = ("keep_ll_slots", "keep_ll_nbatch", "keep_ll_cb", "keep_ll_v_budget", "keep_ll_v_seqs",
         "keep_ll_v_blocks", "keep_ll_v_preempt")

# ---------------------------------------------------------------------------------------------
# Reading the log (cached; the bytes are not hashed by Streamlit, the key names them)
# ---------------------------------------------------------------------------------------------

@st.cache_data(max_entries=6, show_spinner=False)
def parse_log(key: str, name: str, _data) -> Trace:
    bar = st.progress(0, text=f"Reading {name}…")  # made here, so a cache hit replays (and clears) it
    shown = [-1]

    def progress(done: int, total: int | None) -> None:
        pct = int(100 * done / total) if total else 0
        if pct != shown[0]:
            shown[0] = pct
            bar.progress(min(pct, 100), text=f"Reading {name}… {done / 1e6:,.1f} of {(total or 0) / 1e6:,.1f} MB")

    try:
        return read_llama_log(_data, progress=progress, name=name)
    finally:
        bar.empty()


@st.cache_data(max_entries=16, show_spinner=False)
def log_views(key: str, window: str, logy: bool, clock: str, _view: Trace) -> dict:
    """The log's big views of the window shown (all of a short log), built once per (log, window,
    view settings): figures as dicts."""
    return {"batches": batch_figure(_view, log_y=logy).to_plotly_json(),
            "lanes": slot_lanes_figure(_view, clock).to_plotly_json()}


@st.cache_data(max_entries=16, show_spinner=False)
def tasks_view(key: str, _trace: Trace):
    """The task table, of the whole log (a task cut by a window would not add up to its timings)."""
    return task_table(_trace)


@st.cache_data(max_entries=16, show_spinner=False)
def call_time_view(key: str, _trace: Trace) -> dict:
    """How long each call took (built when its tab is first opened)."""
    return call_time_figure(_trace).to_plotly_json()


@st.cache_data(max_entries=16, show_spinner=False)
def resim_tables(key: str, configs: str, clock: str, _runs: dict[str, Trace]) -> dict:
    """The log against its re-simulations in numbers, once per (log, knobs, clock)."""
    return {"table": resim_table(_runs, clock), "ttft": ttft_table(_runs, clock)}


@st.cache_data(max_entries=16, show_spinner=False)
def resim_figure(key: str, configs: str, view: str, logy: bool, _runs: dict[str, Trace]) -> dict:
    """One side-by-side view ("batch" or "lanes") of the log and its re-simulations."""
    return comparison_figure(_runs, view, log_y=logy and view == "batch").to_plotly_json()


@st.cache_data(max_entries=8, show_spinner="Fitting the calls' cost and simulating…")
def wall_clock_runs(key: str, configs: str, _trace: Trace) -> tuple[dict, dict[str, Trace]]:
    """The re-simulations on the log's clock: (the fitted cost model, {label: trace})."""
    cost = call_cost(_trace)
    return cost.describe(), resimulate(_trace, json.loads(configs), wall_clock=True, cost=cost, max_steps=MAX_STEPS)


def _interesting_call(tr: Trace) -> int:
    """Where the inspector opens on a new log: the first call holding the most tokens."""
    s = tr.steps
    return int(s["step"].iloc[int(s["num_tokens"].to_numpy().argmax())]) if len(s) else 1


def _delta(d: float, unit: str) -> dict:
    """st.metric delta arguments for a difference to the log (fewer is better; none is grey)."""
    if d != d:  # NaN
        return {}
    if abs(d) < 1e-9:
        return {"delta": "same as the log", "delta_color": "off", "delta_arrow": "off"}
    return {"delta": f"{d:+,.3g} {unit} vs the log", "delta_color": "inverse"}


def _fill_knobs(tr: Trace, wl: Workload | None) -> None:
    """The re-simulation knobs as the log's server ran (a setting the link gave is kept)."""
    lc = llama_config(tr)
    wl_cfg = wl.config if wl is not None else {"num_gpu_blocks": 1024}
    derived = {"keep_ll_slots": lc["slots"], "keep_ll_nbatch": lc["n_batch"], "keep_ll_cb": lc["cont_batching"],
               "keep_ll_v_budget": lc["n_batch"], "keep_ll_v_seqs": lc["slots"],
               "keep_ll_v_blocks": int(wl_cfg["num_gpu_blocks"]), "keep_ll_v_preempt": "recompute"}
    for key, v in derived.items():
        bounds = SETTINGS.by_key[key].bounds
        if not SETTINGS.given(key):
            ss[key] = int(min(max(v, bounds[0]), bounds[1])) if bounds else v


# ---------------------------------------------------------------------------------------------
# Sidebar: the log and the view
# ---------------------------------------------------------------------------------------------

SETTINGS.init()
max_mb = int(st.get_option("server.maxUploadSize"))

with st.sidebar:
    st.header("Log")
    up = st.file_uploader("Upload a llama-server log", type=["log", "txt", "gz"], key=UPLOAD_KEY,
                          help=f"The output of `llama-server ... -v` (stdout and stderr), as .log / .txt or "
                               f"gzip-compressed (.gz); up to {max_mb} MB. Both the 2025 and the 2026 log "
                               "formats are read, with or without timestamps and prefixes.")
    chosen = FOLDER.draw(disabled=up is not None)
    st.selectbox("Or a bundled sample", list(SAMPLES), key="keep_ll_sample", format_func=lambda k: SAMPLES[k][1],
                 disabled=up is not None or bool(chosen),
                 help="Real logs of llama-server runs with a tiny model (samples/llama-logs/).")
    if up is not None:
        st.caption("Showing the uploaded log. Remove it (×) to go back to the sample.")
    elif chosen:
        st.caption("Showing a file of the server's data folder. Pick (none) to go back to the sample.")
    else:
        st.caption(SAMPLES[ss["keep_ll_sample"]][2])
    st.header("View")
    st.toggle("Log scale for tokens", key="keep_ll_logy",
              help="A decode entry is one token, a prompt chunk can be thousands: on a log scale both show.")
    st.radio("Slot lanes over", list(CLOCKS), key="keep_ll_clock", format_func=CLOCKS.get,
             help="Wall time needs a log with timestamps (`--log-timestamps`, the default in newer builds); "
                  "without them the lanes use the model-call index.")
    st.header("Share")
    st.caption("The address bar holds the sample and every setting (not an uploaded file).")
    SETTINGS.file_panel()

# ---------------------------------------------------------------------------------------------
# Main area
# ---------------------------------------------------------------------------------------------

st.title("llama-server log")
st.caption("Run llama-server with `-v`, upload its log, and see what the server really did: every call to the "
           "model as a stacked bar of its batch, the slots as lanes over time, each task's life and the numbers "
           "the server printed. Then re-simulate the same workload under other settings.")

data, name, size, key = FOLDER.source(up, SAMPLE_DIR / SAMPLES[ss["keep_ll_sample"]][0])
try:
    trace = parse_log(key, name, data)
except OSError:   # the folder's file went away between the listing and the read
    st.error("The file could not be read.", icon=":material/error:")
    primer.stop()
meta = trace.meta

try:
    workload = workload_from_trace(trace)
except Exception as e:  # noqa: BLE001 - a log the re-simulation cannot use still shows what it has
    workload, workload_problem = None, f"The workload cannot be extracted from this log: {plain(e)}"
else:
    workload_problem = None

if ss.get("ll_log_id") != key:  # a new log: knobs as its server ran, inspector on its biggest call
    ss["ll_log_id"] = key
    if len(trace.steps):
        _fill_knobs(trace, workload)
    if not SETTINGS.given("keep_ll_step"):
        ss["keep_ll_step"] = _interesting_call(trace)
    if not SETTINGS.given(WIN.key):
        ss[WIN.key] = None

n_calls, n_tasks = len(trace.steps), len(trace.requests)
unparsed = int(meta.get("unparsed_lines") or 0)
clock = "wall-clock timestamps" if uses_wall_time(trace) else "no timestamps (the clock is the model call)"
st.markdown(f"**{plain(name)}** · {size / 1e6:,.2f} MB · build **{plain(meta.get('build') or 'unknown')}** "
            f"(as the log states it) · {clock}")
if meta.get("line_prefixes") or (meta.get("clock") or "").endswith("prefix"):
    st.caption(f"Lines carry a prefix added by the tool that collected them ({plain(', '.join(meta.get('line_prefixes') or []))}): "
               f"each is read after it. Clock: {plain(meta.get('clock') or 'unknown')}, from "
               f"{plain(meta.get('time_origin') or 'unknown')}.")
n_partial = int(trace.requests["partial"].sum()) if "partial" in trace.requests.columns else 0
if n_partial:
    st.info(f"{n_partial:,} task(s) began before the log or were still running at its end: their rows in the "
            "task table say *partial*, and hold only what the log shows (the first lines are not guessed).",
            icon=":material/content_cut:")
if meta.get("log_format"):   # a 2024 build's log (servers/llama_server/legacy.py): what its lines cannot tell
    st.caption(f"Read as {plain(meta['log_format'])}. "
               + " ".join(plain(x[:1].upper() + x[1:]) + "." for x in meta.get("format_limits") or []))
cols = st.columns(6)
cols[0].metric("Model calls", fmt(n_calls), help="Scheduling iterations that called the model (batches).")
cols[1].metric("Tasks", fmt(n_tasks), help="Tasks that took a slot (the server's task ids).")
cols[2].metric("Slots (-np)", fmt(meta.get("n_slots")),
               help=f"Context per slot: {fmt(meta.get('n_ctx_slot'))} of n_ctx {fmt(meta.get('n_ctx'))}.")
cols[3].metric("Batch (-b)", fmt(meta.get("n_batch")), help=f"Micro-batch (-ub): {fmt(meta.get('n_ubatch'))}.")
cb = meta.get("cont_batching")
cols[4].metric("Cont. batching", "unknown" if cb is None else ("on" if cb else "off"),
               help="-cb / -nocb, inferred from the batches: "
                    + plain(meta.get("cont_batching_evidence") or "not observable"))
cols[5].metric("Unparsed lines", fmt(unparsed),
               help="Lines of the scheduler's families (slot / srv / que) that the reader did not understand.")
checked = int(meta.get("batches_checked_against_log") or 0)
if checked:
    st.caption(f"{checked:,} batches checked against the server's own `n_tokens`: "
               f"{int(meta.get('batch_mismatches') or 0):,} differ.")

warnings = list(meta.get("warnings") or [])
if warnings:
    st.warning("**What the reader could not rebuild.** What it could is shown below.\n\n"
               + "\n".join(f"- {plain(w)}" for w in warnings), icon=":material/warning:")
n_runs = int(meta.get("runs") or 1)
if n_runs > 1:
    st.markdown(f"**{n_runs} server runs in this log**, as their start-up lines describe them "
                "(blank: not printed):")
    st.dataframe(server_runs_table(trace), hide_index=True, key="ll_runs")
if unparsed:
    with st.expander(f"{unparsed:,} line(s) not understood: examples"):
        st.code("\n".join(meta.get("unparsed_examples") or []) or "(no examples kept)", language=None)

if n_calls == 0:
    st.error("No model calls were found in this file, so there are no batches to show. Is it the output of "
             "llama-server started with `-v`?", icon=":material/error:")
    if n_tasks:
        st.dataframe(task_table(trace), hide_index=True)
    primer.stop()

b = trace.batch
prompt_tok = int(b.loc[(b["kind"] != "decode").to_numpy(dtype=bool), "tokens"].sum())
decode_tok = int(b.loc[(b["kind"] == "decode").to_numpy(dtype=bool), "tokens"].sum())
logy = bool(ss["keep_ll_logy"])

view = WIN.pick(trace, key=key, around=ss.get("keep_ll_step"))
SETTINGS.sync_url()  # the window is part of the link
win = view.meta.get("window")
win_key = f"{win['first']}-{win['last']}" if win else "all"

st.subheader("Batch composition")
st.markdown(f"**{n_calls:,} model calls** · {len(b):,} batch entries · {prompt_tok:,} prompt tokens · "
            f"{decode_tok:,} decode tokens" + (f" (the whole log; below: calls {win['first']:,} to {win['last']:,})"
                                               if win else ""))
views = log_views(key, win_key, logy, ss["keep_ll_clock"], view)


def tokens_per_call() -> None:
    st.caption("One bar per call to the model, stacked by slot. Solid: the slot's decode token (one per call, more "
               "with speculative decoding); hatched and lighter: a chunk of its prompt. The dashed line is the "
               "batch limit (-b). Drag across the chart to zoom; the call inspector below shows any call up close.")
    k_bin = views["batches"]["layout"]["meta"]["bin"]
    if k_bin > 1:
        st.caption(f"{n_calls:,} calls are too many to draw one by one: each bar is {k_bin} calls (the mean per "
                   "call). Scrub the inspector to see single calls.")
    st.plotly_chart(from_spec(views["batches"]), key="ll_batches", theme=None, config=CONFIG)


def time_per_call() -> None:
    spec = call_time_view(f"{key}:{win_key}", view)
    m = spec["layout"]["meta"]
    text = ("How long each call took, from its model-call line to the line that ends it (the log's timestamps). "
            "Decode tokens wait for the whole call, so a slow call is a stutter for every task decoding in it; "
            "calls that carried a prompt chunk are orange.")
    if m.get("worst_ms") and m.get("median_decode_ms"):
        text += (f" The slowest, call {m['worst_call']:,}, took {m['worst_ms']:,.1f} ms against a median "
                 f"decode-only call of {m['median_decode_ms']:,.2f} ms"
                 + (" and carried a prompt chunk." if m["worst_has_prompt"] else "."))
    if m["unknown"]:
        text += f" {m['unknown']:,} call(s) have no duration in the log."
    if m["shown"] < m["calls"] - m["unknown"]:
        text += (f" {m['shown']:,} points drawn: ordinary decode-only calls thinned evenly, every call with a "
                 "prompt chunk or over twice the median kept.")
    st.caption(text)
    st.plotly_chart(from_spec(spec), key="ll_call_times", theme=None, config=CONFIG)


if uses_wall_time(view):   # only the open tab's chart is built and sent
    tab_tokens, tab_time = st.tabs(["Tokens per call", "Time per call"], key="ll_batch_tab", on_change="rerun")
    with tab_tokens:
        if tab_tokens.open:
            tokens_per_call()
    with tab_time:
        if tab_time.open:
            time_per_call()
else:
    tokens_per_call()

st.subheader("Slot lanes")
st.caption("One lane per slot, in the slot's colour. Each task's prompt processing (hatched) and generation "
           "(solid), labelled with its task id where there is room (hover for the rest); the dotted line is the "
           "time it waited in the queue; ✕ marks a cancel. A gap inside a task is calls in which the slot was "
           "left out of the batch.")
st.plotly_chart(from_spec(views["lanes"]), key="ll_lanes", theme=None, config=CONFIG)

st.subheader("Tasks")
st.caption("Per task: what the log's lines rebuild next to what the server printed in its timing block "
           "(`prompt eval time` / `eval time`). Check ✓: the rebuilt prompt and generated counts equal the "
           "server's own; – the server printed none (a cancelled task). Token gaps: the longest and the mean wait "
           "between two of a task's tokens, the stutter its client saw (a long one usually means other tasks' "
           "prompt chunks shared those calls).")
st.dataframe(tasks_view(key, trace), hide_index=True, key="ll_tasks")


@st.fragment
def call_inspector(tr: Trace) -> None:
    steps = tr.steps["step"]
    lo, hi = int(steps.min()), int(steps.max())
    step = step_scrubber("keep_ll_step", lo, hi, default=_interesting_call(tr), label="Model call",
                         help="Scrub to any call: the chart and the tables follow.", buttons="ll")
    SETTINGS.sync_url()
    half = 30
    w0, w1 = max(lo, step - half), min(hi, step + half)
    fig = batch_figure(tr, (w0, w1), mark=step, log_y=bool(ss["keep_ll_logy"]), height=260, legend=False)
    fig.update_layout(margin={"t": 16})
    st.plotly_chart(fig, key="ll_call_window", theme=None, config=CONFIG)
    entries, events, facts = call_tables(tr, step)
    left, right = st.columns([3, 2], gap="large")
    with left:
        n = facts["entries"]
        line = f"**Call {step}**: {facts['tokens']:,} tokens in {n} {'entry' if n == 1 else 'entries'}"
        if "logged" in facts:
            ok = "matches" if facts["logged"] == facts["tokens"] else "differs from"
            line += f"; {ok} the server's own `n_tokens = {facts['logged']:,}`"
        if "ms" in facts:
            line += f"; ran {facts['ms']:,.1f} ms (at {facts['start'] / 1000:,.3f} s)"
        st.markdown(line)
        st.dataframe(entries, hide_index=True, key="ll_call_entries")
    with right:
        st.markdown("**Events in this call**")
        if events.empty:
            st.caption("None: no task was queued, launched, finished or cancelled here.")
        else:
            st.dataframe(events, hide_index=True, key="ll_call_events")


st.subheader("Call inspector")
call_inspector(view)

# ---------------------------------------------------------------------------------------------
# Re-simulate
# ---------------------------------------------------------------------------------------------

st.subheader("Re-simulate")
wall_possible = has_call_times(trace)
wall = wall_possible and ss["keep_ll_clock"] == "time"
st.caption("The log's workload (each task's arrival, prompt and output length, the prompt cache it hit) through "
           "the simulator: once as llama-server slots, once as vLLM-style paged scheduling with preemption. "
           + ("On wall time (the clock chosen above), each simulated call costs what a cost model fitted to this "
              "log's calls says, and tasks arrive when the log says they did." if wall else
              "All three runs are compared on the model-call clock"
              + (" (choose wall time above to compare in milliseconds)." if wall_possible else
                 " (this log has no timestamps, so its calls have no durations to compare in milliseconds).")))
st.toggle("Re-simulate this workload", key="keep_ll_resim")
if ss["keep_ll_resim"] and workload is None:
    st.error(inert(workload_problem), icon=":material/error:")
elif ss["keep_ll_resim"] and not workload.requests:
    st.info("No task in this log took a slot, so there is nothing to re-simulate.", icon=":material/info:")
elif ss["keep_ll_resim"]:
    if n_runs > 1:
        st.info(f"This log holds {n_runs} server runs. The re-simulation serves all their tasks as one "
                "workload, one run after the other, under the settings below (one server, not each run's own).",
                icon=":material/info:")
    c1, c2 = st.columns(2, gap="large")
    with c1:
        st.markdown("**llama-server slots**")
        a, b2 = st.columns(2)
        a.number_input("Slots (-np)", *BOUNDS["max_num_seqs"], step=1, key="keep_ll_slots")
        b2.number_input("Batch size (-b)", *BOUNDS["max_num_batched_tokens"], step=64, key="keep_ll_nbatch")
        st.toggle("Continuous batching (-cb; off = -nocb)", key="keep_ll_cb",
                  help="Off: a prompt is only batched when no slot is generating.")
        st.caption(f"Micro-batch (-ub) {fmt(meta.get('n_ubatch'))}, as logged, kept: it splits a call for "
                   "computing, not what rides in it, so it moves no token between calls; on wall time the "
                   "fitted cost already holds the log's splits (too few calls exceed -ub to fit a cost per piece).")
    with c2:
        st.markdown("**vLLM-style scheduling**")
        a, b2 = st.columns(2)
        a.number_input("Token budget / call", *BOUNDS["max_num_batched_tokens"], step=64, key="keep_ll_v_budget",
                       help="max_num_batched_tokens: prompt chunks and decode tokens of one forward pass.")
        b2.number_input("Max sequences", *BOUNDS["max_num_seqs"], step=1, key="keep_ll_v_seqs",
                        help="max_num_seqs: requests running at once.")
        a.number_input("KV blocks (16 tokens)", *BOUNDS["num_gpu_blocks"], step=16, key="keep_ll_v_blocks",
                       help="num_gpu_blocks, including the null block. Fewer blocks force preemptions.")
        b2.radio("On preemption", PREEMPTION_MODES, key="keep_ll_v_preempt", horizontal=True)
    SETTINGS.sync_url()
    base = dict(workload.config)
    llama_cfg = {**base, "scheduler": "llama_slots", "max_num_seqs": int(ss["keep_ll_slots"]),
                 "max_num_batched_tokens": int(ss["keep_ll_nbatch"]), "cont_batching": bool(ss["keep_ll_cb"])}
    vllm_cfg = {**base, "scheduler": "vllm", "max_num_batched_tokens": int(ss["keep_ll_v_budget"]),
                "max_num_seqs": int(ss["keep_ll_v_seqs"]), "num_gpu_blocks": int(ss["keep_ll_v_blocks"]),
                "preemption_mode": ss["keep_ll_v_preempt"]}
    runs: dict[str, Trace] = {LOG_LABEL: trace}
    configs = {LLAMA_LABEL: llama_cfg, VLLM_LABEL: vllm_cfg}
    if wall:
        try:
            fit, sims = wall_clock_runs(key, json.dumps(configs, sort_keys=True), trace)
        except Exception as e:  # noqa: BLE001 - too few calls to fit, or a run that cannot finish
            st.warning(f"No re-simulation on wall time: {plain(e)}. Showing model calls instead.",
                       icon=":material/warning:")
            wall = False
        else:
            runs.update(sims)
            r2 = fit["fit"].get("r2")
            st.markdown(
                f"Cost of a call, fitted to the log's {fit['fit'].get('samples', 0):,} calls (each from its first "
                f"line to the next call's): **{fmt(fit['per_step'])} ms + {fmt(fit['per_token'])} ms per token + "
                f"{fmt(fit['per_context_token'] * 1000)} µs per context token** (R² {fmt(r2)}). Not simulated: "
                "context shifts, KV-cache failures and their retries, cancelled streams.")
    if not wall:
        for label, cfg in configs.items():
            try:
                runs[label] = run_trace(workload, cfg, "units")
            except Exception as e:  # noqa: BLE001 - a configuration that cannot run is reported, never a crash
                st.error(f"{label} cannot run with these settings: {plain(e)}", icon=":material/error:")
    clock = "ms" if wall else "calls"
    if len(runs) > 1:
        cfg_key = json.dumps([llama_cfg, vllm_cfg, clock], sort_keys=True)
        rv = resim_tables(key, cfg_key, clock, runs)
        table = rv["table"]
        sims = [k for k in runs if k != LOG_LABEL]
        m = table.set_index("metric")
        cols = st.columns(2 * len(sims))
        ttft_row = f"mean TTFT ({clock})"
        for i, label in enumerate(sims):
            dc = m.loc["model calls", label] - m.loc["model calls", LOG_LABEL]
            dt = m.loc[ttft_row, label] - m.loc[ttft_row, LOG_LABEL]
            cols[2 * i].metric(f"{label}: model calls", fmt(int(m.loc["model calls", label])),
                               **_delta(dc, "calls"))
            cols[2 * i + 1].metric(f"{label}: mean TTFT", fmt(float(m.loc[ttft_row, label]), clock),
                                   **_delta(dt, clock))
        # only the open tab's chart is built and sent (one chart less to draw on a first visit)
        tab1, tab2 = st.tabs(["Batches", "Slot lanes"], key="ll_cmp_tab", on_change="rerun")
        with tab1:
            if tab1.open:
                st.plotly_chart(from_spec(resim_figure(key, cfg_key, "batch", logy, runs)), key="ll_cmp_batches",
                                theme=None, config=CONFIG)
        with tab2:
            if tab2.open:
                st.plotly_chart(from_spec(resim_figure(key, cfg_key, "lanes", logy, runs)), key="ll_cmp_lanes",
                                theme=None, config=CONFIG)
        st.dataframe(table, hide_index=True, key="ll_resim_table",
                     column_config={c: st.column_config.NumberColumn(format="%.4g") for c in table.columns[1:]})
        with st.expander(f"TTFT per task ({'ms' if wall else 'model calls'})"):
            per_task = rv["ttft"]
            st.dataframe(per_task, hide_index=True, key="ll_ttft_table",
                         column_config={c: st.column_config.NumberColumn(format="%.4g") for c in per_task.columns[1:]})

# ---------------------------------------------------------------------------------------------
# Downloads
# ---------------------------------------------------------------------------------------------

st.subheader("Downloads")
stem = re.sub(r"[^A-Za-z0-9._-]+", "_", name).removesuffix(".gz").removesuffix(".log").removesuffix(".txt") or "log"
if win:
    st.caption(f"The Trace file, tables and Perfetto trace hold the window shown, calls {win['first']:,} to "
               f"{win['last']:,} (press Whole run above for all of it); the workload is the whole log's.")
export_panel(view, f"{stem}.calls{win['first']}-{win['last']}" if win else stem, key="ll")
d1, _, _ = st.columns(3)
if workload is not None:
    d1.download_button("Workload JSON (for the other pages)", data=lambda: workload.dumps(),
                       file_name=f"{stem}.workload.json", mime="application/json", on_click="ignore",
                       key="ll_dl_workload", icon=":material/download:", width="stretch",
                       help="The log's tasks as a workload: upload it on Playback or Compare to try other "
                            "schedulers.")
SETTINGS.sync_url()
