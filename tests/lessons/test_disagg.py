"""sim/lessons/disagg.py: lesson Example 10's numbers, the break-even speed and the crossover prompt."""
from __future__ import annotations

import math

import numpy as np
import pytest

from sim.cost import LINKS, Link
from sim.lessons import lesson
from sim.lessons.disagg import (ALL_LINKS, LESSON_LINKS, Setup, breakeven_bandwidth, crossover_prompt, crossovers,
                                custom_link, kv_mib, lesson_table, prefill_time_ms, prompt_grid, ratio_vs_bandwidth,
                                resolve_link, sweep, transfer_time_ms)


def test_lesson_table_matches_the_printout():
    t = lesson_table()
    assert t["prompt"].tolist() == [1024, 8192, 32768]
    assert t["kv_mib"].round(0).tolist() == [128, 1024, 4096]
    assert t["prefill_ms"].round(1).tolist() == [33.3, 266.1, 1064.2]
    assert t["nvlink-h100_ms"].round(2).tolist() == [0.30, 2.39, 9.54]
    assert t["infiniband-ndr_ms"].round(2).tolist() == [2.68, 21.47, 85.90]
    assert t["ethernet-100g_ms"].round(2).tolist() == [10.74, 85.90, 343.60]
    # "NVLink adds about 1%, InfiniBand about 8%, and 100 Gb/s Ethernet about 32%", at every length
    for link, pct in zip(LESSON_LINKS, (0.9, 8.1, 32.3)):
        assert (100 * t[f"{link}_ratio"]).round(1).tolist() == [pct] * 3
    # the same numbers as sim.lessons.lesson's Example 10
    rows = lesson.disaggregation()
    assert [r["prefill_ms"] for r in rows] == t["prefill_ms"].round(1).tolist()
    assert [r["link_ms"] for r in rows] == t[[f"{k}_ms" for k in LESSON_LINKS]].round(2).values.tolist()


def test_breakeven_bandwidth_makes_transfer_equal_prefill():
    s = Setup()
    bw = breakeven_bandwidth(s)
    assert bw / 1e9 == pytest.approx(4.0358, rel=1e-4)  # 131,072 B / 32.5 us per token
    link = Link("break-even", bw)
    for p in (100, 1024, 32768):
        assert transfer_time_ms(p, link, s) == pytest.approx(prefill_time_ms(p, s))
    curve = ratio_vs_bandwidth([bw / 1e9], [1024, 8192], s)
    assert np.allclose(curve["ratio"], 1.0)


def test_linear_model_has_no_prompt_crossover():
    s = Setup()
    assert crossover_prompt("nvlink-h100", s) == 0.0  # faster than break-even: cheaper at every length
    assert math.isinf(crossover_prompt("ethernet-25g", s))  # slower: never
    c = crossovers(list(LESSON_LINKS), s)
    assert c["crossover_prompt"].tolist() == [0.0, 0.0, 0.0]


@pytest.mark.parametrize("setup", [Setup(overhead_ms=2.0), Setup(attention=True), Setup(attention=True, overhead_ms=5)])
@pytest.mark.parametrize("link", ["ethernet-100g", "ethernet-25g", "ethernet-10g"])
def test_crossover_prompt_solves_transfer_equals_prefill(setup, link):
    p = crossover_prompt(link, setup)
    if p in (0.0, math.inf):  # no crossover: one side wins at every prompt length
        lengths = [16, 256, 4096, 65536, 1 << 20]
        cheaper = [transfer_time_ms(n, link, setup) < prefill_time_ms(n, setup) for n in lengths]
        assert cheaper == [p == 0.0] * len(lengths)
        return
    assert transfer_time_ms(p, link, setup) == pytest.approx(prefill_time_ms(p, setup), rel=1e-9)
    assert transfer_time_ms(p * 0.9, link, setup) > prefill_time_ms(p * 0.9, setup)  # slower below
    assert transfer_time_ms(p * 1.1, link, setup) < prefill_time_ms(p * 1.1, setup)  # cheaper above


def test_attention_makes_long_prompts_cheaper_to_move():
    s = Setup(attention=True)
    p = crossover_prompt("ethernet-25g", s)
    assert 15_000 < p < 20_000  # 25 GbE stops losing to prefill near 18k tokens of an 8B prompt
    # the attention term is 2 * 32 layers * 4096 * P^2 FLOPs: at 32k tokens it adds about 53%
    extra = prefill_time_ms(32768, s) / prefill_time_ms(32768, Setup()) - 1
    assert extra == pytest.approx(2 * 32 * 4096 * 32768 / (2 * 8.03e9), rel=1e-9)


def test_sweep_and_grid():
    g = prompt_grid(128, 131072)
    assert g[0] == 128 and g[-1] == 131072 and {1024, 8192, 32768} <= set(g.tolist())
    assert np.all(np.diff(g) > 0)
    df = sweep(g, ["nvlink-h100", custom_link(40)], Setup())
    assert len(df) == 2 * len(g)
    assert set(df["link"]) == {"nvlink-h100", "Custom 40 Gb/s (5 GB/s)"}
    assert np.allclose(df["ttft_ms"], df["prefill_ms"] + df["transfer_ms"])
    assert kv_mib(1024, Setup()) == 128


def test_links():
    assert set(LINKS) < set(ALL_LINKS)
    assert resolve_link("ethernet-10g").bandwidth == 1.25e9
    assert custom_link(100).bandwidth == 12.5e9
    with pytest.raises(KeyError, match="unknown link"):
        resolve_link("carrier-pigeon")
