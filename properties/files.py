"""Files written whole or not at all.

Rules:
- A file is written under a temporary name beside its target, starting with "." (so that readers
  of ``part-*.parquet``, ``*.json`` or ``*.html`` never see it), then moved into place with
  ``os.replace``: a reader sees the old file or the whole new one, never half of one.
- The temporary file is removed when writing fails or is interrupted.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path


def replace_atomically(path: Path, write: Callable[[str], None]) -> None:
    """``write(temp)`` to a temporary name starting with "." beside ``path``, then move it into place."""
    path = Path(path)
    temp = path.parent / f".{path.name}.{os.getpid()}.tmp"
    try:
        write(str(temp))
        os.replace(temp, path)
    finally:
        if temp.exists():
            temp.unlink()


def write_text(path: Path, text: str) -> None:
    """``text`` at ``path`` (UTF-8), whole or not at all; creates the parent directories."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)

    def write(temp: str) -> None:
        with open(temp, "w", encoding="utf-8") as f:
            f.write(text)

    replace_atomically(path, write)
