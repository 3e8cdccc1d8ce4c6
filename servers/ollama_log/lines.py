"""Ollama's server log lines (`ollama serve`): gin's line per HTTP request, the server's settings
and version, the runner's start-up.

Gin's access line (github.com/gin-gonic/gin, logger.go's default format): `[GIN] 2024/08/19 -
14:13:01 | 404 |     414.019µs |       127.0.0.1 | POST     "/api/chat"`: when the response ended
(local time, to the second), its status, the handler's time (Go's Duration: `29m59s`,
`4.709180529s`, `6.2826ms`, `414.019µs`, `0s`), the client, the method and path. A request's
arrival is its end less that time (1-s resolution: the end is printed to the second).

The server (slog, 2024 on): `time=2024-08-19T14:09:56.520+08:00 level=INFO source=routes.go:1170
msg="Listening on 127.0.0.1:11434 (version 0.3.5)"`; its settings in `server config
env="map[... OLLAMA_NUM_PARALLEL:0 OLLAMA_MAX_QUEUE:512 ...]"` (an older form: `2024/05/12
06:47:18 routes.go:1006: INFO server config env="map[...]"`); the llama.cpp runner it starts,
`msg="starting llama server" cmd="... --ctx-size 4096 --batch-size 512 ... --parallel 4 ..."`.
"""
from __future__ import annotations

import re

from servers.server_log.fields import INT_MAX

GIN = re.compile(r"\[GIN\] (?P<y>\d{4})/(?P<mo>\d\d)/(?P<d>\d\d) - (?P<hms>\d\d:\d\d:\d\d) \| +(?P<status>\d{3}) \| +"
                 r"(?P<dur>[\dhmsµnu.]{1,40}) \| +(?P<client>[^|]{0,80}?) +\| +(?P<method>[A-Z]{3,7}) +"
                 r"\"(?P<path>[^\"]{1,300})\"\s*$")
GO_DURATION = re.compile(r"(?:(\d{1,9})h)?(?:(\d{1,9})m(?!s))?(?:(\d{1,15}(?:\.\d{1,12})?)(s|ms|µs|μs|us|ns))?")
UNIT_MS = {"s": 1e3, "ms": 1.0, "µs": 1e-3, "μs": 1e-3, "us": 1e-3, "ns": 1e-6}
INFERENCE = ("/api/generate", "/api/chat", "/v1/chat/completions", "/v1/completions", "/api/embed",
             "/api/embeddings", "/v1/embeddings")
VERSION = re.compile(r"\(version (?P<v>\d{1,3}\.\d{1,3}[\w.+-]{0,30})\)")
ENV = re.compile(r"\b(OLLAMA_NUM_PARALLEL|OLLAMA_MAX_QUEUE|OLLAMA_MAX_LOADED_MODELS|OLLAMA_KEEP_ALIVE|"
                 r"OLLAMA_CONTEXT_LENGTH|OLLAMA_FLASH_ATTENTION|OLLAMA_KV_CACHE_TYPE|OLLAMA_NEW_ENGINE):([^\s\]]{0,40})")
RUNNER_FLAG = re.compile(r"--(ctx-size|batch-size|parallel|n-gpu-layers|threads) (\d{1,9})\b")
RUNNER_STARTED = re.compile(r"llama runner started in (\d{1,9}(?:\.\d{1,6})?) seconds")


def duration_ms(v: str) -> float | None:
    """A Go Duration's text (`1h2m3.5s`, `29m59s`, `414.019µs`, `0s`) in ms, or None."""
    m = GO_DURATION.fullmatch(v)
    if m is None or not any(m.groups()):
        return None
    h, mi, x, unit = m.groups()
    ms = (int(h or 0) * 3600 + int(mi or 0) * 60) * 1e3 + (float(x) * UNIT_MS[unit] if x else 0.0)
    return ms if ms < 1e13 else None


def gin_line(text: str) -> dict | None:
    """A gin access line: end (date, time), status, handler ms, method, path; or None. A line that
    is one but whose duration does not read is returned with `ok` False."""
    at = text.find("[GIN] ")
    if at < 0:
        return None
    m = GIN.match(text, at)
    if m is None:
        return {"ok": False, "prefix": text[:at]}
    ms = duration_ms(m["dur"])
    return {"ok": ms is not None, "prefix": text[:at], "_date": f"{m['y']}-{m['mo']}-{m['d']}", "_hms": m["hms"],
            "status": int(m["status"]), "handler_ms": ms, "method": m["method"], "path": m["path"][:200],
            "client": m["client"].strip()[:80]}


def settings_line(text: str) -> dict:
    """What a start-up line says of the server's scheduling: OLLAMA_* settings, the runner's flags,
    its start time."""
    out: dict = {}
    if "OLLAMA_" in text and "env=" in text:
        for k, v in ENV.findall(text):
            out[k] = int(v) if v.isdigit() and int(v) <= INT_MAX else v
    if "--ctx-size" in text or "--parallel" in text:
        for k, v in RUNNER_FLAG.findall(text):
            out[f"runner_{k.replace('-', '_')}"] = int(v)
    return out


def version_line(text: str) -> str | None:
    if "Listening on" not in text:
        return None
    m = VERSION.search(text)
    return m["v"] if m else None
