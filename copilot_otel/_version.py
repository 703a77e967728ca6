"""The package version, in a module of its own: modules that name it (the resource, the exporters' scope and
User-Agent, ``--version``) import it from here, not from the package, whose ``__init__`` is the public API."""

__version__ = "0.1.0"
