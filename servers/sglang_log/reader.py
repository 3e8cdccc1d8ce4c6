"""SGLangLogReader: an SGLang server's log -> LogRead (servers.server_log.base), record by record.

Ranks: each DP rank runs its own scheduler (its own lane, `DP2`); the TP / EP / CP ranks of one DP
group run the same batch, and when several of them log it the first rank seen in the group is
kept and the others' lines are counted as duplicates (compared with the kept line at the same
time: `duplicates`, or `differing` if their fields differ).
"""
from __future__ import annotations

import re

from servers.server_log.base import LineReader, Parsed, median, unknown_spans

from .lines import CORE, HYBRID, PD_DECODE, PD_PREFILL, limits_line, parse_batch, request_line, retract_line, time_of

MAX_REQUESTS = 200_000
GAP_S = 5.0   # a busy server logs a decode line at least every few seconds (40 steps)
_DP = re.compile(r"\bDP(\d+)\b")
_VLLM_STATS = "Avg prompt throughput:"
ERAS = {
    "legacy": "2024-04 legacy (`new fill batch.` and bare `#running-req:` lines)",
    "bare": "2024-04 legacy (`new fill batch.` and bare `#running-req:` lines)",
    "2024": "2024 (`Prefill batch.` with `cache hit rate`, or a time-only prefix)",
    "period": "2025 (`Prefill batch.` / `Decode batch.`, period style)",
    "comma": "late 2025 on (`Prefill batch,` / `Decode batch,`, comma style)",
}


def _body(rec: dict) -> tuple:
    """A batch line's fields as compared between ranks (throughputs differ from rank to rank)."""
    return tuple((k, repr(v)) for k, v in rec.items() if k not in ("gen_throughput", "throughput"))


class SGLangLogReader(LineReader):
    engine = "sglang"
    hold_kinds = frozenset({"batch"})

    def __init__(self, name: str = "") -> None:
        super().__init__(name)
        self.leader: dict[str, str] = {}
        self.kept: dict[tuple, list] = {}
        self.styles: dict[str, int] = {}
        self.keys: set[str] = set()
        self.differing = 0
        self.trailing = 0
        self.ranks_seen: list[str] = []
        self.request_count = 0
        self._strs: dict[str, str] = {}
        self._lanes: dict[str, str] = {}
        self._stamp: str | None = None
        self.retractions: list[dict] = []   # `KV cache pool is full. Retract requests.` lines
        self.limits: dict = {}               # the scheduler's start-up line (max_total_num_tokens=...)
        self.retract_lines = 0
        self.retracted_reqs = 0

    def parse(self, text: str) -> Parsed | None:
        got = parse_batch(text)
        if got is None:
            return None
        rec, ok, prefix, meta = got
        rec["_meta"] = meta
        return Parsed(ok, rec, prefix, "batch")

    def _lane(self, ranks: str) -> tuple[str, str]:
        """(lane, ranks) of a line's rank text: its DP rank's lane ("" for none), and one string
        object per distinct rank text (a long log holds them once)."""
        lane = self._lanes.get(ranks)
        if lane is None:
            dp = _DP.search(ranks)
            lane = f"DP{dp.group(1)}" if dp else ""
            if len(self._lanes) < 4096:
                self._strs[ranks] = ranks
                self._lanes[ranks] = lane
            return lane, ranks
        return lane, self._strs[ranks]

    def take(self, p: Parsed, no: int, repeat: int) -> None:
        rec = p.record
        meta = rec.pop("_meta")
        self.styles[meta["style"]] = self.styles.get(meta["style"], 0) + 1
        if meta["time"] is None:
            date, hms = None, None
            m = re.search(r"(\d{4}-\d\d-\d\d)[ T](\d\d:\d\d:\d\d)", p.prefix)   # a collector's time, if any
            if m:
                date, hms = m.group(1), m.group(2)
        else:
            date, hms = meta["date"], meta["time"].replace(",", ".")
        t = self.clock.at(date, None, hms) if hms else None
        lane, ranks = self._lane(meta["ranks"])
        stamp = f"{date} {hms}" if date else hms
        stamp = self._stamp if stamp == self._stamp else stamp
        self._stamp = stamp
        out = {"kind": rec["kind"], "line": no, "time": stamp, "t": t, "lane": lane, "ranks": ranks}
        for k in CORE:
            out[k] = rec.get(k)
        for k, v in rec.items():
            if k not in out and k != "kind":
                out[k] = v
                self.keys.add(k)
        if repeat > 1:
            out["repeated"] = repeat
        sig = (lane, t, rec["kind"])
        leader = self.leader.setdefault(lane, ranks)
        if ranks not in self.ranks_seen and len(self.ranks_seen) < 64:
            self.ranks_seen.append(ranks)
        if ranks != leader:
            if _body(rec) in [_body(r) for r in self.kept.get(sig, ())]:
                self.out.duplicates += 1
            else:
                self.differing += 1
            return
        self.kept.setdefault(sig, []).append(rec)      # compared (_body) only when another rank logs
        if len(self.kept) > 4096:             # only recent times matter (ranks log together)
            for k in list(self.kept)[:2048]:
                del self.kept[k]
        self.out.batches.append(out)

    def other(self, no: int, text: str) -> None:
        if _VLLM_STATS in text:
            self.out.other_engine_lines["vllm"] = self.out.other_engine_lines.get("vllm", 0) + 1
        if not self.limits and "max_total_num_tokens=" in text:
            self.limits = limits_line(text) or {}   # the first start-up's (a restart's are not followed)
            if self.limits:
                self.out.other_lines += 1
                return
        if "Retract requests" in text:
            got = retract_line(text)
            if got is not None:
                self._retracted(no, text, *got)
                return
        req = request_line(text) if ("INFO:" in text or "Receive" in text or "Finish" in text or '"rid"' in text) else None
        if req is None:
            self.out.other_lines += 1
            return
        self.request_count += 1
        if len(self.out.requests) < MAX_REQUESTS:
            date, hms = time_of(text)
            t = self.clock.at(date, None, hms) if hms else None
            self.out.requests.append({"line": no, "time": (f"{date} {hms}" if date else hms), "t": t, **req})

    def _retracted(self, no: int, text: str, rec: dict, ranks: str) -> None:
        """A retraction line: kept (MAX_REQUESTS at most) and counted, its lane a DP rank of its
        prefix; the same line of another rank of the DP group than its batch lines' is a duplicate."""
        lane, ranks = self._lane(ranks)
        if self.leader.get(lane, ranks) != ranks:
            self.out.duplicates += 1
            return
        self.retract_lines += 1
        self.retracted_reqs += rec["retracted"] or 0
        if len(self.retractions) < MAX_REQUESTS:
            date, hms = time_of(text)
            self.retractions.append({"line": no, "time": (f"{date} {hms}" if date else hms),
                                     "t": self.clock.at(date, None, hms) if hms else None, "lane": lane, **rec})

    # -- the verdict ---------------------------------------------------------------------------
    def finish(self) -> None:
        o = self.out
        b = o.batches
        styles = self.styles
        era = max(styles, key=lambda s: (styles[s], s)) if styles else None
        if era in ("period", "comma") and (self.clock.kinds == {"time"} or "cache_hit_rate" in self.keys):
            era = "2024"
        o.era = ERAS.get(era, "unknown (no batch line read)")
        tr = []
        if len(styles) > 1:
            tr.append("mixed line styles: " + ", ".join(f"{k} {v:,}" for k, v in sorted(styles.items())))
        if self.keys & HYBRID:
            tr.append("hybrid-model usage fields (full / swa token usage, mamba usage): kv_usage is the full-attention pool")
        if self.keys & PD_PREFILL:
            tr.append("PD disaggregation, prefill side (#prealloc-req / #bootstrap-req / #inflight-req)")
        if self.keys & PD_DECODE:
            tr.append("PD disaggregation, decode side (#transfer-req / #retracted-req / pre-allocated usage)")
        if "accept_len" in self.keys:
            tr.append("speculative decoding (accept len / accept rate)")
        if "npu_graph" in self.keys:
            tr.append("Ascend NPU build (npu graph)")
        if "input_throughput" in self.keys:
            tr.append("input throughput on prefill lines")
        if "pending_tokens" in self.keys:
            tr.append("#pending-token on prefill lines")
        if self.limits:
            o.extra["server_config"] = dict(self.limits)
            said = ", ".join(f"{k}={v:,}" for k, v in self.limits.items())
            tr.append(f"the scheduler's limits from its start-up line ({said})")
        if self.retract_lines:
            tr.append(f"retractions (KV cache pool full): {self.retract_lines:,} lines, {self.retracted_reqs:,} "
                      "requests sent back to the queue")
            o.extra["retractions"] = self.retractions
        if any(r for r in self.ranks_seen):
            tr.append("ranks: " + ", ".join(r or "(none)" for r in self.ranks_seen[:12])
                      + (" …" if len(self.ranks_seen) > 12 else ""))
        interval = self.decode_interval()
        if interval is not None:
            tr.append(f"decode lines every ≈{interval:g} decode steps (from #token and #running-req)")
        o.traits = tr
        o.lanes = sorted({r["lane"] for r in b})
        o.extra["decode_log_interval"] = interval
        o.extra["request_lines"] = self.request_count
        o.duplicate_note = ("lines of another TP/EP/CP rank of the same DP group (the first rank seen is kept): "
                            f"{o.duplicates:,} equal to the kept rank's line at that second, "
                            f"{self.differing:,} differing (dropped, counted here)")
        o.extra["other_rank_lines_differing"] = self.differing
        times = [r["t"] for r in b if r["t"] is not None]
        threshold = GAP_S
        o.gaps = unknown_spans(times, threshold)
        o.gap_rule = (f"silences longer than {threshold:g} s between logged batch lines: the server was idle, or busy "
                      "without logging (decode lines come every 40 steps by default); the log cannot tell which")
        o.cannot_say = [
            "which requests were in a batch (batch lines carry no request ids)",
            "chunk boundaries per request: which request a chunked prefill's tokens belong to",
            "which requests were retracted (preempted): a retraction line gives their number only"
            if self.retract_lines else "retraction (preemption) victims",
            "how long a batch took: times have one-second resolution",
        ]
        if interval is None or interval > 1.5:
            o.cannot_say.insert(1, "the decode steps between two decode lines (one line per --decode-log-interval "
                                   "steps, default 40)")
        if self.request_count == 0:
            o.cannot_say.append("when each request arrived and finished (no request lines)")
        o.would_tell_more = ["--decode-log-interval 1: a line for every decode step",
                             "--log-requests: a line when each request is received and when it finishes",
                             "--enable-metrics: Prometheus metrics (TTFT, ITL and queue-time histograms)"]
        if interval is not None and interval <= 1.5:
            o.would_tell_more.pop(0)
        if not b:
            o.warnings.append("no SGLang batch line could be read")

    def decode_interval(self) -> float | None:
        """Decode steps per decode line: #token grows by #running-req per step between two decode lines
        of a lane with the same running count and nothing between them."""
        last: dict[str, dict] = {}
        est = []
        for r in self.out.batches:
            prev = last.get(r["lane"])
            last[r["lane"]] = r
            if r["kind"] != "decode" or prev is None or prev["kind"] != "decode":
                continue
            run, k0, k1 = r.get("running"), prev.get("kv_tokens"), r.get("kv_tokens")
            if run and run == prev.get("running") and k0 is not None and k1 is not None and k1 > k0:
                est.append((k1 - k0) / run)
        m = median(est)
        return None if m is None else round(m, 1)


def read_sglang_log(src, name: str = ""):
    """An SGLang log (path, bytes or binary stream; plain or gzip) -> LogRead."""
    return SGLangLogReader(name).read(src)
