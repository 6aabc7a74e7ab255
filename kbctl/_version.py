"""The kbctl version, in a module that imports nothing, so any layer may read it."""

__version__ = "0.1.0"
