"""Static vs continuous batching: the same requests both ways (lesson Examples 2 and 3).

A thin page: the workload and the counts come from sim.lessons.sweeps (batching_workload,
batching_config, batching_figures), the runs from ui.runs, the charts from figures.batching.
"""
from __future__ import annotations

import streamlit as st

from figures.batching import batching_figure, finish_figure
from sim.lessons.lesson import LESSON_OUTPUT_LENS
from sim.lessons.sweeps import batching_config, batching_figures, batching_workload, parse_int_list
from ui import primer
from ui.exports import export_panel
from ui.labels import inert
from ui.runs import run_trace
from ui.state import PageSettings, Setting

ss = st.session_state
MAX_REQUESTS, MAX_TOKENS, MAX_ARRIVAL = 64, 500, 10_000  # runs of at most ~32k steps stay quick

SETTINGS = PageSettings("sb", [
    Setting("keep_sb_outputs", ", ".join(map(str, LESSON_OUTPUT_LENS)), str),
    Setting("keep_sb_slots", 4, int, bounds=(1, 64)),
    Setting("keep_sb_arrivals", "", str),
])
SETTINGS.init()

with st.sidebar:
    st.header("Requests")
    st.text_input("Tokens each request generates", key="keep_sb_outputs",
                  help=f"Output lengths of r0, r1, ... separated by commas (up to {MAX_REQUESTS} requests, "
                       f"1 to {MAX_TOKENS:,} tokens each). The lesson's: {', '.join(map(str, LESSON_OUTPUT_LENS))}.")
    st.text_input("Arrival steps (empty: all at once)", key="keep_sb_arrivals", placeholder="e.g. 0, 0, 2, 5, 9, 9, 20, 30",
                  help="One number per request: it joins the queue right before step number + 1. Leave empty for "
                       "the lesson's case, where every request is waiting at the start.")
    st.number_input("Slots (requests per batch)", 1, 64, step=1, key="keep_sb_slots",
                    help="How many requests run together: the group size of static batching and max_num_seqs of "
                         "continuous batching.")
    st.header("Share")
    st.caption("The address bar holds every setting: copy it to share this comparison.")
    SETTINGS.file_panel()
SETTINGS.sync_url()

st.title("Static vs continuous batching")
st.markdown(
    "**Static batching** forms a group, runs it until its *longest* request is done, and only then forms the "
    "next group: a request that finishes early keeps its place as **padding** and its result returns with the "
    "group's. **Continuous batching** decides at every step: a finished request leaves at once and a waiting one "
    "takes its slot before the next step. Below, the same requests run both ways.")

try:
    outputs = parse_int_list(ss["keep_sb_outputs"], "output length", 1, MAX_TOKENS, MAX_REQUESTS)
    arr_text = ss["keep_sb_arrivals"].strip()
    arrivals = parse_int_list(arr_text, "arrival step", 0, MAX_ARRIVAL, MAX_REQUESTS) if arr_text else None
    workload = batching_workload(outputs, arrivals)
except ValueError as e:
    st.error(inert(f"Check the requests on the left: {e}."), icon=":material/error:")
    primer.stop()
slots = int(ss["keep_sb_slots"])
static = run_trace(workload, batching_config("static", slots), "units")
cont = run_trace(workload, batching_config("vllm", slots), "units")
fs, fc = batching_figures(static, slots), batching_figures(cont, slots)


def pct(f: dict) -> int:
    """The useful share of slot-steps as the lesson prints it (whole percent, rounded down)."""
    return 100 * f["useful_tokens"] // f["slot_steps"] if f["slot_steps"] else 0


left, right = st.columns(2, gap="medium")
for col, name, f, other in ((left, "Static batching", fs, None), (right, "Continuous batching", fc, fs)):
    with col.container(border=True):
        st.markdown(f"**{name}**")
        m1, m2, m3 = st.columns(3)
        m1.metric("Steps", f"{f['steps']:,}", delta=None if other is None else f"{f['steps'] - other['steps']:+,}",
                  delta_color="inverse", help="Steps until the last result returns.")
        m2.metric("Useful slot-steps", f"{pct(f)}%",
                  delta=None if other is None else f"{pct(f) - pct(other):+} points",
                  help=f"{f['useful_tokens']:,} useful tokens of {f['slot_steps']:,} slot-steps (slots x steps "
                       f"that ran); the rest is padding ({f['padding_slot_steps']:,}) or empty ({f['empty_slot_steps']:,}).")
        m3.metric("Mean finish step", f"{f['mean_finish']:.6g}",
                  delta=None if other is None else f"{f['mean_finish'] - other['mean_finish']:+.6g}",
                  delta_color="inverse", help="The mean of the steps at which each request's result returns.")
        st.caption(f"{f['useful_tokens']:,} of {f['slot_steps']:,} slot-steps useful · {f['padding_slot_steps']:,} "
                   f"padding · {f['empty_slot_steps']:,} empty"
                   + (f" · mean latency {f['mean_latency']:.6g} steps" if arrivals else ""))

st.subheader("Slot lanes, step by step")
st.caption("One row per slot, one column per step; the colour says which request holds the slot. Faded cells are "
           "padding (a finished request still holding its place), light cells a request's first step, grey cells "
           "an empty slot, and a black bar marks where a result returns. ▶ Play runs both schedules together.")
st.plotly_chart(batching_figure(static, cont, (f"Static batching: {fs['steps']} steps, {pct(fs)}% useful",
                                               f"Continuous batching: {fc['steps']} steps, {pct(fc)}% useful")),
                key="sb_lanes", theme=None, config={"displaylogo": False})

ids = [str(r) for r in static.requests["request"]]
st.subheader("When each result returns")
st.plotly_chart(finish_figure(ids, outputs, fs["finish_steps"], fc["finish_steps"], fs["mean_finish"],
                              fc["mean_finish"]), key="sb_finish", theme=None, config={"displaylogo": False})

short = min(range(len(outputs)), key=lambda i: (outputs[i], i))
st.markdown(
    f"**What happened.** Static batching needs **{fs['steps']} steps** and uses {fs['useful_tokens']} of its "
    f"{fs['slot_steps']} slot-steps ({pct(fs)}%). Request r{short} needs only {outputs[short]} tokens, yet its "
    f"result returns at step **{fs['finish_steps'][short]}**, with its group (under continuous batching: step "
    f"{fc['finish_steps'][short]}). Continuous batching refills every freed slot at once, so the same "
    f"{fc['useful_tokens']} tokens take **{fc['steps']} steps** ({pct(fc)}% useful) and the mean finish step drops "
    f"from {fs['mean_finish']:.6g} to **{fc['mean_finish']:.6g}**. Its empty slot-steps are the tail, when too few "
    f"requests are left to fill the slots.")
with st.expander("Comparison table"):
    rows = {"steps": "steps", "useful tokens": "useful_tokens", "slot-steps": "slot_steps",
            "padding slot-steps": "padding_slot_steps", "empty slot-steps": "empty_slot_steps",
            "mean finish step": "mean_finish", "mean latency (finish - arrival)": "mean_latency",
            "finish step per request": "finish_steps", "steps a waiting request joined": "join_steps"}

    def cell(v) -> str:
        return ", ".join(map(str, v)) if isinstance(v, list) else f"{v:.6g}" if isinstance(v, float) else f"{v:,}"
    st.dataframe([{"": label, "static": cell(fs[k]), "continuous": cell(fc[k])} for label, k in rows.items()],
                 hide_index=True, key="sb_table")

st.subheader("Downloads")
export_panel(static, "batching_static", key="sb_static", label="Static:")
export_panel(cont, "batching_continuous", key="sb_cont", label="Continuous:")
