"""Figures and tables for the Server log page: pure functions of the Trace a server log becomes
(servers.server_log.build) and of the reader's JSON. No Streamlit.

- batch_timeline: every logged SGLang batch on the log's clock: prefill batches as bars of new
  (solid) and cached (hatched) prompt tokens, decode batches as the requests decoding in the
  logged step; the spans the log says nothing about shaded grey ("unknown", never "idle").
- step_timeline: every vLLM step an Iteration line logged (`--enable-logging-iteration-details`),
  in the log's order: its prompt-chunk (context) and decode tokens stacked (areas drawn step by
  step), its elapsed time, and the KV pool's usage after it.
- request_timeline: every request a TGI log ended (its `Success` line), at its arrival: the time
  it waited for its first batch and the time from there to its end, as the router measured them;
  an Ollama log's requests, their whole handler time.
- gauges_figure: running / waiting, KV usage (and the prefix-cache hit rate), throughput over
  time, one line per lane (DP rank, vLLM engine); lines break at unknown spans, not drawn across.
- verdict_table, records_table: the reader's verdict and its records as tables.

All log-derived text reaches the chart as data (hover text, legend names from a fixed set), never
as HTML of its own.
"""
from __future__ import annotations

import math

import numpy as np
import pandas as pd
import plotly.graph_objects as go
from plotly.subplots import make_subplots

from sim.trace import Trace

from .common import FONT, TEMPLATE, plotly_text

CONFIG = {"displaylogo": False}
NEW, CACHED, DECODE, WAITING, KV, HIT, UNKNOWN = "#4E79A7", "#A0CBE8", "#59A14F", "#E15759", "#B07AA1", "#F28E2B", "#9CA3AF"
LANE_COLOURS = ["#4E79A7", "#59A14F", "#E15759", "#B07AA1", "#F28E2B", "#76B7B2", "#EDC948", "#FF9DA7", "#9C755F"]
MAX_POINTS = 20_000       # past this many records a line is thinned evenly (every k-th point)
MARGIN = {"l": 72, "r": 24, "t": 64, "b": 56}


def _x(tr: Trace, t: np.ndarray) -> tuple[np.ndarray, str]:
    if len(t) and np.isfinite(t).any():
        return t, "time on the log's clock (s)"
    return np.arange(len(t), dtype=float), "logged line (no timestamps)"


def _shade(fig: go.Figure, spans, rows: int) -> None:
    """Unknown spans as grey bands over every row, and one legend entry for them."""
    for a, b in spans[:500]:
        for r in range(1, rows + 1):
            fig.add_vrect(x0=a, x1=b, fillcolor=UNKNOWN, opacity=0.18, line_width=0, layer="below", row=r, col=1)
    if spans:
        fig.add_trace(go.Scatter(x=[None], y=[None], mode="markers", name="unknown (not logged)",
                                 marker={"symbol": "square", "size": 12, "color": UNKNOWN, "opacity": 0.5},
                                 hoverinfo="skip"), row=1, col=1)


def _layout(fig: go.Figure, height: int, title_x: str, rows: int) -> go.Figure:
    """The shared look; the legend in the top margin, which is made tall enough for its rows."""
    entries = sum(1 for d in fig.data if d.showlegend is not False)
    legend_rows = max(1, math.ceil(entries / 3))
    margin = {**MARGIN, "t": 44 + 24 * legend_rows}
    fig.update_layout(template=TEMPLATE, font=FONT, height=height + 24 * legend_rows, margin=margin, bargap=0.15,
                      legend={"orientation": "h", "x": 0, "xanchor": "left", "y": 1.0, "yanchor": "top",
                              "yref": "container", "font": {"size": 12}, "entrywidth": 0.33, "entrywidthmode": "fraction"},
                      hovermode="closest")
    fig.update_xaxes(title_text=title_x, row=rows, col=1)
    return fig


def batch_timeline(tr: Trace, log_y: bool = False) -> go.Figure:
    s = tr.steps
    fig = make_subplots(rows=2, cols=1, shared_xaxes=True, vertical_spacing=0.1, row_heights=[0.6, 0.4],
                        subplot_titles=("Prefill batches: prompt tokens", "Decode batches: requests decoding"))
    n = len(s)
    t = s["start"].to_numpy(dtype=float) if n else np.zeros(0)
    x, label = _x(tr, t)
    kind = s["kind"].to_numpy() if n else np.zeros(0, dtype=object)
    pre, dec = kind == "prefill", kind == "decode"
    lane = s["lane"].to_numpy() if n else np.zeros(0, dtype=object)
    cached = s["cached_tokens"].to_numpy(dtype=float, na_value=np.nan) if n else np.zeros(0)
    new = s["prefill_tokens"].to_numpy(dtype=float) if n else np.zeros(0)
    run = s["running"].to_numpy(dtype=float) if n else np.zeros(0)
    wait = s["waiting"].to_numpy(dtype=float) if n else np.zeros(0)
    line = s["line"].to_numpy() if n else np.zeros(0, dtype=int)
    width = 0.8
    hover = [f"line {ln}{' · ' + str(la) if la else ''}" for ln, la in zip(line, lane)]
    fig.add_trace(go.Bar(x=x[pre], y=new[pre], name="new prompt tokens", marker_color=NEW, width=width,
                         hovertext=np.array(hover, dtype=object)[pre] if n else [],
                         hovertemplate="%{y:,} new tokens<br>%{hovertext}<extra></extra>"), row=1, col=1)
    fig.add_trace(go.Bar(x=x[pre], y=np.nan_to_num(cached[pre]), name="cached prompt tokens (prefix hits)",
                         marker={"color": CACHED, "pattern": {"shape": "/"}}, width=width,
                         hovertext=np.array(hover, dtype=object)[pre] if n else [],
                         hovertemplate="%{y:,} cached tokens<br>%{hovertext}<extra></extra>"), row=1, col=1)
    fig.add_trace(go.Bar(x=x[dec], y=run[dec], name="decoding requests (a token each)",
                         marker_color=DECODE, width=width, hovertext=np.array(hover, dtype=object)[dec] if n else [],
                         hovertemplate="%{y:,} running<br>%{hovertext}<extra></extra>"), row=2, col=1)
    fig.add_trace(go.Scatter(x=x[dec], y=wait[dec], name="waiting (#queue-req)", mode="markers",
                             marker={"color": WAITING, "size": 5, "symbol": "line-ew-open"},
                             hovertemplate="%{y:,} waiting<extra></extra>"), row=2, col=1)
    fig.update_layout(barmode="stack")
    _shade(fig, tr.unknown_spans, 2)
    fig.update_yaxes(title_text="tokens", type="log" if log_y else "linear", row=1, col=1)
    fig.update_yaxes(title_text="requests", row=2, col=1)
    fig.update_layout(meta={"batches": int(n), "prefill": int(pre.sum()), "decode": int(dec.sum()),
                            "unknown_spans": len(tr.unknown_spans)})
    return _layout(fig, 520, label, 2)


def step_timeline(tr: Trace) -> go.Figure:
    """vLLM's logged steps, one per Iteration line (TensorRT-LLM's, one per iteration line), against
    the logged step's place in the log (the log's clock has one-second resolution, finer than the
    steps, so time cannot be the axis)."""
    s = tr.steps
    n = len(s)
    trt = tr.meta.get("engine") == "trtllm"
    who = "TensorRT-LLM iteration" if trt else "vLLM step"
    has_kv = n > 0 and bool(np.isfinite(s["kv_usage"].to_numpy(dtype=float)).any())
    rows = 3 if has_kv else 2
    fig = make_subplots(rows=rows, cols=1, shared_xaxes=True, vertical_spacing=0.08,
                        row_heights=[0.5, 0.25, 0.25][:rows],
                        subplot_titles=("Tokens per step: prompt chunks and decodes", "Step time (ms)",
                                        "KV cache usage after the step")[:rows])
    x = s["step"].to_numpy(dtype=float) if n else np.zeros(0)
    hover = [f"{who} {i:,} · {t:,.0f} s · line {ln}{' · ' + str(la) if la else ''}"
             for i, t, ln, la in zip(s["iteration"], s["start"], s["line"], s["lane"])] if n else []
    hover = np.array(hover, dtype=object)
    ctx_req = s["context_requests"].to_numpy() if n else np.zeros(0)
    # TensorRT-LLM before April 2025 does not say how many generation requests there were
    gen_req = np.array(["?" if pd.isna(g) else f"{int(g):,}" for g in s["generation_requests"]], dtype=object) \
        if n else np.zeros(0)
    # stacked areas drawn step by step (a window holds thousands of steps: bars would be thinner than a pixel)
    for col, name, colour, req, what in (("prefill_tokens", "prompt tokens (context requests)", NEW, ctx_req, "prompt"),
                                         ("decode_tokens", "generation tokens (generation requests)" if trt else
                                          "decode and recomputed tokens (generation requests)", DECODE, gen_req,
                                          "decode")):
        fig.add_trace(go.Scatter(x=x, y=s[col].to_numpy() if n else [], name=name, mode="lines", stackgroup="tokens",
                                 line={"color": colour, "width": 0.8, "shape": "hv"}, fillcolor=colour,
                                 customdata=req, hovertext=hover,
                                 hovertemplate=f"%{{y:,}} {what} tokens of %{{customdata}} request(s)<br>"
                                               "%{hovertext}<extra></extra>"), row=1, col=1)
    fig.add_trace(go.Scatter(x=x, y=s["step_ms"].to_numpy(dtype=float) if n else [],
                             name="step time (host)" if trt else "step time", mode="lines",
                             line={"color": WAITING, "width": 1}, hovertext=hover,
                             hovertemplate="%{y:,.2f} ms<br>%{hovertext}<extra></extra>"), row=2, col=1)
    if n and "device_ms" in s.columns:   # TensorRT-LLM's GPU time of the step (mid-2025 on)
        fig.add_trace(go.Scatter(x=x, y=s["device_ms"].to_numpy(dtype=float), name="step time (GPU)", mode="lines",
                                 line={"color": KV, "width": 1, "dash": "dot"}, hovertext=hover,
                                 hovertemplate="%{y:,.2f} ms on the GPU<br>%{hovertext}<extra></extra>"), row=2, col=1)
    if has_kv:
        fig.add_trace(go.Scatter(x=x, y=100 * s["kv_usage"].to_numpy(dtype=float), name="KV cache usage", mode="lines",
                                 line={"color": KV, "width": 1}, hovertext=hover,
                                 hovertemplate="%{y:.1f}%<br>%{hovertext}<extra></extra>"), row=3, col=1)
        fig.update_yaxes(title_text="%", range=[0, 100], row=3, col=1)
    fig.update_yaxes(title_text="tokens", row=1, col=1)
    fig.update_yaxes(title_text="ms", rangemode="tozero", row=2, col=1)
    fig.update_layout(meta={"steps": int(n), "prefill_tokens": int(s["prefill_tokens"].sum()) if n else 0,
                            "decode_tokens": int(s["decode_tokens"].sum()) if n else 0})
    return _layout(fig, 560 if has_kv else 440, "logged step (in the log's order)", rows).update_layout(
        legend_traceorder="normal")


def request_timeline(tr: Trace) -> go.Figure:
    """Each request's times (ms, log scale) against its arrival, from a log that times every request:
    TGI's queue time and inference time; Ollama's whole handler time (its log has no first batch);
    thinned evenly past MAX_POINTS requests."""
    rq = tr.requests
    n = len(rq)
    arrive = rq["arrival_time"].to_numpy(dtype=float) if n else np.zeros(0)
    first = rq["first_scheduled_time"].to_numpy(dtype=float) if n else np.zeros(0)
    end = rq["finish_time"].to_numpy(dtype=float) if n else np.zeros(0)
    k = max(1, math.ceil(n / MAX_POINTS))
    idx = np.arange(0, n, k)
    split = bool(np.isfinite(first).any())
    panels = ([(1e3 * (first - arrive), WAITING, "queue time", "Queue time: arrival to the first batch (ms)"),
               (1e3 * (end - first), DECODE, "inference time", "Inference time: first batch to the end (ms)")]
              if split else [(1e3 * (end - arrive), NEW, "latency", "Latency: arrival to the end (ms)")])
    rows = len(panels)
    fig = make_subplots(rows=rows, cols=1, shared_xaxes=True, vertical_spacing=0.1,
                        subplot_titles=tuple(p[3] for p in panels))
    out = rq["output_tokens"].astype("Float64").to_numpy(dtype=float, na_value=np.nan) if n else np.zeros(0)
    why = rq["finish_reason"].astype(str).to_numpy() if n else np.zeros(0, dtype=object)
    label = plotly_text(np.array([f"{r} · {o:,.0f} tokens" if np.isfinite(o) else f"{r} · {w}"
                                  for r, o, w in zip(rq["request"].astype(str).to_numpy()[idx], out[idx], why[idx])],
                                 dtype=object))
    for row, (y, colour, name, _) in enumerate(panels, start=1):
        fig.add_trace(go.Scattergl(x=arrive[idx], y=np.maximum(y[idx], 1e-3), mode="markers", name=name,
                                   marker={"color": colour, "size": 4, "opacity": 0.6}, hovertext=label,
                                   hovertemplate="%{y:,.3~f} ms<br>%{hovertext}<extra>" + name + "</extra>"),
                      row=row, col=1)
        fig.update_yaxes(type="log", title_text="ms", row=row, col=1)
    _shade(fig, tr.unknown_spans, rows)
    fig.update_layout(meta={"requests": int(n), "drawn": int(len(idx)), "panels": [p[2] for p in panels]})
    return _layout(fig, 480 if split else 320, "arrival on the log's clock (s)", rows)


def _series(c: pd.DataFrame, name: str, lane: str):
    sel = c[(c["tenant"].to_numpy() == name) & (c["lane"].to_numpy() == lane)]
    return sel["time"].to_numpy(dtype=float), sel["value"].to_numpy(dtype=float)


def _broken(t: np.ndarray, v: np.ndarray, spans) -> tuple[list, list]:
    """The line's points with a break (None) inside every unknown span, so no line crosses one."""
    if len(t) > MAX_POINTS:
        k = math.ceil(len(t) / MAX_POINTS)
        t, v = t[::k], v[::k]
    xs, ys = [], []
    starts = sorted(a for a, _ in spans)
    j = 0
    prev = None
    for a, b in zip(t.tolist(), v.tolist()):
        while j < len(starts) and prev is not None and starts[j] < prev:
            j += 1
        if prev is not None and j < len(starts) and prev <= starts[j] < a:
            xs.append(None)
            ys.append(None)
        xs.append(a)
        ys.append(b if b == b else None)
        prev = a
    return xs, ys


PANELS = ((1, "Running and waiting requests", "requests"), (2, "KV cache usage and prefix-cache hit rate", "%"),
          (3, "Throughput (tokens/s)", "tokens/s"))


def gauges_figure(tr: Trace) -> go.Figure:
    """The logged gauges over time, a panel each for requests, KV use and throughput that the log
    has (a log without KV use or throughputs, such as TGI's, draws the requests panel only)."""
    c = tr.counters
    lanes = sorted(set(c["lane"].tolist())) if len(c) else []
    spans = tr.unknown_spans
    names = set(c["tenant"].tolist()) if len(c) else set()
    sglang = tr.meta.get("engine") == "sglang"
    plots = [("running", 1, "running", "solid", 1.0), ("waiting", 1, "waiting", "dot", 1.0),
             ("in_flight", 1, "in flight (rebuilt from each request's times)", "solid", 1.0),
             ("kv_usage", 2, "KV usage (%)", "solid", 100.0), ("prefix_cache_hit_rate", 2, "prefix-cache hit rate (%)",
                                                                "dot", 100.0),
             ("throughput" if sglang else "generation_throughput", 3,
              "input / gen throughput (as logged)" if sglang else "generation throughput", "solid", 1.0),
             ("prompt_throughput", 3, "prompt throughput", "dot", 1.0)]
    used = sorted({row for name, row, *_ in plots if name in names} | {1})
    panel = {old: new for new, old in enumerate(used, start=1)}     # the panels drawn, in order
    rows = len(used)
    fig = make_subplots(rows=rows, cols=1, shared_xaxes=True, vertical_spacing=0.08 if rows > 1 else 0.0,
                        subplot_titles=tuple(title for r, title, _ in PANELS if r in panel))
    mode = "lines+markers" if len(c) <= 2000 else "lines"
    for i, lane in enumerate(lanes[:9]):
        colour = LANE_COLOURS[i % len(LANE_COLOURS)]
        for name, row, words, dash, scale in plots:
            if name not in names:
                continue
            t, v = _series(c, name, lane)
            if not len(t):
                continue
            xs, ys = _broken(t, v * scale, spans)
            fig.add_trace(go.Scatter(x=xs, y=ys, mode=mode, name=f"{words}{' · ' + lane if lane else ''}",
                                     line={"color": colour, "dash": dash, "width": 1.6}, marker={"size": 4},
                                     connectgaps=False, hovertemplate="%{y:,.4g}<extra>" + words + "</extra>"),
                          row=panel[row], col=1)
    ev = tr.events
    pre = ev[ev["kind"].astype(str).to_numpy() == "preempt"] if len(ev) else ev
    if len(pre):   # vLLM V0's preemption warnings (one at every 50th), SGLang's retractions
        fig.add_trace(go.Scatter(x=pre["time"].to_numpy(dtype=float), y=np.zeros(len(pre)), mode="markers",
                                 name="retraction (KV cache pool full)" if sglang
                                 else "preemption warning (V0 logs every 50th)",
                                 marker={"symbol": "x", "size": 9, "color": "#d62728"},
                                 customdata=np.stack([plotly_text(pre["request"].astype(str).to_numpy()),
                                                      plotly_text(pre["detail"].astype(str).to_numpy())], axis=-1),
                                 hovertemplate="%{customdata[0]}<br>%{customdata[1]}<extra>preempted</extra>"
                                 if not sglang else "%{customdata[1]}<extra>retracted</extra>"),
                      row=1, col=1)
    _shade(fig, spans, rows)
    t_all = c["time"].to_numpy(dtype=float) if len(c) else np.zeros(0)
    label = "time on the log's clock (s)" if np.isfinite(t_all).any() else "logged line (no timestamps)"
    for r, _, unit in PANELS:
        if r in panel:
            fig.update_yaxes(title_text=unit, row=panel[r], col=1,
                             **({"range": [0, 105]} if unit == "%" else {"rangemode": "tozero"}))
    fig.update_layout(meta={"lanes": lanes, "lanes_drawn": min(len(lanes), 9), "gauges": sorted(names),
                            "unknown_spans": len(spans), "preempt_marks": int(len(pre)), "panels": rows})
    return _layout(fig, 220 + 140 * rows, label, rows)


def verdict_table(read: dict) -> pd.DataFrame:
    """The reader's verdict, one fact a row (all values as text)."""
    recs = records_of(read)
    what = {"sglang": "batch", "vllm": "stats", "lmdeploy": "stats", "trtllm": "iteration",
            "tgi": "request", "ollama": "request"}.get(read["engine"], "record")
    rows = [("engine", read["engine"]), ("version era", read["era"]),
            ("records", f"{len(recs):,} {what} lines"),
            ("request lines", f"{len(read['requests']):,}"),
            ("lines not understood", f"{read['not_understood']['count']:,}"),
            ("duplicates dropped", f"{read['duplicates']['count']:,}"),
            ("lines rejoined (hard wrap)", f"{read['rejoined_lines']:,}"),
            ("unknown spans", f"{len(read['unknown_spans']['spans']):,}"),
            ("clock", read["clock"]), ("first record", read["time_origin"] or "–"),
            ("lanes", ", ".join(x or "(one)" for x in read["lanes"]) or "–"),
            ("wrappers", ", ".join(read["wrappers"]) or "none"),
            ("lines read", f"{read['lines']:,}" + ("" if read["complete"] else " (partial read)"))]
    rows += [("trait", t) for t in read["traits"]]
    return pd.DataFrame(rows, columns=["what", "value"]).astype(str)


def records_of(read: dict) -> list:
    """The engine's own records: vLLM's stats lines, TGI's request lines, the others' batch lines."""
    engine = read["engine"]
    return (read["stats"] if engine in ("vllm", "lmdeploy") else read["requests"] if engine in ("tgi", "ollama")
            else read["batches"])


def records_table(read: dict) -> pd.DataFrame:
    recs = records_of(read)
    if not recs:
        return pd.DataFrame({"line": pd.Series([], dtype="int64")})
    df = pd.DataFrame([{k: (str(v) if isinstance(v, dict) else v) for k, v in r.items()} for r in recs])
    return df


RESIM_ROWS = (("running", "Running requests", 1.0), ("waiting", "Waiting requests", 1.0), ("kv_usage", "KV usage (%)", 100.0),
              ("prompt_throughput", "Prompt throughput (tokens/s)", 1.0),
              ("generation_throughput", "Generation throughput (tokens/s)", 1.0))
LOG_COLOUR, SIM_COLOUR = "#4E79A7", "#E15759"


def resim_figure(compare: pd.DataFrame) -> go.Figure:
    """The log's gauges (as logged) beside the simulator's on the implied workload, at the log's own
    times: one row per gauge (servers.server_log.resim.resimulate's `compare`: time, gauge, log, sim)."""
    gauges = [g for g in RESIM_ROWS if (compare["gauge"] == g[0]).any()]
    rows = max(len(gauges), 1)
    fig = make_subplots(rows=rows, cols=1, shared_xaxes=True, vertical_spacing=0.06,
                        subplot_titles=tuple(w for _, w, _ in gauges) or ("",))
    mode = "lines+markers" if len(compare) <= 2000 * max(rows, 1) else "lines"
    for r, (g, words, scale) in enumerate(gauges, start=1):
        d = compare[compare["gauge"] == g]
        if len(d) > MAX_POINTS:
            d = d.iloc[:: math.ceil(len(d) / MAX_POINTS)]
        for col, name, colour, dash in (("log", "the log", LOG_COLOUR, "solid"),
                                        ("sim", "simulated (implied workload)", SIM_COLOUR, "dot")):
            fig.add_trace(go.Scatter(x=d["time"].to_numpy(dtype=float), y=d[col].to_numpy(dtype=float) * scale,
                                     mode=mode, name=name, legendgroup=col, showlegend=r == 1,
                                     line={"color": colour, "dash": dash, "width": 1.6}, marker={"size": 4},
                                     hovertemplate="%{y:,.4g}<extra>" + name + "</extra>"), row=r, col=1)
        fig.update_yaxes(rangemode="tozero", row=r, col=1)
    fig.update_layout(meta={"gauges": [g for g, _, _ in gauges], "points": int(len(compare))})
    return _layout(fig, 150 * rows + 80, "time on the log's clock (s)", rows)


def resim_settings_table(implied: dict) -> pd.DataFrame:
    """The simulator's settings for the implied workload beside what the log stated (resim JSON's `implied`)."""
    cfg, said = implied["config"], implied["from_log"]
    return pd.DataFrame({"setting": list(cfg), "simulated": [str(v) for v in cfg.values()],
                         "in the log": [str(said.get(k, "–")) for k in cfg]}).astype(str)
