"""text-generation-inference (Hugging Face TGI) server logs: the router's line per request served,
its errors, the prefix cache's allocations and the launcher's settings, read into
servers.server_log's LogRead (lines.py: the lines; reader.py: the reader)."""
from .reader import TGILogReader


def read_tgi_log(src, name: str = ""):
    """A TGI log (path, bytes or binary stream; plain or gzip) -> LogRead."""
    return TGILogReader(name).read(src)


__all__ = ["TGILogReader", "read_tgi_log"]
