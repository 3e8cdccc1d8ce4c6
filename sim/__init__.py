"""Scheduler Lab's simulation core: workloads, the KV block pool, the scheduler, cost
models, metrics, and the one Trace type. numpy/pandas only; no Streamlit, no torch.
The lesson's one-idea models, built on this core, are in sim.lessons."""
from .scheduler import SchedulerConfig, VllmScheduler
from .simulate import simulate
from .trace import Trace
from .workload import Request, Workload

__all__ = ["Request", "SchedulerConfig", "Trace", "VllmScheduler", "Workload", "simulate"]
