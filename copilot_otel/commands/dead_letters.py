"""``copilot-otel dead-letters {list,resend,clear}``: the command over the dead-letter store.

The store (:mod:`copilot_otel.deliver.deadletter`) sits under the exporter, which writes to it; re-sending needs a whole
:class:`~copilot_otel.deliver.telemetry.Telemetry` (the configured transport and its retries), so the command lives above
both instead of the store reaching up to them.
"""

from __future__ import annotations

from .._platform import LockHeld
from ..common import display
from ..common.errors import ConfigError, EndpointError, ExportError, RejectedError, StateError
from ..deliver.deadletter import DeadLetters, dead_letter_path, redacted_destination
from ..deliver.export import Signal
from ..deliver.telemetry import Telemetry
from ..settings.config import Config

__all__ = ["command"]


def command(config: Config, action: str, *, to_current: bool = False) -> int:
    """``copilot-otel dead-letters {list,resend,clear}``; returns the exit code.

    Args:
        to_current: ``resend`` sends entries refused by another destination to the configured one too.

    Raises:
        ConfigError: ``resend`` without ``to_current`` while entries were refused by another destination
            (nothing is sent or removed).
        ExportError: ``resend`` could not deliver (the endpoint refuses us, the collector is down); what was not
            delivered stays in the file.
        RejectedError: The collector rejected some entries again (they stay in the file).
        StateError: Another resend is running on the same file.
    """
    letters = DeadLetters(dead_letter_path(config.state_dir))
    if action == "list":
        return _list(letters)
    if action == "clear":
        n = letters.clear()
        print(f"copilot-otel: removed {n:,} dead letter{'s' if n != 1 else ''} from {letters.path}")
        return 0
    try:
        return _resend(letters, config, to_current=to_current)
    except LockHeld as exc:
        raise StateError(
            f"another 'dead-letters resend' is running on {letters.path} (pid {exc.owner})"
        ) from None


def _list(letters: DeadLetters) -> int:
    entries = list(letters.entries())
    for entry in entries:
        when = "re-sendable" if entry.request is not None else "cannot be re-sent"
        print(
            display.message(
                f"{entry.id}  {entry.signal:<6}  {entry.name!r} of session {entry.session}  ({when}): {entry.reason}"
            )
        )
    resendable = sum(entry.request is not None for entry in entries)
    summary = f"copilot-otel: {len(entries):,} dead letters in {letters.path} ({resendable:,} re-sendable)"
    if lost := letters.discarded():
        summary += f"; {lost:,} older ones were discarded when the file reached its size cap"
    print(summary)
    return 0


def _elsewhere(letters: DeadLetters, here: str) -> list[str]:
    """The destinations, other than ``here``, that refused entries a resend would send (oldest first)."""
    seen: dict[str, None] = {}
    for entry in letters.entries():
        if entry.request is not None and entry.destination and entry.destination != here:
            seen[entry.destination] = None
    return list(seen)


def _resend(letters: DeadLetters, config: Config, *, to_current: bool) -> int:
    telemetry = Telemetry.from_config(config, with_metrics=False)
    here = redacted_destination(telemetry.description)
    if not to_current and (elsewhere := _elsewhere(letters, here)):
        telemetry.close()
        others = f" (and {len(elsewhere) - 1} more)" if len(elsewhere) > 1 else ""
        raise ConfigError(
            f"the dead letters in {letters.path} were refused by {elsewhere[0]}{others}, and the configured "
            f"destination is {here}: set the endpoint to that collector, or pass --to-current to send them to "
            f"{here}; nothing was sent or removed"
        )
    sender = telemetry.sender
    sent = rejected = skipped = 0
    failure = None
    try:
        with letters.claimed() as entries:
            kept = []
            for entry in entries:
                if failure is not None or entry.request is None:
                    skipped += entry.request is None
                    kept.append(entry)
                    continue
                outcome = sender.deliver_body(Signal(entry.signal), entry.request, config.max_retry_time)
                if outcome.delivered:
                    sent += 1
                    continue
                kept.append(entry)
                if outcome.endpoint or sender.stats.consecutive_failures:
                    failure = outcome  # the endpoint or the collector, not this record: stop here
                else:
                    rejected += 1  # refused again: it stays a dead letter
            entries[:] = kept
    finally:
        telemetry.close()
    left = len(kept)
    said = f"re-sent {sent:,} dead letters to {telemetry.description}; {left:,} left in {letters.path}"
    if failure is not None:
        error = EndpointError if failure.endpoint else ExportError
        raise error(f"{failure.error}: {said}")
    if rejected:
        raise RejectedError(f"the collector rejected {rejected:,} again: {said}")
    if skipped:
        said += f" ({skipped:,} cannot be re-sent: a value could not be encoded)"
    print(f"copilot-otel: {display.message(said)}")
    return 0
