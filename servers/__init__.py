"""What real servers leave behind, turned into the one Trace (sim.trace) that every page draws.

- llama_server/: reads a `llama-server -v` log and rebuilds every batch the server ran.
- vllm/: records a running vLLM server's steps (a scheduler subclass) and reads the recording.

This package's own __init__ imports nothing: the vLLM recorder is imported through it inside a
user's vLLM server, whose environment has neither pandas nor Streamlit.
"""
