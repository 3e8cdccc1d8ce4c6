"""LMDeploy server logs (`lmdeploy serve api_server`, PyTorch and TurboMind engines): its stats lines,
the engines' forward lines, each request's start and end, the engine's settings, read into
servers.server_log's LogRead (lines.py: the lines; reader.py: the reader)."""
from .reader import LMDeployLogReader


def read_lmdeploy_log(src, name: str = ""):
    """An LMDeploy log (path, bytes or binary stream; plain or gzip) -> LogRead."""
    return LMDeployLogReader(name).read(src)


__all__ = ["LMDeployLogReader", "read_lmdeploy_log"]
