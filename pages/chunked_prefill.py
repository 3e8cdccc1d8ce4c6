"""Prefill interference and chunked prefill: a long prompt joining steady decoders (lesson
Examples 4 and 5).

A thin page: the run is sim.lessons.sweeps.interference_case through ui.runs, its reading
sim.lessons.lesson.long_prompt_summary, the budget curve sim.lessons.sweeps.budget_sweep, the charts
figures.interference.
"""
from __future__ import annotations

import pandas as pd
import streamlit as st

from figures.interference import budget_figure, timeline_figure
from sim.cost import COST_PRESETS, cost_from_preset
from sim.lessons.lesson import long_prompt_summary
from sim.lessons.sweeps import LESSON_BUDGETS, budget_sweep, interference_case, min_budget, sweep_budgets, sweet_spot
from ui import primer
from ui.exports import export_panel
from ui.labels import inert
from ui.runs import run_trace
from ui.state import PageSettings, Setting

ss = st.session_state
ARRIVAL_STEP = 4  # the lesson's long prompt arrives before step 4

SETTINGS = PageSettings("pf", [
    Setting("keep_pf_cost", "units", str, choices=tuple(COST_PRESETS)),
    Setting("keep_pf_decoders", 4, int, bounds=(1, 64)),
    Setting("keep_pf_prompt", 4000, int, bounds=(16, 32_768)),
    Setting("keep_pf_budget", 4004, int, bounds=(2, 40_000)),
    Setting("keep_pf_tolerance", 5, int, bounds=(0, 100)),
])
SETTINGS.init()

with st.sidebar:
    st.header("Requests")
    st.number_input("Decoding requests", 1, 64, step=1, key="keep_pf_decoders",
                    help="Requests already generating: each gets one token in every step.")
    st.number_input("Long prompt (tokens)", 16, 32_768, step=500, key="keep_pf_prompt",
                    help=f"A new request whose prompt arrives before step {ARRIVAL_STEP}.")
    st.header("Step cost")
    st.selectbox("Cost model", list(COST_PRESETS), key="keep_pf_cost", format_func=lambda k: COST_PRESETS[k].label,
                 help="Units: the lesson's toy roofline, max(10, tokens / 50). Roofline presets: max(bytes / "
                      "bandwidth, FLOPs / peak) on a real GPU and model, in milliseconds.")
    with st.expander("Sweet spot rule"):
        st.slider("Allowed worst gap above the best (%)", 0, 100, key="keep_pf_tolerance",
                  help="The sweet spot is the budget with the earliest first token among those whose worst decoder "
                       "gap is within this margin of the smallest worst gap any budget achieves.")
    st.header("Share")
    st.caption("The address bar holds every setting: copy it to share this run.")
    SETTINGS.file_panel()

decoders, prompt = int(ss["keep_pf_decoders"]), int(ss["keep_pf_prompt"])
cost_key = ss["keep_pf_cost"]
lo, hi = min_budget(decoders, prompt), decoders + prompt
ss["keep_pf_budget"] = min(hi, max(lo, int(ss["keep_pf_budget"])))  # keep it inside the slider's range

st.title("Prefill interference and chunked prefill")
st.markdown(
    "A step's cost grows with the tokens in it. A decode step carries one token per generating request and is "
    "limited by reading the weights; a step that also carries a long **prompt** is limited by arithmetic and "
    "takes much longer, and **every decoding user waits for it**. A per-step **token budget** cuts the prompt "
    "into chunks: each step first gives every decoder its token, then fills the rest of the budget with the "
    "next chunk of the prompt.")

budget = st.slider("Token budget per step", lo, hi, key="keep_pf_budget",
                   help="vLLM's --max-num-batched-tokens, llama-server's -b. The largest value processes the whole "
                        "prompt in one step (no chunking).")
SETTINGS.sync_url()

workload, config, horizon = interference_case(decoders, prompt, budget, ARRIVAL_STEP)
try:
    trace = run_trace(workload, config, cost_key)
except Exception as e:  # noqa: BLE001 - a run that cannot finish is reported, never a crash
    st.error(inert(f"This configuration cannot run: {e}"), icon=":material/error:")
    primer.stop()
run = long_prompt_summary(trace, horizon)
unit = trace.time_unit
usual = run["steps"][0]["cost"]


@st.cache_data(max_entries=16, show_spinner="Running every budget…")
def _sweep(decoders: int, prompt: int, cost_key: str) -> dict:
    budgets = sweep_budgets(decoders, prompt, extra=LESSON_BUDGETS)
    return budget_sweep(decoders, prompt, cost_from_preset(cost_key), budgets)


sweep = _sweep(decoders, prompt, cost_key)
sweep = {**sweep, **sweet_spot(sweep["rows"], ss["keep_pf_tolerance"] / 100)}
whole = next(r for r in sweep["rows"] if r["budget"] == hi)
sweet = sweep["sweet_spot"]

cols = st.columns(4)
cols[0].metric("Decoders' usual gap", f"{usual:.2f} {unit}", help="Time between two tokens of a decoder in a step "
               "without prompt work: the decode-only step.")
cols[1].metric("Worst decoder gap", f"{run['worst_gap']:.2f} {unit}",
               delta=f"×{run['worst_gap'] / usual:.3g} the usual" if usual else None, delta_color="off",
               delta_arrow="off", help="The longest wait between two tokens of a decoding request (inter-token latency).")
cols[2].metric("Long request's first token", f"{run['first_token']:.2f} {unit}",
               help="Time to first token: from the prompt's arrival to the end of the step that finishes its last chunk.")
cols[3].metric("Prompt steps", f"{run['prompt_steps']:,}", help="Steps the prompt is spread over at this budget.")

st.subheader("The decoders' rhythm as the prompt joins")
st.caption(f"Time runs left to right. Every step, each decoder gets a token (a dot); the long prompt arrives before "
           f"step {ARRIVAL_STEP} and its chunks (blue) share steps with them. The lower chart shows how long the "
           f"decoders waited for each token: grey is a decode-only step, amber a little longer, red 1.5 times as "
           f"long or more. Press ▶ Play to "
           f"step through the run.")
st.plotly_chart(timeline_figure(trace, horizon), key="pf_timeline", theme=None, config={"displaylogo": False})

st.markdown(
    f"**One big step.** With no chunking, {decoders} decoders get a token every {usual:.2f} "
    f"{unit} until the {prompt:,}-token prompt arrives; then one step of {prompt + decoders:,} tokens takes "
    f"**{whole['worst_gap']:.2f} {unit}**, and every decoder waits that long for its next token "
    f"({whole['worst_gap'] / usual:.1f} times the usual gap). The new request gets its first token after "
    f"{whole['first_token']:.2f} {unit}, the fastest it can, and the others pay for it.")

st.subheader("Every budget: first token vs the decoders' worst gap")
st.plotly_chart(budget_figure(sweep, chosen=budget), key="pf_budgets", theme=None, config={"displaylogo": False})
st.markdown(
    f"**The trade.** A smaller budget shortens the longest step, so the decoders' worst gap falls, until each "
    f"chunk is too small to keep the GPU busy: then every step pays the full weight-reading cost for a few prompt "
    f"tokens and the long request's first token arrives later. The **sweet spot** here is a budget of "
    f"**{sweet['budget']:,}** tokens: prompt in {sweet['steps']} steps, first token at {sweet['first_token']:.2f} "
    f"{unit}, worst gap {sweet['worst_gap']:.2f} {unit} (within {ss['keep_pf_tolerance']}% of the best gap, "
    f"{sweep['best_gap']:.2f}).")

table = [r for r in sweep["rows"] if r["budget"] in LESSON_BUDGETS or r["budget"] in (sweet["budget"], budget)]
chosen_row = next((r for r in table if r["budget"] == budget), None)
if chosen_row is None:  # the chosen budget is not a swept one: its own run gives the row
    table.append({"budget": budget, "steps": run["prompt_steps"], "first_token": run["first_token"],
                  "worst_gap": run["worst_gap"]})
table.sort(key=lambda r: -r["budget"])
st.dataframe(
    [{"budget": r["budget"], "prompt steps": r["steps"], f"first token ({unit})": round(r["first_token"], 2),
      f"worst decoder gap ({unit})": round(r["worst_gap"], 2),
      "": " · ".join(w for w, ok in (("lesson", r["budget"] in LESSON_BUDGETS),
                                     ("sweet spot", r["budget"] == sweet["budget"]),
                                     ("your budget", r["budget"] == budget)) if ok)}
     for r in table],
    hide_index=True, key="pf_table",
    column_config={f"first token ({unit})": st.column_config.NumberColumn(format="%.2f"),
                   f"worst decoder gap ({unit})": st.column_config.NumberColumn(format="%.2f")})
st.caption("With the defaults (4 decoders, a 4,000-token prompt, the lesson's units) the lesson's budgets give its "
           "Example 5 table: 4,004 → 80.08 / 80.08, 2,048 → 80.16 / 40.96, 512 → 81.68 / 10.24, 256 → 160.00 / 10.00.")

st.subheader("Downloads")
export_panel(trace, f"interference_b{budget}", key="pf")
st.download_button("Budget sweep as CSV", key="pf_dl_sweep", on_click="ignore", icon=":material/table_view:",
                   data=lambda: pd.DataFrame(sweep["rows"]).to_csv(index=False).encode(), file_name=f"budget_sweep_{cost_key}_{decoders}x{prompt}.csv", mime="text/csv")
