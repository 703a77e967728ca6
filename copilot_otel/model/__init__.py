"""The model: the typed records that flow between the stages (:mod:`.records`), the agent loop's neutral output
(:mod:`.activity`), its input vocabulary (:mod:`.inputs`), the logs' timestamps (:mod:`.timestamps`) and the deterministic ids (:mod:`.ids`).
Nothing here does I/O or knows an attribute name.
"""
