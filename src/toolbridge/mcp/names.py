"""Registry names for MCP tools: ``mcp_<server>_<tool>``, valid for every provider, unique.

Providers accept ``^[a-zA-Z0-9_-]{1,64}$``. Other characters become ``_``; a name
that is too long, or that two remote names would share after that, ends in a short
hash of the server and the remote name, so it is stable across runs and never
collides. The remote name itself is what goes to the server.
"""

from __future__ import annotations

import hashlib
import re
from collections import Counter
from collections.abc import Iterable

__all__ = ["MAX_NAME", "PREFIX", "local_names"]

PREFIX = "mcp_"
MAX_NAME = 64
_HASH = 8
_UNSAFE = re.compile(r"[^a-zA-Z0-9_-]")


def _suffix(server: str, remote: str) -> str:
    return hashlib.sha256(f"{server}\0{remote}".encode()).hexdigest()[:_HASH]


def local_names(server: str, remote_names: Iterable[str]) -> dict[str, str]:
    """The registry name of each remote tool of `server`: ``{remote: local}``.

    A name changed by sanitising gets the hash suffix when another remote name maps to
    the same text; a name that is valid as it is keeps its plain form.
    """
    remote_names = list(dict.fromkeys(remote_names))
    base = {
        remote: f"{PREFIX}{_UNSAFE.sub('_', server)}_{_UNSAFE.sub('_', remote)}"
        for remote in remote_names
    }
    shared = Counter(base.values())
    names: dict[str, str] = {}
    for remote in remote_names:
        name = base[remote]
        changed = _UNSAFE.search(remote) is not None
        if len(name) > MAX_NAME or (shared[name] > 1 and changed):
            name = f"{name[: MAX_NAME - _HASH - 1]}_{_suffix(server, remote)}"
        names[remote] = name
    return names
