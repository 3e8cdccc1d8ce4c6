"""Admission and Little's law: load against capacity, a queue limit, and L = λW as the run plays.

A thin page over sim.lessons.admission (the lesson's slotted server: its Little's-law curves from
slotted_run, which counts the scheduler's run tick by tick, and the scheduler's own Trace for the
downloads), sim.lessons.lesson.littles_law (the lesson's Example 7 table) and figures.admission.
"""
from __future__ import annotations

from dataclasses import replace

import streamlit as st

from figures.admission import lesson_table, littles_figure
from sim.lessons import lesson
from sim.lessons.admission import QueueSetup, curves, final_stats, rejections, slotted_run
from sim.run_memory import run_bytes
from ui import primer
from ui.exports import export_panel
from ui.labels import inert
from ui.runs import MAX_STEPS, RUN_MEMORY_BYTES, run_trace
from ui.state import PageSettings, Setting

ss = st.session_state
D = QueueSetup()
SETTINGS = PageSettings("adm", [
    Setting("keep_adm_p", D.p, float, bounds=(0.01, 1.0)),
    Setting("keep_adm_limit", 16, int, bounds=(0, 100_000)),
    Setting("keep_adm_compare", True, bool),
    Setting("keep_adm_slots", D.slots, int, bounds=(1, 256)),
    Setting("keep_adm_service", D.service_ticks, int, bounds=(1, 1000)),
    Setting("keep_adm_ticks", D.ticks, int, bounds=(100, 50_000)),
    Setting("keep_adm_seed", D.seed, int, bounds=(0, 2**31 - 1)),
])
LESSON_SETUP = {"keep_adm_slots": D.slots, "keep_adm_service": D.service_ticks, "keep_adm_ticks": D.ticks,
                "keep_adm_seed": D.seed}


@st.cache_data(show_spinner="Running the lesson's four cases…")
def lesson_rows() -> list[dict]:
    return lesson.littles_law()


@st.cache_data(max_entries=16, show_spinner=False, hash_funcs={QueueSetup: repr})
def run_curves(setup: QueueSetup):
    """The run's curves, rejections and window figures (counted by slotted_run: the scheduler's
    run tick by tick, in a few hundredths of a second), and the step the scheduler's run ends at.
    The arrivals are made here, not cached: a cached workload costs as much to unpickle as to
    draw again from Java's Random (about 25 ms for 20,000 ticks)."""
    run = slotted_run(setup)
    c = curves(run, setup.ticks)
    return c, rejections(run, setup.ticks), final_stats(c), run.last_step


SETTINGS.init()

with st.sidebar:
    st.header("Load")
    st.slider("Arrival probability per tick (p)", 0.01, 1.0, step=0.01, key="keep_adm_p",
              help="Each tick, one request arrives with probability p (Java's Random with the seed below).")
    st.number_input("Queue limit (0 = none)", 0, 100_000, step=1, key="keep_adm_limit",
                    help="Waiting requests allowed; an arrival that finds the queue full is rejected (HTTP 503). "
                         "vLLM: --max-num-queued-reqs.")
    st.toggle("Also run without a limit (same arrivals)", key="keep_adm_compare")
    st.header("Server")
    c1, c2 = st.columns(2)
    c1.number_input("Slots", 1, 256, step=1, key="keep_adm_slots", help="Requests served at once (max_num_seqs).")
    c2.number_input("Service ticks", 1, 1000, step=1, key="keep_adm_service",
                    help="Ticks a request holds its slot (it generates this many tokens, one per step).")
    c1.number_input("Ticks measured", 100, 50_000, step=1000, key="keep_adm_ticks")
    c2.number_input("Seed", 0, 2**31 - 1, step=1, key="keep_adm_seed")
    st.button("Back to the lesson's example", on_click=SETTINGS.reset, key="adm_reset", icon=":material/restart_alt:",
              width="stretch")
    st.header("Share")
    st.caption("The address bar holds every setting: copy it to share these runs.")
    SETTINGS.file_panel()
SETTINGS.sync_url()

st.title("Admission and Little's law")
st.caption("What happens when requests arrive faster than the server finishes them, and how many requests it "
           "must hold at once. Little's law: in a steady state, requests in the system L = arrival rate λ × time "
           "in the system W.")

p, limit = round(float(ss["keep_adm_p"]), 4), int(ss["keep_adm_limit"])
base = QueueSetup(p=p, queue_limit=0, slots=int(ss["keep_adm_slots"]), service_ticks=int(ss["keep_adm_service"]),
                  ticks=int(ss["keep_adm_ticks"]), seed=int(ss["keep_adm_seed"]))
setups = {}
if limit == 0 or ss["keep_adm_compare"]:
    setups["no limit"] = base
if limit:
    setups[f"limit {limit}"] = replace(base, queue_limit=limit)

try:
    results = {label: run_curves(s) for label, s in setups.items()}  # same seed: the same arrivals
except Exception as e:  # noqa: BLE001 - a run that cannot finish is reported, never a crash
    st.error(inert(f"This configuration cannot run: {e}"), icon=":material/error:")
    primer.stop()
stats = {label: r[2] for label, r in results.items()}

rho = base.load
state = ("stable: the queue empties now and then" if rho < 0.95 else
         "near capacity: queues grow long before they drain" if rho <= 1.0 else
         "overloaded: without a limit the queue grows for the whole run")
c = st.columns(4)
c[0].metric("Capacity", f"{base.capacity:.2f} / tick", help=f"{base.slots} slots / {base.service_ticks} ticks each.")
c[1].metric("Offered load ρ = p / capacity", f"{rho:.2f}", help="Above 1, arrivals exceed what the server can finish.")
c[2].metric("Arrived", f"{next(iter(stats.values()))['arrived']:,}", help=f"Arrivals in {base.ticks:,} ticks.")
c[3].metric("Regime", "stable" if rho < 0.95 else "near capacity" if rho <= 1.0 else "overloaded", help=state)

cols = st.columns(len(stats))
for col, (label, s) in zip(cols, stats.items()):
    with col.container(border=True):
        st.markdown(f"**{label}** · after {base.ticks:,} ticks")
        a, b, cc = st.columns(3)
        a.metric("L", f"{s['L']:.2f}", help="Mean requests in the system (queued or served), per tick.")
        b.metric("λW", f"{s['lambda_W']:.2f}", delta=f"{s['lambda_W'] - s['L']:+.2f} vs L", delta_color="off",
                 help="Completions per tick × mean ticks in the system of those completed.")
        cc.metric("Rejected", f"{s['rejected']:,}", help=f"of {s['arrived']:,} arrivals, answered with HTTP 503")
        a.metric("λ", f"{s['lambda']:.4f}", help="Completed requests per tick.")
        b.metric("W", f"{s['W']:.2f}", help="Mean ticks from arrival to finish, over finished requests.")

is_lesson = all(ss[k] == v for k, v in LESSON_SETUP.items())
# The lesson's example is p = 0.44 with and without a limit of 16: the two runs above are those
# runs, so the paragraph quotes them (the full four-run table is computed only when opened).
if is_lesson and p == 0.44 and limit == 16 and "no limit" in stats:
    u, q = stats["no limit"], stats[f"limit {limit}"]
    st.markdown(
        f"**The lesson's Example 7.** {base.slots} slots, {base.service_ticks} ticks each: capacity "
        f"{base.capacity:.2f} requests per tick. At p = {p:.2f} arrivals exceed it. Without a limit the server "
        f"completes λ = {u['lambda']:.4f} per tick, its maximum, and the rest pile up: the average finished request "
        f"spends W = {u['W']:,.2f} ticks in the system, and L ({u['L']:.2f}) and λW ({u['lambda_W']:.2f}) disagree, "
        f"because the run never reaches a steady state. With a queue limit of {limit} the server rejects "
        f"{q['rejected']:,} of {q['arrived']:,} requests and keeps W at {q['W']:.2f} ticks; Little's law holds again "
        f"({q['L']:.2f} against {q['lambda_W']:.2f}). Press ▶ Play and watch the red curve climb while the blue one "
        f"stays flat.")
else:
    st.markdown(f"The server is **{state}** (ρ = {rho:.2f}). Press ▶ Play: the curves are the running estimates "
                f"after each tick; L and λW meet when the run is stable and drift apart when it is not.")

st.subheader("Little's law as the run plays")
st.caption("Top: requests in the system each tick (× = a rejected arrival). Middle: L (solid) and λW (dotted) so far; "
           "they meet when the system is stable. Bottom: W so far, on a log scale. The box above the chart shows "
           "the live values at the cursor.")
fig = littles_figure({label: r[0] for label, r in results.items()}, {label: r[1] for label, r in results.items()},
                     {label: s.queue_limit for label, s in setups.items()}, slots=base.slots)
st.plotly_chart(fig, key="adm_little", theme=None, config={"displaylogo": False})

# Four more runs of 20,000 ticks: about 2 s of work a first visit should not wait for.
with st.expander("The lesson's table: all four runs", key="adm_lesson_open", on_change="rerun",
                 icon=":material/table:") as lesson_box:
    st.caption("sim.lessons.lesson.littles_law: the lesson's Java program's four runs (8 slots, 20 ticks of service, "
               "20,000 ticks, seed 11), each through the scheduler.")
    if lesson_box.open:
        rows = lesson_rows()
        table = lesson_table(rows)
        if is_lesson:
            mine = {(p, limit if label != "no limit" else None): s for label, s in stats.items()}
            table["this page"] = [
                (lambda s: f"L {s['L']:.2f} · W {s['W']:.2f} · rejected {s['rejected']:,}" if s else "")(
                    mine.get((round(r["p"], 4), r["limit"]))) for r in rows]
        st.dataframe(table, hide_index=True, key="adm_lesson_table",
                     column_config={"lambda": st.column_config.NumberColumn("λ", format="%.4f"),
                                    "lambda_W": st.column_config.NumberColumn("λW", format="%.2f"),
                                    "L": st.column_config.NumberColumn(format="%.2f"),
                                    "W": st.column_config.NumberColumn(format="%.2f")})
st.markdown("Little's law also sizes a deployment: a target of 20 requests per second at 10 seconds each needs room "
            "for 20 × 10 = 200 concurrent requests (vLLM: --max-num-seqs plus enough KV memory; llama-server: -np "
            "slots).")

st.subheader("Downloads")
st.caption("The files hold the vLLM scheduler's run of these arrivals (FCFS, one step per tick, to the last request's "
           "finish), made when a button is clicked. The curves above are its counts: "
           "sim.lessons.admission.slotted_run gives the same queue, tick for tick, without the scheduler's per-token "
           "work, so the page keeps up with the sliders.")
pick = st.selectbox("Run", list(setups), key="adm_export_run")
chosen, needed = setups[pick], results[pick][3]
served = stats[pick]["arrived"] - stats[pick]["rejected"]
# what the run's Trace would take (sim.run_memory): a token row per tick of service, a KV block
# acquired and released per block_size tokens
need = run_bytes(needed, served * chosen.service_ticks, 2 * served * (1 + chosen.service_ticks // 16),
                 stats[pick]["arrived"])
if needed > MAX_STEPS or need > RUN_MEMORY_BYTES:
    st.info(f"The scheduler's run of {pick} takes {needed:,} steps to finish every request (about "
            f"{need / 1e9:,.1f} GB of Trace), more than a run on the dashboard may take ({MAX_STEPS:,} steps, "
            f"{RUN_MEMORY_BYTES / 1e9:,.0f} GB: ui.runs); fewer ticks or a queue limit make it downloadable.",
            icon=":material/info:")
else:
    export_panel(lambda: run_trace(chosen.workload(), chosen.config(), "units"), "littles_law_" + pick.replace(" ", "_"),
                 key="adm")
SETTINGS.sync_url()
