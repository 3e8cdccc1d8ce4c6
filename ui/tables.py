"""A table that may be long: the page shows its first rows, a download holds all of them.

    capped_table(per_request(trace), key="pb_requests_table", what="requests", file_name="run.requests.csv")

st.dataframe sends every row to the browser: a million-request run's table is hundreds of MB of
Arrow, on every rerun. Past SHOWN_ROWS, the first rows are shown with a sentence saying so, and
the CSV of the whole table is made only when its button is pressed.
"""
from __future__ import annotations

import pandas as pd
import streamlit as st

SHOWN_ROWS = 10_000


def capped_table(table: pd.DataFrame, key: str, what: str, file_name: str, limit: int = SHOWN_ROWS, **kwargs) -> None:
    shown = table if len(table) <= limit else table.head(limit)
    if len(table) > limit:
        st.caption(f"The first {limit:,} of {len(table):,} {what}; the CSV below holds them all.")
    st.dataframe(shown, hide_index=True, key=key, **kwargs)
    if len(table) > limit:
        st.download_button(f"All {len(table):,} {what} (CSV)", data=lambda: table.to_csv(index=False),
                           file_name=file_name, mime="text/csv", on_click="ignore", key=f"{key}_csv",
                           icon=":material/download:")
