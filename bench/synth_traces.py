"""Synthetic public request traces in the publishers' formats, from a seed (same seed, same bytes).

    azure_csv(n, seed)       TIMESTAMP,ContextTokens,GeneratedTokens (100 ns timestamps)
    burstgpt_csv(n, seed)    Timestamp,Model,Request tokens,Response tokens,Total tokens,Log Type
    mooncake_jsonl(n, seed)  {"timestamp", "input_length", "output_length", "hash_ids"} per line

Used by bench/bench_public_traces.py (a million rows) and by
tests/fixtures/public_traces/make_fixtures.py (the tests' small files). The numbers are made
up; only the layout follows the real files (sim/public_traces.py names the sources).
"""
from __future__ import annotations

import numpy as np
import pandas as pd

BLOCK = 512  # Mooncake's tokens per hash id


def _lengths(rng, n, median, sigma, hi):
    return np.clip(np.round(rng.lognormal(np.log(median), sigma, n)), 1, hi).astype(np.int64)


def azure_csv(n: int, seed: int = 0, zero_outputs: int = 0) -> bytes:
    """An Azure LLM inference trace: arrivals ~0.2 s apart from 2023-11-16 18:15:46.6805900;
    `zero_outputs` rows (spread out) have 0 generated tokens."""
    rng = np.random.default_rng(seed)
    start = np.datetime64("2023-11-16T18:15:46.680590000", "ns")
    gaps = np.round(rng.exponential(0.2e9, n) / 100) * 100   # the files keep 100 ns digits
    ts = pd.Series(start + np.cumsum(gaps).astype("timedelta64[ns]"))
    frac = (ts.dt.microsecond * 10 + ts.dt.nanosecond // 100).astype(str).str.zfill(7)
    stamp = ts.dt.strftime("%Y-%m-%d %H:%M:%S") + "." + frac
    out = _lengths(rng, n, 120, 1.0, 4000)
    if zero_outputs:
        out[np.linspace(0, n - 1, zero_outputs + 2, dtype=np.int64)[1:-1]] = 0
    df = pd.DataFrame({"TIMESTAMP": stamp, "ContextTokens": _lengths(rng, n, 900, 1.0, 16000),
                       "GeneratedTokens": out})
    return df.to_csv(index=False, lineterminator="\n").encode()


def burstgpt_csv(n: int, seed: int = 0, failures: int = 0) -> bytes:
    """A BurstGPT trace: whole-second timestamps from the first day's midnight, ChatGPT and
    GPT-4, conversation and API logs; `failures` rows (spread out) have 0 response tokens."""
    rng = np.random.default_rng(seed)
    ts = 5 + np.floor(np.cumsum(rng.exponential(2.0, n))).astype(np.int64)
    req = _lengths(rng, n, 600, 1.0, 30000)
    res = _lengths(rng, n, 150, 1.0, 4000)
    if failures:
        res[np.linspace(0, n - 1, failures + 2, dtype=np.int64)[1:-1]] = 0
    df = pd.DataFrame({"Timestamp": ts, "Model": np.where(rng.random(n) < 0.8, "ChatGPT", "GPT-4"),
                       "Request tokens": req, "Response tokens": res, "Total tokens": req + res,
                       "Log Type": np.where(rng.random(n) < 0.7, "Conversation log", "API log")})
    return df.to_csv(index=False, lineterminator="\n").encode()


def mooncake_jsonl(n: int, seed: int = 0, max_blocks: int = 24) -> bytes:
    """A Mooncake trace with the reuse of a chat service: every prompt starts with block 0 (a
    system prompt); about half continue an open conversation, so their hash ids start with that
    conversation's ids and add 1-3 new blocks; the last block is usually partial."""
    rng = np.random.default_rng(seed)
    ts = np.floor(np.cumsum(rng.exponential(300.0, n))).astype(np.int64)
    cont = rng.random(n) < 0.5
    pick = rng.integers(0, 1 << 30, n)
    fresh = rng.integers(1, 4, n)
    tail = rng.integers(1, BLOCK + 1, n)   # tokens in the last block
    out = _lengths(rng, n, 200, 1.0, 2000)
    open_convs: list[list[int]] = []
    next_id = 1
    lines = []
    for i in range(n):   # generating, not parsing: each row depends on the conversations before it
        if cont[i] and open_convs:
            k = int(pick[i] % len(open_convs))
            ids = open_convs[k] + list(range(next_id, next_id + int(fresh[i])))
        else:
            k = None
            ids = [0] + list(range(next_id, next_id + int(fresh[i])))
        next_id += int(fresh[i])
        if len(ids) > max_blocks:   # the conversation ran out of context: it closes
            ids = ids[:max_blocks]
            if k is not None:
                open_convs.pop(k)
        elif k is not None:
            open_convs[k] = ids
        else:
            open_convs.append(ids)
            if len(open_convs) > 64:
                open_convs.pop(0)
        length = (len(ids) - 1) * BLOCK + int(tail[i])
        lines.append(f'{{"timestamp": {ts[i]}, "input_length": {length}, "output_length": {out[i]}, '
                     f'"hash_ids": [{", ".join(map(str, ids))}]}}')
    return ("\n".join(lines) + "\n").encode()
