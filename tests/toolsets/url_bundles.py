"""Bundle ZIPs made in memory for the URL import tests: a toolset of HTTP tools only (installing it
starts no worker), with a secret and a plain config field, in the version asked for."""

from __future__ import annotations

import datetime
import hashlib
import io
import os
import ssl
import zipfile
from pathlib import Path

from tests.http_server import HttpServer, Request, Response


def bundle(version: str = "1.0.0", toolset_id: str = "inventory", extra_tool: bool = False, filler: int = 0) -> bytes:
    """``filler``: that many random bytes in an asset, stored as they are (to make a bundle big)."""
    tools = ["""  - id: get_item
    description: Fetch one item
    input_schema: {type: object, properties: {id: {type: string}}, required: [id]}
    http:
      urlTemplate: "https://${api_host}/items/${id}"
      headers: {X-Api-Key: "${api_key}"}
      allowedHosts: ["api.example.com"]
"""]
    if extra_tool:
        tools.append("""  - id: list_items
    description: List every item (new in 2.0)
    http:
      urlTemplate: "https://${api_host}/items"
      allowedHosts: ["api.example.com"]
""")
    manifest = f"""manifest_version: "1"
id: {toolset_id}
name: Inventory
version: "{version}"
description: Items of an inventory API
config_schema:
  api_host: {{description: "host of the API", default: "api.example.com"}}
  api_key: {{description: "Your API key", secret: true, required: true}}
tools:
{"".join(tools)}"""
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED) as z:
        z.writestr("toolset.yaml", manifest)
        z.writestr("README.md", f"Inventory {version}\n")
        if filler:
            z.writestr("assets/noise.bin", os.urandom(filler), compress_type=zipfile.ZIP_STORED)
    return buffer.getvalue()


def sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def serve_bundle(server: HttpServer, path: str, data: bytes, etag: str | None = None) -> str:
    """Serve ``data`` at ``path`` (answering 304 to a matching If-None-Match); returns its URL."""
    headers = {"Content-Type": "application/zip"} | ({"ETag": etag} if etag else {})

    def answer(request: Request) -> Response:
        if etag is not None and request.header("If-None-Match") == etag:
            return Response(304, headers={"ETag": etag})
        return Response(body=data, headers=headers)

    server.route("GET", path, handler=answer)
    return server.url + path


def tls_for(name: str, folder: Path) -> tuple[ssl.SSLContext, ssl.SSLContext]:
    """A throwaway CA and a certificate for ``name`` it signed: the server's context, and a client
    context that trusts that CA alone. The CA is also written to ``folder/ca.pem``."""
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID

    now = datetime.datetime.now(datetime.UTC)
    day = datetime.timedelta(days=1)
    ca_key, key = ec.generate_private_key(ec.SECP256R1()), ec.generate_private_key(ec.SECP256R1())
    ca_name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "bundle test CA")])
    ca = (x509.CertificateBuilder().subject_name(ca_name).issuer_name(ca_name).public_key(ca_key.public_key())
          .serial_number(1).not_valid_before(now - day).not_valid_after(now + day)
          .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
          .sign(ca_key, hashes.SHA256()))
    leaf = (x509.CertificateBuilder().subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, name)]))
            .issuer_name(ca_name).public_key(key.public_key()).serial_number(2)
            .not_valid_before(now - day).not_valid_after(now + day)
            .add_extension(x509.SubjectAlternativeName([x509.DNSName(name)]), critical=False)
            .sign(ca_key, hashes.SHA256()))
    folder.mkdir(parents=True, exist_ok=True)
    cert_file, key_file, ca_file = folder / "cert.pem", folder / "key.pem", folder / "ca.pem"
    cert_file.write_bytes(leaf.public_bytes(serialization.Encoding.PEM))
    key_file.write_bytes(key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                           serialization.NoEncryption()))
    ca_file.write_bytes(ca.public_bytes(serialization.Encoding.PEM))
    server = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    server.load_cert_chain(cert_file, key_file)
    return server, ssl.create_default_context(cafile=str(ca_file))
