"""Tenants and fairness: FCFS, round-robin by tenant, a per-tenant cap and VTC on the same arrivals.

A thin page: workloads from sim.scenarios (flood_workload included), runs from ui.runs, the
fairness numbers (timelines, backlog, service gap, VTC's bound, Jain's index) from
sim.lessons.fairness, charts from figures.tenants.
"""
from __future__ import annotations

import pandas as pd
import streamlit as st

from figures.tenants import counters_figure, gap_figure, timelines_figure
from sim import scenarios
from sim.lessons.fairness import (POLICY_ORDER, POLICY_TITLES, compare_summary, first_divergence, flood_workload,
                                  policy_configs, service_gap, state_at, tenant_finishes, vtc_bound)
from sim.workload import Workload
from ui import primer
from ui.exports import export_panel
from ui.labels import fmt, inert
from ui.runs import run_trace
from ui.scrub import step_scrubber
from ui.state import PageSettings, Setting

ss = st.session_state
SCENARIOS = ("two_tenants", "tenant_flood")
# scenario -> (slots, cap) it opens with
SCENARIO_KNOBS = {"two_tenants": (4, 3), "tenant_flood": (8, 6)}

SETTINGS = PageSettings("ten", [
    Setting("keep_ten_scenario", "two_tenants", str, choices=SCENARIOS),
    Setting("keep_ten_slots", 4, int, bounds=(1, 64)),
    Setting("keep_ten_cap", 3, int, bounds=(1, 64)),
    Setting("keep_ten_w_in", 1.0, float, bounds=(0.0, 100.0)),
    Setting("keep_ten_w_out", 2.0, float, bounds=(0.0, 100.0)),
    Setting("keep_ten_flood_n", 60, int, bounds=(1, 400)),
    Setting("keep_ten_flood_out", 48, int, bounds=(1, 512)),
    Setting("keep_ten_light_every", 6, int, bounds=(1, 100)),
    Setting("keep_ten_light_n", 12, int, bounds=(1, 100)),
    Setting("keep_ten_run", "vtc", str, choices=POLICY_ORDER),
    Setting("keep_ten_step", None, int, bounds=(0, 10**9)),
])


def _scenario_changed() -> None:
    ss["keep_ten_slots"], ss["keep_ten_cap"] = SCENARIO_KNOBS[ss["keep_ten_scenario"]]


SETTINGS.init(fill=_scenario_changed)

# ---------------------------------------------------------------------------------------------
# Sidebar
# ---------------------------------------------------------------------------------------------

with st.sidebar:
    st.header("Arrivals")
    key = st.selectbox("Scenario", SCENARIOS, key="keep_ten_scenario", on_change=_scenario_changed,
                       format_func=lambda k: scenarios.SCENARIOS[k].title)
    if key == "tenant_flood":
        c1, c2 = st.columns(2)
        c1.number_input("Flood requests", 1, 400, step=10, key="keep_ten_flood_n",
                        help="Long requests tenant 'flood' sends at step 0.")
        c2.number_input("Flood output tokens", 1, 512, step=8, key="keep_ten_flood_out",
                        help="Typical output length of a flood request (±25%).")
        c1.number_input("Light: one every … steps", 1, 100, step=1, key="keep_ten_light_every")
        c2.number_input("Light requests", 1, 100, step=1, key="keep_ten_light_n")
    st.header("Server")
    c1, c2 = st.columns(2)
    c1.number_input("Slots (max sequences)", 1, 64, step=1, key="keep_ten_slots",
                    help="How many requests run at once (max_num_seqs).")
    c2.number_input("Per-tenant cap", 1, 64, step=1, key="keep_ten_cap",
                    help="For the 'cap' run: round-robin, and no tenant may hold more running requests than this.")
    st.header("VTC weights")
    c1, c2 = st.columns(2)
    c1.number_input("w_in (per prompt token)", 0.0, 100.0, step=0.5, key="keep_ten_w_in")
    c2.number_input("w_out (per output token)", 0.0, 100.0, step=0.5, key="keep_ten_w_out",
                    help="The VTC paper follows OpenAI's prices: an output token costs twice a prompt token.")
    st.header("Share")
    st.caption("The address bar holds every setting: copy it to share these runs.")
    SETTINGS.file_panel()
SETTINGS.sync_url()

# ---------------------------------------------------------------------------------------------
# Runs
# ---------------------------------------------------------------------------------------------

slots, cap = int(ss["keep_ten_slots"]), int(ss["keep_ten_cap"])
w_in, w_out = float(ss["keep_ten_w_in"]), float(ss["keep_ten_w_out"])
if key == "tenant_flood":
    workload = flood_workload(flood_requests=int(ss["keep_ten_flood_n"]), flood_output=int(ss["keep_ten_flood_out"]),
                              light_every=int(ss["keep_ten_light_every"]), light_requests=int(ss["keep_ten_light_n"]),
                              slots=slots)
    workload.name = "tenant_flood"
else:
    workload = scenarios.workload(key)
workload = Workload(workload.requests, {**workload.config, "max_num_seqs": slots}, name=workload.name)
counts: dict[str, int] = {}
for r in workload.requests:
    counts[r.tenant] = counts.get(r.tenant, 0) + 1
focus = min(sorted(counts), key=lambda t: counts[t])  # the small tenant the lesson watches

st.title("Tenants and fairness")
st.caption(
    "FCFS is fair to requests, not to the people who send them: a tenant (a customer, a team) who sends "
    "many requests at once fills the queue, and everyone behind waits. Below, the same arrivals run under "
    "four schedulers, side by side.")
st.markdown(scenarios.SCENARIOS[key].blurb)

configs = policy_configs(cap, w_in, w_out)
try:
    runs = {k: run_trace(workload, configs[k], "units") for k in POLICY_ORDER}
except Exception as e:  # noqa: BLE001 - a run that cannot finish is reported, never a crash
    st.error(inert(f"These settings cannot run: {e}"), icon=":material/error:")
    primer.stop()

bound = vtc_bound(workload, {}, w_in, w_out)
gaps = {k: service_gap(tr, w_in, w_out) for k, tr in runs.items()}
table = compare_summary(runs, bound["bound"], w_in, w_out, focus=focus, gaps=gaps)
few = counts[focus] <= 3

cols = st.columns(4)
for c, (_, row) in zip(cols, table.iterrows()):
    k = row["policy"]
    fin = tenant_finishes(runs[k], focus)
    value = " ".join(f"{r}@{f}" for r, f in fin) if few else f"{fmt(row['focus_mean_latency'])} steps"
    c.metric(POLICY_TITLES[k], value,
             help=(f"When tenant {focus}'s requests finish (step numbers, as the lesson prints them)." if few
                   else f"Tenant {focus}'s mean latency, arrival to finish, in steps."))
st.caption(f"{'When tenant ' + focus + ' finishes' if few else 'Tenant ' + focus + '’s mean latency'} under each "
           f"scheduler: {slots} slots, per-tenant cap {cap} in the third run, VTC weights w_in = {w_in:g}, "
           f"w_out = {w_out:g}.")

st.subheader("Timelines")
st.caption(
    "One row per request, grouped by tenant: faint while it waits, solid while it runs (step s is the stretch "
    f"from s−1 to s). Labels give when each of tenant {focus}'s requests finished. Press ▶ Play to replay all "
    "four runs together, or drag the slider under the chart.")
st.plotly_chart(timelines_figure(runs, focus=focus), key="ten_timelines", theme=None, config={"displaylogo": False})

st.subheader("Side by side")
shown = table.assign(policy=table["policy"].map(POLICY_TITLES))
shown = shown.rename(columns={
    "policy": "scheduler", "focus_finishes": f"{focus} finished", "focus_mean_latency": f"{focus} mean latency",
    "others_mean_latency": "others' mean latency", "max_gap": "largest gap", "within_bound": "within bound",
    "jain": "Jain's index", "last_finish": "last done"})
st.dataframe(shown, hide_index=True, key="ten_table", column_config={
    f"{focus} mean latency": st.column_config.NumberColumn(format="%.1f", help="Steps from arrival to finish."),
    "others' mean latency": st.column_config.NumberColumn(format="%.1f", help="Steps from arrival to finish."),
    "largest gap": st.column_config.NumberColumn(
        format="%.0f", help="The largest difference in weighted service two tenants got over a stretch in which "
                            "both had requests waiting."),
    "within bound": st.column_config.CheckboxColumn(help="Largest gap ≤ VTC's bound (below)."),
    "Jain's index": st.column_config.NumberColumn(
        format="%.2f", help="Jain's index of the tenants' service per step while at least two of them had "
                            "requests waiting: 1 = equal shares, 1/n = one tenant got everything."),
    "last done": st.column_config.NumberColumn(help="The step in which the last request finished.")})

# ---------------------------------------------------------------------------------------------
# Gap, counters, step inspector
# ---------------------------------------------------------------------------------------------

last_step = max(int(tr.steps["step"].max()) for tr in runs.values())
run_id = f"{key}|{slots}|{cap}|{w_in}|{w_out}|{len(workload.requests)}|{workload.requests[-1].arrival_step}"
if ss.get("ten_run_id") != run_id:  # a new run: where its schedulers first differ, computed once
    ss["ten_run_id"] = run_id
    ss["ten_divergence"] = first_divergence(runs)
    if not SETTINGS.given("keep_ten_step"):
        ss["keep_ten_step"] = ss["ten_divergence"]


@st.fragment
def inspector() -> None:
    step = step_scrubber("keep_ten_step", 1, last_step, default=ss["ten_divergence"],
                         help="The dotted line on both charts and the table below follow this step.",
                         buttons="ten")
    SETTINGS.sync_url()
    left, right = st.columns(2, gap="large")
    with left:
        st.markdown("**Service gap between backlogged tenants**")
        st.plotly_chart(gap_figure({k: g["series"] for k, g in gaps.items()}, bound["bound"], step),
                        key="ten_gap", theme=None, config={"displaylogo": False})
    with right:
        st.markdown("**VTC counters**")
        st.plotly_chart(counters_figure(runs["vtc"], step), key="ten_counters", theme=None,
                        config={"displaylogo": False})
    st.markdown(f"**During step {step}** (from {step - 1} to {step} on the timelines)")
    rows = []
    for k, tr in runs.items():
        row = {"scheduler": POLICY_TITLES[k]}
        for _, r in state_at(tr, step, w_in, w_out).iterrows():
            t = r["tenant"]
            row[f"{t}: running"] = r["running"]
            row[f"{t}: waiting"] = r["waiting"]
            row[f"{t}: done"] = r["finished"]
            row[f"{t}: service"] = round(r["service"])
            if k == "vtc":
                row[f"{t}: VTC counter"] = r["counter"]
        rows.append(row)
    st.dataframe(pd.DataFrame(rows), hide_index=True, key="ten_state")

st.subheader("Service, counters and the bound")
st.caption(
    "Service is what VTC counts: w_in per prompt token computed plus w_out per token generated. Left: for each "
    "scheduler, the largest difference in service two tenants have received since they both started waiting "
    "(it resets when one of them has nothing waiting). Right: VTC's counters; VTC always admits the waiting "
    "tenant with the lowest counter, and lifts a tenant who comes back from idle to the lowest waiting "
    "counter, so idleness banks no credit.")
inspector()

worst = gaps["vtc"]
st.markdown(
    f"**The bound.** Sheng et al. (*Fairness in Serving Large Language Models*, OSDI 2024) prove that under VTC "
    f"two tenants that are both backlogged over an interval receive service within "
    f"2·max(w_in·L_input, w_out·M) of each other, however long the interval. L_input is the longest prompt "
    f"(here {bound['L_input']:,} tokens) and M the most tokens the running batch can hold (here "
    f"{bound['M']:,}: the KV cache, or the slots times the longest request if that is less). So the bound is "
    f"2·max({w_in:g}·{bound['L_input']:,}, {w_out:g}·{bound['M']:,}) = **{bound['bound']:,.0f}**; VTC's "
    f"largest gap in this run is **{worst['gap']:,.0f}**"
    + (f" (tenants {worst['pair'][0]} and {worst['pair'][1]}, steps {worst['interval'][0]}–{worst['interval'][1]})"
       if worst["pair"] else "")
    + ". FCFS has no such bound: its gap grows as long as one tenant's flood lasts. Within the bound is not the "
      "same as fair in the moment: no scheduler here preempts, so a batch full of one tenant's requests runs to "
      "the end before anyone else gets in (the w_out·M term).")
st.caption(
    "Jain's index in the table is computed over the steps in which at least two tenants had requests waiting, "
    "from each tenant's service per step; over a whole run it would only say who asked for more. Round-robin "
    "takes turns by request, VTC by tokens, so they differ when one tenant's requests are longer. The cap "
    "protects the small tenant from waiting at all, at the price of idle slots when only one tenant has work.")

st.subheader("Downloads")
c1, _ = st.columns([1, 2])
which = c1.selectbox("Run", POLICY_ORDER, key="keep_ten_run", format_func=lambda k: POLICY_TITLES[k])
export_panel(runs[which], f"{key}.{which}", key="ten")
SETTINGS.sync_url()
