"""Model and engine configuration.

ModelConfig describes a Llama / Qwen2 / Qwen3-shaped decoder and reads an HF config.json
(old and new spellings: top-level rope_theta or transformers 5.x rope_parameters, torch_dtype
or dtype). EngineConfig says where and how to run it.
"""
from __future__ import annotations

import json
import os
from dataclasses import asdict, dataclass, fields, replace


@dataclass(frozen=True)
class ModelConfig:
    arch: str = "llama"  # llama | qwen2 | qwen3 (the parameter shapes differ; names are HF's)
    vocab_size: int = 32000
    hidden_size: int = 256
    intermediate_size: int = 688
    num_layers: int = 4
    num_heads: int = 4
    num_kv_heads: int = 2
    head_dim: int = 64
    rope_theta: float = 10000.0
    rms_norm_eps: float = 1e-6
    max_position_embeddings: int = 4096
    tie_word_embeddings: bool = False
    attention_bias: bool = False  # q/k/v/o bias (Llama, Qwen3 option)
    qkv_bias: bool = False  # q/k/v bias only (Qwen2)
    mlp_bias: bool = False
    qk_norm: bool = False  # per-head RMSNorm on q and k before RoPE (Qwen3)
    eos_token_id: int | None = None

    @property
    def num_params(self) -> int:
        h, f, v, d = self.hidden_size, self.intermediate_size, self.vocab_size, self.head_dim
        attn = h * d * (2 * self.num_heads + 2 * self.num_kv_heads)
        per_layer = attn + 3 * h * f + 2 * h
        return v * h * (1 if self.tie_word_embeddings else 2) + self.num_layers * per_layer + h

    def kv_bytes_per_token(self, bytes_per_elem: int) -> int:
        return 2 * self.num_layers * self.num_kv_heads * self.head_dim * bytes_per_elem

    def to_dict(self) -> dict:
        return asdict(self)

    @classmethod
    def from_hf(cls, c: dict) -> "ModelConfig":
        """From an HF config.json dict (LlamaConfig, Qwen2Config, Qwen3Config, MistralConfig)."""
        mt = c.get("model_type", "llama")
        arch = {"qwen2": "qwen2", "qwen3": "qwen3"}.get(mt, "llama")
        if mt not in ("llama", "qwen2", "qwen3", "mistral"):
            raise ValueError(f"unsupported model_type {mt!r} (llama, qwen2, qwen3, mistral)")
        act = c.get("hidden_act", "silu")
        if act not in ("silu", "swish"):
            raise ValueError(f"unsupported hidden_act {act!r} (SwiGLU with silu only)")
        rope = c.get("rope_parameters") or c.get("rope_scaling") or {}
        if rope.get("rope_type", rope.get("type", "default")) not in ("default", None):
            raise ValueError(f"unsupported rope type {rope.get('rope_type', rope.get('type'))!r}")
        theta = c.get("rope_theta") or rope.get("rope_theta") or 10000.0
        if c.get("use_sliding_window") and c.get("sliding_window"):
            raise ValueError("sliding-window attention is not supported")
        heads = int(c["num_attention_heads"])
        eos = c.get("eos_token_id")
        if isinstance(eos, list):
            eos = eos[0] if eos else None
        return cls(
            arch=arch, vocab_size=int(c["vocab_size"]), hidden_size=int(c["hidden_size"]),
            intermediate_size=int(c["intermediate_size"]), num_layers=int(c["num_hidden_layers"]),
            num_heads=heads, num_kv_heads=int(c.get("num_key_value_heads") or heads),
            head_dim=int(c.get("head_dim") or c["hidden_size"] // heads), rope_theta=float(theta),
            rms_norm_eps=float(c.get("rms_norm_eps", 1e-6)),
            max_position_embeddings=int(c.get("max_position_embeddings", 4096)),
            tie_word_embeddings=bool(c.get("tie_word_embeddings", False)),
            attention_bias=arch != "qwen2" and bool(c.get("attention_bias", False)),
            qkv_bias=arch == "qwen2", mlp_bias=bool(c.get("mlp_bias", False)), qk_norm=arch == "qwen3",
            eos_token_id=None if eos is None else int(eos),
        )

    @classmethod
    def from_dir(cls, path: str) -> "ModelConfig":
        with open(os.path.join(path, "config.json")) as f:
            return cls.from_hf(json.load(f))


# Built-in shapes for random-weight runs (nothing is downloaded). vocab 32000 matches the
# token ids sim.workload draws.
PRESETS: dict[str, ModelConfig] = {
    # ~19M parameters (8M of them the LM head): 6-30 ms steps on one CPU core
    "tiny": ModelConfig(),
    # ~125M parameters: 35-330 ms steps on one CPU core
    "m100": ModelConfig(hidden_size=768, intermediate_size=2048, num_layers=12, num_heads=12, num_kv_heads=4,
                        head_dim=64),
}


def preset(name: str, **overrides) -> ModelConfig:
    try:
        return replace(PRESETS[name], **overrides)
    except KeyError:
        raise ValueError(f"unknown model preset {name!r}; known: {', '.join(PRESETS)}") from None


@dataclass
class EngineConfig:
    model: str = "tiny"  # a preset name or a local checkpoint directory (config.json + safetensors)
    seed: int = 0  # random weights (when `model` is a preset) and default sampling seed
    device: str = "auto"  # auto: cuda when present, else cpu
    dtype: str = "auto"  # auto: float32 on cpu, bfloat16 on cuda (float16 where bf16 is missing)
    threads: int = 0  # torch threads on cpu; 0 = 1 on machines with <= 2 cores, else torch's default
    ignore_eos: bool = False
    # gather: copy each request's blocks, then SDPA; flex: FlexAttention reading the block table in
    # place (compiled on CUDA), used only if its self-test agrees with gather at start
    attention: str = "gather"
    temperature: float = 0.0  # default sampling (0 = greedy); requests may bring their own
    top_k: int = 0
    top_p: float = 1.0

    @classmethod
    def from_dict(cls, d: dict | None) -> "EngineConfig":
        known = {f.name for f in fields(cls)}
        unknown = sorted(set(d or {}) - known)
        if unknown:
            raise ValueError(f"unknown engine config keys: {', '.join(unknown)}")
        return cls(**(d or {}))

    def to_dict(self) -> dict:
        return asdict(self)
