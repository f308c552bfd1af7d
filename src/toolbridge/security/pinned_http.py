"""HTTP through the network guard: connect only to checked addresses, check every redirect.

`PinnedTransport` is the enforcement point: every request that goes through it has
its URL checked and its host resolved once by the `NetworkGuard`, and the socket is
opened to one of those checked addresses (pinned), while the Host header, TLS SNI
and certificate verification keep using the original host name. `open_guarded` walks
redirects itself, checking each hop before it is followed and dropping credentials
when the origin changes. Needs httpx (the ``web`` extra).
"""

from __future__ import annotations

import logging
import ssl
from collections.abc import AsyncIterator, Mapping
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from urllib.parse import urljoin

import httpx

from toolbridge.core.errors import ToolExecutionError
from toolbridge.security.network import MAX_REDIRECTS, NetworkGuard, TargetURL, parse_url

__all__ = ["CREDENTIAL_HEADERS", "GuardedResponse", "PinnedTransport", "open_guarded"]

logger = logging.getLogger(__name__)

CREDENTIAL_HEADERS = ("authorization", "proxy-authorization", "cookie")


class PinnedTransport(httpx.AsyncBaseTransport):
    """An httpx transport that resolves through a `NetworkGuard` and pins the connection.

    Connections are pooled per (origin, address), so a TLS connection verified for one
    host name is never reused for another name that happens to share the address.
    """

    def __init__(self, guard: NetworkGuard, *, verify: ssl.SSLContext | bool = True) -> None:
        self.guard = guard
        self._verify = verify
        self._pools: dict[tuple[str, str, int, str], httpx.AsyncHTTPTransport] = {}

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        target = parse_url(str(request.url))
        addresses = await self.guard.resolve(target)
        last_error: httpx.ConnectError | None = None
        for address in addresses:
            pinned = httpx.Request(
                request.method,
                request.url.copy_with(host=str(address)),
                headers=request.headers,
                stream=request.stream,
                extensions=self._extensions(request, target),
            )
            try:
                return await self._pool(target, str(address)).handle_async_request(pinned)
            except httpx.ConnectError as exc:
                logger.debug("connecting to %s for %s failed: %s", address, target.host, exc)
                last_error = exc
        assert last_error is not None  # resolve() never returns an empty list
        raise last_error

    def _extensions(self, request: httpx.Request, target: TargetURL) -> dict[str, object]:
        extensions = dict(request.extensions)
        if target.scheme == "https":
            extensions["sni_hostname"] = target.host
        return extensions

    def _pool(self, target: TargetURL, address: str) -> httpx.AsyncHTTPTransport:
        key = (*target.origin, address)
        pool = self._pools.get(key)
        if pool is None:
            pool = httpx.AsyncHTTPTransport(verify=self._verify, trust_env=False, retries=0)
            self._pools[key] = pool
        return pool

    async def aclose(self) -> None:
        pools, self._pools = list(self._pools.values()), {}
        for pool in pools:
            await pool.aclose()


@dataclass(slots=True)
class GuardedResponse:
    """The final response after redirects, and the URLs that led to it."""

    response: httpx.Response
    hops: list[str] = field(default_factory=list)


@asynccontextmanager
async def open_guarded(
    guard: NetworkGuard,
    url: str,
    *,
    headers: Mapping[str, str] | None = None,
    io_timeout: float = 30.0,
    verify: ssl.SSLContext | bool = True,
    max_redirects: int = MAX_REDIRECTS,
) -> AsyncIterator[GuardedResponse]:
    """GET `url` through `guard`, following at most `max_redirects` checked redirects.

    Yields the final response unread (stream it); it is closed on exit. A blocked
    hop raises `NetworkViolation` before anything is sent to it. `io_timeout` bounds
    each connect and read; bound the whole fetch with ``asyncio.timeout``.
    """
    transport = PinnedTransport(guard, verify=verify)
    async with httpx.AsyncClient(
        transport=transport, follow_redirects=False, trust_env=False, timeout=io_timeout
    ) as client:
        current = guard.check_url(url)
        request_headers = dict(headers or {})
        hops = [current.url]
        for _ in range(max_redirects + 1):
            request = client.build_request("GET", current.url, headers=request_headers)
            response = await client.send(request, stream=True)
            location = response.headers.get("location") if response.is_redirect else None
            if location is None:
                try:
                    yield GuardedResponse(response, hops)
                finally:
                    await response.aclose()
                return
            await response.aclose()
            # Join the raw Location with urljoin, which keeps every character, so the
            # guard sees backslashes or whitespace instead of httpx's cleaned-up form.
            following = guard.check_url(urljoin(current.url, location))
            if following.origin != current.origin:
                request_headers = {
                    k: v for k, v in request_headers.items() if k.lower() not in CREDENTIAL_HEADERS
                }
            current = following
            hops.append(current.url)
    raise ToolExecutionError(
        f"{url!r} redirected more than {max_redirects} times; stopped at {current.url!r}",
        hint="The site may be in a redirect loop; try the final URL directly or another page.",
    )
