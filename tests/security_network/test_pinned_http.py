"""HTTP through the guard against real servers on 127.0.0.1, reached only where allow-listed."""

from __future__ import annotations

import datetime
import ipaddress
import ssl
from pathlib import Path
from typing import Any

import httpx
import pytest

from toolbridge import NetworkViolation, ToolExecutionError
from toolbridge.security.network import NetworkGuard
from toolbridge.security.pinned_http import PinnedTransport, open_guarded


def guard_for(server: Any, resolver: Any, **answers: list[str]) -> NetworkGuard:
    """A guard that allows 127.0.0.1 on `server`'s port only, with scripted DNS."""
    dns = resolver({name.replace("_", "."): ips for name, ips in answers.items()})
    return NetworkGuard(allow_cidrs=["127.0.0.1/32"], allow_ports=[server.port], resolver=dns)


async def test_a_public_looking_host_is_pinned_to_its_checked_address(
    servers: Any, resolver: Any, local_http: Any
) -> None:
    server = await servers()
    server.routes["/page"] = local_http.Reply(body=b"hello")
    guard = guard_for(server, resolver, public_example=["127.0.0.1"])
    async with open_guarded(guard, f"http://public.example:{server.port}/page") as fetched:
        assert await fetched.response.aread() == b"hello"
    assert server.requests[0].headers["host"] == f"public.example:{server.port}"
    assert guard.resolver.calls == ["public.example"]  # type: ignore[attr-defined]


async def test_redirect_from_a_public_host_to_loopback_is_blocked_before_it_is_followed(
    servers: Any, resolver: Any, local_http: Any
) -> None:
    entry, internal = await servers(), await servers()
    internal.routes["/secret"] = local_http.Reply(body=b"internal data")
    entry.routes["/go"] = local_http.Reply(
        302, {"Location": f"http://127.0.0.1:{internal.port}/secret"}
    )
    guard = guard_for(entry, resolver, public_example=["127.0.0.1"])
    with pytest.raises(NetworkViolation) as caught:
        async with open_guarded(guard, f"http://public.example:{entry.port}/go"):
            pass
    assert f"127.0.0.1:{internal.port}" in caught.value.message
    assert "loopback" in caught.value.message
    assert len(entry.requests) == 1
    assert internal.requests == []


@pytest.mark.parametrize(
    "location",
    [
        "http://169.254.169.254/latest/meta-data/",
        "http://localhost/",
        "http://[::ffff:127.0.0.1]/",
        "http://2130706433/",
        "file:///etc/passwd",
        "/\\127.0.0.1/",
        "http://user@public.example/",
    ],
)
async def test_every_redirect_hop_is_checked(
    servers: Any, resolver: Any, local_http: Any, location: str
) -> None:
    server = await servers()
    server.routes["/go"] = local_http.Reply(301, {"Location": location})
    guard = guard_for(server, resolver, public_example=["127.0.0.1"])
    with pytest.raises(NetworkViolation):
        async with open_guarded(guard, f"http://public.example:{server.port}/go"):
            pass
    assert [r.path for r in server.requests] == ["/go"]


async def test_a_client_that_follows_redirects_itself_is_still_guarded(
    servers: Any, resolver: Any, local_http: Any
) -> None:
    entry, internal = await servers(), await servers()
    entry.routes["/go"] = local_http.Reply(307, {"Location": f"{internal.origin}/"})
    guard = guard_for(entry, resolver, public_example=["127.0.0.1"])
    transport = PinnedTransport(guard)
    async with httpx.AsyncClient(transport=transport, follow_redirects=True) as client:
        with pytest.raises(NetworkViolation):
            await client.get(f"http://public.example:{entry.port}/go")
    assert internal.requests == []


async def test_credentials_are_dropped_when_the_origin_changes(
    servers: Any, resolver: Any, local_http: Any
) -> None:
    server = await servers()
    port = server.port
    server.routes["/one"] = local_http.Reply(302, {"Location": "/two"})
    server.routes["/two"] = local_http.Reply(302, {"Location": f"http://other.example:{port}/3"})
    server.routes["/3"] = local_http.Reply(body=b"done")
    guard = guard_for(server, resolver, public_example=["127.0.0.1"], other_example=["127.0.0.1"])
    secrets = {"Authorization": "Bearer s3cret", "Cookie": "session=abc", "X-Plain": "kept"}
    async with open_guarded(guard, f"http://public.example:{port}/one", headers=secrets) as got:
        assert got.hops == [
            f"http://public.example:{port}/one",
            f"http://public.example:{port}/two",
            f"http://other.example:{port}/3",
        ]
    one, two, three = (r.headers for r in server.requests)
    assert one["authorization"] == two["authorization"] == "Bearer s3cret"
    assert two["cookie"] == "session=abc"
    assert "authorization" not in three and "cookie" not in three
    assert three["x-plain"] == "kept"
    assert three["host"] == f"other.example:{port}"


async def test_more_than_ten_redirects_is_an_ordinary_error(
    servers: Any, resolver: Any, local_http: Any
) -> None:
    server = await servers()
    server.routes["/loop"] = local_http.Reply(302, {"Location": "/loop"})
    guard = guard_for(server, resolver, public_example=["127.0.0.1"])
    with pytest.raises(ToolExecutionError, match="redirected more than 10 times"):
        async with open_guarded(guard, f"http://public.example:{server.port}/loop"):
            pass
    assert len(server.requests) == 11


async def test_the_host_is_resolved_once_per_hop_so_rebinding_cannot_swap_it(
    servers: Any, local_http: Any
) -> None:
    server = await servers()
    server.routes["/"] = local_http.Reply(body=b"first answer used")
    answers = iter([["127.0.0.1"], ["10.0.0.1"]])
    calls: list[str] = []

    async def rebinding(host: str) -> list[str]:
        calls.append(host)
        return next(answers)

    guard = NetworkGuard(allow_cidrs=["127.0.0.1/32"], resolver=rebinding)
    async with open_guarded(guard, f"http://rebind.example:{server.port}/") as fetched:
        assert await fetched.response.aread() == b"first answer used"
    assert calls == ["rebind.example"]


async def test_the_next_checked_address_is_tried_when_one_refuses(
    servers: Any, resolver: Any, local_http: Any
) -> None:
    server = await servers()
    server.routes["/"] = local_http.Reply(body=b"reached")
    dns = resolver({"two.example": ["127.0.0.2", "127.0.0.1"]})  # only .1 listens
    guard = NetworkGuard(allow_cidrs=["127.0.0.0/8"], resolver=dns)
    async with open_guarded(guard, f"http://two.example:{server.port}/") as fetched:
        assert await fetched.response.aread() == b"reached"


def _certificates(directory: Path) -> tuple[ssl.SSLContext, ssl.SSLContext]:
    """A CA and a leaf for public.example: (server context, client context trusting the CA)."""
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID

    now = datetime.datetime.now(datetime.UTC)
    ca_key, leaf_key = (
        ec.generate_private_key(ec.SECP256R1()),
        ec.generate_private_key(ec.SECP256R1()),
    )
    ca_name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "toolbridge test CA")])
    ca = (
        x509.CertificateBuilder()
        .subject_name(ca_name)
        .issuer_name(ca_name)
        .public_key(ca_key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(days=1))
        .not_valid_after(now + datetime.timedelta(days=1))
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .sign(ca_key, hashes.SHA256())
    )
    leaf = (
        x509.CertificateBuilder()
        .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "public.example")]))
        .issuer_name(ca_name)
        .public_key(leaf_key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(days=1))
        .not_valid_after(now + datetime.timedelta(days=1))
        .add_extension(
            x509.SubjectAlternativeName(
                [x509.DNSName("public.example"), x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]
            ),
            critical=False,
        )
        .sign(ca_key, hashes.SHA256())
    )
    pem = serialization.Encoding.PEM
    (directory / "leaf.pem").write_bytes(
        leaf.public_bytes(pem)
        + leaf_key.private_bytes(
            pem, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
        )
    )
    server = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    server.load_cert_chain(directory / "leaf.pem")
    client = ssl.create_default_context(cadata=ca.public_bytes(pem).decode())
    return server, client


async def test_tls_keeps_sni_and_certificate_checks_on_the_host_name(
    servers: Any, resolver: Any, local_http: Any, tmp_path: Path
) -> None:
    server_context, client_context = _certificates(tmp_path)
    seen_sni: list[str | None] = []
    server_context.sni_callback = lambda sock, name, ctx: seen_sni.append(name)
    server = await servers(server_context)
    server.routes["/"] = local_http.Reply(body=b"over tls")
    guard = guard_for(server, resolver, public_example=["127.0.0.1"], other_example=["127.0.0.1"])

    url = f"https://public.example:{server.port}/"
    async with open_guarded(guard, url, verify=client_context) as fetched:
        assert await fetched.response.aread() == b"over tls"
    assert seen_sni == ["public.example"]
    assert server.requests[0].headers["host"] == f"public.example:{server.port}"

    # The certificate is valid for 127.0.0.1 too, yet a name it does not cover fails:
    # verification is against the host name, never the pinned address.
    wrong_name = f"https://other.example:{server.port}/"
    with pytest.raises(httpx.ConnectError, match=r"CERTIFICATE_VERIFY_FAILED|Hostname mismatch"):
        async with open_guarded(guard, wrong_name, verify=client_context):
            pass
    assert seen_sni == ["public.example", "other.example"]
