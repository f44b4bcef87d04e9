"""How each command reads its flags as typed: the mistakes a script makes
(a switch given a value after a space, an unset variable as a value, a flag
given twice, flags that cannot go together) told, not run."""
import signal
import socket

from run_tests import *

GOLD = os.path.join(ROOT, "tests", "golden")


def run_in(work, args, env=None, timeout=60):
    """`vramtrace ARGS` in work without vramtrace's settings, on the
    simulated GPU: (status, stdout, stderr), status None when it was still
    running after `timeout` seconds (then killed; its output dropped)."""
    e = {k: v for k, v in os.environ.items() if not k.startswith("VRAMTRACE_") and k != "LD_PRELOAD"}
    e.update(LD_LIBRARY_PATH=SIM, **(env or {}))
    try:
        p = subprocess.run([CLI, *args], env=e, cwd=work, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                           stderr=subprocess.PIPE, text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        return None, "", ""
    return p.returncode, p.stdout, p.stderr


@test
def flagforms_a_word_before_the_dashes_is_refused_not_run():
    """`vramtrace run --leak-check yes -- CMD` ran `yes` with "-- CMD" for
    its arguments, for ever (a CI job hung, its log flooded), and
    `--tensors nocache -- CMD` tried to run `nocache`: a switch takes its
    value after '=' only, and a word before the "--" was taken as the
    command. Now a value the switch takes, right after it and before a
    "--", is refused with status 2, nothing run; any other word there is
    the command, whose own arguments may hold a "--" (`vramtrace run
    python3 x.py -- a` was refused for a while: an outside check)."""
    with workdir("vt-flagforms-") as work:
        for args, line in (
                (["--leak-check", "yes"], "vramtrace run: 'yes' before '--': --leak-check takes no value after a "
                                          "space (did you mean --leak-check=yes?)\n"),
                (["--out", "off", "--leak-check", "0"], "vramtrace run: '0' before '--': --leak-check takes no "
                                                        "value after a space (did you mean --leak-check=0?)\n"),
                (["--tensors", "nocache"], "vramtrace run: 'nocache' before '--': --tensors takes no value after a "
                                           "space (did you mean --tensors=nocache?)\n")):
            # A command that never ends would be `yes` run: its output is
            # dropped, and it is ended with its process group (under
            # --leak-check vramtrace stays its parent).
            p = subprocess.Popen([CLI, "run", *args, "--", "touch", "ran"], cwd=work, stdin=subprocess.DEVNULL,
                                 stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
                                 env=dict(os.environ, LD_LIBRARY_PATH=SIM), start_new_session=True)
            try:
                got = (p.wait(timeout=10), p.stderr.read())
            except subprocess.TimeoutExpired:
                os.killpg(p.pid, signal.SIGKILL)
                p.wait()
                got = (None, "still running after 10 s")
            p.stderr.close()
            eq(got, (2, line), f"run {args} -- touch ran")
            eq(os.listdir(work), [], f"run {args}: nothing ran")
        # The forms that were and are right: '=', and a command without "--"
        # (its own "--" after it is its argument).
        eq(run_in(work, ["run", "--out", "off", "--leak-check=yes", "--", "touch", "a"]), (0, "", ""), "--leak-check=yes")
        eq(run_in(work, ["run", "--out", "off", "--leak-check", "--", "touch", "b"]), (0, "", ""), "--leak-check --")
        eq(run_in(work, ["run", "--out", "off", "touch", "c"]), (0, "", ""), "no '--'")
        eq(run_in(work, ["run", "--out", "off", "--", "touch", "d", "--", "e"]), (0, "", ""), "'--' after '--'")
        # A command without vramtrace's "--" whose own arguments hold one.
        eq(run_in(work, ["run", "--out", "off", "touch", "f", "--", "g"]), (0, "", ""), "the command's own '--'")
        eq(run_in(work, ["run", "--out", "off", "--leak-check", "touch", "h", "--", "i"]), (0, "", ""),
           "a command after a switch, its own '--'")
        eq(sorted(os.listdir(work)), ["a", "b", "c", "d", "e", "f", "g", "h", "i"], "each command ran")


def pytorch_lines(*flags, env=None):
    """`vramtrace run FLAGS -- env` with PyTorch's settings as `env` gives
    them: its status, the PYTORCH_* lines it printed, its stderr."""
    e = {k: v for k, v in os.environ.items() if not k.startswith(("PYTORCH_", "VRAMTRACE_"))}
    e.update(env or {})
    p = subprocess.run([CLI, "run", *flags, "--", "env"], capture_output=True, text=True, env=e, timeout=60)
    return p.returncode, sorted(l for l in p.stdout.splitlines() if l.startswith("PYTORCH_")), p.stderr


@test
def flagforms_tensors_last_one_wins_and_nocache_takes_the_backends_place():
    """--tensors --tensors=nocache set both, and PyTorch, which reads
    PYTORCH_NO_CUDA_MEMORY_CACHING only for its own allocator, kept
    cudaMallocAsync: nocache did nothing, silently; so with an exported
    backend:cudaMallocAsync. Now the last of the two flags wins, and nocache
    takes that backend out of the exported settings (as --tensors takes the
    place of the program's backend), with one line."""
    asyn = ["PYTORCH_ALLOC_CONF=backend:cudaMallocAsync", "PYTORCH_CUDA_ALLOC_CONF=backend:cudaMallocAsync"]
    nocache = "PYTORCH_NO_CUDA_MEMORY_CACHING=1"
    eq(pytorch_lines("--tensors", "--tensors=nocache"), (0, [nocache], ""), "--tensors --tensors=nocache")
    eq(pytorch_lines("--tensors=nocache", "--tensors"), (0, asyn, ""), "--tensors=nocache --tensors")
    line = ("vramtrace run: --tensors=nocache: backend:cudaMallocAsync left out of {} (PyTorch ignores "
            "PYTORCH_NO_CUDA_MEMORY_CACHING under it): one cudaMalloc per tensor\n")
    eq(pytorch_lines("--tensors=nocache",
                     env={"PYTORCH_CUDA_ALLOC_CONF": "expandable_segments:True,backend:cudaMallocAsync"}),
       (0, ["PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True", nocache], line.format("PYTORCH_CUDA_ALLOC_CONF")),
       "exported with another setting")
    eq(pytorch_lines("--tensors=nocache", env={"PYTORCH_CUDA_ALLOC_CONF": "backend:cudaMallocAsync",
                                               "PYTORCH_ALLOC_CONF": "backend:cudaMallocAsync"}),
       (0, [nocache], line.format("PYTORCH_CUDA_ALLOC_CONF and PYTORCH_ALLOC_CONF")), "exported in both")
    eq(pytorch_lines("--tensors=nocache", env={"PYTORCH_ALLOC_CONF": "backend:native"}),
       (0, ["PYTORCH_ALLOC_CONF=backend:native", nocache], ""), "PyTorch's own allocator kept, no line")


@test
def flagforms_an_empty_suppressions_value_is_refused_or_warned():
    """`--suppressions "$SUPP"` with SUPP unset was taken, and the check ran
    without suppressions unnoticed, while an empty --out or --report is
    refused; an empty VRAMTRACE_SUPPRESSIONS said nothing while an empty
    VRAMTRACE_OUT warns. Now the flag's empty value is refused with status
    2 (so is any flag's) and the empty variable warns."""
    with workdir("vt-flagforms-") as work:
        for args in (["--suppressions", ""], ["--suppressions="], ["--leak-check", "--suppressions", ""]):
            eq(run_in(work, ["run", *args, "--", "touch", "ran"]),
               (2, "", "vramtrace run: --suppressions takes a path or a word that is not empty, not ''\n"), f"{args}")
        eq(run_in(work, ["run", "--library=", "--", "touch", "ran"]),
           (2, "", "vramtrace run: --library takes a path or a word that is not empty, not ''\n"), "--library=")
        eq(os.listdir(work), [], "nothing ran")
    r = run([os.path.join(T, "t_leaks")], report="off",
            env={"VRAMTRACE_LEAK_CHECK": "1", "VRAMTRACE_SUPPRESSIONS": "", "VRAMTRACE_OUT": "off"})
    eq(r.rc, 23, "the leaks fail the run")
    eq([l for l in r.err.splitlines() if "warning" in l],
       ["vramtrace: warning: VRAMTRACE_SUPPRESSIONS is empty; checking without suppressions"], "one warning")
    eq(re.findall(r"^SUMMARY: .*$", r.err, re.M),
       ["SUMMARY: vramtrace: 1576960 byte(s) leaked in 10 allocation(s)."], "every leak reported")


@test
def flagforms_every_command_takes_a_value_after_an_equals_sign():
    """`--top=5` worked for `run` and was "unknown option" for report,
    diff, top and metrics. Now every command takes `--OPT=VALUE` as
    `--OPT VALUE`, checked alike; a switch's `--once=1` is still unknown."""
    r0, r1 = os.path.join(GOLD, "phases.r0.json"), os.path.join(GOLD, "phases.r1.json")
    with workdir("vt-flagforms-") as work:
        for spaced, joined in ((["report", r0, "--format", "json", "--top", "3", "--at", "peak"],
                                ["report", r0, "--format=json", "--top=3", "--at=peak"]),
                               (["report", r0, "--format", "folded", "--folded-root", "none"],
                                ["report", r0, "--format=folded", "--folded-root=none"]),
                               (["diff", r0, r1, "--top", "1", "--fail-over", "1G"],
                                ["diff", r0, r1, "--top=1", "--fail-over=1G"])):
            want = run_in(work, spaced)
            eq(want[0], 0, f"{spaced}: {want[2]}")
            eq(run_in(work, joined), want, f"{joined} as {spaced}")
        eq(run_in(work, ["report", r0, "--output=r.txt"])[:2], (0, ""), "--output=FILE")
        with open(os.path.join(work, "r.txt")) as f:
            eq(f.read(), run_in(work, ["report", r0])[1], "the report in r.txt")
        eq(run_in(work, ["report", r0, "--top=0"]),
           (2, "", "vramtrace report: --top takes a number from 1 to 100000, not '0' (see vramtrace report --help)\n"),
           "--top=0 checked as --top 0")
        eq(run_in(work, ["diff", r0, r1, "--top=0"]),
           (2, "", "vramtrace diff: --top takes a number from 1 to 100000, not '0'\n"), "diff --top=0")
        prom = os.path.join(work, "prom")
        os.mkdir(prom)
        eq(run_in(work, ["metrics", f"--textfile={prom}", "--top=3", "--interval=1", "--once"]), (0, "", ""),
           "metrics --textfile=DIR")
        eq(os.listdir(prom), ["vramtrace.prom"], "written")
        eq(run_in(work, ["metrics", "--top=33"]), (2, "", "vramtrace metrics: --top takes a number from 0 to 32\n"),
           "metrics --top=33")
        rc, out, err = run_in(work, ["top", "--once", "--sort=pid", "--interval=2"])
        eq((rc, err, out.splitlines()[0].endswith(" - sort: pid")), (0, "", True), f"top --sort=pid: {out[:200]}")
        eq(run_in(work, ["top", "--once=1"]),
           (2, "", "vramtrace top: unknown argument '--once=1' (see vramtrace top --help)\n"), "a switch's value")


@test
def flagforms_metrics_once_with_listen_is_refused():
    """`vramtrace metrics --listen PORT --once` took --once and served until
    killed. A server answers scrapes until it is stopped: --once with
    --listen is refused with status 2, as --textfile with --listen is."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = str(s.getsockname()[1])
    with workdir("vt-flagforms-") as work:
        line = ("vramtrace metrics: --once and --listen: --listen serves until stopped; --once writes once "
                "(standard output or --textfile)\n")
        for args in (["--listen", port, "--once"], ["--once", f"--listen=127.0.0.1:{port}"]):
            eq(run_in(work, ["metrics", *args], timeout=10), (2, "", line), f"metrics {args}")
