"""The router policies, one module per family; importing this package registers them all."""
from ..routing import ROUTERS, Router
from . import basic  # noqa: F401
from . import hashing  # noqa: F401
from . import cache_aware  # noqa: F401
from . import llmd  # noqa: F401
from . import dynamo  # noqa: F401


def make_router(name: str, num_replicas: int, config: dict | None = None, seed: int = 0) -> Router:
    """A router by name, its config checked (ValueError in one plain sentence)."""
    try:
        cls = ROUTERS[name]
    except KeyError:
        raise ValueError(f"unknown router {name!r}; known: {', '.join(router_names())}") from None
    return cls(num_replicas, config, seed)


def router_names() -> list[str]:
    return list(ROUTERS)
