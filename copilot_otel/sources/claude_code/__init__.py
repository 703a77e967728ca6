"""Claude Code: its session logs typed (:mod:`.reader`) and framed as the agent loop's inputs (:mod:`.framer`)."""
