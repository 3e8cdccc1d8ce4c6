"""TRTLLMLogReader: a TensorRT-LLM server's log (`trtllm-serve`, PyTorch backend) -> LogRead
(servers.server_log.base).

One batch record per iteration line (`kind` "iteration", in LogRead.batches as vLLM's step lines
are), each rank that logs its own lane (`rank 0`, ...). Under tensor parallelism every logging
rank prints the same batch: a rank whose lines repeat a lower rank's (the same counts at the
same iteration, for nearly all the iterations both logged) is that rank's copy and counted as
duplicates; under attention DP each rank schedules its own batch and keeps its lane.
`prev_device_step_time` is the GPU time of the pass before: it goes to that step (`device_ms`).
uvicorn's access lines are the only per-request lines the server prints.
"""
from __future__ import annotations

from servers.server_log.base import LineReader, Parsed, median, unknown_spans
from servers.vllm_log.lines import ACCESS

from .lines import config_line, parse_iteration, parse_json_iteration, version_line

SAME_BATCH = 0.95      # a rank is another's copy when this share of the iterations both logged agree
COMPARED = ("context_requests", "context_tokens", "generation_tokens", "scheduled_requests")


class TRTLLMLogReader(LineReader):
    engine = "trtllm"
    hold_kinds = frozenset({"iteration"})

    def __init__(self, name: str = "") -> None:
        super().__init__(name)
        self.config: dict = {}
        self.version: str | None = None
        self.last: dict[str, dict] = {}      # lane -> its latest step (for the next line's device time)
        self.http = 0
        self.keys: set[str] = set()

    def parse(self, text: str) -> Parsed | None:
        if "iter = " in text:
            got = parse_iteration(text)
        elif "Iteration Counter" in text or '{"Active Request Count"' in text:
            got = parse_json_iteration(text)
        else:
            return None
        if got is None:
            return None
        kind, rec, ok, prefix = got
        return Parsed(ok, rec, prefix, kind)

    def take(self, p: Parsed, no: int, repeat: int) -> None:
        rec = p.record
        date, hms = rec.pop("_date", None), rec.pop("_hms", None)
        t = self.clock.at(date, None, hms) if hms else None
        lane = f"rank {rec['rank']}"
        key = (lane, rec["iteration"], t, tuple(rec.get(k) for k in COMPARED))
        if self.seen_before(key):     # the same line again: a log collected twice
            return
        self.keys.update(rec.pop("_keys", ()))
        if rec.pop("_form", None) == "triton":
            self.keys.add("triton")
        dev = rec.pop("prev_device_ms", None)
        before = self.last.get(lane)
        if dev is not None and before is not None and before["iteration"] == rec["iteration"] - 1:
            before["device_ms"] = dev   # the GPU time of the pass before this one (PR 6906)
        out = {"line": no, "time": f"{date} {hms}" if hms else None, "t": t, "kind": "iteration", "lane": lane, **rec}
        if repeat > 1:
            out["repeated"] = repeat
        self.out.batches.append(out)
        self.last[lane] = out

    def other(self, no: int, text: str) -> None:
        self.out.other_lines += 1
        if "HTTP/" in text and ACCESS.search(text):
            self.http += 1
            return
        if self.version is None and "version" in text:
            self.version = version_line(text)
        if "TensorRT-LLM" in text or "TRT-LLM" in text:    # a start-up line is the loggers'
            for k, v in (config_line(text) or {}).items():
                self.config.setdefault(k, v)       # the first start-up's (a restart is not followed)

    def _drop_copies(self) -> None:
        """Lanes that repeat a lower rank's batches (tensor parallel ranks all logging) dropped as
        duplicates; lanes with batches of their own (attention DP) kept."""
        by_lane: dict[str, dict[int, tuple]] = {}
        for b in self.out.batches:
            by_lane.setdefault(b["lane"], {})[b["iteration"]] = tuple(b.get(k) for k in COMPARED)
        lanes = sorted(by_lane, key=lambda x: int(x.split()[1]))
        copies: dict[str, str] = {}
        for i, lane in enumerate(lanes):
            for first in lanes[:i]:
                if first in copies:
                    continue
                a, b = by_lane[first], by_lane[lane]
                both = a.keys() & b.keys()
                if both and sum(a[k] == b[k] for k in both) >= SAME_BATCH * len(both):
                    copies[lane] = first
                    break
        if copies:
            kept = [b for b in self.out.batches if b["lane"] not in copies]
            self.out.duplicates += len(self.out.batches) - len(kept)
            self.out.batches = kept
            self.out.extra["copied_ranks"] = copies

    def finish(self) -> None:
        o = self.out
        self._drop_copies()
        steps = o.batches
        python_lines = bool(self.keys - {"triton"})
        o.era = ("unknown (no iteration line read: the server logs them with print_iter_log on)" if not steps else
                 "PyTorch executor, per-iteration lines (print_iter_log)" if python_lines else
                 "Triton backend, per-iteration stats JSON (--log-verbose)")
        tr = []
        if steps:
            form = ("the Triton backend's iteration-stats JSON (--log-verbose)" if "triton" in self.keys
                    else "2026 (kv_cache_util, num_scheduled_requests after the ranks)" if "kv_cache_util" in self.keys
                    else "mid-2025 on (host_step_time, prev_device_step_time)" if "host_step_time" in self.keys
                    else "early 2025 (elapsed_time)" if "elapsed_time" in self.keys else "no step time")
            tr.append(f"per-iteration lines: {len(steps):,}, form {form}")
            if "triton" in self.keys:
                tr.append("Triton's JSON gives no generation token count: one per generation request assumed "
                          "(beam width 1)")
            elif "num_scheduled_requests" not in self.keys:
                tr.append("no num_scheduled_requests (before April 2025): generation requests unknown, "
                          "generation tokens may include CUDA-graph padding")
        if self.version:
            o.extra["trtllm_version"] = self.version
            tr.append(f"TensorRT-LLM {self.version} (its version banner)")
        copies = o.extra.get("copied_ranks") or {}
        if copies:
            tr.append("ranks logging another rank's batches (tensor parallel), counted as duplicates: "
                      + ", ".join(f"{k} of {v}" for k, v in sorted(copies.items())))
        o.lanes = sorted({b["lane"] for b in steps}, key=lambda x: int(x.split()[1]))
        if len(o.lanes) > 1:
            tr.append("ranks scheduling their own batches (attention DP): " + ", ".join(o.lanes))
        if self.config:
            tr.append("start-up settings: " + ", ".join(f"{k} {v}" for k, v in sorted(self.config.items())))
        o.traits = tr
        o.extra["server_config"] = dict(sorted(self.config.items()))
        o.extra["request_lines"] = self.http
        diffs = []
        for lane in o.lanes:
            ts = [b["t"] for b in steps if b["lane"] == lane and b["t"] is not None]
            diffs += [y - x for x, y in zip(ts, ts[1:]) if y > x]
        typical = median(diffs) or 1.0
        threshold = max(5.0, 10 * typical)
        o.gaps = unknown_spans([b["t"] for b in steps], threshold)
        o.gap_rule = (f"silences longer than {threshold:g} s between iteration lines: the executor logs a line per "
                      "loop pass, so a silence is an idle server (it waits for requests) or lines not logged; "
                      "the log cannot tell")
        o.duplicate_note = ("the same iteration line again (same rank, iteration, time and counts), kept once; "
                            "and ranks that repeat a lower rank's batches")
        o.cannot_say = [
            "which requests ran in each iteration (the line counts them: context requests and tokens, generation "
            "tokens), how long each request waited, preemption victims",
            "when each request arrived or finished: the server prints no request line (uvicorn's access line "
            "has no time or id)",
            "times finer than one second (the line's timestamp; host_step_time gives each step's length)",
        ]
        if steps and not any(b.get("kv_usage") is not None for b in steps):
            o.cannot_say.append("KV cache use per step (2026 builds print kv_cache_util)")
        o.would_tell_more = [
            *([] if steps else ["print_iter_log: true in the server's config (a line per executor iteration)"]),
            "TLLM_PROFILE_LOG_RANKS=all: every rank's iteration line (attention DP ranks schedule their own)",
            "enable_iter_perf_stats: true and GET /metrics: per-iteration JSON with queued, active, paused "
            "requests and KV blocks",
            "this project's recorder with a vLLM server: every scheduler step, per request",
        ]
        if not steps:
            o.warnings.append("no TensorRT-LLM iteration line could be read")
