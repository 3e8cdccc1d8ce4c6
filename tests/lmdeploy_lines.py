"""LMDeploy log lines for tests, as its Python logger prints them (lmdeploy/utils.py; the forms in
servers/lmdeploy_log/lines.py)."""
from __future__ import annotations


def py(sec: float, msg: str, lvl: str = "INFO", file: str = "async_engine.py:582") -> str:
    whole, frac = divmod(round(sec * 1000), 1000)
    return f"2026-01-20 05:47:{whole:02d},{frac:03d} - lmdeploy - {lvl} - {file} - {msg}"


def served_log(n: int = 40) -> list[str]:
    """A small LMDeploy run at DEBUG: requests every 0.25 s, each prefilled then decoded in 30-ms
    forwards, ending after its outputs; a stats line every 10 s."""
    lines, t, live = [], 0.0, {}
    for i in range(n):
        arrive = 0.25 * i
        lines.append((arrive, py(arrive, f"session={i + 1}, input_tokens={100 + 7 * i}, max_new_tokens=64, prep=True")))
        live[i + 1] = (arrive, 100 + 7 * i, 20 + i % 10)
    while t < 0.25 * n + 40:
        ready = [k for k, (a, _, _) in live.items() if a <= t]
        if ready:
            lines.append((t, py(t, f"Sending forward inputs: num_tokens={len(ready)}, batch_size={len(ready)}, "
                                   "is_decoding=True", "DEBUG", "engine.py:274")))
            for k in ready:
                a, p, left = live[k]
                if left <= 1:
                    lines.append((t + 0.001, py(t + 0.001, f'session {k} finished, reason "stop", input_tokens {p}, '
                                                           f"output_tokens {20 + (k - 1) % 10}", file="async_engine.py:779")))
                    del live[k]
                else:
                    live[k] = (a, p, left - 1)
        t += 0.03
    for s10 in range(10, int(t), 10):
        lines.append((s10, f"[2026-01-20 05:{47 + s10 // 60:02d}:{s10 % 60:02d} DP0] Avg thr (in/out): 50.0 / 60.0 "
                           "tokens/s, Server (succeeded/failed/routed/waiting): 1 / 0 / 1 / 0, Engine (running/waiting): "
                           "3 / 0, KV cache: 5.0%, "))
    return [x for _, x in sorted(lines, key=lambda p: p[0])]
