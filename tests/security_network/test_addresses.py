"""Which addresses the guard blocks: every special range, in every spelling."""

from __future__ import annotations

import ipaddress

import pytest

from toolbridge import NetworkViolation
from toolbridge.security.network import NetworkGuard, address_block_reason, parse_url

BLOCKED_LITERAL_HOSTS = [
    "127.0.0.1",
    "127.255.255.254",
    "0.0.0.0",
    "[::1]",
    "[::]",
    "[0:0:0:0:0:0:0:1]",
    "[::ffff:127.0.0.1]",
    "[::ffff:7f00:1]",
    "[::ffff:169.254.169.254]",
    "[::127.0.0.1]",  # IPv4-compatible
    "[64:ff9b::127.0.0.1]",  # NAT64
    "[64:ff9b::a00:1]",  # NAT64 of 10.0.0.1
    "[64:ff9b:1::a00:1]",  # local-use NAT64
    "[2002:7f00:1::1]",  # 6to4 of 127.0.0.1
    "[2002:a9fe:a9fe::]",  # 6to4 of 169.254.169.254
    "[2001:0:4136:e378:8000:63bf:80ff:fffe]",  # Teredo, client 127.0.0.1
    "[2001::1]",  # Teredo range itself
    "10.0.0.1",
    "172.16.5.4",
    "192.168.1.1",
    "100.64.0.1",
    "100.100.100.200",  # Alibaba metadata
    "169.254.169.254",  # AWS/GCP/Azure metadata
    "192.0.0.192",  # Oracle metadata
    "[fd00:ec2::254]",  # AWS IPv6 metadata
    "[fe80::1]",
    "[fc00::1]",
    "[fec0::1]",
    "224.0.0.1",
    "239.255.255.250",
    "[ff02::1]",
    "[ff0e::1]",
    "240.0.0.1",
    "255.255.255.255",
    "198.18.0.1",
    "[2001:2::1]",  # benchmarking
    "192.0.2.1",
    "198.51.100.7",
    "203.0.113.9",
    "[2001:db8::1]",
    "[3fff::1]",
    "192.88.99.1",
    "[100::1]",
    "[5f00::1]",
    "[::2]",
]

NON_STANDARD_IPV4 = {
    "127.1": "127.0.0.1",
    "127.0.1": "127.0.0.1",
    "0x7f.1": "127.0.0.1",
    "0x7f000001": "127.0.0.1",
    "2130706433": "127.0.0.1",
    "017700000001": "127.0.0.1",
    "0177.0.0.1": "127.0.0.1",
    "0x7f.0x0.0x0.0x1": "127.0.0.1",
    "127.000.000.001": "127.0.0.1",
    "0": "0.0.0.0",
    "0x0": "0.0.0.0",
    "3232235777": "192.168.1.1",
    "0xa9.0xfe.0xa9.0xfe": "169.254.169.254",
    "134744072": "8.8.8.8",  # even a public meaning is refused: parsers disagree
    "010.8.8.8": "8.8.8.8",
}


@pytest.mark.parametrize("host", BLOCKED_LITERAL_HOSTS)
def test_blocked_literals_raise_network_violation(host: str) -> None:
    url = f"http://{host}/path"
    with pytest.raises(NetworkViolation) as caught:
        NetworkGuard().check_url(url)
    assert caught.value.target is not None and "is blocked" in caught.value.message


@pytest.mark.parametrize(("host", "meaning"), NON_STANDARD_IPV4.items())
def test_non_standard_ipv4_spellings_are_refused_and_explained(host: str, meaning: str) -> None:
    with pytest.raises(NetworkViolation) as caught:
        parse_url(f"http://{host}:8080/")
    assert f"it means {meaning}" in caught.value.message
    assert "non-standard IPv4" in caught.value.message


@pytest.mark.parametrize("host", ["1.2.3.256", "1.2.3.4.5", "0x", "foo.0x1f", "example.123"])
def test_numeric_looking_hosts_that_are_not_addresses_are_refused(host: str) -> None:
    with pytest.raises(NetworkViolation):
        parse_url(f"http://{host}/")


@pytest.mark.parametrize(
    ("address", "form", "inner"),
    [
        ("::ffff:10.1.2.3", "IPv4-mapped", "10.1.2.3"),
        ("::10.1.2.3", "IPv4-compatible", "10.1.2.3"),
        ("64:ff9b::10.1.2.3", "NAT64", "10.1.2.3"),
        ("2002:a01:203::", "6to4", "10.1.2.3"),
        ("2001:0:4136:e378:8000:63bf:f5fe:fdfc", "Teredo client", "10.1.2.3"),
        ("2001:0:a01:203:8000:63bf:f7f7:f7f7", "Teredo server", "10.1.2.3"),
    ],
)
def test_ipv4_hidden_in_ipv6_is_unwrapped_and_named(address: str, form: str, inner: str) -> None:
    reason = address_block_reason(ipaddress.IPv6Address(address))
    assert reason == f"an {form} form of {inner}, which is a private address"


@pytest.mark.parametrize(
    "address",
    ["8.8.8.8", "1.1.1.1", "93.184.215.14", "2606:4700:4700::1111", "2a00:1450:4001:82a::200e"],
)
def test_public_addresses_pass(address: str) -> None:
    assert address_block_reason(ipaddress.ip_address(address)) is None


@pytest.mark.parametrize("address", ["::ffff:8.8.8.8", "64:ff9b::808:808", "2002:808:808::1"])
def test_transition_forms_of_a_public_ipv4_pass(address: str) -> None:
    assert address_block_reason(ipaddress.IPv6Address(address)) is None


@pytest.mark.parametrize(
    "address",
    ["224.0.0.1", "192.0.0.8", "192.88.99.1", "ff0e::1", "64:ff9b::7f00:1", "2002:7f00:1::"],
)
def test_the_rule_is_not_pythons_is_global(address: str) -> None:
    ip = ipaddress.ip_address(address)
    assert ip.is_global  # Python calls these global ...
    assert address_block_reason(ip) is not None  # ... the guard does not let them through


def test_every_address_of_a_blocked_network_is_blocked_at_its_edges() -> None:
    for cidr in ["10.0.0.0/8", "100.64.0.0/10", "169.254.0.0/16", "224.0.0.0/4", "fc00::/7"]:
        network = ipaddress.ip_network(cidr)
        for address in (network.network_address, network.broadcast_address):
            assert address_block_reason(address) is not None, address
        before = network.network_address - 1
        assert address_block_reason(before) != address_block_reason(network.network_address)
