#!/usr/bin/env python3
"""The HTML report at scale: a generated dump with 1,000,000 events,
100,000 live allocations and 100,000 stacks, written as a page by
`vramtrace report --format html`, then opened in headless Chromium with
the page's own timing mode (#bench). Prints the page's size, the time to
write it, the time to open it with the timelines drawn (from navigation
start, as the page measures it, and Chromium's whole run), and how long a
hover and a zoom take, then the page's bytes part by part (each device's
events, the stack tree, the names, the live table, the holders per moment,
the script). Targets: page <= 25 MB,
open < 3 s, hover and zoom < 100 ms. Nothing here asserts: a person reads
the figures.

`bench_html.py EVENTS LIVE STACKS` scales the dump down or up.
"""
import json
import os
import random
import re
import shutil
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
CLI = os.path.join(ROOT, "build", "vramtrace")
OUT = os.path.join(ROOT, "build", "bench")


def stacks(n, rng):
    """n distinct stacks, innermost first: CUDA and libtorch frames, torch's
    Python, the user's model code (what tells them apart), the interpreter."""
    interp = [{"function": f, "file": "Python/ceval.c", "line": 100 + k, "module": "/usr/lib/libpython3.12.so.1.0",
               "offset": hex(0x1000 + k), "address": hex(0x7f0000001000 + k)}
              for k, f in enumerate(["PyEval_EvalCode", "run_mod", "_PyRun_SimpleFileObject", "Py_RunMain",
                                     "__libc_start_main", "_start"])]
    native = [{"function": "cudaMalloc", "file": None, "line": 0, "module": "/usr/lib/libcudart.so.13",
               "offset": "0x5000", "address": "0x7f0000005000"},
              {"function": "c10::cuda::CUDACachingAllocator::malloc", "file": None, "line": 0,
               "module": "/venv/lib/python3.12/site-packages/torch/lib/libc10_cuda.so", "offset": "0x9000",
               "address": "0x7f0000009000"}]
    out = []
    for i in range(n):
        torch_py = [{"function": f"forward_{i % 7}", "file": "/venv/lib/python3.12/site-packages/torch/nn/modules/linear.py",
                     "line": 110 + i % 13, "python": True}]
        user = [{"function": f"layer_{i % 100}", "file": f"model/block_{i % 20}.py", "line": 10 + i // 100, "python": True},
                {"function": f"block_{i % 20}", "file": "model/net.py", "line": 40 + i % 20, "python": True},
                {"function": "train_step", "file": "train.py", "line": 60 + i % 3, "python": True},
                {"function": "main", "file": "train.py", "line": 120, "python": True}]
        frames = native + torch_py + user + interp
        out.append({"frames": [dict({"function": None, "file": None, "line": 0, "module": None, "offset": "0x0",
                                     "address": "0x0", "python": False}, **f) for f in frames]})
    return out


def dump(nevents, nlive, nstacks, seed=19):
    rng = random.Random(seed)
    nallocs = (nevents + nlive) // 2
    live, events, t, addr = {}, [], 0, 0x700000000000
    dev = [{"live": 0, "count": 0, "peak": 0, "peak_t": 0, "allocs": 0, "frees": 0} for _ in range(2)]
    allocs = 0
    keys = []
    for _ in range(nevents):
        t += rng.randint(50, 5000)
        if allocs < nallocs and (not live or rng.random() < nallocs / nevents):
            size = 512 * int(2 ** rng.uniform(0, 13))
            d = 0 if rng.random() < 0.7 else 1
            s = int(rng.paretovariate(1.2) * 50) % nstacks if rng.random() < 0.5 else rng.randrange(nstacks)
            addr += size + 512
            live[addr] = (size, d, s, t)
            keys.append(addr)
            allocs += 1
            dev[d]["live"] += size; dev[d]["count"] += 1; dev[d]["allocs"] += 1
            if dev[d]["live"] > dev[d]["peak"]: dev[d]["peak"], dev[d]["peak_t"] = dev[d]["live"], t
            events.append([t, "alloc", hex(addr), size, d, s, "device"])
        else:
            k = rng.randrange(len(keys))
            a = keys[k]; keys[k] = keys[-1]; keys.pop()
            size, d, s, _ = live.pop(a)
            dev[d]["live"] -= size; dev[d]["count"] -= 1; dev[d]["frees"] += 1
            events.append([t, "free", hex(a), size, d, s, "device"])
    events.append([t + 1000, "oom", "0x0", 80 << 30, 0, 0, "device"])
    by = {}
    for size, d, s, _ in live.values():
        b, c = by.get(s, (0, 0)); by[s] = (b + size, c + 1)
    holders = [{"stack": s, "bytes": b, "count": c} for s, (b, c) in sorted(by.items(), key=lambda x: -x[1][0])]
    devices = [{"ordinal": k, "name": "generated GPU", "uuid": f"GPU-{k}", "total_bytes": 80 << 30,
                "live_bytes": v["live"], "live_count": v["count"], "peak_bytes": v["peak"], "peak_time_ns": v["peak_t"],
                "alloc_count": v["allocs"], "free_count": v["frees"], "failed_count": int(k == 0), "oom_count": int(k == 0)}
               for k, v in enumerate(dev)]
    tot = sum(v["live"] for v in dev)
    return {"format": "vramtrace-dump", "version": 1, "reason": "exit", "pid": 4242, "rank": 0, "host": "bench",
            "argv": ["python", "train.py"], "start_unix_ns": 1700000000000000000, "time_ns": t + 2000,
            "devices": devices,
            "totals": {"live_bytes": tot, "live_count": len(live), "peak_bytes": max(v["peak"] for v in dev),
                       "peak_time_ns": dev[0]["peak_t"], "alloc_count": allocs, "free_count": nevents - allocs,
                       "failed_count": 1, "oom_count": 1, "unknown_frees": 0},
            "host_memory": {"live_bytes": 0, "live_count": 0, "peak_bytes": 0},
            "ooms": [{"requested_bytes": 80 << 30, "api": "cudaMalloc", "kind": "device", "device": 0, "stack": 0,
                      "thread": 4242, "free_bytes": 1 << 30, "total_bytes": 80 << 30, "live_bytes": dev[0]["live"],
                      "time_ns": t + 1000, "holders": None}],
            "holders": holders, "peak_holders": holders,
            "live": [{"address": hex(a), "bytes": size, "kind": "device", "api": "cudaMalloc", "device": d, "stack": s,
                      "thread": 4242, "time_ns": tt} for a, (size, d, s, tt) in sorted(live.items(), key=lambda x: -x[1][0])],
            "events_dropped": 0, "event_fields": ["time_ns", "type", "address", "bytes", "device", "stack", "kind"],
            "events": events, "stacks": stacks(nstacks, rng)}


def chromium(page, fragment, shot=None):
    """Chromium's DOM after the page ran (or, with shot, a screenshot of its
    first screen) and the whole run's seconds."""
    exe = shutil.which("chromium") or shutil.which("chromium-browser")
    prof = tempfile.mkdtemp(prefix="vt-bench-chromium-")
    try:
        t0 = time.monotonic()
        p = subprocess.run([exe, "--headless", "--no-sandbox", "--disable-gpu", "--no-first-run",
                            "--disable-background-networking", "--disable-component-update", f"--user-data-dir={prof}",
                            "--window-size=1400,1000"] + ([f"--screenshot={shot}"] if shot else ["--dump-dom"]) +
                           ["file://" + page + fragment],
                           capture_output=True, text=True, timeout=600)
        return p.stdout, time.monotonic() - t0
    finally:
        shutil.rmtree(prof, ignore_errors=True)


def part_sizes(page):
    """The page's bytes by part: its script, style and markup, and in each
    data block (cli/html/data.c) the events, the stack tree, the names,
    the live table and the holders per moment, as written in the page."""
    raw = open(page, "rb").read()
    parts = {"script": 0, "style": 0}
    for m in re.finditer(rb"<script>(.*?)</script>", raw, re.S):
        parts["script"] += len(m.group(1))
    for m in re.finditer(rb"<style>(.*?)</style>", raw, re.S):
        parts["style"] += len(m.group(1))
    blocks = [m.group(1) for m in re.finditer(rb'<script type="application/json" id="vt-data-\d+">(.*?)</script>', raw, re.S)]
    parts["markup"] = len(raw) - parts["script"] - parts["style"] - sum(len(b) for b in blocks)
    group = {"np": "stack tree", "nf": "stack tree", "sn": "stack tree", "so": "stack tree",
             "strs": "names: strings", "names": "names: entries", "lib": "names: library flags",
             "sp": "names: call sites"}
    size = lambda v: len(json.dumps(v, separators=(",", ":"), ensure_ascii=False).encode())
    for b in blocks:
        d = json.loads(b)
        for k, v in d.items():
            if k == "devices":
                for dev in v:
                    for kk in ("dt", "b", "s"):
                        name = f"events, device {dev['ordinal']}: {kk}"
                        parts[name] = parts.get(name, 0) + size(dev.pop(kk, ""))
                    parts["devices"] = parts.get("devices", 0) + size(dev)
            elif k == "live":
                for kk, vv in v.items():
                    name = f"live: {kk}"
                    parts[name] = parts.get(name, 0) + size(vv)
            elif k == "ooms":
                for i, o in enumerate(v):
                    for kk in [x for x in o if x.startswith("holders")]:
                        name = f"holders at OOM #{i + 1}{kk[7:].replace('_', ' ')}"
                        parts[name] = parts.get(name, 0) + size(o.pop(kk))
                    parts["ooms"] = parts.get("ooms", 0) + size(o)
            else:
                name = group.get(k, "holders at " + k.replace("_", " ") if k.split("_")[0] in ("exit", "peak") else k)
                parts[name] = parts.get(name, 0) + size(v)
    return parts, len(raw)


def main():
    nevents, nlive, nstacks = (int(x) for x in (sys.argv[1:4] if len(sys.argv) >= 4 else (1000000, 100000, 100000)))
    os.makedirs(OUT, exist_ok=True)
    path = os.path.join(OUT, f"html-{nevents}-{nlive}-{nstacks}.json")
    if not os.path.exists(path):
        with open(path + ".tmp", "w") as f:
            json.dump(dump(nevents, nlive, nstacks), f, separators=(",", ":"))
        os.rename(path + ".tmp", path)
    page = os.path.join(OUT, "html-bench.html")
    t0 = time.monotonic()
    subprocess.run([CLI, "report", path, "--format", "html", "-o", page], check=True)
    write_s = time.monotonic() - t0
    blank = os.path.join(OUT, "blank.html")
    with open(blank, "w") as f:
        f.write("<!DOCTYPE html><title>blank</title>")
    _, blank_s = chromium(blank, "")
    dom, open_s = chromium(page, "#bench")
    _, shot_s = chromium(page, "#view=timeline", shot=os.path.join(OUT, "html-bench.png"))
    m = re.search(r'<pre id="bench">([^<]*)</pre>', dom)
    figures = dict(zip(*[iter(m.group(1).split())] * 2)) if m else {}
    print(f"HTML report at scale: {nevents} events, {nlive} live allocations, {nstacks} stacks "
          f"(dump {os.path.getsize(path) / 1e6:.1f} MB)")
    print(f"  page size            {os.path.getsize(page) / 1e6:8.1f} MB   (target <= 25 MB)")
    print(f"  vramtrace report     {write_s:8.2f} s")
    print(f"  open, timeline drawn {float(figures.get('open_ms', 'nan')) / 1000:8.2f} s    (target < 3 s; from "
          f"navigation start, as the page measures; its own drawing {figures.get('draw_ms', '?')} ms)")
    print(f"  chromium, whole run  {shot_s:8.2f} s    (start, open, draw, screenshot; an empty page: {blank_s:.2f} s; "
          f"with --dump-dom of the 1M-event DOM: {open_s:.2f} s)")
    print(f"  hover                {figures.get('hover_median_ms', '?'):>8} ms median, {figures.get('hover_max_ms', '?')} ms "
          f"max of 50 (target < 100 ms)")
    print(f"  zoom                 {figures.get('zoom_median_ms', '?'):>8} ms median, {figures.get('zoom_max_ms', '?')} ms "
          f"max of 5 (target < 100 ms)")
    print(f"  axis switch          {figures.get('axis_ms', '?'):>8} ms")
    if not m:
        print("  (the page did not report its figures)")
    parts, total = part_sizes(page)
    print("  page by part (bytes as written):")
    for name, n in sorted(parts.items(), key=lambda x: -x[1]):
        if n >= 1000:
            print(f"    {name:32} {n / 1e6:8.3f} MB")
    print(f"    {'(parts under 1 kB)':32} {sum(n for n in parts.values() if n < 1000) / 1e6:8.3f} MB")
    print(f"    {'total':32} {total / 1e6:8.3f} MB")


if __name__ == "__main__":
    main()
