"""TensorRT-LLM iteration lines for tests, as the PyTorch executor prints them in each era
(tensorrt_llm/_torch/pyexecutor/py_executor.py; the forms in servers/trtllm_log/lines.py)."""
from __future__ import annotations


def line(it, *, rank=0, sec=0, ctx=(0, 0), gen=0, sched=None, fetched=(0, 0), host=10.0, dev="N/A", form="2025b",
         kv=None, cached=None, tags=""):
    """An iteration line as the executor prints it, in one of its eras."""
    ts = f"2025-08-20 10:00:{sec:02d}"
    pre = f"[08/20/2025-10:00:{sec:02d}] [TRT-LLM]{tags} [I] "
    head = f"iter = {it}, global_rank = {rank}, rank = {rank}, "
    states = f"{{'num_ctx_requests': {ctx[0]}, 'num_ctx_tokens': {ctx[1]}, 'num_generation_tokens': {gen}"
    states += (f", 'cached_kv_tokens': {cached}}}" if cached is not None else "}")
    cur = f"currank_total_requests = {fetched[0]}/{fetched[1]}, "
    if form == "2025a":
        body = (cur + f"elapsed_time = {host / 1000}s, timestamp = {ts}, "
                + (f"num_scheduled_requests: {sched}, " if sched is not None else ""))
    elif form == "2025b":
        body = (cur + f"host_step_time = {host}ms, prev_device_step_time = {dev}, timestamp = {ts}, "
                f"num_scheduled_requests: {sched}, ")
    else:   # 2026
        body = (f"num_scheduled_requests = {sched}, adp_dummy_ctx_tokens = 0, adp_dummy_gen_tokens = 0, "
                f"kv_cache_util = {kv if kv is not None else 'N/A'}, " + cur
                + f"host_step_time = {host}ms, prev_device_step_time = {dev}, timestamp = {ts}, ")
    return pre + head + body + "states = " + states


def iteration_log(n: int, seed: int = 0) -> str:
    """n iteration lines of one rank (2026 form): a prompt every 7th step, 4-12 decoding requests,
    the fetched count rising with the prompts, KV use growing and falling."""
    out = []
    fetched = 0
    for i in range(1, n + 1):
        ctx = (1, 128 + (i * 37 + seed) % 900) if i % 7 == 1 else (0, 0)
        fetched += ctx[0]
        gen = 4 + (i + seed) % 9
        out.append(line(i, sec=min(i // 20, 59), ctx=ctx, gen=gen, sched=gen + ctx[0], fetched=(0, fetched),
                        host=8.0 + ctx[1] / 50, dev=f"{7.5 + ctx[1] / 60:.3f}ms" if i > 1 else "N/A", form="2026",
                        kv=round(0.1 + 0.8 * ((i % 50) / 50), 3)))
    return "\n".join(out) + "\n"
