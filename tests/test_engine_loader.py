"""Checkpoint loading: random HF models saved to temporary directories (Llama, Qwen2 with q/k/v
bias, Qwen3 with q/k norm, its own head_dim and tied embeddings, a sharded save) load into the
engine's model and give HF's logits. Nothing is downloaded."""
import json
import os

import pytest
import torch
import transformers

from engine import EngineConfig, LLMEngine
from engine.config import ModelConfig
from engine.model import full_forward
from engine.weights import build_model, random_init
from sim.workload import Request, Workload

SMALL = dict(vocab_size=300, hidden_size=64, intermediate_size=96, num_hidden_layers=2, num_attention_heads=4,
             num_key_value_heads=2, max_position_embeddings=256)

CASES = {
    "llama": (transformers.LlamaConfig, transformers.LlamaForCausalLM, {}),
    "llama_bias": (transformers.LlamaConfig, transformers.LlamaForCausalLM, {"attention_bias": True, "mlp_bias": True}),
    "qwen2": (transformers.Qwen2Config, transformers.Qwen2ForCausalLM, {}),
    "qwen3_tied": (transformers.Qwen3Config, transformers.Qwen3ForCausalLM,
                   {"head_dim": 24, "tie_word_embeddings": True}),
}


def _save(tmp_path, name, shard=None):
    cfg_cls, model_cls, extra = CASES[name]
    torch.manual_seed(3)
    hf = model_cls(cfg_cls(**SMALL, **extra)).eval()
    with torch.no_grad():  # HF initialises biases to 0 and norms to 1: make them count
        for n, p in hf.named_parameters():
            if n.endswith("bias"):
                p.normal_(0, 0.05)
            elif "norm" in n:
                p.add_(0.1 * torch.randn_like(p))
    path = str(tmp_path / name)
    hf.save_pretrained(path, **({"max_shard_size": shard} if shard else {}))
    return path


def _check(path, tol=1e-5):
    ref_model = transformers.AutoModelForCausalLM.from_pretrained(path).eval()
    model = build_model(path)
    ids = torch.randint(0, SMALL["vocab_size"], (40,), generator=torch.Generator().manual_seed(0))
    with torch.no_grad():
        ref = ref_model(ids[None]).logits[0]
    assert (full_forward(model, ids) - ref).abs().max().item() <= tol
    return model


@pytest.mark.parametrize("name", list(CASES))
def test_checkpoint_logits_match_hf(tmp_path, name):
    model = _check(_save(tmp_path, name))
    c = model.config
    if name == "qwen2":
        assert c.qkv_bias and not c.attention_bias and model.model.layers[0].self_attn.o_proj.bias is None
    if name == "qwen3_tied":
        assert c.qk_norm and c.head_dim == 24 and c.tie_word_embeddings
        assert model.lm_head.weight.data_ptr() == model.model.embed_tokens.weight.data_ptr()
        from safetensors import safe_open
        with safe_open(os.path.join(tmp_path, name, "model.safetensors"), "pt") as f:
            assert "lm_head.weight" not in f.keys()  # a tied save has no LM head


def test_sharded_checkpoint(tmp_path):
    path = _save(tmp_path, "llama", shard="60KB")
    with open(os.path.join(path, "model.safetensors.index.json")) as f:
        assert len(set(json.load(f)["weight_map"].values())) > 1
    _check(path)


def test_old_style_config_keys(tmp_path):
    """Top-level rope_theta and torch_dtype (pre-5.x files) read the same."""
    path = _save(tmp_path, "llama")
    with open(os.path.join(path, "config.json")) as f:
        c = json.load(f)
    old = dict(c, rope_theta=50000.0, torch_dtype="float32")
    old.pop("rope_parameters")
    old.pop("dtype", None)
    assert ModelConfig.from_hf(old).rope_theta == 50000.0
    assert ModelConfig.from_hf(c).rope_theta == 10000.0


def test_engine_runs_a_checkpoint_dir(tmp_path):
    path = _save(tmp_path, "qwen3_tied")
    eng = LLMEngine(EngineConfig(model=path))
    res = eng.run(Workload([Request("a", 20, 5, prompt_token_ids=tuple(range(20)))]))
    assert len(res.tokens["a"]) == 5


def test_random_init_is_deterministic():
    a, b = build_model("tiny", seed=7), build_model("tiny", seed=7)
    assert all(torch.equal(x, y) for x, y in zip(a.state_dict().values(), b.state_dict().values()))
    c = random_init(build_model("tiny", seed=7), 8)
    assert not torch.equal(c.lm_head.weight, a.lm_head.weight)
    assert 15e6 < a.config.num_params < 25e6
    assert a.config.num_params == sum(p.numel() for p in a.parameters())


def test_m100_preset_size():
    from engine.config import preset
    assert 90e6 < preset("m100").num_params < 140e6


def test_bad_checkpoint_is_refused(tmp_path):
    path = _save(tmp_path, "llama")
    from safetensors.torch import load_file, save_file
    f = os.path.join(path, "model.safetensors")
    sd = load_file(f)
    sd.pop("model.norm.weight")
    save_file(sd, f)
    with pytest.raises(ValueError, match="missing"):
        build_model(path)
