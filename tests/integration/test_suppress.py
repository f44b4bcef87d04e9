"""Which suppression a leak is credited to, as LeakSanitizer credits it
(compiler-rt's lsan_common.cpp): the stack's return addresses innermost
first; at each, the first rule in the file that matches the module, else,
frame by frame (an inlined function's first), the first that matches the
function, else the first that matches the file. "Suppressions used" lists
each rule with what it suppressed, so that a CI job that prunes the rules
it does not list keeps the ones that work."""
from run_tests import *

LEAKS = os.path.join(T, "t_leaks")   # load_once 1 MiB, leaky_step 8 x 64 KiB, third_party_init 4 KiB, all from main


def used(err):
    """The rows of the "Suppressions used" table."""
    if "Suppressions used:\n" not in err:
        return []
    table = err.split("Suppressions used:\n  count      bytes template\n")[1]
    return table.split("-----")[0].splitlines()


def suppressed_run(work, rules, prog=LEAKS, env=None):
    sup = os.path.join(work, "s.supp")
    with open(sup, "w") as f:
        f.write("".join(f"leak:{r}\n" for r in rules))
    e = {k: v for k, v in os.environ.items()
         if not k.startswith(("VRAMTRACE_", "SIMGPU_")) and k not in ("LD_PRELOAD", "LD_LIBRARY_PATH")}
    e.update(LD_LIBRARY_PATH=SIM, LD_PRELOAD=LIB, VRAMTRACE_OUT="off", VRAMTRACE_LEAK_CHECK="1",
             VRAMTRACE_SUPPRESSIONS=sup, **(env or {}))
    return subprocess.run([prog], env=e, cwd=work, capture_output=True, text=True, timeout=120)


@test
def suppressions_credit_the_innermost_frames_rule():
    """A broad rule above a specific one took every leak it could match at
    any frame, and the specific rule was listed as never used (an outside
    check: `leak:^main` above `leak:leak_pitch`). Now the innermost frame
    decides, rule order only among the rules that match that frame, and
    the table is in the file's order."""
    with workdir("vt-suppress-") as work:
        cases = [
            # main is the outer frame of all three: the inner frames' rule wins where there is one.
            (["^main", "leaky_step"], ["      2    1052672 ^main", "      8     524288 leaky_step"]),
            (["leaky_step", "^main"], ["      8     524288 leaky_step", "      2    1052672 ^main"]),
            # At one frame the module is tried first, whatever the rules' order ...
            (["leaky_step", "tests/t_leaks$"], ["     10    1576960 tests/t_leaks$"]),
            # ... then the function, then the file.
            (["t_leaks.c", "leaky_step"], ["      2    1052672 t_leaks.c", "      8     524288 leaky_step"]),
            (["load_once", "third_party_init", "leaky_step", "^main"],
             ["      1    1048576 load_once", "      1       4096 third_party_init", "      8     524288 leaky_step"]),
        ]
        for rules, want in cases:
            p = suppressed_run(work, rules)
            eq((p.returncode, used(p.stderr)), (0, want), f"{rules}: {p.stderr[-600:]}")
        p = suppressed_run(work, ["^main", "load_once"])
        eq((p.returncode, used(p.stderr)), (0, ["      9     528384 ^main", "      1    1048576 load_once"]),
           "load_once's own rule below ^main")


@test
def suppressions_credit_an_inlined_functions_rule_before_the_function_it_is_in():
    """grab_inner inlined into grab_outer inlined into pool_fill, at one
    return address (tests/progs/t_inline.c, -O2): the innermost inlined
    function's rule is credited, as LeakSanitizer credits it, whatever
    the rules' order."""
    with workdir("vt-suppress-") as work:
        for rules in (["pool_fill", "grab_outer", "grab_inner"], ["grab_inner", "grab_outer", "pool_fill"]):
            p = suppressed_run(work, rules, prog=os.path.join(T, "t_inline"))
            eq((p.returncode, used(p.stderr)), (0, ["      2       4002 grab_inner"]), f"{rules}: {p.stderr[-600:]}")
