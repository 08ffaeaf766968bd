"""Where jobs run other than a Kiln cluster: :class:`LocalProcessBackend`, on this machine."""

from kiln.backends.local import LOCAL_RUNTIME, LocalProcessBackend

__all__ = ["LOCAL_RUNTIME", "LocalProcessBackend"]
