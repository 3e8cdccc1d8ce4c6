"""Seeded, synthetic SGLang and vLLM server logs of any size, in the forms the readers accept
(servers/sglang_log, servers/vllm_log), for timing the readers (bench/bench_server_logs.py).

    .venv/bin/python bench/gen_server_logs.py sglang OUT.log [--mb 100] [--seed 1] [--era mix]
    .venv/bin/python bench/gen_server_logs.py vllm OUT.log [--mb 100] [--seed 1] [--era mix]
    .venv/bin/python bench/gen_server_logs.py trtllm OUT.log [--mb 100] [--seed 1] [--era mix]
    .venv/bin/python bench/gen_server_logs.py tgi OUT.log [--mb 100] [--seed 1] [--era mix]
    .venv/bin/python bench/gen_server_logs.py lmdeploy OUT.log [--mb 100] [--seed 1] [--era mix]
    .venv/bin/python bench/gen_server_logs.py ollama OUT.log [--mb 100] [--seed 1]

The lines come from a small seeded model of a busy server (Poisson arrivals, a queue, a running
batch that prefills and decodes), so the numbers in them hang together (running and queued
counts, KV tokens that grow by the running count each decode step).

SGLang: a line for every decode step (`--decode-log-interval 1`) and one per prefill batch,
uvicorn access lines, a `Receive:` line per request as `--log-requests` prints it (1 in 8);
eras (`--era`): `legacy` (2024-04 `new fill batch.` / bare `#running-req:` lines, `[gpu_id=0]`),
`2024` (`[HH:MM:SS TP0] Prefill batch. ... cache hit rate`), `period` (2025, `[date time TP0]`),
`comma` (late 2025, `[date time DP0 TP0]`, `cuda graph`, `input throughput`); `mix`: a quarter
of the file in each, in that order (one file with several eras; one rank, `TP0`, throughout: the
reader keeps one rank per DP group, so a file whose rank prefix changed would read as two ranks).

vLLM: a stats line every second (`VLLM_LOG_STATS_INTERVAL=1`) and the request lines of every
request (`Received request` with its SamplingParams, `Added request`, uvicorn's access line);
eras: `v0` (`metrics.py:N]` Running / Swapped / Pending, `Received request ...: prompt: '...',
params: ..., prompt_token_ids: [...]`), `v1` (early 2025: `[loggers.py:N]`, no engine label),
`v1engine` (mid 2025 on: `(APIServer pid=1)`, `Engine 000:`, Preemptions, Prefix cache hit rate,
`params: SamplingParams(...)` only); `mix`: a third each. `v1steps` (not in the mix): `v1engine` with
an `Iteration(N): ...` line per step as `--enable-logging-iteration-details` prints it (0.30 on).

TensorRT-LLM (`trtllm`): the PyTorch executor's iteration line per step (`print_iter_log`), eras
`2025a` (elapsed_time, num_scheduled_requests:), `2025b` (host_step_time, prev_device_step_time),
`2026` (num_scheduled_requests =, kv_cache_util, cached_kv_tokens); `mix`: a third each.

LMDeploy (`lmdeploy`): the PyTorch engine at DEBUG: a `Sending forward inputs` line per forward,
each request's start and end lines, a stats line every 10 s; eras `2025` (`Avg prompt throughput`
stats, `session_id=` start lines) and `2026` (`Avg thr (in/out)` stats); `mix`: half each.

Ollama (`ollama`): gin's access line per request (Poisson arrivals, handler times up to minutes,
some /api/tags polls and error statuses), in the order the requests end; era `gin`.

text-generation-inference (`tgi`): the router's `Success` line per request (Poisson arrivals,
queue and inference times, the tokens they imply), in the order the requests end; eras `text`
and `json` (`--json-output`); `mix`: half each.
"""
from __future__ import annotations

import argparse
import random
from pathlib import Path

SG_ERAS = ("legacy", "2024", "period", "comma")
VL_ERAS = ("v0", "v1", "v1engine")
TR_ERAS = ("2025a", "2025b", "2026")
TG_ERAS = ("text", "json")
LM_ERAS = ("2025", "2026")
OL_ERAS = ("gin",)
DAY0 = (2025, 3, 14)


def _clock(t: float) -> tuple[str, str, str]:
    """(date YYYY-MM-DD, month-day MM-DD, HH:MM:SS) of t seconds after DAY0 08:00:00."""
    s = int(t) + 8 * 3600
    d, s = divmod(s, 86400)
    day = DAY0[2] + d          # the generated spans stay inside March
    return f"{DAY0[0]}-{DAY0[1]:02d}-{day:02d}", f"{DAY0[1]:02d}-{day:02d}", f"{s // 3600:02d}:{s // 60 % 60:02d}:{s % 60:02d}"


class Server:
    """A busy server's batches: each step() is one scheduler step (a prefill batch when requests
    wait and there is room, else a decode step) with the state after it."""

    def __init__(self, rng: random.Random, step_s: float = 0.03, rate: float = 6.0, max_running: int = 48,
                 pool_tokens: int = 200_000) -> None:
        self.rng, self.step_s, self.rate = rng, step_s, rate
        self.max_running, self.pool = max_running, pool_tokens
        self.t = 0.0
        self.next_arrival = 0.0
        self.queue: list[list[int]] = []     # [id, prompt, output]
        self.running: list[list[int]] = []   # [id, tokens held, left to generate]
        self.nid = 0
        self.arrived: list[tuple[int, int, int]] = []    # (id, prompt, max_tokens) since the last take
        self.finished: list[int] = []

    def step(self) -> dict:
        rng = self.rng
        while self.next_arrival <= self.t:
            p, o = rng.randint(64, 3000), rng.randint(16, 600)
            self.queue.append([self.nid, p, o])
            self.arrived.append((self.nid, p, o))
            self.nid += 1
            self.next_arrival += rng.expovariate(self.rate * (0.5 + (int(self.t / 300) % 3) / 2))
        held = sum(r[1] for r in self.running)
        if self.queue and len(self.running) < self.max_running and held + self.queue[0][1] < self.pool:
            new, tok = [], 0
            while (self.queue and len(self.running) + len(new) < self.max_running and tok < 8192
                   and held + tok + self.queue[0][1] < self.pool):
                q = self.queue.pop(0)
                new.append(q)
                tok += q[1]
            cached = sum(rng.choice((0, 0, q[1] // 4, q[1] // 2)) for q in new)
            for q in new:
                self.running.append([q[0], q[1], q[2]])
            self.t += self.step_s * (1 + tok / 2048)
            return {"kind": "prefill", "t": self.t, "new_seqs": len(new), "new_tokens": tok - cached,
                    "cached": cached, "running": len(self.running) - len(new), "waiting": len(self.queue),
                    "usage": (held + tok) / self.pool}
        for r in self.running:
            r[1] += 1
            r[2] -= 1
        done = [r for r in self.running if r[2] <= 0]
        self.finished += [r[0] for r in done]
        self.running = [r for r in self.running if r[2] > 0]
        n = len(self.running) + len(done)
        self.t += self.step_s if n else rng.expovariate(self.rate)
        held = sum(r[1] for r in self.running)
        return {"kind": "decode", "t": self.t, "running": n, "kv_tokens": held, "waiting": len(self.queue),
                "usage": held / self.pool}


def sglang_lines(era: str, rng: random.Random, srv: Server, mixed: bool = False):
    """SGLang's lines of `era`, for ever. mixed: the legacy lines under the `[date time TP0]` prefix the
    other eras' lines have (one server's rank throughout: the reader keeps one rank per DP group)."""
    legacy = "[gpu_id=0] "
    ranks = " TP0" if mixed else " DP0 TP0"
    while True:
        r = srv.step()
        date, _, hms = _clock(r["t"])
        gen = round(r["running"] / srv.step_s * rng.uniform(0.9, 1.1), 2)
        stamp = hms if era == "2024" else f"{date} {hms}"     # 2024's prefix: time of day only
        for rid, p, _o in srv.arrived:
            if rid % 8 == 0:
                yield (f"[{stamp}] Receive: obj=GenerateReqInput(text=None, input_ids=[{p} ids], "
                       f"sampling_params={{'max_new_tokens': {_o}}}, rid='{rid:032x}')")
        srv.arrived.clear()
        for rid in srv.finished:
            yield f'[{stamp}] INFO:     127.0.0.1:{40000 + rid % 20000} - "POST /generate HTTP/1.1" 200 OK'
        srv.finished.clear()
        u = r["usage"]
        if era == "legacy":
            if mixed:
                legacy = f"[{date} {hms} TP0] "
            if r["kind"] == "prefill":
                hit = 100.0 * r["cached"] / max(r["cached"] + r["new_tokens"], 1)
                yield (f"{legacy}new fill batch. #seq: {r['new_seqs']}. #cached_token: {r['cached']}. "
                       f"#new_token: {r['new_tokens']}. #remaining_req: {r['waiting']}. #running_req: {r['running']}. "
                       f"tree_cache_hit_rate: {hit:.2f}%.")
            else:
                yield (f"{legacy}#running-req: {r['running']}, #token: {r['kv_tokens']}, token usage: {u:.2f}, "
                       f"gen throughput (token/s): {gen:.2f}, #queue-req: {r['waiting']}")
        elif era == "2024":
            if r["kind"] == "prefill":
                hit = 100.0 * r["cached"] / max(r["cached"] + r["new_tokens"], 1)
                yield (f"[{hms} TP0] Prefill batch. #new-seq: {r['new_seqs']}, #new-token: {r['new_tokens']}, "
                       f"#cached-token: {r['cached']}, cache hit rate: {hit:.2f}%, token usage: {u:.2f}, "
                       f"#running-req: {r['running']}, #queue-req: {r['waiting']}")
            else:
                yield (f"[{hms} TP0] Decode batch. #running-req: {r['running']}, #token: {r['kv_tokens']}, "
                       f"token usage: {u:.2f}, gen throughput (token/s): {gen:.2f}, #queue-req: {r['waiting']}")
        elif era == "period":
            if r["kind"] == "prefill":
                yield (f"[{date} {hms} TP0] Prefill batch. #new-seq: {r['new_seqs']}, #new-token: {r['new_tokens']}, "
                       f"#cached-token: {r['cached']}, token usage: {u:.2f}, #running-req: {r['running']}, "
                       f"#queue-req: {r['waiting']}, ")
            else:
                yield (f"[{date} {hms} TP0] Decode batch. #running-req: {r['running']}, #token: {r['kv_tokens']}, "
                       f"token usage: {u:.2f}, cuda graph: True, gen throughput (token/s): {gen:.2f}, "
                       f"#queue-req: {r['waiting']}, ")
        else:
            if r["kind"] == "prefill":
                inp = round((r["new_tokens"]) / srv.step_s * rng.uniform(0.2, 0.4), 2)
                yield (f"[{date} {hms}{ranks}] Prefill batch, #new-seq: {r['new_seqs']}, "
                       f"#new-token: {r['new_tokens']}, #cached-token: {r['cached']}, token usage: {u:.2f}, "
                       f"#running-req: {r['running']}, #queue-req: {r['waiting']}, input throughput (token/s): {inp:.2f}")
            else:
                yield (f"[{date} {hms}{ranks}] Decode batch, #running-req: {r['running']}, #token: {r['kv_tokens']}, "
                       f"token usage: {u:.2f}, cuda graph: True, gen throughput (token/s): {gen:.2f}, "
                       f"#queue-req: {r['waiting']}")


SAMPLING = ("SamplingParams(n=1, presence_penalty=0.0, frequency_penalty=0.0, repetition_penalty=1.0, "
            "temperature=0.7, top_p=1.0, top_k=0, min_p=0.0, seed=None, stop=[], stop_token_ids=[], bad_words=[], "
            "include_stop_str_in_output=False, ignore_eos=False, max_tokens={m}, min_tokens=0, logprobs=None, "
            "prompt_logprobs=None, skip_special_tokens=True, spaces_between_special_tokens=True, "
            "truncate_prompt_tokens=None, guided_decoding=None, extra_args=None)")


def vllm_lines(era: str, rng: random.Random, srv: Server):
    """vLLM's lines of `era` (stats every second), for ever."""
    next_stats = 1.0
    prompt_tok = gen_tok = 0
    pre = "(APIServer pid=1) " if era == "v1engine" else ""
    br = (lambda f: f"{f}]") if era == "v0" else (lambda f: f"[{f}]")
    preempt = 0
    steps = era == "v1steps"
    if steps:
        era = "v1engine"
        pre = "(APIServer pid=1) "
    index = 0
    while True:
        r = srv.step()
        _, md, hms = _clock(r["t"])
        if r["kind"] == "prefill":
            prompt_tok += r["new_tokens"]
        else:
            gen_tok += r["running"]
        if steps and (r["kind"] == "prefill" or r["running"]):
            ctx = (r["new_seqs"], r["new_tokens"]) if r["kind"] == "prefill" else (0, 0)
            gen = (0, 0) if r["kind"] == "prefill" else (r["running"], r["running"])
            yield (f"{pre}INFO {md} {hms} {br('loggers.py:199')} Engine 000: Iteration({index}): {ctx[0]} context "
                   f"requests, {ctx[1]} context tokens, {gen[0]} generation requests, {gen[1]} generation tokens, "
                   f"iteration elapsed time: {rng.uniform(8, 40):.2f} ms, GPU KV cache usage: {100 * r['usage']:.1f}%")
            index += 1
        for rid, p, m in srv.arrived:
            req = f"cmpl-{rid:032x}"
            params = SAMPLING.format(m=m)
            if era == "v0":
                ids = ", ".join(str(rng.randrange(32000)) for _ in range(p))
                yield (f"INFO {md} {hms} {br('logger.py:39')} Received request {req}: prompt: '', params: {params}, "
                       f"prompt_token_ids: [{ids}], lora_request: None, prompt_adapter_request: None.")
                yield f"INFO {md} {hms} {br('engine.py:267')} Added request {req}."
            else:
                yield f"{pre}INFO {md} {hms} {br('logger.py:43')} Received request {req}: params: {params}, lora_request: None."
                yield f"{pre}INFO {md} {hms} {br('async_llm.py:261')} Added request {req}."
        srv.arrived.clear()
        for rid in srv.finished:
            yield f'{pre}INFO:     127.0.0.1:{40000 + rid % 20000} - "POST /v1/completions HTTP/1.1" 200 OK'
        srv.finished.clear()
        while r["t"] >= next_stats:
            run, wait = len(srv.running), len(srv.queue)
            u = 100.0 * r["usage"]
            if era == "v0":
                yield (f"INFO {md} {hms} {br('metrics.py:449')} Avg prompt throughput: {prompt_tok:.1f} tokens/s, "
                       f"Avg generation throughput: {gen_tok:.1f} tokens/s, Running: {run} reqs, Swapped: 0 reqs, "
                       f"Pending: {wait} reqs, GPU KV cache usage: {u:.1f}%, CPU KV cache usage: 0.0%.")
            elif era == "v1":
                yield (f"INFO {md} {hms} {br('loggers.py:116')} Avg prompt throughput: {prompt_tok:.1f} tokens/s, "
                       f"Avg generation throughput: {gen_tok:.1f} tokens/s, Running: {run} reqs, Waiting: {wait} reqs, "
                       f"GPU KV cache usage: {u:.1f}%, Prefix cache hit rate: {rng.uniform(0, 60):.1f}%")
            else:
                preempt += rng.random() < 0.02
                yield (f"{pre}INFO {md} {hms} {br('loggers.py:236')} Engine 000: Avg prompt throughput: "
                       f"{prompt_tok:.1f} tokens/s, Avg generation throughput: {gen_tok:.1f} tokens/s, Running: {run} "
                       f"reqs, Waiting: {wait} reqs, Preemptions: {preempt}, GPU KV cache usage: {u:.1f}%, "
                       f"Prefix cache hit rate: {rng.uniform(0, 60):.1f}%")
            prompt_tok = gen_tok = 0
            next_stats = float(int(r["t"])) + 1.0     # one line a second at most (an idle gap prints none)


def trtllm_lines(era: str, rng: random.Random, srv: Server):
    """TensorRT-LLM's iteration lines of `era`, for ever (one rank; the server's steps)."""
    it = 0
    fetched = 0
    dev = "N/A"
    while True:
        r = srv.step()
        date, _, hms = _clock(r["t"])
        fetched += len(srv.arrived)
        srv.arrived.clear()
        srv.finished.clear()
        if r["kind"] == "decode" and not r["running"]:
            continue          # an idle executor waits for requests: no line
        it += 1
        ctx = (r["new_seqs"], r["new_tokens"]) if r["kind"] == "prefill" else (0, 0)
        gen = r["running"]
        y, mo, d = date.split("-")
        head = f"[{mo}/{d}/{y}-{hms}] [TRT-LLM] [I] iter = {it}, global_rank = 0, rank = 0, "
        states = f"{{'num_ctx_requests': {ctx[0]}, 'num_ctx_tokens': {ctx[1]}, 'num_generation_tokens': {gen}"
        host = rng.uniform(8, 40) + ctx[1] / 100
        cur = f"currank_total_requests = 0/{fetched}, "
        if era == "2025a":
            body = cur + f"elapsed_time = {host / 1000}s, timestamp = {date} {hms}, num_scheduled_requests: {ctx[0] + gen}, "
        elif era == "2025b":
            body = (cur + f"host_step_time = {host}ms, prev_device_step_time = {dev}, timestamp = {date} {hms}, "
                    f"num_scheduled_requests: {ctx[0] + gen}, ")
        else:
            body = (f"num_scheduled_requests = {ctx[0] + gen}, adp_dummy_ctx_tokens = 0, adp_dummy_gen_tokens = 0, "
                    f"kv_cache_util = {r['usage']:.3f}, " + cur + f"host_step_time = {host}ms, prev_device_step_time = "
                    f"{dev}, timestamp = {date} {hms}, ")
            states += f", 'cached_kv_tokens': {r.get('cached', 0)}"
        dev = f"{host * 0.9}ms"
        yield head + body + "states = " + states + "}"


def lmdeploy_lines(era: str, rng: random.Random, srv: Server):
    """LMDeploy's lines of `era` (DEBUG), for ever."""
    next_stats = 10.0
    prompt_tok = gen_tok = 0
    held: dict[int, tuple[int, int]] = {}

    def stamp(t: float, lvl: str, where: str) -> str:
        date, _, hms = _clock(t)
        return f"{date} {hms},{int(t % 1 * 1000):03d} - lmdeploy - {lvl} - {where} - "
    while True:
        r = srv.step()
        for rid, p, m in srv.arrived:
            held[rid] = (p, m)
            key = "session_id" if era == "2025" else "session"
            yield (stamp(r["t"], "INFO", "async_engine.py:582") + f"{key}={rid}, history_tokens=0, input_tokens={p}, "
                   f"max_new_tokens={m}, seq_start=True, seq_end=True, step=0, prep=True")
        srv.arrived.clear()
        if r["kind"] == "prefill":
            prompt_tok += r["new_tokens"]
            yield (stamp(r["t"], "DEBUG", "engine.py:274") + f"Sending forward inputs: num_tokens={r['new_tokens']}, "
                   f"batch_size={r['new_seqs']}, is_decoding=False, has_vision=False")
        elif r["running"]:
            gen_tok += r["running"]
            yield (stamp(r["t"], "DEBUG", "engine.py:274") + f"Sending forward inputs: num_tokens={r['running']}, "
                   f"batch_size={r['running']}, is_decoding=True, has_vision=False")
        for rid in srv.finished:
            p, m = held.pop(rid, (0, 0))
            yield (stamp(r["t"], "INFO", "async_engine.py:779") + f'session {rid} finished, reason "length", '
                   f"input_tokens {p}, output_tokens {m}")
        srv.finished.clear()
        while r["t"] >= next_stats:
            date, _, hms = _clock(r["t"])
            run, wait, u = len(srv.running), len(srv.queue), 100.0 * r["usage"]
            if era == "2025":
                yield (f"[{date} {hms} DP0] Avg prompt throughput: {prompt_tok / 10:.1f} tokens/s, Avg generation "
                       f"throughput: {gen_tok / 10:.1f} tokens/s, Finished: {srv.nid - run - wait} reqs, Unfinished: "
                       f"{run + wait} reqs, Running: {run} reqs, Waiting: {wait} reqs, GPU KV cache usage: {u:.1f}%")
            else:
                yield (f"[{date} {hms} DP0] Avg thr (in/out): {prompt_tok / 10:.1f} / {gen_tok / 10:.1f} tokens/s, "
                       f"Server (succeeded/failed/routed/waiting): {srv.nid - run - wait} / 0 / {run + wait} / 0, "
                       f"Engine (running/waiting): {run} / {wait}, KV cache: {u:.1f}%, ")
            prompt_tok = gen_tok = 0
            next_stats += 10.0


def ollama_lines(era: str, rng: random.Random, srv: Server):
    """Ollama's gin lines, for ever, each when its request ends (a heap of ends)."""
    import heapq
    t = srv.t
    pending: list[tuple[float, int, str]] = []
    n = 0

    def go(ms: float) -> str:   # Go's Duration text
        if ms >= 60e3:
            m, sec = divmod(ms / 1e3, 60)
            return f"{int(m)}m{sec:.9g}s"
        return f"{ms / 1e3:.9g}s" if ms >= 1e3 else f"{ms:.6g}ms" if ms >= 1 else f"{ms * 1e3:.6g}µs"
    while True:
        t += rng.expovariate(srv.rate * 4)
        path, method = rng.choice((("/api/chat", "POST"), ("/api/generate", "POST"), ("/v1/chat/completions", "POST"),
                                   ("/api/tags", "GET")))
        ms = rng.uniform(0.5, 5.0) if method == "GET" else rng.expovariate(1 / 8000.0)
        status = 200 if rng.random() > 0.02 else rng.choice((400, 499, 500))
        end = t + ms / 1e3
        s = int(end) + 8 * 3600
        line = (f"[GIN] 2025/03/{14 + s // 86400:02d} - {s // 3600 % 24:02d}:{s // 60 % 60:02d}:{s % 60:02d} | "
                f"{status} | {go(ms):>13} | {'10.0.0.' + str(n % 250):>15} | {method:<8} \"{path}\"")
        heapq.heappush(pending, (end, n, line))
        n += 1
        while pending and pending[0][0] <= t:
            yield heapq.heappop(pending)[2]


def tgi_lines(era: str, rng: random.Random, srv: Server):
    """TGI's Success lines of `era`, for ever, each when its request ends (a heap of ends)."""
    import heapq
    import json
    t = srv.t
    pending: list[tuple[float, int, str]] = []
    n = 0
    params = ("GenerateParameters {{ best_of: None, temperature: None, do_sample: false, max_new_tokens: Some({m}), "
              "stop: [], truncate: None, seed: None, top_n_tokens: None, grammar: None, adapter_id: None }}")

    def dur(ms: float) -> str:
        return f"{ms / 1e3:.9f}s" if ms >= 1e3 else f"{ms:.6f}ms" if ms >= 1 else f"{ms * 1e3:.3f}µs"
    while True:
        t += rng.expovariate(srv.rate * 4)
        tokens = rng.randint(8, 600)
        val, queue, tpt = rng.uniform(0.3, 3.0), rng.expovariate(1 / 40.0), rng.uniform(12.0, 40.0)
        inf = tokens * tpt
        total = val + queue + inf
        route = rng.choice(("generate", "generate_stream", "chat_completions"))
        end = t + total / 1e3
        s = int(end) + 8 * 3600
        hms = f"{s // 3600 % 24:02d}:{s // 60 % 60:02d}:{s % 60:02d}.{int(end % 1 * 1e6):06d}"
        stamp = f"2025-03-{14 + s // 86400:02d}T{hms}Z"
        times = {"total_time": dur(total), "validation_time": dur(val), "queue_time": dur(queue),
                 "inference_time": dur(inf), "time_per_token": dur(tpt), "seed": "None"}
        if era == "json":
            line = json.dumps({"timestamp": stamp, "level": "INFO", "message": "Success",
                               "target": "text_generation_router::server", "filename": "router/src/server.rs",
                               "line_number": 432, "span": {**times, "name": route}, "spans": [{"name": route}]},
                              ensure_ascii=False)
        else:
            p = "" if route == "chat_completions" else f"parameters={params.format(m=tokens + 64)} "
            line = (f"{stamp}  INFO {route}{{{p}" + " ".join(f'{k}="{v}"' for k, v in times.items())
                    + "}: text_generation_router::server: router/src/server.rs:432: Success")
        heapq.heappush(pending, (end, n, line))
        n += 1
        while pending and pending[0][0] <= t:
            yield heapq.heappop(pending)[2]


def generate(engine: str, out: Path, mb: float = 100.0, seed: int = 1, era: str = "mix") -> int:
    """Write about `mb` MB of `engine`'s log to `out`; the bytes written."""
    rng = random.Random(seed)
    eras = ({"sglang": SG_ERAS, "trtllm": TR_ERAS, "tgi": TG_ERAS, "lmdeploy": LM_ERAS, "ollama": OL_ERAS}.get(engine, VL_ERAS)
            if era == "mix" else (era,))
    target = int(mb * 1e6)
    per = target // len(eras)
    srv = Server(rng)
    n = 0
    with open(out, "w", encoding="utf-8", newline="\n") as f:
        for k, e in enumerate(eras):
            end = per * (k + 1) if k < len(eras) - 1 else target
            buf: list[str] = []
            size = 0
            gen = (sglang_lines(e, rng, srv, len(eras) > 1) if engine == "sglang" else trtllm_lines(e, rng, srv)
                   if engine == "trtllm" else tgi_lines(e, rng, srv) if engine == "tgi" else lmdeploy_lines(e, rng, srv)
                   if engine == "lmdeploy" else ollama_lines(e, rng, srv) if engine == "ollama"
                   else vllm_lines(e, rng, srv))
            for line in gen:
                buf.append(line)
                size += len(line) + 1
                if len(buf) >= 4096:
                    f.write("\n".join(buf) + "\n")
                    buf.clear()
                    if n + size >= end:
                        break
            if buf:
                f.write("\n".join(buf) + "\n")
            n += size
    return n


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("engine", choices=("sglang", "vllm", "trtllm", "tgi", "lmdeploy", "ollama"))
    ap.add_argument("out", type=Path)
    ap.add_argument("--mb", type=float, default=100.0)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--era", default="mix", choices=("mix",) + SG_ERAS + VL_ERAS + ("v1steps",) + TR_ERAS + TG_ERAS + LM_ERAS + OL_ERAS)
    a = ap.parse_args()
    n = generate(a.engine, a.out, a.mb, a.seed, a.era)
    print(f"{a.out}: {n / 1e6:,.1f} MB")


if __name__ == "__main__":
    main()
