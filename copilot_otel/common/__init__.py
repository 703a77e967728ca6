"""What every layer uses: the exceptions (:mod:`.errors`), what a message may show (:mod:`.display`), one rate limit
for our own warnings (:mod:`.ratelimit`) and private files written whole (:mod:`.files`).
"""
