"""A random-weight Llama and a word-level tokenizer, made locally, for a real vLLM server to serve.

    .venv-vllm/bin/python servers/vllm/tiny_model.py DIR                 # 2 layers, width 256 (tests)
    .venv-vllm/bin/python servers/vllm/tiny_model.py DIR --layers 8 --width 1024   # ~100M (bench)

Nothing is downloaded: the weights come from a seed, the tokenizer is trained on a made-up word
list. Requests send prompts as token ids with `ignore_eos`, so each makes exactly max_tokens
tokens whatever the weights are. Run it with vLLM's venv (transformers, tokenizers, torch).

The tokenizer is word-level on whitespace: word `w<k>` is token id k + 3 (0-2 are <unk>, <s>,
</s>) and nothing is added around a prompt, so a text prompt of vocabulary words joined by
single spaces is exactly one token per word, and `text(ids)` is the text whose tokens are
`ids`: what a router that matches on the prompt's text (sglang-router) sees of a request
that a recording holds only as token ids.
"""
from __future__ import annotations

import argparse
from pathlib import Path

VOCAB = 4096
SPECIAL = ("<unk>", "<s>", "</s>")


def word(token_id: int) -> str:
    """The tiny model's word for a token id (an id outside the vocabulary: ValueError)."""
    if not 0 <= token_id < VOCAB:
        raise ValueError(f"token id {token_id} is outside the tiny model's vocabulary (0-{VOCAB - 1})")
    return SPECIAL[token_id] if token_id < len(SPECIAL) else f"w{token_id - len(SPECIAL)}"


def text(ids) -> str:
    """The prompt text that the tiny model's tokenizer turns into exactly `ids`."""
    return " ".join(word(int(i)) for i in ids)


def make(out: Path, layers: int = 2, width: int = 256, seed: int = 0, max_len: int = 4096) -> Path:
    import torch
    from tokenizers import Tokenizer, models, pre_tokenizers
    from transformers import LlamaConfig, LlamaForCausalLM, PreTrainedTokenizerFast

    out.mkdir(parents=True, exist_ok=True)
    words = [word(i) for i in range(VOCAB)]
    tok = Tokenizer(models.WordLevel({w: i for i, w in enumerate(words)}, unk_token="<unk>"))
    tok.pre_tokenizer = pre_tokenizers.Whitespace()
    fast = PreTrainedTokenizerFast(tokenizer_object=tok, unk_token="<unk>", bos_token="<s>", eos_token="</s>")
    fast.save_pretrained(out)
    cfg = LlamaConfig(vocab_size=VOCAB, hidden_size=width, intermediate_size=width * 2, num_hidden_layers=layers,
                      num_attention_heads=max(width // 64, 1), num_key_value_heads=max(width // 128, 1),
                      max_position_embeddings=max_len, bos_token_id=1, eos_token_id=2, tie_word_embeddings=True)
    torch.manual_seed(seed)
    model = LlamaForCausalLM(cfg).to(torch.bfloat16)
    model.save_pretrained(out)
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("out", type=Path)
    ap.add_argument("--layers", type=int, default=2)
    ap.add_argument("--width", type=int, default=256)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--max-len", type=int, default=4096)
    a = ap.parse_args()
    print(make(a.out, a.layers, a.width, a.seed, a.max_len))


if __name__ == "__main__":
    main()
