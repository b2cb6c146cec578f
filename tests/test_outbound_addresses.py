"""The one rule for outgoing addresses (`outbound.addresses`): a host is judged by what a
resolver makes of it, in every spelling: decimal, hex, octal, short forms, zero-padded parts,
IPv4-mapped IPv6, upper case, names from /etc/hosts."""

from __future__ import annotations

import ipaddress
import socket
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from crawlsched.errors import UnsafeTarget
from crawlsched.outbound.addresses import (
    check_host,
    inet_aton,
    literal_addresses,
    parse_networks,
    refusal,
)

LOOPBACK_SPELLINGS = [
    "127.0.0.1",
    "2130706433",
    "0x7f000001",
    "0X7F000001",
    "017700000001",
    "0177.0.0.1",
    "0x7f.0.0.1",
    "127.1",
    "127.0.1",
    "127.000.000.001",
    "0177.0.0.01",
    "localhost",
    "LOCALHOST",
    "LocalHost.",
    "api.localhost",
    "[::ffff:127.0.0.1]",
    "::ffff:7f00:1",
    "[0:0:0:0:0:ffff:7f00:1]",
    "2002:7f00:1::",  # 6to4 around 127.0.0.1
    "[::1]",
    "[::ffff:127.0.0.1]:514",  # how some Apprise services keep a host with its port
]


def never_resolve(host: str, port: int) -> list[str]:
    raise AssertionError(f"{host!r} is a literal: it must not be resolved")


def hosts_file_loopback_names() -> list[str]:
    """Names /etc/hosts gives a loopback address (besides `localhost`)."""
    names = []
    for line in Path("/etc/hosts").read_text().splitlines():
        fields = line.split("#")[0].split()
        if len(fields) > 1 and ipaddress.ip_address(fields[0]).is_loopback:
            names += [n for n in fields[1:] if "localhost" not in n]
    return names


@st.composite
def spelled(draw, address: ipaddress.IPv4Address) -> str:
    """`address` as inet_aton reads it: 1 to 4 parts, each decimal, octal or hex, padded."""
    value = int(address)
    parts = draw(st.integers(1, 4))
    widths = [8] * (parts - 1) + [32 - 8 * (parts - 1)]
    numbers, shift = [], 32
    for width in widths:
        shift -= width
        numbers.append((value >> shift) & ((1 << width) - 1))
    texts = []
    for number in numbers:
        form = draw(st.sampled_from(["dec", "oct", "hex"]))
        pad = "0" * draw(st.integers(0, 3))
        if form == "dec":
            texts.append(str(number))
        elif form == "oct":
            texts.append("0" + pad + format(number, "o"))
        else:
            digits = format(number, draw(st.sampled_from(["x", "X"])))
            texts.append(draw(st.sampled_from(["0x", "0X"])) + pad + digits)
    return ".".join(texts)


ipv4 = st.builds(ipaddress.IPv4Address, st.integers(0, 2**32 - 1))


@settings(deadline=None, max_examples=500)
@given(st.data(), ipv4)
def test_every_spelling_of_an_ipv4_address_names_that_address(data, address):
    text = data.draw(spelled(address))
    assert literal_addresses(text) == [str(address)]
    # The C library reads it the same way (what getaddrinfo, and so every client, does).
    assert socket.inet_aton(text) == address.packed


@settings(deadline=None, max_examples=500)
@given(st.data(), ipv4)
def test_a_spelling_is_refused_exactly_when_its_address_is(data, address):
    text = data.draw(spelled(address))
    refused = refusal(address, ()) is not None
    try:
        check_host(text, 80, (), resolver=never_resolve)
    except UnsafeTarget:
        assert refused
    else:
        assert not refused


@settings(deadline=None, max_examples=2000)
@given(st.text(alphabet="0123456789abcdefxX.", max_size=24))
def test_inet_aton_agrees_with_the_c_library_on_any_numeric_text(text):
    try:
        expected = ipaddress.IPv4Address(socket.inet_aton(text))
    except OSError:
        expected = None
    assert inet_aton(text) == expected


@pytest.mark.parametrize("host", LOOPBACK_SPELLINGS)
def test_every_loopback_spelling_is_refused_and_admitted_only_by_an_allowed_network(host):
    with pytest.raises(UnsafeTarget, match=r"loopback|reserved"):
        check_host(host, 80, ())
    check_host(host, 80, parse_networks(["127.0.0.0/8", "::1/128"]))


def test_names_etc_hosts_gives_loopback_are_refused_through_the_resolver():
    names = [*hosts_file_loopback_names(), socket.gethostname().upper()]
    names = [n for n in names if _resolves_to_loopback(n)]
    assert names, "this machine's /etc/hosts names no loopback host to check"
    for name in names:
        assert literal_addresses(name) is None  # a name: only the resolver knows
        with pytest.raises(UnsafeTarget, match="loopback address 127"):
            check_host(name, 80, ())


def _resolves_to_loopback(name: str) -> bool:
    try:
        infos = socket.getaddrinfo(name, 80)
    except OSError:
        return False
    return all(ipaddress.ip_address(i[4][0]).is_loopback for i in infos)


@pytest.mark.parametrize(
    ("host", "kind"),
    [
        ("10.0.0.1", "private"),
        ("0xa000001", "private"),
        ("169.254.169.254", "link-local"),
        ("0xa9fea9fe", "link-local"),
        ("0.0.0.0", "private"),  # 0.0.0.0/8, "this network"
        ("0", "private"),
        ("224.0.0.1", "multicast"),
        ("100.64.0.1", "non-global"),
        ("fe80::1%eth0", "link-local"),
    ],
)
def test_other_refused_ranges_name_their_kind(host, kind):
    with pytest.raises(UnsafeTarget, match=f"resolves to {kind} address"):
        check_host(host, 80, (), resolver=never_resolve)


def test_a_public_address_passes_and_a_name_is_resolved_with_its_port():
    asked = []

    def resolver(host, port):
        asked.append((host, port))
        return ["93.184.216.34"]

    assert check_host("example.com", 8443, (), resolver) == ["93.184.216.34"]
    assert check_host("0x5db8d822", 80, (), never_resolve) == ["93.184.216.34"]
    assert asked == [("example.com", 8443)]


def test_a_name_with_one_refused_address_among_public_ones_is_refused():
    def resolver(host, port):
        return ["93.184.216.34", "127.0.0.1"]

    with pytest.raises(UnsafeTarget, match="loopback"):
        check_host("example.com", 80, (), resolver)


def test_the_refusal_names_the_setting_that_would_allow_it():
    with pytest.raises(UnsafeTarget, match="add its network to CRAWLSCHED_NODE_ALLOW_NETWORKS"):
        check_host("127.1", 4444, (), setting="CRAWLSCHED_NODE_ALLOW_NETWORKS")
