"""Delivery: records to a collector or the embedded file, acknowledged before a checkpoint may pass them.

The router (:mod:`.route`) decides what each step of the pipeline sends and counts; the outbox (:mod:`.outbox`)
batches it on one thread; the exporters (:mod:`.export`, :mod:`.wire`, :mod:`.tls`) put it on the wire or in the
embedded file (:mod:`.sink`); what a collector refuses for good waits in the dead letters (:mod:`.deadletter`).
Metrics (:mod:`.metrics`) and the shared resource (:mod:`.telemetry`) complete the picture.
"""
