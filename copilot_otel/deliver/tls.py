"""TLS for the OTLP transports: which CAs a collector's certificate is checked against, and client certificates.

Every signal (spans, log events, metrics) is sent by :mod:`~copilot_otel.deliver.export`'s transports, which take their
TLS settings from here, per signal (:class:`~copilot_otel.settings.config.OtlpOptions`):

* ``otlp_certificate`` (``OTEL_EXPORTER_OTLP_[<SIGNAL>_]CERTIFICATE``) is the CA file the collector's
  certificate must chain to; it replaces the trust store, as the OTel SDK's exporters do.
* Without it, ``tls_trust`` decides: ``system`` (the default) is the OS trust store through ``truststore``
  (the macOS Security framework, the Windows certificate store, OpenSSL's default paths on Linux, which honour
  ``SSL_CERT_FILE`` / ``SSL_CERT_DIR``), so a TLS-inspecting corporate proxy whose CA IT installed is trusted;
  ``certifi`` is Mozilla's bundle (what ``requests`` uses on its own). Without ``truststore`` installed,
  ``system`` falls back to certifi.
* ``otlp_client_certificate`` / ``otlp_client_key`` authenticate us to the collector (mTLS).

gRPC has its own TLS stack and takes PEM roots only, so for it ``system`` means the PEM files of OpenSSL's
default paths (Linux and most macOS Pythons) or, on Windows, the system store as the ``ssl`` module loads it;
when neither yields a certificate, gRPC's bundled roots.
"""

from __future__ import annotations

import logging
import os
import re
import ssl
from pathlib import Path
from typing import Any

from ..common.errors import ConfigError
from ..settings.config import OtlpOptions

logger = logging.getLogger(__name__)

_HASHED_NAME = re.compile(r"^[0-9a-fA-F]{8}\.[0-9]+$")


def _truststore() -> Any | None:
    try:
        import truststore
    except ImportError:
        return None
    return truststore


def uses_tls(endpoint: str, protocol: str, options: OtlpOptions) -> bool:
    """Whether requests to ``endpoint`` are encrypted (and so checked against a trust store)."""
    if endpoint.lower().startswith("https://"):
        return True
    return protocol == "grpc" and not endpoint.lower().startswith("http://") and not options.insecure


def trust_source(options: OtlpOptions) -> str:
    """What the collector's certificate is checked against, in words (for messages and ``doctor``)."""
    if options.certificate is not None:
        return f"the CA file {options.certificate} (OTEL_EXPORTER_OTLP_CERTIFICATE)"
    if options.trust == "system" and _truststore() is not None:
        return "the OS trust store"
    if options.trust == "system":
        return "certifi's CA bundle (truststore is not installed, so not the OS trust store)"
    return "certifi's CA bundle (tls_trust=certifi)"


def ssl_context(options: OtlpOptions) -> ssl.SSLContext:
    """The client context for HTTPS: its trust as described above, hostname checking on, the client chain loaded.

    Raises:
        ConfigError: A certificate or key file cannot be loaded (not PEM, key does not match).
    """
    truststore = _truststore()
    try:
        if options.certificate is not None:
            context = ssl.create_default_context(cafile=str(options.certificate))
        elif options.trust == "system" and truststore is not None:
            context = truststore.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
        else:
            import certifi

            context = ssl.create_default_context(cafile=certifi.where())
        if options.client_certificate is not None:
            key = str(options.client_key) if options.client_key is not None else None
            context.load_cert_chain(str(options.client_certificate), key)
    except (ssl.SSLError, OSError) as exc:
        files = ", ".join(str(path) for path in options.tls_files if path is not None)
        raise ConfigError(
            f"Cannot use the TLS files {files}: {getattr(exc, 'reason', None) or exc}"
        ) from None
    return context


def adapter(options: OtlpOptions) -> Any:
    """A ``requests`` adapter whose HTTPS connections use :func:`ssl_context` and nothing else (``requests``
    would otherwise add certifi's bundle to any context)."""
    from requests.adapters import HTTPAdapter

    context = ssl_context(options)

    class _ContextAdapter(HTTPAdapter):
        def init_poolmanager(self, *args: Any, **kwargs: Any) -> None:
            kwargs["ssl_context"] = context
            super().init_poolmanager(*args, **kwargs)

        def proxy_manager_for(self, proxy: str, **kwargs: Any) -> Any:
            kwargs["ssl_context"] = context
            return super().proxy_manager_for(proxy, **kwargs)

        def build_connection_pool_key_attributes(
            self, request: Any, verify: Any, cert: Any = None
        ) -> tuple[dict[str, Any], dict[str, Any]]:
            host, pool = super().build_connection_pool_key_attributes(request, verify, cert)
            pool.pop("ca_certs", None)
            pool.pop("ca_cert_dir", None)
            pool["ssl_context"] = context
            pool["cert_reqs"] = "CERT_REQUIRED"
            return host, pool

        def cert_verify(self, conn: Any, url: str, verify: Any, cert: Any) -> None:
            conn.cert_reqs = "CERT_REQUIRED"  # the context holds the trust; load no bundle on top of it

    return _ContextAdapter()


def grpc_credentials(options: OtlpOptions) -> Any:
    """``grpc.ChannelCredentials`` with the same trust and client chain as :func:`ssl_context`."""
    import grpc

    if options.certificate is not None:
        roots: bytes | None = options.certificate.read_bytes()
    elif options.trust == "system":
        roots = _system_roots_pem()
    else:
        import certifi

        roots = Path(certifi.where()).read_bytes()
    return grpc.ssl_channel_credentials(
        root_certificates=roots,
        private_key=options.client_key.read_bytes() if options.client_key is not None else None,
        certificate_chain=(
            options.client_certificate.read_bytes() if options.client_certificate is not None else None
        ),
    )


def _system_roots_pem() -> bytes | None:
    """The OS trust store as PEM for gRPC: OpenSSL's default CA file or hashed directory (``SSL_CERT_FILE``,
    ``SSL_CERT_DIR``), else what the ``ssl`` module loads as default certificates (the Windows store)."""
    paths = ssl.get_default_verify_paths()
    if paths.cafile:
        return Path(paths.cafile).read_bytes()
    if paths.capath and os.path.isdir(paths.capath):
        names = sorted(name for name in os.listdir(paths.capath) if _HASHED_NAME.match(name))
        if names:
            return b"\n".join(Path(paths.capath, name).read_bytes() for name in names)
    certs = ssl.create_default_context().get_ca_certs(binary_form=True)
    if certs:
        return "".join(ssl.DER_cert_to_PEM_cert(der) for der in certs).encode("ascii")
    return None  # gRPC's bundled roots


#: What every TLS failure line starts with (``doctor`` recognises it).
FAILURE_PREFIX = "TLS with "
_REASONS = (
    re.compile(r"certificate verify failed: ([^(')\]]+)"),  # Python's ssl (HTTPS)
    re.compile(r"CERTIFICATE_VERIFY_FAILED: ([^,;\n]+?)(?:: OK)?(?:[,;\n]|$)"),  # gRPC's BoringSSL
)


def is_handshake_failure(details: str) -> bool:
    """Whether a gRPC status detail is a TLS handshake failure (not an outage)."""
    lowered = details.lower()
    return "handshake failed" in lowered or "certificate_verify_failed" in lowered


def failure(url: str, detail: str, options: OtlpOptions) -> str:
    """One line saying why TLS with the collector failed and what to set."""
    match = next((found for pattern in _REASONS if (found := pattern.search(detail))), None)
    upper = detail.upper()
    if match:
        reason = "certificate not trusted: " + match.group(1).strip()
    elif "CERTIFICATE_VERIFY_FAILED" in upper:
        reason = "certificate not trusted"
    else:
        found = re.search(
            r"\[SSL: [A-Z0-9_]+\][^')]*|SSL_ERROR_[A-Z0-9_]+[^,;]*|SSL\w*Error\(\d+, '([^']+)", detail
        )
        reason = ((found.group(1) or found.group(0)) if found else detail[:160]).strip()
    if "CERTIFICATE_REQUIRED" in upper or "BAD_CERTIFICATE" in upper or "UNKNOWN_CA" in upper:
        fix = (
            f"the collector refused the client certificate {options.client_certificate}: is it signed by a CA "
            "the collector trusts, and is OTEL_EXPORTER_OTLP_CLIENT_KEY its key?"
            if options.client_certificate is not None
            else "the collector asks for a client certificate: set OTEL_EXPORTER_OTLP_CLIENT_CERTIFICATE and "
            "OTEL_EXPORTER_OTLP_CLIENT_KEY"
        )
    elif "VERIFY_FAILED" in upper or "VERIFY FAILED" in upper:
        fix = (
            "check that the collector's certificate chains to that CA and names the endpoint's host"
            if options.certificate is not None
            else "set OTEL_EXPORTER_OTLP_CERTIFICATE to the CA certificate (PEM) that signed the collector's, "
            "or add that CA to the OS trust store"
        )
    elif "EOF" in upper and options.client_certificate is None:
        # TLS 1.3: a collector that wants a client certificate may just hang up before its alert is read
        fix = (
            "the collector hung up during the handshake: if it asks for a client certificate, set "
            "OTEL_EXPORTER_OTLP_CLIENT_CERTIFICATE and OTEL_EXPORTER_OTLP_CLIENT_KEY; if it does not speak TLS "
            "on that port, use http://"
        )
    else:
        fix = "does the collector speak TLS on that port? An endpoint without TLS needs http://"
    return f"{FAILURE_PREFIX}{url} failed ({reason}); checked against {trust_source(options)}: {fix}"
