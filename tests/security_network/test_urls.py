"""URL syntax: what different parsers could read differently is refused, not interpreted."""

from __future__ import annotations

import pytest

from toolbridge import NetworkViolation
from toolbridge.security.network import parse_url

AMBIGUOUS_URLS = {
    "http://example.com\\@127.0.0.1/": "'\\\\'",
    "http:\\\\127.0.0.1\\": "'\\\\'",
    "http://127.0.0.1:80\\@example.com/": "'\\\\'",
    "http://exa\tmple.com/": "'\\t'",
    "http://example.com\n.evil/": "'\\n'",
    "http://example.com\r/": "'\\r'",
    " http://example.com/": "' '",
    "http://example.com/a b": "' '",
    "http://example.com\x00.evil/": "'\\x00'",
    "http://exam\u200bple.com/": "'\\u200b'",
    "http://example\u3000com/": "'\\u3000'",
}


@pytest.mark.parametrize(("url", "shown"), AMBIGUOUS_URLS.items())
def test_whitespace_controls_and_backslashes_are_refused(url: str, shown: str) -> None:
    with pytest.raises(NetworkViolation) as caught:
        parse_url(url)
    assert f"contains the character {shown}" in caught.value.message
    assert "percent-encoded" in caught.value.message


@pytest.mark.parametrize(
    "url",
    [
        "http://user@example.com/",
        "http://user:pass@example.com/",
        "http://example.com@127.0.0.1/",
        "http://a@b@c/",
        "https://:@example.com/",
    ],
)
def test_userinfo_is_refused(url: str) -> None:
    with pytest.raises(NetworkViolation, match="user names and passwords"):
        parse_url(url)


@pytest.mark.parametrize(
    "host", ["127\u30020\u30020\u30021", "example\uff0ecom", "example\uff61com", "a\u3002b"]
)
def test_ideographic_and_full_width_dots_are_refused(host: str) -> None:
    with pytest.raises(NetworkViolation, match="ideographic or full-width dot"):
        parse_url(f"http://{host}/")


def test_full_width_digits_are_read_in_their_ascii_form_and_refused() -> None:
    with pytest.raises(NetworkViolation, match=r"it means 127\.0\.0\.1"):
        parse_url("http://\uff11\uff12\uff17.1/")


@pytest.mark.parametrize(
    ("url", "problem"),
    [
        ("file:///etc/passwd", "only http and https"),
        ("gopher://example.com/", "only http and https"),
        ("ftp://example.com/", "only http and https"),
        ("javascript:alert(1)", "only http and https"),
        ("//example.com/", "only http and https"),
        ("example.com", "only http and https"),
        ("http:/example.com/", "has no host"),
        ("http:example.com", "has no host"),
        ("http:///path", "has no host"),
        ("http://[::1/", "cannot be parsed"),
        ("http://example.com:99999/", "cannot be parsed"),
        ("http://example.com:0/", "port 0"),
        ("http://%31%32%37.0.0.1/", "percent-encoded hosts"),
        ("http://[fe80::1%25eth0]/", "percent-encoded hosts and IPv6 zone ids"),
        ("http://-bad-.example/", "not a valid host name"),
        ("http://exa_mple..com/", "not a valid host name"),
        ("http://" + "a" * 64 + ".com/", "not a valid host name"),
        ("http://example.com/" + "a" * 9000, "longer than 8192"),
    ],
)
def test_malformed_urls_say_what_is_wrong(url: str, problem: str) -> None:
    with pytest.raises(NetworkViolation) as caught:
        parse_url(url)
    assert problem in caught.value.message
    assert caught.value.target == url


def test_a_valid_url_is_normalised() -> None:
    target = parse_url("HTTPS://Example.COM.:8443/a/b?q=1#fragment")
    assert target.url == "https://example.com:8443/a/b?q=1"
    assert (target.scheme, target.host, target.port, target.address) == (
        "https",
        "example.com",
        8443,
        None,
    )


def test_default_ports_and_path() -> None:
    assert parse_url("http://example.com").port == 80
    assert parse_url("http://example.com").url == "http://example.com/"
    assert parse_url("https://example.com").port == 443


def test_international_names_are_sent_in_their_ascii_form() -> None:
    target = parse_url("https://b\u00fccher.example/x")
    assert target.host == "xn--bcher-kva.example"
    assert target.url == "https://xn--bcher-kva.example/x"


def test_ipv6_literal_keeps_its_brackets_in_the_url() -> None:
    target = parse_url("http://[2606:4700:4700::1111]:8080/")
    assert target.url == "http://[2606:4700:4700::1111]:8080/"
    assert str(target.address) == "2606:4700:4700::1111"
