"""Connecting to a checked address keeps TLS honest: the certificate is verified against the
URL's name (sent as SNI), not against the address the backend connected to.

An HTTPS server on 127.0.0.1 with a certificate for `site.test` only, signed by a CA made here;
the injected resolver maps names to 127.0.0.1 (no real DNS).
"""

from __future__ import annotations

import datetime
import ssl
from http.server import BaseHTTPRequestHandler

import httpx
import pytest
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID

from crawlsched.drivers.net import guarded_client
from crawlsched.drivers.targets import parse_networks
from tests.support.serving import running

LOOPBACK = parse_networks(["127.0.0.1/32"])


def _cert(name: str, issuer_key, issuer_name, key, ca: bool) -> x509.Certificate:
    now = datetime.datetime.now(datetime.UTC)
    subject = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, name)])
    builder = (
        x509.CertificateBuilder()
        .subject_name(subject)
        .issuer_name(issuer_name or subject)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(days=1))
        .not_valid_after(now + datetime.timedelta(days=1))
        .add_extension(x509.BasicConstraints(ca=ca, path_length=None), critical=True)
    )
    if not ca:
        builder = builder.add_extension(
            x509.SubjectAlternativeName([x509.DNSName(name)]), critical=False
        )
    return builder.sign(issuer_key, hashes.SHA256())


class _Hello(BaseHTTPRequestHandler):
    def do_GET(self) -> None:
        self.server.seen.append((self.headers.get("Host"), self.path))
        self.send_response(200)
        self.send_header("Content-Length", "5")
        self.end_headers()
        self.wfile.write(b"hello")

    def log_message(self, *args) -> None:
        pass


@pytest.fixture
def tls_site(tmp_path):
    ca_key, key = ec.generate_private_key(ec.SECP256R1()), ec.generate_private_key(ec.SECP256R1())
    ca = _cert("test CA", ca_key, None, ca_key, ca=True)
    leaf = _cert("site.test", ca_key, ca.subject, key, ca=False)
    (tmp_path / "leaf.pem").write_bytes(leaf.public_bytes(serialization.Encoding.PEM))
    (tmp_path / "key.pem").write_bytes(
        key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        )
    )
    server_context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    server_context.load_cert_chain(tmp_path / "leaf.pem", tmp_path / "key.pem")
    names: list[str | None] = []
    server_context.sni_callback = lambda sock, name, ctx: names.append(name)
    client_context = ssl.create_default_context(
        cadata=ca.public_bytes(serialization.Encoding.PEM).decode()
    )
    with running(_Hello, seen=[]) as server:
        server.socket = server_context.wrap_socket(server.socket, server_side=True)
        yield server, client_context, names


def _client(context: ssl.SSLContext) -> httpx.Client:
    return guarded_client(LOOPBACK, 5, resolver=lambda host, _: ["127.0.0.1"], ssl_context=context)


def test_tls_verifies_the_name_and_sends_it_as_sni(tls_site):
    server, context, names = tls_site
    port = server.server_address[1]
    with _client(context) as client:
        assert client.get(f"https://site.test:{port}/page").text == "hello"
    assert names == ["site.test"]
    assert server.seen == [(f"site.test:{port}", "/page")]


def test_a_name_the_certificate_does_not_cover_fails_verification(tls_site):
    server, context, _ = tls_site
    port = server.server_address[1]
    with _client(context) as client, pytest.raises(httpx.ConnectError, match="CERTIFICATE"):
        client.get(f"https://other.test:{port}/page")
    assert server.seen == []
