"""CSV that spreadsheets open safely: every CSV the workbench writes goes through ``csv_text``.

A cell whose text starts with ``=``, ``+``, ``-``, ``@``, a tab or a carriage return is read as a formula by
Excel, LibreOffice and Google Sheets (CSV injection: ``=cmd|' /C calc'!A0``, ``@SUM(...)``); such a cell, in a
column of text or among the column names, is written with a leading ``'`` as OWASP recommends, which the
spreadsheet shows as the text itself. Numbers stay numbers: numeric columns are written as they are, and a text
cell that is a plain number (``-12.5``, ``+3``, ``1e-3``) is left alone. JSON exports are not touched."""
from __future__ import annotations

import re

import pandas as pd

_FORMULA_LEADS = ("=", "+", "-", "@", "\t", "\r")
_PLAIN_NUMBER = re.compile(r"[+-]?(?:\d+(?:\.\d*)?|\.\d+)(?:[eE][+-]?\d+)?")


def safe_cell(value):
    """``value``, with a leading ``'`` when it is text a spreadsheet would read as a formula."""
    if isinstance(value, str) and value.startswith(_FORMULA_LEADS) and not _PLAIN_NUMBER.fullmatch(value):
        return "'" + value
    return value


def safe_frame(frame: pd.DataFrame) -> pd.DataFrame:
    """A copy of ``frame`` whose text cells and column names are safe to open in a spreadsheet."""
    out = frame.copy()
    for column in out.columns:
        if not pd.api.types.is_numeric_dtype(out[column]) and not pd.api.types.is_bool_dtype(out[column]):
            out[column] = out[column].map(safe_cell)
    out.columns = [safe_cell(c) for c in out.columns]
    return out


def csv_text(frame: pd.DataFrame) -> str:
    """``frame`` as CSV text (no index) that spreadsheets open safely, with RFC 4180's line breaks (CR LF), so
    that a cell holding a carriage return is quoted too and cannot start a row of its own."""
    return safe_frame(frame).to_csv(index=False, lineterminator="\r\n")
