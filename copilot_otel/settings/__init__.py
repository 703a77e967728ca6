"""Settings: the one declarative table of options (:mod:`.config`), the values some of them take (:mod:`.policy`,
:mod:`.moments`, :mod:`.report_defaults`) and the privacy gates every captured text passes (:mod:`.content`).
"""
