"""Pure Plotly figure builders (no Streamlit): pages -> figures -> sim."""
