"""The recording's format name and version, shared by the recorder and the reader (stdlib only)."""

FORMAT = "schedlab-vllm-recording"
VERSION = 1
# The vLLM releases the recorder was checked inside: their own Scheduler (and AsyncScheduler where
# the simulator models it) run with the recorder plugged in, every recording re-simulated step for
# step. 0.32.0: tests/servers/vllm/test_recorder_driven.py (CI); 0.33.0 and 0.34.0:
# bench/vllm_oracle/check_recorder.py, and the recordings it made in tests/fixtures/vllm_recorded.
CHECKED_WITH = ("0.32.0", "0.33.0", "0.34.0")
