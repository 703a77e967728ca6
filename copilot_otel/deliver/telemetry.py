"""Where telemetry goes: builds the span/log :class:`~copilot_otel.deliver.export.Sender` and the :class:`Metrics`
from a :class:`~copilot_otel.settings.config.Config`, sharing one resource. Used by ``replay``, ``run`` and ``doctor``.
"""

from __future__ import annotations

import errno
import getpass
import socket
import sys
import threading
import uuid
from dataclasses import dataclass
from typing import Any

from opentelemetry.sdk.resources import Resource

from .._version import __version__
from ..common.errors import ConfigError, StateError
from ..projections.catalog import (
    EXPORT_OUTCOME,
    EXPORT_RETRIES,
    EXPORT_SHRUNK,
    EXPORT_SPANS,
    HOST_NAME,
    SERVICE_INSTANCE_ID,
    SERVICE_NAME,
    SERVICE_VERSION,
    USER_NAME,
)
from ..settings.config import SIGNALS, Config
from .export import FileTransport, Sender, Transport, build_transport, make_resource
from .metrics import Aggregator, Metrics, build_metric_exporter


def resource_attributes(config: Config) -> dict[str, Any]:
    """service.name/version, host.name, plus ``OTEL_RESOURCE_ATTRIBUTES`` (merged by the SDK), and
    ``user.name`` (the login name) when ``include_user_name`` opts in and that variable does not name one."""
    host = socket.gethostname()
    # A stable instance id (the SDK would pick a random one per process): replays of the same history from
    # the same machine and state dir then produce identical resources, not a new instance each run.
    instance = str(uuid.uuid5(uuid.NAMESPACE_URL, f"copilot-otel://{host}{config.state_dir}"))
    base = {
        SERVICE_NAME: config.service_name,
        SERVICE_VERSION: __version__,
        HOST_NAME: host,
        SERVICE_INSTANCE_ID: instance,
    }
    attrs = dict(Resource.create(base).attributes)
    attrs[SERVICE_NAME] = config.service_name
    if config.include_user_name and USER_NAME not in attrs:
        attrs[USER_NAME] = getpass.getuser()
    return attrs


def _check_writable(transport: Transport, config: Config) -> None:
    """The output file can be written, or :class:`StateError` now: a folder, a file where its folder should be or
    a read-only disk is this machine's problem, not a collector outage to retry for ``--max-retry-time``.

    It opens the file for appending, as the first export would (creating it and its folders).
    """
    if not isinstance(transport, FileTransport):
        return
    path = transport.path
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        with open(path, "ab"):
            pass
    except OSError as exc:
        # mkdir says "File exists" when a file stands where one of the folders should be
        why = (
            "a file is in the way of its folder"
            if isinstance(exc, FileExistsError)
            else exc.strerror or str(exc)
        )
        if config.output_file is None:  # the default, under the state directory
            raise StateError(
                f"cannot write the output file {path} (no endpoint is set; it is in the state directory "
                f"{config.state_dir}): {why}; set --state-dir, --output-file or an endpoint"
            ) from None
        raise StateError(f"cannot write the output file {path}: {why}; set --output-file to a file") from None


@dataclass
class Telemetry:
    """The exporting side of a run: span/log sender, metrics, and a description for the user."""

    sender: Sender
    metrics: Metrics | None
    description: str
    _reported: tuple[int, int, int, int, int] = (0, 0, 0, 0, 0)

    @classmethod
    def from_config(
        cls,
        config: Config,
        stop: threading.Event | None = None,
        with_metrics: bool = True,
    ) -> Telemetry:
        """The sender and metrics ``config`` describes: every signal to the URL the settings table resolved for
        it (:meth:`Config.signal_endpoints`), with that signal's request options."""
        endpoints = config.signal_endpoints()
        resource = resource_attributes(config)
        options = {signal: config.otlp(signal) for signal in SIGNALS}

        def transport() -> Transport:
            return build_transport(endpoints, config.protocol, config.embedded_output, options=options)

        spans_and_logs = transport()
        _check_writable(spans_and_logs, config)
        timeouts = {signal: option.timeout for signal, option in options.items()}
        dead_letter = config.state_dir / "dead-letter.jsonl"
        sender = Sender(
            spans_and_logs,
            make_resource(resource),
            dead_letter,
            stop,
            timeouts=timeouts,
            # The local file takes a line of any size: only a collector's requests have a limit to fit.
            max_request_bytes=(
                sys.maxsize if isinstance(spans_and_logs, FileTransport) else config.max_request_bytes
            ),
        )
        metrics = None
        if with_metrics and (config.metrics_enabled or config.prometheus_port is not None):
            # Its own connection (the SDK's reader thread sends metrics), made from the same settings.
            exporter = (
                build_metric_exporter(transport(), timeouts["metrics"], config.metrics_temporality)
                if config.metrics_enabled
                else None
            )
            prometheus = (
                (config.prometheus_host, config.prometheus_port)
                if config.prometheus_port is not None
                else None
            )
            try:
                metrics = Metrics(resource, exporter, config.metric_interval, prometheus)
            except OSError as exc:
                if isinstance(exc, socket.gaierror) or exc.errno == errno.EADDRNOTAVAIL:
                    raise ConfigError(  # the name does not resolve, or is no address of this machine
                        "Expected --prometheus-host to be a name or address of this machine, got "
                        f"{config.prometheus_host!r} ({exc.strerror})"
                    ) from exc
                raise ConfigError(
                    f"Expected --prometheus-port to be a free port on {config.prometheus_host}, "
                    f"got {config.prometheus_port!r} ({exc.strerror})"
                ) from exc
        return cls(sender, metrics, spans_and_logs.description)

    def record_delivery_stats(self, sink: Metrics | Aggregator | None = None) -> None:
        """Count the sender's progress since the last call into the health metrics (exported / dead-lettered
        spans, retries): into ``sink`` (replay's aggregator) or this telemetry's SDK metrics (the daemon)."""
        sink = sink if sink is not None else self.metrics
        if sink is None:
            return
        stats = self.sender.stats
        now = (stats.spans_sent, stats.dead_lettered, stats.retries, stats.rejected, stats.shrunk)
        before = self._reported
        sink.count(EXPORT_SPANS, now[0] - before[0], {EXPORT_OUTCOME: "exported"})
        sink.count(EXPORT_SPANS, now[1] - before[1], {EXPORT_OUTCOME: "dead_lettered"})
        sink.count(EXPORT_SPANS, now[3] - before[3], {EXPORT_OUTCOME: "rejected"})
        sink.count(EXPORT_RETRIES, now[2] - before[2])
        sink.count(EXPORT_SHRUNK, now[4] - before[4])
        self._reported = now

    def close(self) -> None:
        if self.metrics is not None:
            self.metrics.shutdown()
        self.sender.close()
