"""The library's post-mortem and exit summary and `vramtrace report` of the
dump the library wrote print the totals, the holders, the largest live
allocations and the growing call sites with one printer each
(common/summary.c): the same dump, the same lines."""
import re

from run_tests import *

PROG = os.path.join(T, "t_inproc")
LIB_PREFIX = "vramtrace: "


def section(lines, heading):
    """The lines of the section whose heading starts with `heading`: the
    heading and the lines after it that are indented by two spaces."""
    i = next((k for k, l in enumerate(lines) if l.startswith(heading)), None)
    ok(i is not None, f"a section {heading!r} in:\n" + "\n".join(lines))
    out = [lines[i]]
    for l in lines[i + 1:]:
        if not l.startswith("  "):
            break
        out.append(l)
    return out


def library_part(err, start, stop):
    """The library's lines from the one starting with `start` up to the one
    starting with `stop`, without the library's "vramtrace: " prefix."""
    lines = err.split("\n")
    i = next(k for k, l in enumerate(lines) if l.startswith(start))
    j = next(k for k in range(i + 1, len(lines)) if lines[k].startswith(stop))
    for l in lines[i:j]:
        ok(l.startswith(LIB_PREFIX), f"{l!r} is the library's")
    return [l[len(LIB_PREFIX):] for l in lines[i:j]]


def without_stacks(lines):
    """A holders table of vramtrace report without the frames it shows
    under each row (the library's post-mortem names the call site only)."""
    return [l for l in lines if not re.match(r"^      (#\d+ |\(no stack\))", l)]


def cuda_line(func):
    """`func`'s cudaMalloc line in tests/progs/t_inproc.c: its call site's
    label is "FUNC tests/progs/t_inproc.c:LINE"."""
    with open(os.path.join(ROOT, "tests", "progs", "t_inproc.c")) as f:
        lines = f.read().split("\n")
    start = next(i for i, l in enumerate(lines) if l.startswith(f"static void {func}("))
    return 1 + next(i for i in range(start, len(lines)) if "cudaMalloc(" in lines[i])


def report_lines(d, *args):
    """`vramtrace report` of dump d, its lines."""
    with workdir("vt-printonce-") as work:
        path = os.path.join(work, "d.json")
        with open(path, "w") as f:
            json.dump(d, f)
        p = subprocess.run([CLI, "report", path, *args], capture_output=True, text=True)
    eq((p.returncode, p.stderr), (0, ""), "vramtrace report")
    return p.stdout.split("\n")


@test
def printonce_report_of_a_dump_prints_the_library_sections():
    # Three call sites of distinct sizes, two of them growing, and a
    # failure at the end, after which nothing changes: the post-mortem's
    # holders and live allocations are those of the exit dump.
    r = run([PROG, "gap", "5", "routes", "20", "grow", "3", "other", "8", "fail", "1000"],
            env={"SIMGPU_CAPACITY": "1G", "VRAMTRACE_TOP": "6"})
    eq((r.rc, r.out), (0, "done\n"), "t_inproc runs as without vramtrace")
    d = r.dump
    eq(d["reason"], "exit", "the exit dump")
    oom = library_part(r.err, "vramtrace: out of memory in pid", "vramtrace: what the numbers say")
    exit_ = library_part(r.err, "vramtrace: exit in pid", "vramtrace: dump: ")
    cli = report_lines(d, "--top", "6")

    holders = section(oom, "largest holders by call site")
    eq(len(holders), 4, "the post-mortem's heading and three call sites")
    eq(holders[0], "largest holders by call site (3 call sites):", "the post-mortem's heading")
    eq(without_stacks(section(cli, "largest holders by call site")), holders,
       "the holders table: the post-mortem's and vramtrace report's")
    eq(section(exit_, "largest holders by call site"), holders, "the exit summary's holders table")
    ok(len(section(cli, "largest holders by call site")) > len(holders), "vramtrace report shows the stacks")

    live = section(oom, "largest live allocations")
    eq(live[0], "largest live allocations (24 live):", "the post-mortem's live table")
    eq(len(live), 7, "the heading and VRAMTRACE_TOP rows")
    eq(section(cli, "largest live allocations"), live, "the live table: the post-mortem's and vramtrace report's")

    totals = exit_[1:3]
    ok(totals[0].startswith("  live at exit: 40.00 MiB in 24 allocations; peak 40.00 MiB at "), totals[0])
    eq(totals[1], "  allocations 24, frees 0, failed 1 (out of memory 1)", "the exit summary's counts")
    eq(section(cli, "totals:")[1:], totals, "the totals: the exit summary's and vramtrace report's")

    devices = section(exit_, "devices:")
    eq(len(devices), 3, "the heading, the columns' line and device 0")
    ok(devices[2].startswith("  0   vramtrace simulated GPU         1.00 GiB   40.00 MiB   40.00 MiB "), devices[2])
    eq(section(cli, "devices:"), devices, "the devices: the exit summary's and vramtrace report's")

    growing = section(exit_, "growing call site")
    eq(len(growing), 2, "the heading and one growing call site")
    eq(section(cli, "growing call site"), growing, "the growing sites: the exit summary's and vramtrace report's")


@test
def printonce_equal_bytes_in_one_order():
    # Three call sites of 4 MiB each: other_alloc first (the lowest stack),
    # grow_step with one allocation as other_alloc, site_alloc with four.
    # Both sides order equal bytes by the label, whatever the stacks' ids
    # or the counts.
    r = run([PROG, "other", "4", "grow", "1", "routes", "4", "fail", "100000"], env={"VRAMTRACE_TOP": "6"})
    eq((r.rc, r.out), (0, "done\n"), "t_inproc runs as without vramtrace")
    src = "tests/progs/t_inproc.c"
    want = ["largest holders by call site (3 call sites):",
            f"    4.00 MiB  33.3%      1 alloc   grow_step {src}:{cuda_line('grow_step')}",
            f"    4.00 MiB  33.3%      1 alloc   other_alloc {src}:{cuda_line('other_alloc')}",
            f"    4.00 MiB  33.3%      4 allocs  site_alloc {src}:{cuda_line('site_alloc')}"]
    oom = library_part(r.err, "vramtrace: out of memory in pid", "vramtrace: what the numbers say")
    exit_ = library_part(r.err, "vramtrace: exit in pid", "vramtrace: dump: ")
    eq(section(oom, "largest holders by call site"), want, "the post-mortem's holders, in the one order")
    eq(section(exit_, "largest holders by call site"), want, "the exit summary's holders, in the one order")
    cli = report_lines(r.dump, "--top", "6")
    eq(without_stacks(section(cli, "largest holders by call site")), want, "vramtrace report's holders")


@test
def printonce_nothing_live_says_so_on_both_sides():
    # One failed request and nothing else: no device memory is live at the
    # failure or at exit, and each table says so in the same line.
    r = run([PROG, "fail", "100000"])
    eq((r.rc, r.out), (0, "done\n"), "t_inproc runs as without vramtrace")
    want = ["largest holders by call site: none (no device memory is live)"]
    oom = library_part(r.err, "vramtrace: out of memory in pid", "vramtrace: what the numbers say")
    exit_ = library_part(r.err, "vramtrace: exit in pid", "vramtrace: dump: ")
    eq([l for l in oom if l.startswith("largest holders")], want, "the post-mortem's holders")
    eq([l for l in exit_ if l.startswith("largest holders")], want, "the exit summary's holders")
    cli = report_lines(r.dump)
    eq([l for l in cli if "holders" in l or "no device memory" in l], want, "vramtrace report's holders")
    peak = report_lines(r.dump, "--at", "peak")
    eq([l for l in peak if "holders" in l or "no device memory" in l],
       ["largest holders at peak by call site: none (no device memory was live then)"],
       "vramtrace report --at peak")


@test
def holders_left_out_by_top_are_said():
    """With fewer rows than call sites (--top 1 of t_leaks' three), the
    holders table says what it left out, in the exit summary and in
    vramtrace report alike (before, the rows' percentages added up to
    66.5% with no word why; vramtrace diff already said it)."""
    r = run([os.path.join(T, "t_leaks")], env={"VRAMTRACE_TOP": "1"})
    line = source_line("t_leaks.c", "cudaMalloc(&p, 1 << 20)")
    want = ["largest holders by call site (3 call sites):",
            f"    1.00 MiB  66.5%      1 alloc   load_once tests/progs/t_leaks.c:{line}",
            "  (2 more call sites, 516.00 KiB, 33.5% together, not shown: --top 1)"]
    got = [l[len("vramtrace: "):] for l in r.err.splitlines() if l.startswith("vramtrace: ")]
    at = got.index(want[0])
    eq(got[at:at + 3], want, "the exit summary's holders")
    cli = report_lines(r.dump, "--top", "1")
    at = cli.index(want[0])
    eq(cli[at:at + 2], want[:2], "vramtrace report's first row")
    eq([l for l in cli[at + 2:] if l.startswith("  (") and "not shown" in l][:1], [want[2]],
       "vramtrace report says the rows left out")
