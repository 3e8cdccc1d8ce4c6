"""Fleets: N replicas (each a full scheduler with its own config and KV pool) behind a router,
on one clock. sim/fleet/fleet.py runs them; routing.py says what a router is and
routers/ holds the policies; trace.py is the fleet Trace; metrics.py its numbers;
recorded.py replays a real fleet's recordings under a router policy."""
from .fleet import MAX_REPLICAS, FleetSettings, simulate_fleet
from .metrics import fleet_summary
from .routers import make_router, router_names
from .routing import ROUTERS
from .trace import FleetTrace

__all__ = ["FleetSettings", "FleetTrace", "MAX_REPLICAS", "ROUTERS", "fleet_summary", "make_router",
           "router_names", "simulate_fleet"]
