"""KV memory and preemption: the block map step by step, who gets preempted, and what it costs.

A thin page over sim.simulate (through ui.runs), sim.preemption (victims, blocks held, swap vs
recompute), sim.lessons.lesson.preemption (the lesson's Example 8 figures) and figures.kv_memory /
figures.playback.
"""
from __future__ import annotations

import streamlit as st

from figures.kv_memory import cost_figure, fits_frames, memory_figure, timeline_figure, victims_figure
from figures.playback import kv_map_figure
from sim import scenarios
from sim.cost import COST_PRESETS, HARDWARE, LINKS, MODELS
from sim.lessons import lesson
from sim.policies import POLICIES
from sim.preemption import (blocks_held, demoted, kv_tokens, preemption_table, step_kinds, swap_vs_recompute,
                            wasted_work)
from sim.scheduler import CONFIG_BOUNDS as BOUNDS, SchedulerConfig
from sim.trace import Trace
from sim.workload import effective_config
from ui import primer
from ui.exports import export_panel
from ui.labels import POLICY_LABELS, fmt, inert
from ui.runs import run_key, run_trace
from ui.scrub import step_scrubber
from ui.state import PageSettings, Setting
from ui.workloads import WorkloadPicker

ss = st.session_state
LESSON_SCENARIO = "lesson_preemption"
KNOBS = {"keep_kv_blocks": "num_gpu_blocks", "keep_kv_block_size": "block_size", "keep_kv_max_seqs": "max_num_seqs",
         "keep_kv_budget": "max_num_batched_tokens"}
_D = SchedulerConfig()
SWAP_LINKS = ("pcie4-x16", "pcie5-x16")


def _apply_config(config: dict, cost: str | None = None) -> None:
    """Put a workload's config into the setting widgets (before they are drawn)."""
    c = {**_D.to_dict(), **effective_config(config)}
    for key, name in KNOBS.items():
        ss[key] = int(c[name])
    ss["keep_kv_policy"] = str(c["policy"])
    if cost:
        ss["keep_kv_cost"] = cost


PICKER = WorkloadPicker("kv", _apply_config)
_source, _scenario, *_trace_knobs = PICKER.settings()  # the rest: a request trace's limit and rate
SETTINGS = PageSettings("kv", [
    _source,
    Setting(_scenario.key, LESSON_SCENARIO, str, choices=_scenario.choices),
    *_trace_knobs,
    *(Setting(key, getattr(_D, name), int, bounds=BOUNDS[name]) for key, name in KNOBS.items()),
    Setting("keep_kv_policy", "fcfs", str, choices=tuple(POLICIES)),
    Setting("keep_kv_cost", "rtx4090-8B", str, choices=tuple(COST_PRESETS)),
    Setting("keep_kv_demote", "r0", str),
    Setting("keep_kv_model", "8B", str, choices=tuple(MODELS)),
    Setting("keep_kv_gpu", "rtx4090", str, choices=tuple(HARDWARE)),
    Setting("keep_kv_link", "pcie4-x16", str, choices=SWAP_LINKS),
    Setting("keep_kv_eff", 0.5, float, bounds=(0.05, 1.0)),
    Setting("keep_kv_step", None, int, bounds=(0, 10**9)),
])


@st.cache_data(show_spinner=False)
def lesson_figures() -> dict:
    return lesson.preemption()


@st.cache_data(max_entries=16, show_spinner=False)
def views(key: str, _trace: Trace, model: str, gpu: str, link: str, eff: float):
    """Per-step views of a run: blocks held, KV tokens, step kinds, preemptions (+ their costs)."""
    held = blocks_held(_trace)
    return (held, kv_tokens(_trace, held), step_kinds(_trace, held),
            preemption_table(_trace, model=model, hardware=gpu, link=link, efficiency=eff))


SETTINGS.init(fill=PICKER.fill)

with st.sidebar:
    PICKER.draw()
    st.header("KV cache and batch")
    c1, c2 = st.columns(2)
    c1.number_input("KV blocks", *BOUNDS["num_gpu_blocks"], step=1, key="keep_kv_blocks",
                    help="num_gpu_blocks, including vLLM's null block 0 (so usable = this − 1).")
    c2.number_input("Block size (tokens)", *BOUNDS["block_size"], step=1, key="keep_kv_block_size")
    c1.number_input("Max sequences", *BOUNDS["max_num_seqs"], step=1, key="keep_kv_max_seqs")
    c2.number_input("Token budget / step", *BOUNDS["max_num_batched_tokens"], step=8, key="keep_kv_budget")
    st.selectbox("Waiting-queue policy", list(POLICIES), key="keep_kv_policy",
                 format_func=lambda p: POLICY_LABELS.get(p, p),
                 help="The animated run's policy. vLLM's FCFS preempts the newest running request; its priority "
                      "policy the one with the largest priority value.")
    st.selectbox("Step cost", list(COST_PRESETS), key="keep_kv_cost", format_func=lambda k: COST_PRESETS[k].label,
                 help="How long a step takes. Only a roofline (ms) model charges swap traffic time.")
    st.header("Recompute vs swap")
    st.selectbox("Model", list(MODELS), key="keep_kv_model", format_func=lambda k: MODELS[k].name,
                 help="KV bytes per token (swap) and FLOPs per token (recompute).")
    c1, c2 = st.columns(2)
    c1.selectbox("GPU (recompute)", list(HARDWARE), key="keep_kv_gpu", format_func=lambda k: HARDWARE[k].name)
    c2.selectbox("Link (swap)", list(SWAP_LINKS), key="keep_kv_link", format_func=lambda k: LINKS[k].name)
    st.slider("Prefill efficiency (share of peak FLOP/s)", 0.05, 1.0, step=0.05, key="keep_kv_eff")
    st.header("Share")
    st.caption("The address bar holds every setting: copy it to share this run.")
    SETTINGS.file_panel()
SETTINGS.sync_url()

st.title("KV memory and preemption")
st.caption("Every running request adds a token per step, so its KV cache grows a block at a time. When a request "
           "needs a block and none is free, the scheduler takes memory back from another running request: "
           "preemption. The victim either drops its KV and recomputes it later, or swaps it to CPU memory and back.")

workload = PICKER.require()  # an error or a hint and a stop, else the blurb

config = {name: int(ss[key]) for key, name in KNOBS.items()}
config["policy"] = ss["keep_kv_policy"]
cost_key = ss["keep_kv_cost"]
model, gpu, link, eff = ss["keep_kv_model"], ss["keep_kv_gpu"], ss["keep_kv_link"], float(ss["keep_kv_eff"])
configs = {"recompute": {**config, "preemption_mode": "recompute"}, "swap": {**config, "preemption_mode": "swap"}}
try:
    runs = {mode: run_trace(workload, cfg, cost_key) for mode, cfg in configs.items()}
except Exception as e:  # noqa: BLE001 - any failure of a user's run is reported, never a crash
    st.error(inert(f"This configuration cannot run: {e}"), icon=":material/error:")
    primer.stop()
keys = {mode: run_key(workload, cfg, cost_key) for mode, cfg in configs.items()}
trace = runs["recompute"]
held, tokens, kinds, pre = views(keys["recompute"], trace, model, gpu, link, eff)
usable = trace.usable_blocks

lf = lesson_figures()
is_lesson = (ss.get(PICKER.source_key) != "Upload a workload JSON" and ss.get(PICKER.scenario_key) == LESSON_SCENARIO
             and config == {**{n: v for n, v in scenarios.workload(LESSON_SCENARIO).config.items() if n in config},
                            "policy": "fcfs"})
if is_lesson:
    fin = lf["final_tokens"]
    st.markdown(
        f"The four prompts need 4 + 4 + 5 + 3 = 16 of the 20 blocks; each request decodes a token per step and "
        f"takes another block whenever it crosses a 16-token boundary. At lesson step {lf['preempt_step']} r0 needs "
        f"its sixth block, all 20 are in use, and vLLM's FCFS rule preempts the newest running request, "
        f"**{lf['victim']}**: it frees {lf['freed_blocks']} blocks holding **{lf['recompute_tokens']} tokens to "
        f"recompute** (its 40-token prompt plus 20 generated tokens). After 40 lesson steps "
        + ", ".join(f"{k} holds {v}" for k, v in fin.items())
        + f" tokens ({' + '.join(str(-(-v // 16)) for v in fin.values())} = 20 blocks) and "
        f"{', '.join(lf['waiting'])} waits. The simulator counts the prefill as step 1, so lesson step s is "
        f"simulator step s + 1.")

m = wasted_work(trace)
c = st.columns(5)
c[0].metric("Steps", fmt(int(trace.num_steps)))
c[1].metric("Preemptions", fmt(m["preemptions"]))
c[2].metric("Tokens recomputed", fmt(m["recomputed_tokens"]),
            help="Prompt and generated tokens processed a second time because their KV was dropped.")
c[3].metric("Peak blocks in use", f"{int(held.sum(axis=1).max()) if len(held) else 0} of {usable}")
c[4].metric(f"Run time ({trace.time_unit})", fmt(m["total_time"]))

st.subheader("The block map, step by step")
if fits_frames(trace):
    st.caption("Left: the KV blocks at the end of the step, coloured by the request holding them (grey free, dark "
               "the null block 0). Right: blocks each request holds; × marks a preemption, labelled with its victim "
               "and the tokens it will recompute. Press ▶ Play, or drag the slider: both sides follow.")
    st.plotly_chart(memory_figure(trace, held, tokens, kinds, pre), key="kv_memory", theme=None,
                    config={"displaylogo": False})
else:
    st.caption(f"This KV cache has {trace.num_blocks:,} blocks, more than the browser can animate step by step "
               "(up to 32 x 32). Scrub the steps below: the block map is drawn on the server.")

    @st.fragment
    def scrubber(tr: Trace) -> None:
        steps = tr.steps["step"]
        # open on the first preemption, else on the fullest step
        first = int(pre["step"].iloc[0]) if len(pre) else int(held.sum(axis=1).idxmax()) if len(held) else 1
        step = step_scrubber("keep_kv_step", int(steps.min()), int(steps.max()), default=first, buttons="kv")
        SETTINGS.sync_url()
        left, right = st.columns(2)
        left.plotly_chart(kv_map_figure(tr, step), key="kv_map", theme=None, config={"displaylogo": False})
        right.plotly_chart(timeline_figure(held, pre, usable, cursor=step), key="kv_timeline", theme=None,
                           config={"displaylogo": False})

    scrubber(trace)

if len(pre):
    table = pre.rename(columns={"kv_tokens": "KV tokens (to recompute)", "blocks_freed": "blocks freed",
                                "swap_ms": "swap ms", "recompute_ms": "recompute ms"})
    if is_lesson:
        table.insert(1, "lesson step", table["step"] - 1)
    st.dataframe(table, hide_index=True, key="kv_preemptions",
                 column_config={"swap ms": st.column_config.NumberColumn(format="%.1f"),
                                "recompute ms": st.column_config.NumberColumn(format="%.1f")})
else:
    st.info("No preemptions in this run: the KV cache never ran out. Lower the number of KV blocks to force some.",
            icon=":material/info:")

# ---------------------------------------------------------------------------------------------
# Recompute vs swap
# ---------------------------------------------------------------------------------------------

st.subheader("Recompute or swap?")
ms = wasted_work(runs["swap"])
longest = max(4000, int(pre["kv_tokens"].max() * 1.2) if len(pre) else 0)
curve = swap_vs_recompute(range(0, longest + 1, max(1, longest // 200)), model, gpu, link, eff)
at2k = swap_vs_recompute([2000], model, gpu, link, eff).iloc[0]
lesson_costs = (model, gpu, link, eff) == ("8B", "rtx4090", "pcie4-x16", 0.5)
st.markdown(
    f"**Recompute costs compute**: a 2,000-token context is a prefill of 2,000 tokens, "
    f"**{at2k['recompute_ms']:.1f} ms** on {HARDWARE[gpu].name} at {eff:.0%} of peak. **Swap costs transfer**: "
    f"its KV cache ({MODELS[model].kv_bytes_per_token * 2000 / 2**20:,.0f} MiB) out and back over {LINKS[link].name} "
    f"takes **{at2k['swap_ms']:.1f} ms**"
    + (" — the lesson's 388.9 ms against 16.6 ms." if lesson_costs else ".")
    + " Swap needs CPU memory and a copy path that does not stall the GPU; vLLM preempts by recompute only, and "
      "freed blocks keep their prefix-cache hashes, so a victim that resumes soon may find most of its KV still "
      "cached.")
c = st.columns(4)
c[0].metric("Tokens recomputed: recompute run", fmt(m["recomputed_tokens"]))
c[1].metric("Tokens recomputed: swap run", fmt(ms["recomputed_tokens"]),
            help="A swap victim gets its KV back over the link instead.")
c[2].metric("Swap traffic: swap run", f"{ms['swap_bytes'] / 2**20:,.1f} MiB",
            help="KV bytes copied to CPU memory and back (the simulator swaps over PCIe 4.0 x16).")
c[3].metric(f"Run time, recompute → swap ({trace.time_unit})", f"{fmt(m['total_time'])} → {fmt(ms['total_time'])}",
            help="Under a roofline cost model, recomputed tokens cost FLOPs and swap traffic costs link time.")
if trace.time_unit == "units":
    st.caption("The units cost model has no seconds, so swap traffic costs no time here: pick a roofline step cost "
               "to compare the two runs' times.")
st.plotly_chart(cost_figure(curve, pre, link_label=LINKS[link].name, gpu_label=HARDWARE[gpu].name), key="kv_costs",
                theme=None, config={"displaylogo": False})

# ---------------------------------------------------------------------------------------------
# FCFS vs priority victims
# ---------------------------------------------------------------------------------------------

st.subheader("Who is the victim? vLLM's FCFS and priority rules")
ids = [r.id for r in workload.requests]
if ss["keep_kv_demote"] not in ids and ss["keep_kv_demote"] != "":
    ss["keep_kv_demote"] = ""
st.selectbox("Give this request a lower priority (priority 1, the others keep theirs) for the priority run",
             [""] + ids, key="keep_kv_demote", format_func=lambda r: r or "(none: keep the workload's priorities)")
victim_cfg = {**config, "preemption_mode": "recompute"}
fcfs_trace = run_trace(workload, {**victim_cfg, "policy": "fcfs"}, cost_key)
prio_wl = demoted(workload, [ss["keep_kv_demote"]]) if ss["keep_kv_demote"] else workload
prio_trace = run_trace(prio_wl, {**victim_cfg, "policy": "priority"}, cost_key)
vf = views(run_key(workload, {**victim_cfg, "policy": "fcfs"}, cost_key), fcfs_trace, model, gpu, link, eff)
vp = views(run_key(prio_wl, {**victim_cfg, "policy": "priority"}, cost_key), prio_trace, model, gpu, link, eff)
st.markdown("Under **FCFS**, vLLM preempts the last running request (`self.running[-1]`): the newest, which has done "
            "the least work. Under **priority**, it preempts the running request with the largest priority value "
            "(the lowest priority), the latest arrival on ties — even an old request with a lot of work behind it, "
            "or the one asking for the block.")
st.plotly_chart(victims_figure({"FCFS (vLLM default)": (vf[0], vf[3]), "Priority": (vp[0], vp[3])}, usable),
                key="kv_victims", theme=None, config={"displaylogo": False})
vt = [{"policy": lab, "victims (step)": " → ".join(f"{v} ({s})" for v, s in zip(p["victim"], p["step"])) or "none",
       "tokens recomputed": wasted_work(t)["recomputed_tokens"], "run time": wasted_work(t)["total_time"]}
      for lab, p, t in (("FCFS", vf[3], fcfs_trace), ("Priority", vp[3], prio_trace))]
st.dataframe(vt, hide_index=True, key="kv_victims_table",
             column_config={"run time": st.column_config.NumberColumn(f"run time ({trace.time_unit})", format="%.1f")})

st.subheader("Downloads")
all_runs = {"recompute run": trace, "swap run": runs["swap"], "FCFS victims run": fcfs_trace,
            "priority victims run": prio_trace}
pick = st.selectbox("Run", list(all_runs), key="kv_export_run")
stem = (workload.name or "workload").rsplit("/", 1)[-1].removesuffix(".json").removesuffix(".workload")
export_panel(all_runs[pick], f"{stem}_{pick.replace(' ', '_')}", key="kv")
SETTINGS.sync_url()
