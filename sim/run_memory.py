"""What a simulated run's full Trace costs in memory while it is made (its peak over the memory
before the run): the model a server uses to refuse a run it cannot hold, before it holds it.

    run_bytes(steps, batch_rows, kv_rows, requests, prompt_tokens)

Measured with `python bench/bench_window.py --fit` (each run in its own process: its peak resident
memory over the resident memory before `simulate`), on runs that weigh each term differently:
1,000,000 idle steps; 360,033 busy steps of 4 slots with prefix caching; 100,000 and 1,000,000
Poisson requests (52.2M batch rows, 33.4M KV rows); 300,000 three-token requests; 3,000 long
prompts with prefix caching. Each coefficient is rounded up from a least-squares fit of those,
so the model says a little more than a run takes (1,000,000 requests: 3,360 MiB said, 3,118 MiB
measured). What each term is:
- a step: its row of the steps table (18 columns) and its share of the recorder's chunks;
- a batch row (one request in one forward pass): 24 bytes in the table, grown buffers before;
- a KV row (a block acquired or released): 13 bytes in the table;
- a request: its Request, its RequestInfo, its rows of the requests and events tables, its id;
- a prompt token, with prefix caching on: the prompt's token ids (Python ints) and block hashes.
"""
from __future__ import annotations

BYTES_PER_STEP = 320
BYTES_PER_BATCH_ROW = 32
BYTES_PER_KV_ROW = 16
BYTES_PER_REQUEST = 1_160
BYTES_PER_CACHED_PROMPT_TOKEN = 75


def run_bytes(steps: int, batch_rows: int, kv_rows: int, requests: int, prompt_tokens: int = 0) -> int:
    """About how many bytes a run of this size peaks at (prompt_tokens: those made up front for
    prefix caching; 0 with it off)."""
    return (BYTES_PER_STEP * steps + BYTES_PER_BATCH_ROW * batch_rows + BYTES_PER_KV_ROW * kv_rows
            + BYTES_PER_REQUEST * requests + BYTES_PER_CACHED_PROMPT_TOKEN * prompt_tokens)


def steps_within(budget: int) -> int:
    """The most steps a run of no requests could take within `budget` bytes (a run's step cap)."""
    return budget // BYTES_PER_STEP
