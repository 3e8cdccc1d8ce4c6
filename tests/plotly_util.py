"""Helpers for reading Plotly figures out of Streamlit AppTest runs.

plotly>=6 serialises numpy arrays as {"dtype", "bdata" (base64), "shape"}; neither
``json.loads`` nor ``plotly.io.from_json`` decodes that, so use ``decode``.
"""
from __future__ import annotations

import base64
import json
from typing import Any

import numpy as np


def decode(v: Any) -> np.ndarray:
    """Return a trace array (``x``, ``y``, ``z``...) as numpy, whether plain list or bdata."""
    if isinstance(v, dict) and "bdata" in v:
        a = np.frombuffer(base64.b64decode(v["bdata"]), dtype=np.dtype(v["dtype"]))
        if "shape" in v:
            a = a.reshape([int(s) for s in str(v["shape"]).split(",")])
        return a
    return np.asarray(v)


def chart_specs(at) -> dict[str, dict]:
    """{key: figure dict} for every ``st.plotly_chart`` in an AppTest (after ``at.run()``).

    AppTest has no plotly accessor; ``at.get("plotly_chart")`` yields elements whose
    ``proto.spec`` is the figure JSON. Charts without a ``key=`` are named ``"#<index>"``.
    """
    specs: dict[str, dict] = {}
    for i, el in enumerate(at.get("plotly_chart")):
        key = getattr(el, "key", None) or f"#{i}"
        specs[key] = json.loads(el.proto.spec)
    return specs
