"""The Fleet page's controls: one side of the router A/B (replicas, router, the router's own
knobs as typed widgets, its signal refresh, response tail, latency and seed), and a scrubber on
the fleet's clock in ms.

    A = RouterSide("a", "cache_aware")
    S = PageSettings("fleet", [*A.settings(), ...])   # keep_fleet_a_replicas, _router, _router_config, ...
    A.draw()                                          # the widgets (a container of the caller's)
    settings = A.fleet_settings(replica_configs)      # a checked FleetSettings, or ValueError (one sentence)

The router's knobs live in ONE setting, `keep_fleet_<side>_router_config`: a JSON object of the
knobs that differ from the router's defaults ("" = all defaults), so a link holds only what was
changed. Each knob's widget (key fleet_<side>_knob_<router>_<knob>, not a setting) is set from
that JSON before it is drawn and writes back to it when changed; the JSON itself is editable
too. Knobs come from sim.fleet.ROUTERS[name].defaults: a bool is a toggle, a number a number
input (0 or more), a text a choice where the router names its choices, else a text input.
"""
from __future__ import annotations

import json
import math

import streamlit as st

from sim.fleet import FleetSettings, ROUTERS, make_router, router_names
from sim.limits import load_json

from .state import Setting

MAX_PAGE_REPLICAS = 64      # replicas a fleet on the page has (the core takes up to sim.fleet.MAX_REPLICAS)
MAX_MS = 1_000_000.0        # refresh interval, response tail, router latency: up to 1,000 s
ROUTER_LABELS = {"round_robin": "round robin", "random": "random", "power_of_two": "power of two",
                 "least_loaded": "least loaded", "consistent_hash": "consistent hash",
                 "cache_aware": "cache aware (vllm-router / sglang-router)",
                 "precise_prefix": "precise prefix (llm-d)", "weighted": "weighted scorers (llm-d / GIE)",
                 "kv_cost": "KV cost (Dynamo)"}
# text knobs whose choices a router's class does not name as an attribute
_CHOICES = {("cache_aware", "granularity"): ("token", "char"), ("cache_aware", "owner"): ("creator", "least_loaded"),
            ("precise_prefix", "tie_break"): ("in_flight", "random"), ("weighted", "prefix"): ("approximate", "precise")}


def knob_choices(router: str, knob: str) -> tuple[str, ...] | None:
    """The values a text knob may take, where the router says (None: free text)."""
    cls = ROUTERS.get(router)
    if (router, knob) in _CHOICES:
        return _CHOICES[(router, knob)]
    if router == "cache_aware" and knob == "flavor":
        try:
            from sim.fleet.routers.cache_aware import FLAVORS
            return tuple(FLAVORS)
        except ImportError:
            return None
    attr = {"signal": "SIGNALS", "key": "KEYS"}.get(knob)
    vals = getattr(cls, attr, None) if attr else None
    return tuple(vals) if isinstance(vals, (tuple, list)) and vals else None


def router_label(name: str) -> str:
    return ROUTER_LABELS.get(name, name)


def parse_router_config(text: str) -> dict:
    """The JSON text of a side's router knobs as a dict; ValueError (one sentence) if it is not
    a JSON object."""
    if not text or not text.strip():
        return {}
    doc = load_json(text.encode(), "the knobs' text", max_bytes=64 * 1024, once=True)
    if not isinstance(doc, dict):
        raise ValueError('the knobs must be a JSON object, such as {"cache_threshold": 0.5}')
    return doc


def _coerce(value, default):
    """`value` as the type of the knob's default (for its widget), else the default."""
    try:
        if isinstance(default, bool):
            return value if isinstance(value, bool) else default
        if isinstance(default, int):
            return int(value) if not isinstance(value, bool) and float(value) == int(value) else default
        if isinstance(default, float):
            v = float(value)
            return v if math.isfinite(v) and not isinstance(value, bool) else default
        return value if isinstance(value, str) else default
    except (TypeError, ValueError, OverflowError):
        return default


class RouterSide:
    """One side (a or b) of the router A/B: its settings, widgets and FleetSettings."""

    def __init__(self, side: str, router: str = "round_robin", replicas: int = 4):
        self.side = side
        self.default_router = router
        self.default_replicas = replicas

    def k(self, knob: str) -> str:
        return f"keep_fleet_{self.side}_{knob}"

    def settings(self) -> list[Setting]:
        return [Setting(self.k("replicas"), self.default_replicas, int, bounds=(1, MAX_PAGE_REPLICAS)),
                Setting(self.k("router"), self.default_router, str, choices=tuple(router_names())),
                Setting(self.k("router_config"), "", str),
                Setting(self.k("refresh"), 0.0, float, bounds=(0.0, MAX_MS)),
                Setting(self.k("tail"), 0.0, float, bounds=(0.0, MAX_MS)),
                Setting(self.k("latency"), 0.0, float, bounds=(0.0, MAX_MS)),
                Setting(self.k("seed"), 0, int, bounds=(0, 2**31 - 1))]

    def apply(self, fs: FleetSettings) -> None:
        """Set this side's widgets from a FleetSettings (a scenario's)."""
        ss = st.session_state
        ss[self.k("replicas")] = int(min(max(fs.replicas, 1), MAX_PAGE_REPLICAS))
        ss[self.k("router")] = fs.router
        ss[self.k("router_config")] = json.dumps(fs.router_config, sort_keys=True) if fs.router_config else ""
        ss[self.k("refresh")] = float(fs.refresh_interval)
        ss[self.k("tail")] = float(fs.response_tail)
        ss[self.k("latency")] = float(fs.router_latency)
        ss[self.k("seed")] = int(fs.seed)

    def router_config(self) -> dict:
        return parse_router_config(st.session_state.get(self.k("router_config"), ""))

    def fleet_settings(self, replica_configs: list | None = None, replicas: int | None = None,
                       tail: float | None = None) -> FleetSettings:
        """This side as a checked FleetSettings (the router's knobs too); ValueError otherwise.
        `replica_configs`: per-replica overrides (padded with {} or cut to the replica count)."""
        ss = st.session_state
        n = int(replicas if replicas is not None else ss[self.k("replicas")])
        rc = None
        if replica_configs:
            rc = [dict(replica_configs[i]) if i < len(replica_configs) else {} for i in range(n)]
        fs = FleetSettings(replicas=n, router=ss[self.k("router")], router_config=self.router_config(),
                           seed=int(ss[self.k("seed")]), refresh_interval=float(ss[self.k("refresh")]),
                           response_tail=float(ss[self.k("tail")] if tail is None else tail),
                           router_latency=float(ss[self.k("latency")]), replica_configs=rc).check()
        make_router(fs.router, fs.replicas, fs.router_config, fs.seed)   # its knobs checked before any work
        return fs

    def title(self, replicas: int | None = None) -> str:
        ss = st.session_state
        n = replicas if replicas is not None else ss[self.k("replicas")]
        try:
            cfg = self.router_config()
        except ValueError:
            cfg = {}
        knobs = ", ".join(f"{k} {v}" for k, v in sorted(cfg.items()))
        extra = [f"refresh {ss[self.k('refresh')]:g} ms" if ss[self.k("refresh")] else "",
                 f"tail {ss[self.k('tail')]:g} ms" if ss[self.k("tail")] else "",
                 f"latency {ss[self.k('latency')]:g} ms" if ss[self.k("latency")] else "",
                 f"seed {ss[self.k('seed')]}" if ss[self.k("seed")] else ""]
        return " · ".join(x for x in [f"{self.side.upper()}: {n} replicas", router_label(ss[self.k("router")]),
                                      knobs, *extra] if x)

    # -----------------------------------------------------------------------------------------

    def _router_changed(self) -> None:
        st.session_state[self.k("router_config")] = ""   # another router's knobs mean nothing here

    def _knob_key(self, router: str, knob: str) -> str:
        return f"fleet_{self.side}_knob_{router}_{knob}"

    def _knob_changed(self, router: str, knob: str) -> None:
        ss = st.session_state
        try:
            cfg = self.router_config()
        except ValueError:
            cfg = {}
        v = ss[self._knob_key(router, knob)]
        d = ROUTERS[router].defaults[knob]
        if v == d and type(v) is type(d):
            cfg.pop(knob, None)
        else:
            cfg[knob] = v
        ss[self.k("router_config")] = json.dumps(cfg, sort_keys=True) if cfg else ""

    def draw(self, fixed_replicas: int | None = None, real: bool = False) -> None:
        """The widgets of this side. fixed_replicas: the replica count is given (a real fleet's
        recordings), shown, not chosen."""
        ss = st.session_state
        c1, c2 = st.columns([1, 2])
        if fixed_replicas is None:
            c1.number_input("Replicas", 1, MAX_PAGE_REPLICAS, step=1, key=self.k("replicas"),
                            help=f"1 to {MAX_PAGE_REPLICAS} on this page, each a full scheduler with its own KV pool.")
        else:
            c1.metric("Replicas", fixed_replicas, help="One per recording, in the router's worker order.")
        c2.selectbox("Router", router_names(), key=self.k("router"), format_func=router_label,
                     on_change=self._router_changed, help="The routing policy (sim/fleet/routers/).")
        router = ss[self.k("router")]
        defaults = ROUTERS[router].defaults
        try:
            cfg = self.router_config()
        except ValueError:
            cfg = {}
        if defaults:
            # three knobs a row, or two where a number is too long for a third of the half-page box
            # (cache_aware's 120000-ms eviction interval and 2^25-token tree were cut to "12000(")
            wide = any(isinstance(d, (int, float)) and not isinstance(d, bool)
                       and len(f"{_coerce(cfg.get(k, d), d):g}") > 5 for k, d in defaults.items())
            cols = st.columns(min(len(defaults), 2 if wide else 3))
            for j, (knob, d) in enumerate(defaults.items()):
                wk = self._knob_key(router, knob)
                want = _coerce(cfg.get(knob, d), d)
                choices = knob_choices(router, knob) if isinstance(d, str) else None
                if choices is not None and want not in choices:
                    want = d if d in choices else choices[0]
                if ss.get(wk) != want or type(ss.get(wk)) is not type(want):
                    ss[wk] = want
                col = cols[j % len(cols)]
                args = {"key": wk, "on_change": self._knob_changed, "args": (router, knob)}
                label = knob.replace("_", " ")
                if isinstance(d, bool):
                    col.toggle(label, **args)
                elif isinstance(d, int):
                    col.number_input(label, min_value=0, step=1, **args)
                elif isinstance(d, float):
                    col.number_input(label, min_value=0.0, step=0.1 if d <= 10 else 1.0, format="%g", **args)
                elif choices is not None:
                    col.selectbox(label, choices, **args)
                else:
                    col.text_input(label, max_chars=200, **args)
        else:
            st.caption("This router has no knobs.")
        cols = st.columns(3 if real else 4)
        c1, c3, c4 = cols[0], cols[-2], cols[-1]
        c1.number_input("Refresh (ms)", 0.0, MAX_MS, step=50.0, key=self.k("refresh"), format="%g",
                        help="How often the router's engine-reported signals (queue, KV use) are refreshed; "
                             "0 = exact at every decision. Its own in-flight counts are always exact.")
        if not real:   # a real fleet's tail is fitted on its recordings (the page's own input)
            cols[1].number_input("Response tail (ms)", 0.0, MAX_MS, step=5.0, key=self.k("tail"), format="%g",
                                 help="A request leaves the router's in-flight count this long after the step "
                                      "that produced its last token (streaming and the hop back).")
        c3.number_input("Router latency (ms)", 0.0, MAX_MS, step=1.0, key=self.k("latency"), format="%g",
                        help="Router decision -> the request reaches its replica. The fleet's waits, TTFT and "
                             "end-to-end times run from the router, so they include it.")
        c4.number_input("Seed", 0, 2**31 - 1, step=1, key=self.k("seed"),
                        help="The router's randomness (random, power of two, random ties).")
        with st.expander("Router knobs as JSON"):
            st.text_input("Knobs that differ from the defaults", key=self.k("router_config"),
                          placeholder="{} (every knob at its default)",
                          help="Defaults: " + (json.dumps(defaults) if defaults else "none"))
        if real:
            st.caption("The replica count and each replica's settings come from the recordings; the response "
                       "tail is set below.")


# ---------------------------------------------------------------------------------------------
# A scrubber on the fleet's clock
# ---------------------------------------------------------------------------------------------

def nice_step(raw: float) -> int:
    """1, 2 or 5 times a power of ten, at least 1 (ms)."""
    if not math.isfinite(raw) or raw <= 1:
        return 1
    p = 10 ** math.floor(math.log10(raw))
    for m in (1, 2, 5, 10):
        if m * p >= raw:
            return int(m * p)
    return int(10 * p)


def _nudge(key: str, delta: int, lo: int, hi: int) -> None:
    ss = st.session_state
    ss[key] = min(hi, max(lo, int(ss.get(key) or lo) + delta))


def time_scrubber(key: str, lo: float, hi: float, default: float | None = None, ticks: int = 500,
                  help: str | None = None) -> tuple[int, int]:
    """(the chosen time in whole ms within [lo, hi], the slider's step): ◀ ▶ move one step;
    a missing or out-of-range value becomes `default` (else lo)."""
    ss = st.session_state
    lo_i, hi_i = int(math.floor(lo)), int(math.ceil(hi))
    step = nice_step((hi_i - lo_i) / ticks)
    v = ss.get(key)
    if v is None or not lo_i <= v <= hi_i:
        d = default if default is not None and lo <= default <= hi else lo
        ss[key] = int(min(hi_i, lo_i + round((d - lo_i) / step) * step))
    if hi_i <= lo_i:
        return lo_i, step
    b1, b2, sl = st.columns([1, 1, 12], vertical_alignment="bottom")
    b1.button("◀", key=f"{key.removeprefix('keep_')}_prev", on_click=_nudge, args=(key, -step, lo_i, hi_i),
              help=f"{step:,} ms back", width="stretch")
    b2.button("▶", key=f"{key.removeprefix('keep_')}_next", on_click=_nudge, args=(key, step, lo_i, hi_i),
              help=f"{step:,} ms on", width="stretch")
    return int(sl.slider("Time on the fleet's clock (ms)", lo_i, hi_i, step=step, key=key, help=help)), step
