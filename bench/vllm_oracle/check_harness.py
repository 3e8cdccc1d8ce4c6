"""That the project's vLLM 0.34.0 harness gives the real traces back: it is run, on a Python that
has vLLM 0.34.0 (bench/vllm_oracle/requirements.txt), on the shared 0.34 cases (sync and async)
and on the first committed random draw in both modes, and every output must equal the trace it
was made from, byte for byte. Not part of CI (it needs the 336 MB wheel).

  python bench/vllm_oracle/check_harness.py --python /tmp/oracle034/bin/python
"""
from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
HERE = Path(__file__).resolve().parent
CASES = ROOT / "tests" / "fixtures" / "vllm034_random"
MODES = ("sync", "async")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--python", required=True, help="a Python with vLLM 0.34.0 installed")
    ap.add_argument("--shared", default=str(ROOT.parent / "shared" / "vllm"),
                    help="the folder with cases034/ and cases_async034/")
    a = ap.parse_args()
    wanted = {}
    for folder in ("cases034", "cases_async034"):
        for w in sorted((Path(a.shared) / folder).glob("*.workload.json")):
            wanted[w] = w.with_name(w.name.replace(".workload.json", ".vllm.jsonl"))
    bad = 0
    with tempfile.TemporaryDirectory() as tmp:
        out_dir = Path(tmp)
        if wanted:
            subprocess.run([a.python, str(HERE / "trace034.py"), "--out-dir", str(out_dir), *map(str, wanted)],
                           check=True, capture_output=True)
            for w, trace in wanted.items():
                same = (out_dir / trace.name).read_text() == trace.read_text()
                bad += not same
                print(f"{'same' if same else 'DIFFERENT'}: {w.name}")
        draw = sorted(CASES.glob("*.workload.json"))[0]
        name = draw.name[: -len(".workload.json")]
        for mode in MODES:
            out = out_dir / f"{mode}.jsonl"
            subprocess.run([a.python, str(HERE / "trace034.py"), f"--{mode}", str(draw), "-o", str(out)],
                           check=True, capture_output=True)
            same = out.read_text() == (CASES / f"{name}.{mode}.vllm.jsonl").read_text()
            bad += not same
            print(f"{'same' if same else 'DIFFERENT'}: {name} ({mode})")
    print("all equal" if not bad else f"{bad} traces differ")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
