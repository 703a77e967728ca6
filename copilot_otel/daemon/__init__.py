"""``copilot-otel run``: the daemon, along a file consumer's seams (the Collector's ``fileconsumer``, Filebeat's
harvester and registry).

* :mod:`.daemon`: :class:`~.daemon.Daemon`, the loop that composes the parts below, with its timers, stop and
  shutdown.
* :mod:`.followed`: :class:`~.followed.FollowedFile`: one followed log, its tailer, fold and markers; the resume
  model in one class (read → fold → route → enqueue → acknowledged → checkpoint).
* :mod:`.tracker`: :class:`~.tracker.Tracker`: which logs are known (by their stat only) and which followed, the
  pending and attention sets, the descriptor cache, moved and restored logs.
* :mod:`.discover`: where new logs appear (change notifications as a hint, a full rescan as the truth).
* :mod:`.housekeeping`: owner and idle closing of open prompts on the monotonic clock, backfill progress, status.
* :mod:`.state`, :mod:`.statedb`, :mod:`.statelegacy`, :mod:`.statusfile`: the checkpoints after acknowledgement and
  the ``status.json`` the ``status`` command reads.
* :mod:`.act`, :mod:`.notify`, :mod:`.interrupt`: what the daemon does about a runaway.
* :mod:`.servicefiles`: the per-user service's files read back (the ``service`` and ``status`` commands).
"""
