"""The logs of TensorRT-LLM, TGI, LMDeploy and Ollama under the wrappers users' logs come in
(docker / kubectl --timestamps, journald, Ray's process label, ANSI colours, CRLF, gzip): each is
still recognised as its engine and read to the same records as bare."""
from __future__ import annotations

import gzip

import pytest

from lmdeploy_lines import served_log
from servers.server_log import read_log
from tgi_lines import success
from trtllm_lines import iteration_log

OLLAMA = [f'[GIN] 2024/08/19 - 14:{10 + i // 60:02d}:{i % 60:02d} | 200 | {1 + i % 7}.25s |  127.0.0.1 | '
          f'POST     "/api/chat"' for i in range(40)]
LOGS = {
    "trtllm": iteration_log(60).splitlines(),
    "tgi": [success(0.5 + i * 0.2, total=200.0 + 30 * (i % 9), validation=1.0, queue=4.0 * (i % 6), tokens=6 + i % 11)
            for i in range(40)],
    "lmdeploy": served_log(20),
    "ollama": OLLAMA,
}
WRAPS = {
    "docker": lambda i, x: f"2026-05-12T08:01:{i % 60:02d}.{i:09d}Z {x}",
    "journald": lambda i, x: f"Aug 17 10:00:{i % 60:02d} gpu-host-3 server[2211]: {x}",
    "ray": lambda i, x: f"(RayWorkerWrapper pid=4242, ip=10.0.0.7) {x}",
    "ansi": lambda i, x: f"\x1b[2m{x[:10]}\x1b[0m{x[10:]}",
    "crlf": lambda i, x: x + "\r",
    # gin in debug mode colours the status and the method
    "gin-colours": lambda i, x: x.replace("| 200 |", "|\x1b[97;42m 200 \x1b[0m|").replace(
        "| POST ", "|\x1b[97;46m POST \x1b[0m"),
}


def records(r):
    """What a read gives, without the line numbers and times a wrapper may shift."""
    out = []
    for rec in r.batches + r.stats + r.requests:
        out.append(tuple(sorted((k, repr(v)) for k, v in rec.items() if k not in ("line", "time", "t"))))
    return out


@pytest.mark.parametrize("engine", sorted(LOGS))
@pytest.mark.parametrize("wrap", sorted(WRAPS) + ["gzip"])
def test_wrapped_logs_read_as_bare(engine, wrap):
    lines = LOGS[engine]
    bare = read_log(("\n".join(lines) + "\n").encode(), "bare.log").read
    assert bare.engine == engine and bare.not_understood == 0 and records(bare)
    if wrap == "gzip":
        data = gzip.compress(("\n".join(lines) + "\n").encode(), mtime=0)
    else:
        data = ("\n".join(WRAPS[wrap](i, x) for i, x in enumerate(lines)) + "\n").encode()
    got = read_log(data, f"{wrap}.log").read
    assert got.engine == engine and got.not_understood == 0, got.not_understood_examples[:2]
    assert records(got) == records(bare)
