"""Read a vLLM server's log (its default INFO output): one record per stats line (`Avg prompt
throughput: ..., Running: N reqs, Waiting: N reqs, GPU KV cache usage: X%, ...`, V0 and V1, with
or without `Engine 00N:`), SpecDecoding lines, request lines, what was not understood, and what the
log cannot say. (servers.vllm reads this project's own step recordings of a vLLM server.)

    from servers.vllm_log import read_vllm_log
    read = read_vllm_log("vllm.log")        # path, bytes or stream; plain or gzip
    read.to_json()

Modules: lines.py (the line forms and their fields), reader.py (records, engines, the verdict).
"""
from .reader import VLLMLogReader, read_vllm_log

__all__ = ["VLLMLogReader", "read_vllm_log"]
