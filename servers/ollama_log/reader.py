"""OllamaLogReader: an Ollama server's log -> LogRead (servers.server_log.base).

One request record per gin access line of an inference route (`/api/generate`, `/api/chat`, the
OpenAI-compatible ones, embeddings; `kind` "http"): when it ended, its status, the handler's
time, the route. Other routes (`/api/tags`, `/api/ps`, health) are counted, not kept. The
server's settings (OLLAMA_NUM_PARALLEL, ...), its version and the llama.cpp runner's flags are
`server_config`. Ollama logs no batch: the Trace's in-flight count is rebuilt from the requests'
own times (servers/server_log/build.py).
"""
from __future__ import annotations

import re

from servers.server_log.base import LineReader, Parsed

from .lines import INFERENCE, RUNNER_STARTED, gin_line, settings_line, version_line

MAX_REQUESTS = 500_000
LLAMA_CPP = re.compile(r"\bllama_\w+: |\bslot +\w+: id +\d+|\bprint_timings: |\bupdate_slots\b")   # the runner's own
GAP_S = 5.0


class OllamaLogReader(LineReader):
    engine = "ollama"

    def __init__(self, name: str = "") -> None:
        super().__init__(name)
        self.config: dict = {}
        self.version: str | None = None
        self.other_routes = 0
        self.failed = 0
        self.runner_starts: list[float] = []
        self.llama_lines = 0
        self.inference_lines = 0

    def parse(self, text: str) -> Parsed | None:
        if "[GIN] " not in text:
            return None
        got = gin_line(text)
        if got is None:
            return None
        return Parsed(got.pop("ok"), got, got.pop("prefix"), "http")

    def take(self, p: Parsed, no: int, repeat: int) -> None:
        rec = p.record
        date, hms = rec.pop("_date"), rec.pop("_hms")
        t = self.clock.at(date, None, hms)
        if not rec["path"].split("?")[0].rstrip("/").endswith(INFERENCE):
            self.other_routes += 1
            return
        self.failed += rec["status"] >= 400
        self.inference_lines += 1
        if len(self.out.requests) < MAX_REQUESTS:
            self.out.requests.append({"line": no, "time": f"{date} {hms}", "t": t, "kind": "http",
                                      "request": f"line {no}", **rec})

    def other(self, no: int, text: str) -> None:
        self.out.other_lines += 1
        if ("llama_" in text or "slot" in text or "print_timings" in text) and LLAMA_CPP.search(text):
            self.llama_lines += 1
        if self.version is None and "version" in text:
            self.version = version_line(text)
        if "OLLAMA_" in text or "--ctx-size" in text or "--parallel" in text:
            for k, v in settings_line(text).items():
                self.config.setdefault(k, v)      # the first start-up's
        elif "runner started" in text:
            m = RUNNER_STARTED.search(text)
            if m:
                self.runner_starts.append(float(m[1]))

    def finish(self) -> None:
        o = self.out
        reqs = o.requests
        o.era = ("Ollama (gin's access line per request)" if reqs else "unknown (no inference request line read)")
        tr = []
        if reqs:
            routes: dict[str, int] = {}
            for q in reqs:
                routes[q["path"]] = routes.get(q["path"], 0) + 1
            tr.append(f"inference request lines (gin): {len(reqs):,}; routes "
                      + ", ".join(f"{k} {n:,}" for k, n in sorted(routes.items())[:8]))
        if self.failed:
            tr.append(f"requests answered with an error status (4xx / 5xx): {self.failed:,}")
        if self.other_routes:
            tr.append(f"other routes' lines (tags, ps, health, ...): {self.other_routes:,}, not kept")
        if self.version:
            o.extra["ollama_version"] = self.version
            tr.append(f"Ollama {self.version} (its `Listening on` line)")
        if self.runner_starts:
            tr.append(f"llama runner starts: {len(self.runner_starts):,} (model loads, "
                      f"{min(self.runner_starts):g}-{max(self.runner_starts):g} s each)")
        if self.config:
            tr.append("settings: " + ", ".join(f"{k} {v}" for k, v in sorted(self.config.items())))
        o.traits = tr
        o.extra["server_config"] = dict(sorted(self.config.items()))
        o.extra["request_lines"] = self.inference_lines
        o.extra["other_route_lines"] = self.other_routes
        if self.llama_lines:
            o.extra["llama_cpp_lines"] = self.llama_lines
        o.lanes = [""] if reqs else []
        iv = sorted((q["t"] - (q["handler_ms"] or 0) / 1e3, q["t"]) for q in reqs if q.get("t") is not None)
        spans, reach = [], None
        for a, b in iv:
            if reach is not None and a - reach > GAP_S:
                spans.append([round(reach, 6), round(a, 6)])
            reach = b if reach is None else max(reach, b)
        o.gaps = spans
        o.gap_rule = (f"spans longer than {GAP_S:g} s in which no logged request was in the server: idle, or requests "
                      "whose lines are missing (still running when the log ends); the log cannot tell")
        o.duplicate_note = "none: each gin line is one request (no request id to compare)"
        o.cannot_say = [
            "anything per batch or slot: which requests ran together, prompt processing and generation, how long "
            "each waited for a slot (the in-flight count here is rebuilt from each request's own time)",
            "prompt and output lengths (the access line has none)",
            "times finer than one second for a request's end (its arrival is the end less the handler's time)",
        ]
        o.would_tell_more = [
            "OLLAMA_DEBUG=1: the runner's own lines (slots, batches, timings with the llama.cpp engine)",
            "the API's response (prompt_eval_count, eval_count, durations) per request",
            "this project's recorder with a vLLM server: every scheduler step, per request",
        ]
        if self.llama_lines:
            o.warnings.append(f"{self.llama_lines:,} line(s) of the llama.cpp runner are in the file: the llama-server "
                              "log page reads those (its slots and batches)")
        if self.inference_lines > len(reqs):
            o.warnings.append(f"{self.inference_lines:,} inference request lines: the first {MAX_REQUESTS:,} are kept")
        if not reqs:
            o.warnings.append("no Ollama inference request line could be read")
