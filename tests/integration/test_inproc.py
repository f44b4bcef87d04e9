"""Integration tests of the text the library writes inside the process: the
post-mortem, the exit summary, the leak report (exact lines and figures)."""
import re
import signal

from run_tests import *
from dumpview import v2_of

PROG = os.path.join(T, "t_inproc")
SRC = "tests/progs/t_inproc.c"


def inproc_line(text):
    return source_line("t_inproc.c", text)


def stderr_lines(r, prefix):
    return [l for l in r.err.splitlines() if l.startswith(prefix)]


def holder_rows(r):
    """Every "largest holders by call site" table of the report, in order:
    its heading, then its rows."""
    tables, rows = [], None
    for l in r.err.splitlines():
        if l.startswith("vramtrace: largest holders by call site"):
            rows = [l]
            tables.append(rows)
        elif rows is not None and re.match(r"^vramtrace: +[0-9.]+ (B|KiB|MiB|GiB|TiB) +[0-9.]+% ", l):
            rows.append(l)
        else:
            rows = None
    return tables


@test
def inproc_holders_group_by_call_site():
    # 501 stacks, one call site: one row, in the post-mortem and at exit.
    r = run([PROG, "routes", "501", "other", "8", "fail", "1000"], env={"SIMGPU_CAPACITY": "1G"})
    eq((r.rc, r.out), (0, "done\n"), "t_inproc runs as without vramtrace")
    d = r.dump
    sites = [site(d, h["stack"])["function"] for h in d["holders"]]
    eq(sites.count("site_alloc"), 501, "the dump keeps its holders by stack: 501 stacks reach site_alloc")
    site_at = f"site_alloc {SRC}:{inproc_line('cudaMalloc(&p, n);')}"
    other_at = f"other_alloc {SRC}:{source_line('t_inproc.c', 'static void other_alloc') + 2}"
    table = [
        "vramtrace: largest holders by call site (2 call sites):",
        f"vramtrace:   501.00 MiB  98.4%    501 allocs  {site_at}",
        f"vramtrace:     8.00 MiB   1.6%      1 alloc   {other_at}",
    ]
    eq(holder_rows(r), [table, table], "the post-mortem's and the exit summary's holder tables")
    dominates = [f for f in d["ooms"][0]["findings"] if f["id"] == "one_site_dominates"]
    eq([f["finding"] for f in dominates],
       [f"{site_at} holds 98% of the tracked memory (501.00 MiB in 501 allocations)"],
       "the finding counts the call site, not one of its stacks")


@test
def inproc_growth_groups_by_call_site():
    # A staircase from one call site through 40 stacks grows as one site.
    r = run([PROG, "gap", "5", "routes", "40", "other", "8"], env={"SIMGPU_CAPACITY": "1G"})
    d = r.dump
    g = d["growing"]
    eq([(site(d, x["stack"])["function"], x["first_bytes"], x["end_bytes"], x["allocations"],
         x["bytes_per_allocation"]) for x in g], [("site_alloc", 0, 40 * MiB, 40, MiB)], "the growing site")
    secs = "%.3f" % ((g[0]["last_ns"] - g[0]["since_ns"]) / 1e9)
    site_at = f"site_alloc {SRC}:{inproc_line('cudaMalloc(&p, n);')}"
    eq(stderr_lines(r, "vramtrace: growing") + stderr_lines(r, f"vramtrace:   {site_at}:"),
       ["vramtrace: growing call site (live bytes rose through the run; a leak suspect):",
        f"vramtrace:   {site_at}: 0 B -> 40.00 MiB, +40.00 MiB over 40 allocations in {secs} s, "
        "1.00 MiB per allocation"], "the exit summary's growth lines")


@test
def inproc_growth_figures_same_at_failure_and_exit():
    # Steps 40 ms apart: the time the post-mortem takes after the failure
    # stays well under the run's last half, so the site still grows at exit.
    r = run([PROG, "gap", "40", "grow", "16", "fail", "1000"], env={"SIMGPU_CAPACITY": "1G"})
    d = r.dump
    eq(d["reason"], "exit", "the exit dump")
    g = d["growing"]
    eq(len(g), 1, "one growing site")
    g = g[0]
    span = g["last_ns"] - g["since_ns"]
    eq((site(d, g["stack"])["function"], g["first_bytes"], g["end_bytes"], g["allocations"],
        g["bytes_per_allocation"], g["bytes_per_second"]),
       ("grow_step", 0, 64 * MiB, 16, 4 * MiB, round(64 * MiB / (span / 1e9))), "the dump's figures")
    first_alloc = [e for e in d["events"] if e[1] == "alloc" and e[5] == g["stack"]]
    eq((g["since_ns"], g["last_ns"]), (first_alloc[0][0], first_alloc[-1][0]),
       "from the site's first to its last allocation")
    ok(600e6 <= span < 10e9, f"fifteen gaps of 40 ms: {span} ns")
    site_at = f"grow_step {SRC}:{inproc_line('static void grow_step') + 2}"
    rate = "+64.00 MiB over 16 allocations in %.3f s, 4.00 MiB per allocation" % (span / 1e9)
    at_failure = f"{site_at} grew through the run from 0 B to 64.00 MiB: {rate}; a leak suspect"
    eq(d["ooms"][0]["findings"][0]["finding"], at_failure, "the failure's finding")
    eq(stderr_lines(r, "vramtrace:   1. "), [f"vramtrace:   1. {at_failure}"], "the post-mortem's finding")
    eq(stderr_lines(r, f"vramtrace:   {site_at}:"), [f"vramtrace:   {site_at}: 0 B -> 64.00 MiB, {rate}"],
       "the exit summary's line")
    ok("/s" not in r.err, "no rate per second:\n" + r.err)
    # The CLI reads the same figures from the dump.
    with workdir("vt-inproc-") as work:
        path = os.path.join(work, "d.json")
        with open(path, "w") as f:
            json.dump({k: v for k, v in d.items() if k != "_path"}, f)
        p = subprocess.run([CLI, "report", path], capture_output=True, text=True)
        eq(p.returncode, 0, "vramtrace report: " + p.stderr)
        eq([l for l in p.stdout.splitlines() if l.startswith(f"  {site_at}:")],
           [f"  {site_at}: 0 B -> 64.00 MiB, {rate}"], "the CLI's growth line")
        p = subprocess.run([CLI, "report", "--format", "json", path], capture_output=True, text=True)
        j = json.loads(p.stdout)
        grow = (j["processes"][0] if "processes" in j else j)["growing"]
        eq([(x["since_ns"], x["last_ns"], x["bytes_per_allocation"]) for x in grow],
           [(g["since_ns"], g["last_ns"], 4 * MiB)], "the CLI's JSON growth figures")


@test
def inproc_leak_report_in_lsan_words():
    r = run([os.path.join(T, "t_leaks")], env={"VRAMTRACE_LEAK_CHECK": "1"})
    eq(r.rc, 23, "exit status with leaks")
    eq([l for l in r.err.splitlines() if ("leak" in l.lower() or "call site" in l) and not l.startswith("    #")],
       [f"=={r.dump['pid']}==ERROR: vramtrace: detected GPU memory leaks",
        "Direct leak of 1048576 byte(s) in 1 object(s) allocated from:",
        f"    call site: load_once tests/progs/t_leaks.c:{source_line('t_leaks.c', 'cudaMalloc(&p, 1 << 20)')}",
        "Direct leak of 524288 byte(s) in 8 object(s) allocated from:",
        f"    call site: leaky_step tests/progs/t_leaks.c:{source_line('t_leaks.c', 'cudaMalloc(&p, 64 << 10)')}",
        "Direct leak of 4096 byte(s) in 1 object(s) allocated from:",
        f"    call site: third_party_init tests/progs/t_leaks.c:{source_line('t_leaks.c', 'cudaMalloc(&p, 4096)')}",
        "SUMMARY: vramtrace: 1576960 byte(s) leaked in 10 allocation(s)."], "the leak report's lines")


def leak_lines(r):
    """The leak report's lines of run r, without its frames' lines."""
    return [l for l in r.err.splitlines() if ("leak" in l.lower() or "call site" in l or "released" in l)
            and not l.startswith("    #")]


@test
def inproc_last_primary_release_releases_memory_never_freed():
    """"The context is automatically reset once the last reference to it is
    released" (cuDevicePrimaryCtxRelease): a program that retains device
    0's primary context twice, takes 1 MiB, releases once (the memory stays),
    takes 2 MiB and releases the last reference has its 3 MiB given back;
    they leave the live counts and stay leaks, told apart as released, as
    at a reset. A release of a context not retained fails as without
    vramtrace. Before, the 3 MiB stayed live to the exit."""
    prog = os.path.join(T, "t_reset")
    bare = run([prog, "release"], preload=False)
    eq(bare.out.splitlines(), ["first release 0, free 17178820608", "last release 0, free 17179869184",
                               "release again 201"], "the driver gave the memory back at the last release only")
    r = run([prog, "release"], env={"VRAMTRACE_LEAK_CHECK": "1"})
    eq((r.rc, r.out), (23, bare.out), "the program's own output, the leak check's status")
    line = lambda text: source_line("t_reset.c", text)
    eq(leak_lines(r),
       [f"=={r.dump['pid']}==ERROR: vramtrace: detected GPU memory leaks",
        "Direct leak of 2097152 byte(s) in 1 object(s) allocated from:",
        f"    call site: before_release tests/progs/t_reset.c:{line('/* before the release */')}",
        "    released by a context's reset or destruction without a free: 2097152 byte(s) in 1 object(s)",
        "Direct leak of 1048576 byte(s) in 1 object(s) allocated from:",
        f"    call site: before_release tests/progs/t_reset.c:{line('/* before the release */')}",
        "    released by a context's reset or destruction without a free: 1048576 byte(s) in 1 object(s)",
        "Direct leak of 8192 byte(s) in 1 object(s) allocated from:",
        f"    call site: after_leak tests/progs/t_reset.c:{line('/* kept */')}",
        "SUMMARY: vramtrace: 3153920 byte(s) leaked in 3 allocation(s)."], "the leak report's lines")
    d = r.dump
    t = d["totals"]
    eq((t["live_bytes"], t["live_count"], t["peak_bytes"], t["alloc_count"], t["free_count"], t["unknown_frees"]),
       (8192, 1, 3 << 20, 3, 2, 0), "the totals: the release's two count as frees")
    eq([(a["bytes"], a["kind"]) for a in d["live"]], [(8192, "device")], "live at exit")
    eq(sorted((_site_of(d, h["stack"]), h["bytes"], h["count"]) for h in d["released"]),
       [("before_release", 1 << 20, 1), ("before_release", 2 << 20, 1)], "the dump's released, by stack")


def _site_of(d, stack):
    f = d["stacks"][stack]["frames"][d["stacks"][stack]["site"]]
    return f["function"]


@test
def inproc_device_reset_releases_memory_never_freed():
    """cudaDeviceReset gives the device its memory back, freed or not, and
    destroys the pinned host memory made in its context ("memory
    allocations by cudaMalloc, cudaMallocHost, cudaMallocManaged and
    cudaMallocPitch"): what the program never freed (3 x 1 MiB, 4 KiB
    pinned) leaves the live counts, the holders and the post-mortem's view,
    and stays a leak for the leak check, told apart as released; the
    program's later cudaFreeHost fails, as it did on an H100. Stream-ordered
    memory the reset does not destroy ("will not destroy memory allocations
    by cudaMallocAsync()"): its 512 KiB stays live, a leak at exit. Before,
    those bytes stayed live after the reset, and one leak whose address the
    driver handed out again was replaced by the new allocation's record
    and lost from the leak check; then the stream-ordered memory was
    counted as released and the pinned memory as live; then the pinned
    memory's 4 KiB were counted in the device memory's released total
    (3.00 MiB in 4 allocations), where they are now kept apart as pinned
    host memory is everywhere."""
    prog = os.path.join(T, "t_reset")
    bare = run([prog], preload=False)
    r = run([prog], env={"VRAMTRACE_LEAK_CHECK": "1"})
    eq((r.rc, r.out), (23, bare.out), "the program's own output, the leak check's status")
    eq(bare.out.splitlines()[1:], ["free after 17179344896", "a leak's address 1",
                                   "after the reset: pinned memory known 0, stream-ordered memory known 1",
                                   "pinned memory freed after the reset 0"],
       "the reset gave the device memory back but the stream-ordered 512 KiB, destroyed the pinned memory, and a "
       "leak's address was handed out again")
    line = lambda text: source_line("t_reset.c", text)
    eq(leak_lines(r),
       [f"=={r.dump['pid']}==ERROR: vramtrace: detected GPU memory leaks",
        "Direct leak of 2097152 byte(s) in 2 object(s) allocated from:",
        f"    call site: before_reset tests/progs/t_reset.c:{line('/* before the reset */')}",
        "    released by a context's reset or destruction without a free: 2097152 byte(s) in 2 object(s)",
        "Direct leak of 1048576 byte(s) in 1 object(s) allocated from:",
        f"    call site: before_reset tests/progs/t_reset.c:{line('/* before the reset */')}",
        "    released by a context's reset or destruction without a free: 1048576 byte(s) in 1 object(s)",
        "Direct leak of 524288 byte(s) in 1 object(s) allocated from:",
        f"    call site: before_reset_async tests/progs/t_reset.c:{line('cudaMallocAsync(&p, n, 0)')}",
        "Direct leak of 8192 byte(s) in 1 object(s) allocated from:",
        f"    call site: after_leak tests/progs/t_reset.c:{line('/* kept */')}",
        "Direct leak of 4096 byte(s) in 1 object(s) allocated from:",
        f"    call site: pinned_host tests/progs/t_reset.c:{line('cudaMallocHost(&p, n)')}",
        "    released by a context's reset or destruction without a free: 4096 byte(s) in 1 object(s)",
        "SUMMARY: vramtrace: 3682304 byte(s) leaked in 6 allocation(s)."], "the leak report's lines")
    x = run([prog])   # the exit summary, without the leak check
    eq(x.rc, 0, "without the leak check")
    live = stderr_lines(x, "vramtrace:   live at exit")
    eq(live, ["vramtrace:   live at exit: 520.00 KiB in 2 allocations; peak 3.50 MiB at " + live[0].split(" at ")[-1]],
       "the stream-ordered leak and the leak after the reset are live")
    eq(stderr_lines(x, "vramtrace:   released") + stderr_lines(x, "vramtrace:   pinned host memory"),
       ["vramtrace:   released by a context's reset or destruction without a free: 3.00 MiB in 3 allocations (leaked: not live, never freed)",
        "vramtrace:   pinned host memory: 0 B live in 0 allocations; peak 4.00 KiB",
        "vramtrace:   pinned host memory released by a context's reset or destruction without a free: 4.00 KiB in 1 "
        "allocation (leaked: not live, never freed)"],
       "the exit summary's lines: device memory, and pinned host memory apart")
    eq([l for l in stderr_lines(x, "vramtrace:   ") if " alloc " in l],
       ["vramtrace:   512.00 KiB  98.5%      1 alloc   before_reset_async "
        f"tests/progs/t_reset.c:{line('cudaMallocAsync(&p, n, 0)')}",
        "vramtrace:     8.00 KiB   1.5%      1 alloc   after_leak "
        f"tests/progs/t_reset.c:{line('/* kept */')}"], "the holders")
    d = x.dump
    t = d["totals"]
    eq((t["live_bytes"], t["live_count"], t["alloc_count"], t["free_count"], t["unknown_frees"]),
       (532480, 2, 7, 5, 1), "the totals: the releases count as frees; the refused free of the destroyed pinned "
                             "memory is a free of a pointer not live, as a double free is")
    eq(sorted((a["bytes"], a["kind"]) for a in d["live"]), [(8192, "device"), (524288, "async")], "live at exit")
    eq([(_site_of(d, h["stack"]), h["bytes"], h["count"]) for h in d["released"]],
       [("before_reset", 2 << 20, 2), ("before_reset", 1 << 20, 1)],
       "the dump's released, by stack")
    eq([(_site_of(d, h["stack"]), h["bytes"], h["count"]) for h in d["released_host"]],
       [("pinned_host", 4096, 1)], "the dump's released pinned host memory, by stack")
    eq([(_site_of(d, h["stack"]), h["bytes"]) for h in d["holders"]],
       [("before_reset_async", 512 << 10), ("after_leak", 8192)], "the holders")
    with workdir("vt-inproc-") as work:
        path = os.path.join(work, "d.json")
        with open(path, "w") as f:
            json.dump(v2_of({k: v for k, v in d.items() if k != "_path"}), f)
        p = subprocess.run([CLI, "report", path], capture_output=True, text=True)
        eq(p.returncode, 0, p.stderr)
        ok("  released by a context's reset or destruction without a free: 3.00 MiB in 3 allocations (leaked: not live, never freed)\n"
           in p.stdout, p.stdout)
        ok("  pinned host memory released by a context's reset or destruction without a free: 4.00 KiB in 1 "
           "allocation (leaked: not live, never freed)\n" in p.stdout, p.stdout)
        table = p.stdout[p.stdout.index("released by a context's reset or destruction without a free (leaks"):].splitlines()
        eq([l for l in table if not l.startswith("      #")][:4],
           ["released by a context's reset or destruction without a free (leaks, not live) by call site (1 call site):",
            f"    3.00 MiB 100.0%      3 allocs  before_reset tests/progs/t_reset.c:{line('/* before the reset */')}",
            "pinned host memory released by a context's reset or destruction without a free (leaks, not live) by "
            "call site (1 call site):",
            f"    4.00 KiB 100.0%      1 alloc   pinned_host tests/progs/t_reset.c:{line('cudaMallocHost(&p, n)')}"],
           "the text report's tables of what was released, by call site (two stacks in one row), with frames; "
           "pinned host memory apart")
        ok(table[2].startswith("      #0 0x") and f"in before_reset tests/progs/t_reset.c:" in table[2], table[2])
        p = subprocess.run([CLI, "report", "--format", "json", path], capture_output=True, text=True)
        j = json.loads(p.stdout)
        j = j["processes"][0] if "processes" in j else j
        eq([(k, [(x["site"], x["bytes"], x["count"]) for x in j[k]]) for k in ("released", "released_host")],
           [("released", [(f"before_reset tests/progs/t_reset.c:{line('/* before the reset */')}", 2 << 20, 2),
                          (f"before_reset tests/progs/t_reset.c:{line('/* before the reset */')}", 1 << 20, 1)]),
            ("released_host", [(f"pinned_host tests/progs/t_reset.c:{line('cudaMallocHost(&p, n)')}", 4096, 1)])],
           "the CLI's JSON")
    c = run([prog, "clean"], env={"VRAMTRACE_LEAK_CHECK": "1"})
    eq((c.rc, c.out), (0, run([prog, "clean"], preload=False).out), "all freed before the reset")
    ok("released" not in c.err and "leak" not in c.err, c.err)
    eq((c.dump["released"], c.dump["totals"]["live_bytes"]), ([], 0), "nothing released")
    # vramtrace diff: released bytes are leaks too, apart from the rows.
    with workdir("vt-inproc-") as work:
        paths = []
        for name, dump in (("clean", c.dump), ("leak", d)):
            paths.append(os.path.join(work, name + ".json"))
            with open(paths[-1], "w") as f:
                json.dump(v2_of({k: v for k, v in dump.items() if k != "_path"}), f)
        for limit, rc, err in (("1M", 1, "vramtrace diff: live and released bytes grew by +3.51 MiB, more than "
                                          "--fail-over 1.00 MiB\n"), ("4M", 0, "")):
            p = subprocess.run([CLI, "diff", *paths, "--fail-over", limit], capture_output=True, text=True)
            eq((p.returncode, p.stderr), (rc, err), f"diff --fail-over {limit}")
            eq(p.stdout.splitlines()[1:4],
               ["live: 0 B -> 520.00 KiB (+520.00 KiB); allocations: 0 -> 2 (+2)",
                "released by a context's reset or destruction without a free (leaks, not in the rows below): 0 B -> 3.00 MiB",
                "pinned host memory (not in the rows below): 0 B -> 0 B; released by a context's reset or destruction "
                "without a free (leaks): 0 B -> 4.00 KiB"],
               "the diff's lines")
    # A context of the program's own on the device: which records are the
    # primary context's is not known, so the reset releases none (its
    # own memory is freed after the reset without an unknown free; the
    # primary context's leak stays live, a leak all the same).
    o = run([prog, "ctx"], env={"VRAMTRACE_LEAK_CHECK": "1"})
    eq((o.rc, o.out), (23, "own context's memory freed 1\n"), "with a context of its own")
    ok("released" not in o.err and "Direct leak of 1048576 byte(s) in 1 object(s)" in o.err, o.err)
    t = o.dump["totals"]
    eq((o.dump["released"], t["live_bytes"], t["free_count"], t["unknown_frees"]), ([], 1 << 20, 1, 0),
       "nothing released, the own context's free known")



@test
def inproc_pinned_memory_a_reset_released_stays_apart_from_device_memory():
    """Pinned host memory left unfreed is kept apart from device memory
    whether or not a device reset destroyed it: t_pinreset keeps 4 MiB of
    it (leak), or keeps it and resets the device (reset). The exit
    summary, the dump (`released_host`), `vramtrace report` and `vramtrace
    diff` put the reset's 4 MiB with the pinned host memory, and diff's
    --fail-over, which counts device bytes, passes both as it passes
    the leak without a reset; the leak check reports both alike. Before,
    the reset's 4 MiB were counted as released device memory and
    `vramtrace diff --fail-over 1M` failed ("live and released bytes grew
    by +4.00 MiB") where no device byte had changed."""
    prog = os.path.join(T, "t_pinreset")
    site_at = f"pinned_cache tests/progs/t_pinreset.c:{source_line('t_pinreset.c', '/* kept */')}"
    runs = {m: run([prog] + ([m] if m != "none" else [])) for m in ("none", "leak", "reset")}
    for m, r in runs.items():
        eq(r.rc, 0, f"{m}: the program's status")
    pinned = lambda r: [l for l in r.err.splitlines() if l.startswith(("vramtrace:   pinned", "vramtrace:   released"))]
    eq(pinned(runs["leak"]), ["vramtrace:   pinned host memory: 4.00 MiB live in 1 allocation; peak 4.00 MiB"],
       "leak: the exit summary's pinned host memory")
    eq(pinned(runs["reset"]),
       ["vramtrace:   pinned host memory: 0 B live in 0 allocations; peak 4.00 MiB",
        "vramtrace:   pinned host memory released by a context's reset or destruction without a free: 4.00 MiB in 1 "
        "allocation (leaked: not live, never freed)"],
       "reset: the exit summary's pinned host memory, what the reset released of it beside it, no device line")
    d = runs["reset"].dump
    eq((d["released"], [(_site_of(d, h["stack"]), h["bytes"], h["count"]) for h in d["released_host"]],
        d["totals"]["live_bytes"], d["host_memory"]["live_bytes"]),
       ([], [("pinned_cache", 4 << 20, 1)], 0, 0), "reset: the dump's released and released_host")
    eq(("released_host" in runs["leak"].dump, "released_host" in runs["none"].dump), (False, False),
       "no released_host where nothing was released")
    for m in ("leak", "reset"):
        c = run([prog, m], env={"VRAMTRACE_LEAK_CHECK": "1"})
        eq((c.rc, [l for l in c.err.splitlines() if l.startswith(("Direct", "SUMMARY", "    call site", "    released"))]),
           (23, ["Direct leak of 4194304 byte(s) in 1 object(s) allocated from:", f"    call site: {site_at}"]
            + (["    released by a context's reset or destruction without a free: 4194304 byte(s) in 1 object(s)"]
               if m == "reset" else [])
            + ["SUMMARY: vramtrace: 4194304 byte(s) leaked in 1 allocation(s)."]),
           f"{m}: the leak check reports the pinned memory as a leak")
    with workdir("vt-inproc-") as work:
        paths = {}
        for m, r in runs.items():
            paths[m] = os.path.join(work, m + ".json")
            with open(paths[m], "w") as f:
                json.dump(v2_of({k: v for k, v in r.dump.items() if k != "_path"}), f)
        for m, host in (("leak", "0 B -> 4.00 MiB"),
                        ("reset", "0 B -> 0 B; released by a context's reset or destruction without a free "
                                  "(leaks): 0 B -> 4.00 MiB")):
            p = subprocess.run([CLI, "diff", paths["none"], paths[m], "--fail-over", "1M"], capture_output=True,
                               text=True)
            eq((p.returncode, p.stderr, p.stdout.splitlines()[1:]),
               (0, "", ["live: 0 B -> 0 B (0 B); allocations: 0 -> 0 (+0)",
                        f"pinned host memory (not in the rows below): {host}",
                        "        change  bytes (old -> new)         allocations        call site",
                        "  (no change)"]),
               f"diff none -> {m} --fail-over 1M: pinned host memory on its own line, not gated")
        p = subprocess.run([CLI, "report", paths["reset"]], capture_output=True, text=True)
        eq(p.returncode, 0, p.stderr)
        eq([l for l in p.stdout.splitlines() if "released" in l or l.startswith("    4.00 MiB")],
           ["  pinned host memory released by a context's reset or destruction without a free: 4.00 MiB in 1 "
            "allocation (leaked: not live, never freed)",
            "pinned host memory released by a context's reset or destruction without a free (leaks, not live) by "
            "call site (1 call site):",
            f"    4.00 MiB 100.0%      1 alloc   {site_at}"], "the text report: pinned host memory apart")
        p = subprocess.run([CLI, "report", "--format", "json", paths["reset"]], capture_output=True, text=True)
        j = json.loads(p.stdout)
        j = j["processes"][0] if "processes" in j else j
        eq(("released" in j, [(x["site"], x["bytes"], x["count"]) for x in j["released_host"]]),
           (False, [(site_at, 4 << 20, 1)]), "the CLI's JSON: released_host alone")
        # A dump without `released_host` (written before it): none.
        with open(paths["reset"]) as f:
            old = json.load(f)
        old.pop("released_host")
        with open(paths["reset"], "w") as f:
            json.dump(old, f)
        p = subprocess.run([CLI, "report", paths["reset"]], capture_output=True, text=True)
        eq((p.returncode, [l for l in p.stdout.splitlines() if "released" in l]), (0, []),
           "a dump without released_host reads as none released")


@test
def inproc_a_graphs_allocation_outlives_a_reset():
    """A CUDA graph's allocation (stream-ordered, from the device's graph
    pool) freed by the program after a device reset: the free succeeds
    and the pool lets the memory go, so the run is clean. vramtrace took
    it out at the reset as released and reported a 4 MiB leak (status
    23), the successful free counted as a free of a pointer not live (an
    outside check)."""
    prog = os.path.join(T, "t_reset")
    bare = run([prog, "graph"], preload=False)
    eq((bare.rc, bare.out), (0, "graph pool used 4194304\nreset 0\nfree after the reset 0\ngraph pool used 0\n"),
       "the driver kept the graph's memory across the reset")
    r = run([prog, "graph"], env={"VRAMTRACE_LEAK_CHECK": "1"})
    eq((r.rc, r.out), (0, bare.out), "the program's own output and status")
    ok("leak" not in r.err.lower() and "released" not in r.err, r.err)
    t = r.dump["totals"]
    eq((r.dump["released"], t["live_bytes"], t["alloc_count"], t["free_count"], t["unknown_frees"]), ([], 0, 1, 1, 0),
       "nothing released, the free known")


@test
def inproc_runtime_calls_in_a_context_of_the_programs_own():
    """A context the program made with the driver API and left current:
    the runtime's allocation is made in it and the runtime's reset leaves
    it ("will destroy only the internal CUDA RT state for that
    CUcontext"), so its free after the reset succeeds and the run is
    clean. The simulated runtime used to switch back to the primary
    context: the memory was made there, the reset destroyed it and the
    free failed (an outside check)."""
    prog = os.path.join(T, "t_reset")
    bare = run([prog, "ctxrt"], preload=False)
    eq((bare.rc, bare.out), (0, "made in its own context 1\nreset 0\nfree after the reset 0\n"), "without vramtrace")
    r = run([prog, "ctxrt"], env={"VRAMTRACE_LEAK_CHECK": "1"})
    eq((r.rc, r.out), (0, bare.out), "the program's own output and status")
    t = r.dump["totals"]
    eq((r.dump["released"], t["live_bytes"], t["alloc_count"], t["free_count"], t["unknown_frees"]), ([], 0, 1, 1, 0),
       "nothing released, the free known")


@test
def inproc_reset_leak_found_when_its_address_comes_back():
    """A program that made a context of its own (a library's cuCtxCreate
    and cuCtxDestroy) has a reset release nothing in the counts: which
    records were the primary context's is not known. The leak a test left
    (4 MiB) stays live until the driver hands its address to the next
    test's allocation: then it is released without a free, counted as a
    reset's release is (a free, and a leak), on the thread that leaked it
    or from another thread's allocation. Before, the new record silently
    replaced the leak's in the same thread (no leak at exit, alloc_count
    2 and free_count 1) and left it live from another thread."""
    prog = os.path.join(T, "t_reset")
    line = lambda text: source_line("t_reset.c", text)
    for mode in ([], ["thread"]):
        bare = run([prog, "reuse", *mode], preload=False)
        eq((bare.rc, bare.out), (0, "the leak's address 1\n"), f"{mode}: the driver handed the leak's address out again")
        r = run([prog, "reuse", *mode], env={"VRAMTRACE_LEAK_CHECK": "1"})
        eq((r.rc, r.out), (23, bare.out), f"{mode}: the program's own output, the leak check's status")
        eq(leak_lines(r),
           [f"=={r.dump['pid']}==ERROR: vramtrace: detected GPU memory leaks",
            "Direct leak of 4194304 byte(s) in 1 object(s) allocated from:",
            f"    call site: leaky_test tests/progs/t_reset.c:{line('/* never freed */')}",
            "    released by a context's reset or destruction without a free: 4194304 byte(s) in 1 object(s)",
            "SUMMARY: vramtrace: 4194304 byte(s) leaked in 1 allocation(s)."], f"{mode}: the leak report's lines")
        d = r.dump
        t = d["totals"]
        eq((t["live_bytes"], t["live_count"], t["peak_bytes"], t["alloc_count"], t["free_count"], t["unknown_frees"]),
           (0, 0, 4 << 20, 2, 2, 0), f"{mode}: the totals: the replaced record counts as a free, never two at once")
        eq(d["live"], [], f"{mode}: nothing live at exit")
        eq([(_site_of(d, h["stack"]), h["bytes"], h["count"]) for h in d["released"]], [("leaky_test", 4 << 20, 1)],
           f"{mode}: the dump's released")
        ev = [(e[1], e[2], e[3], _site_of(d, e[5])) for e in d["events"]]
        eq([(k, b, f) for k, a, b, f in ev],
           [("alloc", 4 << 20, "leaky_test"), ("free", 4 << 20, "leaky_test"), ("alloc", 4 << 20, "clean_test"),
            ("free", 4 << 20, "clean_test")], f"{mode}: the events: the leak's release before the new allocation")
        eq(len({a for k, a, b, f in ev}), 1, f"{mode}: one address")
        x = run([prog, "reuse", *mode])   # the exit summary, without the leak check
        eq(x.rc, 0, f"{mode}: without the leak check")
        eq(stderr_lines(x, "vramtrace:   released"),
           ["vramtrace:   released by a context's reset or destruction without a free: 4.00 MiB in 1 allocation "
            "(leaked: not live, never freed)"], f"{mode}: the exit summary's line")


@test
def inproc_ipc_handle_opened_twice_is_one_mapping_until_its_last_close():
    """"If the memory handle has already been opened by the current context,
    the reference count on the handle is incremented by 1 and the existing
    device pointer is returned" (cuIpcOpenMemHandle); a close takes one
    reference away, the last unmaps. A handle opened twice and closed twice
    is gone; opened twice again and closed once, its mapping is still open
    at exit: one imported allocation of 1 MiB, listed as an open mapping
    (another process's memory: not a leak, the status unchanged). Through the runtime
    (t_arrays) and, from the static runtime, through the driver
    (t_arrays_static). Before, the second open's record replaced the
    first's and one close took it out: no leak, nothing imported live."""
    for name, api in (("t_arrays", "cudaIpcOpenMemHandle"), ("t_arrays_static", "cuIpcOpenMemHandle_v2")):
        prog = os.path.join(T, name)
        bare = run([prog, "ipc-twice"], preload=False)
        eq((bare.rc, bare.out), (0, "the same pointer 1\na third close -> 1\nthe same pointer 1\n"),
           f"{name}: the simulated driver counts the opens of a handle")
        r = run([prog, "ipc-twice"], env={"VRAMTRACE_LEAK_CHECK": "1"})
        eq((r.rc, r.out), (0, bare.out), f"{name}: the program's own output and status")
        eq([l for l in r.err.splitlines() if "IPC" in l or "call site" in l],
           [f"=={r.dump['pid']}==vramtrace: IPC mappings of other processes' memory still open at exit (not leaks: "
            "this process did not allocate that memory; cudaIpcCloseMemHandle or cuIpcCloseMemHandle closes them)",
            "Open IPC mapping of 1048576 byte(s) in 1 mapping(s) (another process's memory) opened from:",
            f"    call site: open_peer_buffer tests/progs/t_arrays.c:{source_line('t_arrays.c', 'cudaIpcOpenMemHandle(&p')}"],
           f"{name}: the leak report's lines")
        d = r.dump
        t = d["totals"]
        eq((t["live_bytes"], t["live_count"], t["alloc_count"], t["free_count"], t["unknown_frees"]),
           (0, 0, 3, 2, 1), f"{name}: the totals: one allocation a mapping, one free at its last close; "
                            "the third close of a mapping gone is unknown")
        eq(d["imported_memory"], {"live_bytes": 1 << 20, "live_count": 1}, f"{name}: one mapping open")
        eq([(a["kind"], a["bytes"], a["api"]) for a in d["live"]], [("imported", 1 << 20, api)],
           f"{name}: live at exit")
        eq(d["released"], [], f"{name}: nothing released")
        eq([(e[1], e[6], e[3]) for e in d["events"]],
           [("alloc", "device", 1 << 20), ("alloc", "imported", 1 << 20), ("free", "imported", 1 << 20),
            ("alloc", "imported", 1 << 20), ("free", "device", 1 << 20)], f"{name}: the events")


@test
def inproc_context_destroy_releases_its_memory_never_freed():
    """cuCtxDestroy gives back the memory of the context it destroys (its
    cuMemAlloc, pitched, managed and pinned host memory), freed or not:
    what the program never freed in a context of its own (2 MiB, 1 MiB
    pitched, 1 MiB managed, 8 KiB pinned) leaves the live counts and stays
    a leak, told apart as released; the primary context's 1 MiB and the
    pool's 256 KiB (no context's) stay live. Before, the context's memory
    stayed live, and the 2 MiB, whose address the driver handed out again
    after the destruction, was replaced by the new allocation's record and
    lost from the leak check. A destruction that fails releases nothing.
    The pinned 8 KiB are kept apart from the device memory released, as
    pinned host memory is everywhere."""
    prog = os.path.join(T, "t_ctxdestroy")
    bare = run([prog], preload=False)
    eq(bare.out, "context's bytes 4194304\nafter the destruction 0\nthe destroyed address again 1\n",
       "the simulated driver gave the context's memory back and the 2 MiB's address again")
    r = run([prog], env={"VRAMTRACE_LEAK_CHECK": "1"})
    eq((r.rc, r.out), (23, bare.out), "the program's own output, the leak check's status")
    line = lambda text: source_line("t_ctxdestroy.c", text)
    rel = "    released by a context's reset or destruction without a free: %d byte(s) in 1 object(s)"
    eq(leak_lines(r),
       [f"=={r.dump['pid']}==ERROR: vramtrace: detected GPU memory leaks",
        "Direct leak of 2097152 byte(s) in 1 object(s) allocated from:",
        f"    call site: in_context tests/progs/t_ctxdestroy.c:{line('/* in the context */')}",
        rel % (2 << 20),
        "Direct leak of 1048576 byte(s) in 1 object(s) allocated from:",
        f"    call site: primary_leak tests/progs/t_ctxdestroy.c:{line('/* primary */')}",
        "Direct leak of 1048576 byte(s) in 1 object(s) allocated from:",
        f"    call site: main tests/progs/t_ctxdestroy.c:{line('pitch_alloc(&p, &pitch')}",
        rel % (1 << 20),
        "Direct leak of 1048576 byte(s) in 1 object(s) allocated from:",
        f"    call site: main tests/progs/t_ctxdestroy.c:{line('managed(&m, 1 << 20')}",
        rel % (1 << 20),
        "Direct leak of 262144 byte(s) in 1 object(s) allocated from:",
        f"    call site: stream_ordered tests/progs/t_ctxdestroy.c:{line('cudaMallocAsync(&p, n, 0)')}",
        "Direct leak of 8192 byte(s) in 1 object(s) allocated from:",
        f"    call site: main tests/progs/t_ctxdestroy.c:{line('host(&hp, 8192)')}",
        rel % 8192,
        "SUMMARY: vramtrace: 5513216 byte(s) leaked in 6 allocation(s)."], "the leak report's lines")
    d = r.dump
    t = d["totals"]
    eq((t["live_bytes"], t["live_count"], t["unknown_frees"]), ((1 << 20) + (256 << 10), 2, 0),
       "live at exit: the primary context's and the pool's; every free known")
    eq(sorted((a["bytes"], a["kind"]) for a in d["live"]), [(256 << 10, "async"), (1 << 20, "device")],
       "live at exit, by kind")
    eq(sorted((_site_of(d, h["stack"]), h["bytes"], h["count"]) for h in d["released"]),
       [("in_context", 2 << 20, 1), ("main", 1 << 20, 1), ("main", 1 << 20, 1)],
       "the dump's released, by stack")
    eq([(_site_of(d, h["stack"]), h["bytes"], h["count"]) for h in d["released_host"]], [("main", 8192, 1)],
       "the dump's released pinned host memory, apart")
    c = run([prog, "clean"], env={"VRAMTRACE_LEAK_CHECK": "1"})
    eq((c.rc, c.out), (23, bare.out), "the context's memory freed before its destruction")
    ok("released" not in c.err and "SUMMARY: vramtrace: 1310720 byte(s) leaked in 2 allocation(s)." in c.err, c.err)
    eq(c.dump["released"], [], "nothing released")
    f = run([prog, "fail"], env={"VRAMTRACE_LEAK_CHECK": "1"})
    eq((f.rc, f.out), (23, "destroy of no context 1\n"), "a destruction that fails")
    ok("released" not in f.err and "SUMMARY: vramtrace: 1310720 byte(s) leaked in 2 allocation(s)." in f.err, f.err)
    eq((f.dump["released"], f.dump["totals"]["live_count"]), ([], 2), "nothing released, nothing taken")

LEAKY_PY = '''import ctypes
cu = ctypes.CDLL("libcuda.so.1")
cu.cuInit(0)
cu.cuMemAlloc_v2.argtypes = [ctypes.POINTER(ctypes.c_uint64), ctypes.c_size_t]
def leak_it(n):
    p = ctypes.c_uint64()
    assert cu.cuMemAlloc_v2(ctypes.byref(p), n) == 0
    return p.value
leak_it(3 << 20)
'''


@test
def inproc_python_frames_have_no_address():
    py = pythons()[0]
    with workdir("vt-inproc-") as work:
        script = os.path.join(work, "leaky.py")
        with open(script, "w") as f:
            f.write(LEAKY_PY)
        r = run([py, script], env={"VRAMTRACE_LEAK_CHECK": "1"})
    eq(r.rc, 23, "exit status with a leak")
    heading = "Direct leak of 3145728 byte(s) in 1 object(s) allocated from:"
    lines = r.err.splitlines()
    ok(heading in lines, "the leak:\n" + r.err)
    eq(lines[lines.index(heading) + 1:lines.index(heading) + 3],
       [f"    call site: leak_it {script}:7", "    kind: device memory (cuMemAlloc_v2)"],
       "the call site and the kind, then the frames")
    frames = []
    for l in lines[lines.index(heading) + 3:]:
        if not l.startswith("    #"):
            break
        frames.append(l)
    eq([int(re.match(r"    #(\d+) ", l).group(1)) for l in frames], list(range(len(frames))), "frames numbered")
    python = [l for l in frames if not re.match(r"^    #\d+ 0x[0-9a-f]+ in \S", l)]
    eq([re.sub(r"^    #\d+ ", "    #N ", l) for l in python],
       [f"    #N in leak_it {script}:7", f"    #N in <module> {script}:9"], "Python frames, LSan's form")
    ok(not any(re.match(r"^    #\d+ 0x0+ in ", l) for l in frames), "no native frame at address 0:\n" + r.err)


@test
def inproc_train_oom_builds_without_warnings():
    # The command make demo builds the example with, into a scratch file.
    p = subprocess.run(["make", "-n", "-B", "build/examples/train_oom"], cwd=ROOT, capture_output=True, text=True)
    cmd = [l for l in p.stdout.splitlines() if "examples/train_oom.c" in l]
    eq(len(cmd), 1, "one compile command:\n" + p.stdout)
    with workdir("vt-inproc-") as work:
        out = os.path.join(work, "train_oom")
        c = subprocess.run(cmd[0].replace("-o build/examples/train_oom", "-o " + out), shell=True, cwd=ROOT,
                           capture_output=True, text=True)
        eq((c.returncode, c.stdout, c.stderr), (0, "", ""), "compiling examples/train_oom.c")


@test
def inproc_one_is_singular():
    # One byte asked, one allocation live, one call site: no "1 <plural>".
    r = run([PROG, "other", "8", "failb", "1"], env={"VRAMTRACE_LIMIT": "8M"})
    other_at = f"other_alloc {SRC}:{source_line('t_inproc.c', 'static void other_alloc') + 2}"
    lines = r.err.splitlines()
    want = [
        "vramtrace:   request: 1 B (1 byte) by cudaMalloc (refused by VRAMTRACE_LIMIT) on device 0",
        "vramtrace:   tracked on device 0: 8.00 MiB live in 1 allocation at the failure; peak 8.00 MiB",
        "vramtrace: largest holders by call site (1 call site):",
        f"vramtrace:     8.00 MiB 100.0%      1 alloc   {other_at}",
        "vramtrace:   1. VRAMTRACE_LIMIT refused it: 1 B asked with 8.00 MiB live would pass the 8.00 MiB budget",
        "vramtrace:      next: a GPU with 8388608 bytes would fail here too: this step needs at least 8388609 bytes;"
        " shrink it or raise the limit",
        "vramtrace:   live at exit: 8.00 MiB in 1 allocation; peak 8.00 MiB",
    ]
    eq([next((l[:len(w)] for l in lines if l.startswith(w)), None) for w in want], want, "the report's lines")
    ok(not re.search(r"\b1 (bytes|allocations|call sites|allocs|failures)\b", r.err), "no '1 <plural>':\n" + r.err)


HOSTILE_NAMES = PY_NAMED_ALLOCS + r'''
mk("esc\x1b[31mred")(1 << 20)
mk("new\nline")(2 << 20)
mk("uni\u202eode")(3 << 20)
mk("huge\x1b[2J")(1 << 40)
'''


@test
def inproc_reports_show_names_in_their_display_form():
    """Python functions and files whose names hold an escape sequence, a
    newline and a bidirectional override, allocating (a leak each) and
    failing for lack of memory: the post-mortem, the exit summary and the
    leak report on stderr hold no control character and no override, each
    name shown escaped (\\x1b, \\x0a, \\u202e) as `vramtrace report` shows it,
    one holder row per line (before, the raw bytes reached the terminal)."""
    py = pythons()[-1]
    with workdir("vt-names-") as work:
        script = os.path.join(work, "names.py")
        with open(script, "w") as f:
            f.write(HOSTILE_NAMES)
        r = run([py, script], env={"VRAMTRACE_LEAK_CHECK": "1", "SIMGPU_CAPACITY": "1G"})
    eq(r.rc, 23, "the leaks fail the check")
    bad = [c for c in r.err if (ord(c) < 32 and c != "\n") or ord(c) == 0x7f or 0x202a <= ord(c) <= 0x202e]
    eq(bad, [], "no control character nor override on stderr")
    for shown in ("esc\\x1b[31mred /x/esc\\x1b[31mred.py:3", "new\\x0aline /x/new\\x0aline.py:3",
                  "uni\\u202eode /x/uni\\u202eode.py:3"):
        ok(f"    call site: {shown}\n" in r.err, f"the leak report's call site {shown!r}:\n{r.err[-3000:]}")
        ok(re.search(r"^vramtrace: +[\d.]+ [KMG]iB +[\d.]+% +1 alloc +" + re.escape(shown) + "$", r.err, re.M),
           f"a holder row of {shown!r} on one line")
    ok("huge\\x1b[2J /x/huge\\x1b[2J.py:3" in r.err, "the failed request's call site")



SELF_SIGNAL = r'''
import ctypes, signal, sys
cu = ctypes.CDLL("libcuda.so.1")
libc = ctypes.CDLL(None)
cu.cuInit(0)
p = ctypes.c_uint64()
cu.cuMemAlloc_v2(ctypes.byref(p), ctypes.c_size_t(3 << 20))
print("allocated", flush=True)
how, sig = sys.argv[1], int(sys.argv[2])
if sig:
    signal.signal(sig, signal.SIG_DFL)  # whatever this test was started with (nohup ignores SIGHUP)
if how == "raise_signal":
    signal.raise_signal(sig)
elif how == "raise":
    getattr(libc, "raise")(sig)
elif how == "pthread_kill":
    libc.pthread_self.restype = ctypes.c_ulong
    libc.pthread_kill.argtypes = [ctypes.c_ulong, ctypes.c_int]
    libc.pthread_kill(libc.pthread_self(), sig)
elif how == "abort":
    libc.abort()
print("not reached", flush=True)
'''


@test
def inproc_raise_and_pthread_kill_leave_the_exit_dump():
    """A process that sends itself a signal that ends it through raise()
    (C, or Python's signal.raise_signal) or pthread_kill() of its own
    thread writes its exit dump and leak report first, and still dies of
    the signal, as through kill() (the C library sends those with tgkill:
    nothing was written). abort()'s SIGABRT, a core dump's, is left alone."""
    py = pythons()[-1]
    with workdir("vt-selfsig-") as work:
        script = os.path.join(work, "selfsig.py")
        with open(script, "w") as f:
            f.write(SELF_SIGNAL)
        for how, sig in (("raise_signal", signal.SIGTERM), ("raise", signal.SIGTERM), ("raise", signal.SIGUSR1),
                         ("pthread_kill", signal.SIGTERM), ("pthread_kill", signal.SIGHUP)):
            out = os.path.join(work, f"d.{how}.{sig}.json")
            r = run([py, script, how, str(int(sig))], env={"VRAMTRACE_OUT": out, "VRAMTRACE_LEAK_CHECK": "1"})
            eq((r.rc, r.out), (-sig, "allocated\n"), f"{how} {sig}: dies of the signal as without")
            d = load_dump(out)
            eq((d["reason"], d["totals"]["live_bytes"]), ("exit", 3 << 20), f"{how} {sig}: the exit dump")
            eq(r.err.count("SUMMARY: vramtrace: 3145728 byte(s) leaked in 1 allocation(s)."), 1,
               f"{how} {sig}: the leak report\n{r.err[-1500:]}")
        out = os.path.join(work, "d.abort.json")
        r = run([py, script, "abort", "0"], env={"VRAMTRACE_OUT": out, "VRAMTRACE_LEAK_CHECK": "1"})
        eq((r.rc, r.out, os.path.exists(out), "SUMMARY" in r.err), (-signal.SIGABRT, "allocated\n", False, False),
           "abort: its state left as it is (no dump, no report)")

KEYBOARD_INTERRUPT = r'''
import ctypes
cu = ctypes.CDLL("libcuda.so.1")
cu.cuInit(0)
p = ctypes.c_uint64()
cu.cuMemAlloc_v2(ctypes.byref(p), ctypes.c_size_t(3 << 20))
print("allocated", flush=True)
raise KeyboardInterrupt
'''


@test
def inproc_keyboard_interrupt_leaves_the_exit_dump():
    """CPython ends an unhandled KeyboardInterrupt (Ctrl-C) by sending itself
    SIGINT, which runs no destructor: the exit summary and dump come first,
    the process still dies of SIGINT (status 130 in a shell), and with the
    leak check its report comes too, the status still the signal's (before:
    no summary, no dump)."""
    py = pythons()[-1]
    with workdir("vt-kbint-") as work:
        script = os.path.join(work, "ki.py")
        with open(script, "w") as f:
            f.write(KEYBOARD_INTERRUPT)
        for check in (False, True):
            out = os.path.join(work, f"d{int(check)}.json")
            r = run([py, script], env={"VRAMTRACE_OUT": out, **({"VRAMTRACE_LEAK_CHECK": "1"} if check else {})})
            eq((r.rc, r.out), (-signal.SIGINT, "allocated\n"), f"leak check {check}: dies of SIGINT as without")
            ok("KeyboardInterrupt" in r.err, r.err[-1500:])
            # The summary's first line either way, saying how it ended; the
            # rest of it only without the leak check (its report instead).
            head = [l for l in r.err.splitlines() if l.startswith("vramtrace: exit in pid ")]
            eq(len(head), 1, f"leak check {check}: the summary's first line: {r.err[-1500:]}")
            ok(head[0].endswith(", ended by SIGINT it sent itself"), f"leak check {check}: how it ended: {head[0]!r}")
            eq("vramtrace:   live at exit: " in r.err, not check, f"leak check {check}: the exit summary (else the leak report)")
            d = load_dump(out)
            eq((d["reason"], d["totals"]["live_bytes"]), ("exit", 3 << 20), f"leak check {check}: the exit dump")
            eq((d["ended_by"]["signal"], d["ended_by"]["from_pid"]), ("SIGINT", d["pid"]), "the dump's ended_by")
            eq("SUMMARY: vramtrace: 3145728 byte(s) leaked in 1 allocation(s)." in r.err, check, "the leak report")

NO_TORCH_OOM_PY = '''import ctypes
cu = ctypes.CDLL("libcuda.so.1")
cu.cuInit(0)
cu.cuMemAlloc_v2.argtypes = [ctypes.POINTER(ctypes.c_uint64), ctypes.c_size_t]
def grab(n):
    p = ctypes.c_uint64()
    return cu.cuMemAlloc_v2(ctypes.byref(p), n)
print(grab(10 << 20))
print(grab(64 << 20))
'''


SLOW_NVML_PY = '''import ctypes, time
rt = ctypes.CDLL("libcudart.so.13")
keep = []
def alloc(n):
    p = ctypes.c_void_p()
    r = rt.cudaMalloc(ctypes.byref(p), ctypes.c_size_t(n))
    if r == 0: keep.append(p)
    return r
def load_model():
    p = ctypes.c_void_p()
    rt.cudaMalloc(ctypes.byref(p), ctypes.c_size_t(1 << 30))
    keep.append(p)
load_model()
for i in range(100):
    if alloc(600 << 20): break
    time.sleep(0.01)   # its work between allocations
'''


@test
def inproc_the_failures_time_is_the_failed_calls():
    """A loop leaking 600 MiB an iteration (10 ms apart) after a model's
    1 GiB, until the device is full. At the failure vramtrace asks NVML
    for the other processes, whose first call loads and starts it (here
    1 s, SIMNVML_INIT_MS): the failure's time was taken after that, so its
    post-mortem said it came a second later than it did, and the second
    counted as the program's work after the leak's last allocation, which
    hid the leak suspect (an outside check, with a 200 ms NVML). The time
    is the failed call's now, and the leak is found."""
    py = pythons()[0]
    with workdir("vt-inproc-") as work:
        script = os.path.join(work, "slow.py")
        with open(script, "w") as f:
            f.write(SLOW_NVML_PY)
        r = run([py, script], env={"SIMGPU_CAPACITY": "8G", "SIMNVML_INIT_MS": "1000"})
    eq(r.rc, 0, r.err)
    last_alloc = max(e[0] for e in r.dump["events"] if e[1] == "alloc")
    oom = r.dump["ooms"][0]
    ok(oom["time_ns"] - last_alloc < 500_000_000,
       f"the failure's time {oom['time_ns']} is the failed call's, not a second after the last allocation at "
       f"{last_alloc}")
    g = [f["finding"] for f in oom["findings"] if f["id"] == "growing_site"]
    eq(len(g), 1, f"the leak suspect: {oom['findings']}")
    ok(g[0].startswith(f"alloc {script}:6 grew through the run from 0 B to 6.45 GiB: +6.45 GiB over 11 allocations")
       and g[0].endswith("a leak suspect"), g[0])


@test
def inproc_findings_of_a_program_without_pytorch_give_no_pytorch_advice():
    """A Python program that reaches the driver through ctypes (as numba
    does) and fails with more free than it asked for: its findings' next
    steps are the general ones, not PyTorch's (before: expandable_segments
    and torch.no_grad() for a program without PyTorch). A C program's
    growing site likewise (before: loss.item(), .detach(), backward())."""
    py = pythons()[0]
    with workdir("vt-inproc-") as work:
        script = os.path.join(work, "frag.py")
        with open(script, "w") as f:
            f.write(NO_TORCH_OOM_PY)
        r = run([py, script], env={"SIMGPU_CAPACITY": "1G", "SIMGPU_MAX_BLOCK": "32M"})
    eq((r.rc, r.out), (0, "0\n2\n"), "the program's own results: " + r.err)
    nexts = {f["id"]: f["next"] for f in r.dump["ooms"][0]["findings"]}
    # More was free than asked: the fragmentation first, most likely (it
    # came after the holder's "shrink or free it").
    eq([f["id"] for f in r.dump["ooms"][0]["findings"]], ["fragmentation", "one_site_dominates"], "the findings")
    eq(nexts["fragmentation"], "allocate the largest buffers first, or fewer and larger ones to carve up; for "
       "stream-ordered pools check the pool's release threshold", "fragmentation's next step")
    eq(nexts["one_site_dominates"], f"shrink or free what grab {script}:7 allocates before the failing call",
       "one_site_dominates' next step")
    h = run([os.path.join(T, "t_host"), "mixed-site-growth"], env={"SIMGPU_DEVICES": "2", "VRAMTRACE_LIMIT": "64M"})
    g = [f["next"] for f in h.dump["ooms"][0]["findings"] if f["id"] == "growing_site"]
    eq(len(g), 1, "one growing site")
    ok(g[0].endswith("(results appended to a list, a cache that only grows, a buffer allocated in a loop and never "
                     "freed)"), "growing_site's next step: " + g[0])
    for f in r.dump["ooms"][0]["findings"] + h.dump["ooms"][0]["findings"]:
        ok(not re.search(r"torch|PYTORCH|backward|detach", f["next"]), "no PyTorch advice: " + f["next"])
