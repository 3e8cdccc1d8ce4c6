"""Scheduler Lab's simulation core: workloads, the KV block pool, the scheduler, cost
models, metrics, and the one Trace type. numpy/pandas only; no Streamlit, no torch."""
from .scheduler import SchedulerConfig, VllmScheduler
from .simulate import simulate
from . import static  # noqa: F401  (registers the "static" scheduler)
from .trace import Trace
from .workload import Request, Workload

__all__ = ["Request", "SchedulerConfig", "Trace", "VllmScheduler", "Workload", "simulate"]
