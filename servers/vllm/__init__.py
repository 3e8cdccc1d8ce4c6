"""Where a running vLLM server's steps will be recorded and read back (the recorder, a vLLM
scheduler subclass, and its reader). Nothing here yet.

Whatever lands here may import only the standard library and vLLM at module level: the recorder
runs inside the user's vLLM process, whose environment has neither pandas nor Streamlit.
"""
