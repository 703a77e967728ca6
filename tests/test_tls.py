"""TLS to the collector, for every signal: a throwaway CA signs the real receiver's certificate, and spans, log
events and metrics must arrive over HTTPS and gRPC-TLS when (and only when) that CA is trusted.

The CA is trusted through ``OTEL_EXPORTER_OTLP_CERTIFICATE``, or through the OS trust store (on Linux OpenSSL's
default paths, which ``SSL_CERT_FILE`` points at a temporary bundle here). An untrusted collector is a
misconfiguration, not bad data: one line says what to set, nothing is dead-lettered, the daemon holds the data.
The macOS keychain and the Windows certificate store are not exercised here (docs/configuration.md, "TLS", says so).
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from copilot_otel.cli import main
from copilot_otel.common.errors import EndpointError, ExportError
from tests.conftest import CLI_GENERATED
from tests.daemon_process import DaemonProcess
from tests.otlp_receiver import OtlpReceiver
from tests.waiting import until

pytestmark = pytest.mark.skipif(shutil.which("openssl") is None, reason="needs the openssl command")

SESSION = CLI_GENERATED / "plain-question"


def _openssl(*args: str) -> None:
    subprocess.run(["openssl", *args], check=True, capture_output=True)


def _signed(d: Path, name: str, subject: str, extensions: str, ca: Path, ca_key: Path) -> tuple[Path, Path]:
    """A key and a certificate ``name.pem`` for ``subject``, signed by the CA with ``extensions``."""
    key, csr, cert, ext = (d / f"{name}.{suffix}" for suffix in ("key", "csr", "pem", "ext"))
    _openssl("req", "-newkey", "rsa:2048", "-nodes", "-subj", subject, "-keyout", str(key), "-out", str(csr))
    ext.write_text(extensions)
    _openssl(
        "x509", "-req", "-in", str(csr), "-CA", str(ca), "-CAkey", str(ca_key), "-CAcreateserial",
        "-days", "2", "-out", str(cert), "-extfile", str(ext),
    )  # fmt: skip
    return key, cert


@pytest.fixture(scope="module")
def pki(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """A CA, a server certificate for 127.0.0.1 / localhost and a client certificate, signed by it (PEM files)."""
    d = tmp_path_factory.mktemp("pki")
    ca_key, ca = d / "ca.key", d / "ca.pem"
    _openssl(
        "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "2", "-subj", "/CN=copilot-otel test CA",
        "-keyout", str(ca_key), "-out", str(ca),
        "-addext", "basicConstraints=critical,CA:TRUE", "-addext", "keyUsage=critical,keyCertSign,cRLSign",
    )  # fmt: skip
    key, cert = _signed(
        d,
        "server",
        "/CN=127.0.0.1",
        "subjectAltName=IP:127.0.0.1,DNS:localhost\nextendedKeyUsage=serverAuth\n",
        ca,
        ca_key,
    )
    client_key, client = _signed(d, "client", "/CN=copilot-otel", "extendedKeyUsage=clientAuth\n", ca, ca_key)
    return {"ca": ca, "cert": cert, "key": key, "client": client, "client_key": client_key}


@pytest.fixture
def tls_receiver(pki: dict[str, Path]) -> Iterator[OtlpReceiver]:
    receiver = OtlpReceiver(tls=(pki["cert"], pki["key"])).start()
    yield receiver
    receiver.stop()


def _replay(receiver: OtlpReceiver, protocol: str, max_retry_s: int = 20) -> int:
    endpoint = receiver.grpc_endpoint if protocol == "grpc" else receiver.http_endpoint
    assert endpoint.startswith("https://")
    args = ["replay", str(SESSION), "--endpoint", endpoint, "--protocol", protocol, "--no-progress"]
    return main([*args, "--max-retry-time", str(max_retry_s)])


PROTOCOLS = ["http/protobuf", "grpc"]


@pytest.mark.parametrize("protocol", PROTOCOLS)
def test_every_signal_arrives_over_tls_with_the_ca_in_otel_exporter_otlp_certificate(
    tls_receiver: OtlpReceiver, pki: dict[str, Path], monkeypatch: pytest.MonkeyPatch, protocol: str
) -> None:
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_CERTIFICATE", str(pki["ca"]))
    assert _replay(tls_receiver, protocol) == 0
    assert tls_receiver.requests == {"traces": 1, "logs": 1, "metrics": 1}
    assert len(tls_receiver.spans()) == 3 and tls_receiver.logs() and tls_receiver.metrics()


@pytest.mark.parametrize("protocol", PROTOCOLS)
def test_per_signal_certificate_variables_are_honoured(
    tls_receiver: OtlpReceiver, pki: dict[str, Path], monkeypatch: pytest.MonkeyPatch, protocol: str
) -> None:
    for signal in ("TRACES", "LOGS", "METRICS"):
        monkeypatch.setenv(f"OTEL_EXPORTER_OTLP_{signal}_CERTIFICATE", str(pki["ca"]))
    monkeypatch.setenv("COPILOT_OTEL_TLS_TRUST", "certifi")  # the per-signal CA alone makes it trusted
    assert _replay(tls_receiver, protocol) == 0
    assert tls_receiver.requests == {"traces": 1, "logs": 1, "metrics": 1}


@pytest.mark.parametrize("protocol", PROTOCOLS)
def test_an_untrusted_collector_is_one_clear_line_and_nothing_is_dead_lettered(
    tls_receiver: OtlpReceiver,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    _isolated_home: Path,
    protocol: str,
) -> None:
    monkeypatch.setenv(
        "SSL_CERT_FILE", str(_isolated_home / "no-such-bundle.pem")
    )  # the machine's own CAs only
    assert _replay(tls_receiver, protocol) == EndpointError.exit_code
    err = capsys.readouterr().err
    assert "Traceback" not in err
    lines = [line for line in err.splitlines() if line.startswith("copilot-otel: error:")]
    assert len(lines) == 1 and err.strip().splitlines()[-1] == lines[0], err
    assert "TLS with https://127.0.0.1:" in lines[0]
    assert "set OTEL_EXPORTER_OTLP_CERTIFICATE to the CA certificate" in lines[0]
    assert "delivered 0 of 3 spans" in lines[0]
    assert tls_receiver.spans() == []
    assert not list(_isolated_home.rglob("dead-letter.jsonl"))


@pytest.mark.parametrize("protocol", PROTOCOLS)
def test_the_os_trust_store_is_used_by_default(
    tls_receiver: OtlpReceiver,
    pki: dict[str, Path],
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    protocol: str,
) -> None:
    # On Linux the OS trust store is OpenSSL's default CA file: SSL_CERT_FILE points it at our CA.
    monkeypatch.setenv("SSL_CERT_FILE", str(pki["ca"]))
    monkeypatch.delenv("SSL_CERT_DIR", raising=False)
    assert _replay(tls_receiver, protocol) == 0
    assert tls_receiver.requests == {"traces": 1, "logs": 1, "metrics": 1}
    # certifi's bundle does not have our CA: the same collector is refused when it is chosen
    tls_receiver.clear()
    monkeypatch.setenv("COPILOT_OTEL_TLS_TRUST", "certifi")
    assert _replay(tls_receiver, protocol) == EndpointError.exit_code
    assert "checked against certifi's CA bundle" in capsys.readouterr().err
    assert tls_receiver.spans() == []


def test_a_missing_certificate_file_is_a_config_error(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_LOGS_CERTIFICATE", str(tmp_path / "ca.pem"))
    assert main(["replay", str(SESSION), "--endpoint", "https://127.0.0.1:1", "--no-progress"]) == 2
    assert capsys.readouterr().err.strip() == (
        f"copilot-otel: error: Expected OTEL_EXPORTER_OTLP_LOGS_CERTIFICATE to be a path to an existing file, "
        f"got '{tmp_path / 'ca.pem'}'"
    )


def _status(state: Path) -> dict[str, object]:
    path = state / "status.json"
    return json.loads(path.read_text()) if path.exists() else {}


@pytest.mark.parametrize("protocol", PROTOCOLS)
def test_daemon_holds_data_for_an_untrusted_collector_then_sends_every_signal_once_trusted(
    tmp_path: Path, tls_receiver: OtlpReceiver, pki: dict[str, Path], protocol: str
) -> None:
    root, state = tmp_path / "session-state", tmp_path / "state"
    shutil.copytree(SESSION, root / SESSION.name)
    endpoint = tls_receiver.grpc_endpoint if protocol == "grpc" else tls_receiver.http_endpoint
    untrusted = {"SSL_CERT_FILE": str(tmp_path / "none.pem"), "COPILOT_OTEL_METRICS": "true"}
    d = DaemonProcess(
        root, state, endpoint, tmp_path / "a.log", "--protocol", protocol, env=untrusted
    ).start()
    try:

        def held() -> dict[str, object] | None:
            doc = _status(state)
            return doc if doc.get("endpoint_error") else None

        status = until(held, 30, "an endpoint error in status.json", detail=lambda: d.output()[-3000:])
        assert "TLS with https://127.0.0.1:" in str(status["endpoint_error"])
        assert status["dead_lettered"] == 0 and int(str(status["backlog_spans"])) > 0
        assert tls_receiver.spans() == []
    finally:
        assert d.terminate() == 0
    out = d.output()
    assert "Traceback" not in out and "dead-lettered" not in out
    assert not (state / "dead-letter.jsonl").exists()
    # trusted now (the CA given): what was held is sent, metrics through the same TLS settings
    trusted = {
        "OTEL_EXPORTER_OTLP_CERTIFICATE": str(pki["ca"]),
        "COPILOT_OTEL_METRICS": "true",
        "OTEL_METRIC_EXPORT_INTERVAL": "300",
    }
    d = DaemonProcess(root, state, endpoint, tmp_path / "b.log", "--protocol", protocol, env=trusted).start()
    try:
        tls_receiver.wait_for(lambda r: len(r.spans()) >= 3 and bool(r.logs()) and bool(r.metrics()), 30)
    finally:
        assert d.terminate() == 0
    assert len({s["span_id"] for s in tls_receiver.spans()}) == len(tls_receiver.spans()) == 3


@pytest.mark.parametrize("protocol", PROTOCOLS)
def test_doctor_says_what_the_certificate_is_checked_against_and_why_it_failed(
    tls_receiver: OtlpReceiver,
    pki: dict[str, Path],
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    protocol: str,
) -> None:
    endpoint = tls_receiver.grpc_endpoint if protocol == "grpc" else tls_receiver.http_endpoint
    monkeypatch.setenv("SSL_CERT_FILE", str(pki["ca"].parent / "none.pem"))
    assert main(["doctor", "--endpoint", endpoint, "--protocol", protocol]) == 1
    out = capsys.readouterr().out
    assert "tls: the collector's certificate is checked against the OS trust store" in out
    failed = [line for line in out.splitlines() if "test span" in line]
    assert len(failed) == 1 and "certificate not trusted: unable to get local issuer certificate" in failed[0]
    assert "set OTEL_EXPORTER_OTLP_CERTIFICATE" in failed[0]
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_CERTIFICATE", str(pki["ca"]))
    assert main(["doctor", "--endpoint", endpoint, "--protocol", protocol]) == 0
    assert f"checked against the CA file {pki['ca']}" in capsys.readouterr().out


@pytest.mark.parametrize("protocol", PROTOCOLS)
def test_client_certificate_and_key_authenticate_us_to_a_collector_that_requires_them(
    pki: dict[str, Path], monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], protocol: str
) -> None:
    receiver = OtlpReceiver(tls=(pki["cert"], pki["key"]), client_ca=pki["ca"]).start()
    try:
        monkeypatch.setenv("OTEL_EXPORTER_OTLP_CERTIFICATE", str(pki["ca"]))
        rc = _replay(receiver, protocol, max_retry_s=2)
        err = capsys.readouterr().err
        assert "Traceback" not in err and receiver.spans() == []
        if protocol == "grpc":
            # gRPC's client sees only "Socket closed" when the server wants a certificate: an outage to retry
            assert rc == ExportError.exit_code
        else:
            assert rc == EndpointError.exit_code
            # the alert, or (TLS 1.3, when the server hangs up first) an EOF: both lines say what to set
            assert re.search(r"client certificate[:,] set OTEL_EXPORTER_OTLP_CLIENT_CERTIFICATE", err), err
        monkeypatch.setenv("OTEL_EXPORTER_OTLP_CLIENT_CERTIFICATE", str(pki["client"]))
        monkeypatch.setenv("OTEL_EXPORTER_OTLP_CLIENT_KEY", str(pki["client_key"]))
        assert _replay(receiver, protocol) == 0
        assert receiver.requests == {"traces": 1, "logs": 1, "metrics": 1}
    finally:
        receiver.stop()
