"""Buffers and parameters that grow from one step to the next.

A buffer is made once and kept on purpose, as a parameter is, and so never
the holder of a call site's growth; but one that the program assigns a
larger tensor step after step (`self.hist = torch.cat([self.hist, x])` on a
registered buffer: a memory bank, a queue, a running history) is the leak
itself. Which one is, only the assignments say: every assignment of a
buffer or parameter goes through nn.Module's registration hooks
(`module.hist = t` on a registered buffer calls register_buffer), so
`watch` counts, per module and name, the sizes it was given and the
program's steps when it grew. A hook's cost is a dictionary update per
assignment, and it returns nothing: the tensor assigned is the program's.
"""
import weakref

MIN_STEPS = 3   # grown at as many different steps at least (report/growth.h's VT_GROWTH_MIN_STEPS)

_sizes = weakref.WeakKeyDictionary()   # module -> {name: [first bytes, first step, last bytes, last step, steps grown at]}
_step = [lambda: 0]


def _nbytes(t):
    try:
        return t.untyped_storage().nbytes() if t is not None and t.get_device() >= 0 else None
    except Exception:
        return None


def _seen(module, name, tensor):
    try:
        n = _nbytes(tensor)
        if n is None:
            return
        by_name = _sizes.get(module)
        if by_name is None:
            by_name = _sizes[module] = {}
        step = _step[0]()
        e = by_name.get(name)
        if e is None:
            by_name[name] = [n, step, n, step, 0]
        elif n > e[2]:
            if step != e[3] or e[4] == 0:
                e[4] += 1
            e[2], e[3] = n, step
    except Exception:
        pass


def watch(torch, steps):
    """Count the sizes given to every module's buffers and parameters from
    now on; `steps` says the program's step. Never raises."""
    _step[0] = steps
    try:
        from torch.nn.modules import module as m
        m.register_module_buffer_registration_hook(_seen)
        m.register_module_parameter_registration_hook(_seen)
    except Exception:
        pass


def _fmt(n):
    """Bytes as the library's reports write them (common/format.c)."""
    if n < 1024:
        return "%d B" % n
    v, u = float(n), 0
    units = ("B", "KiB", "MiB", "GiB", "TiB", "PiB")
    while v >= 1024.0 and u < 5:
        v /= 1024.0
        u += 1
    if u < 5 and "%.2f" % v == "1024.00":  # the unit of the rounded figure
        v /= 1024.0
        u += 1
    return "%.2f %s" % (v, units[u])


def holder(module, name, path, kind, tensor):
    """The holder's text of buffer or parameter `name` of module (`path`
    its full name, `kind` "buffer" or "parameter") when it grew at
    MIN_STEPS different steps at least: `model.3.hist, a buffer grown from
    0 B to 510.00 MiB in 255 steps (+2.00 MiB a step)`, what it holds now
    being `tensor`'s storage, the steps those it grew at; else ""."""
    try:
        e = _sizes.get(module, {}).get(name)
        now = _nbytes(tensor)
        if e is None or now is None or e[4] < MIN_STEPS or now <= e[0] or e[3] <= e[1]:
            return ""
        return "%s, a %s grown from %s to %s in %d steps (+%s a step)" % (
            path, kind, _fmt(e[0]), _fmt(now), e[4], _fmt((now - e[0]) // e[4]))
    except Exception:
        return ""
