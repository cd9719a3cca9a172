"""Where the demo site serves: one address, ``make demo ADDR=host:port``.

The Makefile hands its ``ADDR`` to ``runserver`` and, as ``DEMO_ADDR``, to the settings,
which allow its host and keep it as ``settings.DEMO_ADDR`` for the demo command's links.
Plain Python: the settings import it before Django is set up.
"""

from __future__ import annotations

import re

DEFAULT_ADDR = "127.0.0.1:8000"

# What runserver accepts: a port, or an IPv4 address, a [bracketed] IPv6 address or a
# host name, then ":" and a port.
_ADDR = re.compile(
    r"^(?:(?P<host>\d{1,3}(?:\.\d{1,3}){3}|\[[a-fA-F0-9:]+\]|[a-zA-Z0-9-]+(?:\.[a-zA-Z0-9-]+)*):)?"
    r"(?P<port>\d+)$"
)
#: Addresses that listen on every interface, and where a browser on this machine finds them.
_EVERYWHERE = {"0": "127.0.0.1", "0.0.0.0": "127.0.0.1", "[::]": "[::1]"}


def split_addr(addr: str) -> tuple[str, str]:
    """``(host, port)`` of ``addr`` as runserver reads it; a port alone is 127.0.0.1's."""
    match = _ADDR.match(addr.strip())
    if match is None:
        raise ValueError(
            f"DEMO_ADDR (make demo ADDR=...) is {addr!r}: give a port (8000) or host:port "
            "(127.0.0.1:8000, [::1]:8000, localhost:8000)."
        )
    return match["host"] or "127.0.0.1", match["port"]


def site_url(addr: str) -> str:
    """The site's root for links: ``http://127.0.0.1:8000``."""
    host, port = split_addr(addr)
    return f"http://{_EVERYWHERE.get(host, host)}:{port}"


def allowed_host(addr: str) -> str:
    """The host a browser sends for ``site_url(addr)``, for ALLOWED_HOSTS."""
    host, _ = split_addr(addr)
    return _EVERYWHERE.get(host, host)
