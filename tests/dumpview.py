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
    d["ooms"] = [dict(o, holders=holders(o["holders"])) if "holders" in o else o for o in d["ooms"]]
    d.pop("live_fields")
    events = _unpack_events(d.pop("events"), d.pop("nevents"), d.pop("event_types"), d.pop("event_kinds"))
    d.update(version=1, live=live, event_fields=["time_ns", "type", "address", "bytes", "device", "stack", "kind"],
             events=events, stacks=stacks)
    return d


def load_dump(path):
    """The dump at path, in version 1's shape (v1_view)."""
    with open(path) as f:
        return v1_view(json.load(f))
