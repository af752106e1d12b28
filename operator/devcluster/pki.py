"""Throwaway PKI for a local kube-apiserver.

kube-apiserver's self-signed fallback certificate has no CA we could hand to
clients, so we mint our own CA, a serving certificate for 127.0.0.1/localhost and
a service-account signing key. ECDSA P-256 keeps generation instant.
"""

from __future__ import annotations

import datetime
import ipaddress
import secrets
from dataclasses import dataclass
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

_VALIDITY = datetime.timedelta(days=30)


@dataclass(frozen=True)
class Pki:
    """Paths of the files kube-apiserver and its clients need."""

    ca_cert: Path
    serving_cert: Path
    serving_key: Path
    sa_key: Path
    token_file: Path
    admin_token: str


def _key_pem(key: ec.EllipticCurvePrivateKey) -> bytes:
    # "EC PRIVATE KEY" (SEC1): kube-apiserver's SA key reader rejects PKCS#8.
    return key.private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.TraditionalOpenSSL,
        serialization.NoEncryption(),
    )


def _write(path: Path, data: bytes, mode: int = 0o600) -> None:
    path.write_bytes(data)
    path.chmod(mode)


def write_pki(directory: Path, extra_ips: tuple[str, ...] = ()) -> Pki:
    """Create CA, serving cert, SA key and an admin token file (group system:masters).

    extra_ips join 127.0.0.1 in the serving certificate, e.g. the `kubernetes` Service
    address that pods on a real node connect to.
    """
    directory.mkdir(parents=True, exist_ok=True)
    now = datetime.datetime.now(datetime.UTC)

    ca_key = ec.generate_private_key(ec.SECP256R1())
    ca_name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "podium-dev-ca")])
    ca_cert = (
        x509.CertificateBuilder()
        .subject_name(ca_name)
        .issuer_name(ca_name)
        .public_key(ca_key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + _VALIDITY)
        .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
        .add_extension(
            x509.KeyUsage(
                digital_signature=True,
                content_commitment=False,
                key_encipherment=False,
                data_encipherment=False,
                key_agreement=False,
                key_cert_sign=True,
                crl_sign=True,
                encipher_only=False,
                decipher_only=False,
            ),
            critical=True,
        )
        .add_extension(x509.SubjectKeyIdentifier.from_public_key(ca_key.public_key()), False)
        .sign(ca_key, hashes.SHA256())
    )

    serving_key = ec.generate_private_key(ec.SECP256R1())
    serving_cert = (
        x509.CertificateBuilder()
        .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "kube-apiserver")]))
        .issuer_name(ca_name)
        .public_key(serving_key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + _VALIDITY)
        .add_extension(
            x509.SubjectAlternativeName(
                [
                    x509.IPAddress(ipaddress.IPv4Address("127.0.0.1")),
                    *(x509.IPAddress(ipaddress.ip_address(ip)) for ip in extra_ips),
                    x509.DNSName("localhost"),
                    x509.DNSName("kubernetes.default.svc"),
                ]
            ),
            critical=False,
        )
        .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH]), critical=False)
        .add_extension(
            x509.AuthorityKeyIdentifier.from_issuer_public_key(ca_key.public_key()), False
        )
        .sign(ca_key, hashes.SHA256())
    )

    sa_key = ec.generate_private_key(ec.SECP256R1())
    token = secrets.token_hex(24)

    pki = Pki(
        ca_cert=directory / "ca.crt",
        serving_cert=directory / "apiserver.crt",
        serving_key=directory / "apiserver.key",
        sa_key=directory / "sa.key",
        token_file=directory / "tokens.csv",
        admin_token=token,
    )
    _write(pki.ca_cert, ca_cert.public_bytes(serialization.Encoding.PEM), 0o644)
    _write(pki.serving_cert, serving_cert.public_bytes(serialization.Encoding.PEM), 0o644)
    _write(pki.serving_key, _key_pem(serving_key))
    _write(pki.sa_key, _key_pem(sa_key))
    # Format: token,user,uid,"group1,group2".
    _write(pki.token_file, f'{token},podium-admin,podium-admin,"system:masters"\n'.encode())
    return pki
