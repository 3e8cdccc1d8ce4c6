"""The vLLM version and async-scheduling controls the scheduler pages share, and the short line
that says which rules a run followed.

    from ui import vllm_mode
    SETTINGS = PageSettings("pb", [..., *vllm_mode.settings("keep_pb_vllm_version", "keep_pb_async")])
    vllm_mode.load(config, "keep_pb_vllm_version", "keep_pb_async")   # a workload's config into the widgets
    vllm_mode.widgets("keep_pb_vllm_version", "keep_pb_async")        # a selectbox and a toggle
    config.update(vllm_mode.config("keep_pb_vllm_version", "keep_pb_async"))
    st.caption(vllm_mode.describe(trace))                             # "vLLM 0.34 rules · async scheduling"

The rules themselves live in sim/versions.py; a combination the simulator refuses (async with
another scheduler, or with swap) is refused by simulate() in one sentence, which
the page shows as it shows any config that cannot run.
"""
from __future__ import annotations

import streamlit as st

from sim.trace import Trace
from sim.scheduler import CONFIG_BOUNDS as BOUNDS
from sim.versions import CHOICE_LABELS, CHOICES, GPU_DEFAULTS, NEWEST, PATCH_LABELS, gpu_blocks, normalize, unchecked

from .labels import SCHEDULER_LABELS, plain
from .state import Setting

VERSION_HELP = ("vllm_version: whose scheduling rules the run follows where vLLM versions differ "
                "(sim/versions.py): 0.8.0-0.8.4 hand each request 64 tokens' worth of blocks more than it "
                "needs, and 0.8.0-0.8.2 also use block 0 and ignore the long-prefill threshold; "
                "0.8 has no priority policy and chunks every prompt, "
                "0.9 and 0.10 keep a priority victim's tokens in its step, 0.10 schedules a request whose last "
                "token is in flight (async), "
                "up to 0.11 a prompt too long for the budget is passed over when chunked prefill is off, "
                "up to 0.18 admission does not check the whole sequence fits, "
                "up to 0.23 a freed block without a cached prefix is not reused first, "
                "up to 0.27 a skipped priority victim makes the running loop pass over the next request, "
                "up to 0.30 the long-prefill threshold cuts a request that is alone too, "
                "up to 0.32 the running phase ends when a request preempts itself, 0.34 ignores the threshold "
                "without chunked prefill.")
ASYNC_HELP = ("async_scheduling: vLLM's AsyncScheduler, the default on GPUs. It plans step n+1 before "
              "step n's tokens are back, so a finished request frees its slot and blocks one step later. "
              "vLLM 0.10-0.34, with the vLLM scheduler and recompute preemption only.")


def settings(version_key: str, async_key: str) -> list[Setting]:
    return [Setting(version_key, NEWEST, str, choices=CHOICES), Setting(async_key, False, bool)]


def load(config: dict, version_key: str, async_key: str) -> None:
    """A workload's config into the two widgets (before they are drawn): its version (the newest
    when it names none; the nearest checked one for a version outside them; the newest for one
    simulate() would refuse) and mode."""
    asked = str(config.get("vllm_version", NEWEST))
    try:
        version = normalize(asked)
        borrowed = unchecked(asked)
    except ValueError:
        version, borrowed = NEWEST, None
    st.session_state[version_key] = version
    # said beside the selectbox while it still holds the borrowed rules (widgets())
    st.session_state[f"{version_key}_borrowed"] = (version, borrowed) if borrowed else None
    st.session_state[async_key] = bool(config.get("async_scheduling", False))


def widgets(version_key: str, async_key: str, container=None) -> None:
    """A version selectbox and an async toggle, side by side (in `container`, default the current one)."""
    box = container or st
    c1, c2 = box.columns([1, 1], vertical_alignment="bottom")
    c1.selectbox("vLLM version", list(CHOICES), key=version_key, help=VERSION_HELP,
                 format_func=lambda v: CHOICE_LABELS.get(v, v))
    c2.toggle("Async scheduling", key=async_key, help=ASYNC_HELP)
    borrowed = st.session_state.get(f"{version_key}_borrowed")
    if borrowed and st.session_state.get(version_key) == borrowed[0]:
        box.caption(plain(borrowed[1]))


def config(version_key: str, async_key: str) -> dict:
    """The two settings as scheduler config keys."""
    ss = st.session_state
    return {"vllm_version": str(ss.get(version_key, NEWEST)), "async_scheduling": bool(ss.get(async_key, False))}


def mode(trace: Trace) -> tuple[str | None, bool]:
    """(the vLLM version whose rules the run followed, or None for a scheduler that is not vLLM's;
    whether it was scheduled async), read off the run itself."""
    cfg = trace.meta.get("config") or {}
    if trace.meta.get("scheduler", "vllm") != "vllm":
        return None, False
    return str(cfg.get("vllm_version", NEWEST)), bool(cfg.get("async_scheduling", False))


def describe(trace: Trace) -> str:
    """One short line: which vLLM's rules the run followed and in which mode."""
    version, is_async = mode(trace)
    version = PATCH_LABELS.get(version, version)   # "0.8.0-0.8.2": the releases those rules are
    if version is None:
        name = SCHEDULER_LABELS.get(trace.meta.get("scheduler"), trace.meta.get("scheduler"))
        return f"{name}: sync scheduling, no vLLM version's rules apply"
    if is_async:
        return (f"vLLM {version} rules · async scheduling (each step is planned before the previous "
                f"step's tokens are back)")
    return f"vLLM {version} rules · sync scheduling"


def short(trace: Trace) -> str:
    """The mode in a few characters, for a title: "vLLM 0.34 async" / "vLLM 0.34 sync" / ""."""
    version, is_async = mode(trace)
    return "" if version is None else f"vLLM {version} {'async' if is_async else 'sync'}"


GPU_PRESET_LABEL = "vLLM 0.34 on a GPU"
GPU_PRESET_HELP = ("What a default vLLM 0.34 deployment on a GPU schedules with: async scheduling on (the "
                   "CUDA default), KV blocks of 64 tokens (FlashAttention's size; 16 before), the vLLM "
                   "scheduler with recompute preemption. The KV blocks are recounted so that they hold "
                   "the same tokens as before.")


def apply_gpu_preset(keys: dict) -> None:
    """An on_click: the widgets named by `keys` (scheduler, version, async, preemption, block_size,
    blocks -> session-state key) set to a default vLLM 0.34 GPU deployment (sim.versions.GPU_DEFAULTS)."""
    ss = st.session_state
    d = GPU_DEFAULTS
    old_size = int(ss.get(keys["block_size"], 16) or 16)
    lo, hi = BOUNDS["num_gpu_blocks"]
    if ss.get(keys["blocks"]) is not None and old_size != d["block_size"]:
        ss[keys["blocks"]] = min(max(gpu_blocks(int(ss[keys["blocks"]]), old_size, d["block_size"]), lo), hi)
    ss[keys["block_size"]] = d["block_size"]
    ss[keys["scheduler"]] = d["scheduler"]
    ss[keys["version"]] = d["vllm_version"]
    ss[keys["async"]] = d["async_scheduling"]
    ss[keys["preemption"]] = d["preemption_mode"]
