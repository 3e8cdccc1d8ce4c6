"""TGILogReader: a text-generation-inference server's log -> LogRead (servers.server_log.base).

One request record per `Success` line (`kind` "success", in LogRead.requests): when it ended,
its route, and the four times the router measured (validation, queue, inference, total) with
the generated tokens they imply; one per request error (`kind` "error", `rejected` when the
router refused it for load). The prefix cache's `Prefix P - Suffix S` lines are kept as
`allocations`. TGI logs no batch: the Trace's running and waiting are rebuilt from the requests'
own times (servers/server_log/build.py).
"""
from __future__ import annotations

from servers.server_log.base import LineReader, Parsed, median

from .lines import STAMP, args_fields, error_line, parse_success, radix_line, setting_line, time_of

MAX_REQUESTS = 500_000
MAX_ALLOCATIONS = 500_000
GAP_S = 5.0


class TGILogReader(LineReader):
    engine = "tgi"
    hold_kinds = frozenset({"request"})

    def __init__(self, name: str = "") -> None:
        super().__init__(name)
        self.config: dict = {}
        self.in_args = False
        self.open_key: str | None = None    # a pretty-printed `key: Some(` whose value is on the next line
        self.successes = 0
        self.errors = 0
        self.rejected = 0
        self.allocations: list[list] = []
        self.allocation_count = 0
        self.routes: dict[str, int] = {}
        self.embedding_lines = 0    # text-embeddings-inference's: the same router, no generation

    def parse(self, text: str) -> Parsed | None:
        if "{" not in text or ("INFO" not in text and '"Success"' not in text):
            return None
        got = parse_success(text)
        if got is None:
            return None
        kind, rec, ok, prefix = got
        return Parsed(ok, rec, prefix, kind)

    def _t(self, rec: dict):
        when = time_of(rec)
        if when is None:
            return None, None
        return f"{when[0]} {when[1]}", self.clock.at(when[0], None, when[1])

    def take(self, p: Parsed, no: int, repeat: int) -> None:
        rec = p.record
        time, t = self._t(rec)
        self.successes += 1
        self.routes[rec["route"]] = self.routes.get(rec["route"], 0) + 1
        if len(self.out.requests) < MAX_REQUESTS:
            out = {"line": no, "time": time, "t": t, "kind": "success", "request": f"line {no}", **rec}
            if repeat > 1:
                out["repeated"] = repeat
            self.out.requests.append(out)

    def other(self, no: int, text: str) -> None:
        self.out.other_lines += 1
        if "text_embeddings_router" in text:
            self.embedding_lines += 1
            return
        if "ERROR" in text:
            err = error_line(text)
            if err is not None:
                time, t = self._t(err)
                self.errors += 1
                self.rejected += err["rejected"]
                if len(self.out.requests) < MAX_REQUESTS:
                    self.out.requests.append({"line": no, "time": time, "t": t, "kind": "error",
                                              "request": f"line {no}", **err})
                return
        if "Suffix" in text:
            got = radix_line(text)
            if got is not None:
                self.allocation_count += 1
                if len(self.allocations) < MAX_ALLOCATIONS:
                    stamp = _stamp(text)
                    when = self.clock.at(*stamp) if stamp else None
                    self.allocations.append([no, when, got[0], got[1]])
                return
        self._settings(text)

    def _settings(self, text: str) -> None:
        """The launcher's Args (one line, or one field a line inside `Args {` ... `}`) and the
        router's `Setting max batch total tokens to N`: the first start-up's."""
        if "Args {" in text:
            self.in_args = not text.rstrip().endswith("}")
            got = args_fields(text)
        elif self.in_args:
            line = text.strip()
            if line in ("}", "},"):
                self.in_args = False
                return
            if self.open_key is not None:     # `{:#?}` prints Some(4096) over three lines
                key, self.open_key = self.open_key, None
                got = args_fields(f"{key}: {line.rstrip(',')}")
            elif line.endswith(": Some("):
                self.open_key = line[:-len(": Some(")]
                return
            else:
                got = args_fields(text)
        elif "tokens" in text:
            got = setting_line(text) or {}
        else:
            return
        for k, v in got.items():
            self.config.setdefault(k, v)

    def read(self, src, progress=None):
        out = super().read(src, progress)
        if self.clock.kinds:
            out.clock = "the engine's timestamps (RFC 3339, UTC, microseconds), seconds from the first record"
        return out

    def finish(self) -> None:
        o = self.out
        reqs = [q for q in o.requests if q["kind"] == "success"]
        o.era = ("text-generation-inference router (a `Success` line per request)" if self.successes else
                 "unknown (no request line read)")
        tr = []
        if self.successes:
            tr.append(f"request lines (`Success`, router/src/server.rs): {self.successes:,}, routes "
                      + ", ".join(f"{k or '?'} {n:,}" for k, n in sorted(self.routes.items())))
        if self.errors:
            tr.append(f"request errors: {self.errors:,}" + (f" ({self.rejected:,} refused for load: no permits / "
                                                            "overloaded)" if self.rejected else ""))
        if self.allocation_count:
            tr.append(f"prefix-cache allocations (`Prefix P - Suffix S`, v2.3 on): {self.allocation_count:,}")
        if self.config:
            tr.append("launcher settings: " + ", ".join(f"{k} {v}" for k, v in sorted(self.config.items())
                                                        if v is not None))
        o.traits = tr
        o.extra["server_config"] = dict(sorted(self.config.items()))
        o.extra["request_lines"] = self.successes
        o.extra["errors"] = {"count": self.errors, "rejected": self.rejected}
        o.extra["allocations"] = {"count": self.allocation_count, "columns": ["line", "t", "cached", "computed"],
                                  "rows": self.allocations}
        if len(o.requests) >= MAX_REQUESTS:
            o.warnings.append(f"more than {MAX_REQUESTS:,} request lines: the first {MAX_REQUESTS:,} are kept")
        o.lanes = [""] if reqs else []
        spans = _idle(reqs)
        o.gaps = [s for s in spans if s[1] - s[0] > GAP_S]
        o.gap_rule = (f"spans longer than {GAP_S:g} s in which no logged request was in the server (between one "
                      "request's end and the next one's arrival): idle, or requests whose lines are missing (still "
                      "running when the log ends, failed, or not logged); the log cannot tell")
        o.duplicate_note = "none: each Success line is one request (TGI prints no request id to compare)"
        typical = median([q.get("queue_ms") or 0.0 for q in reqs[:10000]])
        o.extra["median_queue_ms"] = typical
        o.cannot_say = [
            "anything per batch: which requests ran together, prefill and decode steps, batch sizes (TGI logs no "
            "batch; running and waiting here are rebuilt from each request's own times)",
            "prompt lengths, and the time to the first token (time_per_token includes the prefill)",
            "requests that had not ended when the log ends, and which request an error or a prefix-cache line "
            "belongs to (no request id is printed)",
        ]
        if not self.allocation_count:
            o.cannot_say.append("prefix-cache hits (v2.3 on prints `Prefix P - Suffix S` per allocation)")
        o.would_tell_more = [
            "the Prometheus /metrics endpoint: tgi_batch_current_size, tgi_queue_size, prefill and decode durations",
            "OpenTelemetry traces (--otlp-endpoint): each batch's prefill and decode spans",
            "this project's recorder with a vLLM server: every scheduler step, per request",
        ]
        if self.embedding_lines:
            o.warnings.append(f"{self.embedding_lines:,} line(s) of text-embeddings-inference, an embeddings server "
                              "(no generation, no scheduler to watch): not read")
        elif not self.successes and not self.errors:
            o.warnings.append("no text-generation-inference request line could be read")


def _stamp(text: str):
    m = STAMP.search(text)
    return (m["date"], None, m["hms"]) if m else None


def _idle(reqs: list[dict]) -> list[list[float]]:
    """[start, end] of each span in which no logged request was between its arrival and its end."""
    iv = sorted((q["t"] - q["total_ms"] / 1e3, q["t"]) for q in reqs if q.get("t") is not None and "total_ms" in q)
    out = []
    reach = None
    for a, b in iv:
        if reach is not None and a > reach:
            out.append([round(reach, 6), round(a, 6)])
        reach = b if reach is None else max(reach, b)
    return out
