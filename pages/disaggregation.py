"""Disaggregation: KV size, prefill time and KV transfer time as the prompt grows, and the crossover.

A thin page: every number comes from sim.lessons.disagg (on sim.cost's presets), every chart from
figures.disagg; settings live in the URL (ui.state).
"""
from __future__ import annotations

import math

import pandas as pd
import streamlit as st

from figures.disagg import breakeven_figure, growth_figure, ratio_figure, ttft_figure
from sim.cost import HARDWARE, MODELS
from sim.lessons.disagg import (ALL_LINKS, LESSON_LINKS, LESSON_PROMPTS, Setup, breakeven_bandwidth, crossovers,
                                custom_link, lesson_table, prompt_grid, ratio_vs_bandwidth, resolve_link, sweep)
from ui import primer
from ui.state import PageSettings, Setting

ss = st.session_state
DEFAULT_LINKS = (*LESSON_LINKS, "ethernet-25g")
PROMPT_CHOICES = (1024, 4096, 8192, 32768, 131072)
MAX_PROMPTS = (32768, 131072, 1048576)
CUSTOM = "custom"

SETTINGS = PageSettings("dis", [
    Setting("keep_dis_model", "8B-fp16", str, choices=tuple(MODELS)),
    Setting("keep_dis_gpu", "h100-sxm", str, choices=tuple(HARDWARE)),
    Setting("keep_dis_eff", 0.5, float, bounds=(0.05, 1.0)),
    *(Setting(f"keep_dis_link_{k.replace('-', '_')}", k in DEFAULT_LINKS, bool) for k in ALL_LINKS),
    Setting("keep_dis_custom_on", False, bool),
    Setting("keep_dis_custom_gbps", 40.0, float, bounds=(0.1, 10_000.0)),
    Setting("keep_dis_attention", False, bool),
    Setting("keep_dis_overhead", 0.0, float, bounds=(0.0, 1000.0)),
    Setting("keep_dis_prompt", 1024, int, choices=PROMPT_CHOICES),
    Setting("keep_dis_max_prompt", 131072, int, choices=MAX_PROMPTS),
])
SETTINGS.init()


def link_key(k: str) -> str:
    return f"keep_dis_link_{k.replace('-', '_')}"


with st.sidebar:
    st.header("Model and prefill GPU")
    st.selectbox("Model", list(MODELS), key="keep_dis_model", format_func=lambda k: MODELS[k].name,
                 help="Its KV cache per token (layers x KV heads x head size x 2 x 2 bytes) and its FLOPs per "
                      "token (2 x parameters).")
    st.selectbox("Prefill GPU", list(HARDWARE), key="keep_dis_gpu", format_func=lambda k: HARDWARE[k].name,
                 help="Dense BF16/FP16 tensor peak from the vendor's datasheet.")
    st.slider("Share of peak FLOP/s reached", 0.05, 1.0, step=0.05, key="keep_dis_eff",
              help="The lesson assumes half of the datasheet peak.")
    st.header("Links")
    for k, link in ALL_LINKS.items():
        st.checkbox(link.name, key=link_key(k))
    c1, c2 = st.columns([1, 1.3], vertical_alignment="bottom")
    c1.checkbox("Custom", key="keep_dis_custom_on")
    c2.number_input("Gb/s", 0.1, 10_000.0, step=10.0, key="keep_dis_custom_gbps", label_visibility="collapsed",
                    disabled=not ss["keep_dis_custom_on"], help="A link of this many gigabits per second.")
    st.header("Beyond the lesson's model")
    st.toggle("Count attention arithmetic", key="keep_dis_attention",
              help="Adds the causal attention FLOPs, about 2 x layers x d_model x prompt², to the prefill. "
                   "It grows with the square of the prompt, so long prompts take relatively longer to compute.")
    st.number_input("Fixed overhead per transfer (ms)", 0.0, 1000.0, step=0.5, key="keep_dis_overhead",
                    help="Connection setup, metadata, gathering scattered KV blocks: a cost that does not grow "
                         "with the prompt. 0 in the lesson.")
    st.header("Charts")
    st.selectbox("Prompt for the link-speed chart", PROMPT_CHOICES, key="keep_dis_prompt",
                 format_func=lambda p: f"{p:,} tokens")
    st.selectbox("Longest prompt shown", MAX_PROMPTS, key="keep_dis_max_prompt", format_func=lambda p: f"{p:,} tokens")
    st.header("Share")
    st.caption("The address bar holds every setting: copy it to share this view.")
    SETTINGS.file_panel()
SETTINGS.sync_url()

setup = Setup(model=ss["keep_dis_model"], hardware=ss["keep_dis_gpu"], efficiency=float(ss["keep_dis_eff"]),
              attention=bool(ss["keep_dis_attention"]), overhead_ms=float(ss["keep_dis_overhead"]))
links: list = [k for k in ALL_LINKS if ss.get(link_key(k))]
labels = {k: ALL_LINKS[k].name for k in links}
if ss["keep_dis_custom_on"]:
    custom = custom_link(float(ss["keep_dis_custom_gbps"]))
    links.append(custom)
    labels[custom.name] = custom.name
names = [lk.name if not isinstance(lk, str) else lk for lk in links]

st.title("Disaggregation")
st.caption(
    "Prefill is limited by arithmetic, decode by memory bandwidth, and on one GPU they get in each other's "
    "way. Disaggregated serving runs them on separate GPUs: a prefill pool computes the prompt's KV cache and "
    "sends it to a decode pool. The price is the transfer, which adds to every request's time to first token.")
if not links:
    st.info("Pick at least one link on the left.", icon=":material/cable:")
    primer.stop()

gpu, model = HARDWARE[setup.hardware], MODELS[setup.model]
lesson_like = (setup.model in ("8B", "8B-fp16") and setup.hardware == "h100-sxm" and setup.efficiency == 0.5
               and not setup.attention and setup.overhead_ms == 0)
st.markdown(
    f"**{model.name}** on **{gpu.name}** at {setup.efficiency:.0%} of its {gpu.peak_flops / 1e12:,.0f} TFLOP/s: "
    f"{model.kv_bytes_per_token / 1024:,.0f} KiB of KV cache and {model.flops_per_token / 1e9:,.1f} GFLOP of "
    f"weight arithmetic per prompt token"
    + (" (lesson Example 10)." if lesson_like else "."))

# --- the lesson's table ---------------------------------------------------------------------
tab = lesson_table(setup, LESSON_PROMPTS, links)
show = pd.DataFrame({"prompt (tokens)": tab["prompt"], "KV cache (MiB)": tab["kv_mib"].round(0),
                     "prefill (ms)": tab["prefill_ms"].round(1)})
for k, n in zip(links, names):
    short = labels[n].split(" (")[0]
    show[short] = [f"{ms:,.2f} ms ({100 * r:.1f}%)" for ms, r in zip(tab[f"{n}_ms"], tab[f"{n}_ratio"])]
st.dataframe(show, hide_index=True, key="dis_table",
             column_config={"KV cache (MiB)": st.column_config.NumberColumn(format="%,.0f"),
                            "prefill (ms)": st.column_config.NumberColumn(format="%,.1f")})
st.caption("Each link column: the transfer time, and in brackets the transfer as a share of the prefill time.")

cross = crossovers(links, setup)
bw_star = breakeven_bandwidth(setup) / 1e9
tiles = [(labels[r.link].split(" (")[0], f"{100 * r.ratio_at_1k:.1f}%",
          f"Transfer time as a share of prefill time for a 1,024-token prompt over {labels[r.link]}.")
         for r in cross.itertuples()]
tiles.append(("Break-even link speed", f"{bw_star:.3g} GB/s",
              "With the lesson's linear model (no attention term, no overhead): below this speed moving the KV "
              "cache takes longer than computing it, whatever the prompt length."))
for i in range(0, len(tiles), 5):
    for c, (label, value, helptext) in zip(st.columns(5), tiles[i:i + 5]):
        c.metric(label, value, help=helptext)

# --- when does it stop paying -----------------------------------------------------------------
st.subheader("Where the transfer stops paying")
st.markdown(
    "**The crossover** here is the prompt length at which moving a prompt's KV cache takes exactly as long as "
    "the prefill that computed it (transfer/prefill = 100%). Below that line the transfer adds less to the time "
    "to first token than the prefill itself took, and if it is streamed layer by layer while the prefill runs "
    "it can largely hide behind it; above the line the link is the slower half and every extra token adds "
    "time the decode side spends waiting. It is a yardstick, not a verdict: what disaggregation *saves* (decode "
    "steps no longer stalled by prefills) depends on the traffic and is not modelled on this page.")
st.markdown(
    f"**What the model says.** In the lesson's model the KV size and the prefill time both grow in proportion to "
    f"the prompt, so their ratio is the same at every length: the break-even is a link *speed*, "
    f"**{bw_star:.3g} GB/s ({8 * bw_star:.3g} Gb/s)** for this model and GPU, not a prompt length. Every link "
    f"faster than that is below 100% at every length (NVLink about 1%, 400 Gb/s InfiniBand about 8%, 100 Gb/s "
    f"Ethernet about 32% in the lesson's case); a slower one (25 Gb/s Ethernet) is above it at every length. A "
    f"prompt-length crossover only appears with something that does not grow in proportion: **attention** "
    f"arithmetic (grows with the prompt squared, so long prompts become relatively cheaper to move) or a "
    f"**fixed overhead** per transfer (makes short prompts relatively dearer). Switch them on at the left.")

grid = prompt_grid(128, int(ss["keep_dis_max_prompt"]))
df = sweep(grid, links, setup)
st.plotly_chart(growth_figure(df, labels, cross, marks=LESSON_PROMPTS), key="dis_growth", theme=None,
                config={"displaylogo": False})
left, right = st.columns(2, gap="large")
with left:
    st.markdown("**Transfer as a share of prefill, as the prompt grows**")
    st.plotly_chart(ratio_figure(df, labels, cross), key="dis_ratio", theme=None, config={"displaylogo": False})
with right:
    prompt = int(ss["keep_dis_prompt"])
    st.markdown(f"**… and as the link gets faster** ({prompt:,}-token prompt)")
    speeds = [10 ** (x / 8) for x in range(-16, 29)]  # 0.01 to 1,000 GB/s
    curve = ratio_vs_bandwidth(speeds, [prompt], setup)
    marks = {}
    for lk, n in zip(links, names):
        gbs = resolve_link(lk).bandwidth / 1e9
        marks[n] = (labels[n], gbs, float(ratio_vs_bandwidth([gbs], [prompt], setup)["ratio"].iloc[0]))
    st.plotly_chart(breakeven_figure(curve, bw_star if setup.overhead_ms == 0 and not setup.attention else math.nan,
                                     marks, prompt), key="dis_breakeven", theme=None, config={"displaylogo": False})


def _when(p: float) -> str:
    if p == 0:
        return "never: cheaper than prefill at every length"
    if math.isinf(p):
        return "always: slower than prefill at every length"
    return f"below {p:,.0f} tokens" + (" (beyond any real prompt)" if p > 10**7 else "")


st.dataframe(pd.DataFrame({
    "link": [labels[r] for r in cross["link"]],
    "GB/s": cross["gb_per_s"],
    "ms per 1,024 tokens": cross["transfer_ms_per_1k"],
    "% of prefill at 1,024": 100 * cross["ratio_at_1k"],
    "transfer slower than prefill": [_when(p) for p in cross["crossover_prompt"]],
}), hide_index=True, key="dis_cross", column_config={
    "GB/s": st.column_config.NumberColumn(format="%.3g"),
    "ms per 1,024 tokens": st.column_config.NumberColumn(format="%.3g", help="Without the fixed overhead."),
    "% of prefill at 1,024": st.column_config.NumberColumn(format="%.1f%%")})

# --- animated time to first token -------------------------------------------------------------
st.subheader("Time to first token, prompt by prompt")
st.caption("Prefill (black) and then the KV transfer over each link, with nothing overlapped: press ▶ Play to "
           "grow the prompt, or drag the slider. The label gives the total and what the transfer adds.")
anim = sweep(prompt_grid(256, int(ss["keep_dis_max_prompt"]), per_octave=2), links, setup)
st.plotly_chart(ttft_figure(anim, labels, setup.overhead_ms, start=1024), key="dis_ttft", theme=None,
                config={"displaylogo": False})

st.markdown(
    "**Honest limits.** Link rates are nominal one-direction figures; real transfers reach less, and add "
    "per-transfer costs (the overhead knob). Prefill counts the weight matmuls only unless attention is on, "
    "and assumes one fixed share of peak at every length. Smaller KV caches move faster: grouped-query attention "
    "with few KV heads, multi-head latent attention, or a quantized KV cache (8 bits halves every transfer). In "
    "vLLM the transfer is done by a KV connector (`--kv-transfer-config`, e.g. NixlConnector or "
    "LMCacheConnectorV1, with kv_role kv_producer / kv_consumer); llama.cpp has no disaggregated mode.")
st.download_button("Table as CSV", data=lambda: df.assign(link=df["link"].map(labels)).to_csv(index=False).encode(),
                   file_name="disaggregation.csv", mime="text/csv", on_click="ignore", key="dis_dl_csv",
                   icon=":material/download:", help="Every prompt length and link of the charts above.")
SETTINGS.sync_url()
