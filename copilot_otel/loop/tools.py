"""Tools and what surrounds a call: tool executions, the permission waits before them, the hooks around them.

A tool call opens at ``tool.execution_start`` (ending the model call that asked for it) and is handed on at its
``tool.execution_complete``, or cut short when its agent or prompt ends first. Permission waits and hooks live
here because they hang under the call they decide on: a ``preToolUse`` hook that denies a call marks it denied by
the hook, the time hooks ran is part of their call's span. Before any prompt, a hook waits for the next one.
The runaway rules on tools (the same call repeated, failures in a row) are checked at start and completion.
"""

from __future__ import annotations

from ..model.activity import HookRun, IncompleteReason, InputMessage, Outcome, PermissionWait, ToolCall
from ..model.inputs import (
    ExternalToolInput,
    HookEndInput,
    HookStartInput,
    PermissionAnswerInput,
    PermissionRequestInput,
    ToolEndInput,
    ToolStartInput,
)
from ..settings.content import ContentKind, argument_hash
from .core import OWN_API, LoopState
from .foldstate import Hook, Prompt, Tool
from .runaway import check_errors, check_identical

__all__ = [
    "emit_hook",
    "end_permission",
    "end_tool",
    "on_hook_end",
    "on_hook_start",
    "on_permission_completed",
    "on_permission_requested",
    "on_tool_complete",
    "on_tool_start",
]

# Who refused a call that a preToolUse hook's output denied (the CLI's code says only ``denied``).
HOOK_DENIAL = "preToolUse hook"


def on_tool_start(loop: LoopState, event: ToolStartInput) -> None:
    call_id = event.call_id
    if call_id is None:
        return
    prompt, agent = loop.route(event)
    loop.touch(prompt, agent, event.time_ns)
    cli = call_id in loop.cli_calls
    # The CLI's own calls belong to the agent, not to the turn whose model call may still be running.
    turn = None if cli else agent.turn
    if turn is not None and not turn.chat.emitted:
        loop.emit_chat(prompt, agent, turn, turn.chat.end_ns or event.time_ns, Outcome.OK, None, None)
    name = event.name or "unknown"
    arguments = event.arguments
    tool = Tool(
        span_id=loop.unique_sid(prompt, "tool", call_id, event.id),
        parent_span_id=turn.span_id if turn is not None else agent.span_id,
        call_id=call_id,
        name=name,
        start_ns=event.time_ns,
        arguments=arguments,
        args_hash=argument_hash(arguments),
        mcp_server=event.mcp_server,
        agent=agent,
        description=event.description,
        cli_initiated=cli,
    )
    if call_id in prompt.tools:
        # The same call id started twice (should not happen): close the first as incomplete.
        old = prompt.tools.pop(call_id)
        end_tool(
            loop,
            prompt,
            old,
            event.time_ns,
            success=False,
            error_type="cancelled",
            message="restarted",
            incomplete="restarted",
        )
    prompt.tools[call_id] = tool
    loop.tool_owner[call_id] = prompt
    prompt.tool_calls += 1
    agent.tool_calls += 1
    if turn is not None:
        turn.tool_calls += 1
    if not cli:  # the agent loop's own repetitions only
        loop.detect(
            prompt, check_identical(prompt, loop.settings.runaway, event.time_ns, name, tool.args_hash)
        )


def on_tool_complete(loop: LoopState, event: ToolEndInput) -> None:
    call_id = event.call_id
    if call_id is None:
        return
    prompt = loop.tool_owner.get(call_id)
    if prompt is None or call_id not in prompt.tools:
        return
    tool = prompt.tools.pop(call_id)
    loop.tool_owner.pop(call_id, None)
    loop.touch(prompt, tool.agent, event.time_ns)
    success = event.success
    # A call the user (or a --deny-tool rule) refused is not a tool failure: it never ran.
    failure = "denied" if event.error_code == "denied" else "ToolError"
    if failure == "denied" and event.denied_by:
        tool.denied_by = event.denied_by
    end_tool(
        loop,
        prompt,
        tool,
        event.time_ns,
        success=success,
        error_type=None if success else failure,
        message=event.error_message,
        completion=event,
    )


def on_external_tool(loop: LoopState, event: ExternalToolInput) -> None:
    """An extension (or SDK client) runs a call ``tool.execution_start`` already opened: the same call, so the
    same span, marked as run outside the CLI, never a second span. An unknown call id is ignored."""
    prompt = loop.tool_owner.get(event.call_id or "")
    tool = prompt.tools.get(event.call_id or "") if prompt is not None else None
    if tool is not None:
        tool.external = True


def end_tool(
    loop: LoopState,
    prompt: Prompt,
    tool: Tool,
    end_ns: int,
    *,
    success: bool,
    error_type: str | None,
    message: str | None,
    incomplete: IncompleteReason | None = None,
    completion: ToolEndInput | None = None,
) -> None:
    """Hand on a tool call: completed (``completion``), or cut short (``incomplete`` says why)."""
    exit_code = None
    user_requested = False
    file_edits = None
    error_code = None
    result_text = None
    if completion is not None:
        exit_code = completion.exit_code
        user_requested = completion.user_requested
        file_edits = completion.file_edits
        error_code = completion.error_code
        text = completion.result
        if text is None and message:
            text = message
        result_text = loop.gate.text(text, ContentKind.TOOL_RESULTS, events=True)
        if result_text is not None:
            # The result goes back to the model in the agent's next call, in the order tools complete.
            tool.agent.pending_input.append(InputMessage(result_text, tool.call_id))
    end = loop.not_before(end_ns, tool.start_ns)
    loop.ended(prompt, end)
    # Positional, in the record's field order: a backfill builds one per span, and matching keywords costs more
    # than building the record.
    loop.out.append(
        ToolCall(
            loop.ctx.session_id,  # session_id
            loop.ctx.provider or OWN_API,  # provider
            prompt.trace_id,  # trace_id
            tool.span_id,  # span_id
            tool.parent_span_id,  # parent_span_id
            tool.call_id,  # call_id
            tool.name,  # name
            tool.start_ns,  # start_ns
            end,  # end_ns
            tool.description,  # description
            tool.mcp_server,  # mcp_server
            tool.args_hash,  # arguments_hash
            tool.agent.name,  # agent_name
            success,  # success
            None if success else (error_type or "ToolError"),  # error_type
            message,  # message
            incomplete,  # incomplete_reason
            completion is not None,  # completed
            exit_code,  # exit_code
            user_requested,  # user_requested
            file_edits,  # file_edits
            error_code,  # error_code
            loop.gate.json(tool.arguments, ContentKind.TOOL_ARGUMENTS),  # arguments_json
            result_text,  # result_text
            loop.offset,  # source_offset
            tool.cli_initiated,  # cli_initiated
            None if success else tool.denied_by,  # denied_by
            tool.hooks_ns / 1e9 if tool.hooks_ns else None,  # hooks_s
            completion.sandboxed if completion is not None else None,  # sandboxed
            tool.external,  # external
        )
    )
    loop.cli_calls.discard(tool.call_id)
    if incomplete is None and not tool.cli_initiated:
        loop.detect(prompt, check_errors(prompt, loop.settings.runaway, end_ns, success))


# ---------------------------------------------------------------------------------------------- permissions
def on_permission_requested(loop: LoopState, event: PermissionRequestInput) -> None:
    """The CLI asks the user whether a call may run: the wait hangs under that call."""
    request_id = event.request_id
    if request_id is None:
        return
    call_id = event.tool_call_id
    prompt = loop.tool_owner.get(call_id or "") or loop.current
    if prompt is None:
        return
    prompt.permissions[request_id] = (call_id, event.kind, event.time_ns)
    loop.touch(prompt, prompt.root, event.time_ns)


def on_permission_completed(loop: LoopState, event: PermissionAnswerInput) -> None:
    request_id = event.request_id
    for prompt in loop.prompts.values():
        if request_id in prompt.permissions:
            loop.touch(prompt, prompt.root, event.time_ns)
            end_permission(loop, prompt, request_id, event.time_ns, event.result, None)
            return


def end_permission(
    loop: LoopState,
    prompt: Prompt,
    request_id: str,
    end_ns: int,
    result: str | None,
    incomplete: IncompleteReason | None,
) -> None:
    """Hand on a permission wait: answered (``result``), or left unanswered (``incomplete`` says why)."""
    call_id, kind, start_ns = prompt.permissions.pop(request_id)
    tool = prompt.tools.get(call_id) if call_id else None
    end = loop.not_before(end_ns, start_ns)
    loop.ended(prompt, end)
    loop.out.append(
        PermissionWait(
            session_id=loop.ctx.session_id,
            provider=loop.ctx.provider or OWN_API,
            trace_id=prompt.trace_id,
            span_id=loop.unique_sid(prompt, "permission", request_id),
            parent_span_id=tool.span_id if tool is not None else prompt.root.span_id,
            start_ns=start_ns,
            end_ns=end,
            request_id=request_id,
            kind=kind,
            tool_call_id=call_id,
            tool_name=tool.name if tool is not None else None,
            result=result,
            incomplete_reason=incomplete,
            source_offset=loop.offset,
        )
    )


# ---------------------------------------------------------------------------------------------- hooks
def on_hook_start(loop: LoopState, event: HookStartInput) -> None:
    """A hook begins: under the tool call it decides on (preToolUse names the calls) or follows (postToolUse
    names the tool: its latest open call), else under the prompt; before any prompt, it waits for one."""
    invocation = event.invocation_id
    if invocation is None:
        return
    call_ids = event.tool_call_ids
    call_id = call_ids[0] if call_ids else None
    prompt = (loop.tool_owner.get(call_id) if call_id else None) or loop.current
    tool = prompt.tools.get(call_id) if prompt is not None and call_id else None
    if tool is None and prompt is not None and event.tool_name is not None:
        named = [t for t in prompt.tools.values() if t.name == event.tool_name]
        tool = max(named, key=lambda t: t.start_ns) if named else None
    hook = Hook(
        invocation_id=invocation,
        hook_type=event.hook_type or "unknown",
        start_ns=event.time_ns,
        offset=event.offset,
        tool_call_id=tool.call_id if tool is not None else call_id,
        tool_name=tool.name if tool is not None else event.tool_name,
    )
    if prompt is None:
        loop.pending_hooks[invocation] = hook
        loop.hold(event)
        return
    hook.parent_span_id = tool.span_id if tool is not None else prompt.root.span_id
    prompt.hooks[invocation] = hook
    loop.touch(prompt, prompt.root, event.time_ns)


def on_hook_end(loop: LoopState, event: HookEndInput) -> None:
    invocation = event.invocation_id
    if invocation is None:
        return
    prompt = None
    hook = loop.pending_hooks.get(invocation)
    if hook is None:
        prompt = next((p for p in loop.prompts.values() if invocation in p.hooks), None)
        if prompt is None:
            return
        hook = prompt.hooks[invocation]
    hook.end_ns = event.time_ns
    hook.success = event.success
    hook.error_message = event.error_message
    hook.error_source = event.error_source
    denied = event.denied_calls
    hook.denied_calls = len(denied)
    if prompt is None:
        return  # it waits for its prompt
    for call_id in denied:
        tool = prompt.tools.get(call_id)
        if tool is not None:
            tool.denied_by = HOOK_DENIAL
    owner = prompt.tools.get(hook.tool_call_id) if hook.tool_call_id is not None else None
    if owner is not None:
        owner.hooks_ns += max(0, event.time_ns - hook.start_ns)
    loop.touch(prompt, prompt.root, event.time_ns)
    emit_hook(loop, prompt, hook, event.time_ns, None)


def emit_hook(
    loop: LoopState, prompt: Prompt, hook: Hook, end_ns: int, incomplete: IncompleteReason | None
) -> None:
    """Hand on a hook run: ended, or still running when its prompt closed (``incomplete`` says why)."""
    prompt.hooks.pop(hook.invocation_id, None)
    end = loop.not_before(hook.end_ns if hook.end_ns is not None else end_ns, hook.start_ns)
    loop.ended(prompt, end)
    loop.out.append(
        HookRun(
            session_id=loop.ctx.session_id,
            provider=loop.ctx.provider or OWN_API,
            trace_id=prompt.trace_id,
            span_id=loop.unique_sid(prompt, "hook", hook.invocation_id),
            parent_span_id=hook.parent_span_id or prompt.root.span_id,
            start_ns=hook.start_ns,
            end_ns=end,
            invocation_id=hook.invocation_id,
            hook_type=hook.hook_type,
            tool_call_id=hook.tool_call_id,
            tool_name=hook.tool_name,
            success=hook.success,
            error_message=hook.error_message,
            error_source=hook.error_source,
            denied_calls=hook.denied_calls,
            incomplete_reason=incomplete if hook.end_ns is None else None,
            source_offset=loop.offset,
        )
    )
