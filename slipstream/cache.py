"""Where slipstream keeps what it can make again: compiled pipeline stages,
converted datasets, pages read from object stores."""

from __future__ import annotations

import os
from pathlib import Path


def cache_root() -> Path:
    """``$SLIPSTREAM_CACHE_DIR``, else ``~/.cache/slipstream``: the folder
    under which each cache has its own folder (``stages``, ``datasets``,
    ``pages``)."""
    configured = os.environ.get("SLIPSTREAM_CACHE_DIR")
    return Path(configured) if configured else Path.home() / ".cache" / "slipstream"
