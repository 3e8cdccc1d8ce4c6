"""Read the log an LLM server already writes (SGLang, vLLM, TensorRT-LLM, text-generation-inference,
LMDeploy, Ollama or llama-server), whatever its name, plain or gzip: which engine wrote it
(detect.py), one record per scheduler or request line (the engine's reader: servers.sglang_log,
servers.vllm_log, servers.trtllm_log, servers.tgi_log, servers.lmdeploy_log, servers.ollama_log;
llama-server's goes to servers.llama_server), and the one Trace (build.py).

    log = read_log("server.log")            # path or bytes; ValueError (one plain line) if it is no such log
    log.read.to_json()                       # the CLI's JSON (`python -m sim log FILE --json`)
    log.trace                                # the Trace (steps, gauges, unknown spans)

Modules: text.py (input, gzip, limits, colours, carriage returns), wrappers.py (collectors'
prefixes), fields.py (`key: value` fields), base.py (the line loop, hard wrap, clock, LogRead),
detect.py, build.py. Bad input never raises anything but that one ValueError; a line that cannot
be read is counted and shown, not guessed.
"""
from __future__ import annotations

import importlib
from dataclasses import dataclass

from sim.trace import Trace

from .base import LogRead
from .detect import LABELS, Verdict, detect

__all__ = ["LABELS", "LogRead", "ServerLog", "Verdict", "detect", "read_log"]

# each engine's reader, imported when a log of it is read (llama-server's goes to its own reader)
READERS = {"sglang": "servers.sglang_log.reader:SGLangLogReader", "vllm": "servers.vllm_log.reader:VLLMLogReader",
           "trtllm": "servers.trtllm_log.reader:TRTLLMLogReader", "tgi": "servers.tgi_log.reader:TGILogReader",
           "lmdeploy": "servers.lmdeploy_log.reader:LMDeployLogReader",
           "ollama": "servers.ollama_log.reader:OllamaLogReader"}


@dataclass
class ServerLog:
    verdict: Verdict
    read: LogRead
    trace: Trace

    @property
    def engine(self) -> str:
        return self.read.engine


def _llama(src, name: str, verdict: Verdict, progress=None) -> ServerLog:
    from servers.llama_server import read_llama_log, summary
    trace = read_llama_log(src, name=name or None, progress=progress)
    s = summary(trace)
    meta = trace.meta
    read = LogRead(engine="llama-server", name=name, era=f"build {s['build'] or 'unknown'}",
                   not_understood=int(s["unparsed_lines"] or 0),
                   not_understood_examples=[{"line": None, "why": "not understood", "text": str(x)[:300]}
                                            for x in (meta.get("unparsed_examples") or [])[:10]],
                   warnings=list(meta.get("warnings") or []), clock=str(s["clock"]),
                   wrappers=list(meta.get("line_prefixes") or []),
                   cannot_say=list(meta.get("format_limits") or []),
                   extra={"llama": s, "reader": "servers.llama_server (as `python -m sim llamalog`)"})
    return ServerLog(verdict, read, trace)


def read_log(src, name: str = "", engine: str | None = None, progress=None) -> ServerLog:
    """The log at a path or in bytes, read by its engine's reader (`engine` forces one).
    progress(done, total): bytes of the file read (compressed bytes of a gzip) and its size (None
    when it cannot be told), about every MiB and once at the end, where done == total."""
    if not isinstance(src, (bytes, bytearray, str)) and not hasattr(src, "__fspath__"):
        src = src.read()          # a stream: read once, then detect and parse from the bytes
    elif not isinstance(src, (bytes, bytearray)):
        open(src, "rb").close()   # a path that cannot be read says why (OSError), not "the file is empty"
    verdict = detect(src)
    which = engine or verdict.engine
    if not which:
        raise ValueError(f"Not an SGLang, vLLM, TensorRT-LLM, TGI, LMDeploy, Ollama or llama-server log: "
                         f"{verdict.reason}.")
    if which == "llama-server":
        return _llama(src, name, verdict, progress)
    from .build import to_trace
    module, cls = READERS[which].split(":")
    read = getattr(importlib.import_module(module), cls)(name).read(src, progress=progress)
    if verdict.counts.get("llama-server") and which != "llama-server":
        read.extra["llama_server_points"] = verdict.counts["llama-server"]
    if read.other_engine_lines:
        read.warnings.append("the file also holds " + ", ".join(f"{n:,} line(s) of {LABELS.get(k, k)}"
                                                                for k, n in sorted(read.other_engine_lines.items()))
                             + ": read as " + LABELS[which] + " only")
    read.extra["detected"] = {"engine": which, "points": verdict.counts}
    return ServerLog(verdict, read, to_trace(read))
