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
import re
import sys

CATEGORIES = ("parameter", "buffer", "gradient", "optimizer_state", "activation", "other")
TOP = 64          # tensors listed per device
MAX_TEXT = 200    # characters of a name or holder


def _clean(s):
    s = str(s).replace("\t", " ").replace("\n", " ").replace("\r", " ")
    return s[:MAX_TEXT]


class _Walk:
    """One pass over gc.get_objects(): tensors, modules, optimizers and
    containers by type (each type's kind decided once). Its lists are made
    after gc.get_objects(), so that none is among the containers (a list
    holding itself would be a cycle keeping every tensor alive until the
    next garbage collection); `clear` lets go of them."""

    def __init__(self, torch):
        kinds = {}
        Tensor, Module, Optimizer = torch.Tensor, torch.nn.Module, torch.optim.Optimizer
        objs = gc.get_objects()
        # Made after the call, so that they are not among the objects.
        tensors, modules, optims, containers = [], [], [], []
        lists = (None, tensors, modules, optims, containers)
        get = kinds.get
        for o in objs:
            k = get(type(o))
            if k is None:
                t = type(o)
                k = (1 if issubclass(t, Tensor) else 2 if issubclass(t, Module) else
                     3 if issubclass(t, Optimizer) else 4 if t in (list, tuple, dict) else 0)
                kinds[t] = k
            if k:
                lists[k].append(o)
        if kinds in containers:
            containers.remove(kinds)
        del objs
        self.torch = torch
        self.tensors, self.modules, self.optims, self.containers = tensors, modules, optims, containers

    def clear(self):
        self.tensors = self.modules = self.optims = self.containers = None


def _names():
    """id -> a name the program's code gives the object: the globals of
    __main__, then the locals and globals of every thread's frames
    (innermost wins for locals)."""
    names = {}
    main = sys.modules.get("__main__")
    scopes = [getattr(main, "__dict__", {})]
    try:
        for frame in sys._current_frames().values():
            f = frame
            while f is not None:
                if f.f_code.co_filename != __file__:
                    scopes.append(f.f_locals)
                f = f.f_back
    except Exception:
        pass
    for scope in scopes:
        try:
            for k, v in list(scope.items()):
                if isinstance(k, str) and not k.startswith("__"):
                    names.setdefault(id(v), k)
        except Exception:
            pass
    return names


class _Claims:
    """Storages claimed so far: (device, data_ptr) -> entry."""

    def __init__(self):
        self.by_key = {}

    def claim(self, t, category, name, holder=""):
        try:
            if not t.is_cuda:
                return None
            st = t.untyped_storage()
            ptr = st.data_ptr()
            if not ptr:
                return None
            key = (t.get_device(), ptr)
            if key in self.by_key:
                return None
            # dtype and shape as objects: made text for the listed ones only
            e = [key[0], st.nbytes(), ptr, t.dtype, category, t.shape, name, holder]
            self.by_key[key] = e
            return e
        except Exception:
            return None


def _saved_tensors(node, attr_cache, Tensor):
    """The tensors an autograd node saved for backward, with their names."""
    t = type(node)
    attrs = attr_cache.get(t)
    if attrs is None:
        attrs = attr_cache[t] = [a for a in dir(t) if a.startswith("_saved_")]
    out = []
    for a in attrs:
        try:
            v = getattr(node, a)
        except Exception:
            continue
        vals = v if isinstance(v, (tuple, list)) else (v,)
        for x in vals:
            if isinstance(x, Tensor):
                out.append((t.__name__ + "." + a[len("_saved_"):], x))
    return out


def tensors(torch):
    """Every live CUDA tensor storage claimed by category (see the module's
    comment): a list of [device, bytes, data_ptr, dtype, category, shape,
    name, holder]."""
    w = _Walk(torch)
    try:
        return _claim_all(torch, w)
    finally:
        w.clear()


def _claim_all(torch, w):
    names = _names()
    c = _Claims()
    Module = torch.nn.Module
    # Modules that are no other live module's child are roots; their names
    # come from the program's variables, else their class.
    children = set()
    for m in w.modules:
        try:
            for ch in m.children():
                children.add(id(ch))
        except Exception:
            pass
    param_name = {}
    for m in w.modules:
        if id(m) in children:
            continue
        root = names.get(id(m), type(m).__name__)
        try:
            for n, p in m.named_parameters(remove_duplicate=True):
                param_name.setdefault(id(p), root + "." + n)
                c.claim(p, "parameter", root + "." + n)
            for n, b in m.named_buffers(remove_duplicate=True):
                c.claim(b, "buffer", root + "." + n)
        except Exception:
            pass
    for m in w.modules:   # gradients of every parameter a live module has
        try:
            for p in m.parameters(recurse=False):
                g = p.grad
                if g is not None:
                    c.claim(g, "gradient", param_name.get(id(p), "?") + ".grad",
                            "gradient of " + param_name.get(id(p), "a parameter"))
        except Exception:
            pass
    for o in w.optims:
        oname = names.get(id(o), type(o).__name__)
        try:
            for group in o.param_groups:
                for p in group["params"]:
                    if p.grad is not None:
                        c.claim(p.grad, "gradient", param_name.get(id(p), "?") + ".grad",
                                "gradient of " + param_name.get(id(p), "a parameter"))
            for p, state in o.state.items():
                for k, v in state.items():
                    if isinstance(v, torch.Tensor):
                        c.claim(v, "optimizer_state", param_name.get(id(p), "?") + "." + str(k),
                                oname + ".state")
        except Exception:
            pass
    # Holders of the rest: the containers, those the program names first.
    holder = {}
    want = {id(t) for t in w.tensors if type(t) is not torch.nn.Parameter}
    for named in (True, False):
        for box in w.containers:
            if not want:
                break
            label = names.get(id(box))
            if (label is not None) != named:
                continue
            try:
                items = list(box.values()) if type(box) is dict else box
                hits = want.intersection(map(id, items))
                if not hits:
                    continue
                for i, x in enumerate(items):
                    if id(x) in hits:
                        holder[id(x)] = (label, i, box)
                want -= hits
            except Exception:
                pass

    def held(t):
        """(name, holder): the program's variable or the container's
        element; the holder is the named container holding it."""
        own = names.get(id(t))
        h = holder.get(id(t))
        if h is None:
            return own or "", ""
        label, i, box = h
        if own:
            return own, label or ""
        # The element's name is made for the listed tensors only (_name).
        return (t, label, i, box), label or ""

    # Tensors a variable or a container of the program holds are its own
    # (other), even when a graph saved them too.
    unheld = []
    for t in w.tensors:
        if type(t) is torch.nn.Parameter:
            continue
        name, hold = held(t)
        if name or hold:
            c.claim(t, "other", name, hold)
        else:
            unheld.append(t)
    # Activations: what the graphs of live tensors saved for backward and
    # nothing in Python holds.
    seen, keep, attr_cache, graph_of = set(), [], {}, []
    for t in w.tensors:
        try:
            fn = t.grad_fn
        except Exception:
            continue
        if fn is not None:
            graph_of.append((fn, t))
    for fn, root in graph_of:
        stack = [fn]
        rname, rholder = held(root)
        where = "graph of " + (rholder or rname or "a tensor")
        while stack:
            node = stack.pop()
            if node is None or id(node) in seen:
                continue
            seen.add(id(node))
            keep.append(node)   # alive while `seen` holds its id
            for name, x in _saved_tensors(node, attr_cache, torch.Tensor):
                c.claim(x, "activation", name, where)
            try:
                stack.extend(n for n, _ in node.next_functions)
            except Exception:
                pass
    # What no variable, container or graph holds (a tensor only C++ or an
    # object's attribute keeps).
    for t in unheld:
        c.claim(t, "other", "", "")
    return list(c.by_key.values())


def _natural(name):
    """history[2] before history[10]."""
    return [(0, int(x), "") if x.isdigit() else (1, 0, x) for x in re.split(r"(\d+)", name)]


def _name(n):
    """A name held as (tensor, container label, index, container): text."""
    if isinstance(n, str):
        return n
    t, label, i, box = n
    if type(box) is dict:
        i = repr(next((k for k, v in box.items() if v is t), i))
    return f"{label}[{i}]" if label is not None else f"a {type(box).__name__}[{i}]"


def _blocks(snap):
    """device -> (sorted block starts, [(start, size, segment address)])."""
    out = {}
    for s in snap.get("segments", []):
        for b in s.get("blocks", []):
            out.setdefault(s["device"], []).append((b["address"], b["size"], s["address"]))
    res = {}
    for d, bl in out.items():
        bl.sort()
        res[d] = ([b[0] for b in bl], bl)
    return res


def _settings(snap):
    s = snap.get("allocator_settings") or {}
    conf = s.get("PYTORCH_CUDA_ALLOC_CONF")
    return _clean(conf if conf else ",".join(f"{k}:{v}" for k, v in s.items() if not isinstance(v, dict)))


def record(torch, reason, oom, steps):
    """The text for vt_torch_submit (reason "oom", "exit" or "signal"; oom
    the observer's (device, request, total, free)). Python's garbage collector is
    held off meanwhile (and then left as it was): the walk makes hundreds of
    thousands of small objects, and each collection they set off would
    traverse every live object, the walk's own lists of them included: it
    was most of the walk's time (bench/bench_companion.py)."""
    was = gc.isenabled()
    gc.disable()
    try:
        return _record(torch, reason, oom, steps)
    finally:
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
    lines = ["vramtrace-torch\t1\t%s\t%d\t%d\t%d" % (reason, int(oom[0]) if oom else -1,
                                                       int(oom[1]) if oom else 0, steps)]
    found = tensors(torch)
    blocks = _blocks(snap)
    settings = _settings(snap)
    for d in sorted(devices):
        stats = torch.cuda.memory_stats(d)
        largest = 0
        for s in snap.get("segments", []):
            if s["device"] == d:
                for b in s.get("blocks", []):
                    if b["state"] == "inactive" and b["size"] > largest:
                        largest = b["size"]
        if oom and int(oom[0]) == d:
            free, total = int(oom[3]), int(oom[2])
        else:
            try:
                free, total = torch.cuda.mem_get_info(d)
            except Exception:
                free = total = None
        mine = [e for e in found if e[0] == d]
        cat = {k: 0 for k in CATEGORIES}
        for e in mine:
            cat[e[4]] += e[1]
        lines.append("\t".join(str(x) for x in (
            "D", d, stats.get("allocated_bytes.all.current", 0), stats.get("reserved_bytes.all.current", 0),
            largest, "-" if free is None else free, "-" if total is None else total,
            *(cat[k] for k in CATEGORIES), settings)))
        top = heapq.nlargest(TOP, mine, key=lambda e: e[1])
        for e in top:
            e[6] = _name(e[6])
        top.sort(key=lambda e: (-e[1], _natural(e[6])))
        starts, bl = blocks.get(d, ([], []))
        for e in top:
            e[3] = str(e[3]).replace("torch.", "")
            e[5] = "[" + ", ".join(str(x) for x in e[5]) + "]"
            i = bisect.bisect_right(starts, e[2]) - 1
            block = seg = 0 if tracked else e[2]
            if i >= 0 and bl[i][0] <= e[2] < bl[i][0] + bl[i][1]:
                block, seg = bl[i][0], bl[i][2]
            lines.append("\t".join(str(x) for x in (
                "T", d, e[1], block, seg, e[3], e[4], e[5], _clean(e[6]), _clean(e[7]))))
    return "\n".join(lines) + "\n"
