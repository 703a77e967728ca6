"""What every layer uses: the exceptions (:mod:`.errors`), what a message may show (:mod:`.display`), one rate limit
for our own warnings (:mod:`.ratelimit`), private files written whole (:mod:`.files`) and the one check that a
JSON document is an object (:mod:`.jsonobject`).
"""
