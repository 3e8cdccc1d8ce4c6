"""Disaggregated prefill and decode: KV-cache size, prefill time and transfer time as the prompt
grows, and where the transfer stops paying (lesson Example 10, extended).

The model (the lesson's, with two optional additions):

- KV bytes of a prompt: ``P * kv_bytes_per_token`` (sim.cost.kv_bytes).
- Prefill time: the weight matmuls, ``2 * params`` FLOPs per token, at ``efficiency`` of the
  GPU's dense peak (sim.cost.prefill_ms). Optional: the causal attention arithmetic, about
  ``2 * layers * d_model * P**2`` FLOPs in all (QK^T and AV, each ``P**2 * d_model`` per layer
  once the mask halves them), at the same rate.
- Transfer time over a link: ``bytes / nominal one-way rate`` (sim.cost.transfer_ms), plus an
  optional fixed overhead per transfer (connection setup, metadata, scattered blocks).

The crossover: the prompt length at which moving the KV cache takes exactly as long as
computing it. Below a transfer/prefill ratio of 100% the transfer adds less to the time to first
token than the prefill itself took (and a transfer streamed layer by layer alongside the prefill
could hide behind it); above it, the link is the slower half. With the lesson's linear model the
ratio does not depend on the prompt at all, so the break-even is a link *speed*
(``breakeven_bandwidth``); a prompt-length crossover (``crossover_prompt``) exists only when a
non-linear term is switched on: attention makes long prompts relatively cheaper to move, a fixed
overhead makes short ones relatively dearer.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Sequence

import numpy as np
import pandas as pd

from ..cost import LINKS, Hardware, Link, ModelShape, hardware_preset, kv_bytes, model_preset, prefill_ms

# Attention shapes (Hugging Face config.json): layers and hidden size d_model.
#   Llama 3.1 8B: 32 layers, hidden 4096; Llama 3.1 70B: 80 layers, hidden 8192;
#   Llama 3.2 1B: 16 layers, hidden 2048.
ATTENTION_SHAPES: dict[str, tuple[int, int]] = {
    "8B": (32, 4096), "8B-fp16": (32, 4096), "70B": (80, 8192), "70B-fp16": (80, 8192), "1B-fp16": (16, 2048),
}
# Slower links than the lesson's, where the transfer takes longer than the prefill.
EXTRA_LINKS: dict[str, Link] = {
    # 25 and 10 Gigabit Ethernet: 3.125 and 1.25 GB/s.
    "ethernet-25g": Link("Ethernet 25 Gb/s (3.125 GB/s)", 25e9 / 8),
    "ethernet-10g": Link("Ethernet 10 Gb/s (1.25 GB/s)", 10e9 / 8),
}
ALL_LINKS: dict[str, Link] = {**LINKS, **EXTRA_LINKS}
LESSON_PROMPTS = (1024, 8192, 32768)
LESSON_LINKS = ("nvlink-h100", "infiniband-ndr", "ethernet-100g")


@dataclass(frozen=True)
class Setup:
    """What the arithmetic depends on. ``model``/``hardware`` are sim.cost preset keys."""

    model: str = "8B-fp16"
    hardware: str = "h100-sxm"
    efficiency: float = 0.5
    attention: bool = False
    overhead_ms: float = 0.0

    @property
    def shape(self) -> ModelShape:
        return model_preset(self.model)

    @property
    def gpu(self) -> Hardware:
        return hardware_preset(self.hardware)

    def rate(self) -> float:
        """FLOP/s the prefill runs at."""
        return self.gpu.peak_flops * self.efficiency

    def prefill_per_token_ms(self) -> float:
        """a: weight-matmul milliseconds per prompt token."""
        return prefill_ms(1, self.shape, self.gpu, self.efficiency)

    def attention_ms_per_token2(self) -> float:
        """c: attention milliseconds per squared prompt token (0 when attention is off)."""
        if not self.attention:
            return 0.0
        layers, d_model = ATTENTION_SHAPES[self.model]
        return 2.0 * layers * d_model / self.rate() * 1000


def resolve_link(link: str | Link) -> Link:
    """A Link from a key of ALL_LINKS (sim.cost.LINKS plus slower Ethernet), or the Link itself."""
    if isinstance(link, Link):
        return link
    try:
        return ALL_LINKS[link]
    except KeyError:
        raise KeyError(f"unknown link {link!r}; known: {', '.join(ALL_LINKS)}") from None


def custom_link(gbit_per_s: float) -> Link:
    """A link of ``gbit_per_s`` gigabits per second (one direction)."""
    return Link(f"Custom {gbit_per_s:g} Gb/s ({gbit_per_s / 8:g} GB/s)", gbit_per_s * 1e9 / 8)


def kv_mib(prompt: float | np.ndarray, s: Setup) -> float | np.ndarray:
    return kv_bytes(prompt, s.shape) / 2**20


def prefill_time_ms(prompt: float | np.ndarray, s: Setup) -> float | np.ndarray:
    """Prefill compute time of a prompt: a*P (+ c*P^2 with attention)."""
    p = np.asarray(prompt, dtype=float)
    out = s.prefill_per_token_ms() * p + s.attention_ms_per_token2() * p * p
    return float(out) if out.ndim == 0 else out


def transfer_time_ms(prompt: float | np.ndarray, link: str | Link, s: Setup) -> float | np.ndarray:
    """Time to move a prompt's KV cache over ``link``: overhead + bytes / rate."""
    bw = resolve_link(link).bandwidth
    p = np.asarray(prompt, dtype=float)
    out = s.overhead_ms + kv_bytes(p, s.shape) / bw * 1000
    return float(out) if out.ndim == 0 else out


def breakeven_bandwidth(s: Setup) -> float:
    """Bytes/s at which, with no overhead and no attention term, transfer time equals prefill
    time for every prompt: kv_bytes_per_token / prefill seconds per token. Slower links take
    longer to move a KV cache than the GPU takes to compute it."""
    return s.shape.kv_bytes_per_token / (s.prefill_per_token_ms() / 1000)


def crossover_prompt(link: str | Link, s: Setup) -> float:
    """The prompt length P* where transfer time equals prefill time; above it the transfer
    takes less time than the prefill (and below it more).

    Solves overhead + k*P = a*P + c*P^2 (k: transfer ms per token). Returns 0.0 when the
    transfer is cheaper at every length, math.inf when it never is.
    """
    k = kv_bytes(1, s.shape) / resolve_link(link).bandwidth * 1000
    a, c, o = s.prefill_per_token_ms(), s.attention_ms_per_token2(), s.overhead_ms
    b = a - k  # prefill's per-token lead over the transfer
    if c == 0.0:
        if b > 0:
            return o / b
        return 0.0 if (b == 0 and o == 0) else math.inf
    # c*P^2 + b*P - o = 0, the positive root (one exists when o > 0 or b < 0)
    if o == 0 and b >= 0:
        return 0.0
    return (-b + math.sqrt(b * b + 4 * c * o)) / (2 * c)


def sweep(prompts: Sequence[float] | np.ndarray, links: Sequence[str | Link], s: Setup) -> pd.DataFrame:
    """Per prompt length and link (its key, or a Link's name): prompt, link, kv_mib, prefill_ms, transfer_ms, ratio
    (transfer / prefill) and ttft_ms (prefill + transfer, nothing overlapped)."""
    p = np.asarray(prompts, dtype=float)
    pre = np.asarray(prefill_time_ms(p, s), dtype=float)
    kv = np.asarray(kv_mib(p, s), dtype=float)
    parts = []
    for link in links:
        tr = np.asarray(transfer_time_ms(p, link, s), dtype=float)
        name = link.name if isinstance(link, Link) else link
        parts.append(pd.DataFrame({"prompt": p.astype(np.int64), "link": name, "kv_mib": kv, "prefill_ms": pre,
                                   "transfer_ms": tr, "ratio": tr / pre, "ttft_ms": pre + tr}))
    cols = ["prompt", "link", "kv_mib", "prefill_ms", "transfer_ms", "ratio", "ttft_ms"]
    return pd.concat(parts, ignore_index=True) if parts else pd.DataFrame(columns=cols)


def prompt_grid(lo: int = 128, hi: int = 131072, per_octave: int = 4,
                include: Sequence[int] = LESSON_PROMPTS) -> np.ndarray:
    """Log-spaced whole prompt lengths from lo to hi, with ``include`` added."""
    n = int(round(math.log2(hi / lo) * per_octave)) + 1
    grid = np.unique(np.round(np.geomspace(lo, hi, n)).astype(np.int64))
    return np.unique(np.concatenate([grid, np.asarray([i for i in include if lo <= i <= hi], dtype=np.int64)]))


def lesson_table(s: Setup = Setup(), prompts: Sequence[int] = LESSON_PROMPTS,
                 links: Sequence[str | Link] = LESSON_LINKS) -> pd.DataFrame:
    """The lesson's printout as a table: one row per prompt; KV MiB, prefill ms and, per link
    (its key, or a Link's name), <link>_ms (transfer) and <link>_ratio (transfer / prefill)."""
    df = sweep(prompts, links, s)
    out = df.drop_duplicates("prompt")[["prompt", "kv_mib", "prefill_ms"]].reset_index(drop=True)
    for link in links:
        name = link.name if isinstance(link, Link) else link
        d = df[df["link"] == name].reset_index(drop=True)
        out[f"{name}_ms"] = d["transfer_ms"]
        out[f"{name}_ratio"] = d["ratio"]
    return out


def crossovers(links: Sequence[str | Link], s: Setup) -> pd.DataFrame:
    """Per link: its rate, transfer ms per 1k tokens, the ratio at the lesson's 1,024 tokens,
    and the crossover prompt length (0: cheaper at every length, inf: never)."""
    rows = []
    for link in links:
        lk = resolve_link(link)
        rows.append({"link": link.name if isinstance(link, Link) else link, "label": lk.name, "gb_per_s": lk.bandwidth / 1e9,
                     "transfer_ms_per_1k": float(transfer_time_ms(1024, lk, s)) - s.overhead_ms,
                     "ratio_at_1k": float(transfer_time_ms(1024, lk, s)) / float(prefill_time_ms(1024, s)),
                     "crossover_prompt": crossover_prompt(lk, s)})
    return pd.DataFrame(rows)


def ratio_vs_bandwidth(gb_per_s: Sequence[float] | np.ndarray, prompts: Sequence[int], s: Setup) -> pd.DataFrame:
    """Transfer / prefill for each link speed (GB/s, one direction) and prompt length: columns
    gb_per_s, prompt, ratio. With the lesson's linear model every prompt gives the same curve,
    crossing 1 at breakeven_bandwidth."""
    bw = np.asarray(gb_per_s, dtype=float)
    rows = []
    for p in prompts:
        pre = float(prefill_time_ms(p, s))
        tr = s.overhead_ms + kv_bytes(p, s.shape) / (bw * 1e9) * 1000
        rows.append(pd.DataFrame({"gb_per_s": bw, "prompt": int(p), "ratio": tr / pre}))
    return pd.concat(rows, ignore_index=True)
