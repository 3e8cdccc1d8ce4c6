"""Requests, seeded workload generators, and the workload JSON of the vLLM oracle.

A workload is a config dict plus a list of requests. Token ids are derived
exactly as the oracle harness (shared/vllm/vllm_trace.py) derives them, so
prefix-cache hits in the simulator land where they landed in real vLLM.

A user's uploaded file is read by sim.inputs.parse_workload, which also checks its config
against the scheduler (a module above this one).
"""
from __future__ import annotations

import random
import zlib
from collections import OrderedDict
from dataclasses import asdict, dataclass, field
from typing import Iterable, Sequence

import numpy as np

from .jsonout import dumps_strict
from .limits import check_workload_doc, load_json

VOCAB_SIZE = 32000
MIN_TOKEN_ID = 10  # ids are drawn from [MIN_TOKEN_ID, VOCAB_SIZE); never the fake EOS (2)
PROMPT_BLOCK_TOKENS = 512  # a prompt_blocks id names this many prompt tokens (Mooncake's block size)

# vLLM's own defaults for the knobs a workload may leave out (the oracle's DEFAULT_CONFIG).
DEFAULT_CONFIG = {
    "num_gpu_blocks": 10000,
    "block_size": 16,
    "max_num_batched_tokens": 8192,
    "max_num_seqs": 256,
    "policy": "fcfs",
    "enable_prefix_caching": False,
    "long_prefill_token_threshold": 0,
    "enable_chunked_prefill": True,
    "max_model_len": None,
    "scheduler_reserve_full_isl": True,
    "watermark": 0.0,
}


@dataclass
class Request:
    id: str
    prompt_len: int
    max_tokens: int
    arrival_step: int = 0
    arrival_time: float | None = None  # in the trace's time unit; None = step-driven arrivals
    tenant: str = "default"
    priority: int = 0
    prompt_seed: int | None = None  # requests sharing a seed share a prompt prefix
    prompt_token_ids: tuple[int, ...] | None = None
    prompt_blocks: tuple[int, ...] | None = None  # ids of 512-token prompt blocks: equal ids, equal tokens
    prompt_text: str | None = None  # the prompt as text, where known (a text-keyed router matches on it)

    def prompt_tokens(self) -> list[int]:
        """The oracle's prompt ids: given ids, else a seeded stream (shared seed -> shared prefix);
        with prompt_blocks, each block's tokens come from its id (see block_prompt_tokens)."""
        if self.prompt_token_ids is not None:
            return list(self.prompt_token_ids)
        if self.prompt_blocks is not None:
            return block_prompt_tokens(self.prompt_blocks, self.prompt_len, self.id)
        seed = self.prompt_seed if self.prompt_seed is not None else (1 << 40) + zlib.crc32(self.id.encode())
        rng = random.Random(seed)
        return [rng.randrange(MIN_TOKEN_ID, VOCAB_SIZE) for _ in range(self.prompt_len)]

    def to_json(self) -> dict:
        d = {"id": self.id, "arrival_step": self.arrival_step, "prompt_len": self.prompt_len,
             "max_tokens": self.max_tokens, "priority": self.priority}
        if self.arrival_time is not None:
            d["arrival_time"] = self.arrival_time
        if self.tenant != "default":
            d["tenant"] = self.tenant
        if self.prompt_seed is not None:
            d["prompt_seed"] = self.prompt_seed
        if self.prompt_token_ids is not None:
            d["prompt_token_ids"] = list(self.prompt_token_ids)
        if self.prompt_blocks is not None:
            d["prompt_blocks"] = list(self.prompt_blocks)
        if self.prompt_text is not None:
            d["prompt_text"] = self.prompt_text
        return d

    @classmethod
    def from_json(cls, d: dict) -> "Request":
        ids = d.get("prompt_token_ids")
        prompt_len = (int(d["prompt_len"]) if "prompt_len" in d else len(ids) if ids is not None
                      else len(d.get("prompt_blocks") or ()) * PROMPT_BLOCK_TOKENS)  # whole blocks, when not said
        if ids is not None and len(ids) != prompt_len:
            raise ValueError(f"request {d.get('id')}: prompt_len {prompt_len} but {len(ids)} prompt_token_ids")
        at = d.get("arrival_time")
        return cls(
            id=str(d["id"]), prompt_len=prompt_len, max_tokens=int(d["max_tokens"]),
            arrival_step=int(d.get("arrival_step", 0)),
            arrival_time=None if at is None else float(at),
            tenant=str(d.get("tenant", "default")), priority=int(d.get("priority", 0)),
            prompt_seed=None if d.get("prompt_seed") is None else int(d["prompt_seed"]),
            prompt_token_ids=None if ids is None else tuple(int(t) for t in ids),
            prompt_blocks=_block_ids(d),
            prompt_text=_text(d),
        )


def _text(d: dict) -> str | None:
    t = d.get("prompt_text")
    if t is not None and not isinstance(t, str):
        raise ValueError(f"request {d.get('id')}: prompt_text must be text")
    return t


def _block_ids(d: dict) -> tuple[int, ...] | None:
    blocks = d.get("prompt_blocks")
    if blocks is None:
        return None
    if not isinstance(blocks, list) or not all(isinstance(b, int) and not isinstance(b, bool) and 0 <= b < 1 << 63
                                               for b in blocks):
        raise ValueError(f"request {d.get('id')}: prompt_blocks must be a list of whole-number block ids, 0 or more")
    return tuple(blocks)


def _mix64(x: np.ndarray) -> np.ndarray:
    """SplitMix64's finalizer on uint64s (wrapping arithmetic): a cheap, well-spread hash."""
    x = (x ^ (x >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
    x = (x ^ (x >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
    return x ^ (x >> np.uint64(31))


_U30, _U27, _U31 = np.uint64(30), np.uint64(27), np.uint64(31)
_C1, _C2 = np.uint64(0xBF58476D1CE4E5B9), np.uint64(0x94D049BB133111EB)
_SPAN = np.uint64(VOCAB_SIZE - MIN_TOKEN_ID)
_LOW = np.uint64(MIN_TOKEN_ID)
_BLOCK_POS = np.arange(PROMPT_BLOCK_TOKENS, dtype=np.uint64)
_POS = np.arange(1 << 16, dtype=np.uint64)   # positions of a request's own tokens (a longer prompt: arange)


def _token_ids(keys: np.ndarray) -> np.ndarray:
    """Token ids (uint64) of hash keys: MIN_TOKEN_ID + _mix64(keys) % (VOCAB_SIZE - MIN_TOKEN_ID),
    in place on `keys` (a fresh array of the caller's): the same values, fewer temporaries."""
    x = keys
    t = x >> _U30
    x ^= t
    x *= _C1
    np.right_shift(x, _U27, out=t)
    x ^= t
    x *= _C2
    np.right_shift(x, _U31, out=t)
    x ^= t
    x %= _SPAN
    x += _LOW
    return x


class _BlockTokens:
    """Prompt block id -> its PROMPT_BLOCK_TOKENS token ids (a list the caller must not change),
    made once and kept for the `capacity` blocks used last (least recently used out first). A
    block's tokens are a pure function of its id, so what is cached never changes a result; the
    ids are shared int objects (a cached block costs its list, ~4 kB). capacity 0: no cache."""

    def __init__(self, capacity: int = 4096):
        self.capacity = capacity
        self.blocks: OrderedDict = OrderedDict()
        self.ints = list(range(VOCAB_SIZE))   # one int object per token id, shared by every cached block

    def lists(self, ids: list) -> list[list[int]]:
        """The token lists of blocks `ids`, the missing ones made in one numpy pass."""
        blocks = self.blocks
        out = [blocks.get(b) for b in ids]
        miss = [b for b, t in zip(ids, out) if t is None]
        if miss:
            miss = list(dict.fromkeys(miss))
            arr = np.asarray(miss, dtype=np.uint64)
            toks = _token_ids((arr[:, None] * np.uint64(PROMPT_BLOCK_TOKENS) + _BLOCK_POS).ravel()).tolist()
            ints = self.ints
            bs = PROMPT_BLOCK_TOKENS
            made = {b: list(map(ints.__getitem__, toks[k * bs:(k + 1) * bs])) for k, b in enumerate(miss)}
            out = [made[b] if t is None else t for b, t in zip(ids, out)]
            if self.capacity > 0:
                for b, t in made.items():
                    blocks[b] = t
        if self.capacity > 0:
            for b in ids:
                blocks.move_to_end(b)
            while len(blocks) > self.capacity:
                blocks.popitem(last=False)
        return out

    def clear(self) -> None:
        self.blocks.clear()


BLOCK_TOKENS = _BlockTokens()


def prompt_block_tokens(block: int) -> list[int]:
    """The token ids of prompt block `block` (cached: do not change the list)."""
    return BLOCK_TOKENS.lists([block])[0]


def own_prompt_seed(req_id: str) -> int:
    """What a request's own tokens (past its prompt blocks) are made from, with their places:
    two requests whose seeds are equal have the same own token at the same place."""
    return zlib.crc32(req_id.encode())


def own_prompt_tokens(req_id: str, start: int, end: int) -> list[int]:
    """Tokens `start`..`end` of a prompt past its blocks: keys of this request alone (top bit
    set, own_prompt_seed (the crc32 of its id) above bit 31, plus the position)."""
    own = np.uint64((1 << 63) | (own_prompt_seed(req_id) << 31))
    pos = _POS[start:end] if end <= len(_POS) else np.arange(start, end, dtype=np.uint64)
    return _token_ids(pos + own).tolist()


def own_prompt_tokens_flat(spans: list[tuple[str, int, int]]) -> tuple[np.ndarray, list[int]]:
    """The ids own_prompt_tokens gives for many (request id, start, end), in one numpy pass: all
    of them end to end in one uint64 array, and each span's length."""
    lens = [max(end - start, 0) for _, start, end in spans]
    base, at = [], 0
    for (rid, start, _), k in zip(spans, lens):   # key of element j (0-based in the flat array): base + j
        base.append((((1 << 63) | (own_prompt_seed(rid) << 31)) + start - at) & _MASK64)
        at += k
    if not at:
        return np.zeros(0, dtype=np.uint64), lens
    keys = np.repeat(np.array(base, dtype=np.uint64), lens)
    keys += _POS[:at] if at <= len(_POS) else np.arange(at, dtype=np.uint64)
    return _token_ids(keys), lens


def own_prompt_tokens_many(spans: list[tuple[str, int, int]]) -> list[list[int]]:
    """own_prompt_tokens for many (request id, start, end) at once: one numpy pass for all."""
    flat, lens = own_prompt_tokens_flat(spans)
    flat = flat.tolist()
    out, at = [], 0
    for k in lens:
        out.append(flat[at:at + k])
        at += k
    return out


_MASK64 = (1 << 64) - 1


def block_prompt_tokens(blocks: Sequence[int], prompt_len: int, req_id: str) -> list[int]:
    """Prompt ids for a request named by block ids: block b's tokens are a hash of (b, position),
    so equal ids give equal tokens wherever they appear (a shared prefix for the prefix cache).
    The last block may be cut short; tokens past the blocks are the request's own. Each block's
    tokens come from BLOCK_TOKENS (made once); only the request's own tokens are made here."""
    used = list(blocks)[: -(-prompt_len // PROMPT_BLOCK_TOKENS)]
    out: list[int] = []
    for t in BLOCK_TOKENS.lists(used):
        out += t
    if len(out) > prompt_len:
        del out[prompt_len:]
    elif len(out) < prompt_len:  # more prompt than blocks
        out += own_prompt_tokens(req_id, len(out), prompt_len)
    return out


def block_prompt_tokens_unmemoized(blocks: Sequence[int], prompt_len: int, req_id: str) -> list[int]:
    """block_prompt_tokens as one numpy pass over the whole prompt, with no cache (the rule's
    reference, for tests)."""
    bs = PROMPT_BLOCK_TOKENS
    ids = np.asarray(list(blocks)[: -(-prompt_len // bs)], dtype=np.uint64)
    keys = (ids[:, None] * np.uint64(bs) + np.arange(bs, dtype=np.uint64)).ravel()[:prompt_len]
    if len(keys) < prompt_len:  # more prompt than blocks: keys of this request alone (top bit set)
        own = np.uint64((1 << 63) | (own_prompt_seed(req_id) << 31))
        keys = np.concatenate([keys, own + np.arange(len(keys), prompt_len, dtype=np.uint64)])
    return (MIN_TOKEN_ID + _mix64(keys) % np.uint64(VOCAB_SIZE - MIN_TOKEN_ID)).astype(np.int64).tolist()


def output_token(req_id: str, index: int) -> int:
    """The oracle's fabricated sample for output position `index`: deterministic, never EOS."""
    return MIN_TOKEN_ID + zlib.crc32(f"{req_id}:{index}".encode()) % (VOCAB_SIZE - MIN_TOKEN_ID)


@dataclass
class Workload:
    requests: list[Request]
    config: dict = field(default_factory=dict)
    name: str = ""

    def to_json(self) -> dict:
        return {"config": dict(self.config), "requests": [r.to_json() for r in self.requests]}

    def dumps(self) -> str:
        return dumps_strict(self.to_json(), indent=1)

    @classmethod
    def from_json(cls, d: dict, name: str = "") -> "Workload":
        if not isinstance(d, dict) or not isinstance(d.get("requests"), list):
            raise ValueError("a workload is a JSON object with a 'requests' list (and an optional 'config')")
        check_workload_doc(d)  # every field's type and range, named in plain words (sim/limits.py)
        reqs = [Request.from_json(r) for r in d["requests"]]
        ids = [r.id for r in reqs]
        if len(set(ids)) != len(ids):
            raise ValueError("duplicate request ids in workload")
        for r in reqs:
            if r.prompt_len < 1 or r.max_tokens < 1:
                raise ValueError(f"request {r.id}: prompt_len and max_tokens must be at least 1")
        return cls(requests=reqs, config=dict(d.get("config") or {}), name=name)

    @classmethod
    def load(cls, path: str) -> "Workload":
        with open(path, "rb") as f:
            return cls.from_json(read_json(f.read()), name=str(path))


# ---------------------------------------------------------------------------
# Seeded generators
# ---------------------------------------------------------------------------

def arrivals(kind: str, n: int, rng: np.random.Generator, *, rate: float = 1.0, every: int = 1,
             burst_size: int = 8, burst_every: int = 50) -> np.ndarray:
    """Arrival steps (ints, non-decreasing) for n requests.

    all: everyone at step 0; fixed: one every `every` steps; poisson: exponential gaps at
    `rate` requests per step; bursts: `burst_size` together every `burst_every` steps.
    """
    if kind == "all":
        return np.zeros(n, dtype=np.int64)
    if kind == "fixed":
        return np.arange(n, dtype=np.int64) * int(every)
    if kind == "poisson":
        return np.floor(np.cumsum(rng.exponential(1.0 / rate, size=n))).astype(np.int64)
    if kind == "bursts":
        return (np.arange(n) // int(burst_size)).astype(np.int64) * int(burst_every)
    raise ValueError(f"unknown arrival process {kind!r} (all, fixed, poisson, bursts)")


def lengths(spec: dict | int, n: int, rng: np.random.Generator) -> np.ndarray:
    """Integer lengths >= 1 from a spec: an int (fixed) or {"dist": ...}.

    fixed {value}; uniform {low, high} inclusive; lognormal {median, sigma, max};
    mixture {parts: [spec...], weights: [...]}.
    """
    if isinstance(spec, (int, np.integer)):
        return np.full(n, int(spec), dtype=np.int64)
    dist = spec.get("dist", "fixed")
    if dist == "fixed":
        out = np.full(n, int(spec["value"]))
    elif dist == "uniform":
        out = rng.integers(int(spec["low"]), int(spec["high"]) + 1, size=n)
    elif dist == "lognormal":
        out = np.round(rng.lognormal(np.log(float(spec["median"])), float(spec.get("sigma", 1.0)), size=n))
        if "max" in spec:
            out = np.minimum(out, int(spec["max"]))
    elif dist == "mixture":
        parts = spec["parts"]
        w = np.asarray(spec.get("weights", [1] * len(parts)), dtype=float)
        pick = rng.choice(len(parts), size=n, p=w / w.sum())
        out = np.zeros(n, dtype=np.int64)
        for i, part in enumerate(parts):  # draw every part for all n so the stream does not depend on `pick`
            out = np.where(pick == i, lengths(part, n, rng), out)
    else:
        raise ValueError(f"unknown length distribution {dist!r}")
    return np.maximum(np.asarray(out, dtype=np.int64), 1)


def generate(n: int, *, seed: int = 0, arrival: str = "all", prompt: dict | int = 64,
             output: dict | int = 32, tenants: dict[str, float] | None = None,
             priorities: Sequence[int] | None = None, shared_prefix_groups: int = 0,
             config: dict | None = None, id_prefix: str = "r", **arrival_kw) -> Workload:
    """A seeded synthetic workload. Same arguments -> the same workload, always."""
    rng = np.random.default_rng(seed)
    steps = arrivals(arrival, n, rng, **arrival_kw)
    p_len = lengths(prompt, n, rng)
    o_len = lengths(output, n, rng)
    names, weights = zip(*(tenants or {"default": 1.0}).items())
    w = np.asarray(weights, dtype=float)
    tenant_idx = rng.choice(len(names), size=n, p=w / w.sum())
    prio = rng.choice(np.asarray(priorities), size=n) if priorities else np.zeros(n, dtype=np.int64)
    groups = rng.integers(0, shared_prefix_groups, size=n) if shared_prefix_groups else None
    width = max(4, len(str(n - 1)))
    reqs = [
        Request(id=f"{id_prefix}{i:0{width}d}", prompt_len=int(p_len[i]), max_tokens=int(o_len[i]),
                arrival_step=int(steps[i]), tenant=str(names[tenant_idx[i]]), priority=int(prio[i]),
                prompt_seed=None if groups is None else 1000 + int(groups[i]))
        for i in range(n)
    ]
    return Workload(requests=reqs, config=dict(config or {}))


def merged(*parts: Iterable[Request]) -> list[Request]:
    """Concatenate request lists in arrival order (stable: ties keep the given order)."""
    reqs = [r for p in parts for r in p]
    return sorted(reqs, key=lambda r: r.arrival_step)


def read_json(data: bytes):
    """A user's JSON file, decoded; ValueError with a plain message if it is not UTF-8 JSON, too
    big or nested too deep (sim.limits.load_json)."""
    return load_json(data)


def effective_config(config: dict | None) -> dict:
    cfg = dict(DEFAULT_CONFIG)
    cfg.update(config or {})
    return cfg


def request_dict(r: Request) -> dict:
    return asdict(r)
