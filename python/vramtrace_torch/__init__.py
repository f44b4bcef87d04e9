"""vramtrace's PyTorch companion: PyTorch's own view of GPU memory, handed
to libvramtrace.so for its dumps, with nothing to change in the program.

Loaded by the boot shim (_boot/sitecustomize.py) once the program has
imported torch; `attach` does nothing at all unless libvramtrace.so is in the
process and torch is a CUDA build. Then, and only once CUDA is in use:

- at each out-of-memory error PyTorch's caching allocator raises (its OOM
  observer, called before OutOfMemoryError, with the allocator unlocked;
  attached in the program's first CUDA use, never before: see
  _attach_observer),
  and under cudaMallocAsync, which has no observer, as the OutOfMemoryError
  is made (its __init__, wrapped),
- at exit (an atexit handler, run before the library writes its exit dump),
- on vramtrace's dump signal (the library calls back before its dump),

it takes torch.cuda.memory._snapshot(), memory_stats() and the allocator
settings, walks the live tensors (collect.py), and hands the text to the
library's vt_torch_submit. Optimizer step hooks count steps and mark each
as a step boundary in the library (vramtrace_step). Every entry
point here swallows its own exceptions: the program never sees one.
"""
import sys
import time

_state = {"lib": None, "torch": None, "steps": {}, "marked": 0, "observer": False, "busy": False, "refresh": None}
WINDOW = 16       # the first steps, each sampled
SAMPLE_S = 0.05   # then at most one sample per 50 ms: a sample costs tens of microseconds


def _library():
    """libvramtrace.so's entry points, or None when it is not in this process."""
    try:
        import ctypes
        lib = ctypes.CDLL(None)
        submit = lib.vt_torch_submit
        refresh = lib.vt_torch_set_refresh
        step = lib.vramtrace_step
    except (OSError, AttributeError, ImportError):
        return None
    submit.argtypes = [ctypes.c_char_p, ctypes.c_size_t]
    submit.restype = ctypes.c_int
    refresh.restype = None
    step.argtypes = []
    step.restype = ctypes.c_int
    return ctypes, submit, refresh, step


def _submit(reason, oom=None):
    """Collect and hand over one record; never raises. Not reentrant: an
    OOM inside the collection itself is not collected again."""
    st = _state
    if st["busy"] or st["lib"] is None:
        return
    st["busy"] = True
    try:
        torch = st["torch"]
        if not torch.cuda.is_initialized():
            return
        from . import collect
        text = collect.record(torch, reason, oom, st["marked"])
        data = text.encode("utf-8", "replace")
        st["lib"][1](data, len(data))
    except Exception:
        pass
    finally:
        st["busy"] = False


def _on_oom(device, alloc, device_total, device_free):
    _submit("oom", (device, alloc, device_total, device_free))


def _on_oom_error(args):
    """An OutOfMemoryError is being made. Under cudaMallocAsync, which has
    no observer, this is where the companion learns of an OOM: PyTorch
    makes the exception while turning the C++ error into Python's, after
    the allocator has let go of its lock and with the GIL held. Under the
    caching allocator its observer has sent the record already (it runs
    first): nothing more, so that one OOM has one record. The request is
    the message's (0 where it says none); the library gives the record to
    the device's failed call still open, if one is."""
    st = _state
    if st["observer"] or st["busy"]:
        return
    text = str(args[0]) if args else ""
    if "out of memory" not in text:
        return
    torch = st["torch"]
    import re
    m = re.search(r"on device (\d+)", text)
    d = int(m.group(1)) if m else torch.cuda.current_device()
    free, total = torch.cuda.mem_get_info(d)
    # cudaMallocAsync's message says what was asked ("Requested : 8.00
    # GiB", to two decimals): a refusal of its own (a memory fraction) has
    # no failed call to take it from. Neither the error nor anything else
    # PyTorch keeps holds the exact figure (that backend records no
    # history), so the record says it is rounded.
    request, rounded = _size_said(text, "Requested")
    # And what it had allocated then ("Currently allocated : 4.00 GiB"):
    # by now the failing operation has freed the outputs it had made (C++
    # unwound it before the error reached Python), and that figure alone
    # is of the moment of the refusal.
    _submit("oom", (d, request, total, free, _size_said(text, "Currently allocated")[0], rounded))


def _size_said(text, name):
    """The size cudaMallocAsync's message gives after `name` ("Requested
    : 8.00 GiB") in bytes, or 0 where it gives none, and whether it is
    rounded: PyTorch's format_size gives a size above 1024 bytes to two
    decimals of KiB, MiB or GiB (1100 MiB reads "1.07 GiB"), one of 1024
    bytes or less exactly."""
    import re
    m = re.search(name + r"\s*:\s*([0-9.]+)\s*(bytes|KiB|MiB|GiB|TiB)", text)
    unit = {"bytes": 1, "KiB": 1 << 10, "MiB": 1 << 20, "GiB": 1 << 30, "TiB": 1 << 40}
    if not m:
        return 0, False
    return int(round(float(m.group(1)) * unit[m.group(2)])), m.group(2) != "bytes"


def _hook_oom_error(torch):
    """Wrap OutOfMemoryError's __init__ (a heap type: PyErr_NewException's):
    the original runs first and as before; what follows never raises."""
    error = torch.OutOfMemoryError
    original = error.__init__

    def __init__(self, *args, **kwargs):
        original(self, *args, **kwargs)
        try:
            _on_oom_error(args)
        except BaseException:
            pass

    error.__init__ = __init__


def _at_exit():
    # A dump on request waiting for a step boundary gets its record now:
    # no step comes any more.
    ev = _state.pop("signal_wait", None)
    if ev is not None:
        try:
            _submit("signal")
        finally:
            ev.set()
    # A record on request may be being taken on the library's thread: the
    # exit's waits for it (5 s at most) rather than be skipped.
    deadline = time.monotonic() + 5
    while _state["busy"] and time.monotonic() < deadline:
        time.sleep(0.01)
    _submit("exit")
    try:   # no call back from the library once Python is finishing
        st = _state
        st["lib"][2](None)
        st["refresh"] = None
    except Exception:
        pass


def _on_signal():
    """The record for a dump on request (the library's watcher thread asks).
    In a program that steps, it is taken at its next step boundary, on the
    thread that steps (_on_step), when no step's tensors are being freed:
    taken now, mid-step, the walk held tensors that backward was letting go
    of, and the caching allocator made new segments meanwhile, kept for good
    (18 to 66 MiB more reserved after one dump, read as growth). Without a
    step within three of its steps' time (1 s at least: a busy machine
    delays a step of a few milliseconds by more than three of them; 10 s
    at most; before the first step, 1 s), it is taken now."""
    try:
        import threading
        st = _state
        last = st.get("step_at")
        wait = min(10.0, max(1.0, 3 * st.get("step_s", 1.0)))
        # Before any step, the first may be under way (a slow start on a
        # busy machine): a second for it. get_ident, not current_thread():
        # that would register this thread of the library's with threading
        # for good (a "Dummy-1" the program would see in
        # threading.enumerate()).
        stepping = last is None or time.monotonic() - last < wait
        if stepping and threading.get_ident() != threading.main_thread().ident:
            ev = threading.Event()
            st["signal_wait"] = ev
            if ev.wait(wait):
                return
            if st.pop("signal_wait", None) is not ev:   # a step took it meanwhile: its record is on the way
                ev.wait(wait)
                return
        _submit("signal")
    except BaseException:
        pass


def _on_step(optimizer, args, kwargs):
    try:
        steps = _state["steps"]
        n = steps[id(optimizer)] = steps.get(id(optimizer), 0) + 1
        # A step of the run is a step of its leading optimizer, the busiest
        # of those alive (two that step together, as in a GAN, make one):
        # the library's boundary. One made when the leader is gone (a new
        # stage, trial or reload) leads from its first step; before, its
        # steps counted only once it had made as many as the one before.
        lead = _state.get("leader")
        leader = lead() if lead is not None else None
        if leader is None or leader is optimizer or n > steps.get(id(leader), 0):
            if leader is not optimizer:
                import weakref
                _state["leader"] = weakref.ref(optimizer)
            _state["marked"] += 1
            _state["lib"][3]()
            now = time.monotonic()
            last = _state.get("step_at")
            if last is not None:   # a step's time, smoothed
                _state["step_s"] = 0.8 * _state.get("step_s", now - last) + 0.2 * (now - last)
            _state["step_at"] = now
        ev = _state.pop("signal_wait", None)
        if ev is not None:   # a dump on request waits for this boundary (_on_signal)
            try:
                _submit("signal")
            finally:
                ev.set()
        torch = _state["torch"]
        now = time.monotonic()
        # Each of the first WINDOW steps, then at most one every SAMPLE_S.
        taken = _state.get("taken", 0)
        if (taken >= WINDOW and now - _state.get("sampled", 0.0) < SAMPLE_S) or not torch.cuda.is_initialized():
            return
        _state["sampled"], _state["taken"] = now, taken + 1
        d = torch.cuda.current_device()
        try:
            allocated = torch._C._cuda_memoryStats(d)["allocated_bytes"]["all"]["current"]
        except Exception:
            allocated = torch.cuda.memory_allocated(d)
        c = _state["lib"][0]; c.CDLL(None).vt_torch_live(d, c.c_uint64(allocated), c.c_uint64(torch.cuda.memory_reserved(d)), c.c_uint64(_state["marked"]))  # the live segment (report/live.h)
    except Exception:
        pass


def _attach_observer():
    """Attach PyTorch's OOM observer, as one of torch.cuda's lazy calls: they
    run in the program's first CUDA use, once torch._C._cuda_init has made
    the allocator PyTorch is to use, before that use goes on. Attaching it
    any earlier makes the allocator then, from the settings of that moment:
    at import, a PYTORCH_CUDA_ALLOC_CONF the program sets afterwards was
    never read, and its change_current_allocator refused to swap the
    allocator made. cudaMallocAsync has no observer (it raises here): its
    OOMs are seen as their exception is made (_on_oom_error). Nor has a
    CUDAPluggableAllocator, nor statistics or a snapshot, so no record can
    be taken: the program is told once, and runs on with the library
    alone. Never raises: an exception here would stop the program's first
    CUDA use (DeferredCudaCallError)."""
    try:
        torch = _state["torch"]
        torch._C._cuda_attach_out_of_memory_observer(_on_oom)
        _state["observer"] = True
    except Exception as e:
        try:
            if "CUDAPluggableAllocator" in str(e):
                _warn("PyTorch's allocator is a CUDAPluggableAllocator, which has no out-of-memory "
                      "observer, statistics or snapshot: its CUDA calls are recorded, without PyTorch's "
                      "own view of them")
        except Exception:
            pass


def _warn(text):
    """One warning line of the library's ("vramtrace: warning: TEXT"),
    counted with its own against their cap."""
    lib = _state["lib"]
    warn = lib[0].CDLL(None).vt_torch_warn
    warn.argtypes = [lib[0].c_char_p]
    warn.restype = None
    warn(text.encode("utf-8", "replace"))


def attach(torch):
    """Attach to an imported torch (see the module's comment). Returns
    whether it attached."""
    try:
        if _state["lib"] is not None or not hasattr(torch._C, "_cuda_attach_out_of_memory_observer"):
            return False
        lib = _library()
        if lib is None:
            return False
        _state["lib"], _state["torch"] = lib, torch
        try:
            torch.cuda._lazy_call(_attach_observer)
        except Exception:
            pass
        try:
            _hook_oom_error(torch)
        except Exception:
            pass
        try:
            from torch.optim.optimizer import register_optimizer_step_post_hook
            register_optimizer_step_post_hook(_on_step)
        except Exception:
            pass
        try:   # buffers and parameters given a larger tensor step after step
            from . import grown
            grown.watch(torch, lambda: _state["marked"])
        except Exception:
            pass
        try:   # the library learns that an optimizer steps (once)
            from torch.optim.optimizer import register_optimizer_step_pre_hook
            began = lib[0].CDLL(None).vt_torch_optimizer_step
            began.restype = None
            handle = []

            def _on_step_begin(optimizer, args, kwargs):
                try:
                    began()
                    handle.pop().remove()
                except Exception:
                    pass
            handle.append(register_optimizer_step_pre_hook(_on_step_begin))
        except Exception:
            pass
        import atexit
        atexit.register(_at_exit)
        ctypes = lib[0]
        cb = ctypes.CFUNCTYPE(None)(_on_signal)
        _state["refresh"] = cb   # kept alive while the library may call it
        lib[2].argtypes = [ctypes.c_void_p]
        lib[2](ctypes.cast(cb, ctypes.c_void_p))
        return True
    except Exception:
        return False
