"""Why batch: a decode step on the roofline as the batch grows (lesson Example 1).

A thin page: the numbers come from sim.lessons.sweeps (decode_sweep, decode_limits, decode_table), the
chart from figures.why_batch.
"""
from __future__ import annotations

import streamlit as st

from figures.why_batch import decode_figure
from sim.cost import HARDWARE, MODELS
from sim.lessons.sweeps import decode_limits, decode_sweep, decode_table
from ui.state import PageSettings, Setting

ss = st.session_state
LESSON_BATCHES = (1, 8, 16, 32)
MAX_BATCH = 4096

SETTINGS = PageSettings("wb", [
    Setting("keep_wb_hardware", "rtx4090", str, choices=tuple(HARDWARE)),
    Setting("keep_wb_model", "8B", str, choices=tuple(MODELS)),
    Setting("keep_wb_context", 4096, int, bounds=(1, 1_048_576)),
    Setting("keep_wb_bmin", 1, int, bounds=(1, MAX_BATCH)),
    Setting("keep_wb_bmax", 48, int, bounds=(1, MAX_BATCH)),
])
SETTINGS.init()

with st.sidebar:
    st.header("GPU and model")
    st.selectbox("GPU", list(HARDWARE), key="keep_wb_hardware", format_func=lambda k: HARDWARE[k].name,
                 help="Peak dense FP16/BF16 tensor rate, memory bandwidth and capacity from the vendor's datasheet.")
    st.selectbox("Model", list(MODELS), key="keep_wb_model", format_func=lambda k: MODELS[k].name,
                 help="Parameters and bits per weight set the bytes read per step; layers, KV heads and head "
                      "size set the KV cache per token.")
    st.number_input("Context per sequence (tokens)", 1, 1_048_576, step=512, key="keep_wb_context",
                    help="Every sequence attends over this many tokens, so each step reads this much KV cache "
                         "per sequence.")
    st.header("Batch sizes")
    c1, c2 = st.columns(2)
    c1.number_input("From", 1, MAX_BATCH, step=1, key="keep_wb_bmin")
    c2.number_input("To", 1, MAX_BATCH, step=8, key="keep_wb_bmax")
    st.header("Share")
    st.caption("The address bar holds every setting: copy it to share this view.")
    SETTINGS.file_panel()
SETTINGS.sync_url()

hw, model, ctx = ss["keep_wb_hardware"], ss["keep_wb_model"], int(ss["keep_wb_context"])
lo, hi = sorted((int(ss["keep_wb_bmin"]), int(ss["keep_wb_bmax"])))


@st.cache_data(max_entries=16, show_spinner=False)
def _sweep(hw: str, model: str, ctx: int, lo: int, hi: int):
    return decode_sweep(range(lo, hi + 1), ctx, hw, model), decode_limits(ctx, hw, model)


sweep, limits = _sweep(hw, model, ctx, lo, hi)
rows = decode_table(LESSON_BATCHES, ctx, hw, model)
one, last = rows[0], rows[-1]
H, M = HARDWARE[hw], MODELS[model]
fit = limits["fit_sequences"]

st.title("Why batch")
st.caption(f"{H.name}: {H.peak_flops / 1e12:,.1f} TFLOP/s dense, {H.bandwidth / 1e9:,.0f} GB/s, "
           f"{H.memory_bytes / 1e9:,.0f} GB · model {M.name}: {M.weight_bytes / 1e9:.2f} GB of weights, "
           f"{M.kv_bytes_per_token / 1024:,.0f} KiB of KV cache per token · {ctx:,} tokens of context per sequence.")
st.markdown(
    f"To produce one token, the GPU reads **every weight** from memory once, and each sequence also reads "
    f"**its own KV cache**. With one sequence a step moves {one['bytes_gb']:.2f} GB ({one['weights_gb']:.2f} GB "
    f"of weights and {one['kv_gb']:.2f} GB of KV cache), which takes {one['step_ms']:.2f} ms: the request gets "
    f"**{one['tok_s_per_seq']:,.1f} tokens/s** and the tensor cores do useful work only "
    f"**{one['flop_util_pct']:.2f}%** of the time. Batching lets many sequences share one read of the weights: "
    f"at {last['batch']} sequences the server makes **{last['tok_s']:,} tokens/s**, though each sequence gets "
    f"only {last['tok_s_per_seq']:,.1f} and utilisation is still {last['flop_util_pct']:.2f}%, because now the "
    f"KV caches are most of the traffic ({last['kv_gb']:.2f} of {last['bytes_gb']:.2f} GB). "
    + (f"The KV cache also caps the batch: **{fit:,} sequences** of {ctx:,} tokens fit next to the weights in "
       f"{limits['memory_gb']:,.0f} GB." if fit else
       f"Here not even one sequence of {ctx:,} tokens fits in {limits['memory_gb']:,.0f} GB: the numbers show what "
       f"the card would do if it had the memory."))

if fit == 0:
    st.warning("Not even one sequence fits: the weights and one KV cache need more than this GPU's memory.",
               icon=":material/warning:")

cols = st.columns(4)
cols[0].metric("1 sequence", f"{one['tok_s_per_seq']:,.1f} tok/s", help="Tokens per second one lone request gets.")
cols[1].metric("FLOP utilisation, batch 1", f"{one['flop_util_pct']:.2f}%",
               help="The share of the GPU's peak arithmetic rate a decode step of one sequence uses.")
cols[2].metric(f"Batch {last['batch']}", f"{last['tok_s']:,} tok/s",
               delta=f"{last['flop_util_pct']:.2f}% utilisation", delta_color="off", delta_arrow="off",
               help="Total tokens per second of the whole batch, and its FLOP utilisation.")
cols[3].metric("Sequences that fit", f"{fit:,}",
               help=f"floor((memory - weights) / KV per sequence) = floor(({limits['memory_gb']:.0f} - "
                    f"{limits['weights_gb']:.2f}) GB / {limits['kv_per_seq_gb']:.3f} GB); activations ignored.")

st.subheader("The decode step as the batch grows")
st.caption("A step takes the longer of reading its bytes (dashed) and doing its arithmetic (dotted). Press "
           "▶ Play to grow the batch and watch the card's memory fill up below; drag the slider to pick a batch "
           "size. The red-tinted region is where the KV caches no longer fit.")
st.plotly_chart(decode_figure(sweep, limits, start_batch=min(max(LESSON_BATCHES[-1], lo), hi)),
                key="wb_decode", theme=None, config={"displaylogo": False})

kv_b, cb = limits["kv_over_weights_batch"], limits["compute_bound_batch"]
st.markdown(
    f"**Where the KV cache becomes the limit.** The weights cost {limits['weights_gb']:.2f} GB per step whatever "
    f"the batch; every sequence adds {limits['kv_per_seq_gb']:.3f} GB of its own. From **batch {kv_b}** on, the "
    f"KV caches are more than half of every step's reads, so adding sequences no longer comes nearly for free: "
    + ("the step stays memory bound at every batch size, because one sequence's KV cache takes longer to read "
       "than its arithmetic takes to do." if cb is None else
       f"from batch {cb} on the arithmetic outlasts the reads and the step becomes compute bound.")
    + (f" Memory runs out first, at {fit:,} sequences." if fit else ""))

st.subheader(f"The lesson's table ({H.name}, {M.name}, {ctx:,}-token contexts)")
st.dataframe(
    [{"batch": r["batch"], "bytes/step (GB)": r["bytes_gb"], "weights (GB)": r["weights_gb"],
      "KV cache (GB)": r["kv_gb"], "step (ms)": r["step_ms"], "tok/s total": r["tok_s"],
      "tok/s per seq": r["tok_s_per_seq"], "FLOP utilisation (%)": r["flop_util_pct"]} for r in rows],
    hide_index=True, key="wb_table",
    column_config={"bytes/step (GB)": st.column_config.NumberColumn(format="%.2f"),
                   "weights (GB)": st.column_config.NumberColumn(format="%.2f"),
                   "KV cache (GB)": st.column_config.NumberColumn(format="%.2f"),
                   "step (ms)": st.column_config.NumberColumn(format="%.2f"),
                   "tok/s total": st.column_config.NumberColumn(format="%d"),
                   "tok/s per seq": st.column_config.NumberColumn(format="%.1f"),
                   "FLOP utilisation (%)": st.column_config.NumberColumn(format="%.2f")})
st.caption(f"Sequences of {ctx:,} tokens that fit next to the weights: {fit:,}. Same numbers as the lesson's "
           "DecodeUtilization program with the default settings.")

st.download_button("Sweep as CSV", data=lambda: sweep.to_csv(index=False).encode(),
                   file_name=f"why_batch_{hw}_{model}_{ctx}.csv", mime="text/csv", on_click="ignore",
                   key="wb_dl_csv", icon=":material/table_view:",
                   help="One row per batch size: bytes, memory and compute time, step time, throughput, utilisation.")
