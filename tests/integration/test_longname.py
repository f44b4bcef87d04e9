"""A dump name longer than a file name may be (255 bytes): the warning
said that a file that is not a vramtrace dump was in the way (there was
none) and the dump went to a name cut to 255 bytes. Now the warning gives
the reason, and no file is written under a shorter name."""
from run_tests import *  # noqa: F401,F403


@test
def dump_name_past_255_bytes_is_said_and_not_cut():
    with workdir("vt-longname-") as work:
        name = "y" * 260 + ".json"
        r = run([os.path.join(T, "t_driver")], cwd=work, env={"VRAMTRACE_OUT": name})
        eq(r.rc, 0, "t_driver's status")
        shown = os.path.join(work, name)
        eq([l for l in r.err.splitlines() if l.startswith("vramtrace: warning: ")],
           [f"vramtrace: warning: cannot write the dump to {shown[:200]}...: File name too long"], "the warning")
        eq(os.listdir(work), [], "no file under a shorter name")
