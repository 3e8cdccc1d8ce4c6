"""Policies and starvation: who goes first on one server, and what waits forever.

A thin page over sim.lessons.starvation (jobs on a one-at-a-time server, the lesson's Example 6),
sim.lessons.lesson (the lesson's printed figures) and figures.policies.
"""
from __future__ import annotations

import streamlit as st

from figures.policies import predictor_gain_figure, service_figure, waiting_age_figure
from sim.lessons import lesson
from sim.lessons.predictor import SIGMAS, predictor_summary, predictor_sweep
from sim.lessons.starvation import (LESSON_JOBS, LONG, STREAM_BOUNDS, STREAM_DEFAULTS, format_jobs, mean_wait,
                                    parse_jobs, run_config, service_table, start_of, stream_jobs, workload)
from ui import primer
from ui.exports import export_panel
from ui.labels import fmt, inert
from ui.runs import run_trace
from ui.state import PageSettings, Setting

ss = st.session_state
LESSON_TEXT = format_jobs(LESSON_JOBS)
STREAM_KEYS = {"keep_pol_long": "long_length", "keep_pol_count": "count", "keep_pol_every": "every",
               "keep_pol_slen": "length"}
SETTINGS = PageSettings("pol", [
    Setting("keep_pol_jobs", LESSON_TEXT, str),
    Setting("keep_pol_with_aging", False, bool),
    Setting("keep_pol_aging", 1.0, float, bounds=(0.0, 100.0)),
    *(Setting(k, STREAM_DEFAULTS[n], int, bounds=STREAM_BOUNDS[n]) for k, n in STREAM_KEYS.items()),
    Setting("keep_pol_pred_sigma", 1.0, float, bounds=(0.0, 5.0)),
    Setting("keep_pol_pred_seeds", 3, int, bounds=(1, 8)),
])
# row label -> (policy, uses the aging rate)
ROWS = {"FCFS": ("fcfs", False), "Shortest-first": ("sjf", False), "Priority": ("priority", False)}
AGED_ROWS = {"Shortest-first + aging": ("sjf", True), "Priority + aging": ("priority_aging", True)}


@st.cache_data(show_spinner=False)
def lesson_figures() -> dict:
    return lesson.policies()


@st.cache_data(show_spinner="Simulating the predictor's errors…", max_entries=16)
def predictor_runs(sigma: float, seeds: int):
    return predictor_sweep(sorted({*SIGMAS, sigma}), seeds)


SETTINGS.init()

with st.sidebar:
    st.header("Jobs")
    st.text_area("Jobs: name, arrival, length, priority", key="keep_pol_jobs", height=140,
                 help="One job per line or ';'. A job of length N runs N time units on the one server; a smaller "
                      "priority number goes first under the priority policy.")
    st.button("Back to the lesson's example", on_click=SETTINGS.reset, key="pol_reset", icon=":material/restart_alt:",
              width="stretch")
    st.header("Aging")
    st.number_input("Aging rate (key credit per unit waited)", 0.0, 100.0, step=0.1, key="keep_pol_aging",
                    help="Shortest-first orders by length, priority by priority number; aging lowers a waiting "
                         "job's key by this much per unit it has waited, so a job that waits long enough wins.")
    st.toggle("Add aged policies to the comparison", key="keep_pol_with_aging")
    st.header("Starvation stream")
    c1, c2 = st.columns(2)
    c1.number_input("LONG job length", *STREAM_BOUNDS["long_length"], step=1, key="keep_pol_long")
    c2.number_input("Short jobs", *STREAM_BOUNDS["count"], step=1, key="keep_pol_count")
    c1.number_input("One every (units)", *STREAM_BOUNDS["every"], step=1, key="keep_pol_every")
    c2.number_input("Short job length", *STREAM_BOUNDS["length"], step=1, key="keep_pol_slen")
    st.header("Length predictor")
    c1, c2 = st.columns(2)
    c1.number_input("Error sigma", 0.0, 5.0, step=0.25, key="keep_pol_pred_sigma",
                    help="Shortest-first on a predicted output length: the prediction is the true length times "
                         "exp(sigma·z), z a standard normal drawn per request. 0 is a perfect predictor.")
    c2.number_input("Predictor seeds", 1, 8, step=1, key="keep_pol_pred_seeds",
                    help="Each seed is another predictor with the same error: how much the result varies.")
    st.header("Share")
    st.caption("The address bar holds every setting: copy it to share these runs.")
    SETTINGS.file_panel()
SETTINGS.sync_url()

st.title("Policies and starvation")
st.caption("When more requests wait than the server can start, the waiting-queue policy decides who goes "
           "first. Here one server runs one job at a time, so the policy alone decides the order.")

try:
    jobs = parse_jobs(ss["keep_pol_jobs"])
except ValueError as e:
    st.error(inert(f"Could not read the jobs: {e}."), icon=":material/error:")
    primer.stop()

aging = float(ss["keep_pol_aging"])
rows = {**ROWS, **(AGED_ROWS if ss["keep_pol_with_aging"] else {})}
is_lesson = jobs == list(LESSON_JOBS)
wl = workload(jobs, "example6_jobs" if is_lesson else "jobs")
traces = {lab: run_trace(wl, run_config(policy, aging if aged else 0.0), "units") for lab, (policy, aged) in rows.items()}
tables = {lab: service_table(tr) for lab, tr in traces.items()}
waits = {lab: mean_wait(tr) for lab, tr in traces.items()}
lf = lesson_figures()

if is_lesson:
    st.markdown(
        f"**The lesson's Example 6.** Job A (length 40) arrives alone at 0 and starts under every policy; B to F "
        f"arrive while it runs, so at time 40 the policy chooses. **FCFS** runs them by arrival "
        f"({' '.join(lf['fcfs']['order'])}, mean wait {lf['fcfs']['mean_wait']:.2f}). **Shortest-first** runs the "
        f"short ones first ({' '.join(lf['shortest_first']['order'])}): the mean wait drops to "
        f"{lf['shortest_first']['mean_wait']:.2f}, the smallest of any order. **Priority** runs B and E "
        f"(priority 0) first ({' '.join(lf['priority']['order'])}): the mean wait rises to "
        f"{lf['priority']['mean_wait']:.2f}, because E, a long job, delays three others. Priority serves a goal "
        f"outside the queue, not mean latency.")
else:
    st.markdown(f"**Your {len(jobs)} jobs** on one server. Each row below is the same jobs under another policy.")

cols = st.columns(len(rows))
base = waits["FCFS"]
for c, lab in zip(cols, rows):
    c.metric(f"Mean wait, {lab}", f"{waits[lab]:.2f}",
             delta=None if lab == "FCFS" else f"{waits[lab] - base:+.2f} vs FCFS", delta_color="inverse",
             help="Mean of (start − arrival) over all jobs, in time units.")

st.subheader("Order of service")
st.caption("One row per policy: the server runs one job at a time, a bar per job. A triangle ▲ marks when each "
           "job arrived, so the gap to its bar is its wait; the row label gives the mean wait. Press ▶ Play to "
           "watch the server's clock run, or drag the slider.")
st.plotly_chart(service_figure(tables, waits, [j[0] for j in jobs]), key="pol_service", theme=None,
                config={"displaylogo": False})
order_rows = [{"policy": lab, "order": " ".join(tables[lab]["job"]), "mean wait": waits[lab]} for lab in rows]
if is_lesson:
    printed = {"FCFS": lf["fcfs"], "Shortest-first": lf["shortest_first"], "Priority": lf["priority"]}
    for r in order_rows:
        p = printed.get(r["policy"])
        r["lesson prints"] = f"{' '.join(p['order'])}  {p['mean_wait']:.2f}" if p else "–"
st.dataframe(order_rows, hide_index=True, key="pol_order_table",
             column_config={"mean wait": st.column_config.NumberColumn(format="%.2f")})

# ---------------------------------------------------------------------------------------------
# Starvation
# ---------------------------------------------------------------------------------------------

st.subheader("Starvation, and aging ending it")
stream = {n: int(ss[k]) for k, n in STREAM_KEYS.items()}
sjobs = stream_jobs(**stream)
swl = workload(sjobs, "starvation_stream")
label_off = "Shortest-first, no aging"
label_on = f"Shortest-first, aging {aging:g} per unit waited"
starve = {label_off: run_trace(swl, run_config("sjf"), "units"),
          label_on: run_trace(swl, run_config("sjf", aging), "units")}
t_off, t_on = (start_of(starve[k], LONG) for k in (label_off, label_on))
default_stream = stream == STREAM_DEFAULTS
lesson_note = f", as the lesson prints (\"LONG starts at {lf['starvation_long_start']}\")" if default_stream else ""
aged_note = (f"it starts at **{t_on}**" if t_on is not None else "it still never starts within the run")
st.markdown(
    f"A {stream['long_length']}-unit job, LONG, arrives at 0 together with a stream of {stream['count']} "
    f"{stream['length']}-unit jobs, one every {stream['every']} units. Under shortest-first a shorter job is "
    f"waiting every time the server frees, so LONG waits **{t_off}** units{lesson_note}, until the stream ends; "
    f"with an endless stream it would never run. That is **starvation**. **Aging** lowers a waiting job's sort "
    f"key by {aging:g} per unit waited, so LONG eventually sorts first: {aged_note}.")
c1, c2, c3 = st.columns(3)
c1.metric("LONG starts, no aging", fmt(t_off))
c2.metric(f"LONG starts, aging {aging:g}", fmt(t_on), delta=None if t_on is None or t_off is None else
          f"{t_on - t_off:+d} units", delta_color="inverse")
c3.metric("Mean wait, no aging → aging", f"{mean_wait(starve[label_off]):.2f} → {mean_wait(starve[label_on]):.2f}",
          help="Aging trades a little mean wait for a bounded worst wait.")
st.caption("Each row is a job, each column a time unit. The colour grows while a job waits unserved (yellow → dark "
           "red); black is the job running. Starvation is a row whose colour keeps deepening; with aging, LONG's "
           "row stops growing and turns black.")
st.plotly_chart(waiting_age_figure(starve, mark=LONG), key="pol_ages", theme=None, config={"displaylogo": False})

st.subheader("Shortest-first with a real predictor")
sigma, n_seeds = float(ss["keep_pol_pred_sigma"]), int(ss["keep_pol_pred_seeds"])
ptable = predictor_runs(sigma, n_seeds)
psum = predictor_summary(ptable)
here = psum[psum["sigma"] == sigma].iloc[0]
base_e2e = dict(zip(ptable["policy"], ptable["e2e_mean"]))
st.markdown(
    f"Shortest-first needs each request's output length, which no server knows before generating it. Here "
    f"120 requests with spread-out lengths queue for four slots (vLLM scheduler, lesson units). Ordered by the "
    f"true length (the oracle), the mean end-to-end latency is **{base_e2e['sjf']:,.0f}** against FCFS's "
    f"**{base_e2e['fcfs']:,.0f}**. Ordered by a prediction off by a lognormal factor of sigma **{sigma:g}**, it is "
    f"**{here['e2e_mean']:,.0f}**: **{100 * here['gain_kept']:.0f}%** of the gain survives "
    f"({100 * here['gain_low']:.0f}–{100 * here['gain_high']:.0f}% over {n_seeds} predictor seed"
    f"{'s' if n_seeds > 1 else ''}). A predictor that is noise keeps little: the order is then random, "
    f"and random is FCFS on average.")
st.plotly_chart(predictor_gain_figure(ptable, psum, sigma), key="pol_predictor", theme=None,
                config={"displaylogo": False})

st.subheader("Downloads")
all_runs = {**{f"Jobs: {lab}": tr for lab, tr in traces.items()}, **{f"Stream: {lab}": tr for lab, tr in starve.items()}}
pick = st.selectbox("Run", list(all_runs), key="pol_export_run")
export_panel(all_runs[pick], "policies_" + "".join(ch if ch.isalnum() else "_" for ch in pick.lower()).strip("_"),
             key="pol")
SETTINGS.sync_url()
