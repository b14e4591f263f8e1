"""Certificate reload (trafka.net.tls.ReloadingContext): a changed keystore is taken for new
handshakes after the check interval; a broken one, or one for another subject or other SANs,
is refused and the old context kept; the server's certificate seen by a real TLS handshake
(memory BIOs) follows."""

from __future__ import annotations

import os
import ssl
from pathlib import Path

import pytest

from tests.support.certs import CertificateAuthority
from trafka.net.tls import (
    ReloadingContext,
    TlsConfigError,
    TlsSettings,
    client_context,
    keystore_identity,
    server_context,
)


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def _served_certificate(server: ssl.SSLContext, ca: CertificateAuthority) -> bytes:
    """The DER certificate a client sees when it handshakes with `server` (in memory)."""
    client = client_context(TlsSettings(truststore_location=str(ca.ca_file)))
    c_in, c_out, s_in, s_out = (ssl.MemoryBIO() for _ in range(4))
    client_side = client.wrap_bio(c_in, c_out, server_hostname="localhost")
    server_side = server.wrap_bio(s_in, s_out, server_side=True)
    for _ in range(10):
        for side in (client_side, server_side):
            try:
                side.do_handshake()
            except ssl.SSLWantReadError:
                pass
        s_in.write(c_out.read())
        c_in.write(s_out.read())
        try:
            certificate = client_side.getpeercert(binary_form=True)
        except ValueError:
            continue
        if certificate:
            return certificate
    raise AssertionError("no handshake")


def _replace(target: Path, source: Path) -> None:
    """Rotate a file as an operator should: a complete new file renamed over the old one."""
    os.replace(source, target)


@pytest.fixture
def ca(tmp_path: Path) -> CertificateAuthority:
    return CertificateAuthority(tmp_path / "certs")


def _reloading(ca: CertificateAuthority, clock: Clock) -> tuple[ReloadingContext, Path]:
    broker = ca.issue("broker", "localhost", "Brokers")
    settings = TlsSettings(keystore_location=str(broker.chain), truststore_location=str(ca.ca_file))
    return ReloadingContext(settings, server_context, clock=clock, interval_s=1.0), broker.chain


def test_a_rotated_keystore_is_served_after_the_check_interval(ca: CertificateAuthority) -> None:
    clock = Clock()
    source, chain = _reloading(ca, clock)
    first = source()
    old_certificate = _served_certificate(first, ca)
    clock.now += 5
    assert source() is first  # nothing changed
    _replace(chain, ca.issue("broker-next", "localhost", "Brokers").chain)
    clock.now += 0.5
    assert source() is first  # not checked again yet
    clock.now += 1
    second = source()
    assert second is not first and source.reloads == 1 and source.last_refusal is None
    new_certificate = _served_certificate(second, ca)
    assert new_certificate != old_certificate
    assert new_certificate == ssl.PEM_cert_to_DER_cert(
        chain.read_text()[chain.read_text().index("-----BEGIN CERTIFICATE-----") :]
    )


def test_a_broken_keystore_keeps_the_old_context_until_fixed(ca: CertificateAuthority) -> None:
    clock = Clock()
    source, chain = _reloading(ca, clock)
    first = source()
    half = chain.with_name("half.pem")
    half.write_bytes(chain.read_bytes()[:100])
    _replace(chain, half)
    clock.now += 2
    assert source() is first
    assert source.last_refusal is not None and "keystore" in source.last_refusal
    _replace(chain, ca.issue("broker-fixed", "localhost", "Brokers").chain)
    clock.now += 2
    assert source() is not first and source.reloads == 1


def test_a_keystore_for_another_subject_is_refused(ca: CertificateAuthority) -> None:
    clock = Clock()
    source, chain = _reloading(ca, clock)
    first = source()
    _replace(chain, ca.issue("intruder", "intruder", "Brokers").chain)
    clock.now += 2
    assert source() is first
    assert source.last_refusal is not None and "subject and SAN" in source.last_refusal
    assert source.reloads == 0


def test_inline_pem_is_never_rechecked(ca: CertificateAuthority) -> None:
    broker = ca.issue("broker", "localhost")
    key = broker.key.read_text()
    settings = TlsSettings(
        keystore_certificate_chain=broker.cert.read_text(),
        keystore_key=key,
        truststore_certificates=ca.ca_file.read_text(),
    )
    clock = Clock()
    source = ReloadingContext(settings, server_context, clock=clock)
    first = source()
    clock.now += 100
    assert source() is first
    assert keystore_identity(settings) is not None


def test_identity_of_a_keystore_without_certificate_is_an_error(tmp_path: Path) -> None:
    empty = tmp_path / "empty.pem"
    empty.write_text("nothing here\n")
    with pytest.raises(TlsConfigError):
        keystore_identity(TlsSettings(keystore_location=str(empty)))
