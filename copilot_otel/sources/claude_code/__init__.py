"""Claude Code: its session logs typed (:mod:`.reader`) and framed as the agent loop's inputs (:mod:`.framer`, with
the concerns whose state is their records' alone beside it: :mod:`.retries`, :mod:`.steering`, :mod:`.forks`,
:mod:`.selfreport`, :mod:`.subagents`)."""
