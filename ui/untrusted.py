"""Text the project did not write (database values, model replies, plugin and replay files, URL parameters) shown
as text: the one helper every page uses to put such text into Markdown (st.markdown, captions, alerts, labels,
st.table cells), so that it can never become a link, an image, a heading, LaTeX or a colour directive.

``md`` backslash-escapes every ASCII punctuation character (CommonMark lets each one be escaped) and puts an
invisible word joiner after a URL's scheme, a ``www`` and an ``@``, so that no URL, ``www.`` name or e-mail address
becomes an autolink (the text reads the same; copied, it holds the joiner); ``md_code`` makes an inline code span no backtick inside can close;
``md_table`` escapes the text cells and column names of a table for st.table. The pages' own formatting stays
around them. Elements that render no Markdown (st.code, st.dataframe, st.text, inputs) need none of this."""
from __future__ import annotations

import re
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import pandas as pd

_PUNCTUATION = re.compile(r"([!-/:-@\[-`{-~])")
#: Where GitHub's autolinks start (a URL's scheme, ``www.``, an e-mail address's ``@``): they are found in the text
#: after escapes and character references are read, so a word joiner (U+2060, invisible) is put there instead.
_AUTOLINK = re.compile(r"(?i)(https?(?=:)|ftp(?=:)|www(?=\.)|@)")
JOINER = "\u2060"


def md(text) -> str:
    """``text`` (any value, as str) made literal in Markdown, its line breaks kept."""
    text = _AUTOLINK.sub(lambda m: m.group(1) + JOINER, str(text))
    return _PUNCTUATION.sub(r"\\\1", text).replace("\r", "").replace("\n", "  \n")


def md_code(text) -> str:
    """``text`` as an inline code span (on one line) that no backtick inside it can end."""
    text = " ".join(str(text).split("\n"))
    fence = "`" * (max((len(run) for run in re.findall(r"`+", text)), default=0) + 1)
    return f"{fence} {text} {fence}" if fence != "`" or text[:1] == " " or text[-1:] == " " else f"`{text}`"


def md_table(frame: pd.DataFrame) -> pd.DataFrame:
    """A copy of ``frame`` whose text cells and column names are literal in st.table (numbers stay numbers)."""
    from pandas.api.types import is_numeric_dtype  # loaded with the frame; not for pages that only write text

    out = frame.copy()
    for column in out.columns:
        if not is_numeric_dtype(out[column]):
            out[column] = out[column].map(lambda v: md(v) if isinstance(v, str) else v)
    out.columns = [md(c) for c in out.columns]
    return out
