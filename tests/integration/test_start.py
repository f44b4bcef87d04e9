"""What a process pays for the preload before its first GPU call: no system
call of the library's own, options as the process started, CUDA names as
without vramtrace in a program that names none."""
from run_tests import *

STRACE = shutil.which("strace") or "/usr/bin/strace"


def syscalls(lib, env=None, prog="/bin/true"):
    """The system calls `prog` (/bin/true) makes after its exec with `lib`
    preloaded, by name, in order."""
    e = {k: v for k, v in os.environ.items() if not k.startswith("VRAMTRACE_") and k != "LD_PRELOAD"}
    e.update(env or {})
    p = subprocess.run([STRACE, "-f", "-qq", "-o", "/dev/stdout", "/usr/bin/env", f"LD_PRELOAD={lib}", prog],
                       env=e, capture_output=True, text=True, timeout=60)
    lines = p.stdout.splitlines()
    at = max(i for i, l in enumerate(lines) if f'execve("{prog}"' in l)
    return [re.match(r"(?:\d+\s+)?(\w+)\(", l).group(1) for l in lines[at + 1:] if re.match(r"(?:\d+\s+)?\w+\(", l)]


@test_if(STRACE, "no strace (tests/deps.sh installs it)")
def start_makes_no_system_call_but_the_clock_and_the_descriptor_tables_growth():
    # The floor: an empty library the loader maps the same way (four
    # segments and a zeroed area). vramtrace adds to it only the start's
    # time (two clock_gettime system calls: a first read through the vDSO
    # took two page faults, 14,000 cycles against 3,300, tracker/clock.c),
    # the working folder it started in (relative dump and report paths are
    # taken from it) and, in a process that a GPU may come into, the growth
    # of the descriptor table past where it keeps its descriptors, while
    # the process has one thread (an O_PATH open of "/", its dup at 716,
    # both closed: common/fdkeep.h, vt_fd_reserve; grown later in a process
    # with threads, it waited 5 to 20 ms for the kernel; a dup of stdin,
    # closed, dropped the program's record locks on it): no mprotect of its
    # symbols, no mapping, no lock, no signal mask. /bin/true imports
    # neither a CUDA library nor dlopen, dlmopen, dlsym or dlvsym: it can
    # load no library after its start (interpose/canload.h), and its table
    # is left alone (four system calls, 6 us, at every such start);
    # t_start_canload imports dlopen.
    empty = os.path.join(T, "libt_start_empty.so")
    canload = os.path.join(T, "t_start_canload")
    for env in (None, {"VRAMTRACE_OUT": "off", "VRAMTRACE_REPORT": "off"}, {"LD_BIND_NOW": "1"}):
        floor = syscalls(empty, env)
        eq(floor[-1], "exit_group", "the floor ends with the exit")
        eq(syscalls(LIB, env), floor[:-1] + ["clock_gettime", "clock_gettime", "getcwd", "exit_group"],
           f"system calls of /bin/true under vramtrace ({env})")
        floor = syscalls(empty, env, canload)
        eq(floor[-1], "exit_group", "the floor ends with the exit")
        eq(syscalls(LIB, env, canload), floor[:-1] + ["clock_gettime", "clock_gettime", "openat", "fcntl", "close",
                                                      "close", "getcwd", "exit_group"],
           f"system calls of a program that can load a library, under vramtrace ({env})")
    e = {k: v for k, v in os.environ.items() if not k.startswith("VRAMTRACE_") and k != "LD_PRELOAD"}
    def fdsize(env):
        p = subprocess.run([canload, "fdsize"], env=env, capture_output=True, text=True, timeout=60)
        eq(p.returncode, 0, p.stderr)
        return int(p.stdout.split()[1])
    ok(fdsize(dict(e, LD_PRELOAD=LIB)) >= 1024, "the table grown at the start under vramtrace")
    ok(fdsize(e) < 1024, "the table not that large without it (the check can fail)")


@test
def start_writes_one_page_of_its_own():
    # The pages of the library's own data a process has written (or read
    # as zeros) by the time its main runs, each a page fault of every
    # process an LD_PRELOAD reaches (interpose/startpage.h): the one page
    # of data the loader relocates (the dynamic section, the GOT and the
    # few pointer tables left: the hooks' names and wrappers, the exports'
    # resolvers, the signals' names and the options' substitutes are kept
    # as offsets or in place, interpose/hooklist.h), the page the loader
    # clears at .data's end (which holds .data, less 4 KiB of a folder's
    # name that had been initialised), and the start's own page (its clock,
    # whether vramtrace is in front of the C library, the kept variables
    # and the working folder). Before: 6, three pages of pointer tables and
    # .data's first page; before that 8, the front-check's flag, the
    # working folder and the clock on pages of their own. The floor, an
    # empty library with a zeroed area: 2 (its one page of relocated data,
    # the page the loader clears).
    prog = os.path.join(T, "t_start_pages")
    base = {k: v for k, v in os.environ.items() if not k.startswith("VRAMTRACE_") and k != "LD_PRELOAD"}
    def pages(lib, extra):
        p = subprocess.run([prog, os.path.basename(lib)], env=dict(base, LD_PRELOAD=lib, **extra),
                           capture_output=True, text=True, timeout=60)
        eq(p.returncode, 0, f"t_start_pages ran: {p.stderr}")
        return int(p.stdout.split()[1])
    eq(pages(os.path.join(T, "libt_start_empty.so"), {}), 2, "the floor's pages")
    for extra in ({}, {"VRAMTRACE_OUT": "off", "VRAMTRACE_REPORT": "off"},
                  {"VRAMTRACE_OUT": "/tmp/vt-" + "x" * 200 + ".json", "VRAMTRACE_DEPTH": "8", "LD_BIND_NOW": "1"}):
        eq(pages(LIB, extra), 3, f"pages written by the start under vramtrace ({sorted(extra)})")


@test
def start_options_are_those_the_process_started_with():
    with workdir("vt-start-") as d:
        other = os.path.join(d, "other.json")
        r = run([os.path.join(T, "t_start_env"), other], report="stderr", env={"VRAMTRACE_DEPTH": "3"})
        eq((r.rc, r.out), (0, "allocated\n"), "status and output")
        eq(os.path.exists(other), False, "no dump where the program pointed VRAMTRACE_OUT later")
        eq([a["bytes"] for a in r.dump["live"]], [1 * MiB], "the dump where it started pointing")
        eq(len(frames(r.dump, r.dump["live"][0]["stack"])), 3, "VRAMTRACE_DEPTH as at start, though unset since")
        ok("live at exit: 1.00 MiB in 1 allocation" in r.err, f"the summary on stderr as at start:\n{r.err[-600:]}")


@test
def start_cuda_names_invisible_in_a_program_that_names_none():
    weak = os.path.join(T, "libt_start_weak.so")
    for env in (None, {"LD_BIND_NOW": "1"}):
        r = same_as_without(["./t_start_quiet", weak], cwd=T, env=env)
        eq(r.out, "dlsym(RTLD_DEFAULT, cuMemAlloc_v2) NULL, dlerror ./t_start_quiet: undefined symbol: cuMemAlloc_v2\n"
                  "dlsym(self, cudaMalloc) NULL, dlerror ./t_start_quiet: undefined symbol: cudaMalloc\n"
                  "cudaMalloc: CPU path, cuMemAlloc_v2: CPU path\n", f"look-ups and weak references ({env})")
        eq((r.rc, r.dumps), (0, []), "status, no dump")


@test
def start_keeps_the_programs_record_locks():
    """A program that took a POSIX record lock on its stdin and exec'd a
    program under vramtrace still holds it (locks survive exec; the start's
    dup of stdin, closed, dropped them: any close of a file's descriptor
    does)."""
    with workdir("vt-start-lock-") as d:
        lockfile = os.path.join(d, "lock")
        open(lockfile, "w").close()
        check = ("import fcntl, os, sys\n"
                 "pid = os.fork()\n"
                 "if pid == 0:\n"
                 "    fd = os.open(sys.argv[1], os.O_RDWR)\n"
                 "    try:\n"
                 "        fcntl.lockf(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)\n"
                 "        print('free')\n"
                 "    except OSError:\n"
                 "        print('held')\n"
                 "    os._exit(0)\n"
                 "os.waitpid(pid, 0)\n")
        take = ("import fcntl, os, sys\n"
                "fd = os.open(sys.argv[1], os.O_RDWR)\n"
                "os.dup2(fd, 0)\n"
                "os.close(fd)\n"
                "fcntl.lockf(0, fcntl.LOCK_EX)\n"
                "os.execve(sys.executable, [sys.executable, '-c', sys.argv[2], sys.argv[1]], dict(os.environ, "
                "LD_PRELOAD=sys.argv[3]))\n")
        e = {k: v for k, v in os.environ.items() if not k.startswith("VRAMTRACE_") and k != "LD_PRELOAD"}
        for lib, want in (("", "held\n"), (LIB, "held\n")):
            p = subprocess.run([sys.executable, "-c", take, lockfile, check, lib], env=e, capture_output=True,
                               text=True, timeout=60)
            eq((p.returncode, p.stdout, p.stderr), (0, want, ""), f"the lock after the exec ({lib or 'no preload'})")

