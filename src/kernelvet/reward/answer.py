"""The candidate's code in a model's answer: the last fenced Python block.

A block is a Markdown fence (three or more backticks or tildes, closed by the same fence) tagged
`python`, `py` or `python3`; if the answer has none, the last untagged block. Anything in a
reasoning section (`<think>...</think>`) before the answer proper is not the answer: only the text
after the last `</think>` is searched. No block: no code (the caller scores it as such).
"""

from __future__ import annotations

import re

_FENCE = re.compile(r"^[ \t]*(?P<fence>`{3,}|~{3,})[ \t]*(?P<lang>[\w+.-]*)[^\n]*\n(?P<body>.*?)^[ \t]*(?P=fence)[ \t]*$",
                    re.S | re.M)
PYTHON_TAGS = frozenset({"python", "py", "python3"})


def extract_code(answer: str) -> str | None:
    """The code of the answer's last Python block (or last untagged one), or None."""
    if not isinstance(answer, str):
        return None
    tail = answer.rsplit("</think>", 1)[-1]
    tagged, untagged = None, None
    for m in _FENCE.finditer(tail):
        lang = m.group("lang").lower()
        if lang in PYTHON_TAGS:
            tagged = m.group("body")
        elif not lang:
            untagged = m.group("body")
    code = tagged if tagged is not None else untagged
    return code if code is not None and code.strip() else None


def compiles(code: str) -> bool:
    """Python that at least compiles (it is not run here: that is the worker's alone)."""
    try:
        compile(code, "<candidate>", "exec", dont_inherit=True)
    except (SyntaxError, ValueError):   # ValueError: a NUL byte
        return False
    return True
