#!/usr/bin/env python3
"""Big dumps (`make bench`, or `python3 bench/bench_dump.py [LIVE NSTACKS]...`):
for each shape, bench/bench_dump.c keeps LIVE allocations live over NSTACKS
distinct stacks of depth 26 and writes one named dump (the third default
shape: stacks of over 220 frames that differ near their outermost frames,
`bench_dump 20000 20000 outer 210`, a node of the dump's tree for nearly
every frame); then prints the
dump's bytes per live allocation, per distinct frame and per event (each
section's own bytes, and the whole against the budget 120 x live + 40 x
frames + 16 x events), the write's time and the resident memory it added,
`vramtrace report`'s peak resident memory over the dump's size and its
speed in MB of dump a second (text format), the peak resident memory of
every other format, and the torch export's size over the dump's. Then a
dump whose history is most of it: 1,000,000 events over one stack
(bench_alloc's 700,000 pairs, the ring's last million kept), every
format's peak resident memory over its size. Then two shapes that took an
earlier CLI past twice the dump: 60,000 Python functions of
300-character names in files of 300-character paths, one live allocation
each (every frame's text long and distinct), and 1,000,000 allocations
freed last first (`bench_dump 1000000 1 reverse`: the ring holds the
frees, their allocations dropped); every format's peak resident memory
over the dump's size, and each format's MB of dump a second of CPU time.

BENCH_LIB and BENCH_CLI run another build's library and CLI (a dump of
format version 1 is measured by its own sections where it has them);
BENCH_BEFORE=DIR, a built checkout of an earlier commit, measures its
library and CLI too (with this build's bench/bench_dump, the same shape),
each shape's "before:" figures printed above this build's "after:".
The write's CPU time is the process's (the live publisher's thread runs
beside the dump) and the dumping thread's own."""
import json
import os
import re
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
LIB = os.environ.get("BENCH_LIB", os.path.join(ROOT, "build", "libvramtrace.so"))
CLI = os.environ.get("BENCH_CLI", os.path.join(ROOT, "build", "vramtrace"))
PROG = os.path.join(ROOT, "build", "bench", "bench_dump")
BEFORE = os.environ.get("BENCH_BEFORE")
SHAPES = [(1000000, 100000, None), (10000, 100000, None), (20000, 20000, 210)]


def section(text, key):
    """The bytes of the top-level value of `key` in the dump's text."""
    m = re.search(r'(?:^|[,{\n])\s*"%s"\s*:' % key, text)
    if not m:
        return 0
    d = json.JSONDecoder()
    _, end = d.raw_decode(text, m.end())
    return end - m.end()


def timed(argv, **kw):
    p = subprocess.run(["/usr/bin/time", "-f", "%e %U %S %M"] + argv, capture_output=True, text=True, **kw)
    wall, user, sys_, rss = p.stderr.strip().splitlines()[-1].split()
    return p, float(wall), float(user) + float(sys_), int(rss) * 1024


def measure(lib, cli, prog, live, nstacks, outer, work):
    """One build's figures for one shape: the dump's sizes, the write's
    time and memory, and `report`'s of the dump."""
    out = os.path.join(work, "d.json")
    env = dict(os.environ, LD_PRELOAD=lib, VRAMTRACE_OUT=out, VRAMTRACE_REPORT="off")
    more = []
    if outer is not None:
        more, env["VRAMTRACE_DEPTH"] = ["outer", str(outer)], "256"
    p = subprocess.run([prog, str(live), str(nstacks)] + more, env=env, capture_output=True, text=True, check=True)
    f = dict(zip(p.stdout.split()[::2], p.stdout.split()[1::2]))
    path = f["path"]
    size = os.path.getsize(path)
    with open(path) as fh:
        text = fh.read()
    d = json.loads(text)
    m = {"size": size, "v2": d["version"] == 2, "nlive": len(d["live"])}
    m["nevents"] = d["nevents"] if m["v2"] else len(d["events"])
    if m["v2"]:
        m["nframes"], m["nnodes"] = len(d["frames"]), len(d["nodes"]) // 2
        m["frame_bytes"] = section(text, "frames") + section(text, "strings")
        m["node_bytes"] = section(text, "nodes") + section(text, "stacks")
    else:
        m["nframes"] = len({fr["address"] for s in d["stacks"] for fr in s["frames"]})
        m["nnodes"] = sum(len(s["frames"]) for s in d["stacks"])
        m["frame_bytes"] = m["node_bytes"] = section(text, "stacks")
    m["live_bytes"], m["event_bytes"] = section(text, "live"), section(text, "events")
    del d, text
    m["write_s"], m["write_cpu"] = float(f["dump_s"]), float(f["cpu_s"])
    m["write_thread_cpu"] = float(f["thread_cpu_s"]) if "thread_cpu_s" in f else None
    m["write_added"], m["rss_before"] = int(f["hwm_added_kb"]) * 1024, int(f["rss_kb"]) * 1024
    _, m["rwall"], m["rcpu"], m["rrss"] = timed([cli, "report", path, "-o", os.devnull])
    m["frss"] = {"text": m["rrss"]}
    for fmt in ("json", "folded", "html"):
        fp, _, _, m["frss"][fmt] = timed([cli, "report", path, "--format", fmt, "-o", os.devnull])
        if fp.returncode != 0:
            m["frss"][fmt] = 0
    torch = os.path.join(work, "t.pickle")
    tp, _, _, m["frss"]["torch"] = timed([cli, "report", path, "--format", "torch", "-o", torch])
    m["tsize"] = os.path.getsize(torch) if tp.returncode == 0 else 0
    os.unlink(path)
    if m["tsize"]:
        os.unlink(torch)
    return m


def show(m, live, nstacks, outer, label):
    size, mb = m["size"], m["size"] / 1e6
    nlive, nframes, nevents, nnodes = m["nlive"], m["nframes"], m["nevents"], m["nnodes"]
    # A distinct frame is a node of the stacks' prefix tree, a frame in a
    # distinct call path (docs/performance.md, "Dumps"): a budget of the
    # distinct return addresses alone has no room for the stacks at all.
    budget = 120 * nlive + 40 * max(nframes, nnodes) + 16 * nevents
    by_address = 120 * nlive + 40 * nframes + 16 * nevents
    deep = f" (outer {outer})" if outer is not None else ""
    print(f"  {label}{live:>9,} live over {nstacks:>7,} stacks{deep}: dump {mb:8.1f} MB (format {2 if m['v2'] else 1}), "
          f"{size / budget:.2f}x the budget 120 x {nlive:,} + 40 x {max(nframes, nnodes):,} frames in distinct "
          f"paths + 16 x {nevents:,} ({size / by_address:.2f}x counting only the {nframes:,} distinct addresses)")
    print(f"      bytes: {m['live_bytes'] / max(nlive, 1):.1f} per live allocation, "
          f"{m['frame_bytes'] / max(nframes, 1):.1f} per distinct frame with its strings ({nframes:,} frames), "
          f"{m['node_bytes'] / max(nnodes, 1):.1f} per {'tree node' if m['v2'] else 'frame in a stack'} ({nnodes:,}), "
          f"{m['event_bytes'] / max(nevents, 1):.1f} per event")
    thread = f", {m['write_thread_cpu']:.2f} s of it the dumping thread's" if m["write_thread_cpu"] is not None else ""
    print(f"      write: {m['write_s']:.2f} s ({m['write_cpu']:.2f} s CPU{thread}), "
          f"{m['write_added'] / 2**20:.0f} MiB resident added (resident before: {m['rss_before'] / 2**20:.0f} MiB)")
    print(f"      report (text): {m['rrss'] / size:.2f}x the dump's size resident ({m['rrss'] / 2**20:.0f} MiB), "
          f"{mb / m['rwall']:.0f} MB/s ({m['rwall']:.2f} s; {mb / max(m['rcpu'], 1e-3):.0f} MB/s of CPU time)")
    print("      report, every format, resident over the dump's size: " +
          ", ".join(f"{k} {v / size:.2f}x" if v else f"{k} failed" for k, v in m["frss"].items()))
    print(f"      torch export: {m['tsize'] / size:.2f}x the dump ({m['tsize'] / 1e6:.1f} MB)")


def shape(live, nstacks, outer, work):
    """The shape with this build, and with BENCH_BEFORE's build first where
    it is set (a built checkout of an earlier commit: its library and CLI)."""
    runs = []
    if BEFORE:
        runs.append(("before: ", os.path.join(BEFORE, "build", "libvramtrace.so"),
                     os.path.join(BEFORE, "build", "vramtrace"), PROG))
    runs.append(("after:  " if BEFORE else "", LIB, CLI, PROG))
    for label, lib, cli, prog in runs:
        show(measure(lib, cli, prog, live, nstacks, outer, work), live, nstacks, outer, label)


def history(lib, cli, work, label):
    """Every format's peak resident memory over the size of a dump of
    1,000,000 events over one stack."""
    out = os.path.join(work, "h.json")
    env = dict(os.environ, LD_PRELOAD=lib, VRAMTRACE_OUT=out, VRAMTRACE_REPORT="off", VRAMTRACE_LIVE="0",
               LD_LIBRARY_PATH=os.path.dirname(PROG))
    subprocess.run([os.path.join(os.path.dirname(PROG), "bench_alloc"), "pairs", "cuda", "20", "700000", "1", "cold"],
                   env=env, capture_output=True, text=True, check=True)
    size = os.path.getsize(out)
    rss = {}
    for fmt in ("text", "json", "folded", "html", "torch"):
        fp, _, _, rss[fmt] = timed([cli, "report", out, "--format", fmt, "-o", os.devnull])
        if fp.returncode != 0:
            rss[fmt] = 0
    os.unlink(out)
    print(f"  {label}1,000,000 events over one stack: dump {size / 1e6:.1f} MB; report, every format, resident "
          "over the dump's size: " + ", ".join(f"{k} {v / size:.2f}x" if v else f"{k} failed" for k, v in rss.items()))


# A Python program whose every frame's text is long and distinct: NF
# functions named by NAMELEN characters, each compiled in a file of its own
# with a path of PATHLEN characters, each allocating once through ctypes.
PYNAMES = r"""
import ctypes, sys
cu = ctypes.CDLL("libcuda.so.1")
cu.cuInit(0)
keep = []
def leaf():
    p = ctypes.c_uint64(); cu.cuMemAlloc_v2(ctypes.byref(p), 256); keep.append(p.value)
NF, NAMELEN, PATHLEN = (int(a) for a in sys.argv[1:4])
for i in range(NF):
    name = "f%d_" % i + "x" * NAMELEN
    g = {}
    exec(compile("def %s(leaf):\n    leaf()\n" % name, "/long/path/d%d/" % i + "p" * PATHLEN + ".py", "exec"), g)
    g[name](leaf)
"""


def formats(cli, path, label, what):
    """Every format's peak resident memory over the dump's size, and its
    MB of dump a second of CPU time."""
    size = os.path.getsize(path)
    res = []
    for fmt in ("text", "json", "folded", "html", "torch"):
        fp, _, cpu, rss = timed([cli, "report", path, "--format", fmt, "-o", os.devnull])
        res.append(f"{fmt} {rss / size:.2f}x ({size / 1e6 / max(cpu, 1e-3):.0f} MB/s)" if fp.returncode == 0
                   else f"{fmt} failed")
    print(f"  {label}{what}: dump {size / 1e6:.1f} MB; report, every format, resident over the dump's size "
          "(MB/s of CPU): " + ", ".join(res))


def python_names(lib, cli, work, label, nf=60000, namelen=300, pathlen=300):
    out = os.path.join(work, "p.json")
    env = dict(os.environ, LD_PRELOAD=lib, VRAMTRACE_OUT=out, VRAMTRACE_REPORT="off", VRAMTRACE_LIVE="0",
               LD_LIBRARY_PATH=os.path.dirname(PROG))
    subprocess.run([sys.executable, "-c", PYNAMES, str(nf), str(namelen), str(pathlen)], env=env,
                   capture_output=True, text=True, check=True)
    formats(cli, out, label, f"{nf:,} Python functions, {namelen}-character names, {pathlen}-character paths")
    os.unlink(out)


def dropped_frees(lib, cli, work, label):
    out = os.path.join(work, "r.json")
    env = dict(os.environ, LD_PRELOAD=lib, VRAMTRACE_OUT=out, VRAMTRACE_REPORT="off", VRAMTRACE_LIVE="0")
    p = subprocess.run([PROG, "1000000", "1", "reverse"], env=env, capture_output=True, text=True, check=True)
    path = dict(zip(p.stdout.split()[::2], p.stdout.split()[1::2]))["path"]
    formats(cli, path, label, "1,000,000 allocations freed last first (the ring's frees, their allocations dropped)")
    os.unlink(path)


def main():
    args = [int(a) for a in sys.argv[1:]]
    shapes = [(live, n, None) for live, n in zip(args[::2], args[1::2])] or SHAPES
    print(f"dumps: {os.path.relpath(LIB, ROOT) if LIB.startswith(ROOT) else LIB}, "
          f"{os.path.relpath(CLI, ROOT) if CLI.startswith(ROOT) else CLI}")
    with tempfile.TemporaryDirectory(prefix="vt-bench-dump-") as work:
        for live, nstacks, outer in shapes:
            shape(live, nstacks, outer, work)
        if not args:
            if BEFORE:
                history(os.path.join(BEFORE, "build", "libvramtrace.so"), os.path.join(BEFORE, "build", "vramtrace"),
                        work, "before: ")
            history(LIB, CLI, work, "after:  " if BEFORE else "")
            for case in (python_names, dropped_frees):
                if BEFORE:
                    case(os.path.join(BEFORE, "build", "libvramtrace.so"), os.path.join(BEFORE, "build", "vramtrace"),
                         work, "before: ")
                case(LIB, CLI, work, "after:  " if BEFORE else "")
    print("  targets: dump <= 1.00x the budget; write < 1 s and <= 64 MiB added; "
          "report <= 2x the dump resident and >= 100 MB/s; torch export <= the dump plus its frames")


if __name__ == "__main__":
    main()
