"""Read an SGLang server's log (its default INFO output): one record per `Prefill batch` / `Decode
batch` line, the request lines, what was not understood, and what the log cannot say.

    from servers.sglang_log import read_sglang_log
    read = read_sglang_log("server.log")   # path, bytes or stream; plain or gzip
    read.to_json()                          # the CLI's JSON; servers.server_log.build.to_trace(read)

Modules: lines.py (the line forms and their fields), reader.py (records, ranks, the verdict). The
shared line loop, wrappers and clock are in servers.server_log.
"""
from .reader import SGLangLogReader, read_sglang_log

__all__ = ["SGLangLogReader", "read_sglang_log"]
