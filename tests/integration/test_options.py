"""The options table's loader: a value out of an option's range is refused
as the table says, one option of each type, with the exact warning and
the default (or the documented stand-in) in force."""
from run_tests import *


def warnings_of(r):
    return [l for l in r.err.splitlines() if "warning" in l]


@test
def options_out_of_range_each_type_warns_and_keeps_the_default():
    prog = [os.path.join(T, "t_triage"), "keep", "1M"]
    a = run(prog, preload=False)
    # A number past its range (0 to 255) keeps the default: the leak check's
    # status is 23.
    r = run(prog, report="off", env={"VRAMTRACE_LEAK_CHECK": "1", "VRAMTRACE_EXITCODE": "256"})
    eq(warnings_of(r), ["vramtrace: warning: VRAMTRACE_EXITCODE=256 is not a whole number from 0 to 255; "
                        "keeping the default"], "number")
    eq((r.out, r.rc), (a.out, 23), "number: the default exit status")
    # A size must be above 0: none, so nothing is refused.
    r = run(prog, report="off", env={"VRAMTRACE_LIMIT": "0"})
    eq(warnings_of(r), ["vramtrace: warning: VRAMTRACE_LIMIT=0 is not a size (512M, 24G, bytes); "
                        "running without a budget"], "size")
    eq((r.out, r.rc, r.dump["totals"]["failed_count"]), (a.out, a.rc, 0), "size: no budget")
    # A signal vramtrace cannot take keeps USR2.
    r = run(prog, report="off", env={"VRAMTRACE_SIGNAL": "KILL"})
    eq(warnings_of(r), ["vramtrace: warning: VRAMTRACE_SIGNAL=KILL is not a signal vramtrace can use; "
                        "keeping USR2"], "signal")
    eq((r.out, r.rc), (a.out, a.rc), "signal: the program is unaffected")
    for sig in ("32", "33", "65"):  # glibc's own, and past SIGRTMAX
        r = run(prog, report="off", env={"VRAMTRACE_SIGNAL": sig})
        eq(warnings_of(r), [f"vramtrace: warning: VRAMTRACE_SIGNAL={sig} is not a signal vramtrace can use; "
                            "keeping USR2"], f"signal {sig}")
        eq((r.out, r.rc), (a.out, a.rc), f"signal {sig}: the program is unaffected")
    # A word not among the choices (they are case-sensitive) keeps the walker.
    r = run(prog, report="off", env={"VRAMTRACE_UNWIND": "Walker"})
    eq(warnings_of(r), ["vramtrace: warning: VRAMTRACE_UNWIND=Walker is not walker, libunwind or check; "
                        "using the walker"], "choice")
    eq((r.out, r.rc), (a.out, a.rc), "choice: the program is unaffected")
    # A path longer than its field (8191 characters) writes no dump rather
    # than one at another path.
    r = run(prog, report="off", env={"VRAMTRACE_OUT": "d" * 8192})
    eq(warnings_of(r), ["vramtrace: warning: VRAMTRACE_OUT is longer than 8191 characters; writing no dump"],
       "text")
    eq((r.out, r.rc, len(r.dumps)), (a.out, a.rc, 0), "text: no dump")


@test
def budget_holds_when_threads_race_for_its_last_bytes():
    """VRAMTRACE_LIMIT=400K (100 allocations of 4096 bytes) and eight threads
    that ask for 4096 bytes fifty times each, all at once: exactly 100
    succeed in every one of 20 runs, the peak is the budget to the byte, the
    300 others are budget failures, and afterwards allocate-free loops on
    every thread all succeed (a promise never outlives its allocation).
    Before, 16 of 40 runs let 101 to 105 through (the check and the count
    were apart)."""
    prog = [os.path.join(T, "t_budget"), "8", "50"]
    for i in range(20):
        r = run(prog, report="off", env={"VRAMTRACE_LIMIT": "400K"})
        eq((r.out, r.rc, r.err), ("first 100 failed after 0\n", 0, ""), f"run {i}")
        t = r.dump["totals"]
        eq((t["peak_bytes"], t["failed_count"], t["oom_count"], t["live_bytes"]), (409600, 300, 300, 0),
           f"run {i}: peak, failures, budget failures, live at exit")
        # Each refusal's figures explain it: what was free (the budget less
        # the live bytes and other threads' allocations in flight) is less
        # than the 4096 asked. Before, a refusal while others were in
        # flight said the whole budget was free.
        eq([o["free_bytes"] for o in r.dump["ooms"] if o["free_bytes"] >= o["requested_bytes"]], [],
           f"run {i}: no refusal says the request fit")


@test
def budget_refusals_answer_as_a_gpu_that_small():
    """What a program sees under VRAMTRACE_LIMIT=1M is what a GPU of 1 MiB
    answers: the runtime's last error (cudaGetLastError) is set by a
    refused runtime allocation (it was left at 0), and arguments the API
    refuses (a NULL result pointer, a bad element size, a NULL pool, a
    device that does not exist) get the API's own error, not out of memory
    (they got 2 and were counted as failures of the budget; an outside
    check). Only the seven allocations too big are the budget's."""
    prog = [os.path.join(T, "t_limitargs")]
    want = run(prog, preload=False, env={"SIMGPU_CAPACITY": "1M"})
    eq(want.rc, 0, "on a GPU of 1 MiB")
    eq(want.out.count("\n"), 18, "eighteen calls")
    r = run(prog, report="off", env={"VRAMTRACE_LIMIT": "1M"})
    eq(r.out, want.out, "under the budget, the same answers and last errors")
    eq([(o["api"], o["requested_bytes"], o["budget"]) for o in r.dump["ooms"]],
       [("cudaMalloc", 2 << 20, True), ("cudaMallocPitch", 4 << 20, True), ("cudaMallocManaged", 2 << 20, True),
        ("cudaMallocAsync", 2 << 20, True), ("cudaMallocArray", 4 << 20, True), ("cuMemAlloc_v2", 2 << 20, True),
        ("cuArrayCreate_v2", 4 << 20, True)], "the budget's refusals, none of the API's own")
    eq((r.dump["totals"]["oom_count"], r.dump["totals"]["failed_count"]), (7, 18), "failures counted")


@test
def budget_leaves_the_apis_argument_checks_to_the_api():
    """Calls the API refuses for an argument, whatever the memory: a
    cuMemCreate size off the driver's granularity or properties without a
    type, cudaMallocFromPoolAsync of a NULL pool, managed allocations with
    flags other than the attach flags, arrays of 0 or 8 channels. Under
    VRAMTRACE_LIMIT=1M they got out of memory and a post-mortem of the
    budget's (an outside check); now the API's own answer and last error,
    as on a GPU of 1 MiB, and no failure of the budget. The same calls
    with good arguments are the budget's five refusals."""
    prog = [os.path.join(T, "t_limitinvalid")]
    want = run(prog, preload=False, env={"SIMGPU_CAPACITY": "1M"})
    eq(want.rc, 0, "on a GPU of 1 MiB")
    eq([l.rsplit(" -> ", 1)[1] for l in want.out.splitlines()],
       ["1, last error 0", "1, last error 0", "1, last error 1", "1, last error 1", "1, last error 0",
        "1, last error 0", "1, last error 0", "1, last error 0", "1, last error 0",
        "2, last error 0", "2, last error 2", "2, last error 2", "2, last error 0", "2, last error 0"],
       "nine invalid values, then five allocations too big")
    r = run(prog, report="off", env={"VRAMTRACE_LIMIT": "1M"})
    eq(r.out, want.out, "under the budget, the same answers and last errors")
    eq([(o["api"], o["requested_bytes"], o["budget"]) for o in r.dump["ooms"]],
       [("cuMemCreate", 4 * MiB, True), ("cudaMallocFromPoolAsync", 4 * MiB, True),
        ("cudaMallocManaged", 4 * MiB, True), ("cuMemAllocManaged", 4 * MiB, True),
        ("cuArrayCreate_v2", 16 * MiB, True)], "the budget's refusals, none of the API's own")
    eq((r.dump["totals"]["oom_count"], r.dump["totals"]["failed_count"], r.dump["totals"]["alloc_count"]),
       (5, 14, 0), "failures counted")


@test
def budget_refusal_of_padded_rows_answers_as_a_gpu_that_small():
    """A pitched allocation whose rows the driver padded past the budget
    (513 bytes wide, 2,000 rows: 1,026,000 bytes asked, 2,048,000 taken) is
    given back and refused after the call. cudaMallocPitch then left the
    runtime's last error at 0 and the pointer and pitch holding the address
    just freed and its pitch (an outside check); now, as on a GPU of 1 MiB,
    the last error is set and the pointer and pitch are as they were, from
    the driver's cuMemAllocPitch too. Both are the budget's refusals of all
    2,048,000 bytes."""
    prog = [os.path.join(T, "t_pitchsettle")]
    want = run(prog, preload=False, env={"SIMGPU_CAPACITY": "1M"})
    eq((want.rc, want.out),
       (0, "cudaMallocPitch 513x2000 -> 2, last error 2, pointer (nil), pitch 0\n"
           "cuMemAllocPitch 513x2000 -> 2, last error 0, pointer 0, pitch 0\n"
           "cudaMallocPitch 512x2000 -> 0, last error 0, pitch 512\n"), "on a GPU of 1 MiB")
    r = run(prog, report="off", env={"VRAMTRACE_LIMIT": "1M"})
    eq((r.rc, r.out), (want.rc, want.out), "under the budget, the same answers, last errors, pointers and pitches")
    eq([(o["api"], o["requested_bytes"], o["budget"]) for o in r.dump["ooms"]],
       [("cudaMallocPitch", 2048000, True), ("cuMemAllocPitch_v2", 2048000, True)], "the budget's refusals")
    t = r.dump["totals"]
    eq((t["alloc_count"], t["free_count"], t["oom_count"], t["live_bytes"]), (1, 0, 2, 1024000),
       "the given-back rows not counted")


@test
def options_numbers_are_digits_and_signal_names_match_numbers():
    """A number option takes digits only (" 5" and "+3" were taken by some
    options and refused by others); a signal's name is taken wherever its
    number is (INT was refused while 2 was taken), and refused with it; a
    rank variable that is not a plain number is passed over for the next
    one (RANK "1;2" was rank 1, a huge one wrapped to -1, "abc" stopped the
    search before SLURM_PROCID)."""
    prog = [os.path.join(T, "t_triage"), "keep", "1M"]
    a = run(prog, preload=False)
    for v in (" 5", "+3", "5 ", "0x5", ""):
        r = run(prog, report="off", env={"VRAMTRACE_LEAK_CHECK": "1", "VRAMTRACE_EXITCODE": v})
        eq(warnings_of(r), [f"vramtrace: warning: VRAMTRACE_EXITCODE={v} is not a whole number from 0 to 255; "
                            "keeping the default"], f"exit code {v!r}")
        eq(r.rc, 23, f"exit code {v!r}: the default status")
    # Taken: no "not a signal" warning.
    for name, number in (("USR1", "10"), ("SIGUSR2", "12")):
        for v in (name, number, "34", "64"):
            r = run(prog, report="off", env={"VRAMTRACE_SIGNAL": v})
            eq(([w for w in warnings_of(r) if "is not a signal" in w], r.out, r.rc), ([], a.out, a.rc),
               f"signal {v} taken")
    # Refused, by name and number alike: the signals that mean something
    # else to the program or its launcher (taken, TERM no longer stopped
    # the program, CHLD wrote a dump at each child's exit) and the ones
    # that cannot be caught or mean a crash.
    for v in ("INT", "2", "SIGTERM", "15", "HUP", "CHLD", "17", "WINCH", "ALRM", "PIPE", "TSTP", "CONT",
              "SEGV", "11", "ABRT", "6", "SIGKILL", "9", "RTMIN+40"):
        r = run(prog, report="off", env={"VRAMTRACE_SIGNAL": v})
        eq(warnings_of(r), [f"vramtrace: warning: VRAMTRACE_SIGNAL={v} is not a signal vramtrace can use; "
                            "keeping USR2"], f"signal {v} refused")
    for env, rank in (({"RANK": "1;2", "SLURM_PROCID": "5"}, 5), ({"RANK": "99999999999999999999"}, 0),
                      ({"RANK": "abc", "SLURM_PROCID": "5"}, 5), ({"RANK": "-1", "PMI_RANK": "7"}, 7),
                      ({"RANK": "12"}, 12), ({"RANK": "2147483647"}, 2147483647)):
        r = run(prog, report="off", env=dict(env, VRAMTRACE_OUT="d.%r.json"))
        eq([os.path.basename(d["_path"]) for d in r.dumps], [f"d.{rank}.json"], f"{env}: the dump's name")
        eq(r.dumps[0]["rank"], rank, f"{env}: the dump's rank")


@test
def options_warnings_past_ten_counted_at_exit_whatever_the_report():
    """Thirteen warnings (twelve unknown VRAMTRACE_* names and a bad depth):
    the first ten on stderr, then "3 more warnings not shown" at exit, with
    the report and the dump on and with both off (before, the count came
    only with a report to write)."""
    prog = [os.path.join(T, "t_triage"), "keep", "1M"]
    env = {f"VRAMTRACE_A{i}": "1" for i in range(1, 13)}
    env["VRAMTRACE_DEPTH"] = "x"
    for extra in ({}, {"VRAMTRACE_OUT": "off"}):
        r = run(prog, report="off", env=dict(env, **extra))
        lines = [l for l in r.err.splitlines() if l.startswith("vramtrace: ")]
        eq(len([l for l in lines if l.startswith("vramtrace: warning: ")]), 10, f"{extra}: ten warnings shown")
        eq(lines[-1], "vramtrace: 3 more warnings not shown", f"{extra}: the count, last")
        eq(r.rc, 0, f"{extra}: status")


@test
def options_switches_take_words_and_unknown_path_codes_are_said():
    """A switch takes true/false, yes/no, on/off in any case, as
    LeakSanitizer's flags do: VRAMTRACE_LEAK_CHECK=true was refused with a
    warning, and the check, off by default, did not run. A % in a path
    pattern that stands for nothing (%q, or %P for %p, which makes every
    process write one file) is kept as it is, and said once."""
    prog = [os.path.join(T, "t_triage"), "keep", "1M"]
    for v, rc in (("true", 23), ("YES", 23), ("On", 23), ("1", 23), ("false", 0), ("no", 0), ("OFF", 0), ("0", 0)):
        r = run(prog, report="off", env={"VRAMTRACE_LEAK_CHECK": v})
        eq((warnings_of(r), r.rc), ([], rc), f"VRAMTRACE_LEAK_CHECK={v}")
    # A value it cannot read still checks (off, a CI's typo passed leaks
    # unchecked; from an outside check); an empty one keeps the default.
    for v in ("2", "truthy", "y", " 1"):
        r = run(prog, report="off", env={"VRAMTRACE_LEAK_CHECK": v})
        eq((warnings_of(r), r.rc), ([f"vramtrace: warning: VRAMTRACE_LEAK_CHECK={v} is not 0 or 1 (true/false, "
                                     "yes/no, on/off); checking for leaks anyway"], 23), f"VRAMTRACE_LEAK_CHECK={v}")
    r = run(prog, report="off", env={"VRAMTRACE_LEAK_CHECK": ""})
    eq((warnings_of(r), r.rc), (["vramtrace: warning: VRAMTRACE_LEAK_CHECK= is not 0 or 1 (true/false, "
                                 "yes/no, on/off); keeping the default"], 0), "VRAMTRACE_LEAK_CHECK empty")
    # The dump signal: off by word, real-time signals by kill -l's names.
    for v, taken in (("off", True), ("None", True), ("false", True), ("RTMIN", True), ("SIGRTMIN+3", True),
                     ("RTMAX", True), ("RTMAX-2", True), ("RTMIN+31", False), ("RTMIN-1", False),
                     ("RTMAX+1", False), ("RTMINX", False)):
        r = run(prog, report="off", env={"VRAMTRACE_SIGNAL": v})
        eq([w for w in warnings_of(r) if "is not a signal" in w],
           [] if taken else [f"vramtrace: warning: VRAMTRACE_SIGNAL={v} is not a signal vramtrace can use; "
                             "keeping USR2"], f"VRAMTRACE_SIGNAL={v}")
    with workdir("vt-codes-") as work:
        for pattern, code in (("d.%P.json", "%P"), ("d.%p.%q.json", "%q"), ("d.json%", "%")):
            out = os.path.join(work, pattern)
            rep = os.path.join(work, "r.%x.txt")
            e = dict(os.environ, LD_LIBRARY_PATH=SIM, LD_PRELOAD=LIB, VRAMTRACE_OUT=out, VRAMTRACE_REPORT=rep)
            p = subprocess.run(prog, env=e, capture_output=True, text=True, timeout=60)
            eq(p.returncode, 0, pattern)
            eq([l for l in p.stderr.splitlines() if "stands for nothing" in l],
               [f"vramtrace: warning: VRAMTRACE_OUT={out} has {code}, which stands for nothing (%p pid, %h host, "
                "%r rank, %n dump number, %% a percent sign): kept as it is",
                f"vramtrace: warning: VRAMTRACE_REPORT={rep} has %x, which stands for nothing (%p pid, %h host, "
                "%r rank, %n dump number, %% a percent sign): kept as it is"], f"said once each: {pattern}")
            names = os.listdir(work)
            ok(os.path.basename(out).replace("%p", str(dump_pid(work, names))) in names or os.path.basename(out) in names,
               f"{pattern}: {names}")
            for f in names:
                os.unlink(os.path.join(work, f))


def dump_pid(work, names):
    for f in names:
        if f.endswith(".json") or f.endswith("%"):
            with open(os.path.join(work, f)) as x:
                return json.load(x)["pid"]
    return -1


@test
def budget_request_larger_than_the_budget_says_budget_not_device():
    """A request larger than VRAMTRACE_LIMIT itself: the finding named the
    budget's 1 B "the device" ("larger than the device (1 B)") of a 16 GiB
    GPU; it is the budget the request passes."""
    r = run([os.path.join(T, "t_leaks"), "clean"], env={"VRAMTRACE_LIMIT": "1"})
    lines = [l for l in r.err.splitlines() if "request alone" in l]
    eq(lines[0], "vramtrace:   2. the request alone (1.00 MiB) is larger than the budget (VRAMTRACE_LIMIT: 1 B)",
       "the first failure's finding")
    eq([l for l in r.err.splitlines() if "larger than the device" in l], [], "no device of 1 B")
