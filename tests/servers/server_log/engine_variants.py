"""Generated variants of the real excerpts: each wrapper users' logs come under, applied to the
same lines (seeded, deterministic), for tests/servers/server_log/."""
from __future__ import annotations

import gzip
import random
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]
FIXTURES = ROOT / "tests" / "fixtures" / "engine_logs"
SGLANG = sorted((FIXTURES / "sglang").glob("*.log"))
VLLM = sorted((FIXTURES / "vllm").glob("*.log"))
ALL = SGLANG + VLLM


def lines(path: Path) -> list[str]:
    return path.read_text().splitlines()


def docker(ls, rnd):
    out = []
    for i, x in enumerate(ls):
        frac = str(rnd.randrange(10 ** 9)).rstrip("0") or "0"   # RFC3339Nano trims zeros: widths vary
        out.append(f"2025-06-01T10:00:{i % 60:02d}.{frac}Z {x}")
    return out


def kubectl(ls, rnd):
    return [f"2025-06-01T10:00:{i % 60:02d}.123456+02:00 {x}" for i, x in enumerate(ls)]


def journald(ls, rnd):
    return [f"Jun  1 10:00:{i % 60:02d} gpu-host-7 sglang-server[4242]: {x}" for i, x in enumerate(ls)]


def ray(ls, rnd):
    return [f"(RayWorkerWrapper pid={1000 + i % 3}, ip=10.0.0.{i % 4}) {x}" for i, x in enumerate(ls)]


def ray_repeated(ls, rnd):
    return [f"(pid=77) {x} [repeated {2 + i % 5}x across cluster]" if i % 2 else f"(pid=77) {x}"
            for i, x in enumerate(ls)]


def ansi(ls, rnd):
    out = []
    for x in ls:
        if x.startswith("["):
            end = x.find("]") + 1
            out.append(f"\x1b[32m{x[:end]}\x1b[0m{x[end:]}")
        else:
            out.append(f"\x1b[1m\x1b[36m{x}\x1b[0m")
    return out


def ansi_residue(ls, rnd):   # the escape byte lost in a paste
    return [f"[32m{x}[0m" for x in ls]


def tqdm_glued(ls, rnd):
    return [(f"Processing: {10 * (i % 10)}%|{'#' * (i % 10)}{' ' * (10 - i % 10)}| {i}/10 [00:01<00:00,  4.69it/s]"
             + ("\r" if i % 2 else "") + x) for i, x in enumerate(ls)]


def crlf(ls, rnd):
    return [x + "\r" for x in ls]


def wrap(width):
    def f(ls, rnd):
        out = []
        for x in ls:
            out += [x[i:i + width] for i in range(0, len(x), width)] or [""]
        return out
    f.__name__ = f"hard_wrap_{width}"
    return f


WRAPPERS = [docker, kubectl, journald, ray, ray_repeated, ansi, ansi_residue, tqdm_glued, crlf, wrap(80), wrap(100),
            wrap(120)]


def variant(path: Path, wrapper) -> bytes:
    rnd = random.Random(f"{path.name}:{wrapper.__name__}")
    return ("\n".join(wrapper(lines(path), rnd)) + "\n").encode()


def gz(data: bytes) -> bytes:
    return gzip.compress(data, mtime=0)
