"""What fleet_launch reads from the real routers and sends them, checked without running any:
the worker order from each router's own words (the fixtures' saved log and /workers answer),
the seeded shared-prefix traffic, and the tiny model's words for text prompts."""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from servers.vllm import fleet_launch, tiny_model, workloads

FLEETS = Path(__file__).resolve().parents[3] / "tests" / "fixtures" / "fleet"


def test_vllm_router_s_worker_order_is_read_from_its_log():
    for d in ("kit-vllm-cache_aware-tokens", "vllm-cache_aware-tokens", "vllm-round_robin-tokens"):
        m = json.loads((FLEETS / d / "manifest.json").read_text())
        log = (FLEETS / d / m["router_log"]).read_text()
        assert json.loads(fleet_launch.READY_LINE.search(log).group(1)) == m["workers"]
    coloured = ('\x1b[2m2026-12-03 10:56:49\x1b[0m \x1b[32m INFO\x1b[0m \x1b[2mvllm_router_rs::server\x1b[0m: '
                'Router ready | workers: ["http://127.0.0.1:1", "http://127.0.0.1:2"]')
    m = fleet_launch.READY_LINE.search(fleet_launch.ANSI.sub("", coloured))
    assert json.loads(m.group(1)) == ["http://127.0.0.1:1", "http://127.0.0.1:2"]


def test_sglang_router_s_worker_order_is_its_workers_answer():
    for d in ("sglang-cache_aware-text", "sglang-round_robin-text"):
        m = json.loads((FLEETS / d / "manifest.json").read_text())
        answer = json.loads((FLEETS / d / m["workers_json"]).read_text())
        assert fleet_launch.sglang_workers(answer) == m["workers"]
        assert [f"rec-{u.rsplit(':', 1)[1]}.jsonl.gz" for u in m["workers"]] == m["recordings"]
    sick = {"workers": [{"url": "http://127.0.0.1:1", "is_healthy": True}, {"url": "http://127.0.0.1:2",
                                                                           "is_healthy": False}]}
    assert fleet_launch.sglang_workers(sick) == []   # not yet: wait until both are healthy


def test_the_fleet_traffic_is_seeded_with_shared_prefixes():
    a, b = workloads.fleet_prefixes(7001, 48), workloads.fleet_prefixes(7001, 48)
    assert a == b and a != workloads.fleet_prefixes(7002, 48)
    assert [r["id"] for r in a] == [f"fleet-{i}" for i in range(48)]
    at = [r["at_ms"] for r in a]
    assert at == sorted(at) and 8_000 < at[-1] < 16_000   # mean gap 0.25 s
    groups = {}
    for r in a:
        assert 3 <= min(r["prompt"]) and max(r["prompt"]) < tiny_model.VOCAB and 8 <= r["max_tokens"] <= 48
        if r["group"] >= 0:
            groups.setdefault(r["group"], []).append(r["prompt"])
    assert sorted(groups) == [0, 1, 2] and 20 <= sum(map(len, groups.values())) <= 36
    for prompts in groups.values():   # every request of a group starts with the same 96-160 tokens
        n = min(len(p) for p in prompts) - 8
        head = prompts[0][:96]
        assert all(p[:96] == head for p in prompts) and n >= 96


def test_the_tiny_model_s_words():
    assert [tiny_model.word(i) for i in (0, 1, 2, 3, 4095)] == ["<unk>", "<s>", "</s>", "w0", "w4092"]
    assert tiny_model.text([3, 100, 5]) == "w0 w97 w2"
    with pytest.raises(ValueError, match="outside the tiny model's vocabulary"):
        tiny_model.word(4096)
