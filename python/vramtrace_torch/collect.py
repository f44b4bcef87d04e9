"""What PyTorch holds on each device at one moment, as the text that
libvramtrace.so's vt_torch_submit reads (report/torch.h gives its grammar).

Per device: memory_allocated() and memory_reserved() (from memory_stats()),
the largest inactive block of torch.cuda.memory._snapshot()'s segments, the
device's free and total bytes, the allocator settings, and the live tensors
found through the garbage collector, each storage counted once, in the first
category that claims it: parameter, buffer (with the module path), gradient
(of which parameter), optimizer_state (of which parameter, through the live
torch.optim.Optimizer objects), other (any other tensor Python holds, with
the container that holds it), activation (saved for backward, reached
through the autograd graph of live tensors, held by nothing in Python). The largest tensors are listed with their block and segment.
"""
import bisect
import gc
import heapq
import operator
import os
import re
import sys
import types
import weakref

from . import grown

_Traceback = types.TracebackType

CATEGORIES = ("parameter", "buffer", "gradient", "optimizer_state", "activation", "other")
TOP = 64          # tensors listed per device
FREE_SEGS = 4096  # segments holding no tensor listed per device (report/torch.h)
MAX_TEXT = 200    # characters of a name or holder


def _clean(s):
    s = str(s).replace("\t", " ").replace("\n", " ").replace("\r", " ")
    return s[:MAX_TEXT]


class _Walk:
    """One pass over gc.get_objects(): tensors, modules, optimizers, the
    containers that hold anything and the exceptions that keep a traceback,
    by type (each type's kind decided once). Its lists are made after gc.get_objects(), so that none is
    among the containers (a list holding itself would be a cycle keeping
    every tensor alive until the next garbage collection); `clear` lets go
    of them."""

    def __init__(self, torch):
        kinds = {}
        Tensor, Module, Optimizer = torch.Tensor, torch.nn.Module, torch.optim.Optimizer
        objs = gc.get_objects()
        # Made after the call, so that they are not among the objects.
        tensors, modules, optims, containers, errors = [], [], [], [], []
        lists = (None, tensors, modules, optims, containers, errors)
        get = kinds.get
        for o in objs:
            k = get(type(o))
            if k is None:
                t = type(o)
                k = (1 if issubclass(t, Tensor) else 2 if issubclass(t, Module) else
                     3 if issubclass(t, Optimizer) else 4 if t in (list, tuple, dict) else
                     5 if issubclass(t, BaseException) or t is _Traceback else 0)
                kinds[t] = k
            if k and (k != 4 or o) and (k != 5 or type(o) is _Traceback or o.__traceback__ is not None):
                lists[k].append(o)
        if kinds in containers:
            containers.remove(kinds)
        del objs
        self.torch = torch
        self.tensors, self.modules, self.optims, self.containers = tensors, modules, optims, containers
        self.errors = errors

    def clear(self):
        self.tensors = self.modules = self.optims = self.containers = self.errors = None


# The locals of the functions running now, as read for names. Before
# Python 3.13, a function frame's f_locals is a dict the frame keeps and
# fills with its locals when it is read, and empties of them never: a
# tensor the program then deletes (`del x`, or `x` bound again at a retry
# with a smaller batch after a caught OutOfMemoryError) stayed alive in it
# until the function returned: 100 MiB the program had let go still held.
# Each such dict is emptied once the record is made (_let_go). 3.13's
# f_locals is a view of the frame's own variables, which holds nothing
# (and emptying it would delete them).
_SNAPSHOTS = sys.version_info < (3, 13)
_taken = {}   # id -> dict: one reference each


def _locals(f):
    d = f.f_locals
    if _SNAPSHOTS and f.f_code.co_flags & 1 and d is not f.f_globals:   # CO_OPTIMIZED: a function's frame
        _taken[id(d)] = d
    return d


def _let_go():
    """Empty the dicts _locals filled that only their frames hold: what
    they hold the frames hold themselves. One the program keeps too (`d =
    locals()` is the same object) is left whole: emptied, the program's
    own dict read empty (an outside check). Not while a tracer runs (a
    debugger's): it reads a frame's dict and writes it back into the
    frame's variables after each event, so that an empty one would delete
    them; it fills the dict afresh before each event anyway."""
    global _taken
    taken = list(_taken.values())
    _taken.clear()
    try:
        import threading
        if sys.gettrace() is not None or threading.gettrace() is not None:
            return
    except Exception:
        return
    while taken:
        d = taken.pop()
        # References: the frame's, `d` and getrefcount's argument; any
        # more is someone else's.
        if sys.getrefcount(d) <= 3:
            d.clear()
        d = None


def _traceback_frames(tb, torch_dir):
    """(frame, whether it is the program's, where: `qualname file:line` of
    the program's frame the error last went through, None before one) for
    each frame of traceback tb, outermost first, the companion's own left
    out."""
    where = None
    while tb is not None:
        f, line = tb.tb_frame, tb.tb_lineno
        tb = tb.tb_next
        fn = f.f_code.co_filename
        if fn == __file__:
            continue
        program = not fn.startswith(torch_dir)
        if program:
            where = f"{getattr(f.f_code, 'co_qualname', f.f_code.co_name)} {fn}:{line}"
        yield f, program, where


def _names():
    """(id -> a name the program's code gives the object, the containers
    so named, the named objects, what is in flight in the program's calls,
    the ids of the frames running now): the globals of __main__, then the locals of every thread's
    frames (innermost wins), then those of the frames of the exception
    ending the program, if one is (at exit, after an uncaught
    OutOfMemoryError, its traceback still keeps them: the list the
    failing function filled is named at exit as at the failure)."""
    names, boxes = {}, []
    main = sys.modules.get("__main__")
    scopes = [getattr(main, "__dict__", {})]
    # PyTorch's own frames name nothing: backward's `t_outputs` (a local of
    # torch/autograd/graph.py, innermost) named the graph the program's
    # `loss` holds.
    torch_dir = os.path.dirname(getattr(sys.modules.get("torch"), "__file__", None) or "/nonexistent") + os.sep
    # What PyTorch's own frames hold is in flight in the program's call
    # that runs them (`model(x)` at train.py:6: the forward's input and
    # output between layers, held by nothing of the program's yet): named
    # for that call, after every name of the program's.
    inflight = []
    running = set()
    frame = f = None
    try:
        for frame in sys._current_frames().values():
            f, pending = frame, []
            while f is not None:
                running.add(id(f))
                fn = f.f_code.co_filename
                if fn.startswith(torch_dir):
                    pending.append(_locals(f))
                elif fn != __file__:
                    scopes.append(_locals(f))
                    if pending:
                        code = f.f_code
                        where = f"the call at {getattr(code, 'co_qualname', code.co_name)} {fn}:{f.f_lineno}"
                        inflight.extend((scope, where) for scope in pending)
                        pending = []
                f = f.f_back
    except Exception:
        pass
    finally:
        # This thread's current frame is this function's own: kept in a
        # local it is a cycle that keeps this frame, and through f_back the
        # caller's, alive until the garbage collector's next pass; the
        # caller's list of every tensor would then be a container holding
        # them all at the next collection (every unnamed tensor "held by a
        # list", whether it did depends on when the collector last ran).
        frame = f = None
    try:
        exc = getattr(sys, "last_exc", None)
        tb = exc.__traceback__ if exc is not None else getattr(sys, "last_traceback", None)
        frames, through = [], []
        for f, program, where in _traceback_frames(tb, torch_dir):
            if program:
                frames.append(f)
            elif where is not None:
                # PyTorch's own frames the error went through: what they
                # alone hold was in flight in the program's call that ran
                # them, named so as at the failure (it read `a tuple[0]`,
                # or a dict of the companion's own, at exit).
                through.append((f.f_locals, "the call at " + where))
        scopes.extend(f.f_locals for f in reversed(frames))
        inflight.extend(reversed(through))   # the innermost first, as the running frames
    except Exception:
        pass
    owners, calls = [], {}
    module = type(sys)
    for scope in scopes:
        try:
            for k, v in list(scope.items()):
                if isinstance(k, str) and not k.startswith("__") and id(v) not in names:
                    names[id(v)] = k
                    if type(v) in (list, tuple, dict) and v:
                        boxes.append(v)
                    elif type(v) is not module and hasattr(v, "__dict__"):
                        owners.append((k, v))
        except Exception:
            pass
    # id -> (its name in PyTorch's frame, the call it is in flight in), of
    # what the program names nothing; a container's items are named through
    # it (`args[0]`).
    for scope, where in inflight:
        try:
            for k, v in list(scope.items()):
                if isinstance(k, str) and not k.startswith("__") and id(v) not in names and id(v) not in calls:
                    calls[id(v)] = (k, where, v)
        except Exception:
            pass
    return names, boxes, owners, calls, running


def _attribute_names(owners, unnamed, names):
    """Names for the unnamed containers `unnamed` (id -> container) that an
    attribute of an object or class the program names keeps:
    `trainer.history`, `Trainer.seen`, `rec.features` (a forward hook's
    list), or a variable of a function's closure the program names (`seen`
    of `logger = make_logger()`, whose `log` appends to it: held by `seen
    (closure of logger)`). Their tensors were "a list[0]", held by nothing
    named, and the growth they made named no holder. Returns id -> (the
    name, what holds it)."""
    found = {}
    for name, obj in owners:
        try:
            for k, v in vars(obj).items():
                if id(v) in unnamed and id(v) not in found and isinstance(k, str):
                    found[id(v)] = (f"{name}.{k}", f"{name}.{k}")
        except Exception:
            pass
        try:
            fn = getattr(obj, "__func__", obj)   # a bound method's function
            cells = fn.__closure__
            if cells:
                for k, cell in zip(fn.__code__.co_freevars, cells):
                    try:
                        v = cell.cell_contents
                    except ValueError:   # a cell not yet filled
                        continue
                    if id(v) in unnamed and id(v) not in found:
                        found[id(v)] = (k, f"{k} (closure of {name})")
        except Exception:
            pass
        if len(found) == len(unnamed):
            break
    return found


def _exception_name(exc, names, owners, named):
    """What the program calls a kept exception (or a traceback it keeps
    alone, `tb = e.__traceback__`): its variable (`last_error`), an
    attribute of an object it names (`trainer.error`), an item of a
    container it names (`errors[2]`), else `a kept OutOfMemoryError` (None
    for a traceback: every level of every traceback is one, the program
    keeps the ones it names)."""
    n = names.get(id(exc))
    if n:
        return n
    for name, obj in owners:
        try:
            for k, v in vars(obj).items():
                if v is exc and isinstance(k, str):
                    return f"{name}.{k}"
        except Exception:
            pass
    for box in named:
        try:
            pairs = box.items() if type(box) is dict else enumerate(box)
            for k, v in pairs:
                if v is exc:
                    return f"{names.get(id(box))}[{_key_text(k) if type(box) is dict else k}]"
        except Exception:
            pass
    return None if type(exc) is _Traceback else f"a kept {type(exc).__name__}"


def _kept_tracebacks(errors, names, owners, named, running):
    """id -> (name, holder, object) of what only the frames of a kept
    exception's traceback hold: the common retry loop that catches
    OutOfMemoryError and keeps it (`last_error = e`) keeps, through its
    traceback, every frame the error went through, with the failed
    attempt's input, outputs and graph, and the next attempt fails for
    it (PyTorch's FAQ: recover outside the except clause). Those tensors
    were "a dict['x']" (a finished frame's locals), held by nothing
    named; they are `x`, held by `the traceback of last_error at step
    train.py:8`: the locals of a frame of the program's by their names,
    those of PyTorch's frames by theirs, held by the traceback at the
    program's frame that called into PyTorch (as a call in flight's are).
    Frames still running are named as such (_names), and so are those of
    the exception ending the program (sys.last_exc)."""
    kept = {}
    torch_dir = os.path.dirname(getattr(sys.modules.get("torch"), "__file__", None) or "/nonexistent") + os.sep
    ending = getattr(sys, "last_exc", None) or getattr(sys, "last_value", None)
    # A traceback kept alone is named by what keeps it; one an exception
    # keeps is that exception's (named by it, and by it alone).
    owned = set()
    for exc in errors:
        if type(exc) is not _Traceback and exc.__traceback__ is not None:
            owned.add(id(exc.__traceback__))
    for exc in errors:
        if exc is ending or id(exc) in owned:
            continue
        if type(exc) is _Traceback and (ending is not None and exc is getattr(ending, "__traceback__", None)):
            continue
        try:
            if type(exc) is _Traceback:
                if _exception_name(exc, names, owners, named) is None:
                    continue
                tb = exc
            else:
                tb = exc.__traceback__
            ename = None
            for f, _, where in _traceback_frames(tb, torch_dir):
                if id(f) in running:
                    continue
                if ename is None:
                    ename = _exception_name(exc, names, owners, named)
                held = f"the traceback of {ename}" + (f" at {where}" if where else "")
                for k, v in list(f.f_locals.items()):
                    if isinstance(k, str) and not k.startswith("__") and id(v) not in names and id(v) not in kept:
                        kept[id(v)] = (k, held, v)
        except Exception:
            pass
    return kept


class _Claims:
    """Storages claimed so far: data_ptr -> entry [device, bytes, data_ptr,
    tensor, category, name, holder]. A storage's address is its key alone:
    CUDA's unified addressing gives every device's memory addresses of its
    own. Dtype and shape are read for the listed tensors only."""

    def __init__(self):
        self.by_key = {}

    def claim(self, t, category, name, holder=""):
        try:
            d = t.get_device()   # -1: not on a GPU
            if d < 0:
                return
            st = t.untyped_storage()
            ptr = st.data_ptr()
            if ptr and ptr not in self.by_key:
                self.by_key[ptr] = [d, st.nbytes(), ptr, t, category, name, holder]
        except Exception:
            pass


def _saved_tensors(node, attr_cache, Tensor):
    """The tensors an autograd node saved for backward, with their names,
    read without unpacking them: each `_saved_X` through its `_raw_saved_X`
    (torch._C._autograd.SavedTensor), whose `data` is the tensor saved, or
    what a saved-tensors pack hook made of it. Unpacking would run the
    unpack hook: activation checkpointing would compute its forward again
    (allocating, at an out-of-memory error), save_on_cpu would copy to the
    device. A PyTorch whose SavedTensor cannot say its unpack hook has its
    saved tensors left alone."""
    t = type(node)
    attrs = attr_cache.get(t)
    if attrs is None:
        names = set(dir(t))
        attrs = attr_cache[t] = [(a[len("_saved_"):], "_raw" + a) for a in sorted(names)
                                 if a.startswith("_saved_") and "_raw" + a in names]
    out = []
    for name, raw in attrs:
        try:
            v = getattr(node, raw)
            for x in (v if isinstance(v, (tuple, list)) else (v,)):
                if not hasattr(x, "unpack_hook"):
                    continue
                d = x.data
                if isinstance(d, Tensor):
                    out.append((t.__name__ + "." + name, d))
        except Exception:
            continue
    return out


def tensors(torch, state=None):
    """Every live CUDA tensor storage claimed by category (see the module's
    comment): a list of _Claims' entries. With a dict `state`, also
    state["eval"]: whether every model (a root module with parameters) is
    in eval mode, as the walk found the modules."""
    w = _Walk(torch)
    try:
        if state is not None:
            state["eval"] = _all_in_eval(w.modules)
        return _claim_all(torch, w)
    finally:
        w.clear()


def _all_in_eval(modules):
    """Whether there is a model (a module with parameters that no other
    live module holds) and every one is in eval mode (training False):
    with grad mode on, its forward then saves activations for a backward
    that evaluation never runs."""
    try:
        children = set()
        for m in modules:
            children.update(map(id, m._modules.values()))
        roots = [m for m in modules if id(m) not in children and next(m.parameters(), None) is not None]
        return bool(roots) and not any(m.training for m in roots)
    except Exception:
        return False


def _modules_named(roots, names):
    """(parameters, buffers): [(name, tensor, holder)] of the root modules,
    in named_parameters()'s order (each module before its children, each
    tensor under its first name), read from the modules' own dicts; the
    holder is "" but for one given a larger tensor step after step
    (grown.py), which holds the growth it makes."""
    params, buffers, seen = [], [], set()
    for m in roots:
        stack = [(names.get(id(m), type(m).__name__), m)]
        while stack:
            prefix, mod = stack.pop()
            if id(mod) in seen:
                continue
            seen.add(id(mod))
            for n, p in mod._parameters.items():
                if p is not None:
                    params.append((prefix + "." + n, p, grown.holder(mod, n, prefix + "." + n, "parameter", p)))
            for n, b in mod._buffers.items():
                if b is not None:
                    buffers.append((prefix + "." + n, b, grown.holder(mod, n, prefix + "." + n, "buffer", b)))
            kids = [(prefix + "." + n, ch) for n, ch in mod._modules.items() if ch is not None]
            stack.extend(reversed(kids))
    return params, buffers


def _claim_all(torch, w):
    names, named, owners, calls, running = _names()
    kept = _kept_tracebacks(w.errors, names, owners, named, running)
    c = _Claims()
    claim = c.claim
    # Modules that are no other live module's child are roots; their names
    # come from the program's variables, else their class.
    children = set()
    for m in w.modules:
        try:
            children.update(map(id, m._modules.values()))
        except Exception:
            pass
    try:
        params, buffers = _modules_named([m for m in w.modules if id(m) not in children], names)
    except Exception:
        params, buffers = [], []
    param_name = {}
    for n, p, grew in params:
        if id(p) not in param_name:
            param_name[id(p)] = n
            claim(p, "parameter", n, grew)
    for n, b, grew in buffers:
        claim(b, "buffer", n, grew)
    # Parameters no live module holds (a bare nn.Parameter a variable and
    # an optimizer keep): parameters still, named by the program's name
    # (they were "in no tensor Python reaches").
    Parameter = torch.nn.Parameter
    for t in w.tensors:
        try:
            if type(t) is Parameter and id(t) not in param_name:
                n = param_name[id(t)] = names.get(id(t)) or "a parameter"
                claim(t, "parameter", n)
                if t.grad is not None:
                    claim(t.grad, "gradient", n + ".grad", "gradient of " + n)
        except Exception:
            pass
    for n, p, _ in params:   # gradients of every parameter a live module has
        g = p.grad
        if g is not None:
            n = param_name[id(p)]
            claim(g, "gradient", n + ".grad", "gradient of " + n)
    # Gradients of the program's other leaf tensors (an input made with
    # requires_grad=True): kept by PyTorch until read, not among the
    # tensors walked, so they fell in no category.
    for t in w.tensors:
        try:
            if type(t) is Parameter or not t.requires_grad or not t.is_leaf:
                continue
            g = t.grad
            if g is not None:
                n = names.get(id(t)) or "a tensor"
                claim(g, "gradient", n + ".grad", "gradient of " + n)
        except Exception:
            pass
    for o in w.optims:
        oname = names.get(id(o), type(o).__name__)
        try:
            for group in o.param_groups:
                for p in group["params"]:
                    if p.grad is not None:
                        claim(p.grad, "gradient", param_name.get(id(p), "?") + ".grad",
                              "gradient of " + param_name.get(id(p), "a parameter"))
            for p, state in o.state.items():
                for k, v in state.items():
                    if isinstance(v, torch.Tensor):
                        claim(v, "optimizer_state", param_name.get(id(p), "?") + "." + str(k), oname + ".state")
        except Exception:
            pass
    # Holders of the rest: the containers, those the program names first.
    others = [t for t in w.tensors if type(t) is not Parameter]
    holder = {}
    want = set(map(id, others))
    # A container a named one holds is named through it (`kept[3]`, a
    # list of lists: its tensors were "a list[0]", held by nothing named);
    # what holds them is the named one (`kept`).
    inner = {}
    for box in named:
        label = names.get(id(box))
        try:
            pairs = box.items() if type(box) is dict else enumerate(box)
            for k, x in pairs:
                if type(x) in (list, tuple, dict) and id(x) not in names and id(x) not in inner:
                    inner[id(x)] = (f"{label}[{_key_text(k) if type(box) is dict else k}]", label)
        except Exception:
            pass
    for boxes in (named, w.containers):   # the named ones first
        for box in boxes:
            if not want:
                break
            try:
                items = box.values() if type(box) is dict else box
                if want.isdisjoint(map(id, items)):
                    continue
                items = list(items)
                hits = want.intersection(map(id, items))
                label = names.get(id(box))
                held_by = label
                if label is None and id(box) in inner:
                    label, held_by = inner[id(box)]
                elif label is None and id(box) in calls:   # a container in flight in a call of the program's
                    label, held_by = calls[id(box)][:2]
                elif label is None and id(box) in kept:   # a container a kept traceback's frame holds
                    label, held_by = kept[id(box)][:2]
                for i, x in enumerate(items):
                    if id(x) in hits:
                        holder[id(x)] = (label, i, box, held_by)
                want -= hits
            except Exception:
                pass
    # Containers no name reached: an attribute of a named object or class
    # may keep them.
    unnamed = {id(h[2]): h[2] for h in holder.values() if h[0] is None}
    if unnamed:
        attrs = _attribute_names(owners, unnamed, names)
        for i, h in list(holder.items()):
            a = attrs.get(id(h[2])) if h[0] is None else None
            if a is not None:
                holder[i] = (a[0], h[1], h[2], a[1])

    # Tensors a variable or a container of the program holds are its own
    # (other), even when a graph saved them too.
    unheld = []
    names_get, holder_get, by_key = names.get, holder.get, c.by_key
    for t in others:
        i = id(t)
        own, h = names_get(i), holder_get(i)
        if not own and i in calls and (h is None or h[0] is None or id(h[2]) in calls):
            # PyTorch's local, in flight in the program's call: by its own
            # name there before a container's in flight with it (`args[0]`)
            own, h = calls[i][0], (None, 0, None, calls[i][1])
        elif own and h is not None and h[2] is not None and id(h[2]) in calls:
            h = None   # the program's own variable, also in flight: its name alone
        elif not own and i in kept and (h is None or h[0] is None or id(h[2]) in kept):
            own, h = kept[i][0], (None, 0, None, kept[i][1])   # a local of a kept traceback's frame
        if h is None and not own:
            unheld.append(t)
            continue
        try:   # claim(), inline: this loop sees most of the tensors
            d = t.get_device()
            if d < 0:
                continue
            st = t.untyped_storage()
            ptr = st.data_ptr()
            if ptr and ptr not in by_key:
                by_key[ptr] = [d, st.nbytes(), ptr, t, "other", own or h, "" if h is None else h[3] or ""]
        except Exception:
            pass
    # Activations: what the graphs of live tensors saved for backward and
    # nothing in Python holds.
    # A node's saved tensors belong to the first root that reaches it, and
    # the roots are walked in the order of what holds them: a container
    # the program names (the graph of `outputs`), a variable it names, an
    # unnamed container, nothing (an intermediate tensor that only a graph
    # keeps alive, as PyTorch keeps the Python object of a tensor C++
    # still holds). So the graphs of the tensors a program keeps are named
    # for the list or variable that keeps them, not for one of their own
    # intermediate results that the garbage collector happened to list
    # first.
    seen, keep, attr_cache = set(), [], {}
    graph_of = ([], [], [], [])
    for t in w.tensors:
        try:
            fn = t.grad_fn
        except Exception:
            continue
        if fn is not None:
            own, h = names_get(id(t)), holder_get(id(t))
            flight = h is not None and h[2] is not None and id(h[2]) in calls
            if (h is None or h[0] is None) and not own and id(t) in calls:
                graph_of[2].append((fn, "graph of " + calls[id(t)][1]))
                continue
            if not own and id(t) in kept and (h is None or h[0] is None or id(h[2]) in kept):
                graph_of[2].append((fn, "graph of " + kept[id(t)][1]))
                continue
            if not own and h is not None and h[2] is not None and id(h[2]) in kept:
                graph_of[2].append((fn, "graph of " + h[3]))
                continue
            if flight and own:
                h = None
            elif flight:   # after the program's names: backward's t_outputs holds the program's loss
                graph_of[2].append((fn, "graph of " + h[3]))
                continue
            if h is not None and h[3]:
                graph_of[0].append((fn, "graph of " + h[3]))
            elif own:
                graph_of[1].append((fn, "graph of " + own))
            elif h is not None:
                graph_of[2].append((fn, "graph of a " + type(h[2]).__name__))
            else:
                graph_of[3].append((fn, "graph of a tensor"))
    for fn, where in (x for rank in graph_of for x in rank):
        stack = [fn]
        while stack:
            node = stack.pop()
            if node is None or id(node) in seen:
                continue
            seen.add(id(node))
            keep.append(node)   # alive while `seen` holds its id
            for name, x in _saved_tensors(node, attr_cache, torch.Tensor):
                claim(x, "activation", name, where)
            try:
                stack.extend(n for n, _ in node.next_functions)
            except Exception:
                pass
    # What no variable, container or graph holds (a tensor only C++ or an
    # object's attribute keeps).
    for t in unheld:
        claim(t, "other", "", "")
    return list(by_key.values())


def _natural(name):
    """history[2] before history[10]."""
    return [(0, int(x), "") if x.isdigit() else (1, 0, x) for x in re.split(r"(\d+)", name)]


def _name(n, t):
    """A name held as (container label, index, container) of tensor t: text."""
    if isinstance(n, str):
        return n
    label, i, box = n[:3]
    if type(box) is dict:
        i = _key_text(next((k for k, v in box.items() if v is t), i))
    return f"{label}[{i}]" if label is not None else f"a {type(box).__name__}[{i}]"


_PLAIN = (str, int, float, bool, type(None))


def _key_text(k):
    """A dict key as a name shows it: its repr where it is plain data (a
    string, a number, a tuple of those), else its type, <weakref> (an
    object's repr holds addresses that differ from run to run: checkpoint's
    dict keyed by weak references was named "a dict[<weakref at 0x7f..;
    to '_Handle' at 0x..>]")."""
    if isinstance(k, _PLAIN) or (type(k) is tuple and all(isinstance(x, _PLAIN) for x in k)):
        return repr(k)
    return "<weakref>" if isinstance(k, weakref.ref) else f"<{type(k).__name__}>"


class _Segments:
    """The snapshot's segments by device, for the largest free block of
    each device and the block and segment of a listed tensor (its blocks
    are looked at only in the segments that hold one)."""

    def __init__(self, snap):
        self.by_device, self.largest = {}, {}
        for seg in snap.get("segments", []):
            d = seg["device"]
            self.by_device.setdefault(d, []).append((seg["address"], seg["total_size"], seg))
            free = max((b["size"] for b in seg.get("blocks", ()) if b["state"] == "inactive"), default=0)
            if free > self.largest.get(d, 0):
                self.largest[d] = free
        self.starts = {}
        for d, segs in self.by_device.items():
            segs.sort(key=lambda x: x[0])
            self.starts[d] = [x[0] for x in segs]
        self.blocks = {}   # id(segment) -> (block starts, blocks), made on need

    def empty(self, d):
        """(address, size) of the device's segments that hold no tensor, by
        address."""
        return [(a, size) for a, size, seg in self.by_device.get(d, ())
                if seg.get("allocated_size", 1) == 0 and size > 0]

    def find(self, d, ptr):
        """(block, segment) addresses of the block holding ptr, or None."""
        segs = self.by_device.get(d)
        if not segs:
            return None
        i = bisect.bisect_right(self.starts[d], ptr) - 1
        if i < 0 or not segs[i][0] <= ptr < segs[i][0] + segs[i][1]:
            return None
        seg = segs[i][2]
        bl = self.blocks.get(id(seg))
        if bl is None:
            bs = sorted((b["address"], b["size"]) for b in seg.get("blocks", ()))
            bl = self.blocks[id(seg)] = ([b[0] for b in bs], bs)
        j = bisect.bisect_right(bl[0], ptr) - 1
        if j >= 0 and bl[1][j][0] <= ptr < bl[1][j][0] + bl[1][j][1]:
            return bl[1][j][0], seg["address"]
        return None


def _with_fraction(torch, d, settings):
    """The settings, led by "per_process_memory_fraction:F" when
    torch.cuda.set_per_process_memory_fraction set one below 1 on device d
    (its caching allocator then refuses what would pass F of the device)."""
    try:
        f = float(torch.cuda.get_per_process_memory_fraction(d))
    except Exception:
        return settings
    if not 0 <= f < 1:
        return settings
    return _clean("per_process_memory_fraction:%.6g" % f + ("," + settings if settings else ""))


# The settings the reports decide from (report/torch_growth.c), each as
# PyTorch's allocator_settings entry names it and as PYTORCH_CUDA_ALLOC_CONF
# spells it.
_DECIDING = (("expandable_segments", "expandable_segments"), ("max_split_size", "max_split_size_mb"))


def _settings(snap):
    """PYTORCH_CUDA_ALLOC_CONF's text when it was set, else PyTorch's
    settings, led by the state in force of those the reports decide from
    (_DECIDING), whose words in the text are left out. PyTorch keeps in
    allocator_settings["PYTORCH_CUDA_ALLOC_CONF"] the text it parsed last:
    after a torch.cuda.memory._set_allocator_settings of any other setting
    an expandable_segments:True in force was no longer in the text, and the
    reports advised turning on what was on."""
    s = snap.get("allocator_settings") or {}
    conf = s.get("PYTORCH_CUDA_ALLOC_CONF")
    if not conf:
        return _clean(",".join(f"{k}:{v}" for k, v in s.items() if not isinstance(v, dict)))
    lead, spelled = [], []
    for key, word in _DECIDING:
        v = s.get(key)
        if isinstance(v, int):   # True, False or a size (-1: none)
            lead.append(f"{key}:{v}")
            spelled.append(word + ":")
    rest = [w for w in conf.split(",") if not w.strip().startswith(tuple(spelled))]
    return _clean(",".join(lead + rest))


def record(torch, reason, oom, steps):
    """The text for vt_torch_submit (reason "oom", "exit" or "signal"; oom
    the observer's (device, request, total, free), or from an error's
    message (device, request, total, free, allocated then, whether the
    request is rounded)). Python's garbage collector is
    held off meanwhile (and then left as it was): the walk makes hundreds of
    thousands of small objects, and each collection they set off would
    traverse every live object, the walk's own lists of them included: it
    was most of the walk's time (bench/bench_companion.py)."""
    was = gc.isenabled()
    gc.disable()
    try:
        return _record(torch, reason, oom, steps)
    finally:
        _let_go()
        if was:
            gc.enable()


def _record(torch, reason, oom, steps):
    try:
        snap = torch.cuda.memory._snapshot()
        tracked = True
    except RuntimeError:
        # cudaMallocAsync tracks no blocks: no snapshot, each tensor its own
        # allocation; the devices are those with memory reserved.
        import os
        conf = os.environ.get("PYTORCH_CUDA_ALLOC_CONF") or os.environ.get("PYTORCH_ALLOC_CONF") or ""
        snap = {"segments": [], "allocator_settings": {"PYTORCH_CUDA_ALLOC_CONF": conf}}
        tracked = False
    devices = set(s["device"] for s in snap.get("segments", []))
    if not tracked:
        devices.update(d for d in range(torch.cuda.device_count()) if torch.cuda.memory_reserved(d))
    if oom:
        devices.add(int(oom[0]))
    lines = ["vramtrace-torch\t1\t%s\t%d\t%d\t%d\t%d\t%d" % (reason, int(oom[0]) if oom else -1,
                                                               int(oom[1]) if oom else 0, steps,
                                                               int(oom[4]) if oom and len(oom) > 4 else 0,
                                                               1 if oom and len(oom) > 5 and oom[5] else 0)]
    state = {}
    found = tensors(torch, state)
    segments = _Segments(snap)
    settings = _settings(snap)
    # Evaluation with grad mode on, at a failure: the observer runs on the
    # failing thread, whose grad mode is the program's then. Led by it, as
    # the fraction is (a setting's text is cut at MAX_TEXT).
    if oom and state.get("eval"):
        try:
            if torch.is_grad_enabled():
                settings = _clean("eval_with_grad:True" + ("," + settings if settings else ""))
        except Exception:
            pass
    mine = {d: [] for d in devices}
    cats = {d: dict.fromkeys(CATEGORIES, 0) for d in devices}
    for e in found:
        if e[0] in mine:
            mine[e[0]].append(e)
            cats[e[0]][e[4]] += e[1]
    for d in sorted(devices):
        stats = torch.cuda.memory_stats(d)
        if oom and int(oom[0]) == d:
            free, total = int(oom[3]), int(oom[2])
        else:
            try:
                free, total = torch.cuda.mem_get_info(d)
            except Exception:
                free = total = None
        cat = cats[d]
        lines.append("\t".join(str(x) for x in (
            "D", d, stats.get("allocated_bytes.all.current", 0), stats.get("reserved_bytes.all.current", 0),
            segments.largest.get(d, 0), "-" if free is None else free, "-" if total is None else total,
            *(cat[k] for k in CATEGORIES), _with_fraction(torch, d, settings))))
        top = heapq.nlargest(TOP, mine[d], key=operator.itemgetter(1))
        for e in top:
            e[5] = _name(e[5], e[3])
        top.sort(key=lambda e: (-e[1], _natural(e[5])))
        for e in top:
            t = e[3]
            where = segments.find(d, e[2]) if tracked else (e[2], e[2])
            block, seg = where or (0, 0)
            lines.append("\t".join(str(x) for x in (
                "T", d, e[1], block, seg, str(t.dtype).replace("torch.", ""),
                e[4], "[" + ", ".join(str(x) for x in t.shape) + "]", _clean(e[5]), _clean(e[6]))))
        # The segments that hold no tensor (empty_cache() gives them back):
        # a call site whose growth is these is the cache's, not a leak's.
        for address, size in segments.empty(d)[:FREE_SEGS]:
            lines.append("F\t%d\t%d\t%d" % (d, address, size))
    return "\n".join(lines) + "\n"
