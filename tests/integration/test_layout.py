"""One idea per room: the settings table behind the README, `--help` and
`vramtrace run`'s flags; the call-site label shared by the library and the
CLI."""
import json
import re
import tempfile

from run_tests import *


def help_environment():
    """The environment section of `vramtrace --help`: (name, default, meaning)."""
    p = subprocess.run([CLI, "--help"], capture_output=True, text=True)
    eq(p.returncode, 0, "--help")
    rows = []
    for line in p.stdout.split("\nenvironment:\n", 1)[1].splitlines():
        m = re.match(r"  (\S+)\s+default (\S+)\s+(.*)", line)
        if m:
            rows.append(m.groups())
    return rows


@test
def layout_readme_options_table_is_the_settings_table():
    p = subprocess.run([CLI, "--options-markdown"], capture_output=True, text=True)
    eq(p.returncode, 0, "--options-markdown")
    with open(os.path.join(ROOT, "README.md")) as f:
        section = f.read().split("\n## Options\n", 1)[1].split("\n## ", 1)[0]
    readme = [l for l in section.splitlines() if l.startswith("|")]
    eq(readme, p.stdout.splitlines(), "README's options table is vramtrace --options-markdown's, verbatim")
    table = help_environment()
    eq([re.match(r"\| `(\w+)`", l).group(1) for l in readme[2:]], [r[0] for r in table],
       "the same names as --help, in its order")


@test
def layout_run_refuses_what_the_library_would_ignore():
    for flag, value, words in (("--top", "0", "a number from 1 to 1000"),
                               ("--events", "-1", "a number from 0 to 100000000"),
                               ("--exitcode", "256", "a number from 0 to 255"),
                               ("--python", "2", "0 or 1 (true/false, yes/no, on/off)"),
                               ("--depth", "x", "a number from 1 to 256"),
                               ("--limit", "0", "a size such as 24G or 512M"),
                               ("--signal", "KILL", "a signal vramtrace can use"),
                               # glibc's own (thread cancellation, setxid): a dump
                               # handler there killed the program with signal 32
                               ("--signal", "32", "a signal vramtrace can use"),
                               ("--signal", "33", "a signal vramtrace can use"),
                               ("--signal", "65", "a signal vramtrace can use"),
                               # the library keeps the default for an empty one
                               ("--out", "", "a path or a word that is not empty"),
                               ("--report", "", "a path or a word that is not empty"),
                               # a script's unset "$SUPP": the check ran without the file
                               ("--suppressions", "", "a path or a word that is not empty"),
                               # the library would check without them (a warning, then status 23)
                               ("--suppressions", "/nonexistent/x.supp", "a readable file"),
                               ("--suppressions", "/", "a readable file")):
        p = subprocess.run([CLI, "run", flag, value, "--", "true"], capture_output=True, text=True)
        eq((p.returncode, p.stdout), (2, ""), f"run {flag} {value} refused")
        eq(p.stderr.startswith(f"vramtrace run: {flag} takes {words}"), True, f"run {flag} {value}: {p.stderr!r}")
    # A value forgotten before "--": the end of the flags, never a value
    # (`--out -- prog` wrote the dump to a file named "--").
    with workdir("vt-layout-") as work:
        for flag in ("--out", "--report", "--exitcode", "--suppressions"):
            p = subprocess.run([CLI, "run", flag, "--", "true"], capture_output=True, text=True, cwd=work)
            eq((p.returncode, p.stdout, p.stderr), (2, "", f"vramtrace run: {flag} needs a value\n"), f"run {flag} --")
        eq(os.listdir(work), [], "nothing written")
    for sig in ("USR1", "34", "64"):  # SIGRTMIN and SIGRTMAX are glibc's first and last it lends
        p = subprocess.run([CLI, "run", "--top", "1000", "--signal", sig, "--report", "off", "--out", "off",
                            "--", "true"], capture_output=True, text=True)
        eq((p.returncode, p.stderr), (0, ""), f"run with values the library takes (--signal {sig})")


@test
def layout_python_frame_without_script_named_as_in_the_post_mortem():
    with open(os.path.join(GOLDEN, "python.json")) as f:
        d = json.load(f)
    stack = d["holders"][0]["stack"]
    frames = d["stacks"][stack]["frames"]
    py = [f for f in frames if f["python"]][0]
    py["file"] = None
    py["line"] = 0
    with workdir("vt-layout-") as work:
        path = os.path.join(work, "d.json")
        with open(path, "w") as f:
            json.dump(d, f)
        p = subprocess.run([CLI, "report", path], capture_output=True, text=True)
        eq(p.returncode, 0, "report")
        want = f"{py['function']} (Python)"
        ok(f" allocs  {want}\n" in p.stdout or f" alloc   {want}\n" in p.stdout,
           f"holder row names {want!r}: {p.stdout[:3000]}")


@test
def layout_report_says_what_the_process_dropped():
    with open(os.path.join(GOLDEN, "phases.r0.json")) as f:
        d = json.load(f)
    with workdir("vt-layout-") as work:
        path = os.path.join(work, "d.json")
        for lost, line in ((3, "incomplete: 3 records dropped for lack of memory in the traced process\n"),
                           (1, "incomplete: 1 record dropped for lack of memory in the traced process\n")):
            d["totals"]["records_lost"] = lost
            with open(path, "w") as f:
                json.dump(d, f)
            p = subprocess.run([CLI, "report", path], capture_output=True, text=True)
            eq(p.returncode, 0, "report")
            eq(p.stdout.count(line), 1, f"records_lost {lost}: {line!r}")
        del d["totals"]["records_lost"]
        with open(path, "w") as f:
            json.dump(d, f)
        p = subprocess.run([CLI, "report", path], capture_output=True, text=True)
        eq((p.returncode, "incomplete:" in p.stdout), (0, False), "an older dump: nothing dropped")


@test
def layout_report_says_events_dropped_while_a_dump_read_the_history_apart():
    """A dump whose totals have events_dropped_while_read (events a dump's
    lent ring could not hold back) and no records_lost: one line of its
    own in the text and the HTML, the count in the JSON, and nothing of
    lack of memory; 1 is said in the singular."""
    with open(os.path.join(GOLDEN, "phases.r0.json")) as f:
        d = json.load(f)
    with workdir("vt-layout-") as work:
        path = os.path.join(work, "d.json")
        for n, noun in ((8928, "events"), (1, "event")):
            d["totals"]["records_lost"] = 0
            d["totals"]["events_dropped_while_read"] = n
            with open(path, "w") as f:
                json.dump(d, f)
            said = (f"incomplete: {n} {noun} dropped while a dump or report read the event history (more came "
                    "meanwhile than it holds back)")
            p = subprocess.run([CLI, "report", path], capture_output=True, text=True)
            eq(p.returncode, 0, "report")
            eq([x.strip() for x in p.stdout.splitlines() if "incomplete:" in x], [said], f"the text, {n}")
            h = subprocess.run([CLI, "report", "--format", "html", path], capture_output=True, text=True)
            eq(h.stdout.count(f'<p class="warn">{said}</p>'), 1, f"the HTML, {n}")
            ok("lack of memory" not in h.stdout, f"the HTML says no lack of memory, {n}")
            j = subprocess.run([CLI, "report", "--format", "json", path], capture_output=True, text=True)
            tot = json.loads(j.stdout)["processes"][0]["totals"]
            eq((tot.get("records_lost"), tot.get("events_dropped_while_read")), (None, n), f"the JSON, {n}")


def failure_lines(text, start, stop, prefix):
    """The lines of `text` after the first line starting with `start`, up to
    the first starting with `stop`, each without `prefix`."""
    lines = text.split("\n")
    i = next(k for k, l in enumerate(lines) if l.startswith(start)) + 1
    out = []
    while not lines[i].startswith(stop):
        ok(lines[i].startswith(prefix), f"{lines[i]!r} starts with {prefix!r}")
        out.append(lines[i][len(prefix):])
        i += 1
    return out


@test
def layout_report_tells_a_failure_as_the_post_mortem_does():
    """`vramtrace report` says what an out-of-memory failure asked for, where
    from and what the device held in the post-mortem's own lines (one
    printer); the device's counts at the failure as the dump kept them with
    it, or, from an older dump without them, only from a dump written at
    it."""
    r = run([os.path.join(T, "t_oom")], env={"SIMGPU_CAPACITY": "64M", "SIMGPU_CONTEXT": "4M"})
    library = failure_lines(r.err, "vramtrace: out of memory in pid", "vramtrace: largest holders", "vramtrace:   ")
    eq(library[0], "request: 32.00 MiB (33554432 bytes) by cudaMalloc on device 0 (vramtrace simulated GPU, "
                   "GPU-00010203-0405-0607-0809-0a0b0c0d0e0f)", "the post-mortem's request")
    eq(len(library), 7, "request, failing call, when, device, held outside, tracked, other processes")
    ok(re.fullmatch(r"when: \d+\.\d{3} s into the run, \d{4}-\d\d-\d\d \d\d:\d\d:\d\d UTC", library[2]),
       f"when, by the clock too (no steps in t_oom): {library[2]!r}")
    with workdir("vt-layout-") as work:
        d = r.dump
        for reason, older in (("oom", False), ("exit", False), ("oom", True), ("exit", True)):
            # Nothing changes in t_oom after its failure: the exit dump's
            # counts are those at it.
            d["reason"] = reason
            if older:
                for k in ("live_count", "peak_bytes", "peak_time_ns"):
                    d["ooms"][0].pop(k, None)
            path = os.path.join(work, f"{reason}.json")
            with open(path, "w") as f:
                json.dump(d, f)
            p = subprocess.run([CLI, "report", path], capture_output=True, text=True)
            eq(p.returncode, 0, "vramtrace report")
            cli_lines = failure_lines(p.stdout, "out of memory #1 at ", "  requested from:", "  ")
            want = list(library)
            if reason == "exit" and older:
                want[5] = "tracked on device 0: 48.00 MiB live at the failure"
            eq(cli_lines, want, f"the failure's lines in vramtrace report of an {reason} dump"
                                f"{' without the counts kept with the failure' if older else ''}")
