"""figures.kv_memory: the animated block map + timeline, victims, and recompute vs swap costs."""
from __future__ import annotations

import json

import numpy as np
import plotly.graph_objects as go
import plotly.io as pio

from figures.kv_memory import cost_figure, fits_frames, memory_figure, timeline_figure, victims_figure
from plotly_util import decode
from sim import scenarios
from sim.analysis import block_owner_frames
from sim.preemption import blocks_held, kv_tokens, preemption_table, step_kinds, swap_vs_recompute
from sim.simulate import simulate


def _views(tr):
    held = blocks_held(tr)
    return held, kv_tokens(tr, held), step_kinds(tr, held), preemption_table(tr)


def test_memory_figure_frames_carry_the_block_grid():
    tr = simulate(scenarios.workload("lesson_preemption"))
    held, tok, kinds, pre = _views(tr)
    assert fits_frames(tr)
    fig = memory_figure(tr, held, tok, kinds, pre)
    go.Figure(fig.to_dict())
    spec = json.loads(pio.to_json(fig))
    meta = spec["layout"]["meta"]
    assert meta["frames"] == 99 and meta["blocks"] == 21 and meta["opens_at"] == 22 and meta["hover_per_frame"]
    assert spec["layout"]["sliders"][0]["active"] == 21  # the frame of step 22
    frames = {f["name"]: f for f in spec["frames"]}
    f22 = frames["22"]
    assert f22["traces"] == [0] and set(f22["data"][0]) == {"type", "z", "customdata"}
    z = decode(f22["data"][0]["z"])
    rows, cols = z.shape
    codes = block_owner_frames(tr, [22])[0]
    assert z.dtype == np.int8 and (z.reshape(-1)[:21] == codes).all() and (z.reshape(-1)[21:] == -4).all()
    assert (codes[14:17] == -1).all() and codes[18] == 0  # r3's blocks are free; r0 took block 18
    hover = np.asarray(f22["data"][0]["customdata"]).reshape(-1)
    assert hover[18] == "block 18 · <b>r0</b> (tenant default) · 81 KV tokens · decode"
    # the opening state is the frame of step 22
    assert (decode(spec["data"][0]["z"]) == z).all()
    # timeline on the second subplot: one stacked area per request, preemptions labelled
    tl = [t for t in spec["data"] if t.get("xaxis") == "x2"]
    assert [t["name"] for t in tl if "stackgroup" in t] == ["r0", "r1", "r2", "r3"]
    labels = [a["text"] for a in spec["layout"]["annotations"]]
    assert "<b>r3</b>: 60 tok to recompute" in labels and "<b>r2</b>: 112 tok to recompute" in labels
    assert f22["layout"]["shapes"][0]["xref"] == "x2"


def test_big_maps_do_not_animate():
    tr = simulate(scenarios.workload("lesson_preemption"), {"num_gpu_blocks": 2000})
    assert not fits_frames(tr)


def test_timeline_and_victims_figures():
    wl = scenarios.workload("lesson_preemption")
    tr = simulate(wl)
    held, _, _, pre = _views(tr)
    t = timeline_figure(held, pre, 20, cursor=30)
    go.Figure(t.to_dict())
    assert t.layout.meta["cursor"] == 30 and t.layout.shapes[0].x0 == 30
    v = victims_figure({"FCFS": (held, pre), "Priority": (held, pre.iloc[:1])}, 20)
    go.Figure(v.to_dict())
    assert v.layout.meta["victims"] == {"FCFS": ["r3", "r2"], "Priority": ["r3"]}


def test_cost_figure_marks_the_lessons_point():
    tr = simulate(scenarios.workload("lesson_preemption"))
    pre = preemption_table(tr)
    fig = cost_figure(swap_vs_recompute(range(0, 4001, 100)), pre)
    go.Figure(fig.to_dict())
    mark = fig.layout.meta["mark"]
    assert mark["tokens"] == 2000 and round(mark["swap_ms"], 1) == 16.6 and round(mark["recompute_ms"], 1) == 388.9
    pts = [d for d in fig.data if d.name and d.name.startswith("this run")]
    assert list(pts[0].x) == [60, 112]


def test_memory_figure_shows_cached_free_blocks_and_the_null_block():
    """With prefix caching on, freed blocks that still hold a hashed prefix are drawn apart from
    plain free ones (code -2, teal), and block 0 is vLLM's null block (code -3, dark) in every frame."""
    from figures.common import CACHED_FREE, FREE, NULL_BLOCK
    tr = simulate(scenarios.workload("prefix_sharing"))
    assert tr.steps["cached_free_blocks"].max() > 0
    held, tok, kinds, pre = _views(tr)
    spec = json.loads(pio.to_json(memory_figure(tr, held, tok, kinds, pre)))
    heat = spec["data"][0]
    steps = tr.steps.set_index("step")["cached_free_blocks"]
    seen_cached = False
    for f in spec["frames"]:
        z = decode(f["data"][0]["z"]).reshape(-1)
        hover = np.asarray(f["data"][0]["customdata"]).reshape(-1)
        assert z[0] == -3 and hover[0] == "block 0 · the null block (never allocated)"
        n_cached = int((z == -2).sum())
        assert n_cached == steps[int(f["name"])]   # as many as the run's cached-free count at that step
        if n_cached:
            seen_cached = True
            i = int(np.flatnonzero(z == -2)[0])
            assert hover[i] == f"block {i} · free, cached prefix"
    assert seen_cached
    colours = {c for _, c in heat["colorscale"]}
    assert {CACHED_FREE, FREE, NULL_BLOCK} <= colours


def test_ids_and_tenants_reach_plotly_as_written():
    """An uploaded workload's request ids and tenants go into legends, hovers and the victims'
    labels HTML-escaped (Plotly renders <a href>, <b>, <br> there), "%" too (a hovertemplate
    would fill in "%{x}")."""
    from dataclasses import replace
    wl = scenarios.workload("lesson_preemption")
    evil = {r.id: f"<a href='https://evil.example'>{r.id}</a>%{{x}}" for r in wl.requests}
    wl.requests = [replace(r, id=evil[r.id], tenant="<b>t</b>") for r in wl.requests]
    tr = simulate(wl)
    held, tok, kinds, pre = _views(tr)
    specs = [json.loads(pio.to_json(f)) for f in (memory_figure(tr, held, tok, kinds, pre),
                                                    timeline_figure(held, pre, 20, cursor=30),
                                                    victims_figure({"A": (held, pre)}, 20),
                                                    cost_figure(swap_vs_recompute(range(0, 4001, 100)), pre))]
    for spec in specs:
        spec["layout"].pop("meta", None)   # data for the page, never drawn
        text = json.dumps(spec)
        assert "<a href" not in text and "<b>t</b>" not in text and "%{x}</" not in text
    assert "&lt;a href=&#x27;https://evil.example&#x27;&gt;r3&lt;/a&gt;&#37;{x}" in json.dumps(specs[1])
