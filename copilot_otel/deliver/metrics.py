"""Metrics: the fold's :class:`Measurement` values, live gauges and the daemon's health, via the OTel SDK.

Unlike spans, metrics are aggregates: the SDK's ``MeterProvider`` is the right tool (temporality, views,
``OTEL_METRIC_EXPORT_INTERVAL``, the Prometheus reader). We only make its export results visible, so ``replay``
can tell the user when metrics were not accepted, and keep the instrument table in :mod:`~copilot_otel.projections.catalog`.
"""

from __future__ import annotations

import logging
import threading
from bisect import bisect_left
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from opentelemetry.metrics import CallbackOptions, Observation
from opentelemetry.sdk.metrics import (
    Counter,
    Histogram,
    MeterProvider,
    ObservableCounter,
    ObservableGauge,
    ObservableUpDownCounter,
    UpDownCounter,
)
from opentelemetry.sdk.metrics.export import (
    AggregationTemporality,
    MetricExporter,
    MetricExportResult,
    MetricReader,
    MetricsData,
    PeriodicExportingMetricReader,
)
from opentelemetry.sdk.resources import Resource

from .._version import __version__
from ..model.records import Instrument, Measurement
from ..projections import catalog
from .export import SCOPE_NAME, Signal, Transport

logger = logging.getLogger(__name__)


class _OtlpMetricExporter(MetricExporter):
    """Metrics through the same transport as spans and logs (endpoint, headers, timeout in milliseconds,
    compression, TLS: one set of settings for every signal), or into the embedded file. Temporality and
    histogram aggregation follow the SDK's rules for ``OTEL_EXPORTER_OTLP_METRICS_TEMPORALITY_PREFERENCE`` (read by
    the settings table: ``metrics_temporality``) and ``_DEFAULT_HISTOGRAM_AGGREGATION``, as its exporters do."""

    def __init__(
        self, transport: Transport, timeout_s: float | None = None, temporality: str = "cumulative"
    ) -> None:
        # Imported here: the OTLP encoder modules cost start-up time that ``show`` and ``status`` need not pay.
        from opentelemetry.exporter.otlp.proto.common._internal.metrics_encoder import OTLPMetricExporterMixin

        super().__init__(
            preferred_temporality=_temporality(temporality),
            # the SDK exporters' OTEL_EXPORTER_OTLP_METRICS_DEFAULT_HISTOGRAM_AGGREGATION handling (uses no state)
            preferred_aggregation=OTLPMetricExporterMixin._get_aggregation(self, {}),  # type: ignore[arg-type]
        )
        self._transport = transport
        self._timeout_s = timeout_s
        self._last_error = ""

    def export(
        self, metrics_data: MetricsData, timeout_millis: float = 10_000, **kwargs: Any
    ) -> MetricExportResult:
        from opentelemetry.exporter.otlp.proto.common.metrics_encoder import encode_metrics

        body = encode_metrics(metrics_data).SerializeToString()
        timeout = timeout_millis / 1000
        if self._timeout_s is not None:
            timeout = min(timeout, self._timeout_s)
        result = self._transport.send(Signal.METRICS, body, timeout)
        if not result.ok and result.message != self._last_error:  # said once per distinct reason
            logger.warning("metric export failed: %s", result.message)
        self._last_error = "" if result.ok else result.message
        return MetricExportResult.SUCCESS if result.ok else MetricExportResult.FAILURE

    def force_flush(self, timeout_millis: float = 10_000) -> bool:
        return True

    def shutdown(self, timeout_millis: float = 30_000, **kwargs: Any) -> None:
        self._transport.close()


class _TrackingExporter(MetricExporter):
    """Delegates to the real exporter and remembers whether the last export was accepted."""

    def __init__(self, inner: MetricExporter) -> None:
        super().__init__(
            preferred_temporality=inner._preferred_temporality,
            preferred_aggregation=inner._preferred_aggregation,
        )
        self.inner = inner
        self.failures = 0

    def export(
        self, metrics_data: MetricsData, timeout_millis: float = 10_000, **kwargs: Any
    ) -> MetricExportResult:
        try:
            result = self.inner.export(metrics_data, timeout_millis=timeout_millis)
        except Exception:  # an exporter bug must not kill the reader thread
            logger.exception("metric exporter raised")
            result = MetricExportResult.FAILURE
        if result is not MetricExportResult.SUCCESS:
            self.failures += 1
        return result

    def force_flush(self, timeout_millis: float = 10_000) -> bool:
        return self.inner.force_flush(timeout_millis)

    def shutdown(self, timeout_millis: float = 30_000, **kwargs: Any) -> None:
        self.inner.shutdown(timeout_millis=timeout_millis)


def _temporality(preference: str) -> dict[type, AggregationTemporality]:
    """Each instrument type's temporality for a ``metrics_temporality`` value, as the OTLP exporter
    specification (and the SDK) map ``OTEL_EXPORTER_OTLP_METRICS_TEMPORALITY_PREFERENCE``."""
    delta = AggregationTemporality.DELTA
    cumulative = AggregationTemporality.CUMULATIVE
    return {
        Counter: cumulative if preference == "cumulative" else delta,
        UpDownCounter: cumulative,
        Histogram: cumulative if preference == "cumulative" else delta,
        ObservableCounter: delta if preference == "delta" else cumulative,
        ObservableUpDownCounter: cumulative,
        ObservableGauge: cumulative,
    }


def build_metric_exporter(
    transport: Transport, timeout_s: float | None = None, temporality: str = "cumulative"
) -> MetricExporter:
    """The metric exporter sending through ``transport`` (built from the same settings as the span/log one:
    :func:`~copilot_otel.deliver.export.build_transport`), each request bounded by ``timeout_s``, with the temporality of
    ``metrics_temporality``."""
    return _OtlpMetricExporter(transport, timeout_s, temporality)


class Metrics:
    """Owns the ``MeterProvider``, one instrument per :data:`~copilot_otel.projections.catalog.METRICS` entry, and observable gauges.

    Args:
        resource: Resource attributes shared with spans and logs.
        exporter: Where metrics go (``None`` = only the Prometheus endpoint, if any).
        interval_s: Export interval (``OTEL_METRIC_EXPORT_INTERVAL``).
        prometheus: ``(host, port)`` to serve a Prometheus scrape endpoint, or ``None``.
    """

    def __init__(
        self,
        resource: Mapping[str, Any],
        exporter: MetricExporter | None,
        interval_s: float,
        prometheus: tuple[str, int] | None = None,
    ) -> None:
        readers: list[MetricReader] = []
        self._tracking: _TrackingExporter | None = None
        if exporter is not None:
            self._tracking = _TrackingExporter(exporter)
            readers.append(
                PeriodicExportingMetricReader(self._tracking, export_interval_millis=interval_s * 1000)
            )
        self.prometheus_port: int | None = None
        if prometheus is not None:
            readers.append(self._start_prometheus(*prometheus))
        self.provider = MeterProvider(resource=Resource.create(dict(resource)), metric_readers=readers)
        meter = self.provider.get_meter("copilot_otel", __version__)
        self._instruments: dict[str, Any] = {}
        for spec in catalog.METRICS:
            if spec.instrument is Instrument.COUNTER:
                self._instruments[spec.name] = meter.create_counter(spec.name, spec.unit, spec.description)
            else:
                self._instruments[spec.name] = meter.create_histogram(
                    spec.name,
                    spec.unit,
                    spec.description,
                    explicit_bucket_boundaries_advisory=list(spec.buckets) if spec.buckets else None,
                )
        self._health_counters = {
            name: meter.create_counter(name, unit, desc)
            for name, unit, desc, kind in catalog.HEALTH_METRICS
            if kind is Instrument.COUNTER
        }
        self._pending: dict[tuple[str, tuple[tuple[str, Any], ...]], float] = {}
        self._gauge_values: dict[str, Callable[[], Sequence[tuple[float, Mapping[str, Any]]]]] = {}
        self._lock = threading.Lock()
        for name, unit, desc in catalog.LIVE_GAUGES:
            meter.create_observable_gauge(name, [self._observer(name)], unit, desc)
        for name, unit, desc, kind in catalog.HEALTH_METRICS:
            if kind is None:
                meter.create_observable_gauge(name, [self._observer(name)], unit, desc)

    def _start_prometheus(self, host: str, port: int) -> MetricReader:
        from opentelemetry.exporter.prometheus import PrometheusMetricReader
        from prometheus_client import start_http_server

        server, _thread = start_http_server(port, addr=host)
        self.prometheus_port = server.server_address[1]
        self._prom_server = server
        logger.info("Prometheus metrics on http://%s:%d/metrics", host, self.prometheus_port)
        return PrometheusMetricReader()

    def _observer(self, name: str) -> Callable[[CallbackOptions], list[Observation]]:
        def observe(_options: CallbackOptions) -> list[Observation]:
            source = self._gauge_values.get(name)
            if source is None:
                return []
            try:
                return [Observation(value, dict(attrs)) for value, attrs in source()]
            except Exception:  # a gauge callback must never break the export of everything else
                logger.exception("gauge %s failed", name)
                return []

        return observe

    def set_gauge(self, name: str, source: Callable[[], Sequence[tuple[float, Mapping[str, Any]]]]) -> None:
        """Register the function that reads a gauge's current value(s) at collection time."""
        self._gauge_values[name] = source

    def record(self, measurement: Measurement) -> None:
        """Record one measurement from the fold.

        Counter increments are summed locally per attribute set and handed to the SDK by :meth:`drain` (the
        SDK costs ~10 µs a call; a backfill makes hundreds of thousands of them). Histograms need every value.
        """
        if measurement.instrument is Instrument.COUNTER:
            key = (measurement.name, tuple(measurement.attributes.items()))
            self._pending[key] = self._pending.get(key, 0.0) + measurement.value
            return
        instrument = self._instruments.get(measurement.name)
        if instrument is not None:
            instrument.record(measurement.value, measurement.attributes)

    def drain(self) -> None:
        """Hand the locally summed counter increments to the SDK (call before an export is due)."""
        pending, self._pending = self._pending, {}
        for (name, attrs), value in pending.items():
            instrument = self._instruments.get(name)
            if instrument is not None:
                instrument.add(value, dict(attrs))

    def count(self, name: str, value: float = 1, attributes: Mapping[str, Any] | None = None) -> None:
        """Add to one of the daemon's own health counters."""
        counter = self._health_counters.get(name)
        if counter is not None and value:
            counter.add(value, dict(attributes or {}))

    def flush(self, timeout_s: float = 10.0) -> bool:
        """Export now; True when the collector accepted the metrics (or there is nothing to export to)."""
        self.drain()
        before = self._tracking.failures if self._tracking else 0
        ok = self.provider.force_flush(int(timeout_s * 1000))
        if self._tracking is not None and self._tracking.failures > before:
            return False
        return ok

    def shutdown(self, timeout_s: float = 10.0) -> None:
        self.drain()
        self.provider.shutdown(int(timeout_s * 1000))
        server = getattr(self, "_prom_server", None)
        if server is not None:
            server.shutdown()
            server.server_close()  # release the port, not just stop serving


# Each histogram's bucket bounds by name, for the replay aggregator's hot path (one lookup, no spec object).
_BUCKETS: dict[str, tuple[float, ...]] = {spec.name: tuple(spec.buckets or ()) for spec in catalog.METRICS}
# Counters of fractions summed as whole units of this size (USD as nano-USD): integers add up the same in any
# order, so replay's worker processes merging their shares give the very sum one process does (as floats the cost
# differed in the 17th digit, 0.0544 against 0.05439999999999999).
_EXACT: dict[str, int] = {catalog.COST: 10**9}


class Aggregator:
    """Replay's metrics: measurements summed in memory per attribute set, exported as one OTLP request.

    A backfill records hundreds of thousands of measurements; through the SDK each costs ~10 µs (attribute
    cleaning and hashing), a quarter of replay's time. Here a counter increment is a dict update and a histogram
    value a ``bisect`` — and aggregators from worker processes merge. The result is the same instruments, units
    and bucket bounds (:data:`~copilot_otel.projections.catalog.METRICS`), cumulative from the start of the replay. The live daemon keeps
    the SDK (gauges, periodic export, the Prometheus endpoint) at its low rate.
    """

    def __init__(self) -> None:
        self.sums: dict[tuple[str, tuple[tuple[str, Any], ...]], float] = {}
        # histogram key → [count, sum, min, max, bucket counts]
        self.histograms: dict[tuple[str, tuple[tuple[str, Any], ...]], list[Any]] = {}

    def record(self, measurement: Measurement) -> None:
        name = measurement.name
        key = (name, tuple(measurement.attributes.items()))
        value = measurement.value
        if measurement.instrument is Instrument.COUNTER:
            scale = _EXACT.get(name)
            self.sums[key] = self.sums.get(key, 0) + (value if scale is None else round(value * scale))
            return
        buckets = _BUCKETS[name]
        state = self.histograms.get(key)
        if state is None:
            state = self.histograms[key] = [0, 0.0, value, value, [0] * (len(buckets) + 1)]
        state[0] += 1
        state[1] += value
        if value < state[2]:
            state[2] = value
        if value > state[3]:
            state[3] = value
        state[4][bisect_left(buckets, value)] += 1

    def count(self, name: str, value: float = 1, attributes: Mapping[str, Any] | None = None) -> None:
        """Add to a health counter (lines read/dropped, exported spans)."""
        if value:
            key = (name, tuple((attributes or {}).items()))
            self.sums[key] = self.sums.get(key, 0.0) + value

    def merge(self, other: Aggregator) -> None:
        for key, value in other.sums.items():
            self.sums[key] = self.sums.get(key, 0.0) + value
        for key, (count, total, low, high, buckets) in other.histograms.items():
            state = self.histograms.get(key)
            if state is None:
                self.histograms[key] = [count, total, low, high, list(buckets)]
                continue
            state[0] += count
            state[1] += total
            state[2] = min(state[2], low)
            state[3] = max(state[3], high)
            state[4] = [a + b for a, b in zip(state[4], buckets, strict=True)]

    def __bool__(self) -> bool:
        return bool(self.sums or self.histograms)

    def encode(self, resource: Mapping[str, Any], start_ns: int, time_ns: int, delta: bool = False) -> bytes:
        """One ``ExportMetricsServiceRequest`` with every series over [start_ns, time_ns].

        Args:
            delta: Mark the points DELTA instead of CUMULATIVE (``OTEL_EXPORTER_OTLP_METRICS_TEMPORALITY_PREFERENCE``
                = ``delta`` or ``lowmemory``); for a single export covering the whole replay both describe the same
                numbers, the flag is for backends that only take one kind.
        """
        from opentelemetry.proto.collector.metrics.v1 import metrics_service_pb2
        from opentelemetry.proto.common.v1 import common_pb2
        from opentelemetry.proto.metrics.v1 import metrics_pb2
        from opentelemetry.proto.resource.v1 import resource_pb2

        def attrs(items: tuple[tuple[str, Any], ...] | Mapping[str, Any]) -> list[common_pb2.KeyValue]:
            pairs = items.items() if isinstance(items, Mapping) else items
            return [common_pb2.KeyValue(key=k, value=_any(v)) for k, v in pairs]

        request = metrics_service_pb2.ExportMetricsServiceRequest()
        scope_metrics = request.resource_metrics.add(
            resource=resource_pb2.Resource(attributes=attrs(resource))
        )
        scope = scope_metrics.scope_metrics.add(
            scope=common_pb2.InstrumentationScope(name=SCOPE_NAME, version=__version__)
        )
        cumulative = (
            metrics_pb2.AGGREGATION_TEMPORALITY_DELTA
            if delta
            else metrics_pb2.AGGREGATION_TEMPORALITY_CUMULATIVE
        )
        by_name: dict[str, Any] = {}

        def metric(name: str) -> Any:
            if name not in by_name:
                spec = catalog.METRICS_BY_NAME.get(name)
                unit, description = (spec.unit, spec.description) if spec else _health_unit(name)
                by_name[name] = scope.metrics.add(name=name, unit=unit, description=description)
            return by_name[name]

        for (name, items), summed in sorted(self.sums.items(), key=lambda kv: kv[0][0]):
            scale = _EXACT.get(name)
            value = summed if scale is None else summed / scale
            m = metric(name)
            m.sum.aggregation_temporality = cumulative
            m.sum.is_monotonic = True
            point = m.sum.data_points.add(
                attributes=attrs(items), start_time_unix_nano=start_ns, time_unix_nano=time_ns
            )
            if float(value).is_integer():
                point.as_int = int(value)
            else:
                point.as_double = value
        for (name, items), (count, total, low, high, buckets) in sorted(
            self.histograms.items(), key=lambda kv: kv[0][0]
        ):
            m = metric(name)
            m.histogram.aggregation_temporality = cumulative
            m.histogram.data_points.add(
                attributes=attrs(items),
                start_time_unix_nano=start_ns,
                time_unix_nano=time_ns,
                count=count,
                sum=total,
                min=low,
                max=high,
                bucket_counts=buckets,
                explicit_bounds=list(catalog.METRICS_BY_NAME[name].buckets or ()),
            )
        return bytes(request.SerializeToString())


def _any(value: Any) -> Any:
    from opentelemetry.proto.common.v1 import common_pb2

    if isinstance(value, bool):
        return common_pb2.AnyValue(bool_value=value)
    if isinstance(value, int):
        return common_pb2.AnyValue(int_value=value)
    if isinstance(value, float):
        return common_pb2.AnyValue(double_value=value)
    return common_pb2.AnyValue(string_value=str(value))


def _health_unit(name: str) -> tuple[str, str]:
    for metric_name, unit, description, _kind in catalog.HEALTH_METRICS:
        if metric_name == name:
            return unit, description
    return "1", ""
