"""The C API of libvramtrace.so (include/vramtrace.h) through ctypes.

The functions are looked up in the process's global scope, where a
preloaded libvramtrace.so puts them: without vramtrace, Api().active is
False and every call returns what vramtrace's header says an inactive
vramtrace returns (VRAMTRACE_INACTIVE, empty reports).
"""
import ctypes
import re

INACTIVE, BAD_MARK, NO_ROOM, FAILED = -1, -2, -3, -4


class Usage(ctypes.Structure):
    """Device memory since a mark: struct vramtrace_usage."""
    _fields_ = [("live_bytes", ctypes.c_uint64), ("live_count", ctypes.c_uint64), ("peak_bytes", ctypes.c_uint64)]


class Api:
    """vramtrace's functions in this process, or none."""

    def __init__(self):
        self._f = {}
        try:
            scope = ctypes.CDLL(None)
            active = scope.vramtrace_active
        except (OSError, AttributeError):
            self.active = False
            return
        sigs = {
            "vramtrace_active": (ctypes.c_int, []),
            "vramtrace_mark": (ctypes.c_int, []),
            "vramtrace_mark_end": (ctypes.c_int, [ctypes.c_int]),
            "vramtrace_usage": (ctypes.c_int, [ctypes.c_int, ctypes.c_int, ctypes.POINTER(Usage)]),
            "vramtrace_leaks": (ctypes.c_long, [ctypes.c_int, ctypes.c_char_p, ctypes.c_size_t]),
            "vramtrace_leaks_outside_torch": (ctypes.c_long, [ctypes.c_int, ctypes.c_char_p, ctypes.c_size_t]),
            "vramtrace_peak": (ctypes.c_long, [ctypes.c_int, ctypes.c_char_p, ctypes.c_size_t]),
            "vramtrace_dump": (ctypes.c_int, [ctypes.c_char_p, ctypes.c_char_p, ctypes.c_size_t]),
        }
        for name, (res, args) in sigs.items():
            f = getattr(scope, name)
            f.restype, f.argtypes = res, args
            self._f[name] = f
        self.active = active() == 1

    def mark(self):
        """A new mark's id (> 0), or a code below zero."""
        return self._f["vramtrace_mark"]() if self.active else INACTIVE

    def mark_end(self, mark):
        return self._f["vramtrace_mark_end"](mark) if self.active else INACTIVE

    def usage(self, mark, device=-1):
        """(live_bytes, live_count, peak_bytes) since mark on device (-1: all)."""
        u = Usage()
        if not self.active or self._f["vramtrace_usage"](mark, device, ctypes.byref(u)) != 0:
            return None
        return u.live_bytes, u.live_count, u.peak_bytes

    def device_peak(self, mark, devices=64):
        """The highest peak of one device since mark (devices' peaks are
        not added: a limit is a device's, as VRAMTRACE_LIMIT's is)."""
        best = 0
        for d in range(devices):
            u = self.usage(mark, d)
            if u and u[2] > best:
                best = u[2]
        return best

    def _report(self, name, mark):
        if not self.active:
            return ""
        size = 1 << 16
        while True:
            buf = ctypes.create_string_buffer(size)
            n = self._f[name](mark, buf, size)
            if n < 0:
                return ""
            if n < size:
                return buf.value.decode("utf-8", "replace")
            size = n + 1

    def leaks(self, mark):
        """The leak report of the allocations since mark still live ("" when none)."""
        return self._report("vramtrace_leaks", mark)

    def leaks_outside_torch(self, mark):
        """The leak report of the allocations since mark still live that did
        not go through PyTorch's CUDA allocator ("" when none)."""
        return self._report("vramtrace_leaks_outside_torch", mark)

    def peak(self, mark):
        """The holders at the mark's peak, in the leak report's words."""
        return self._report("vramtrace_peak", mark)

    def dump(self, name):
        """Write a named dump of the process; its path, or None."""
        if not self.active:
            return None
        buf = ctypes.create_string_buffer(4096)
        if self._f["vramtrace_dump"](name.encode(), buf, 4096) != 0:
            return None
        return buf.value.decode()


# The library's reading of a size (common/options.c, vt_parse_size), the
# one VRAMTRACE_LIMIT, --limit and --fail-over use: K, M, G, T, with or
# without "i" and "B" (KiB, KB, K), are powers of 1024; a fraction only with
# a unit, rounded down to a byte. (KB, MB, GB were powers of 1000 here: a
# mark's "2 GB" and --limit 2GB differed by 7%.)
_SHIFTS = {"": 0, "k": 10, "m": 20, "g": 30, "t": 40}


def parse_bytes(v):
    """A byte count: an int, or a string such as "2 GiB", "512MiB", "1.5G"
    read as the library reads VRAMTRACE_LIMIT: K, M, G, T (KiB, KB...) are
    powers of 1024, and a fraction of a unit (its first 12 digits) is
    rounded down to a byte; spaces around the number are allowed here
    ("  2 GiB "), where VRAMTRACE_LIMIT takes one only before the unit."""
    if isinstance(v, bool):
        raise ValueError(f"not a byte count: {v!r}")
    if isinstance(v, int):
        if v < 0:
            raise ValueError(f"not a byte count: {v!r}")
        return v
    if isinstance(v, float) and v >= 0:
        if not v.is_integer():
            raise ValueError(f"not a whole number of bytes: {v!r}")
        return int(v)
    if not isinstance(v, str):
        raise ValueError(f"not a byte count: {v!r} (say e.g. \"2 GiB\", \"512M\" or 1048576)")
    m = re.fullmatch(r"[ \t]*([0-9]+)(?:\.([0-9]+))?[ \t]*(?:([KkMmGgTt])([iI]?)([Bb]?)|([Bb]?))[ \t]*", v, re.ASCII)
    if not m:
        raise ValueError(f"not a byte count: {v!r} (say e.g. \"2 GiB\", \"512M\" or 1048576)")
    whole, frac, unit = m[1], m[2], (m[3] or "").lower()
    if frac is not None and not unit:
        raise ValueError(f"not a whole number of bytes: {v!r} (a fraction needs a unit: 1.5G)")
    shift = _SHIFTS[unit]
    n = int(whole) << shift
    if frac:
        frac = frac[:12]  # the library reads the first 12 digits of a fraction
        n += int(frac) * (1 << shift) // 10 ** len(frac)
    if n >= 1 << 64:
        raise ValueError(f"not a byte count: {v!r} (more than 2^64 - 1 bytes)")
    return n


def format_bytes(n):
    """n as vramtrace's reports print byte counts: "512 B", "2.00 GiB"."""
    if n < 1024:
        return f"{n} B"
    v, units = float(n), ["B", "KiB", "MiB", "GiB", "TiB", "PiB"]
    u = 0
    while v >= 1024.0 and u < 5:
        v /= 1024.0
        u += 1
    if u < 5 and f"{v:.2f}" == "1024.00":  # the unit of the rounded figure: "1.00 MiB", not "1024.00 KiB"
        v /= 1024.0
        u += 1
    return f"{v:.2f} {units[u]}"
