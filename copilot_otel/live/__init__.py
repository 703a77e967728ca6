"""The live daemon's parts, along a file consumer's seams (the Collector's ``fileconsumer``, Filebeat's harvester
and registry).

* :mod:`.followed`: :class:`~.followed.FollowedFile`: one followed log, its tailer, fold and markers; the resume
  model in one class (read → fold → route → enqueue → acknowledged → checkpoint).
* :mod:`.tracker`: :class:`~.tracker.Tracker`: which logs are known (by their stat only) and which followed, the
  pending and attention sets, the descriptor cache, moved and restored logs.
* :mod:`.housekeeping`: owner and idle closing of open prompts on the monotonic clock, backfill progress, status.

The loop that composes them, with its timers, stop and shutdown, is :mod:`copilot_otel.daemon`.
"""
