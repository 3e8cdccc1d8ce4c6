"""Read a llama-server verbose log (`-v`) and rebuild what the server did, as a Trace.

    trace = read_llama_log("server.log")             # a path (.gz too), bytes, a file object,
    trace = read_llama_log(open(p, "rb"), progress=cb)   # or an iterator of lines
    summary(trace)                                   # the CLI's summary object
    wl = workload_from_trace(trace)                  # simulate(wl) / simulate(wl, {"scheduler": "vllm"})
    runs = resimulate(trace, configs)                # resim.py: the log's workload re-simulated

The log formats are described in shared/llama-logs/FORMAT.md; both corpus builds (c392e5094
"OLD", 34af94cd9 "NEW") and the documented formats in between are understood. Lines of the
scheduler's families that are not understood are counted in meta["unparsed_lines"] with a few
examples. The modules, in the order a log goes through them:
- lines.py:    the three line families (one regex each) and the records found in them;
- native.py:   the C tokenizer (llamascan.c), built on first use and loaded with ctypes;
- blocks.py:   the input as blocks of whole lines (paths, bytes, streams, gzip, line lists),
               and the read-ahead thread;
- prefixes.py: collectors' line prefixes (docker/kubectl times, journald, `[pid] `, LM Studio),
               taken off each line first; their time is the clock when the server printed none;
- scan.py:     a block's records, by the C tokenizer or the regexes, and their times;
- machine.py:  the state machine: tasks, slots and model calls (the hot loop);
- handlers.py: what each rare record does;
- reader.py:   LlamaLogReader (the three mixins above) and read_llama_log;
- build.py:    the Trace built at the end of the log (what its tables hold);
- summary.py:  server runs, the CLI's summary, the server's settings, the log's workload;
- resim.py:    that workload re-simulated, on the model-call clock or the log's own.

Speed and memory: the input is read in blocks of a few MB (never all lines at once). The C
tokenizer finds the candidates with SIMD compares and parses the frequent records' fields;
the rare ones go back to their family's regex, so each line has one definition. Without a C
compiler the regexes find every record. Both give byte-identical Traces (the reader's tests
parse every input both ways). From a file or a binary stream, with the C tokenizer, a second
thread reads and tokenizes each block while the state machine works through the one before.
Memory is a few blocks plus the result.

Bad input never raises: bytes are decoded with errors="replace" where text is kept, binary
garbage is skipped, a cut last line / a log cut in the middle of a batch / interleaved lines are
handled, and what went wrong is said in meta["warnings"]. Token text (which may hold HTML or
JavaScript) is never interpreted.
"""
from .build import FINISH_REASONS, SOURCE
from .reader import LlamaLogReader, read_llama_log
from .summary import llama_config, server_runs_table, summary, workload_from_trace

__all__ = ["FINISH_REASONS", "SOURCE", "LlamaLogReader", "read_llama_log", "llama_config", "server_runs_table",
           "summary", "workload_from_trace"]
