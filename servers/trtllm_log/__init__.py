"""TensorRT-LLM server logs (`trtllm-serve`): the executor's iteration lines and start-up settings,
read into servers.server_log's LogRead (lines.py: the lines; reader.py: the reader)."""
from .reader import TRTLLMLogReader


def read_trtllm_log(src, name: str = ""):
    """A TensorRT-LLM log (path, bytes or binary stream; plain or gzip) -> LogRead."""
    return TRTLLMLogReader(name).read(src)


__all__ = ["TRTLLMLogReader", "read_trtllm_log"]
