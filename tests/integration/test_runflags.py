"""`vramtrace run`'s flags are the options table's (common/options.def):
each flag as the table writes it, and nothing else."""
from run_tests import *


def run_env(*flags):
    """`vramtrace run FLAGS -- env` without PyTorch's settings in the
    environment: its status, the PYTORCH_* lines it printed, its stderr."""
    e = {k: v for k, v in os.environ.items() if not k.startswith("PYTORCH_")}
    p = subprocess.run([CLI, "run", *flags, "--", "env"], capture_output=True, text=True, env=e, timeout=60)
    return p.returncode, sorted(l for l in p.stdout.splitlines() if l.startswith("PYTORCH_")), p.stderr


@test
def runflags_tensors_flag_as_the_table_writes_it():
    eq(run_env("--tensors"), (0, ["PYTORCH_ALLOC_CONF=backend:cudaMallocAsync",
                                  "PYTORCH_CUDA_ALLOC_CONF=backend:cudaMallocAsync"], ""), "--tensors")
    eq(run_env("--tensors=nocache"), (0, ["PYTORCH_NO_CUDA_MEMORY_CACHING=1"], ""), "--tensors=nocache")
    for flag in ("--tensors=other", "--tensors[=nocache]", "--tensors="):
        eq(run_env(flag), (2, [], f"vramtrace run: unknown option {flag} (see vramtrace --help)\n"),
           f"{flag} is no flag of the table's")


def lib_free_env(tmp):
    """The environment of a `vramtrace run` without vramtrace's settings or
    a preload: the simulated GPU, TMPDIR the private folder's parent."""
    e = {k: v for k, v in os.environ.items() if not k.startswith("VRAMTRACE_") and k != "LD_PRELOAD"}
    e.update(LD_LIBRARY_PATH=SIM, TMPDIR=tmp)
    return e


@test
def runflags_report_and_out_naming_one_file_are_refused():
    """--report and --out naming one file (in any spelling, or one flag and
    the other variable): refused with one line and status 2, nothing run or
    written. Before, the report was appended to the dump (invalid JSON) and
    the out-of-memory dump renamed over the post-mortem."""
    with workdir("vt-runflags-") as work:
        env = lib_free_env(work)
        same = os.path.join(work, "same.json")
        line = f"vramtrace run: --report and --out name one file, '{same}': the report would go into the dump\n"
        for flags, extra in ((["--report", "same.json", "--out", "same.json"], {}),
                             (["--report", "./same.json", "--out", same], {}),
                             (["--report", "same.json"], {"VRAMTRACE_OUT": same})):
            p = subprocess.run([CLI, "run", *flags, "--", "touch", "ran"], env=dict(env, **extra), cwd=work,
                               capture_output=True, text=True, timeout=60)
            eq((p.returncode, p.stdout, p.stderr), (2, "", line), f"{flags} {extra}")
            eq(os.listdir(work), [], f"{flags} {extra}: nothing run or written")
        p = subprocess.run([CLI, "run", "--report", "same.txt", "--out", "same.json", "--", "touch", "ran"], env=env,
                           cwd=work, capture_output=True, text=True, timeout=60)
        eq((p.returncode, p.stderr, sorted(os.listdir(work))), (0, "", ["ran"]), "two files: run")


@test
def runflags_suppressions_from_a_pipe_reach_every_process():
    """--suppressions <(...) (refused before: "not a regular file") and
    VRAMTRACE_SUPPRESSIONS=<(...) given to vramtrace run: the pipe is read
    once, and every process of the command gets its patterns (before, the
    first process drained it and the second checked without them: another
    verdict for the same leaks); the copy is gone after the run. A pipe
    with nothing in it is refused as the flag's value."""
    with workdir("vt-runflags-") as work:
        tmp = os.path.join(work, "tmp")
        os.mkdir(tmp)
        env = lib_free_env(tmp)
        leaks = os.path.join(T, "t_leaks")
        two = f"sh -c '{leaks} >/dev/null; {leaks} >/dev/null'"
        pipe = "<(printf 'leak:leaky_step\\n')"
        for how in (f"{CLI} run --out off --leak-check --suppressions {pipe} -- {two}",
                    f"VRAMTRACE_SUPPRESSIONS={pipe} {CLI} run --out off --leak-check -- {two}"):
            p = subprocess.run(["bash", "-c", how], env=env, cwd=work, capture_output=True, text=True, timeout=60)
            eq(p.returncode, 23, f"{how}: the rest leaks: {p.stderr[-800:]}")
            eq(re.findall(r"^SUMMARY: .*$", p.stderr, re.M),
               ["SUMMARY: vramtrace: 1052672 byte(s) leaked in 2 allocation(s)."] * 2, f"{how}: both processes")
            eq(p.stderr.count("\n      8     524288 leaky_step\n"), 2, f"{how}: both suppressed the staircase")
            eq([l for l in p.stderr.splitlines() if "warning" in l or l.startswith("vramtrace run:")], [],
               f"{how}: no warning")
            eq(os.listdir(tmp), [], f"{how}: the private folder is gone")
        p = subprocess.run(["bash", "-c", f"{CLI} run --leak-check --suppressions <(true) -- {leaks}"], env=env,
                           cwd=work, capture_output=True, text=True, timeout=60)
        ok(re.fullmatch(r"vramtrace run: --suppressions takes a readable file, not '/dev/fd/\d+': "
                        r"a pipe or FIFO with nothing to read \(no writer\)\n", p.stderr), p.stderr)
        eq((p.returncode, p.stdout, os.listdir(tmp)), (2, "", []), "an empty pipe: refused")


@test
def runflags_another_copy_of_the_library_is_left_out_of_ld_preload():
    """An exported LD_PRELOAD of another libvramtrace.so (an installed copy,
    another build) and vramtrace run: the other copy is left out, with one
    line; the program runs as without vramtrace (before, the two copies
    called each other's hooks until the stack overflowed: SIGSEGV). The
    same file, and other libraries, stay."""
    with workdir("vt-runflags-") as work:
        env = lib_free_env(work)
        other = os.path.join(work, "other", "libvramtrace.so")
        os.mkdir(os.path.dirname(other))
        shutil.copy(LIB, other)
        prog = [os.path.join(T, "t_triage"), "keep", "1M"]
        a = subprocess.run(prog, env=env, capture_output=True, text=True, timeout=60)
        libm = "/lib/x86_64-linux-gnu/libm.so.6"
        for preload in (other, f"{other}:{libm}", f"{libm} {other}"):
            p = subprocess.run([CLI, "run", "--report", "off", "--out", "off", "--", *prog],
                               env=dict(env, LD_PRELOAD=preload), capture_output=True, text=True, timeout=60)
            eq((p.returncode, p.stdout, p.stderr),
               (a.returncode, a.stdout, f"vramtrace run: leaving {other} out of LD_PRELOAD: another copy of "
                                        f"libvramtrace.so (this run preloads {LIB}; two in one process crash it)\n"),
               f"LD_PRELOAD={preload}")
        for preload, want in ((f"{other}:{libm}", f"{LIB}:{libm}"), (LIB, f"{LIB}:{LIB}")):
            p = subprocess.run([CLI, "run", "--report", "off", "--out", "off", "--", "sh", "-c", "echo $LD_PRELOAD"],
                               env=dict(env, LD_PRELOAD=preload), capture_output=True, text=True, timeout=60)
            eq(p.stdout, want + "\n", f"LD_PRELOAD={preload}: what the command preloads")


@test
def runflags_take_a_value_after_an_equals_sign():
    """--out=x.json and --leak-check=1 were "unknown option" while
    --tensors=nocache took '=' (an outside check): every flag takes its value
    after '=' too, checked as the value after a space is."""
    def env_lines(*flags):
        e = {k: v for k, v in os.environ.items() if not k.startswith("VRAMTRACE_")}
        p = subprocess.run([CLI, "run", *flags, "--", "env"], capture_output=True, text=True, env=e, timeout=60)
        return p.returncode, sorted(l for l in p.stdout.splitlines()
                                    if l.startswith(("VRAMTRACE_OUT=", "VRAMTRACE_LEAK_CHECK=", "VRAMTRACE_DEPTH="))), \
            p.stderr
    with workdir("vt-runflags-") as work:
        os.chdir(work)
        try:
            eq(env_lines("--out=x.json", "--leak-check=1", "--depth=12"),
               (0, ["VRAMTRACE_DEPTH=12", "VRAMTRACE_LEAK_CHECK=1", f"VRAMTRACE_OUT={work}/x.json"], ""), "with '='")
            eq(env_lines("--out", "x.json", "--leak-check", "--depth", "12"),
               (0, ["VRAMTRACE_DEPTH=12", "VRAMTRACE_LEAK_CHECK=1", f"VRAMTRACE_OUT={work}/x.json"], ""), "the same")
            eq(env_lines("--leak-check=0")[:2], (0, ["VRAMTRACE_LEAK_CHECK=0"]), "--leak-check=0")
            rc, lines, err = env_lines("--leak-check=2")
            eq((rc, lines), (2, []), err)
            ok(err.startswith("vramtrace run: --leak-check takes 0 or 1"), err)
            rc, lines, err = env_lines("--depth=x")
            eq((rc, err.startswith("vramtrace run: --depth takes a number")), (2, True), err)
            eq(env_lines("--nosuch=1"), (2, [], "vramtrace run: unknown option --nosuch=1 (see vramtrace --help)\n"),
               "an unknown flag with a value")
        finally:
            os.chdir(ROOT)


@test
def runflags_suppressions_pipe_past_the_file_size_limit_is_a_line_not_a_signal():
    """Under `ulimit -f 0` the copy of a suppressions pipe raised SIGXFSZ,
    which killed vramtrace run before the program ran (status 153; an
    outside check): the flag's pipe is refused with one line and status 2,
    the variable's is left as it was, and the program runs."""
    with workdir("vt-runflags-") as work:
        script = (f"ulimit -S -f 0; VRAMTRACE_SUPPRESSIONS=<(echo leak:main) {CLI} run -- true; echo env $?; "
                  f"{CLI} run --suppressions <(echo leak:main) -- true; echo flag $?")
        p = subprocess.run(["bash", "-c", script], env=lib_free_env(work), cwd=work, capture_output=True, text=True,
                           timeout=60)
        eq(p.stdout, "env 0\nflag 2\n", p.stderr)
        eq(p.stderr, "vramtrace run: --suppressions takes a readable file, not '/dev/fd/63': File too large\n",
           "the flag's line")


@test
def runflags_suppressions_with_a_bad_line_are_refused_as_the_library_refuses_them():
    """--suppressions naming a file with a line that is not leak:PATTERN
    (a typo, an ASan rule) was taken: every process then warned and
    checked without the file, and a CI job stayed green (an outside
    check). Now the flag is refused with status 2 and the library's own
    line-numbered words, before the command runs; a pipe's copy is checked
    the same way. VRAMTRACE_SUPPRESSIONS from the environment is the
    library's to read: it warns and checks without it, as before."""
    with workdir("vt-runflags-") as work:
        tmp = os.path.join(work, "tmp")
        os.mkdir(tmp)
        env = lib_free_env(tmp)
        leaks = os.path.join(T, "t_leaks")
        with open(os.path.join(work, "typo.supp"), "w") as f:
            f.write("# ours\nleak:leaky_step\nfoo:bar\n")
        with open(os.path.join(work, "nul.supp"), "wb") as f:
            f.write(b"leak:a\0b\n")
        for value, line in (("typo.supp", "typo.supp:3: expected leak:PATTERN, got 'foo:bar'"),
                            (f"{work}/typo.supp", f"{work}/typo.supp:3: expected leak:PATTERN, got 'foo:bar'"),
                            ("nul.supp", "nul.supp:1: a NUL byte in the line")):
            p = subprocess.run([CLI, "run", "--leak-check", "--suppressions", value, "--", "touch", "ran"], env=env,
                               cwd=work, capture_output=True, text=True, timeout=60)
            eq((p.returncode, p.stdout, p.stderr), (2, "", f"vramtrace run: --suppressions refused: {line}\n"), value)
            ok(not os.path.exists(os.path.join(work, "ran")), f"{value}: the command did not run")
        p = subprocess.run(["bash", "-c", f"{CLI} run --leak-check --suppressions <(printf 'leak:x\\n\\nleak :y\\n') "
                                          f"-- touch ran"], env=env, cwd=work, capture_output=True, text=True,
                           timeout=60)
        ok(re.fullmatch(r"vramtrace run: --suppressions refused: /dev/fd/\d+:3: expected leak:PATTERN, "
                        r"got 'leak :y'\n", p.stderr), p.stderr)
        eq((p.returncode, p.stdout, os.path.exists(os.path.join(work, "ran")), os.listdir(tmp)),
           (2, "", False, []), "a pipe's bad line: refused, nothing run, the copy gone")
        p = subprocess.run([CLI, "run", "--out", "off", "--leak-check", "--", leaks, "clean"],
                           env=dict(env, VRAMTRACE_SUPPRESSIONS=f"{work}/typo.supp"), cwd=work, capture_output=True,
                           text=True, timeout=60)
        eq((p.returncode, p.stdout, p.stderr),
           (0, "done\n", f"vramtrace: warning: {work}/typo.supp:3: expected leak:PATTERN, got 'foo:bar'; "
                         "checking without suppressions\n"), "the variable: the library's warning")
        with open(os.path.join(work, "good.supp"), "w") as f:
            f.write("\ufeff# ours\n  leak:leaky_step \r\nleak:^load_once$\n")
        p = subprocess.run([CLI, "run", "--out", "off", "--leak-check", "--suppressions", "good.supp", "--", leaks],
                           env=env, cwd=work, capture_output=True, text=True, timeout=60)
        eq((p.returncode, p.stdout), (23, "done\n"), "a good file: taken")
        eq(p.stderr.splitlines()[-7:], ["Suppressions used:", "  count      bytes template",
                                        "      8     524288 leaky_step", "      1    1048576 ^load_once$",
                                        "-----------------------------------------------------", "",
                                        "SUMMARY: vramtrace: 4096 byte(s) leaked in 1 allocation(s)."], p.stderr)
