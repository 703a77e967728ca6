"""The agent loop's pieces, one module per entity it follows, as OpenTelemetry's GenAI utilities split invocations.

:class:`~copilot_otel.loop.agentloop.AgentLoop` (the shell, one layer up) is what the pipeline feeds; the work is done
here, by plain functions over the loop's state (:class:`.core.LoopState`)::

    neutral       the neutral events other sources' framers give, and their translator
    ├── prompts   a human prompt from its message to where its work ends; what waits for the next one
    ├── turns     turns and the model call of each (usage records, assistant messages, unanswered calls)
    ├── tools     tool executions, the permission waits and hooks around them
    ├── agents    sub-agents: where an event belongs (routing), their start and end
    ├── session   session facts: start, resume, context, model, shutdown totals
    └── notes     what the CLI says along the way (notification, compaction, abort, error, …): one table
    core          the state they share, the ids and clocks of the events, and the operations they call of
                  one another (bound by the shell)

Each entity module imports :mod:`.core` and no sibling: one entity calls another through the loop
(``loop.close_prompt(...)``), as declared on :class:`.core.LoopState` and bound by the shell, so the modules have no
import cycle and the wiring is written once. The loop names no source: a handler reads an event through the
protocols of :mod:`copilot_otel.model.inputs`, and which handler reads which event class is each source's
translator (:class:`.core.Translator`), which whoever builds the loop passes it: Copilot CLI's is
:mod:`copilot_otel.sources.copilot.translator`, the other sources' framers give the neutral events of
:mod:`.neutral`.
"""
