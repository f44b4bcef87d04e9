"""Per-test GPU memory checks: the C API (include/vramtrace.h) and the
pytest plugin (python/pytest_vramtrace) on the simulated GPU.

The C API's figures are checked to the byte against tests/progs/t_api.c,
whose allocations are known. The plugin runs a small suite of tests
(clean, leaking, over the limit, raising) under pytest from PyPI, in
plain C through ctypes and in real PyTorch; outcomes and reports are
checked exactly. The plugin's tests need a Python with pytest and
pytest-xdist (`make pytest-env`; PYTEST_VENV names that environment, by
default build/torch-venv) and are skipped, with the reason printed,
without one.
"""
import re

from run_tests import *  # noqa: F401,F403


def normalized(text):
    """Frame addresses and the pid as X, frames below main dropped (the C
    library's start-up frames differ from one libc to the next)."""
    out, below_main = [], False
    for line in text.splitlines():
        line = re.sub(r"==\d+==", "==PID==", line)
        line = re.sub(r"#(\d+) 0x[0-9a-f]+ in ", r"#\1 X in ", line)
        if re.match(r"    #\d+ ", line):
            if below_main:
                continue
            below_main = " in main " in line
        else:
            below_main = False
        out.append(line)
    return out


def api_line(text):
    return source_line("t_api.c", text)


def leak(n, fn, call):
    return [f"Direct leak of {n} byte(s) in 1 object(s) allocated from:",
            f"    #0 X in {fn} tests/progs/t_api.c:{api_line('static void *' + fn + '(void)')}",
            f"    #1 X in main tests/progs/t_api.c:{api_line(call)}", ""]


def held(n, fn, call):
    return [f"{n} byte(s) in 1 object(s) allocated from:",
            f"    #0 X in {fn} tests/progs/t_api.c:{api_line('static void *' + fn + '(void)')}",
            f"    #1 X in main tests/progs/t_api.c:{api_line(call)}", ""]


@test
def c_api_marks_usage_and_reports():
    r = run([os.path.join(T, "t_api")], report="off")
    eq(r.rc, 0, "status")
    # Each report's length as returned, and as strlen saw it in the buffer,
    # is the length of the text printed after it.
    m = re.search(r"\nleaks (\d+) (\d+)\n(.*)peak (\d+) (\d+)\n(.*)cut (\d+) (\d+)\n", r.out, re.S)
    ok(m, "t_api printed its reports:\n" + r.out)
    eq((int(m[1]), int(m[2]), int(m[4]), int(m[5]), int(m[7]), int(m[8])),
       (len(m[3]), len(m[3]), len(m[6]), len(m[6]), len(m[3]), 9), "report lengths (and a report cut to 10 bytes)")
    got = normalized(re.sub(r"^(leaks|peak|cut) \d+ \d+$", r"\1 N", r.out, flags=re.M))
    want = ["active 1", "mark ok",
            "empty: 0 live 0 in 0 peak 0",
            "empty peak report 0",
            "all: 0 live 70144 in 3 peak 77824",
            "device 0: 0 live 70144 in 3 peak 77824",
            "device 1: 0 live 0 in 0 peak 0",
            "second: 0 live 512 in 1 peak 512",
            "bad device: -2 live 1 in 1 peak 1",
            "leaks N", "",
            "=================================================================",
            "==PID==ERROR: vramtrace: detected GPU memory leaks", ""]
    want += leak(65536, "keep_big", "void *d = keep_big();")
    want += leak(4096, "keep_small", "void *b = keep_small();")
    want += leak(512, "late", "void *e = late();")
    want += ["SUMMARY: vramtrace: 70144 byte(s) leaked in 3 allocation(s).",
             "peak N",
             "==PID==vramtrace: peak of GPU memory since the mark: 77824 byte(s) in 3 allocation(s), held by:", ""]
    want += held(65536, "keep_big", "void *d = keep_big();")
    want += held(8192, "scratch", "void *c = scratch();")
    want += held(4096, "keep_small", "void *b = keep_small();")
    want += ["SUMMARY: vramtrace: peak of 77824 byte(s) in 3 allocation(s) since the mark.",
             "cut N",
             "end 0 -2 -2",
             "ended: -2 live 1 in 1 peak 1",
             f"dump 0 dump.{r.dumps[0]['pid']}.after_keep_big.json",
             "freed: 0 live 0 in 0 peak 77824",
             "leaks after free 0"]
    eq(got, want, "t_api's output")
    eq(r.err, "", "nothing on stderr")
    eq([os.path.basename(d["_path"]) for d in r.dumps],
       [f"dump.{r.dumps[0]['pid']}.after_keep_big.json", f"dump.{r.dumps[0]['pid']}.json"], "the named dump and the exit dump")
    named = r.dumps[0]
    eq(named["reason"], "named", "the named dump's reason")
    eq(sorted(a["bytes"] for a in named["live"]), [512, 4096, 65536], "live at the named dump")


@test
def c_api_without_vramtrace_is_inactive():
    r = run([os.path.join(T, "t_api")], preload=False)
    eq(r.rc, 0, "status")
    want = ["active 0", "mark inactive", "empty: -1 live 0 in 0 peak 0", "empty peak report -1"]
    want += [f"{w}: -1 live 0 in 0 peak 0" for w in ("all", "device 0", "device 1", "second", "bad device")]
    want += ["leaks -1 0", "peak -1 0", "cut -1 0", "end -1 -1 -1", "ended: -1 live 0 in 0 peak 0", "dump -1 ",
             "freed: -1 live 0 in 0 peak 0", "leaks after free -1"]
    eq(r.out.splitlines(), want, "t_api's output without vramtrace")
    eq((r.err, r.dumps), ("", []), "nothing else")


@test
def c_api_threads():
    """Marks opened, read and closed while threads allocate and free, with
    TSan (tests/unit/test_marks.c: exact figures since a mark)."""
    p = subprocess.run(["setarch", os.uname().machine, "-R", os.path.join(T, "unit_marks_tsan")],
                       capture_output=True, text=True, timeout=300)
    eq((p.returncode, p.stdout, p.stderr), (0, "marks: 19 passed, 0 failed\n", ""), "unit_marks_tsan")
