"""The SGLang / vLLM log readers' output, one digest per log and way of reading it.

  .venv/bin/python bench/server_log_digests.py > before.txt    # then change the reader, and:
  .venv/bin/python bench/server_log_digests.py > after.txt && diff before.txt after.txt
  .venv/bin/python bench/server_log_digests.py --old DIR     # the readers of another checkout
                                                             # (git archive HEAD servers | tar -x -C DIR)

A speed-up of the readers must leave every line the same. Logs: the real excerpts
(tests/fixtures/engine_logs), every wrapper variant of them (tests/servers/server_log/
engine_variants.py), the bundled samples, and 2 MB of each era of bench/gen_server_logs.py (made
in --dir, kept there: remove it after changing the generator). Each is read as a path and as bytes;
a line is the way, the sha256 of the JSON
(`sim log --json`) and of the Trace's tables.
"""
from __future__ import annotations

import argparse
import hashlib
import random
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))
sys.path.insert(0, str(ROOT / "tests" / "servers" / "server_log"))

from gen_server_logs import SG_ERAS, VL_ERAS, generate  # noqa: E402

if "--old" in sys.argv:
    sys.path.insert(0, sys.argv[sys.argv.index("--old") + 1])
from servers.server_log import read_log  # noqa: E402
from sim.jsonout import dumps_strict  # noqa: E402


def digest(src, name: str) -> str:
    try:
        log = read_log(src, name)
    except ValueError as e:
        return "refused " + hashlib.sha256(str(e).encode()).hexdigest()[:16]
    j = hashlib.sha256(dumps_strict(log.read.to_json()).encode()).hexdigest()[:16]
    t = log.trace
    h = hashlib.sha256()
    for tab in ("requests", "steps", "events", "counters"):
        df = getattr(t, tab)
        h.update(df.to_csv(index=False).encode())
        h.update(str(list(df.dtypes.astype(str).items())).encode())
    h.update(dumps_strict(t.meta, sort_keys=True).encode())
    return f"{j} {h.hexdigest()[:16]}"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--dir", type=Path, default=Path("/tmp/schedlab-logdigests"))
    ap.add_argument("--old", type=Path, help="a directory holding another checkout's servers/ package")
    a = ap.parse_args()
    a.dir.mkdir(parents=True, exist_ok=True)
    import engine_variants as ev
    logs = sorted((ROOT / "tests" / "fixtures" / "engine_logs").glob("*/*.log"))
    logs += sorted((ROOT / "samples" / "server-logs").glob("*.log.gz"))
    for e in SG_ERAS + ("mix",):
        p = a.dir / f"sglang-{e}.log"
        if not p.exists():
            generate("sglang", p, 2.0, seed=3, era=e)
        logs.append(p)
    for e in VL_ERAS + ("mix",):
        p = a.dir / f"vllm-{e}.log"
        if not p.exists():
            generate("vllm", p, 2.0, seed=3, era=e)
        logs.append(p)
    for p in logs:
        print(f"{p.name} path {digest(p, p.name)}")
        print(f"{p.name} bytes {digest(p.read_bytes(), p.name)}")
    for p in ev.ALL:
        for w in ev.WRAPPERS:
            data = "\n".join(w(ev.lines(p), random.Random(7))).encode()
            print(f"{p.name} {w.__name__} {digest(data, p.name)}")


if __name__ == "__main__":
    main()
