"""Send a workload to an OpenAI-compatible server, open loop, and time each request at the client.

    results = send(url, model, requests)   # requests: dicts with id, prompt (token ids or text),
                                           #   max_tokens, at_ms (send time after the start),
                                           #   optional priority, request_id

Each request is a streamed /v1/completions call with its prompt as token ids (or as text: a
router that routes on the text needs it) and `ignore_eos`, so it makes exactly max_tokens
tokens; one thread per request in flight. A request_id goes in the body and in the
X-Request-Id header, which vLLM prefers and a router passes on: the recording's id is then
`cmpl-<request_id>-0-<suffix>`. The result per request: the client's send time (ms since the
start, and Unix seconds to set beside a recording's clock), its time to the first token and to
the last, the tokens (the server's count in the stream's last, usage event; the events that
carried text where there is none: vLLM puts several tokens in one event when it is behind, so
events undercount), the HTTP status, and an error if any. Standard library only: it runs in
vLLM's venv and in the project's alike.
"""
from __future__ import annotations

import json
import threading
import time
import urllib.error
import urllib.request


def _one(url: str, model: str, req: dict, t0: float, out: dict) -> None:
    prompt = req["prompt"] if isinstance(req["prompt"], str) else list(req["prompt"])
    body = {"model": model, "prompt": prompt, "max_tokens": int(req["max_tokens"]),
            "ignore_eos": True, "stream": True, "temperature": 0.0, "stream_options": {"include_usage": True}}
    if "priority" in req:
        body["priority"] = int(req["priority"])
    headers = {"Content-Type": "application/json"}
    if "request_id" in req:
        body["request_id"] = headers["X-Request-Id"] = str(req["request_id"])
    data = json.dumps(body).encode()
    res = {"id": req["id"], "sent_ms": None, "sent_unix": None, "ttft_ms": None, "e2e_ms": None, "tokens": 0,
           "events": 0, "status": None, "error": None}
    first = usage = None
    try:
        http = urllib.request.Request(url.rstrip("/") + "/v1/completions", data=data, headers=headers)
        res["sent_unix"] = time.time()
        sent = time.perf_counter()
        res["sent_ms"] = (sent - t0) * 1000.0
        with urllib.request.urlopen(http, timeout=600) as resp:
            res["status"] = resp.status
            for raw in resp:
                line = raw.strip()
                if not line.startswith(b"data:") or line == b"data: [DONE]":
                    continue
                chunk = json.loads(line[5:])
                if isinstance(chunk.get("usage"), dict) and chunk["usage"].get("completion_tokens") is not None:
                    usage = int(chunk["usage"]["completion_tokens"])
                text = chunk["choices"][0].get("text") if chunk.get("choices") else None
                if text is None:
                    continue
                now = time.perf_counter()
                if first is None:
                    first = now
                res["events"] += 1
        done = time.perf_counter()
        res["tokens"] = res["events"] if usage is None else usage
        res["ttft_ms"] = None if first is None else (first - sent) * 1000.0
        res["e2e_ms"] = (done - sent) * 1000.0
    except urllib.error.HTTPError as e:   # a router's refusal (sglang-router: 422 for token ids) says why
        res["status"] = e.code
        res["error"] = f"HTTP {e.code}: {e.read()[:300].decode('utf-8', 'replace')}"
    except Exception as e:   # noqa: BLE001 - reported per request
        res["error"] = f"{type(e).__name__}: {e}"
    out[req["id"]] = res


def send(url: str, model: str, requests: list[dict]) -> list[dict]:
    """Send each request at its at_ms (ms after the call), wait for all; results in input order."""
    out: dict = {}
    threads = []
    t0 = time.perf_counter()
    for req in sorted(requests, key=lambda r: r.get("at_ms", 0.0)):
        wait = t0 + req.get("at_ms", 0.0) / 1000.0 - time.perf_counter()
        if wait > 0:
            time.sleep(wait)
        th = threading.Thread(target=_one, args=(url, model, req, t0, out), daemon=True)
        th.start()
        threads.append(th)
    for th in threads:
        th.join()
    return [out[r["id"]] for r in requests]


def wait_ready(url: str, timeout_s: float = 300.0, proc=None) -> None:
    """Until the server answers /health (or its process ends, or the time is up: RuntimeError)."""
    end = time.monotonic() + timeout_s
    while time.monotonic() < end:
        if proc is not None and proc.poll() is not None:
            raise RuntimeError(f"the server exited with status {proc.returncode} before it was ready")
        try:
            with urllib.request.urlopen(url.rstrip("/") + "/health", timeout=2) as r:
                if r.status == 200:
                    return
        except OSError:
            pass
        time.sleep(0.5)
    raise RuntimeError(f"the server at {url} was not ready after {timeout_s:.0f} s")
