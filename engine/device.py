"""Where the engine runs: device, dtype and CPU threads, and a timer that means what it says."""
from __future__ import annotations

import os
import time

import torch

DTYPES = {"float32": torch.float32, "fp32": torch.float32, "float64": torch.float64, "fp64": torch.float64,
          "bfloat16": torch.bfloat16, "bf16": torch.bfloat16, "float16": torch.float16, "fp16": torch.float16}


def resolve_device(name: str = "auto") -> torch.device:
    if name == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    return torch.device(name)


def resolve_dtype(name: str | torch.dtype, device: torch.device) -> torch.dtype:
    """auto: float32 on the CPU; bfloat16 on CUDA (float16 where bf16 is unsupported)."""
    if isinstance(name, torch.dtype):
        return name
    if name == "auto":
        if device.type == "cuda":
            return torch.bfloat16 if torch.cuda.is_bf16_supported() else torch.float16
        return torch.float32
    try:
        return DTYPES[name]
    except KeyError:
        raise ValueError(f"unknown dtype {name!r}; known: auto, {', '.join(DTYPES)}") from None


def setup_threads(threads: int = 0) -> int:
    """CPU threads for torch: `threads` if > 0, else 1 on machines with <= 2 cores (two OpenMP
    threads on two shared vCPUs made small decode steps 3-50x slower), else torch's default."""
    if threads > 0:
        torch.set_num_threads(threads)
    elif (os.cpu_count() or 1) <= 2:
        torch.set_num_threads(1)
    return torch.get_num_threads()


def synchronize(device: torch.device) -> None:
    """Wait for queued device work, so a timer closed after it measures the work itself."""
    if device.type == "cuda":
        torch.cuda.synchronize(device)


class PhaseTimer:
    """Consecutive phases of one step, in milliseconds (perf_counter)."""

    def __init__(self):
        self.t = time.perf_counter()
        self.ms: dict[str, float] = {}

    def lap(self, phase: str) -> float:
        now = time.perf_counter()
        self.ms[phase] = self.ms.get(phase, 0.0) + (now - self.t) * 1000.0
        self.t = now
        return now
