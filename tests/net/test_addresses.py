"""The address classifier behind the destination guards (HTTP tools, OAuth sign-in): every class in
both families, and the IPv6 forms that carry an IPv4 address."""

from __future__ import annotations

import ipaddress

import pytest

from sidecar.net.addresses import classify

REFUSED = [
    # IPv4
    ("127.0.0.1", "loopback"), ("127.255.255.254", "loopback"),
    ("10.1.2.3", "private"), ("172.16.0.1", "private"), ("172.31.255.255", "private"),
    ("192.168.1.1", "private"),
    ("100.64.0.1", "shared"), ("100.127.255.254", "shared"),
    ("169.254.1.1", "link-local"),
    ("169.254.169.254", "metadata"), ("169.254.170.2", "metadata"), ("100.100.100.200", "metadata"),
    ("192.0.0.192", "metadata"), ("168.63.129.16", "metadata"),
    ("0.0.0.0", "unspecified"), ("0.1.2.3", "unspecified"),
    ("224.0.0.1", "multicast"), ("239.255.255.250", "multicast"),
    ("240.0.0.1", "reserved"), ("255.255.255.255", "reserved"), ("192.0.2.1", "reserved"),
    ("198.18.0.1", "reserved"), ("203.0.113.9", "reserved"),
    # IPv6
    ("::1", "loopback"), ("::", "unspecified"),
    ("fc00::1", "private"), ("fd12:3456::1", "private"), ("fec0::1", "private"),
    ("fe80::1", "link-local"), ("fe80::1%eth0", "link-local"),
    ("fd00:ec2::254", "metadata"), ("fd20:ce::254", "metadata"),
    ("ff02::1", "multicast"), ("ff05::fb", "multicast"),
    ("2001:db8::1", "reserved"), ("100::1", "reserved"), ("4000::1", "reserved"),
    ("64:ff9b:1::a00:1", "private"),
    # IPv4 forms in IPv6: mapped, compatible, 6to4, NAT64, Teredo
    ("::ffff:127.0.0.1", "loopback"), ("::ffff:7f00:1", "loopback"), ("::ffff:10.0.0.1", "private"),
    ("::ffff:169.254.169.254", "metadata"), ("::ffff:100.100.100.200", "metadata"),
    ("::ffff:0.0.0.0", "unspecified"), ("::ffff:192.168.0.1", "private"), ("::ffff:100.64.0.1", "shared"),
    ("::127.0.0.1", "loopback"), ("::169.254.169.254", "metadata"), ("::8.8.8.8", "reserved"),
    ("2002:7f00:1::", "loopback"), ("2002:a9fe:a9fe::1", "metadata"), ("2002:c0a8:101::", "private"),
    ("64:ff9b::127.0.0.1", "loopback"), ("64:ff9b::a9fe:a9fe", "metadata"), ("64:ff9b::10.0.0.1", "private"),
    ("2001:0:4136:e378:8000:63bf:80ff:fffe", "loopback"),  # Teredo client 127.0.0.1 (stored inverted)
]

PUBLIC = ["8.8.8.8", "1.1.1.1", "93.184.216.34", "100.63.255.255", "100.128.0.0", "172.32.0.1",
          "169.253.255.255", "2606:4700:4700::1111", "2a00:1450::1", "::ffff:8.8.8.8",
          "64:ff9b::8.8.8.8", "2002:808:808::1", "2001:0:4136:e378:8000:63bf:f7f7:f7f7"]


@pytest.mark.parametrize(("address", "kind"), REFUSED)
def test_a_non_public_address_is_classified_with_the_range_it_is_in(address: str, kind: str) -> None:
    verdict = classify(ipaddress.ip_address(address))
    assert verdict is not None and verdict.kind == kind, (address, verdict)
    text = verdict.describe()
    assert kind.split("-")[0] in text or (kind == "shared" and "carrier-grade" in text)


@pytest.mark.parametrize("address", PUBLIC)
def test_a_public_address_passes(address: str) -> None:
    assert classify(ipaddress.ip_address(address)) is None


def test_an_ipv4_form_names_the_address_it_carries() -> None:
    verdict = classify(ipaddress.ip_address("::ffff:169.254.169.254"))
    assert verdict is not None
    assert verdict.describe() == "a cloud metadata address (IPv4-mapped form of 169.254.169.254)"
    six_to_four = classify(ipaddress.ip_address("2002:7f00:1::"))
    assert six_to_four is not None and six_to_four.via == "6to4 form of 127.0.0.1"
