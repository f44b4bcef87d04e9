"""pytest-vramtrace: per-test GPU memory checks under vramtrace.

The pytest plugin is pytest_vramtrace.plugin (registered through the
pytest11 entry point); pytest_vramtrace.api is the C API of
libvramtrace.so (include/vramtrace.h) through ctypes, for use outside
pytest too.
"""
from .api import Api, parse_bytes, format_bytes  # noqa: F401

__version__ = "0.1.0"
