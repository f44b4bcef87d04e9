"""Reading vramtrace dumps from Python: version 2 (docs/dump-format.md)
shown in version 1's shape, so that a script written for one reads both."""
import base64
import json


def _unpack_events(text, n, types, kinds):
    """A version 2 dump's packed events (docs/dump-format.md) as version 1's
    [time_ns, type, address, bytes, device, stack, kind] arrays."""
    raw, i, out, t, a, b = base64.b64decode(text), 0, [], 0, 0, 0

    def var():
        nonlocal i
        v = shift = 0
        while True:
            c = raw[i]
            i += 1
            v |= (c & 0x7f) << shift
            shift += 7
            if not c & 0x80:
                return v

    def zigzag(prev):
        z = var()
        return (prev + ((z >> 1) ^ -(z & 1))) % (1 << 64)

    for _ in range(n):
        t = zigzag(t)
        c = raw[i]
        i += 1
        dev = var() if c >> 6 == 3 else c >> 6
        a, b = zigzag(a), zigzag(b)
        out.append([t, types[c & 3], "0x%x" % a, b, dev - 1, var(), kinds[(c >> 2) & 15]])
    return out


def v1_view(d):
    """A dump in version 1's shape: a version 2 dump's string, frame and stack
    tables expanded into stacks of frames, its live allocations into objects,
    its packed events into arrays (docs/dump-format.md); a version 1 dump as
    it is."""
    if d.get("version") != 2:
        return d
    d = dict(d)
    strs = d.pop("strings")
    s = lambda i: None if i < 0 else strs[i]
    table = []
    for fn, file, line, mod, off, addr, flags in d.pop("frames"):
        f = {"function": s(fn), "file": s(file), "line": line, "module": s(mod), "offset": "0x%x" % off,
             "address": addr, "python": bool(flags & 1)}
        if flags & 2:
            f["borrowed"] = True
        if flags & 4:
            f["inlined"] = True
        table.append(f)
    nodes, flat, stacks = d.pop("nodes"), d.pop("stacks"), []
    for k in range(0, len(flat), 3):
        node, fr = flat[k], []
        while node >= 0:
            fr.append(dict(table[nodes[2 * node + 1]]))
            node = nodes[2 * node]
        stacks.append({"frames": fr, "site": flat[k + 1], "through": flat[k + 2]})
    live = []
    for e in d.pop("live"):
        a = {"address": e[0]}
        if len(e) > 8:
            a["handle"] = e[8]
        a.update(bytes=e[1], kind=strs[e[2]], api=strs[e[3]], device=e[4], stack=e[5], thread=e[6], time_ns=e[7])
        live.append(a)
    def holders(flat):
        return None if flat is None else [{"stack": flat[k], "bytes": flat[k + 1], "count": flat[k + 2]}
                                          for k in range(0, len(flat), 3)]
    d["holders"] = holders(d["holders"])
    if "peak_holders" in d:
        d["peak_holders"] = holders(d["peak_holders"])
    for k in ("released", "released_host"):
        if k in d:
            d[k] = holders(d[k])
    d["ooms"] = [dict(o, **{k: holders(o[k]) for k in ("holders", "device_holders") if k in o}) for o in d["ooms"]]
    d.pop("live_fields")
    events = _unpack_events(d.pop("events"), d.pop("nevents"), d.pop("event_types"), d.pop("event_kinds"))
    d.update(version=1, live=live, event_fields=["time_ns", "type", "address", "bytes", "device", "stack", "kind"],
             events=events, stacks=stacks)
    return d


def load_dump(path):
    """The dump at path, in version 1's shape (v1_view)."""
    with open(path) as f:
        return v1_view(json.load(f))


def _pack_events(events):
    """Version 1's event arrays packed as a version 2 dump's "events"."""
    out, t, a, b = bytearray(), 0, 0, 0
    types = ["alloc", "free", "oom"]
    kinds = ["device", "pitched", "managed", "async", "vmm", "host", "array", "imported", "host_vmm", "host_async", "host_registered", "graph"]

    def var(v):
        while v >= 0x80:
            out.append((v & 0x7f) | 0x80)
            v >>= 7
        out.append(v)

    def zigzag(now, before):
        d = (now - before) % (1 << 64)
        d = d - (1 << 64) if d >= 1 << 63 else d
        var(((d << 1) ^ (d >> 63)) % (1 << 64))

    for time_ns, ty, address, size, device, stack, kind in events:
        address = int(address, 16)
        zigzag(time_ns, t)
        dev = device + 1
        out.append(types.index(ty) | kinds.index(kind) << 2 | (dev if dev < 3 else 3) << 6)
        if dev >= 3:
            var(dev)
        zigzag(address, a)
        zigzag(size, b)
        var(stack)
        t, a, b = time_ns, address, size
    return base64.b64encode(bytes(out)).decode(), types, kinds


def v2_of(d):
    """A version 1 dump written as version 2 (what the library writes now):
    each string, frame and stack prefix once."""
    d = dict(d)
    strs, index = [], {}

    def s(x):
        if x is None:
            return -1
        if x not in index:
            index[x] = len(strs)
            strs.append(x)
        return index[x]

    frame_of, frames, node_of, nodes, flat = {}, [], {}, [], []
    for st in d.pop("stacks"):
        parent = -1
        for f in reversed(st["frames"]):
            key = (f["function"], f["file"], f["line"], f["module"], f["offset"], f["address"], f.get("python", False),
                   bool(f.get("borrowed")), bool(f.get("inlined")))
            if key not in frame_of:
                frame_of[key] = len(frames)
                frames.append([s(f["function"]), s(f["file"]), f["line"], s(f["module"]), int(f["offset"], 16),
                               f["address"], int(bool(f.get("python"))) | (2 if f.get("python") and f.get("borrowed") else 0)
                               | (4 if not f.get("python") and f.get("inlined") else 0)])
            k = (parent, frame_of[key])
            if k not in node_of:
                node_of[k] = len(nodes) // 2
                nodes += [parent, frame_of[key]]
            parent = node_of[k]
        flat += [parent, st.get("site", -1), st.get("through", -1)]

    def holders(h):
        return None if h is None else [x for e in h for x in (e["stack"], e["bytes"], e["count"])]
    d["holders"] = holders(d["holders"])
    if "peak_holders" in d:
        d["peak_holders"] = holders(d["peak_holders"])
    for k in ("released", "released_host"):
        if k in d:
            d[k] = holders(d[k])
    d["ooms"] = [dict(o, **{k: holders(o[k]) for k in ("holders", "device_holders") if k in o}) for o in d["ooms"]]
    live = []
    for a in d.pop("live"):
        e = [a["address"], a["bytes"], s(a["kind"]), s(a["api"]), a["device"], a["stack"], a["thread"], a["time_ns"]]
        live.append(e + [a["handle"]] if "handle" in a else e)
    nevents = len(d["events"])
    events, types, kinds = _pack_events(d.pop("events"))
    d.pop("event_fields", None)
    d.update(version=2, live_fields=["address", "bytes", "kind", "api", "device", "stack", "thread", "time_ns",
                                     "handle"], live=live, event_types=types, event_kinds=kinds,
             nevents=nevents, events=events, nodes=nodes, stacks=flat,
             frames=frames, strings=strs)
    return d


def fmt_bytes(n):
    """Bytes as every report of vramtrace's says them (common/format.c):
    "512 B", "16.00 MiB"."""
    if n < 1024:
        return f"{n} B"
    v, u = float(n), 0
    while v >= 1024.0 and u < 5:
        v, u = v / 1024.0, u + 1
    if u < 5 and f"{v:.2f}" == "1024.00":  # the unit of the rounded figure
        v, u = v / 1024.0, u + 1
    return f"{v:.2f} {('B', 'KiB', 'MiB', 'GiB', 'TiB', 'PiB')[u]}"
