"""How each command reads its flags as typed: the mistakes a script makes
(a switch given a value after a space, an unset variable as a value, a flag
given twice, flags that cannot go together) told, not run."""
import signal

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
    command. Now such a word is refused with status 2, nothing run."""
    with workdir("vt-flagforms-") as work:
        usage = "(vramtrace run [OPTIONS] -- CMD [ARG...])"
        for args, line in (
                (["--leak-check", "yes"], "vramtrace run: 'yes' before '--': --leak-check takes no value after a "
                                          "space (did you mean --leak-check=yes?)\n"),
                (["--out", "off", "--leak-check", "0"], "vramtrace run: '0' before '--': --leak-check takes no "
                                                        "value after a space (did you mean --leak-check=0?)\n"),
                (["--tensors", "nocache"], "vramtrace run: 'nocache' before '--': --tensors takes no value after a "
                                           "space (did you mean --tensors=nocache?)\n"),
                (["--leak-check", "maybe"], "vramtrace run: 'maybe' before '--': --leak-check takes no value after "
                                            "a space\n"),
                (["--out", "off", "touch", "early"], f"vramtrace run: 'touch' before '--': the command goes after it "
                                                     f"{usage}\n")):
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
        eq(sorted(os.listdir(work)), ["a", "b", "c", "d", "e"], "each command ran")
