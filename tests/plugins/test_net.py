"""``skald_hookspecs.net``, the contract's outbound address check (check F2): every form
of an address of this machine or a private network is refused, whether written as a
literal or as a name that resolves to it; a public address passes. Names here resolve
without DNS (the C library reads numeric forms and ``localhost.`` itself)."""

from __future__ import annotations

import ipaddress

import pytest

from skald_hookspecs.net import AddressRefused, is_public, public_addresses, public_addresses_now

REFUSED = [
    "127.0.0.1", "localhost", "0.0.0.0", "::1", "[::1]", "::ffff:127.0.0.1", "::ffff:7f00:1",
    "2130706433", "0x7f.1", "127.1", "169.254.169.254", "10.1.2.3", "172.16.0.1", "192.168.1.1", "100.64.0.1",
    "64:ff9b::a00:1", "2002:a00:1::1", "fe80::1", "fc00::1", "224.0.0.1", "ff02::1",
    "::ffff:0:7f00:1", "::ffff:0:a9fe:a9fe", "fec0::1",  # SIIT-translated, deprecated site-local (probe: both passed)
]


@pytest.mark.parametrize("host", REFUSED)
def test_every_private_or_special_form_is_refused_naming_the_address(host):
    with pytest.raises(AddressRefused, match="private or special address"):
        public_addresses_now(host, 443)


def test_a_name_that_does_not_resolve_and_an_empty_host_are_refused():
    with pytest.raises(AddressRefused, match="does not resolve") as unresolved:
        public_addresses_now("nothing.invalid", 443)
    assert (unresolved.value.reason, unresolved.value.host, unresolved.value.address) == ("unresolved", "nothing.invalid", None)
    with pytest.raises(AddressRefused, match="names no host") as empty:
        public_addresses_now("", 443)
    assert empty.value.reason == "no_host"


def test_a_refusal_says_why_in_a_form_a_plugin_can_translate():
    """Since 1.6: ``reason`` and the address, not only an English sentence to parse."""
    with pytest.raises(AddressRefused) as refused:
        public_addresses_now("localhost", 443)
    assert refused.value.reason == "private" and refused.value.host == "localhost"
    assert refused.value.address in ("127.0.0.1", "::1")


async def test_a_public_address_passes_and_is_returned_to_connect_to():
    assert await public_addresses("8.8.8.8", 443) == [ipaddress.ip_address("8.8.8.8")]
    assert await public_addresses("[2606:4700::1111]", 443) == [ipaddress.ip_address("2606:4700::1111")]
    assert is_public(ipaddress.ip_address("1.1.1.1")) and not is_public(ipaddress.ip_address("64:ff9b::7f00:1"))
