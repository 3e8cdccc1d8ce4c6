"""Scheduler Lab's engine: a small decoder-only transformer in plain PyTorch over a paged KV
cache, driven by the simulator's scheduler (sim.scheduler). torch is imported only here."""
from .config import EngineConfig, ModelConfig, PRESETS, preset
from .engine import EngineResult, LLMEngine, StepOutput
from .model import CausalLM
from .sampling import SamplingParams
from .weights import build_model

__all__ = ["CausalLM", "EngineConfig", "EngineResult", "LLMEngine", "ModelConfig", "PRESETS", "SamplingParams",
           "StepOutput", "build_model", "preset"]
