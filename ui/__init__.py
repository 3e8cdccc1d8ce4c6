"""Streamlit helpers shared by the pages: settings in the URL (state), the cached run (runs), downloads (exports)."""
