"""Which engine wrote a log, by its content (never its name): the first few MB are scanned for
each engine's own lines, and the engine with the most wins.

- SGLang: `Prefill batch` / `Decode batch` / `new fill batch` lines, bare `#running-req: N, #token:`;
- vLLM: its logging prefix `INFO MM-DD HH:MM:SS [file.py:N]` (or `file.py:N]`), stats lines, Iteration lines;
- llama-server: the scheduler's `slot ` / `srv  ` / `que  ` lines, `llama_` / `print_timings` / `build:`;
- TensorRT-LLM: its loggers' `[TRT-LLM]` / `[TensorRT-LLM]` tags, its iteration lines;
- text-generation-inference: its targets (`text_generation_router`, `text_generation_launcher`),
  its request lines' times (`total_time="..."`);
- LMDeploy: its stats line after `[date time DPn]`, the Python logger's ` - lmdeploy - LEVEL - `,
  TurboMind's `[TM][`, the forward lines;
- Ollama: gin's access lines (`[GIN] 2024/08/19 - 14:13:01 | 200 | ...`), its slog lines'
  `source=file.go:N`.
"""
from __future__ import annotations

import re
from dataclasses import dataclass

from sim.limits import archive_kind, unpack_it

from .text import HEAD_BYTES, clean, read_head

ENGINES = ("sglang", "vllm", "llama-server", "trtllm", "tgi", "lmdeploy", "ollama")
LABELS = {"sglang": "SGLang", "vllm": "vLLM", "llama-server": "llama-server", "trtllm": "TensorRT-LLM",
          "tgi": "text-generation-inference", "lmdeploy": "LMDeploy", "ollama": "Ollama"}
_SGLANG = re.compile(r"(?:Prefill batch|Decode batch|new fill batch)(?: \[\d{1,15}\])?[.,] "   # ` [N]`: 0.5.2x's iteration
                     r"|#running-req: \d+, #token: \d+")
_VLLM = re.compile(r"(?:INFO|DEBUG|WARNING|ERROR) \d\d-\d\d \d\d:\d\d:\d\d(?:\.\d+)? \[?[\w./-]+\.py:\d+\] "
                   r"|Avg prompt throughput: [\d.]+ tokens/s|Iteration\(\d+\): \d+ context requests, ")
_LLAMA = re.compile(r"(?:^|\s)(?:slot +\w+: id +\d+|srv +\w+: |que +\w+: )|\bllama_\w+: |\bprint_timings: "
                    r"|^build: \d+ \(|update_slots: ")

_TRTLLM = re.compile(r"\[TRT-LLM\]|\[TensorRT-LLM\]|\biter = \d+, global_rank = \d+, rank = \d+, "
                     r"|\blibtensorrtllm\.cc:\d+\] |\"Iteration Counter\":\d")
_TGI = re.compile(r"text_generation_(?:router|launcher|server)|\btotal_time=\"[\d.]+(?:s|ms|µs|ns)\"")
# LMDeploy's stats line outscores the vLLM-shaped match of the same line (4 points to 3)
_LMDEPLOY_STATS = re.compile(r"\[\d{4}-\d\d-\d\d \d\d:\d\d:\d\d (?:DP\d+|Engine \d+)\] Avg (?:prompt throughput|thr \(in/out\)): ")
_LMDEPLOY = re.compile(r" - lmdeploy - (?:DEBUG|INFO|WARNING|ERROR) - |\[TM\]\[(?:INFO|WARNING|ERROR|DEBUG)\]"
                       r"|Sending forward inputs: num_tokens=|\[Forward\] \[\d+, \d+\), dc")
_OLLAMA = re.compile(r"\[GIN\] \d{4}/\d\d/\d\d - \d\d:\d\d:\d\d \|"
                     r"|\blevel=(?:INFO|WARN|ERROR|DEBUG) source=[\w.-]+\.go:\d+ msg=")
_VLLM_WORDS = ("INFO", "DEBUG", "WARNING", "ERROR", "Avg prompt throughput: ", "Iteration(")
_LLAMA_WORDS = ("slot ", "srv ", "que ", "llama_", "print_timings: ", "build: ", "update_slots: ")


@dataclass
class Verdict:
    engine: str              # one of ENGINES, or "" when none was recognised
    counts: dict
    binary: bool
    reason: str


def detect_text(head: bytes) -> Verdict:
    nul = head[:65536].count(b"\x00")
    text = head.decode("utf-8", errors="replace")
    counts = {e: 0 for e in ENGINES}
    for line in text.splitlines():
        if len(line) > 65536:
            line = line[:65536]
        if "\x1b" in line or "#033[" in line:   # colours off, as the readers take them off
            line = clean(line)
        # each regex only where a word it needs is in the line (the same verdict, a fraction of the time)
        if ("batch" in line or "#running-req: " in line) and _SGLANG.search(line):
            counts["sglang"] += 3
        if any(w in line for w in _VLLM_WORDS) and _VLLM.search(line):
            counts["vllm"] += 3 if "throughput" in line or "context requests" in line else 1
        if any(w in line for w in _LLAMA_WORDS) and _LLAMA.search(line):
            counts["llama-server"] += 1
        if ("TRT-LLM" in line or "TensorRT-LLM" in line or "iter = " in line or "tensorrtllm" in line
                or "Iteration Counter" in line) and _TRTLLM.search(line):
            counts["trtllm"] += 3 if "iter = " in line or "Iteration Counter" in line else 1
        if "Avg " in line and _LMDEPLOY_STATS.search(line):
            counts["lmdeploy"] += 4
        elif ("lmdeploy" in line or "[TM][" in line or "orward" in line) and _LMDEPLOY.search(line):
            counts["lmdeploy"] += 3 if "orward" in line else 1
        if ("[GIN]" in line or ".go:" in line) and _OLLAMA.search(line):
            counts["ollama"] += 3 if "[GIN]" in line else 1
        if ("text_generation" in line or "total_time=" in line) and _TGI.search(line):
            counts["tgi"] += 3 if "Success" in line else 1
    sample = head[:65536]
    ctrl = sum(1 for b in sample if b < 9 or 13 < b < 32) if sample else 0
    binary = bool(sample) and (nul > 0.01 * len(sample) or ctrl > 0.1 * len(sample))
    best = max(ENGINES, key=lambda e: (counts[e], -ENGINES.index(e)))
    if counts[best] == 0:
        if not head.strip():
            why = "the file is empty"
        elif binary:
            kind = archive_kind(head[:512])
            why = unpack_it(kind) if kind else "the file is binary, not a text log"
        else:
            why = "none of their scheduler lines are in it"
        return Verdict("", counts, binary, why)
    return Verdict(best, counts, binary, f"{LABELS[best]} lines found ({counts[best]:,} points)")


def detect(src, limit: int = HEAD_BYTES) -> Verdict:
    """The verdict on a path, bytes or a seekable stream (plain or gzip), from its first `limit` bytes."""
    pos = src.tell() if hasattr(src, "tell") else None
    head = read_head(src, limit)
    if pos is not None:
        src.seek(pos)
    return detect_text(head)
