"""LMDeployLogReader: an LMDeploy server's log -> LogRead (servers.server_log.base).

Stats lines (each DP rank a lane) in LogRead.stats, the SpecDecoding line after one in
spec_decoding; the engines' forward lines (the PyTorch engine's at DEBUG, TurboMind's prefill
mini-batches to v0.11) as batch records (`kind` "forward"); each request's start and end in
requests. The same stats line twice (same lane, time and fields) is a duplicate.
"""
from __future__ import annotations

from servers.server_log.base import LineReader, Parsed, median, unknown_spans

from .lines import config_line, parse_forward, parse_stats, py_time, request_line, spec_fields

MAX_REQUESTS = 500_000


class LMDeployLogReader(LineReader):
    engine = "lmdeploy"
    hold_kinds = frozenset({"stats"})

    def __init__(self, name: str = "") -> None:
        super().__init__(name)
        self.config: dict = {}
        self.forms: set[str] = set()
        self.request_count = 0
        self.tm_lines = 0
        self.pending_spec = False

    def parse(self, text: str) -> Parsed | None:
        if "Avg " in text:
            got = parse_stats(text)
        elif "orward" in text and ("Sending forward inputs" in text or "[Forward] [" in text):
            got = parse_forward(text)
        else:
            return None
        if got is None:
            return None
        kind, rec, ok, prefix = got
        return Parsed(ok, rec, prefix, kind)

    def _time(self, rec: dict):
        d, h = rec.pop("_date", None), rec.pop("_hms", None)
        if h is None:
            return None, None
        return f"{d} {h}", self.clock.at(d, None, h)

    def take(self, p: Parsed, no: int, repeat: int) -> None:
        rec = p.record
        time, t = self._time(rec)
        if p.kind == "forward":
            self.forms.add(rec["engine_kind"])
            out = {"line": no, "time": time, "t": t, "kind": "forward", "lane": "", **rec}
            if repeat > 1:
                out["repeated"] = repeat
            self.out.batches.append(out)
            return
        spec = rec.pop("spec", None)
        self.forms.add("thr" if "api_routed" in rec or "completed" in rec else "old")
        key = (rec["lane"], t, tuple(sorted((k, repr(v)) for k, v in rec.items())))
        if self.seen_before(key):
            return
        self.out.stats.append({"line": no, "time": time, "t": t, "engine": rec.pop("lane"), **rec})
        if spec is not None:
            self.out.spec_decoding.append({"line": no, "time": time, "t": t, **spec})
        self.pending_spec = spec is None    # the July 2025 form prints its SpecDecoding line after

    def other(self, no: int, text: str) -> None:
        self.out.other_lines += 1
        if "[TM][" in text:
            self.tm_lines += 1
        elif "n_tok = " in text or "sum_q=" in text:   # a forward line's fields without its head
            self.bad(no, text, "a forward line cut before its head")
            return
        if self.pending_spec and text.startswith("SpecDecoding metrics: "):
            last = self.out.stats[-1]
            self.out.spec_decoding.append({"line": no, "time": last["time"], "t": last["t"], **spec_fields(text)})
            self.pending_spec = False
            return
        pt = py_time(text) if " - " in text else None
        if pt is None:
            return
        got = request_line(text)
        if got is not None:
            self.request_count += 1
            if len(self.out.requests) < MAX_REQUESTS:
                self.out.requests.append({"line": no, "time": f"{pt[0]} {pt[1]}",
                                          "t": self.clock.at(pt[0], None, pt[1]), **got})
            return
        for k, v in (config_line(text) or {}).items():
            self.config.setdefault(k, v)        # the first start-up's

    def read(self, src, progress=None):
        out = super().read(src, progress)
        if self.clock.kinds:
            out.clock = ("the engine's timestamps (local time: the Python logger's to the millisecond, the stats "
                         "lines' to the second), seconds from the first record")
        return out

    def finish(self) -> None:
        o = self.out
        eras = []
        if "old" in self.forms:
            eras.append("stats of July-December 2025 (`Avg prompt throughput`, Finished / Unfinished)")
        if "thr" in self.forms:
            eras.append("stats of 2026 (`Avg thr (in/out)`, Server / Engine counts)")
        if "pytorch" in self.forms:
            eras.append("PyTorch engine forward lines (DEBUG)")
        if "turbomind" in self.forms:
            eras.append("TurboMind prefill mini-batches (`[Forward]`, to v0.11)")
        o.era = "; ".join(eras) or ("request lines only (no stats or forward line)" if o.requests else
                                    "unknown (no stats, forward or request line read)")
        steps = o.batches
        tr = []
        if o.stats:
            tr.append(f"stats lines: {len(o.stats):,}")
        if steps:
            pre = sum(1 for b in steps if not b["decoding"])
            tr.append(f"forward lines: {len(steps):,} ({pre:,} with prefills, {len(steps) - pre:,} decode only)")
        reqs = [q for q in o.requests if q["kind"] == "received"]
        ends = [q for q in o.requests if q["kind"] == "finished"]
        if o.requests:
            tr.append(f"request lines: {len(reqs):,} started, {len(ends):,} finished")
        if o.spec_decoding:
            tr.append(f"SpecDecoding metrics: {len(o.spec_decoding):,}")
        if self.tm_lines:
            tr.append(f"TurboMind's C++ lines ([TM][...]): {self.tm_lines:,}")
        if self.config:
            tr.append("engine settings: " + ", ".join(f"{k} {v}" for k, v in sorted(self.config.items())))
        o.traits = tr
        o.lanes = sorted({r["engine"] for r in o.stats} | {b["lane"] for b in steps})
        o.extra["server_config"] = dict(sorted(self.config.items()))
        o.extra["request_lines"] = self.request_count
        diffs = []
        for lane in {r["engine"] for r in o.stats}:
            ts = [r["t"] for r in o.stats if r["engine"] == lane and r["t"] is not None]
            diffs += [y - x for x, y in zip(ts, ts[1:]) if y > x]
        interval = median(diffs) or 10.0
        o.extra["stats_interval_s"] = interval
        threshold = max(1.5 * interval, interval + 2)
        times = [r["t"] for r in o.stats] + [b["t"] for b in steps] + [q["t"] for q in o.requests]
        o.gaps = unknown_spans([x for x in times if x is not None], threshold)
        o.gap_rule = (f"silences longer than {threshold:g} s between logged lines (the stats interval is ≈{interval:g} s): "
                      "LMDeploy skips its stats line when no token was processed, so a silence is idle or unlogged; "
                      "the log cannot tell")
        o.duplicate_note = "the same stats line again (same rank, time and fields), kept once"
        o.cannot_say = [
            "which requests ran in each forward (the forward lines count tokens and sequences)" if steps else
            "anything per step: batch sizes, which requests ran together, prefills and decodes",
            "what happened inside a stats interval: throughputs are averages over ≈10 s, running / waiting / KV use "
            "the values when the line was printed",
        ]
        if "turbomind" in self.forms:
            o.cannot_say.append("TurboMind's decode-only steps and the forward lines' times (it logs mini-batches "
                                "holding a prefill, with no timestamp)")
        if not ends:
            o.cannot_say.append("when each request finished, and its output length (v0.7 on logs `session N "
                                "finished` at INFO)")
        o.would_tell_more = [
            "--log-level INFO: each request's start and end, with its input and output tokens",
            "--log-level DEBUG (PyTorch engine): a line per forward with its tokens, batch size and phase",
            "the Prometheus /metrics endpoint (--enable-metrics): TTFT, time per output token, queue time",
            "this project's recorder with a vLLM server: every scheduler step, per request",
        ]
        if not o.stats and not steps and not o.requests:
            o.warnings.append("no LMDeploy stats, forward or request line could be read")
