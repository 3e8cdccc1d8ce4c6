"""Live engine: a real PyTorch transformer over a paged KV cache, driven by the simulator's
scheduler, drawn step by step while it runs; afterwards its Trace in the Playback views, the
simulator's prediction of the same run (cost model calibrated from it), and downloads.

A thin page: the engine runs in engine.service (one per server process, stepping in a worker
thread); this page only sends it commands and reads its snapshots. Live data becomes a Trace
in sim.live, the calibration and comparison live in sim.calibrate, the charts in
figures.engine and figures.playback. One browser session drives at a time; the others watch.
"""
from __future__ import annotations

import threading
import uuid

import streamlit as st

from figures.engine import calibration_figure, live_figure, phase_figure
from figures.playback import inspector_tables, kv_map_figure, occupancy_figure, step_tokens_figure
from sim.calibrate import compare_with_simulator, replay_workload
from sim.live import LIVE_PRESETS, LiveRun, preset_requests
from sim.metrics import per_request, summary
from sim.policies import POLICIES
from sim.scheduler import PREEMPTION_MODES
from sim.toytok import decode, encode
from sim.workload import Request
from ui.exports import export_panel
from ui.labels import POLICY_LABELS, fmt
from ui.scrub import step_scrubber
from ui.state import PageSettings, Setting

ss = st.session_state
LIVE_WINDOW = 150  # steps the live chart shows
REFRESH_S = 0.5
NO_PRESET = "none"
MAX_POOL_BYTES = 2 << 30  # the KV pool a user may ask for
MODEL_LABELS = {"tiny": "tiny: 4 layers, 19M parameters", "m100": "m100: 12 layers, 125M parameters"}
# what the page lets a user ask of a real engine (a pool of real tensors; steps on one CPU core)
BOUNDS = {"keep_le_blocks": (8, 4096), "keep_le_block_size": (1, 256), "keep_le_budget": (8, 8192),
          "keep_le_max_seqs": (1, 256)}


@st.cache_resource(show_spinner=False)
def _engine():
    """The process's engine service and model presets (both torch-free: the engine and torch load
    at the first Start)."""
    from engine.config import PRESETS, EngineConfig
    from engine.service import get_service

    return get_service(), EngineConfig, PRESETS


@st.cache_resource(show_spinner=False)
def _torch_found() -> dict:
    """{"device": "cpu" | "cuda"} once torch has loaded (start_torch_preload), else empty."""
    return {}


@st.cache_resource(show_spinner=False)
def start_torch_preload() -> threading.Thread:
    """Import torch (about 2 s) in the background, once per server, so Start rarely waits for
    it. Called at the end of the page: the import holds the GIL much of the time, and started
    before the page had drawn it held back the page's first text by about 1.5 s."""
    found = _torch_found()

    def load():
        from engine.device import resolve_device

        found["device"] = str(resolve_device("auto"))

    thread = threading.Thread(target=load, name="torch-preload", daemon=True)
    thread.start()
    return thread


svc, EngineConfig, MODEL_PRESETS = _engine()
AUTO_DEVICE = _torch_found().get("device")  # None until torch has loaded
SID = ss.setdefault("le_session", uuid.uuid4().hex[:10])  # this browser tab

S = PageSettings("le", [
    Setting("keep_le_model", "tiny", str, choices=tuple(MODEL_LABELS)),
    Setting("keep_le_attention", "gather", str, choices=("gather", "flex")),
    *(Setting(key, default, int, bounds=BOUNDS[key]) for key, default in
      (("keep_le_blocks", 64), ("keep_le_block_size", 16), ("keep_le_budget", 128), ("keep_le_max_seqs", 8))),
    Setting("keep_le_policy", "fcfs", str, choices=tuple(POLICIES)),
    Setting("keep_le_preemption", "recompute", str, choices=PREEMPTION_MODES),
    Setting("keep_le_prefix", False, bool),
    Setting("keep_le_preset", "burst", str, choices=(NO_PRESET, *LIVE_PRESETS)),
    Setting("keep_le_seed", 0, int, bounds=(0, 2**31 - 1)),
    Setting("keep_le_autostop", True, bool),
])
S.init()


def sched_config() -> dict:
    return {"num_gpu_blocks": ss["keep_le_blocks"], "block_size": ss["keep_le_block_size"],
            "max_num_batched_tokens": ss["keep_le_budget"], "max_num_seqs": ss["keep_le_max_seqs"],
            "policy": ss["keep_le_policy"], "preemption_mode": ss["keep_le_preemption"],
            "enable_prefix_caching": bool(ss["keep_le_prefix"])}


def pool_bytes() -> int:
    per_elem = 2 if AUTO_DEVICE == "cuda" else 4  # fp32 on the CPU, bf16/fp16 on CUDA
    per_token = MODEL_PRESETS[ss["keep_le_model"]].kv_bytes_per_token(per_elem)
    return ss["keep_le_blocks"] * ss["keep_le_block_size"] * per_token


# ---------------------------------------------------------------------------------------------
# Sidebar: the engine and the scheduler (applied at the next Start)
# ---------------------------------------------------------------------------------------------

with st.sidebar:
    st.header("Engine")
    st.selectbox("Model (random weights)", list(MODEL_LABELS), key="keep_le_model",
                 format_func=lambda k: MODEL_LABELS[k],
                 help="A Llama-shaped decoder in plain PyTorch with seeded random weights; nothing is "
                      "downloaded. The tokens it writes are meaningless, but its tensors, KV cache and "
                      "step times are real.")
    if AUTO_DEVICE == "cuda":  # on a CPU FlexAttention is only its slow eager reference
        st.selectbox("Attention", ["gather", "flex"], key="keep_le_attention",
                     format_func={"gather": "gather blocks + SDPA", "flex": "FlexAttention on the block table"}.get,
                     help="flex reads each request's blocks where they lie (compiled, so the first start "
                          "takes a while) and is used only if its self-test agrees with the gather path.")
    st.header("Scheduler")
    c1, c2 = st.columns(2)
    c1.number_input("Token budget / step", *BOUNDS["keep_le_budget"], step=8, key="keep_le_budget",
                    help="max_num_batched_tokens: tokens one forward pass may hold (prompt chunks + decodes).")
    c2.number_input("Max sequences", *BOUNDS["keep_le_max_seqs"], step=1, key="keep_le_max_seqs",
                    help="max_num_seqs: how many requests may run at once (the slot lanes).")
    c1.number_input("KV blocks", *BOUNDS["keep_le_blocks"], step=8, key="keep_le_blocks",
                    help="num_gpu_blocks: the size of the paged KV pool, including the null block 0.")
    c2.number_input("Block size (tokens)", *BOUNDS["keep_le_block_size"], step=1, key="keep_le_block_size")
    st.selectbox("Waiting-queue policy", list(POLICIES), key="keep_le_policy",
                 format_func=lambda p: POLICY_LABELS.get(p, p))
    st.radio("On preemption", PREEMPTION_MODES, key="keep_le_preemption", horizontal=True,
             help="recompute: drop the victim's KV and compute it again later. swap: copy its blocks to CPU "
                  "memory and back.")
    st.toggle("Prefix caching", key="keep_le_prefix",
              help="Reuse the KV blocks of an identical prompt prefix computed earlier.")
    st.toggle("Stop when every request is done", key="keep_le_autostop",
              help="Stop the engine (and show the run's views) once every request sent has finished. Off: "
                   "the engine idles, waiting for more requests.")
    kv_mb = pool_bytes() / 2**20
    st.caption(f"KV pool: {ss['keep_le_blocks'] - 1:,} usable blocks × {ss['keep_le_block_size']} tokens = "
               f"{(ss['keep_le_blocks'] - 1) * ss['keep_le_block_size']:,} tokens, {fmt(kv_mb)} MB. "
               "These settings apply at the next Start.")
    st.header("Share")
    S.file_panel()
S.sync_url()


# ---------------------------------------------------------------------------------------------
# Commands (the driving session only)
# ---------------------------------------------------------------------------------------------

def send_preset() -> None:
    key = ss["keep_le_preset"]
    if key == NO_PRESET:
        return
    n = ss["le_sends"] = ss.get("le_sends", 0) + 1
    reqs = preset_requests(key, seed=ss["keep_le_seed"], batch=n, start_ms=svc.now_ms())
    try:
        svc.submit(SID, reqs)
    except (ValueError, RuntimeError, PermissionError) as e:
        ss["le_msg"] = ("error", f"Could not send the workload: {e}")


def start() -> None:
    ss.pop("le_msg", None)
    if pool_bytes() > MAX_POOL_BYTES:
        ss["le_msg"] = ("error", f"A KV pool of {pool_bytes() / 2**30:.1f} GiB is more than this page allows "
                                 f"({MAX_POOL_BYTES / 2**30:.0f} GiB): use fewer or smaller blocks.")
        return
    if not svc.claim(SID):
        ss["le_msg"] = ("error", "Another session took the wheel first; you are watching.")
        return
    try:
        attention = ss["keep_le_attention"] if AUTO_DEVICE == "cuda" else "gather"
        svc.start(SID, EngineConfig(model=ss["keep_le_model"], attention=attention), sched_config())
    except (ValueError, RuntimeError, MemoryError) as e:
        svc.release(SID)
        ss["le_msg"] = ("error", f"The engine could not start: {e}")
        return
    ss["le_sends"] = 0
    send_preset()


def stop() -> None:
    if svc.driver == SID:
        svc.stop(SID)
        svc.release(SID)


def take_over() -> None:
    d = svc.driver
    if d is not None and d != SID:
        svc.release(d)  # allowed only when the engine is stopped or has nothing left to do (see below)
    svc.claim(SID)


def add_by_hand() -> None:
    text = (ss.get("le_add_text") or "").strip()
    ids = encode(text)[:2048] if text else None
    n = ss["le_hand"] = ss.get("le_hand", 0) + 1
    req = Request(id=f"u{n}", prompt_len=len(ids) if ids else int(ss["le_add_len"]),
                  max_tokens=int(ss["le_add_max"]), tenant=(ss.get("le_add_tenant") or "").strip() or "default",
                  priority=int(ss["le_add_prio"]), prompt_token_ids=tuple(ids) if ids else None)
    try:
        svc.submit(SID, [req])
        ss["le_msg"] = ("ok", f"Sent {req.id}: {req.prompt_len} prompt tokens, up to {req.max_tokens} new ones.")
    except (ValueError, RuntimeError, PermissionError) as e:
        ss["le_msg"] = ("error", f"Could not send the request: {e}")


# ---------------------------------------------------------------------------------------------
# Main area: controls
# ---------------------------------------------------------------------------------------------

st.title("Live engine")
st.caption(
    "A real transformer (plain PyTorch, random weights) runs here, with a real paged KV cache and the "
    "simulator's own scheduler deciding every step. Start it, throw requests at it, and watch each forward "
    "pass appear: who rode in it, the KV blocks it used, and how long each phase took. Afterwards, lay the "
    "simulator's prediction of the same run beside it.")

live: LiveRun = ss.setdefault("le_live", LiveRun())
live.update(svc.snapshot)
running = live.running
ss["le_full_running"] = running
driver = live.driver
me = driver == SID
other = driver is not None and not me
idle_other = other and (not running or live.all_done())

info = live.info
device = info.get("device") or AUTO_DEVICE or "not known yet (PyTorch is loading)"
where = (f"**{device}**, {info['dtype']}, {info['threads']} thread(s), {info['model_params'] / 1e6:.0f}M parameters"
         if info else f"**{device}** (float32 on the CPU, bf16 on CUDA)")
if info.get("attention") == "flex" or info.get("attention_check"):
    where += f", attention {info['attention']} ({info['attention_check']})"
state = ":green-badge[running]" if running else (":gray-badge[stopped]" if live.run else ":gray-badge[not started]")
role = ("you drive" if me else "another session drives; you watch" if other else "nobody drives")
st.markdown(f"{state} · device {where} · {role}")
if other:
    st.info("Another browser session is driving the engine. You see its run live, read-only"
            + (". It has nothing left to do: you may take over." if idle_other else "."),
            icon=":material/visibility:")

c_start, c_stop, c_preset, c_seed, c_send = st.columns([1.1, 1, 3.2, 1, 1.5], vertical_alignment="bottom")
c_start.button("Restart" if running and me else "Start", key="le_start", type="primary",
               icon=":material/play_arrow:", width="stretch", on_click=start, disabled=other,
               help="Build the engine with the settings on the left (a new run), then send the workload.")
c_stop.button("Stop", key="le_stop", icon=":material/stop:", width="stretch", on_click=stop,
              disabled=not (me and running))
c_preset.selectbox("Workload", (NO_PRESET, *LIVE_PRESETS), key="keep_le_preset",
                   format_func=lambda k: "None (add requests by hand)" if k == NO_PRESET else LIVE_PRESETS[k].title)
c_seed.number_input("Seed", 0, 2**31 - 1, step=1, key="keep_le_seed")
c_send.button("Send again", key="le_send", icon=":material/send:", width="stretch", on_click=send_preset,
              disabled=not (me and running) or ss["keep_le_preset"] == NO_PRESET,
              help="Send the workload once more to the running engine (new request ids).")
if idle_other:
    st.button("Take over", key="le_takeover", icon=":material/sports_motorsports:", on_click=take_over)
if ss["keep_le_preset"] != NO_PRESET:
    st.caption(LIVE_PRESETS[ss["keep_le_preset"]].blurb)

with st.expander("Add a request by hand", icon=":material/edit_note:"):
    with st.form("le_add_form", border=False):
        st.text_area("Prompt text (optional; each word or mark becomes one token)", key="le_add_text",
                     max_chars=8000, height=80, placeholder="Type a prompt, or leave empty and give a length.")
        f1, f2, f3, f4 = st.columns(4)
        f1.number_input("Prompt length (tokens, if no text)", 1, 2048, 32, key="le_add_len")
        f2.number_input("Max new tokens", 1, 1024, 32, key="le_add_max")
        f3.text_input("Tenant", "default", max_chars=32, key="le_add_tenant")
        f4.number_input("Priority (lower runs first)", -100, 100, 0, key="le_add_prio",
                        help="Used by the priority policies; the others ignore it.")
        st.form_submit_button("Send request", key="le_add_send", icon=":material/send:", on_click=add_by_hand,
                              disabled=not (me and running),
                              help="The engine must be running and driven by you (Start it first).")

msg = ss.pop("le_msg", None)
if msg:
    (st.error if msg[0] == "error" else st.success)(msg[1])
if me and running and info.get("scheduler"):
    want = sched_config()
    if any(info["scheduler"].get(k) != v for k, v in want.items()) or info["model"]["num_layers"] != \
            MODEL_PRESETS[ss["keep_le_model"]].num_layers:
        st.caption(":orange[The settings on the left differ from the running engine's; Start again to apply them.]")


# ---------------------------------------------------------------------------------------------
# Live panel: a fragment that refreshes itself while the engine runs
# ---------------------------------------------------------------------------------------------

@st.fragment(run_every=REFRESH_S if running else None)
def live_panel() -> None:
    lv: LiveRun = ss["le_live"]
    lv.update(svc.snapshot)
    if lv.running != ss.get("le_full_running"):
        st.rerun()  # the engine started or stopped: redraw the whole page (controls, run views)
    if lv.driver == SID and lv.running and ss.get("keep_le_autostop") and lv.all_done():
        stop()
        st.rerun()
    if lv.error:
        st.error(f"The engine stopped with an error: {lv.error}", icon=":material/error:")
    st.subheader("Live")
    m = lv.stats()
    cols = st.columns(8)
    cols[0].metric("Step", fmt(m["steps"]), help="Forward passes so far in this run.")
    cols[1].metric("Tokens / s", fmt(m["tokens_per_s"]), help="Tokens sampled over the last 2 s of engine time.")
    cols[2].metric("ms / step", fmt(m["step_ms"]), help="Mean measured step time over the last 2 s.")
    cols[3].metric("Running", fmt(m["running"]))
    cols[4].metric("Waiting", fmt(m["waiting"]))
    cols[5].metric("Free blocks", fmt(m["free_blocks"]) if m["free_blocks"] is not None else "–",
                   help="Free KV blocks after the last step.")
    cols[6].metric("Preempted", fmt(m["preemptions"]), help="Preemptions so far in this run.")
    cols[7].metric("Finished", f"{m['finished']} / {m['requests']}")
    if not lv.steps:
        st.info("Nothing has run yet. Press **Start**: the engine builds its model, then the workload's requests "
                "arrive and every step appears here as it happens." if not lv.running else
                "The engine is running and waiting for requests: send a workload or add one by hand.",
                icon=":material/hourglass_empty:")
        return
    tr = lv.trace(last_steps=LIVE_WINDOW)
    st.caption(f"The last {min(LIVE_WINDOW, lv.num_steps)} steps. Hover for details: the request in each lane, "
               "each phase's time. A red × is a preemption.")
    st.plotly_chart(live_figure(tr), key="le_live_fig", theme=None, config={"displaylogo": False})
    left, right = st.columns([2, 3], gap="large")
    with left:
        last = int(tr.steps["step"].iloc[-1])
        fig = kv_map_figure(tr, last)
        km = fig.layout.meta
        st.markdown(f"**KV blocks after step {last}**: {km['used']} in use, {km['free']} free"
                    + (f", {km['cached_free']} cached" if km["cached_free"] else ""))
        st.plotly_chart(fig, key="le_live_kv", theme=None, config={"displaylogo": False})
    with right:
        st.markdown("**Generated so far** (the toy tokenizer spells each token id as a pseudo-word)")
        rows = lv.text_rows(decode)
        if rows["tenant"].nunique() <= 1:
            rows = rows.drop(columns="tenant")
        st.dataframe(rows, hide_index=True, key="le_text_table", height=360,
                     column_config={"text": st.column_config.TextColumn(width="large"),
                                    "preemptions": st.column_config.NumberColumn("preempted")})


live_panel()


# ---------------------------------------------------------------------------------------------
# After a run: the Trace in the Playback views, the simulator beside it, downloads
# ---------------------------------------------------------------------------------------------

def run_views() -> None:
    """The finished run: its Trace in Playback's views, the simulator beside it, downloads."""
    res = ss.get("le_result")
    if res is None or res["run"] != live.run or res["steps"] != live.num_steps:
        with st.spinner("Building the run's trace and simulating it…"):
            trace = svc.trace()
            sent = list(getattr(svc.engine, "requests", []))
            try:
                cmp, why = compare_with_simulator(trace, sent), None
            except (ValueError, RuntimeError) as e:  # too short to fit, or a replay the simulator refuses
                cmp, why = None, str(e)
        res = ss["le_result"] = {"run": live.run, "steps": live.num_steps, "trace": trace, "sent": sent, "cmp": cmp,
                                 "why": why}
    trace, cmp = res["trace"], res["cmp"]

    st.divider()
    st.header("The run")
    sm = summary(trace)
    cols = st.columns(6)
    cols[0].metric("Steps", fmt(sm["steps"]))
    cols[1].metric("Duration (s)", fmt(sm["duration"] / 1000))
    cols[2].metric("Mean TTFT (ms)", fmt(sm["ttft_mean"]))
    cols[3].metric("p99 TTFT (ms)", fmt(sm["ttft_p99"]))
    cols[4].metric("Tokens / s", fmt(1000 * sm["throughput"]))
    cols[5].metric("Preemptions", fmt(sm["preemptions"]))
    st.caption("The engine's Trace, in the same views as Playback (times in ms, measured). Download it below to "
               "open it anywhere a trace is read.")

    st.subheader("Slot lanes")
    st.plotly_chart(occupancy_figure(trace), key="le_occupancy", theme=None, config={"displaylogo": False})
    st.subheader("Step time by phase")
    st.caption("What each forward pass cost, split into schedule, prepare (inputs, slot mapping), forward, sample; "
               "the grey line is the tokens in the step.")
    st.plotly_chart(phase_figure(trace), key="le_phases", theme=None, config={"displaylogo": False})
    st.subheader("Tokens per step")
    st.plotly_chart(step_tokens_figure(trace), key="le_step_tokens", theme=None, config={"displaylogo": False})


    @st.fragment
    def run_inspector(tr) -> None:
        steps = tr.steps["step"]
        step = step_scrubber("le_step", int(steps.min()), int(steps.max()), buttons="le")
        left, right = st.columns([1, 1], gap="large")
        with left:
            st.plotly_chart(kv_map_figure(tr, step), key="le_kv_map", theme=None, config={"displaylogo": False})
        with right:
            batch, events = inspector_tables(tr, step)
            st.dataframe(batch, hide_index=True, key="le_batch_table")
            if not events.empty:
                st.dataframe(events, hide_index=True, key="le_events_table")


    st.subheader("Step inspector")
    run_inspector(trace)

    st.header("Compare with the simulator")
    if cmp is None:
        st.info(f"No comparison for this run: {res['why']}.", icon=":material/info:")
    else:
        fit = cmp.fit_summary()
        st.markdown(
            f"The simulator's cost model, fitted to this run's {fit['samples']} steps: **step time = "
            f"{fmt(fit['per_token'])} ms × tokens + {fmt(fit['per_context_token'] * 1000)} µs × context tokens + "
            f"{fmt(fit['per_step'])} ms** (R² {fmt(fit['r2'])}, median step error "
            f"{fmt(100 * fit['median_rel_error'])}%"
            + (f"; {fit['outliers']} step{'s' if fit['outliers'] != 1 else ''} slowed by something outside the "
               "engine left out of the fit" if fit["outliers"] else "")
            + "). The simulator then replays the same requests at the same arrival times with that model.")
        st.plotly_chart(calibration_figure(cmp.steps, cmp.ttft), key="le_calibration", theme=None,
                        config={"displaylogo": False})
        t1, t2 = st.columns([1, 1], gap="large")
        with t1:
            st.markdown("**Measured vs simulated**")
            st.dataframe(cmp.metrics, hide_index=True, key="le_cmp_table",
                         column_config={"measured": st.column_config.NumberColumn(format="%.4g"),
                                        "simulated": st.column_config.NumberColumn(format="%.4g"),
                                        "simulated / measured": st.column_config.NumberColumn("ratio", format="%.3f")})
        with t2:
            st.markdown("**Time to first token per request (ms)**")
            st.dataframe(cmp.ttft, hide_index=True, key="le_ttft_table",
                         column_config={c: st.column_config.NumberColumn(format="%.1f")
                                        for c in ("measured", "simulated", "difference")})
        with st.expander("Every measured step against the cost model"):
            st.dataframe(cmp.steps, hide_index=True, key="le_steps_table")

    with st.expander("Per request"):
        st.dataframe(per_request(trace), hide_index=True, key="le_requests_table")

    st.subheader("Downloads")
    stem = f"live_engine_run{live.run}"
    export_panel(trace, stem, key="le")
    d1, _, _ = st.columns(3)
    d1.download_button("Workload JSON (replay in the simulator)",
                       data=lambda: replay_workload(trace, res["sent"]).dumps(), file_name=f"{stem}.workload.json",
                       mime="application/json", on_click="ignore", key="le_dl_workload", icon=":material/download:",
                       width="stretch", help="The requests of this run at their measured arrival times (ms), with the "
                                             "engine's settings: load it on the other pages.")


if not (running or not live.steps):
    run_views()

start_torch_preload()  # last: the page has drawn by now
