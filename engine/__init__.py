"""Scheduler Lab's engine: a small decoder-only transformer in plain PyTorch over a paged KV
cache, driven by the simulator's scheduler (sim.scheduler). torch is imported only here.

The names below load on first use (PEP 562), so `engine.config` and `engine.service` can be
imported without torch: the Live engine page draws before torch (about 2 s to import) is loaded.
"""
from __future__ import annotations

import importlib

_WHERE = {"EngineConfig": "config", "ModelConfig": "config", "PRESETS": "config", "preset": "config",
          "EngineResult": "engine", "LLMEngine": "engine", "StepOutput": "engine", "CausalLM": "model",
          "SamplingParams": "sampling", "build_model": "weights"}

__all__ = sorted(_WHERE)


def __getattr__(name: str):
    if name in _WHERE:
        value = getattr(importlib.import_module(f".{_WHERE[name]}", __name__), name)
        globals()[name] = value
        return value
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
