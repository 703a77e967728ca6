"""The commands, one module each and named after it (``show``, ``report``, ``live``, ``status``, ``doctor``,
``service``, ``dead-letters``): thin shells over the layers below. ``run`` is :mod:`copilot_otel.daemon` and
``replay`` is :mod:`copilot_otel.replay`, both also library entry points; :mod:`copilot_otel.cli` parses the command
line and calls them.
"""
