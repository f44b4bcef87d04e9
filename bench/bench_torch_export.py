#!/usr/bin/env python3
"""The torch export at scale (`python3 bench/bench_torch_export.py [LIVE NSTACKS]`):
bench/bench_dump.c keeps LIVE allocations live over NSTACKS distinct stacks
(1,000,000 over 100,000 by default, with its 1,000,000 events) and writes a
dump; `vramtrace report --format torch` turns it into PyTorch's snapshot
pickle. Prints the pickle's size against the dump's and against the dump
plus its frame table (frames and strings), the target being no larger
than the latter, and the export's time and peak resident memory.

Then the export of VMM handles (bench/bench_vmm.c on the simulated GPU:
N handles mapped side by side after N made and released, the shape of
expandable segments) at two sizes, 4x apart: its time at each and the
ratio, about 4 for a linear export (it was quadratic: a handle's events
looked through every live allocation). Nothing here asserts: a person
reads the figures."""
import json
import os
import subprocess
import sys
import tempfile

import bench_dump

ROOT = bench_dump.ROOT


def main():
    live, nstacks = (int(x) for x in (sys.argv[1:3] if len(sys.argv) >= 3 else (1000000, 100000)))
    with tempfile.TemporaryDirectory(prefix="vt-bench-torch-") as work:
        out = os.path.join(work, "d.json")
        env = dict(os.environ, LD_PRELOAD=bench_dump.LIB, VRAMTRACE_OUT=out, VRAMTRACE_REPORT="off")
        p = subprocess.run([bench_dump.PROG, str(live), str(nstacks)], env=env, capture_output=True, text=True,
                           check=True)
        path = dict(zip(p.stdout.split()[::2], p.stdout.split()[1::2]))["path"]
        size = os.path.getsize(path)
        with open(path) as fh:
            text = fh.read()
        d = json.loads(text)
        frames = bench_dump.section(text, "frames") + bench_dump.section(text, "strings")
        nframes, nlive, nevents = len(d["frames"]), len(d["live"]), d["nevents"]
        del d, text
        pickle = os.path.join(work, "t.pickle")
        tp, wall, cpu, rss = bench_dump.timed([bench_dump.CLI, "report", path, "--format", "torch", "-o", pickle])
        if tp.returncode != 0:
            print(f"torch export failed: {tp.stderr.strip()}")
            return 1
        tsize = os.path.getsize(pickle)
    print(f"torch export of a dump of {nlive:,} live allocations over {nstacks:,} stacks, {nevents:,} events, "
          f"{nframes:,} distinct frames")
    print(f"  dump                 {size / 1e6:8.1f} MB (its frames and strings {frames / 1e6:.1f} MB)")
    print(f"  torch export         {tsize / 1e6:8.1f} MB: {tsize / size:.2f}x the dump, "
          f"{tsize / (size + frames):.2f}x the dump plus its frames (target <= 1.00x)")
    print(f"  export               {wall:8.2f} s ({cpu:.2f} s CPU), {rss / 2**20:.0f} MiB resident at most: "
          f"{rss / size:.2f}x the dump (target <= 2x, as the report's)")
    return vmm_rows()


def vmm_export(n, work):
    """The torch export's CPU seconds and pickle bytes for a dump of n live
    VMM handles (n more made and released before them)."""
    out = os.path.join(work, f"v{n}.json")
    env = dict(os.environ, SIMGPU_CAPACITY="1000G", LD_PRELOAD=bench_dump.LIB, VRAMTRACE_OUT=out,
               VRAMTRACE_REPORT="off")
    subprocess.run([os.path.join(ROOT, "tests", "simgpu", "run"), "--", os.path.join(ROOT, "build", "bench",
                    "bench_vmm"), str(n), str(n)], env=env, capture_output=True, text=True, check=True)
    pickle = os.path.join(work, f"v{n}.pickle")
    tp, wall, cpu, rss = bench_dump.timed([bench_dump.CLI, "report", out, "--format", "torch", "-o", pickle])
    if tp.returncode != 0:
        sys.exit(f"torch export failed: {tp.stderr.strip()}")
    return cpu, os.path.getsize(pickle)


def vmm_rows():
    sizes = [int(x) for x in os.environ.get("BENCH_VMM", "10000,40000").split(",")]
    print(f"torch export of VMM handles (each with {sizes[0]:,} to {sizes[-1]:,} made and released before)")
    cpu = {}
    with tempfile.TemporaryDirectory(prefix="vt-bench-vmm-") as work:
        for n in sizes:
            cpu[n], size = vmm_export(n, work)
            print(f"  {n:>9,} handles      {cpu[n]:8.2f} s CPU, {size / 1e6:.1f} MB")
    a, b = sizes[0], sizes[-1]
    print(f"  time ratio {cpu[b] / max(cpu[a], 0.01):.1f} for {b / a:.0f}x the handles (linear: {b / a:.0f})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
