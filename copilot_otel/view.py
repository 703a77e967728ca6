"""``copilot-otel show``: a session in the terminal, without any backend.

Every session log is folded exactly as ``replay`` would fold it (:func:`~copilot_otel.replay.fold_session`);
the resulting spans are drawn as one :class:`rich.tree.Tree` per prompt (turns → model calls and tool calls →
sub-agents), with durations, token counts, statuses (failures in red) and the runaway detections the fold
attached to the prompt's root span. ``--json`` prints the span records themselves, one JSON object per line.
Without a session argument, the most recently active sessions under the session-state root are listed.

The tree view shows the prompt text (scrubbed of secrets, cut to :data:`PROMPT_PREVIEW_CHARS`): it never
leaves the terminal. ``--json`` applies the configured capture policy, so it prints what would be exported.
"""

from __future__ import annotations

import dataclasses
import os
from collections import defaultdict
from collections.abc import Mapping, Sequence
from datetime import datetime
from pathlib import Path
from typing import Any

import orjson
from rich.console import Console, Group
from rich.table import Table
from rich.text import Text
from rich.tree import Tree

from ._platform import utf8_stdout
from .agentloop import FoldSettings
from .config import Config
from .content import ContentKind, ContentPolicy
from .errors import SourceError
from .records import SpanRecord, StatusCode
from .replay import FoldedSession, fold_session
from .sessions import SessionFile, read_workspace, resolve, scan_root
from .telemetry import fold_settings

__all__ = ["PROMPT_PREVIEW_CHARS", "SessionSummary", "show", "span_json", "summarize"]

# The prompt text shown under each prompt's heading; longer prompts are cut (the fold marks the cut).
PROMPT_PREVIEW_CHARS = 160
# Root span events worth a line in the tree (user messages and shutdown totals are not).
_RUNAWAY = "copilot_otel.runaway.detected"
_ABORT = "github.copilot.session.abort"
_EXCEPTION = "gen_ai.client.operation.exception"
_TRUNCATION = "github.copilot.session.truncation"
_COMPACTED = "github.copilot.session.compaction_complete"
_OUTCOME_STYLE = {"completed": "green", "error": "bold red", "aborted": "yellow", "incomplete": "yellow"}


def show(config: Config, session: str | None, as_json: bool = False, limit: int = 20) -> int:
    """Show one session's prompts as trees, or list recent sessions when ``session`` is ``None``.

    Args:
        config: Supplies the session-state root (for ids and the listing) and the runaway thresholds.
        session: A session id or unique id prefix, a session folder, an ``events.jsonl`` or a legacy flat
            file; a session-state root lists its sessions. ``None`` lists the root's most recent sessions.
        as_json: Print the span records as JSON lines instead of drawing trees.
        limit: How many sessions the listing shows.

    Returns:
        The exit code (0).

    Raises:
        SourceError: The session is unknown, ambiguous or unreadable, or the session-state root is unreadable.
    """
    console = Console(highlight=False, soft_wrap=False)
    if session is None:
        sessions = _recent(config.session_state, limit)
        if as_json:
            _print_json(sessions, fold_settings(config))
        else:
            _print_listing(console, sessions, fold_settings(config), config.session_state)
        return 0
    sessions = resolve([session], config.session_state)
    if as_json:
        _print_json(sessions, fold_settings(config))
        return 0
    if len(sessions) > 1:  # a whole session-state root: list it rather than drawing hundreds of trees
        ordered = sorted(sessions, key=_mtime, reverse=True)[: max(limit, 0)]
        _print_listing(console, ordered, fold_settings(config), Path(session))
        return 0
    settings = _tree_settings(fold_settings(config))
    for index, one in enumerate(sessions):
        if index:
            console.print()
        console.print(render_session(fold_session(one, settings)))
    return 0


# ------------------------------------------------------------------------------------------------ JSON lines
def span_json(span: SpanRecord) -> dict[str, Any]:
    """One span record as a JSON-ready dict (hex ids, enum names, events)."""
    return {
        "trace_id": f"{span.trace_id:032x}",
        "span_id": f"{span.span_id:016x}",
        "parent_span_id": None if span.parent_span_id is None else f"{span.parent_span_id:016x}",
        "name": span.name,
        "kind": span.kind.name,
        "start_ns": span.start_ns,
        "end_ns": span.end_ns,
        "attributes": dict(span.attributes),
        "status": span.status.name,
        "status_message": span.status_message,
        "events": [
            {"name": ev.name, "time_ns": ev.time_ns, "attributes": dict(ev.attributes)} for ev in span.events
        ],
    }


def _print_json(sessions: Sequence[SessionFile], settings: FoldSettings) -> None:
    out = utf8_stdout()  # JSON is UTF-8 bytes, whatever the console's code page
    for session in sessions:
        for record in fold_session(session, settings).emissions:
            if isinstance(record, SpanRecord):
                out.write(orjson.dumps(span_json(record)) + b"\n")
    out.flush()


# ------------------------------------------------------------------------------------------------ listing
@dataclasses.dataclass(frozen=True, slots=True)
class SessionSummary:
    """One row of the session listing."""

    session: SessionFile
    modified_s: float
    title: str
    cwd: str
    prompts: int
    turns: int
    tool_calls: int
    errors: int
    problem: str = ""


def _mtime(session: SessionFile) -> float:
    try:
        return session.path.stat().st_mtime
    except OSError:
        return 0.0


def _recent(root: Path, limit: int) -> list[SessionFile]:
    if not root.exists():
        raise SourceError(
            f"no Copilot CLI sessions: {root} does not exist (has the Copilot CLI run as this user? "
            "set --session-state or COPILOT_OTEL_SESSION_STATE)"
        )
    if not root.is_dir():
        raise SourceError(f"cannot read session folder {root}: not a directory")
    return sorted(scan_root(root), key=_mtime, reverse=True)[: max(limit, 0)]


def summarize(session: SessionFile, settings: FoldSettings) -> SessionSummary:
    """Fold one session and count what the listing shows (a session that cannot be read says why)."""
    workspace = read_workspace(session.folder)
    title = workspace.get("summary") or workspace.get("name") or ""
    modified = _mtime(session)
    try:
        folded = fold_session(session, settings)
    except SourceError as exc:
        return SessionSummary(session, modified, title, workspace.get("cwd", ""), 0, 0, 0, 0, str(exc))
    spans = _spans(folded)
    roots = [s for s in spans if s.parent_span_id is None]
    return SessionSummary(
        session=session,
        modified_s=modified,
        title=title,
        cwd=folded.fold.ctx.cwd or workspace.get("cwd", ""),
        prompts=len(roots),
        turns=sum(1 for s in spans if s.name.startswith("turn ")),
        tool_calls=sum(1 for s in spans if s.name.startswith("execute_tool ")),
        errors=sum(1 for s in spans if s.status is StatusCode.ERROR),
    )


def _print_listing(
    console: Console, sessions: Sequence[SessionFile], settings: FoldSettings, root: Path
) -> None:
    if not sessions:
        console.print(f"No Copilot CLI sessions in {root}.")
        return
    table = Table(
        title=f"Recent Copilot CLI sessions in {_home_relative(str(root))}",
        title_justify="left",
        box=None,
        header_style="bold",
        pad_edge=False,
    )
    fixed = {"last active": 11, "session": 8, "prompts": 7, "turns": 5, "tools": 5, "errors": 6}
    # Rich squeezes no-wrap columns unpredictably, so share out the width ourselves: 2 spaces between columns.
    free = max(console.width - sum(fixed.values()) - 2 * (len(fixed) + 1), 20)
    table.add_column("last active", no_wrap=True, width=fixed["last active"])
    table.add_column("session", no_wrap=True, width=fixed["session"])
    table.add_column("title", overflow="ellipsis", no_wrap=True, width=free * 3 // 5)
    table.add_column("cwd", overflow="ellipsis", no_wrap=True, width=free - free * 3 // 5)
    for name in ("prompts", "turns", "tools", "errors"):
        table.add_column(name, justify="right", no_wrap=True, width=fixed[name])
    for session in sessions:
        row = summarize(session, settings)
        when = datetime.fromtimestamp(row.modified_s).strftime("%m-%d %H:%M") if row.modified_s else "?"
        if row.problem:
            table.add_row(
                when, row.session.session_id[:8], Text(row.problem, style="red"), "", "", "", "", ""
            )
            continue
        table.add_row(
            when,
            row.session.session_id[:8],
            row.title or Text("(untitled)", style="dim"),
            _tail(_home_relative(row.cwd), free - free * 3 // 5),
            str(row.prompts),
            str(row.turns),
            str(row.tool_calls),
            Text(str(row.errors), style="red" if row.errors else "dim"),
        )
    console.print(table)
    console.print(
        Text("copilot-otel show <session> draws a session's prompts; an id prefix is enough.", style="dim")
    )


# ------------------------------------------------------------------------------------------------ trees
def _tree_settings(settings: FoldSettings) -> FoldSettings:
    """Fold settings for drawing: prompts captured (short, scrubbed) so each tree says what was asked."""
    content = settings.content
    enabled = frozenset(content.enabled | {ContentKind.PROMPTS})
    policy = ContentPolicy(enabled=enabled, max_length=PROMPT_PREVIEW_CHARS, on_spans=True, on_events=False)
    return dataclasses.replace(settings, content=policy)


def _spans(folded: FoldedSession) -> list[SpanRecord]:
    return [record for record in folded.emissions if isinstance(record, SpanRecord)]


def render_session(folded: FoldedSession) -> Group:
    """A session as renderables: a heading, then one tree per prompt in the order they were asked."""
    spans = _spans(folded)
    by_id = {s.span_id: s for s in spans}
    children: dict[int, list[SpanRecord]] = defaultdict(list)
    trace_roots = {s.trace_id: s for s in spans if s.parent_span_id is None}
    roots: list[SpanRecord] = []
    for span in spans:
        parent = span.parent_span_id
        if parent is None:
            roots.append(span)
        elif parent in by_id:
            children[parent].append(span)
        elif span.trace_id in trace_roots:  # parent not emitted (cut-off log): hang it under its prompt
            children[trace_roots[span.trace_id].span_id].append(span)
        else:
            roots.append(span)
    for kids in children.values():
        kids.sort(key=lambda s: (s.start_ns, s.end_ns))
    roots.sort(key=lambda s: (s.start_ns, s.end_ns))

    parts: list[Any] = [_session_heading(folded, roots)]
    prompt_roots = [r for r in roots if r.name == "invoke_agent"]
    number = 0
    for root in roots:
        if root.name == "invoke_agent":
            number += 1
            failed = sum(
                1
                for s in spans
                if s.trace_id == root.trace_id
                and s.status is StatusCode.ERROR
                and s.name.startswith("execute_tool ")
            )
            label = _prompt_label(root, number, len(prompt_roots), failed)
        else:
            label = _span_label(root, root.start_ns)
        tree = Tree(label, guide_style="dim")
        for event in root.events:
            line = _event_label(event.name, event.attributes, event.time_ns - root.start_ns)
            if line is not None:
                tree.add(line)
        _add_children(tree, root, children, root.start_ns)
        parts.append(Text())
        parts.append(tree)
    if not roots:
        parts.append(Text("(no prompts in this log)", style="dim"))
    if folded.bad_lines:
        parts.append(Text(f"{len(folded.bad_lines)} unreadable line(s) skipped", style="yellow"))
    return Group(*parts)


def _add_children(
    node: Tree, span: SpanRecord, children: Mapping[int, list[SpanRecord]], origin_ns: int
) -> None:
    for child in children.get(span.span_id, ()):
        branch = node.add(_span_label(child, origin_ns))
        if child.name.startswith("invoke_agent"):
            for event in child.events:
                line = _event_label(event.name, event.attributes, event.time_ns - origin_ns)
                if line is not None:
                    branch.add(line)
        _add_children(branch, child, children, origin_ns)


def _session_heading(folded: FoldedSession, roots: Sequence[SpanRecord]) -> Text:
    ctx = folded.fold.ctx
    workspace = read_workspace(folded.session.folder)
    title = ctx.title or workspace.get("summary") or workspace.get("name")
    text = Text()
    text.append("Session ", style="bold")
    text.append(ctx.session_id or folded.session.session_id, style="bold cyan")
    if title:
        text.append(f"  {_one_line(title, 80)}", style="bold")
    facts = [
        _home_relative(ctx.cwd) if ctx.cwd else None,
        f"copilot {ctx.copilot_version}" if ctx.copilot_version else None,
        ctx.model,
        _clock(roots[0].start_ns, with_date=True) if roots else None,
        _plural(sum(1 for r in roots if r.name == "invoke_agent"), "prompt"),
    ]
    text.append("\n" + " · ".join(f for f in facts if f), style="dim")
    return text


def _prompt_label(root: SpanRecord, number: int, total: int, failed_tools: int) -> Text:
    a = root.attributes
    outcome = str(a.get("copilot_otel.prompt.outcome", "completed"))
    text = Text()
    text.append(f"Prompt {number}/{total}", style="bold")
    text.append(f"  {_clock(root.start_ns)}  ", style="dim")
    text.append(_duration(root.end_ns - root.start_ns), style="bold")
    text.append("  ")
    text.append(outcome, style=_OUTCOME_STYLE.get(outcome, "yellow"))
    incomplete = a.get("copilot_otel.incomplete.reason")
    if incomplete and incomplete != outcome:
        text.append(f" ({incomplete})", style="yellow")
    facts = [
        _plural(_int(a.get("copilot_otel.prompt.turns_total", a.get("github.copilot.turn_count"))), "turn")
    ]
    tools = _plural(_int(a.get("copilot_otel.prompt.tool_calls")), "tool call")
    facts.append(f"{tools} ({failed_tools} failed)" if failed_tools else tools)
    tokens = _tokens(a)
    if tokens:
        facts.append(tokens)
    model = a.get("gen_ai.request.model")
    if model:
        facts.append(str(model))
    text.append("\n" + " · ".join(facts), style="dim")
    explained = any(ev.name in (_ABORT, _EXCEPTION) for ev in root.events)
    if root.status is StatusCode.ERROR and root.status_message and not explained:
        text.append(f"\n{_one_line(root.status_message, 120)}", style="red")
    prompt = a.get("input.value")
    if isinstance(prompt, str) and prompt.strip():
        text.append(f"\n“{_one_line(prompt, PROMPT_PREVIEW_CHARS)}”", style="italic")
    return text


def _span_label(span: SpanRecord, origin_ns: int) -> Text:
    a = span.attributes
    failed = span.status is StatusCode.ERROR
    offset = f"+{_duration(span.start_ns - origin_ns, fine=True)}"
    text = Text()
    if span.name.startswith("turn "):
        text.append(span.name, style="blue")
        text.append(f"  {offset}  {_duration(span.end_ns - span.start_ns)}", style="dim")
        if a.get("copilot_otel.incomplete.reason"):
            text.append(f"  incomplete ({a['copilot_otel.incomplete.reason']})", style="yellow")
        return text
    if span.name.startswith("chat"):
        text.append(span.name, style="red" if failed else "cyan")
        text.append(f"  {_duration(span.end_ns - span.start_ns)}", style="dim")
        tokens = _tokens(a)
        if tokens:
            text.append(f"  {tokens}", style="dim")
        finish = a.get("gen_ai.response.finish_reasons")
        if isinstance(finish, tuple) and finish:
            text.append(f"  → {', '.join(map(str, finish))}", style="dim")
        if failed:
            text.append(
                f"  failed: {_one_line(span.status_message or str(a.get('error.type', 'error')), 100)}",
                style="red",
            )
        return text
    if span.name.startswith("execute_tool "):
        tool = str(a.get("gen_ai.tool.name") or span.name[len("execute_tool ") :])
        if failed:
            text.append(f"✗ {tool}", style="bold red")
        else:
            text.append("✓ ", style="green")
            text.append(tool, style="bold")
        text.append(f"  {offset}  {_duration(span.end_ns - span.start_ns)}", style="dim")
        exit_code = a.get("process.exit.code")
        if exit_code is not None:
            text.append(f"  exit {exit_code}", style="yellow" if exit_code else "dim")
        if failed:
            reason = span.status_message or str(a.get("error.type", "error"))
            text.append(f"  failed: {_one_line(reason, 100)}", style="red")
        return text
    if span.name.startswith("invoke_agent"):
        name = str(a.get("gen_ai.agent.name") or span.name[len("invoke_agent ") :] or "agent")
        text.append("sub-agent ", style="magenta")
        text.append(name, style="bold magenta")
        display = a.get("copilot_otel.agent.display_name")
        if display and display != name:
            text.append(f" ({display})", style="magenta")
        text.append(f"  {offset}  {_duration(span.end_ns - span.start_ns)}", style="dim")
        facts = [
            _plural(_int(a.get("github.copilot.turn_count")), "turn"),
            _plural(_int(a.get("copilot_otel.agent.tool_calls")), "tool call"),
        ]
        tokens = _tokens(a)
        if tokens:
            facts.append(tokens)
        text.append("  " + " · ".join(facts), style="dim")
        description = a.get("gen_ai.agent.description")
        if description:
            text.append(f"  {_one_line(str(description), 60)}", style="italic dim")
        if failed:
            text.append(f"  failed: {_one_line(span.status_message or 'error', 100)}", style="red")
        return text
    text.append(span.name, style="red" if failed else "")
    text.append(f"  {offset}  {_duration(span.end_ns - span.start_ns)}", style="dim")
    if failed and span.status_message:
        text.append(f"  {_one_line(span.status_message, 100)}", style="red")
    return text


def _event_label(name: str, attributes: Mapping[str, Any], offset_ns: int) -> Text | None:
    at = f"  at +{_duration(offset_ns, fine=True)}"
    if name == _RUNAWAY:
        reason = attributes.get("copilot_otel.runaway.reason", "?")
        threshold = attributes.get("copilot_otel.runaway.threshold")
        text = Text("⚠ runaway detected: ", style="bold red")
        text.append(str(reason), style="bold red")
        if threshold is not None:
            text.append(f" (threshold {threshold})", style="red")
        tool = attributes.get("gen_ai.tool.name")
        if tool:
            text.append(f" tool {tool}", style="red")
        text.append(at, style="dim")
        return text
    if name == _ABORT:
        text = Text(f"■ aborted: {attributes.get('github.copilot.abort_reason', 'unknown')}", style="yellow")
        text.append(at, style="dim")
        return text
    if name == _EXCEPTION:
        kind = attributes.get("exception.type", "error")
        message = _one_line(str(attributes.get("exception.message", "")), 100)
        text = Text(f"✗ {kind}: {message}", style="red")
        text.append(at, style="dim")
        return text
    if name in (_TRUNCATION, _COMPACTED):
        text = Text("context compacted" if name == _COMPACTED else "context truncated", style="yellow")
        text.append(at, style="dim")
        return text
    return None


# ------------------------------------------------------------------------------------------------ formatting
def _int(value: object) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) else 0


def _tokens(attributes: Mapping[str, Any]) -> str:
    tokens_in = _int(attributes.get("gen_ai.usage.input_tokens"))
    tokens_out = _int(attributes.get("gen_ai.usage.output_tokens"))
    if not tokens_in and not tokens_out:
        return ""
    return f"{tokens_in:,} in / {tokens_out:,} out tokens"


def _plural(count: int, noun: str) -> str:
    return f"{count} {noun}" + ("" if count == 1 else "s")


def _duration(ns: int, fine: bool = False) -> str:
    seconds = max(ns, 0) / 1e9
    if seconds < 1 and not fine:
        return f"{seconds * 1000:.0f}ms"
    if seconds < 60:
        return f"{seconds:.3f}s" if fine else f"{seconds:.2f}s"
    minutes, secs = divmod(int(seconds), 60)
    if minutes < 60:
        return f"{minutes}m{secs:02d}s"
    hours, minutes = divmod(minutes, 60)
    return f"{hours}h{minutes:02d}m"


def _clock(ns: int, with_date: bool = False) -> str:
    moment = datetime.fromtimestamp(ns / 1e9).astimezone()
    return moment.strftime("%Y-%m-%d %H:%M:%S %Z" if with_date else "%H:%M:%S")


def _one_line(text: str, limit: int) -> str:
    flat = " ".join(text.split())
    return flat if len(flat) <= limit else flat[: limit - 1] + "…"


def _tail(path: str, limit: int) -> str:
    """The end of a long path, which is the part that tells folders apart."""
    return path if len(path) <= limit else "…" + path[-(limit - 1) :]


def _home_relative(path: str) -> str:
    home = os.path.expanduser("~")
    if home not in ("", "/") and (path == home or path.startswith(home + os.sep)):
        return "~" + path[len(home) :]
    return path
