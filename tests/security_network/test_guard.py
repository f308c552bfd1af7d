"""Resolution: resolve once, check every answer, allowlist only where asked."""

from __future__ import annotations

import ipaddress
from typing import Any

import pytest

from toolbridge import NetworkViolation, ToolExecutionError
from toolbridge.security.network import NetworkGuard, system_resolver


async def test_every_answer_must_pass(resolver: Any) -> None:
    dns = resolver({"mixed.example": ["93.184.215.14", "10.0.0.7"]})
    with pytest.raises(NetworkViolation) as caught:
        await NetworkGuard(resolver=dns).resolve("https://mixed.example/")
    assert "mixed.example resolves to 10.0.0.7, which is a private address" in (
        caught.value.message
    )
    assert caught.value.target == "https://mixed.example/"


async def test_public_answers_are_returned_in_order_without_duplicates(resolver: Any) -> None:
    dns = resolver({"ok.example": ["93.184.215.14", "2606:2800:21f:cb07:6820:80da:af6b:8b2c"] * 2})
    addresses = await NetworkGuard(resolver=dns).resolve("https://ok.example/")
    assert [str(a) for a in addresses] == [
        "93.184.215.14",
        "2606:2800:21f:cb07:6820:80da:af6b:8b2c",
    ]
    assert dns.calls == ["ok.example"]


async def test_a_name_that_resolves_inside_ipv6_wrappers_is_blocked(resolver: Any) -> None:
    dns = resolver({"sneaky.example": ["::ffff:169.254.169.254"]})
    with pytest.raises(NetworkViolation, match=r"IPv4-mapped form of 169\.254\.169\.254"):
        await NetworkGuard(resolver=dns).resolve("http://sneaky.example/")


@pytest.mark.parametrize("host", ["localhost", "LOCALHOST", "api.localhost", "localhost."])
async def test_localhost_names_are_loopback_without_asking_dns(resolver: Any, host: str) -> None:
    dns = resolver({})
    with pytest.raises(NetworkViolation, match="loopback"):
        await NetworkGuard(resolver=dns).resolve(f"http://{host}:8000/")
    assert dns.calls == []


async def test_allowlist_opens_only_its_networks(resolver: Any) -> None:
    dns = resolver({"intranet.example": ["10.1.2.3"], "other.example": ["10.9.9.9"]})
    guard = NetworkGuard(allow_cidrs=["10.1.2.0/24"], resolver=dns)
    assert await guard.resolve("http://intranet.example/") == [ipaddress.ip_address("10.1.2.3")]
    with pytest.raises(NetworkViolation):
        await guard.resolve("http://other.example/")
    with pytest.raises(NetworkViolation):
        await guard.resolve("http://127.0.0.1/")


async def test_allowlist_with_ports_opens_only_those_ports() -> None:
    guard = NetworkGuard(allow_cidrs=["127.0.0.1/32"], allow_ports=[8080])
    assert await guard.resolve("http://127.0.0.1:8080/") == [ipaddress.ip_address("127.0.0.1")]
    with pytest.raises(NetworkViolation):
        await guard.resolve("http://127.0.0.1:8081/")
    with pytest.raises(NetworkViolation):
        await guard.resolve("http://127.0.0.1/")


async def test_allowlisted_ipv4_also_covers_its_mapped_ipv6_form() -> None:
    guard = NetworkGuard(allow_cidrs=["127.0.0.1/32"])
    assert await guard.resolve("http://[::ffff:127.0.0.1]/")


def test_a_bad_allowlist_entry_is_an_error() -> None:
    with pytest.raises(ValueError, match=r"10\.0\.0\.1/8"):
        NetworkGuard(allow_cidrs=["10.0.0.1/8"])


async def test_resolution_failures_are_ordinary_errors(resolver: Any) -> None:
    dns = resolver({"empty.example": [], "garbage.example": ["not-an-ip"]})
    guard = NetworkGuard(resolver=dns)
    for host in ("missing.example", "empty.example", "garbage.example"):
        with pytest.raises(ToolExecutionError) as caught:
            await guard.resolve(f"http://{host}/")
        assert host in caught.value.message
        assert "misspelt" in caught.value.hint


async def test_system_resolver_answers_from_the_hosts_file() -> None:
    answers = await system_resolver("localhost")
    assert answers
    assert all(ipaddress.ip_address(a).is_loopback for a in answers)
