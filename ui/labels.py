"""Words and number formats shared by the pages.

    from ui.labels import POLICY_LABELS, SCHEDULER_LABELS, fmt
    st.selectbox("Policy", list(POLICIES), format_func=lambda p: POLICY_LABELS.get(p, p))
    st.metric("Mean TTFT", fmt(m["ttft_mean"]))
"""
from __future__ import annotations

import math

POLICY_LABELS = {"fcfs": "FCFS (vLLM default)", "priority": "Priority (vLLM)", "spf": "Shortest prompt first",
                 "sjf": "Shortest job first", "priority_aging": "Priority with aging",
                 "round_robin": "Round-robin by tenant", "vtc": "Virtual Token Counter (fair share)"}
SCHEDULER_LABELS = {"vllm": "vLLM v1 (continuous batching)", "static": "Static batching (request-level)",
                    "llama_slots": "llama-server slots"}


def fmt(v, unit: str = "", digits: int = 3) -> str:
    """A number for people: 3 significant digits below 1,000, thousands separators, "–" for NaN/None."""
    if v is None or (isinstance(v, float) and math.isnan(v)):
        return "–"
    if isinstance(v, float):
        s = f"{v:,.{digits}g}" if abs(v) < 10 ** digits else f"{v:,.0f}"
    else:
        s = f"{v:,}"
    return f"{s} {unit}".strip()
