"""Weights: deterministic random init from a seed (the default; nothing is ever downloaded),
or a local HF checkpoint directory (config.json + model.safetensors, or shards listed in
model.safetensors.index.json)."""
from __future__ import annotations

import json
import os

import torch

from .config import ModelConfig, PRESETS, preset
from .model import CausalLM

INIT_STD = 0.02


def random_init(model: CausalLM, seed: int) -> CausalLM:
    """Norm weights 1, everything else N(0, 0.02), drawn in float32 on the CPU in parameter
    order from one seeded generator: the same seed gives the same weights on every device
    and dtype."""
    g = torch.Generator().manual_seed(int(seed))
    with torch.no_grad():
        for name, p in model.named_parameters():  # a tied LM head is listed once
            if name.endswith("norm.weight"):
                p.fill_(1.0)
            else:
                p.copy_(torch.randn(p.shape, generator=g, dtype=torch.float32) * INIT_STD)
    return model


def read_safetensors(path: str) -> dict[str, torch.Tensor]:
    """Every tensor of a checkpoint directory (one file or an index of shards), on the CPU."""
    from safetensors.torch import load_file
    index = os.path.join(path, "model.safetensors.index.json")
    if os.path.exists(index):
        with open(index) as f:
            files = sorted(set(json.load(f)["weight_map"].values()))
    elif os.path.exists(os.path.join(path, "model.safetensors")):
        files = ["model.safetensors"]
    else:
        raise FileNotFoundError(f"{path}: no model.safetensors or model.safetensors.index.json")
    out: dict[str, torch.Tensor] = {}
    for name in files:
        out.update(load_file(os.path.join(path, name)))
    return out


def load_state(model: CausalLM, state: dict[str, torch.Tensor]) -> CausalLM:
    """Copy an HF state dict in, strictly: every parameter present, nothing unknown (a tied
    LM head may be missing; `lm_head.weight` then is the embedding)."""
    expected = set(model.state_dict())
    if model.config.tie_word_embeddings and "lm_head.weight" not in state:
        state = dict(state, **{"lm_head.weight": state["model.embed_tokens.weight"]})
    missing, unknown = sorted(expected - set(state)), sorted(set(state) - expected)
    if missing or unknown:
        raise ValueError(f"checkpoint does not match the model: missing {missing[:5]}, unknown {unknown[:5]}")
    with torch.no_grad():
        for name, p in model.state_dict().items():
            t = state[name]
            if tuple(t.shape) != tuple(p.shape):
                raise ValueError(f"{name}: checkpoint shape {tuple(t.shape)}, model {tuple(p.shape)}")
            p.copy_(t)
    return model


def build_model(source: str | ModelConfig = "tiny", *, seed: int = 0, dtype: torch.dtype = torch.float32,
                device: str | torch.device = "cpu", max_positions: int | None = None) -> CausalLM:
    """A model from a preset name or ModelConfig (random weights from `seed`) or a checkpoint
    directory. Weights are made in float32 on the CPU, then cast and moved."""
    if isinstance(source, ModelConfig):
        cfg, state = source, None
    elif source in PRESETS:
        cfg, state = preset(source), None
    elif os.path.isdir(source):
        cfg, state = ModelConfig.from_dir(source), read_safetensors(source)
    else:
        raise ValueError(f"model {source!r} is neither a preset ({', '.join(PRESETS)}) nor a directory")
    model = CausalLM(cfg, max_positions)
    if state is None:
        random_init(model, seed)
    else:
        load_state(model, state)
    return model.to(device=device, dtype=dtype).eval()
