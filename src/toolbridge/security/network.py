"""The network guard: decides which URLs and addresses a tool may reach, before it connects.

A URL passes only if it is plain http(s) with an unambiguous host: anything different
parsers could read differently (userinfo, backslashes, control characters, odd IPv4
spellings, ideographic dots) is refused instead of interpreted. The host is resolved
once and every address is checked, IPv4 hidden inside IPv6 included; the caller then
connects to exactly those addresses (see `toolbridge.security.pinned_http`). Anything
refused raises `NetworkViolation`. Standard library only, so it imports without httpx.
"""

from __future__ import annotations

import asyncio
import ipaddress
import re
import socket
import unicodedata
from collections.abc import Awaitable, Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from urllib.parse import urlsplit

from toolbridge.core.errors import NetworkViolation, ToolExecutionError

__all__ = [
    "MAX_REDIRECTS",
    "IPAddress",
    "IPNetwork",
    "NetworkGuard",
    "Resolver",
    "TargetURL",
    "address_block_reason",
    "parse_url",
    "static_resolver",
    "system_resolver",
]

IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address
IPNetwork = ipaddress.IPv4Network | ipaddress.IPv6Network
Resolver = Callable[[str], Awaitable[Sequence[str]]]
"""An async callable: host name -> IP address strings. Injected so tests control DNS."""

MAX_REDIRECTS = 10
MAX_URL_LENGTH = 8192


def _networks(*rows: tuple[str, str]) -> tuple[tuple[IPNetwork, str], ...]:
    return tuple((ipaddress.ip_network(cidr), reason) for cidr, reason in rows)


# Every IANA special-purpose range that is not globally reachable. Python's is_global
# is not this rule: it is True for multicast, 192.0.0.0/24 hosts, 6to4 and NAT64 forms.
_BLOCKED_V4 = _networks(
    ("0.0.0.0/8", "the 'this host' range (0.0.0.0 reaches the local machine)"),
    ("10.0.0.0/8", "a private address"),
    ("100.64.0.0/10", "carrier-grade NAT space (also used for cloud metadata)"),
    ("127.0.0.0/8", "a loopback address"),
    ("169.254.0.0/16", "link-local (includes the cloud metadata address 169.254.169.254)"),
    ("172.16.0.0/12", "a private address"),
    ("192.0.0.0/24", "an IETF protocol assignment (includes cloud metadata 192.0.0.192)"),
    ("192.0.2.0/24", "a documentation address"),
    ("192.88.99.0/24", "the 6to4 relay anycast range"),
    ("192.168.0.0/16", "a private address"),
    ("198.18.0.0/15", "a benchmarking address"),
    ("198.51.100.0/24", "a documentation address"),
    ("203.0.113.0/24", "a documentation address"),
    ("224.0.0.0/4", "a multicast address"),
    ("240.0.0.0/4", "a reserved address (includes broadcast)"),
)
_BLOCKED_V6 = _networks(
    ("::/128", "the unspecified address (reaches the local machine)"),
    ("::1/128", "a loopback address"),
    ("::/96", "a deprecated IPv4-compatible address"),
    ("64:ff9b:1::/48", "a local-use NAT64 address"),
    ("100::/64", "a discard-only address"),
    ("2001::/23", "an IETF protocol assignment (Teredo, benchmarking, ORCHID)"),
    ("2001:db8::/32", "a documentation address"),
    ("3fff::/20", "a documentation address"),
    ("5f00::/16", "an SRv6 segment identifier"),
    ("fc00::/7", "a unique-local (private) address"),
    ("fe80::/10", "a link-local address"),
    ("fec0::/10", "a site-local address"),
    ("ff00::/8", "a multicast address"),
)
_GLOBAL_UNICAST_V6 = ipaddress.IPv6Network("2000::/3")
_NAT64_V6 = ipaddress.IPv6Network("64:ff9b::/96")
_LOCALHOST_ADDRESSES = (ipaddress.IPv4Address("127.0.0.1"), ipaddress.IPv6Address("::1"))


def _embedded_ipv4(address: ipaddress.IPv6Address) -> list[tuple[ipaddress.IPv4Address, str]]:
    """The IPv4 addresses an IPv6 address carries, with the name of the form."""
    found: list[tuple[ipaddress.IPv4Address, str]] = []
    if address.ipv4_mapped is not None:
        found.append((address.ipv4_mapped, "IPv4-mapped"))
    elif int(address) >> 32 == 0 and int(address) > 1:
        found.append((ipaddress.IPv4Address(int(address)), "IPv4-compatible"))
    elif address in _NAT64_V6:
        found.append((ipaddress.IPv4Address(int(address) & 0xFFFFFFFF), "NAT64"))
    elif address.sixtofour is not None:
        found.append((address.sixtofour, "6to4"))
    elif address.teredo is not None:
        server, client = address.teredo
        found += [(client, "Teredo client"), (server, "Teredo server")]
    return found


def _v4_reason(address: ipaddress.IPv4Address) -> str | None:
    return next((reason for net, reason in _BLOCKED_V4 if address in net), None)


def address_block_reason(address: IPAddress) -> str | None:
    """Why `address` must not be reached, or None when it is a public unicast address."""
    if isinstance(address, ipaddress.IPv4Address):
        return _v4_reason(address)
    for ipv4, form in _embedded_ipv4(address):
        reason = _v4_reason(ipv4)
        if reason is not None:
            return f"an {form} form of {ipv4}, which is {reason}"
        if form in ("IPv4-mapped", "NAT64"):
            return None  # the connection really goes to that public IPv4 address
    for net, reason in _BLOCKED_V6:
        if address in net:
            return reason
    if address not in _GLOBAL_UNICAST_V6:
        return "a reserved address (outside the global unicast range 2000::/3)"
    return None


@dataclass(frozen=True, slots=True)
class TargetURL:
    """A URL that passed the syntax checks, split into what the connection needs.

    `url` is the normalised form to request (ASCII host, no fragment); `host` is the
    name for the Host header and TLS; `address` is set when the host is an IP literal.
    """

    url: str
    scheme: str
    host: str
    port: int
    address: IPAddress | None

    @property
    def origin(self) -> tuple[str, str, int]:
        return (self.scheme, self.host, self.port)


def _refuse(url: str, problem: str) -> NetworkViolation:
    shown = url if len(url) <= 200 else url[:200] + "..."
    return NetworkViolation(f"URL {shown!r} is refused: {problem}", target=url)


# Characters that parsers disagree on: WHATWG strips tabs and newlines, treats "\" as
# "/", and so on. Unicode controls, format characters and separators go with them.
_AMBIGUOUS_ASCII = re.compile(r"[\x00-\x20\x7f\\]")
_IDEOGRAPHIC_DOTS = "\u3002\uff0e\uff61"
_HOST_LABEL = re.compile(r"(?!-)[a-z0-9_-]{1,63}(?<!-)\Z")
_NUMERIC_LABEL = re.compile(r"(0x[0-9a-f]*|[0-9]+)\Z")


def _ambiguous_character(url: str) -> str | None:
    match = _AMBIGUOUS_ASCII.search(url)
    if match is not None:
        return match.group()
    if url.isascii():
        return None
    return next((c for c in url if unicodedata.category(c)[0] in "CZ"), None)


def _inet_aton(host: str) -> ipaddress.IPv4Address | None:
    """The address the C library's inet_aton reads in `host` (127.1, 0x7f.1, 2130706433)."""
    parts = host.split(".")
    if not 1 <= len(parts) <= 4:
        return None
    values: list[int] = []
    for part in parts:
        if part.startswith("0x"):
            base, digits = 16, part[2:] or "0"
        elif len(part) > 1 and part.startswith("0"):
            base, digits = 8, part[1:]
        else:
            base, digits = 10, part
        try:
            values.append(int(digits, base))
        except ValueError:
            return None
    *head, last = values
    if any(v > 255 for v in head) or last >= 256 ** (5 - len(values)):
        return None
    number = last
    for index, value in enumerate(head):
        number += value << (24 - 8 * index)
    return ipaddress.IPv4Address(number)


def _ascii_host(url: str, host: str) -> str:
    if any(dot in host for dot in _IDEOGRAPHIC_DOTS):
        raise _refuse(url, "the host contains an ideographic or full-width dot")
    if host.isascii():
        return host
    try:
        return host.encode("idna").decode("ascii")
    except UnicodeError:
        raise _refuse(
            url, "the host is not a valid international domain name; use its xn-- form"
        ) from None


def _host_address(url: str, host: str) -> IPAddress | None:
    """The IP literal named by `host`, None for a DNS name; odd IPv4 spellings refused."""
    labels = host.split(".")
    if len(host) > 253 or not all(_HOST_LABEL.match(label) for label in labels):
        raise _refuse(url, f"the host {host!r} is not a valid host name")
    if not _NUMERIC_LABEL.match(labels[-1]):
        return None
    try:
        return ipaddress.IPv4Address(host)
    except ValueError:
        pass
    decoded = _inet_aton(host)
    meaning = f" (it means {decoded})" if decoded is not None else ""
    raise _refuse(
        url,
        f"the host {host!r} is a non-standard IPv4 spelling{meaning}; "
        "only the plain dotted form like 93.184.215.14 is accepted",
    )


def parse_url(url: str) -> TargetURL:
    """Check the syntax of `url` and split it; raise `NetworkViolation` if it is refused.

    No DNS here: an IP literal is returned in `address` (not yet checked against the
    blocked ranges), a name is left for `NetworkGuard.resolve`.
    """
    if not isinstance(url, str) or not url:
        raise NetworkViolation("the URL must be a non-empty string", target=str(url))
    if len(url) > MAX_URL_LENGTH:
        raise _refuse(url, f"it is longer than {MAX_URL_LENGTH} characters")
    bad = _ambiguous_character(url)
    if bad is not None:
        raise _refuse(
            url,
            f"it contains the character {bad!r}; whitespace, control characters and "
            "backslashes must be percent-encoded (%20, %5C)",
        )
    try:
        split = urlsplit(url)
        hostname, port = split.hostname, split.port
    except ValueError as exc:
        raise _refuse(url, f"it cannot be parsed ({exc})") from None
    scheme = split.scheme
    if scheme not in ("http", "https"):
        raise _refuse(url, f"only http and https URLs are allowed, not {scheme or 'none'!r}")
    if not url[len(scheme) :].startswith("://") or not hostname:
        raise _refuse(url, "it has no host; write it as http://host/path")
    if "@" in split.netloc:
        raise _refuse(url, "user names and passwords in URLs (user@host) are not allowed")
    if "%" in hostname:
        raise _refuse(url, "percent-encoded hosts and IPv6 zone ids are not allowed")
    if port == 0:
        raise _refuse(url, "port 0 is not a valid port")

    address: IPAddress | None
    if ":" in hostname:
        try:
            address = ipaddress.IPv6Address(hostname)
        except ValueError:
            raise _refuse(url, f"{hostname!r} is not a valid IPv6 address") from None
        host, netloc_host = hostname, f"[{hostname}]"
    else:
        host = _ascii_host(url, hostname)
        host = host[:-1] if host.endswith(".") else host
        address = _host_address(url, host)
        netloc_host = host
    default_port = 443 if scheme == "https" else 80
    netloc = netloc_host if port is None else f"{netloc_host}:{port}"
    normalised = f"{scheme}://{netloc}{split.path or '/'}"
    if split.query:
        normalised += f"?{split.query}"
    return TargetURL(normalised, scheme, host, port or default_port, address)


async def system_resolver(host: str) -> list[str]:
    """Resolve `host` with the system resolver, off the event loop (``loop.getaddrinfo``)."""
    infos = await asyncio.get_running_loop().getaddrinfo(host, None, type=socket.SOCK_STREAM)
    return list(dict.fromkeys(str(info[4][0]) for info in infos))


def static_resolver(
    hosts: Mapping[str, Sequence[str]], fallback: Resolver | None = None
) -> Resolver:
    """A resolver with fixed answers for some names (like /etc/hosts), `fallback` for the rest.

    The answers are checked by the guard like any DNS answer: naming an internal
    address here does not open it; `allow_cidrs` does.
    """
    table = {host.lower().rstrip("."): list(answers) for host, answers in hosts.items()}
    rest = fallback or system_resolver

    async def resolve(host: str) -> Sequence[str]:
        answers = table.get(host.lower().rstrip("."))
        return answers if answers is not None else await rest(host)

    return resolve


class NetworkGuard:
    """Checks URLs and resolves their hosts to addresses that may be connected to.

    `allow_cidrs` opens chosen internal networks (e.g. ``10.1.2.0/24`` for an intranet
    service); with `allow_ports` set, those networks are open on these ports only.
    Each guard owns its settings: nothing is shared between two guards.
    """

    def __init__(
        self,
        *,
        allow_cidrs: Iterable[str | IPNetwork] = (),
        allow_ports: Iterable[int] = (),
        resolver: Resolver | None = None,
    ) -> None:
        self.allow_networks: tuple[IPNetwork, ...] = tuple(
            ipaddress.ip_network(cidr) if isinstance(cidr, str) else cidr for cidr in allow_cidrs
        )
        self.allow_ports = frozenset(allow_ports)
        self.resolver: Resolver = resolver or system_resolver

    def is_allowlisted(self, address: IPAddress, port: int) -> bool:
        if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped is not None:
            address = address.ipv4_mapped
        if self.allow_ports and port not in self.allow_ports:
            return False
        return any(address in network for network in self.allow_networks)

    def check_address(self, address: IPAddress, target: TargetURL) -> None:
        """Raise `NetworkViolation` unless `address` may be reached for `target`."""
        if self.is_allowlisted(address, target.port):
            return
        reason = address_block_reason(address)
        if reason is None:
            return
        named = (
            f"{address}" if target.address is not None else f"{target.host} resolves to {address}"
        )
        raise NetworkViolation(
            f"{target.url!r} is blocked: {named}, which is {reason}", target=target.url
        )

    def check_url(self, url: str | TargetURL) -> TargetURL:
        """Syntax checks, plus the address check when the host is an IP literal."""
        target = url if isinstance(url, TargetURL) else parse_url(url)
        if target.address is not None:
            self.check_address(target.address, target)
        return target

    async def resolve(self, url: str | TargetURL) -> list[IPAddress]:
        """The checked addresses to connect to for `url`, in the resolver's order.

        Every resolved address must pass: one internal answer among public ones
        blocks the whole URL, so DNS tricks cannot pick the internal one later.
        """
        target = self.check_url(url)
        if target.address is not None:
            return [target.address]
        if target.host == "localhost" or target.host.endswith(".localhost"):
            addresses: list[IPAddress] = list(_LOCALHOST_ADDRESSES)
        else:
            addresses = await self._lookup(target.host)
        for address in addresses:
            self.check_address(address, target)
        return addresses

    async def _lookup(self, host: str) -> list[IPAddress]:
        try:
            answers = await self.resolver(host)
            addresses = [ipaddress.ip_address(answer) for answer in answers]
        except (OSError, ValueError) as exc:
            raise ToolExecutionError(
                f"could not resolve the host {host!r}: {exc}",
                hint="Check the host name in the URL; it may be misspelt or not exist.",
            ) from None
        if not addresses:
            raise ToolExecutionError(
                f"the host {host!r} has no addresses",
                hint="Check the host name in the URL; it may be misspelt or not exist.",
            )
        return list(dict.fromkeys(addresses))
