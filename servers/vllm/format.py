"""The recording's format name and version, shared by the recorder and the reader (stdlib only)."""

FORMAT = "schedlab-vllm-recording"
VERSION = 1
RECORDED_WITH = "0.32.0"   # the vLLM version the recorder was built and tested against
