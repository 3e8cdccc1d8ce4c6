"""A decoder-only transformer (Llama / Qwen2 / Qwen3 shapes) on flat token batches.

Tokens of every request in a step are one flat batch [T]; attention is the only place where
requests are told apart, and the model leaves it to an `attend(layer, q, k, v)` callable
(engine/attention.py: paged; `causal_attention` below: one contiguous sequence, for
reference). Parameter names are HF's (`model.layers.0.self_attn.q_proj.weight`, ...), so an
HF state dict loads one to one. Numerics follow HF's op order (RMSNorm in float32, RoPE
tables computed in float32) so the same weights give the same logits.
"""
from __future__ import annotations

from typing import Callable

import torch
import torch.nn.functional as F
from torch import nn

from .config import ModelConfig

Attend = Callable[[int, torch.Tensor, torch.Tensor, torch.Tensor], torch.Tensor]


class RMSNorm(nn.Module):
    def __init__(self, dim: int, eps: float):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(dim))
        self.eps = eps

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        dtype = x.dtype
        x = x.to(torch.float32)  # as HF does, whatever the model dtype
        x = x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.eps)
        return self.weight * x.to(dtype)


class Rope(nn.Module):
    """cos/sin tables [max_pos, head_dim], computed in float32 like HF's default RoPE."""

    def __init__(self, head_dim: int, theta: float, max_pos: int):
        super().__init__()
        inv_freq = 1.0 / (theta ** (torch.arange(0, head_dim, 2, dtype=torch.float) / head_dim))
        freqs = torch.arange(max_pos, dtype=torch.float)[:, None] * inv_freq
        emb = torch.cat((freqs, freqs), dim=-1)
        self.register_buffer("cos", emb.cos(), persistent=False)
        self.register_buffer("sin", emb.sin(), persistent=False)

    def forward(self, positions: torch.Tensor, dtype: torch.dtype) -> tuple[torch.Tensor, torch.Tensor]:
        cos = self.cos.index_select(0, positions).to(dtype)
        sin = self.sin.index_select(0, positions).to(dtype)
        return cos[:, None, :], sin[:, None, :]  # broadcast over heads


def rotate_half(x: torch.Tensor) -> torch.Tensor:
    half = x.shape[-1] // 2
    return torch.cat((-x[..., half:], x[..., :half]), dim=-1)


class Attention(nn.Module):
    def __init__(self, c: ModelConfig, layer: int):
        super().__init__()
        self.layer = layer
        self.num_heads, self.num_kv_heads, self.head_dim = c.num_heads, c.num_kv_heads, c.head_dim
        qkv_bias = c.attention_bias or c.qkv_bias
        self.q_proj = nn.Linear(c.hidden_size, c.num_heads * c.head_dim, bias=qkv_bias)
        self.k_proj = nn.Linear(c.hidden_size, c.num_kv_heads * c.head_dim, bias=qkv_bias)
        self.v_proj = nn.Linear(c.hidden_size, c.num_kv_heads * c.head_dim, bias=qkv_bias)
        self.o_proj = nn.Linear(c.num_heads * c.head_dim, c.hidden_size, bias=c.attention_bias)
        if c.qk_norm:
            self.q_norm = RMSNorm(c.head_dim, c.rms_norm_eps)
            self.k_norm = RMSNorm(c.head_dim, c.rms_norm_eps)
        else:
            self.q_norm = self.k_norm = None

    def forward(self, x, cos, sin, attend: Attend) -> torch.Tensor:
        t = x.shape[0]
        q = self.q_proj(x).view(t, self.num_heads, self.head_dim)
        k = self.k_proj(x).view(t, self.num_kv_heads, self.head_dim)
        v = self.v_proj(x).view(t, self.num_kv_heads, self.head_dim)
        if self.q_norm is not None:
            q, k = self.q_norm(q), self.k_norm(k)
        q = q * cos + rotate_half(q) * sin
        k = k * cos + rotate_half(k) * sin
        out = attend(self.layer, q, k, v)  # [t, heads, head_dim]
        return self.o_proj(out.reshape(t, self.num_heads * self.head_dim))


class MLP(nn.Module):
    def __init__(self, c: ModelConfig):
        super().__init__()
        self.gate_proj = nn.Linear(c.hidden_size, c.intermediate_size, bias=c.mlp_bias)
        self.up_proj = nn.Linear(c.hidden_size, c.intermediate_size, bias=c.mlp_bias)
        self.down_proj = nn.Linear(c.intermediate_size, c.hidden_size, bias=c.mlp_bias)

    def forward(self, x):
        return self.down_proj(F.silu(self.gate_proj(x)) * self.up_proj(x))


class DecoderLayer(nn.Module):
    def __init__(self, c: ModelConfig, layer: int):
        super().__init__()
        self.self_attn = Attention(c, layer)
        self.mlp = MLP(c)
        self.input_layernorm = RMSNorm(c.hidden_size, c.rms_norm_eps)
        self.post_attention_layernorm = RMSNorm(c.hidden_size, c.rms_norm_eps)

    def forward(self, x, cos, sin, attend: Attend):
        x = x + self.self_attn(self.input_layernorm(x), cos, sin, attend)
        return x + self.mlp(self.post_attention_layernorm(x))


class Backbone(nn.Module):
    """HF's `model.` prefix: embeddings, layers, final norm."""

    def __init__(self, c: ModelConfig):
        super().__init__()
        self.embed_tokens = nn.Embedding(c.vocab_size, c.hidden_size)
        self.layers = nn.ModuleList(DecoderLayer(c, i) for i in range(c.num_layers))
        self.norm = RMSNorm(c.hidden_size, c.rms_norm_eps)


class CausalLM(nn.Module):
    def __init__(self, config: ModelConfig, max_positions: int | None = None):
        super().__init__()
        self.config = config
        self.model = Backbone(config)
        self.lm_head = nn.Linear(config.hidden_size, config.vocab_size, bias=False)
        if config.tie_word_embeddings:
            self.lm_head.weight = self.model.embed_tokens.weight
        self.rope = Rope(config.head_dim, config.rope_theta, max_positions or config.max_position_embeddings)

    @torch.inference_mode()
    def forward(self, input_ids: torch.Tensor, positions: torch.Tensor, attend: Attend,
                logits_rows: torch.Tensor | None = None) -> torch.Tensor:
        """input_ids, positions: [T]. Returns logits [len(logits_rows), vocab] (all rows if None):
        the final norm and the LM head run only on the rows that are sampled."""
        h = self.model.embed_tokens(input_ids)
        cos, sin = self.rope(positions, h.dtype)
        for layer in self.model.layers:
            h = layer(h, cos, sin, attend)
        if logits_rows is not None:
            h = h.index_select(0, logits_rows)
        return self.lm_head(self.model.norm(h))


def causal_attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
    """One contiguous sequence, no cache: [T, H, D] -> [T, H, D]."""
    out = F.scaled_dot_product_attention(q.transpose(0, 1)[None], k.transpose(0, 1)[None],
                                         v.transpose(0, 1)[None], is_causal=True, enable_gqa=True)
    return out[0].transpose(0, 1)


def full_forward(model: CausalLM, input_ids: torch.Tensor) -> torch.Tensor:
    """Logits for every position of one sequence (no KV cache): a reference path."""
    positions = torch.arange(input_ids.shape[0], device=input_ids.device)
    return model(input_ids, positions, lambda layer, q, k, v: causal_attention(q, k, v))
