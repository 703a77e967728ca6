"""Codex CLI: its rollout files typed (:mod:`.reader`) and framed as the agent loop's inputs (:mod:`.framer`)."""
