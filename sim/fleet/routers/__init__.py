"""The router policies, one module per family; importing this package registers them all."""
from . import basic  # noqa: F401
from . import hashing  # noqa: F401
from . import cache_aware  # noqa: F401
from . import llmd  # noqa: F401
from . import dynamo  # noqa: F401
