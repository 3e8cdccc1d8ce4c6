"""A running vLLM server's steps: a recorder plugged into the server, and the reader of its files.

- recorder.py:  RecordingScheduler / AsyncRecordingScheduler, vLLM's scheduler classes recording
                every step (`--scheduler-cls servers.vllm.recorder.RecordingScheduler`);
- format.py:    the recording's format name and version;
- recording.py: a recording as the standard Trace, as a workload, as the oracle's step lines
                (the public face of reader/: one pass into column buffers; RecordingStream
                fed in pieces);
- follow.py:    a recording still being written, read as it grows (complete lines, rotation,
                a file replaced or truncated, gzip); live.py: that with the reader and the verdict;
- compare.py:   the simulator held to a recording: its decisions, its predicted times;
- fleet.py:     a real fleet's recordings (one per replica behind a router) on one clock;
- fleet_launch.py: a real fleet run here (recorded replicas, vllm-router / sglang-router, a
                seeded shared-prefix client), for the fleet tests and their fixtures;
- load.py, launch.py, workloads.py, tiny_model.py, make_venv.sh: what the tests and benchmarks
                use to run a real vLLM server here (a tiny random Llama, open-loop HTTP load).

This __init__, recorder.py and format.py import only the standard library and vLLM: the
recorder runs inside the user's vLLM process, whose environment has neither pandas nor
Streamlit (tests/test_layout.py holds it).
"""
