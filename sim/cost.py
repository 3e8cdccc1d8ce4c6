"""Cost models: how long one forward pass (a scheduler step) takes, from its composition.

Every model answers ``step_time(num_tokens, context_lens)``:

* ``num_tokens`` -- all tokens scheduled in the step (prompt chunks plus decode tokens);
* ``context_lens`` -- for each scheduled sequence, the number of KV tokens it attends over
  (its tokens computed before this step plus those it adds in this step).

Models are registered by name in :data:`COST_MODELS`; ``make_cost_model(name, **kwargs)``
builds one.  A step with no tokens runs nothing and costs 0 in every model.

The module also holds hardware, model-shape and interconnect presets and the transfer and
prefill arithmetic used for swap, recompute and disaggregated-serving estimates.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, ClassVar, Iterable, Mapping, Sequence

import numpy as np

# --------------------------------------------------------------------------------------------
# Presets
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Hardware:
    """An accelerator as the roofline sees it: peak dense matmul rate, memory bandwidth, capacity."""

    name: str
    peak_flops: float  # FLOP/s, dense (no structured sparsity)
    bandwidth: float  # bytes/s
    memory_bytes: float


# Figures are the vendors' published dense numbers; the datasheets quote sparse tensor rates
# ("with sparsity") at twice these values.
HARDWARE: dict[str, Hardware] = {
    # NVIDIA Ada GPU architecture whitepaper, appendix table for GeForce RTX 4090:
    # 165.2 TFLOP/s peak FP16 tensor (FP32 accumulate), 1,008 GB/s GDDR6X, 24 GB.
    "rtx4090": Hardware("RTX 4090", 165.2e12, 1008e9, 24e9),
    # NVIDIA A100 Tensor Core GPU datasheet, A100 80GB SXM:
    # 312 TFLOP/s BF16 tensor (624 with sparsity), 2,039 GB/s HBM2e, 80 GB.
    "a100-80gb-sxm": Hardware("A100 80GB SXM", 312e12, 2039e9, 80e9),
    # NVIDIA H100 Tensor Core GPU datasheet, H100 SXM:
    # 1,979 TFLOP/s BF16 with sparsity -> 989 dense, 3.35 TB/s HBM3, 80 GB.
    "h100-sxm": Hardware("H100 SXM", 989e12, 3.35e12, 80e9),
    # NVIDIA H200 Tensor Core GPU datasheet (SXM):
    # 1,979 TFLOP/s BF16 with sparsity -> 989 dense, 4.8 TB/s HBM3e, 141 GB.
    "h200": Hardware("H200", 989e12, 4.8e12, 141e9),
}


@dataclass(frozen=True)
class ModelShape:
    """What a decoder-only model costs per token: its weights and its KV cache."""

    name: str
    params: float
    bits_per_weight: float
    kv_bytes_per_token: float

    @property
    def weight_bytes(self) -> float:
        return self.params * self.bits_per_weight / 8

    @property
    def flops_per_token(self) -> float:
        """Matmul FLOPs for one token through the weights (a multiply and an add per parameter)."""
        return 2 * self.params


def _kv_bytes_per_token(layers: int, kv_heads: int, head_dim: int, bytes_per_value: int = 2) -> int:
    """K and V, for every layer and KV head: 2 * layers * kv_heads * head_dim * bytes."""
    return 2 * layers * kv_heads * head_dim * bytes_per_value


# Shapes from the models' published configs (Hugging Face config.json):
#   Llama 3.1 8B : 8.03e9 params, 32 layers, 8 KV heads (GQA), head_dim 128
#                  -> 2 * 32 * 8 * 128 * 2 B = 131,072 B = 128 KiB per token in F16.
#   Llama 3.1 70B: 70.6e9 params, 80 layers, 8 KV heads, head_dim 128
#                  -> 2 * 80 * 8 * 128 * 2 B = 327,680 B = 320 KiB per token in F16.
#   Llama 3.2 1B : 1.24e9 params, 16 layers, 8 KV heads, head_dim 64
#                  -> 2 * 16 * 8 * 64 * 2 B = 32,768 B = 32 KiB per token in F16.
# 4.5 bits per weight is a typical 4-bit GGUF quantisation (Q4_K_M) including its scales.
MODELS: dict[str, ModelShape] = {
    "8B": ModelShape("8B, 4.5 bits/weight", 8.03e9, 4.5, _kv_bytes_per_token(32, 8, 128)),
    "8B-fp16": ModelShape("8B, FP16", 8.03e9, 16, _kv_bytes_per_token(32, 8, 128)),
    "70B": ModelShape("70B, 4.5 bits/weight", 70.6e9, 4.5, _kv_bytes_per_token(80, 8, 128)),
    "70B-fp16": ModelShape("70B, FP16", 70.6e9, 16, _kv_bytes_per_token(80, 8, 128)),
    "1B-fp16": ModelShape("1B, FP16", 1.24e9, 16, _kv_bytes_per_token(16, 8, 64)),
}


@dataclass(frozen=True)
class Link:
    """An interconnect at its nominal one-direction rate."""

    name: str
    bandwidth: float  # bytes/s, one direction


LINKS: dict[str, Link] = {
    # PCI-SIG: 16 GT/s per lane, 128b/130b encoding -> 31.5 GB/s per direction for x16.
    "pcie4-x16": Link("PCIe 4.0 x16 (31.5 GB/s)", 31.5e9),
    # PCI-SIG: 32 GT/s per lane -> 63 GB/s per direction for x16.
    "pcie5-x16": Link("PCIe 5.0 x16 (63 GB/s)", 63e9),
    # NVIDIA H100 datasheet: 900 GB/s NVLink (4th gen) total, i.e. 450 GB/s per direction.
    "nvlink-h100": Link("NVLink, H100 (450 GB/s per direction)", 450e9),
    # InfiniBand NDR: 400 Gb/s per port = 50 GB/s.
    "infiniband-ndr": Link("InfiniBand NDR 400 Gb/s (50 GB/s)", 50e9),
    # 100 Gigabit Ethernet: 100 Gb/s = 12.5 GB/s.
    "ethernet-100g": Link("Ethernet 100 Gb/s (12.5 GB/s)", 12.5e9),
}


def _preset(table: Mapping[str, Any], value: Any, kind: str) -> Any:
    if isinstance(value, str):
        try:
            return table[value]
        except KeyError:
            raise KeyError(f"unknown {kind} preset {value!r}; known: {sorted(table)}") from None
    return value


def hardware_preset(value: str | Hardware) -> Hardware:
    return _preset(HARDWARE, value, "hardware")


def model_preset(value: str | ModelShape) -> ModelShape:
    return _preset(MODELS, value, "model")


def link_preset(value: str | Link) -> Link:
    return _preset(LINKS, value, "link")


# --------------------------------------------------------------------------------------------
# Transfer and prefill arithmetic
# --------------------------------------------------------------------------------------------


def kv_bytes(num_tokens: float, model: str | ModelShape) -> float:
    """Bytes of KV cache held for ``num_tokens`` tokens of one sequence."""
    return num_tokens * model_preset(model).kv_bytes_per_token


def transfer_ms(num_bytes: float, link: str | Link) -> float:
    """Milliseconds to move ``num_bytes`` one way over ``link`` at its nominal rate."""
    return num_bytes / link_preset(link).bandwidth * 1000


def swap_ms(num_tokens: float, model: str | ModelShape, link: str | Link = "pcie4-x16",
            round_trip: bool = True) -> float:
    """Milliseconds to swap a sequence's KV cache to host memory (and back, by default)."""
    one_way = transfer_ms(kv_bytes(num_tokens, model), link)
    return 2 * one_way if round_trip else one_way


def prefill_ms(num_tokens: float, model: str | ModelShape, hardware: str | Hardware,
               efficiency: float = 0.5) -> float:
    """Milliseconds of matmul arithmetic to prefill ``num_tokens`` at ``efficiency`` of peak.

    Counts only the weight matmuls (2 FLOPs per parameter per token), not attention.
    """
    flops = num_tokens * model_preset(model).flops_per_token
    return flops / (hardware_preset(hardware).peak_flops * efficiency) * 1000


def recompute_ms(num_tokens: float, model: str | ModelShape, hardware: str | Hardware,
                 efficiency: float = 0.5) -> float:
    """Milliseconds to rebuild a preempted sequence's KV cache: a prefill of its tokens."""
    return prefill_ms(num_tokens, model, hardware, efficiency)


# --------------------------------------------------------------------------------------------
# Cost models
# --------------------------------------------------------------------------------------------


def _context_total(context_lens: Sequence[int] | np.ndarray) -> int:
    if isinstance(context_lens, np.ndarray):
        return int(context_lens.sum())
    return sum(context_lens)


class CostModel:
    """Base class: subclasses implement :meth:`step_time_totals`."""

    name: ClassVar[str] = ""
    time_unit: ClassVar[str] = ""

    def step_time(self, num_tokens: int, context_lens: Sequence[int] | np.ndarray = ()) -> float:
        """Time of one step that schedules ``num_tokens`` tokens over sequences with these contexts."""
        return self.step_time_totals(num_tokens, _context_total(context_lens))

    def step_time_totals(self, num_tokens: int, context_total: int) -> float:
        """Same as :meth:`step_time`, given only the summed context length (all models are linear in it)."""
        raise NotImplementedError

    #: True for models that price a step by its make-up (prefill vs decode tokens, sequences):
    #: the simulator then calls :meth:`step_time_plan` with the scheduler's plan
    uses_shape: ClassVar[bool] = False

    def step_time_plan(self, plan: Any) -> float:
        """Time of the step a scheduler planned (a StepPlan: entries, num_tokens, context_tokens)."""
        return self.step_time_totals(plan.num_tokens, plan.context_tokens)

    def describe(self) -> dict[str, Any]:
        """A JSON-able description for trace metadata."""
        raise NotImplementedError


COST_MODELS: dict[str, type[CostModel]] = {}


def register(cls: type[CostModel]) -> type[CostModel]:
    """Class decorator: make a cost model available under ``cls.name``."""
    COST_MODELS[cls.name] = cls
    return cls


def make_cost_model(name: str, **kwargs: Any) -> CostModel:
    """Build the registered cost model ``name`` with its keyword arguments."""
    try:
        cls = COST_MODELS[name]
    except KeyError:
        raise KeyError(f"unknown cost model {name!r}; known: {sorted(COST_MODELS)}") from None
    return cls(**kwargs)


@register
@dataclass
class UnitsCost(CostModel):
    """The lesson's toy roofline in abstract units.

    Streaming the weights costs ``weight_units`` per step; arithmetic costs one unit per
    ``tokens_per_unit`` tokens; a step takes the larger.  Context length is ignored.
    """

    weight_units: float = 10.0
    tokens_per_unit: float = 50.0

    name: ClassVar[str] = "units"
    time_unit: ClassVar[str] = "units"

    def step_time_totals(self, num_tokens: int, context_total: int = 0) -> float:
        if num_tokens <= 0:
            return 0.0
        return max(self.weight_units, num_tokens / self.tokens_per_unit)

    @property
    def crossover_tokens(self) -> float:
        """Tokens per step at which arithmetic starts to dominate."""
        return self.weight_units * self.tokens_per_unit

    def describe(self) -> dict[str, Any]:
        return {"name": self.name, "time_unit": self.time_unit,
                "weight_units": self.weight_units, "tokens_per_unit": self.tokens_per_unit}


@register
@dataclass
class RooflineCost(CostModel):
    """Roofline step time in milliseconds: ``max(bytes / bandwidth, flops / peak)``.

    Bytes are the weights, read once per step, plus every scheduled sequence's KV cache
    (``kv_bytes_per_token`` times its context).  FLOPs are ``2 * params`` per scheduled token.
    ``efficiency`` scales both peaks (1.0 = datasheet numbers).
    """

    hardware: str | Hardware = "rtx4090"
    model: str | ModelShape = "8B"
    efficiency: float = 1.0

    name: ClassVar[str] = "roofline"
    time_unit: ClassVar[str] = "ms"

    def __post_init__(self) -> None:
        self.hardware = hardware_preset(self.hardware)
        self.model = model_preset(self.model)

    def step_bytes(self, context_total: int) -> float:
        return self.model.weight_bytes + context_total * self.model.kv_bytes_per_token

    def step_flops(self, num_tokens: int) -> float:
        return num_tokens * self.model.flops_per_token

    def memory_ms(self, context_total: int) -> float:
        return self.step_bytes(context_total) / (self.hardware.bandwidth * self.efficiency) * 1000

    def compute_ms(self, num_tokens: int) -> float:
        return self.step_flops(num_tokens) / (self.hardware.peak_flops * self.efficiency) * 1000

    def step_time_totals(self, num_tokens: int, context_total: int) -> float:
        if num_tokens <= 0:
            return 0.0
        return max(self.memory_ms(context_total), self.compute_ms(num_tokens))

    def bound(self, num_tokens: int, context_lens: Sequence[int] | np.ndarray = ()) -> str:
        """``"memory"`` or ``"compute"``: which roof limits this step."""
        total = _context_total(context_lens)
        return "compute" if self.compute_ms(num_tokens) > self.memory_ms(total) else "memory"

    def flop_utilization(self, num_tokens: int, context_lens: Sequence[int] | np.ndarray = ()) -> float:
        """Share (0..1) of the datasheet peak FLOP rate the step uses."""
        step_ms = self.step_time(num_tokens, context_lens)
        if step_ms == 0:
            return 0.0
        return self.step_flops(num_tokens) / (step_ms / 1000) / self.hardware.peak_flops

    def crossover_tokens(self, context_total: int = 0) -> float:
        """Tokens per step at which arithmetic time equals memory time."""
        return self.step_bytes(context_total) * self.hardware.peak_flops / (
            self.hardware.bandwidth * self.model.flops_per_token)

    def sequences_that_fit(self, context_len: int) -> int:
        """How many sequences of ``context_len`` tokens fit in memory next to the weights."""
        free = self.hardware.memory_bytes - self.model.weight_bytes
        return max(0, math.floor(free / (context_len * self.model.kv_bytes_per_token)))

    def describe(self) -> dict[str, Any]:
        return {"name": self.name, "time_unit": self.time_unit, "efficiency": self.efficiency,
                "hardware": vars(self.hardware), "model": vars(self.model)}


Sample = tuple[int, Sequence[int], float]


@register
@dataclass
class CalibratedCost(CostModel):
    """A linear model fitted to measured step times.

    ``time = per_token * num_tokens + per_context_token * sum(context_lens) + per_step``.
    Build one from measurements with :meth:`fit`.
    """

    per_token: float = 0.0
    per_context_token: float = 0.0
    per_step: float = 0.0
    unit: str = "ms"
    fit_info: dict[str, Any] = field(default_factory=dict)

    name: ClassVar[str] = "calibrated"

    @property
    def time_unit(self) -> str:  # type: ignore[override]
        return self.unit

    def step_time_totals(self, num_tokens: int, context_total: int) -> float:
        if num_tokens <= 0:
            return 0.0
        return self.per_token * num_tokens + self.per_context_token * context_total + self.per_step

    @classmethod
    def fit(cls, samples: Iterable[Sample], unit: str = "ms", nonnegative: bool = False) -> "CalibratedCost":
        """Least-squares fit from ``(num_tokens, context_lens, measured_time)`` samples.

        nonnegative: no constant may come out below zero (a step cannot cost negative time);
        the most negative one is pinned to 0 and the others refitted, until none is negative."""
        rows = [(num_tokens, _context_total(contexts), time) for num_tokens, contexts, time in samples]
        if len(rows) < 3:
            raise ValueError("need at least 3 samples to fit 3 constants")
        data = np.asarray(rows, dtype=float)
        design = np.column_stack([data[:, 0], data[:, 1], np.ones(len(data))])
        times = data[:, 2]
        free = [0, 1, 2]
        coef = np.zeros(3)
        while free:
            sub, _, rank, _ = np.linalg.lstsq(design[:, free], times, rcond=None)
            coef = np.zeros(3)
            coef[free] = sub
            if not nonnegative or (sub >= 0).all():
                break
            free.pop(int(np.argmin(sub)))
        predicted = design @ coef
        spread = float(((times - times.mean()) ** 2).sum())
        residual = float(((times - predicted) ** 2).sum())
        info = {"samples": len(rows), "rank": int(np.linalg.matrix_rank(design[:, free])) if free else 0,
                "r2": 1.0 - residual / spread if spread > 0 else 1.0,
                "rmse": math.sqrt(residual / len(rows))}
        return cls(float(coef[0]), float(coef[1]), float(coef[2]), unit, info)

    def describe(self) -> dict[str, Any]:
        return {"name": self.name, "time_unit": self.unit, "per_token": self.per_token,
                "per_context_token": self.per_context_token, "per_step": self.per_step,
                "fit": dict(self.fit_info)}


# The terms a fitted cost form may use, per step: "tokens" all scheduled tokens, "prefill" the
# prompt and recompute chunks' tokens, "decode" the decode tokens (one per decoding sequence),
# "context" the summed KV context, "seqs" the sequences in the batch; every form adds a per-step
# constant. "linear" is CalibratedCost's form.
COST_FORMS: dict[str, tuple[str, ...]] = {
    "linear": ("tokens", "context"),
    "prefill_decode": ("prefill", "decode", "context"),
    "per_seq": ("tokens", "context", "seqs"),
    "prefill_decode_seq": ("prefill", "decode", "context", "seqs"),
}


def form_terms(form: str) -> tuple[str, ...]:
    try:
        return COST_FORMS[form]
    except KeyError:
        raise ValueError(f"unknown cost form {form!r}; known: {', '.join(COST_FORMS)}") from None


def _term_values(terms: Sequence[str], prefill: float, decode: float, context: float, seqs: float) -> list[float]:
    v = {"tokens": prefill + decode, "prefill": prefill, "decode": decode, "context": context, "seqs": seqs}
    return [v[t] for t in terms]


def _lstsq_pinned(design: np.ndarray, times: np.ndarray, nonnegative: bool) -> tuple[np.ndarray, list[int]]:
    """Least squares; with nonnegative, the most negative constant is pinned to 0 and the rest refitted
    until none is negative. (coefficients, the columns left free)."""
    free = list(range(design.shape[1]))
    coef = np.zeros(design.shape[1])
    while free:
        sub = np.linalg.lstsq(design[:, free], times, rcond=None)[0]
        coef = np.zeros(design.shape[1])
        coef[free] = sub
        if not nonnegative or (sub >= 0).all():
            break
        free.pop(int(np.argmin(sub)))
    return coef, free


@register
@dataclass
class FormCost(CostModel):
    """A linear model of a step's make-up, fitted to measured step times: ``time = per_step +
    sum(coef[term] * term)`` over the terms of ``form`` (:data:`COST_FORMS`), e.g. for
    ``prefill_decode_seq`` per prefill token, per decode token, per context token and per
    sequence. Build one with :meth:`fit`. The simulator prices each step from its plan
    (:meth:`step_time_plan`); a caller that knows only the totals (:meth:`step_time_totals`) gets
    the tokens counted as prefill tokens of one sequence, :meth:`step_time` one sequence per
    context length."""

    form: str = "prefill_decode"
    coef: dict[str, float] = field(default_factory=dict)
    per_step: float = 0.0
    unit: str = "ms"
    fit_info: dict[str, Any] = field(default_factory=dict)

    name: ClassVar[str] = "calibrated_form"
    uses_shape: ClassVar[bool] = True

    def __post_init__(self) -> None:
        self.coef = {t: float(self.coef.get(t, 0.0)) for t in form_terms(self.form)}

    @property
    def time_unit(self) -> str:  # type: ignore[override]
        return self.unit

    def step_time_shape(self, prefill: float, decode: float, context: float, seqs: float) -> float:
        """Time of a step of `prefill` prompt/recompute tokens, `decode` decode tokens, summed
        context `context`, over `seqs` sequences (0 when it schedules no token)."""
        if prefill + decode <= 0:
            return 0.0
        terms = form_terms(self.form)
        return self.per_step + sum(self.coef[t] * x for t, x in zip(terms, _term_values(terms, prefill, decode,
                                                                                         context, seqs)))

    def step_time_totals(self, num_tokens: int, context_total: int) -> float:
        return self.step_time_shape(num_tokens, 0, context_total, 1)

    def step_time(self, num_tokens: int, context_lens: Sequence[int] | np.ndarray = ()) -> float:
        return self.step_time_shape(num_tokens, 0, _context_total(context_lens), max(len(context_lens), 1))

    def step_time_plan(self, plan: Any) -> float:
        decode = sum(e.tokens for e in plan.entries if e.kind == "decode")
        return self.step_time_shape(plan.num_tokens - decode, decode, plan.context_tokens, len(plan.entries))

    @classmethod
    def fit(cls, rows: Iterable[tuple[float, float, float, float, float]], form: str = "prefill_decode",
            unit: str = "ms", nonnegative: bool = False) -> "FormCost":
        """Least-squares fit from ``(prefill, decode, context, seqs, measured_time)`` rows per step.
        nonnegative: as in :meth:`CalibratedCost.fit`."""
        terms = form_terms(form)
        data = np.asarray(list(rows), dtype=float).reshape(-1, 5)
        if len(data) < len(terms) + 1:
            raise ValueError(f"need at least {len(terms) + 1} samples to fit {len(terms) + 1} constants")
        design = np.column_stack([np.asarray([_term_values(terms, *r[:4]) for r in data]), np.ones(len(data))])
        times = data[:, 4]
        coef, free = _lstsq_pinned(design, times, nonnegative)
        predicted = design @ coef
        spread = float(((times - times.mean()) ** 2).sum())
        residual = float(((times - predicted) ** 2).sum())
        info = {"samples": len(data), "rank": int(np.linalg.matrix_rank(design[:, free])) if free else 0,
                "r2": 1.0 - residual / spread if spread > 0 else 1.0, "rmse": math.sqrt(residual / len(data))}
        return cls(form, {t: float(c) for t, c in zip(terms, coef[:-1])}, float(coef[-1]), unit, info)

    def describe(self) -> dict[str, Any]:
        return {"name": self.name, "time_unit": self.unit, "form": self.form, "per_step": self.per_step,
                **{f"per_{t}": c for t, c in self.coef.items()}, "fit": dict(self.fit_info)}


class ScaledCost(CostModel):
    """Another cost model's step times times `factor`: a run as if every step were that much
    slower or faster (what a prediction band simulates)."""

    name: ClassVar[str] = "scaled"

    def __init__(self, base: CostModel, factor: float):
        self.base, self.factor = base, float(factor)
        self.uses_shape = bool(getattr(base, "uses_shape", False))  # type: ignore[misc]

    @property
    def time_unit(self) -> str:  # type: ignore[override]
        return self.base.time_unit

    def step_time_totals(self, num_tokens: int, context_total: int) -> float:
        return self.factor * self.base.step_time_totals(num_tokens, context_total)

    def step_time(self, num_tokens: int, context_lens: Sequence[int] | np.ndarray = ()) -> float:
        return self.factor * self.base.step_time(num_tokens, context_lens)

    def step_time_plan(self, plan: Any) -> float:
        return self.factor * self.base.step_time_plan(plan)

    def describe(self) -> dict[str, Any]:
        return {"name": self.name, "factor": self.factor,
                "base": self.base.describe() if hasattr(self.base, "describe") else type(self.base).__name__}


class MeasuredCost(CostModel):
    """CalibratedCost's linear model, refitted as a live run goes, from every busy step it has
    measured so far (the engine's, in ms): what SLO admission prices the work ahead with on a
    real engine, where no model was chosen in advance. Running sums of the least-squares normal
    equations make a step O(1) however long the run. Until `min_steps` steps are in (the first,
    which allocates buffers and warms caches, is left out) it knows nothing: `ready` is False and
    admission lets everyone in rather than guess. No constant may come out below zero."""

    name: ClassVar[str] = "measured"

    def __init__(self, unit: str = "ms", min_steps: int = 8, skip_first: int = 1):
        self.unit = unit
        self.min_steps = int(min_steps)
        self.skip = int(skip_first)
        self.n = 0
        self.xtx = np.zeros((3, 3))
        self.xty = np.zeros(3)
        self._coef: np.ndarray | None = None

    @property
    def time_unit(self) -> str:  # type: ignore[override]
        return self.unit

    def observe(self, num_tokens: int, context_total: int, elapsed: float) -> None:
        """One measured step: its tokens, its summed context and how long it took."""
        if num_tokens <= 0 or not math.isfinite(elapsed):
            return
        if self.skip > 0:
            self.skip -= 1
            return
        x = np.array([float(num_tokens), float(context_total), 1.0])
        self.xtx += np.outer(x, x)
        self.xty += x * float(elapsed)
        self.n += 1
        self._coef = None

    @property
    def ready(self) -> bool:
        return self.n >= self.min_steps

    def coefficients(self) -> np.ndarray:
        """(per_token, per_context_token, per_step): the fit so far (zeros before any step)."""
        if self._coef is None:
            coef, free = np.zeros(3), [0, 1, 2]
            while free and self.n:
                a = self.xtx[np.ix_(free, free)]
                sub = np.linalg.lstsq(a, self.xty[free], rcond=None)[0]   # singular (one batch shape): least norm
                coef = np.zeros(3)
                coef[free] = sub
                if (sub >= 0).all():
                    break
                free.pop(int(np.argmin(sub)))
            self._coef = coef
        return self._coef

    def step_time_totals(self, num_tokens: int, context_total: int) -> float:
        if num_tokens <= 0:
            return 0.0
        a, b, c = self.coefficients()
        return float(a * num_tokens + b * context_total + c)

    def describe(self) -> dict[str, Any]:
        a, b, c = (float(v) for v in self.coefficients())
        return {"name": self.name, "time_unit": self.unit, "per_token": a, "per_context_token": b,
                "per_step": c, "steps": self.n, "ready": self.ready}


# --------------------------------------------------------------------------------------------
# Named cost presets (what the dashboard offers; scenarios name one by key)
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class CostPreset:
    """A ready-made cost model: a label for people, and make_cost_model's arguments."""

    label: str
    model: str
    kwargs: Mapping[str, Any] = field(default_factory=dict)

    def build(self) -> CostModel:
        return make_cost_model(self.model, **dict(self.kwargs))


COST_PRESETS: dict[str, CostPreset] = {
    "units": CostPreset("Lesson units: max(10, tokens / 50)", "units"),
    "rtx4090-8B": CostPreset("Roofline, RTX 4090, 8B at 4.5 bits (ms)", "roofline",
                             {"hardware": "rtx4090", "model": "8B"}),
    "a100-8B-fp16": CostPreset("Roofline, A100 80GB, 8B FP16 (ms)", "roofline",
                               {"hardware": "a100-80gb-sxm", "model": "8B-fp16"}),
    "h100-70B": CostPreset("Roofline, H100 SXM, 70B at 4.5 bits (ms)", "roofline",
                           {"hardware": "h100-sxm", "model": "70B"}),
    "h200-70B-fp16": CostPreset("Roofline, H200, 70B FP16 (ms)", "roofline",
                                {"hardware": "h200", "model": "70B-fp16"}),
}


def cost_from_preset(key: str) -> CostModel:
    """The cost model of COST_PRESETS[key]; ValueError naming the known keys if there is none."""
    try:
        preset = COST_PRESETS[key]
    except KeyError:
        raise ValueError(f"unknown cost preset {key!r}; known: {', '.join(COST_PRESETS)}") from None
    return preset.build()
