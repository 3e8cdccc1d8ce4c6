"""text-generation-inference router lines for tests, as router/src/server.rs prints them (the forms
in servers/tgi_log/lines.py): a request's `Success` line with its span's times, in text or JSON."""
from __future__ import annotations

PARAMS = ("GenerateParameters {{ best_of: None, temperature: None, repetition_penalty: None, frequency_penalty: None, "
          "top_k: None, top_p: None, typical_p: None, do_sample: false, max_new_tokens: Some({m}), return_full_text: "
          "None, stop: [], truncate: None, watermark: false, details: false, decoder_input_details: false, seed: None, "
          "top_n_tokens: None, grammar: None, adapter_id: None }}")


def dur(ms: float) -> str:
    """A Duration as Rust's Debug prints it: the largest unit that fits, no trailing zeros."""
    ns = round(ms * 1e6)
    for unit, size in (("s", 10**9), ("ms", 10**6), ("µs", 10**3)):
        if ns >= size:
            whole, frac = divmod(ns, size)
            digits = str(frac).rjust(len(str(size)) - 1, "0").rstrip("0")
            return f"{whole}.{digits}{unit}" if digits else f"{whole}{unit}"
    return f"{ns}ns"


def stamp(t: float) -> str:
    """tracing's UTC timestamp, t seconds after 2025-03-14 08:00:00."""
    s = 8 * 3600 + t
    h, rem = divmod(s, 3600)
    m, sec = divmod(rem, 60)
    return f"2025-03-14T{int(h):02d}:{int(m):02d}:{sec:09.6f}Z"


def success(end: float, *, total: float, validation: float, queue: float, tokens: int, max_new: int = 512,
            route: str = "generate", json_form: bool = False) -> str:
    """The line of a request that ended `end` s after the origin, its times in ms."""
    inference = total - validation - queue
    fields = {"total_time": dur(total), "validation_time": dur(validation), "queue_time": dur(queue),
              "inference_time": dur(inference), "time_per_token": dur(inference / tokens), "seed": "None"}
    if json_form:
        import json
        return json.dumps({"timestamp": stamp(end), "level": "INFO", "message": "Success",
                           "target": "text_generation_router::server", "filename": "router/src/server.rs",
                           "line_number": 432, "span": {"parameters": PARAMS.format(m=max_new), **fields, "name": route},
                           "spans": [{"name": route}]}, ensure_ascii=False)
    params = f"parameters={PARAMS.format(m=max_new)} " if route != "chat_completions" else ""
    body = " ".join(f'{k}="{v}"' for k, v in fields.items())
    return (f"{stamp(end)}  INFO {route}{{{params}{body}}}: text_generation_router::server: "
            f"router/src/server.rs:432: Success")
