"""Copilot CLI: one source among four, read as the others are.

Its session log is ``~/.copilot/session-state/<session id>/events.jsonl`` (discovery and tailing are the shared
:mod:`copilot_otel.sources.sessions` and :mod:`copilot_otel.sources.tail`). Here is what only Copilot's log
needs: :mod:`.events` (its typed event classes, the one place that knows its camelCase), :mod:`.parse` (one line
into one of those events) and :mod:`.translator` (which loop handler folds each event class). Its events satisfy
the loop's input protocols as they are, so it needs no framer: where another source's framer turns its records
into neutral events, Copilot's events go to the loop directly.
"""
