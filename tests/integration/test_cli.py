"""Offline CLI (`vramtrace report|diff`): hostile dumps, demangling, the torch
export's consistency, numeric flags and write errors, wording.

The hostile dumps are fuzz seeds too (tests/fuzz/seeds/cli-*.json): every
string field of cli-markup.json holds markup and script, of cli-control.json
terminal control sequences; cli-mangled.json has C++ names as a process
without a C++ runtime leaves them; cli-kinds.json every kind of memory on
two devices."""
import base64
import hashlib
import copy
import json
import pickle
import re
import resource
import signal
import threading
import time

from run_tests import *

SEEDS = os.path.join(ROOT, "tests", "fuzz", "seeds")


def seed(name):
    return os.path.join(SEEDS, name)


def cli(args, stdout=subprocess.PIPE):
    p = subprocess.run([CLI] + args, stdout=stdout, stderr=subprocess.PIPE)
    return p.returncode, p.stdout, p.stderr.decode("utf-8", "replace")


def one_error_line(err, prefix, what):
    eq(len(err.splitlines()), 1, f"{what}: one error line, got {err!r}")
    ok(err.startswith(prefix), f"{what}: starts with {prefix!r}: {err!r}")


# ---------------------------------------------------------------- 1. HTML


@test
def cli_html_markup_in_every_field_runs_nothing():
    with workdir("vt-cli-html-") as work:
        page = os.path.join(work, "m.html")
        rc, _, err = cli(["report", seed("cli-markup.json"), "--format", "html", "-o", page])
        eq((rc, err), (0, ""), "status")
        raw = open(page, encoding="utf-8").read()
        for bad in ("<script>document", "<img", "<svg onload", "<b id", "</textarea>", "</style></title>"):
            ok(bad not in raw, f"escaped in the page: {bad}")
        csp = re.search(r'http-equiv="Content-Security-Policy" content="([^"]*)"', raw).group(1)
        ok("unsafe-inline" not in csp and "unsafe-hashes" not in csp, "no unsafe-inline: " + csp)
        ok(re.search(r"script-src 'sha256-[A-Za-z0-9+/]{43}='", csp), "the page's script named by its hash")
        ok(not re.search(r"<[^>]*\son[a-z]+\s*=", raw), "no inline event handler in the page")
        named = lambda block: "'sha256-" + base64.b64encode(hashlib.sha256(block.encode()).digest()).decode() + "'"
        ok(named(re.search(r"<script>(.*?)</script>", raw, re.S).group(1)) in csp, "the script's hash")
        ok(named(re.search(r"<style>(.*?)</style>", raw, re.S).group(1)) in csp, "the style's hash")
        eq(raw.count("<script>"), 1, "one script block of the page's own")
        dom = chromium_dom(page)
        ok("<title>vramtrace report</title>" in dom, "no injected script changed the title")
        ok("PWNED" not in re.sub(r"document\.title=&#39;PWNED&#39;|document\.title='PWNED'", "", dom),
           "no marker written")
        ok('<b id="pwned">' not in dom and "<img" not in dom and "<svg onload" not in dom, "no element injected into the DOM")
        for field in ("reason", "host", "argv0", "device-name", "device-uuid", "oom-api", "live-api",
                      "live-kind", "function", "file"):
            esc = f"&lt;b id=\"pwned\"&gt;{field}&lt;/b&gt;"
            ok(esc in dom, f"{field} shown as text: {esc}")
        ok(dom.count('class="flame-node"') > 0, "the page's own script still ran")
        # Behind the escaping, the policy: markup that got through anyway
        # (an inline script, an event handler) must not run.
        tampered = os.path.join(work, "t.html")
        with open(tampered, "w", encoding="utf-8") as f:
            f.write(raw.replace("<h1>", "<script>document.title='PWNED'</script>"
                                "<img src=x onerror=\"document.title='PWNED'\"><h1>", 1))
        dom2 = chromium_dom(tampered)
        ok("<title>vramtrace report</title>" in dom2, "the policy blocks an inline script and handler")
        eq(dom2.count('class="flame-node"'), dom.count('class="flame-node"'), "the page's script runs")
        page = os.path.join(work, "p.html")
        rc, _, _ = cli(["report", os.path.join(GOLDEN, "python.json"), "--format", "html", "-o", page])
        ok('<pre id="selftest">sort ok; zoom ok; unzoom ok; hover ok; timeline zoom ok; axis ok; steps: none; search ok; collapse ok; flame device ok; tensors: none; row ok; rank: one dump; errors none</pre>' in chromium_dom(page, "#selftest"),
           "the page's controls work under the policy")


# ------------------------------------------------------ 5. control characters

CTRL_RAW = "\x1b[31m{}\x1b[0m\x1b]0;title\x07\r\n;x\u009b2J\u202eevil\t\x7f\x01end"
CTRL_SHOWN = r"\x1b[31m{}\x1b[0m\x1b]0;title\x07\x0d\x0a;x\u009b2J\u202eevil\x09\x7f\x01end"


def no_controls(text, what):
    bad = [c for c in text if (ord(c) < 0x20 and c != "\n") or 0x7f <= ord(c) <= 0x9f or
           0x202a <= ord(c) <= 0x202e or 0x2066 <= ord(c) <= 0x2069]
    eq(bad, [], f"{what}: control characters in the output")


def text_of(name):
    """The fuzz seed `name`'s path and its text report, the status checked."""
    path = seed(name)
    rc, out, err = cli(["report", path])
    eq((rc, err), (0, ""), "text status")
    return path, out.decode()


@test
def cli_text_outputs_escape_control_characters():
    path, text = text_of("cli-control.json")
    no_controls(text, "text")
    for field in ("reason", "host", "argv0", "device-uuid", "oom-api", "process-name", "finding",
                  "finding-next", "live-api"):
        ok(CTRL_SHOWN.format(field) in text, f"text shows {field} escaped")
    ok("\n  0   \\x1b[31mdevice-name\\x1b[0m     16.00 MiB " in text,
       "the device name cut to its column at a character boundary")
    eq(len(text.splitlines()), 34,
       "no line broken by a dump string (r0's 30, other processes, the findings' heading, a finding)")
    rc, out, err = cli(["report", path, "--format", "folded"])
    eq((rc, err), (0, ""), "folded status")
    lines = out.decode().splitlines()
    no_controls(out.decode(), "folded")
    eq(len(lines), 1, "one folded line (both holders have the same frames)")
    frame = CTRL_SHOWN.format("function").replace(";", ":")
    label = frame + " " + CTRL_SHOWN.format("file").replace(";", ":") + ":20"
    eq(lines[0], ";".join([label] + [frame] * 5) + " 4194304", "folded label and frames: ';' and controls taken out")
    rc, out, err = cli(["diff", os.path.join(GOLDEN, R0), path])
    eq((rc, err), (0, ""), "diff status")
    no_controls(out.decode(), "diff")
    ok(CTRL_SHOWN.format("function") + " " + CTRL_SHOWN.format("file") + ":20" in out.decode(),
       "diff shows the site escaped")
    rc, out, err = cli(["report", path, "--format", "json"])
    eq((rc, err), (0, ""), "json status")
    j = json.loads(out)
    eq(j["processes"][0]["reason"], CTRL_RAW.format("reason"), "JSON keeps the string, escaped as JSON")
    eq(j["processes"][0]["holders"][0]["frames"][0]["function"], CTRL_RAW.format("function"), "JSON frame")
    # A reader's error quotes the dump: it is escaped too.
    with workdir("vt-cli-ctrl-") as work:
        d = json.load(open(os.path.join(GOLDEN, R0)))
        d["events"][0][1] = "\x1b[2J\x1b]0;owned\x07\nsecond line"
        bad = os.path.join(work, "bad.json")
        json.dump(d, open(bad, "w"))
        for cmd in (["report", bad], ["diff", bad, bad]):
            rc, out, err = cli(cmd)
            eq(rc, 1 if cmd[0] == "report" else 3, f"{cmd[0]}: status")
            one_error_line(err, f"vramtrace {cmd[0]}: ", cmd[0])
            no_controls(err.rstrip("\n"), f"{cmd[0]} error")
            ok(r'unknown type "\x1b[2J\x1b]0;owned\x07\x0asecond line"' in err, err)


# ------------------------------------------------------------ 14. demangling

TMPL = "unsigned long long tmpl_site<int>(unsigned long)"
CLONE = "model::Buffer<float>::Buffer(unsigned long) [clone .cold]"


@test
def cli_demangles_what_the_dump_holds():
    path, text = text_of("cli-mangled.json")
    ok("_Z9tmpl" not in text and "_ZN5model" not in text, "no mangled name left in the text:\n" + text)
    ok(f"    2.00 MiB  50.0%      1 alloc   {TMPL} tests/progs/t_phases.c:20\n" in text, "holders line")
    ok(f"      #0 0x55abb53251d1 in {TMPL} tests/progs/t_phases.c:20\n" in text, "frame line")
    ok(f"    #0 0x55abb532521f in {CLONE} tests/progs/t_phases.c:32\n" in text, "a clone's suffix")
    ok(f"  what the numbers say, most likely first:\n    1. {TMPL} holds 50% (x_Z3foov, foo())\n       next: free what "
       "model::Buffer<float>::Buffer(unsigned long) keeps\n" in text, "findings demangled word by word")
    ok("in i tests/progs/t_phases.c:20" in text and "#1 0x55abb5325285 in _Zbad " in text,
       "a plain name and an invalid one stay as they are")
    rc, out, _ = cli(["report", path, "--format", "folded"])
    ok(f";main;{TMPL} 2097152\n" in out.decode(), "folded")
    rc, out, _ = cli(["report", path, "--format", "html"])
    ok("tmpl_site&lt;int&gt;(unsigned long)" in out.decode() and "_Z9" not in out.decode(), "html")
    rc, out, _ = cli(["report", path, "--format", "json"])
    j = json.loads(out)["processes"][0]
    # Equal bytes: "i ..." first by name, as in the text's rows.
    eq(j["holders"][1]["frames"][0]["function"], TMPL, "json frame")
    eq([h["site"] for h in j["holders"]], ["i tests/progs/t_phases.c:20", TMPL + " tests/progs/t_phases.c:20"],
       "json sites")
    rc, out, _ = cli(["report", path, "--format", "torch"])
    snap = pickle.loads(out)
    ok((TMPL + " (call site)", TMPL) in [(s["frames"][0]["name"], s["frames"][1]["name"]) for s in snap["segments"]],
       "torch frames: the call site's, then the real ones")
    rc, out, _ = cli(["diff", os.path.join(GOLDEN, R0), path])
    ok(f"     +2.00 MiB  0 B -> 2.00 MiB            +1 (0 -> 1)        {TMPL} tests/progs/t_phases.c:20\n"
       in out.decode(), "diff:\n" + out.decode())


# ------------------------------------------------------------ 15. torch export

MiB = 1 << 20


def replay(snap):
    """Replay each device's trace backwards from the segments, as PyTorch's
    memory_viz does: every entry must lie in a segment of its device."""
    for dev, trace in enumerate(snap["device_traces"]):
        segs = {s["address"]: s["total_size"] for s in snap["segments"] if s["device"] == dev}
        for e in reversed(trace):
            a, addr = e["action"], e["addr"]
            if a == "oom":
                continue
            inside = any(s <= addr < s + n for s, n in segs.items())
            if a == "segment_free":
                ok(not inside, f"device {dev}: {hex(addr)} freed while still a segment")
                segs[addr] = e["size"]
            elif a in ("free_requested", "free_completed", "alloc"):
                ok(inside, f"device {dev}: {a} at {hex(addr)} outside every segment")
            elif a == "segment_alloc":
                ok(addr in segs, f"device {dev}: segment_alloc {hex(addr)} has no segment")
                del segs[addr]


@test
def cli_torch_export_only_real_addresses():
    rc, out, err = cli(["report", seed("cli-kinds.json"), "--format", "torch"])
    eq((rc, err), (0, ""), "status")
    snap = pickle.loads(out)
    eq(sorted((s["device"], s["address"], s["total_size"], s["is_expandable"]) for s in snap["segments"]),
       [(0, 0x700000c00600, 2 * MiB, False), (0, 0x700000e00800, 2 * MiB, False),
        (0, 0x700002000000, 2 * MiB, True), (0, 0x700003000000, 4096, False),
        (1, 0x710000200000, 3 * MiB, False)],
       "segments: device, managed and mapped VMM memory; no array, host, imported or unmapped handle")
    by_dev = sorted(snap["segments"], key=lambda s: (s["device"], s["address"]))
    for a, b in zip(by_dev, by_dev[1:]):
        ok(a["device"] != b["device"] or a["address"] + a["total_size"] <= b["address"], "no overlap")
    eq(len(snap["device_traces"]), 2, "one trace per device")
    counts = [{} for _ in snap["device_traces"]]
    for dev, trace in enumerate(snap["device_traces"]):
        for e in trace:
            counts[dev][e["action"]] = counts[dev].get(e["action"], 0) + 1
    eq(counts, [{"segment_alloc": 7, "alloc": 7, "free_requested": 3, "free_completed": 3, "segment_free": 3,
                 "oom": 1},
                {"segment_alloc": 2, "alloc": 2, "free_requested": 1, "free_completed": 1, "segment_free": 1}],
       "trace entries per device")
    vmm = [e for e in snap["device_traces"][0] if e["addr"] == 0x700002000000]
    eq([e["action"] for e in vmm], ["segment_alloc", "alloc"], "the mapped handle's last allocation, mapped")
    replay(snap)
    # The golden run's snapshot replays too.
    rc, out, _ = cli(["report", os.path.join(GOLDEN, R0), "--format", "torch"])
    replay(pickle.loads(out))
    # One snapshot is one process.
    rc, out, err = cli(["report", os.path.join(GOLDEN, R0), os.path.join(GOLDEN, R1), "--format", "torch"])
    eq((rc, out), (1, b""), "several dumps refused")
    one_error_line(err, "vramtrace report: --format torch takes one dump", "torch with two dumps")


# ------------------------------------------ 19. diff, numbers and write errors


@test
def cli_diff_counts_what_the_holders_count():
    rc, out, err = cli(["diff", os.path.join(GOLDEN, R0), seed("cli-kinds.json")])
    eq((rc, err), (0, ""), "status")
    lines = out.decode().splitlines()
    # cli-kinds adds to r0: 2 MiB + 2 MiB of VMM handles, a 64 KiB array,
    # 4 KiB managed, 3 MiB on device 1 (all this process's device memory),
    # and 8 KiB pinned host and 1 MiB imported memory, which holders leave out.
    eq(lines[1], "live: 4.00 MiB -> 11.07 MiB (+7.07 MiB); allocations: 2 -> 7 (+5)", "totals")
    eq(lines[2], "pinned host memory (not in the rows below): 0 B -> 8.00 KiB", "host memory apart")
    eq(lines[4:], ["     +7.07 MiB  4.00 MiB -> 11.07 MiB      +5 (2 -> 7)        steady_state "
                   "tests/progs/t_phases.c:20"], "one row: every new allocation is steady_state's")
    rc, out, _ = cli(["report", seed("cli-kinds.json"), "--format", "json"])
    held = sum(h["bytes"] for h in json.loads(out)["processes"][0]["holders"])
    eq(held, 4 * MiB + 4 * MiB + 65536 + 4096 + 3 * MiB, "the holders table counts the same")
    # --fail-over: over it by one byte, where both round to 7.07 MiB, the
    # message says the bytes (not "+7.07 MiB, more than 7.07 MiB").
    grew = 4 * MiB + 65536 + 4096 + 3 * MiB
    for limit, msg in ((grew - 1, f"+{grew} bytes, more than --fail-over {grew - 1} bytes"),
                       (7000000, "+7.07 MiB, more than --fail-over 6.68 MiB")):
        rc, _, err = cli(["diff", os.path.join(GOLDEN, R0), seed("cli-kinds.json"), "--fail-over", str(limit)])
        eq((rc, err), (1, f"vramtrace diff: live bytes grew by {msg}\n"), f"--fail-over {limit}")
    rc, _, err = cli(["diff", os.path.join(GOLDEN, R0), seed("cli-kinds.json"), "--fail-over", str(grew)])
    eq((rc, err), (0, ""), "--fail-over the growth itself")


@test
def cli_diff_top_says_what_it_left_out():
    """diff --top N: the changed call sites past the first N are added up on
    one line, so that the rows and that line add up to the totals line
    (they were dropped without a word: rows are largest growth first, so
    --top cut the largest releases)."""
    r0, mangled = os.path.join(GOLDEN, R0), seed("cli-mangled.json")
    rows = ["     +2.00 MiB  0 B -> 2.00 MiB            +1 (0 -> 1)        i tests/progs/t_phases.c:20",
            "     +2.00 MiB  0 B -> 2.00 MiB            +1 (0 -> 1)        unsigned long long tmpl_site<int>"
            "(unsigned long) tests/progs/t_phases.c:20",
            "     -4.00 MiB  4.00 MiB -> 0 B            -2 (2 -> 0)        steady_state tests/progs/t_phases.c:20"]
    for top, left in (("1", ["  (2 more call sites changed, -2.00 MiB and -1 allocation together, not shown: --top 1)"]),
                      ("2", ["  (1 more call site changed, -4.00 MiB and -2 allocations together, not shown: --top 2)"]),
                      ("3", []), ("20", [])):
        rc, out, err = cli(["diff", r0, mangled, "--top", top])
        eq((rc, err), (0, ""), f"--top {top}: status")
        lines = out.decode().splitlines()
        eq(lines[1], "live: 4.00 MiB -> 4.00 MiB (0 B); allocations: 2 -> 2 (+0)", "totals")
        eq(lines[3:], rows[:int(top)] + left, f"--top {top}: the rows and what is left out")


@test
def cli_numeric_flags_are_exact_or_refused():
    r0, r1 = os.path.join(GOLDEN, R0), os.path.join(GOLDEN, R1)    # r1 grew by exactly 1 MiB
    for limit, want in (("9223372036854775808", 0), ("18446744073709551615", 0), ("1048575", 1),
                        ("1048576", 0), ("1M", 0), ("0.5M", 1), ("1023.999K", 1), ("1024K", 0), ("0", 1),
                        ("1MiB", 0), ("0.0009765625G", 0), ("0.0009765624G", 1)):
        rc, _, err = cli(["diff", r0, r1, "--fail-over", limit])
        eq(rc, want, f"--fail-over {limit}: {err}")
    # A fraction only with a unit, as the library's sizes (1.5 was taken as 1 byte).
    for limit in ("18446744073709551616", "16777216T", "-1", "nan", "1e3", "", "1.", "0x10", "5Q", " 5",
                  "1.5", "0.4", ".5M"):
        rc, out, err = cli(["diff", r0, r1, "--fail-over", limit])
        eq((rc, out), (2, b""), f"--fail-over {limit!r} refused")
        one_error_line(err, "vramtrace diff: --fail-over takes a size", f"--fail-over {limit!r}")
    for top in ("0", "-1", "99999999999", "9223372036854775808", "5x", "", "100001", "\t5", "+5", " 5"):
        rc, out, err = cli(["diff", r0, r1, "--top", top])
        eq((rc, out), (2, b""), f"diff --top {top!r} refused")
        one_error_line(err, "vramtrace diff: --top takes a number", f"diff --top {top!r}")
        rc, out, err = cli(["report", r0, "--top", top])
        eq((rc, out), (2, b""), f"report --top {top!r} refused")
        one_error_line(err, "vramtrace report: --top takes a number", f"report --top {top!r}")
    rc, out, _ = cli(["diff", r0, r1, "--top", "100000"])
    eq(rc, 0, "--top 100000")


def limit_file_size(n):
    def f():
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
        resource.setrlimit(resource.RLIMIT_FSIZE, (n, n))
    return f


@test
def cli_write_errors_fail_with_one_line():
    r0, r1 = os.path.join(GOLDEN, R0), os.path.join(GOLDEN, R1)
    with open("/dev/full", "wb") as full:
        rc, _, err = cli(["diff", r0, r1], stdout=full)
        eq(rc, 3, "diff > /dev/full")
        eq(err, "vramtrace diff: writing failed: No space left on device\n", "diff's error line")
        for fmt in ("text", "json", "folded", "html", "torch"):
            rc, _, err = cli(["report", r0, "--format", fmt], stdout=full)
            eq(rc, 1, f"report --format {fmt} > /dev/full")
            eq(err, "vramtrace report: writing to standard output failed: No space left on device\n", fmt)
        for cmd in (["--help"], ["--version"], ["report", "--help"], ["diff", "--help"]):
            rc, _, err = cli(cmd, stdout=full)
            eq(rc, 1, f"{cmd} > /dev/full")
            one_error_line(err, "vramtrace", f"{cmd} > /dev/full")
    with workdir("vt-cli-write-") as work:
        for fmt in ("text", "json", "html", "torch"):
            out = os.path.join(work, "r." + fmt)
            p = subprocess.run([CLI, "report", r0, "--format", fmt, "-o", out], capture_output=True,
                               preexec_fn=limit_file_size(1000))
            eq(p.returncode, 1, f"-o {fmt} on a full disk")
            eq(p.stderr.decode(), f"vramtrace report: writing {out} failed: File too large\n", "one line")
            ok(not os.path.exists(out), f"no half-written {fmt} file left behind")
        p = subprocess.run([CLI, "report", r0, "-o", out], capture_output=True, preexec_fn=limit_file_size(1 << 20))
        eq((p.returncode, p.stderr), (0, b""), "the same within the limit")
        ok(os.path.getsize(out) > 1000, "written")


@test
def cli_o_of_a_descriptor_writes_there_and_a_signal_leaves_nothing():
    """-o /dev/stdout, /dev/fd/1 or /proc/self/fd/1 is the descriptor, written
    where it stands: following the link replaced the file the shell had
    redirected the output to (`>> log` lost the log; in `{ echo A; report
    -o /dev/stdout; echo B; } > all` A and B were lost). A signal that ends
    the command while it writes FILE (here SIGXFSZ at the file size limit,
    left at its default) removes the temporary file: it was left beside
    FILE, hidden, for ever."""
    r0 = os.path.join(GOLDEN, R0)
    report = cli(["report", r0])[1]
    with workdir("vt-cli-fd-") as work:
        log = os.path.join(work, "log.txt")
        for name in ("/dev/stdout", "/dev/fd/1", "/proc/self/fd/1"):
            with open(log, "wb") as f:
                f.write(b"EARLIER\n")
            p = subprocess.run(["bash", "-c", f'{{ echo A; "$0" report "$1" -o {name}; echo B; }} >> "$2"', CLI, r0,
                                log], capture_output=True, timeout=60)
            eq((p.returncode, p.stderr), (0, b""), f"{name}: status")
            eq(open(log, "rb").read(), b"EARLIER\nA\n" + report + b"B\n", f"{name}: written where stdout stands")
        eq(sorted(os.listdir(work)), ["log.txt"], "nothing beside it")

        def fsize():
            resource.setrlimit(resource.RLIMIT_FSIZE, (1000, 1000))
        out = os.path.join(work, "r.txt")
        with open(out, "w") as f:
            f.write("the report of yesterday\n")
        p = subprocess.run([CLI, "report", r0, "--format", "html", "-o", out], capture_output=True, preexec_fn=fsize,
                           timeout=60)
        eq(p.returncode, -signal.SIGXFSZ, "ended by the signal")
        eq(open(out).read(), "the report of yesterday\n", "the report that was there, kept")
        eq(sorted(os.listdir(work)), ["log.txt", "r.txt"], "no temporary file left")


@test
def cli_o_on_a_full_disk_keeps_the_report_that_was_there():
    """-o FILE whose write fails (a full disk, here the file size limit)
    leaves the report FILE held before byte for byte, with its mode, and
    no temporary file beside it: the report is written aside and renamed
    over FILE once whole (before, FILE was truncated at once and then
    removed). Through a symbolic link, the link stays and its target is
    replaced, as before."""
    r0, r1 = os.path.join(GOLDEN, R0), os.path.join(GOLDEN, R1)
    with workdir("vt-cli-keep-") as work:
        out = os.path.join(work, "r.txt")
        with open(out, "w") as f:
            f.write("the report of yesterday\n")
        os.chmod(out, 0o640)
        for fmt in ("text", "json", "html", "torch"):
            p = subprocess.run([CLI, "report", r0, "--format", fmt, "-o", out], capture_output=True,
                               preexec_fn=limit_file_size(1000))
            eq((p.returncode, p.stderr.decode()), (1, f"vramtrace report: writing {out} failed: File too large\n"),
               f"-o {fmt} on a full disk")
            eq(open(out).read(), "the report of yesterday\n", f"{fmt}: the report that was there, kept")
            eq(sorted(os.listdir(work)), ["r.txt"], f"{fmt}: nothing left beside it")
        rc, _, err = cli(["report", r0, "-o", out])
        eq((rc, err), (0, ""), "written within the limit")
        eq((open(out, "rb").read(), stat.S_IMODE(os.stat(out).st_mode)), (cli(["report", r0])[1], 0o640),
           "the new report, the old mode")
        os.symlink("r.txt", os.path.join(work, "link.txt"))
        rc, _, err = cli(["report", r1, "-o", os.path.join(work, "link.txt")])
        eq((rc, err, os.readlink(os.path.join(work, "link.txt"))), (0, "", "r.txt"), "the link stays a link")
        eq(open(out, "rb").read(), cli(["report", r1])[1], "its target replaced")
        eq(sorted(os.listdir(work)), ["link.txt", "r.txt"], "nothing else in the folder")


@test
def cli_o_writes_as_the_shells_redirection_does():
    """-o FILE as a user who is not root: a read-only file is refused as the
    shell's `>` refuses it (before: replaced, still 0444); another user's
    file of mode 666 in a sticky folder is written in place, theirs still
    (before: "Operation not permitted", status 1); a file with a second
    hard link, and one whose rename is refused (a mount point), are
    written in place, both names the new report (before: the link kept the
    old text). A FIFO nobody reads is refused at once (before: it waited
    for ever); one with a reader gets the report."""
    r0 = os.path.join(GOLDEN, R0)
    report = cli(["report", r0])[1]
    uid = 65534

    def as_user():
        os.setgid(uid)
        os.setuid(uid)

    with workdir("vt-cli-shell-") as work:
        os.chmod(work, 0o755)
        # Copies the other user may run and read (the build's may be in a
        # folder only root reads: a fresh clone under mktemp -d).
        cli_copy, r0 = os.path.join(work, "vramtrace"), shutil.copy(r0, os.path.join(work, "r0.json"))
        shutil.copy(CLI, cli_copy)
        os.chmod(cli_copy, 0o755)
        os.chmod(r0, 0o644)

        def report_o(out, **kw):
            p = subprocess.run([cli_copy, "report", r0, "-o", out], capture_output=True, timeout=30, **kw)
            return p.returncode, p.stderr.decode()
        rw, sticky = os.path.join(work, "rw"), os.path.join(work, "st")
        os.mkdir(rw, 0o777)
        os.mkdir(sticky)
        os.chmod(rw, 0o777)
        os.chmod(sticky, 0o1777)
        ro = os.path.join(rw, "ro.txt")
        with open(ro, "w") as f:
            f.write("keep\n")
        os.chown(ro, uid, uid)
        os.chmod(ro, 0o444)
        eq(report_o(ro, preexec_fn=as_user), (1, f"vramtrace report: cannot write {ro}: Permission denied\n"),
           "a read-only file: refused")
        eq((open(ro).read(), stat.S_IMODE(os.stat(ro).st_mode)), ("keep\n", 0o444), "the read-only file as it was")
        eq(sorted(os.listdir(rw)), ["ro.txt"], "nothing beside it")

        shared = os.path.join(sticky, "shared.txt")
        with open(shared, "w") as f:
            f.write("theirs\n")
        os.chmod(shared, 0o666)
        eq(report_o(shared, preexec_fn=as_user), (0, ""), "another user's file in a sticky folder")
        st = os.stat(shared)
        eq((open(shared, "rb").read(), st.st_uid, stat.S_IMODE(st.st_mode)), (report, 0, 0o666),
           "written in place: the new report, their file still")
        eq(sorted(os.listdir(sticky)), ["shared.txt"], "nothing beside it")

        h1, h2 = os.path.join(work, "h1"), os.path.join(work, "h2")
        with open(h1, "w") as f:
            f.write("old\n")
        os.link(h1, h2)
        eq(report_o(h1), (0, ""), "a file with two names")
        eq((open(h1, "rb").read(), open(h2, "rb").read(), os.stat(h1).st_ino == os.stat(h2).st_ino),
           (report, report, True), "both names the new report, one file")

        mnt, src = os.path.join(work, "mnt.txt"), os.path.join(work, "src.txt")
        for path in (mnt, src):
            with open(path, "w") as f:
                f.write("old\n")
        p = subprocess.run(["unshare", "--mount", "sh", "-c", 'mount --bind "$1" "$2" && "$0" report "$3" -o "$2"',
                            CLI, src, mnt, r0], capture_output=True, timeout=30)
        eq((p.returncode, p.stderr), (0, b""), "a mount point, whose rename is refused")
        eq((open(src, "rb").read(), open(mnt).read()), (report, "old\n"), "written in place: the mounted file")

        fifo = os.path.join(work, "fifo")
        os.mkfifo(fifo)
        t0 = time.monotonic()
        eq(report_o(fifo), (1, f"vramtrace report: cannot write {fifo}: a FIFO nobody reads (not waited for)\n"),
           "a FIFO nobody reads")
        ok(time.monotonic() - t0 < 10, "refused at once")
        rfd = os.open(fifo, os.O_RDONLY | os.O_NONBLOCK)
        try:
            eq(report_o(fifo), (0, ""), "a FIFO with a reader")
            got = b""
            while True:
                chunk = os.read(rfd, 1 << 16)
                if not chunk:
                    break
                got += chunk
        finally:
            os.close(rfd)
        eq(got, report, "the reader got the report")
        eq(sorted(os.listdir(work)), ["fifo", "h1", "h2", "mnt.txt", "r0.json", "rw", "src.txt", "st", "vramtrace"], "nothing else")


@test
def cli_a_folder_or_a_fifo_nobody_writes_is_said_at_once():
    """`report DIR` says why it cannot read it (before: "cannot read" and
    no reason); `report FIFO` with no writer is refused at once, as the
    library and --suppressions refuse one (before: it waited for ever);
    a FIFO with a writer is read until the writer closes it."""
    r0 = os.path.join(GOLDEN, R0)
    with workdir("vt-cli-kinds-") as work:
        folder, fifo = os.path.join(work, "dir.json"), os.path.join(work, "fifo.json")
        os.mkdir(folder)
        os.mkfifo(fifo)
        for cmd in (["report", folder], ["diff", r0, folder]):
            p = subprocess.run([CLI] + cmd, capture_output=True, text=True, timeout=10)
            eq((p.returncode, p.stderr), (1 if cmd[0] == "report" else 3,
                                          f"vramtrace {cmd[0]}: {folder}: cannot read: Is a directory\n"),
               f"{cmd[0]} of a folder")
        for cmd in (["report", fifo], ["diff", r0, fifo]):
            p = subprocess.run([CLI] + cmd, capture_output=True, text=True, timeout=10)
            eq((p.returncode, p.stderr), (1 if cmd[0] == "report" else 3,
                                          f"vramtrace {cmd[0]}: {fifo}: cannot read: a FIFO nobody writes "
                                          "(not waited for)\n"), f"{cmd[0]} of a FIFO nobody writes")
        # A writer holds the FIFO open: the whole dump, in pieces, then its end.
        data = open(r0, "rb").read()
        w = os.open(fifo, os.O_RDWR)
        def write_all():
            os.write(w, data[:1000])
            time.sleep(0.3)
            os.write(w, data[1000:])
            os.close(w)
        t = threading.Thread(target=write_all)
        t.start()
        p = subprocess.run([CLI, "report", fifo], capture_output=True, timeout=20)
        t.join()
        eq((p.returncode, p.stderr), (0, b""), "a FIFO with a writer")
        eq(p.stdout, cli(["report", r0])[1].replace(r0.encode(), fifo.encode()), "read whole")


@test
def cli_diff_says_one_usage_line_for_any_count_but_two():
    """diff of one dump or of three said the usage two ways ("give exactly
    two dumps" alone for three): one line, status 2, for both."""
    r0 = os.path.join(GOLDEN, R0)
    for args in ([r0], [r0, r0, r0], []):
        eq(cli(["diff"] + args)[0::2], (2, "vramtrace diff: give exactly two dumps: OLD.json NEW.json\n"),
           f"{len(args)} dumps")


@test
def cli_diff_says_a_missing_dump_apart_from_growth():
    """diff's status 1 is the growth past --fail-over alone; a dump that is
    missing, is no dump, or output that cannot be written is status 3
    (before: 1 for both, so that CI took "no dump" for "it leaked")."""
    r0, r1 = os.path.join(GOLDEN, R0), os.path.join(GOLDEN, R1)
    with workdir("vt-cli-diffrc-") as work:
        missing, trunc = os.path.join(work, "missing.json"), os.path.join(work, "trunc.json")
        with open(trunc, "wb") as f:
            f.write(open(r1, "rb").read()[:1000])
        p = subprocess.run([CLI, "diff", r0, r1, "--fail-over", "1"], capture_output=True, text=True)
        eq((p.returncode, p.stderr), (1, "vramtrace diff: live bytes grew by +1.00 MiB, more than --fail-over 1 B\n"),
           "grew past the limit")
        for new, why in ((missing, "cannot open: No such file or directory"), (trunc, None)):
            for args in ([], ["--fail-over", "1"], ["--fail-over", "1G"]):
                p = subprocess.run([CLI, "diff", r0, new] + args, capture_output=True, text=True)
                eq((p.returncode, p.stdout), (3, ""), f"diff {os.path.basename(new)} {args}")
                one_error_line(p.stderr, f"vramtrace diff: {new}: ", f"diff {os.path.basename(new)}")
                if why:
                    eq(p.stderr, f"vramtrace diff: {new}: {why}\n", "the reason")
        with open("/dev/full", "wb") as full:
            rc, _, err = cli(["diff", r0, r1, "--fail-over", "1"], stdout=full)
            eq((rc, err), (3, "vramtrace diff: writing failed: No space left on device\n"), "diff > /dev/full")


@test
def cli_report_refuses_to_write_over_a_dump_it_reads():
    """-o naming one of the dumps read, by its own path, by a symbolic link
    or by a hard link, is refused with status 2 before anything is read or
    written, in every format: before, the report replaced the dump (and a
    failed write then removed it). The dump is byte for byte as it was."""
    r0, r1 = os.path.join(GOLDEN, R0), os.path.join(GOLDEN, R1)
    with workdir("vt-cli-self-") as work:
        dump = os.path.join(work, "d.json")
        shutil.copy(r0, dump)
        os.symlink(dump, os.path.join(work, "sym.json"))
        os.link(dump, os.path.join(work, "hard.json"))
        with open(dump, "rb") as f:
            before = f.read()
        for fmt in ("text", "json", "folded", "html", "torch"):
            for target in ("d.json", "sym.json", "hard.json"):
                args = [dump] if fmt == "torch" else [r1, dump]
                rc, out, err = cli(["report", *args, "--format", fmt, "-o", os.path.join(work, target)])
                eq((rc, out), (2, b""), f"{fmt} -o {target} refused")
                eq(err, f"vramtrace report: -o {os.path.join(work, target)} is a dump this report reads; "
                   "write the report elsewhere (see vramtrace report --help)\n", f"{fmt} -o {target}: one line")
        with open(dump, "rb") as f:
            eq(f.read() == before, True, "the dump unchanged")
        rc, out, err = cli(["report", dump, "-o", os.path.join(work, "r.txt")])
        eq((rc, err), (0, ""), "another -o is written")


@test
def cli_ranks_far_apart_cost_nothing():
    """Dumps of ranks 0, 5 and 2,147,483,647 (INT_MAX, which a dump may
    say): the missing ranks are written as the gaps between them, exactly,
    in a few MB (before, a list of every missing rank: 8.4 GB and 37 s for
    ranks 0 and 2,147,483,646, and a signed overflow at INT_MAX)."""
    with workdir("vt-cli-ranks-") as work:
        d = json.load(open(os.path.join(GOLDEN, R0)))
        paths = []
        for r in (0, 2147483647, 5):
            d["rank"] = r
            paths.append(os.path.join(work, f"r{r}.json"))
            json.dump(d, open(paths[-1], "w"))
        p = subprocess.run(["/usr/bin/time", "-f", "%M", CLI, "report", *paths], capture_output=True, text=True,
                           timeout=60)
        eq(p.returncode, 0, "status")
        rss_kib = int(p.stderr.split()[-1])
        ok(rss_kib < 64 << 10, f"under 64 MiB resident: {rss_kib} KiB")
        ok("\nranks: 3 dumps of 3 ranks from 0 to 2147483647; missing 2147483645 of 0 to 2147483647: "
           "1-4, 6-2147483646\n" in p.stdout, p.stdout[:2000])


@test
def cli_a_rank_with_several_dumps_counts_once():
    """Ranks 0, 1, 1 and 2 (rank 1 restarted, or a named dump beside its
    exit dump): three ranks, one of them with two dumps, and a call site
    that only rank 1 holds is held on 1 of 3 ranks (before: "2 of 3 ranks
    (1, 1)", and "(1 ranks have more than one dump)" counted dumps)."""
    with workdir("vt-cli-ranks-") as work:
        paths = []
        for i, (name, r) in enumerate(((R0, 0), (R1, 1), (R1, 1), (R0, 2))):
            d = json.load(open(os.path.join(GOLDEN, name)))
            d["rank"] = r
            paths.append(os.path.join(work, f"d{i}.json"))
            json.dump(d, open(paths[-1], "w"))
        rc, out, err = cli(["report", *paths])
        out = out.decode()
        eq((rc, err), (0, ""), "status")
        ok("\nranks: 4 dumps of 3 ranks from 0 to 2 (1 rank has more than one dump)\n" in out, out[:2000])
        ok("\ncall sites that differ across ranks (at exit): 1\n"
           "  rank_extra tests/progs/t_phases.c:26: 1.00 MiB on 1 of 3 ranks (1)\n" in out, out[:3000])
        # A site held on every rank in other amounts names the rank that
        # holds the most.
        d = json.load(open(paths[3]))
        d["holders"][0]["bytes"] = 6 << 20
        json.dump(d, open(paths[3], "w"))
        rc, out, err = cli(["report", *paths])
        out = out.decode()
        ok(re.search(r"\n  \S+ tests/progs/t_phases\.c:\d+: 4\.00 MiB to 8\.00 MiB \(rank 2\) on 3 of 3 ranks \(0-2\)\n", out),
           out[:3000])
        # Two ranks hold the most: not one rank's (it named rank 0 alone;
        # an outside check).
        d = json.load(open(paths[0]))
        d["holders"][0]["bytes"] = 6 << 20
        json.dump(d, open(paths[0], "w"))
        rc, out, err = cli(["report", *paths])
        out = out.decode()
        ok(re.search(r"\n  \S+ tests/progs/t_phases\.c:\d+: 4\.00 MiB to 8\.00 MiB \(rank 0 and 1 more\) on 3 of 3 ranks "
                     r"\(0-2\)\n", out), out[:3000])
        d["holders"][0]["bytes"] = json.load(open(os.path.join(GOLDEN, R0)))["holders"][0]["bytes"]
        json.dump(d, open(paths[0], "w"))
        rc, out, err = cli(["report", *paths[1:3]])
        out = out.decode()
        # The two dumps of one process (pid 8448): no imbalance of it
        # against itself, no call sites "differing" across one rank.
        ok("\nranks: 2 dumps of 1 rank from 1 to 1 (1 rank has more than one dump); missing 1 of 0 to 1: 0\n"
           "holders at exit combined across processes:\n" in out, out[:2000])
        ok("peaks" not in out and "imbalance" not in out, out[:2000])


@test
def cli_several_dumps_are_shown_in_the_order_of_their_ranks():
    """A shell's glob gives d.0, d.1, d.10, d.11, d.2: the report showed the
    ranks in that order (an outside check); now by rank, the order given
    among equal ranks (two dumps of one rank: a process of rank 1 run
    after all the others had ended would be a later run, the report's
    alone)."""
    with workdir("vt-order-") as work:
        for r in (0, 1, 2, 10, 11):
            run([os.path.join(T, "t_driver")], report="off",
                env={"RANK": str(r), "WORLD_SIZE": "12", "VRAMTRACE_OUT": os.path.join(work, "d.%r.json")})
        shutil.copy(os.path.join(work, "d.1.json"), os.path.join(work, "e.1.json"))
        globbed = sorted(glob.glob(os.path.join(work, "d.*.json")))
        eq([os.path.basename(x) for x in globbed], ["d.0.json", "d.1.json", "d.10.json", "d.11.json", "d.2.json"],
           "the glob's order")
        paths = globbed + [os.path.join(work, "e.1.json")]
        rc, out, err = cli(["report", "--format", "json", *paths])
        eq(rc, 0, "status")
        j = json.loads(out)
        eq([(p["rank"], os.path.basename(p["dump"])) for p in j["processes"]],
           [(0, "d.0.json"), (1, "d.1.json"), (1, "e.1.json"), (2, "d.2.json"), (10, "d.10.json"), (11, "d.11.json")],
           "by rank, then as given")


@test
def cli_first_to_fail_is_the_rank_its_failure_ended():
    """Rank 0 failed first and got past it (the same requests, asked again,
    succeeded) and exited 0; rank 2 caught a probe's failure, then failed
    for good and exited 1; rank 1 failed last and exited 1. The report
    named rank 0 (its failure came first) and rank 2's probe; now the
    exit dumps say each process's exit status and whether its last failure
    got past, and the first to fail is rank 2's failure that ended it, with
    why and whom it passed over."""
    with workdir("vt-ended-") as work:
        out_of = lambda r: {"RANK": str(r), "WORLD_SIZE": "3", "VRAMTRACE_OUT": os.path.join(work, "d.%r.json")}
        run([os.path.join(T, "t_survived"), "1"], report="off", env={"SIMGPU_CAPACITY": "1G", **out_of(0)})
        run([os.path.join(T, "t_oom"), "probe"], report="off", env={"SIMGPU_CAPACITY": "64M", **out_of(2)})
        run([os.path.join(T, "t_oom")], report="off", env={"SIMGPU_CAPACITY": "64M", **out_of(1)})
        dumps = [json.load(open(os.path.join(work, f"d.{r}.json"))) for r in (0, 1, 2)]
        eq([(d["exit_status"], d["totals"]["oom_count"], d["totals"]["oom_survived"], d["totals"]["last_oom_survived"])
            for d in dumps], [(0, 2, 2, True), (1, 1, 0, False), (1, 2, 0, False)], "what the dumps say of the end")
        paths = [os.path.join(work, f"d.{r}.json") for r in (0, 1, 2)]
        rc, out, err = cli(["report", *paths])
        out = out.decode()
        eq((rc, err), (0, ""), "status")
        pids = [d["pid"] for d in dumps]
        m = re.search(r"\nfirst to fail: .*\n(  not .*\n)?", out)
        ok(m, out[:1500])
        eq(re.sub(r"[0-9]+\.[0-9]{3} s earlier", "T s earlier", m.group(0)),
           f"\nfirst to fail: rank 2 (pid {pids[2]}), 32.00 MiB requested by cudaMalloc: its last failure, not got "
           f"past; it exited with status 1\n  not rank 0 (pid {pids[0]}), which failed T s earlier: it got past its "
           f"failures (2 of 2)\n", "the first to fail, why, and whom it passed over")
        rc, out, err = cli(["report", "--format", "json", *paths])
        j = json.loads(out)
        eq((j["first_to_fail"], j["first_to_fail_oom"], j["first_to_fail_why"]),
           (2, 1, "its last failure, not got past; it exited with status 1"), "the JSON's first to fail")
        eq([(p["rank"], p["exit_status"], p["totals"]["last_oom_survived"]) for p in j["processes"]],
           [(0, 0, True), (1, 1, False), (2, 1, False)], "the JSON's processes say it too")
        rc, out, err = cli(["report", "--format", "html", *paths])
        ok(f'first to fail: rank 2 (pid {pids[2]}), 32.00 MiB requested by cudaMalloc' in out.decode(), "the page's")


@test
def cli_first_to_fail_not_passed_over_for_another_array():
    """Rank 0 failed a 2 GiB array, made one of 16 x 16 elsewhere and
    exited 1; rank 1 failed 0.2 s later and exited 1. The report named
    rank 1 first to fail, passing over rank 0 as one that "got past its
    failures (1 of 1)": the small array was taken for the big one's retry
    (an outside check). Rank 0 is first to fail, and nobody is passed over."""
    with workdir("vt-pastsite-") as work:
        env = lambda r: {"SIMGPU_CAPACITY": "1G", "RANK": str(r), "WORLD_SIZE": "2",
                         "VRAMTRACE_OUT": os.path.join(work, "d.%r.json")}
        run([os.path.join(T, "t_pastsite"), "array"], report="off", env=env(0))
        run([os.path.join(T, "t_pastsite"), "late"], report="off", env=env(1))
        paths = [os.path.join(work, f"d.{r}.json") for r in (0, 1)]
        dumps = [json.load(open(p)) for p in paths]
        eq([(d["exit_status"], d["totals"]["oom_count"], d["totals"]["oom_survived"], d["totals"]["last_oom_survived"])
            for d in dumps], [(1, 1, 0, False), (1, 1, 0, False)], "what the dumps say of the end")
        rc, out, err = cli(["report", *paths])
        eq((rc, err), (0, ""), "status")
        m = re.search(r"\nfirst to fail: .*\n(  not .*\n)?", out.decode())
        ok(m, out.decode()[:1500])
        eq(m.group(0), f"\nfirst to fail: rank 0 (pid {dumps[0]['pid']}), 2.00 GiB requested by cudaMallocArray: its "
           "last failure, not got past; it exited with status 1\n", "the first to fail")
        rc, out, err = cli(["report", "--format", "json", *paths])
        j = json.loads(out)
        eq((j["first_to_fail"], j["first_to_fail_why"]), (0, "its last failure, not got past; it exited with status 1"),
           "the JSON's first to fail")


def ranks_job(work, fail):
    """One run of a job of 3 ranks at once (each lives 1.2 s), rank `fail`
    out of memory, its dumps at d.%r.json in work (an earlier run's kept
    aside under their pids)."""
    job = ('for r in 0 1 2; do c=1G; [ $r = "$FAIL" ] && c=64M; '
           'RANK=$r WORLD_SIZE=3 SIMGPU_CAPACITY=$c "$PROG" later & done; wait')
    run(["sh", "-c", job], report="off",
        env={"FAIL": str(fail), "PROG": os.path.join(T, "t_oom"), "VRAMTRACE_OUT": os.path.join(work, "d.%r.json")})


@test
def cli_report_is_of_the_newest_run():
    """The job ran twice in one folder (rank 2 failed, then rank 1): the
    first run's dumps, kept aside under their pids, were merged into the
    report of d.*.json (six processes, two of each rank, the first to fail
    the old run's rank 2). Now the report is of the newest run and one line
    names the dumps of the earlier run it left out."""
    with workdir("vt-runs-") as work:
        ranks_job(work, 2)
        old = {r: json.load(open(os.path.join(work, f"d.{r}.json")))["pid"] for r in (0, 1, 2)}
        ranks_job(work, 1)
        new = {r: json.load(open(os.path.join(work, f"d.{r}.json")))["pid"] for r in (0, 1, 2)}
        paths = sorted(glob.glob(os.path.join(work, "d.*.json")))
        eq(len(paths), 6, "both runs' dumps in the folder")
        rc, out, err = cli(["report", *paths])
        out = out.decode()
        eq((rc, err), (0, ""), "status")
        aside = ", ".join(os.path.join(work, f"d.{r}.pid{old[r]}.json") for r in (0, 1, 2))
        lines = out.splitlines()
        eq(re.sub(r"begun [0-9]+\.[0-9]{3} s", "begun T s", lines[0]),
           f"earlier runs: left out 3 dumps of 1 earlier run of these ranks, the latest begun T s before this one: "
           f"{aside}", "the line that says what was left out")
        eq(lines[1], "3 processes:", "the newest run's processes")
        eq([int(x.split()[0]) for x in lines[3:6]], [new[0], new[1], new[2]], "its pids, by rank")
        ok(f"\nfirst to fail: rank 1 (pid {new[1]}), 32.00 MiB requested by cudaMalloc: its last failure, not got "
           f"past; it exited with status 1\nranks: 3 dumps of 3 ranks from 0 to 2 of a job of 3\n" in out, out[:2000])
        rc, out, err = cli(["report", "--format", "json", *paths])
        j = json.loads(out)
        eq(([p["pid"] for p in j["processes"]], j["first_to_fail"], j["earlier_runs"]["runs"], j["earlier_runs"]["dumps"]),
           ([new[0], new[1], new[2]], 1, 1, aside.split(", ")), "the JSON's")
        rc, out, err = cli(["report", "--format", "html", *paths])
        ok('<p class="earlier-runs">earlier runs: left out 3 dumps of 1 earlier run' in out.decode(), "the page's")
        # The earlier run's dumps alone are a report of it.
        rc, out, err = cli(["report", *aside.split(", ")])
        out = out.decode()
        ok(out.startswith("3 processes:") and f"\nfirst to fail: rank 2 (pid {old[2]})" in out, out[:1500])


def put_ranges(xs):
    """Sorted numbers as fleet.c writes them: runs as a-b, the rest by commas."""
    out, i = [], 0
    while i < len(xs):
        j = i
        while j + 1 < len(xs) and xs[j + 1] == xs[j] + 1:
            j += 1
        out.append(str(xs[i]) if i == j else f"{xs[i]}-{xs[j]}")
        i = j + 1
    return ", ".join(out)


@test
def cli_processes_without_a_rank_are_compared_by_pid():
    """Four processes at once with no rank variable (as the workers of
    torch.multiprocessing.spawn), holding 100 to 400 MiB at one call site:
    every dump read rank 0, and the report said "call sites that differ
    across ranks: 0" right under "the highest is 4.00x the lowest". Now the
    dumps say rank_known false and the comparisons are by pid."""
    with workdir("vt-norank-") as work:
        job = ('for i in 1 2 3 4; do printf "a $((i * 104857600))\\nq\\n" | "$PROG" >/dev/null & done; wait')
        run(["sh", "-c", job], report="off",
            env={"PROG": os.path.join(T, "t_live"), "SIMGPU_CAPACITY": "2G", "VRAMTRACE_OUT": os.path.join(work, "d.%p.json")})
        dumps = [json.load(open(p)) for p in glob.glob(os.path.join(work, "d.*.json"))]
        eq(sorted((d["rank"], d["rank_known"], d["totals"]["peak_bytes"] >> 20) for d in dumps),
           [(0, False, 100), (0, False, 200), (0, False, 300), (0, False, 400)], "the dumps say no rank")
        pids = sorted(d["pid"] for d in dumps)
        top = max(dumps, key=lambda d: d["totals"]["peak_bytes"])["pid"]
        rc, out, err = cli(["report", *glob.glob(os.path.join(work, "d.*.json"))])
        out = out.decode()
        eq((rc, err), (0, ""), "status")
        line = source_line("t_live.c", "if (cudaMalloc(&p, bytes) == cudaSuccess && nkept")
        ok("\nranks: 4 of these 4 dumps say no rank (no RANK, LOCAL_RANK or the like held a rank): compared as 4 "
           f"processes, by pid\npeak imbalance: highest 400.00 MiB (pid {top}) over the median 250.00 MiB = 1.60x\n"
           "call sites that differ across processes (at exit): 1\n"
           f"  keep tests/progs/t_live.c:{line}: 100.00 MiB to 400.00 MiB (pid {top}) on 4 of 4 processes "
           f"(pids {put_ranges(pids)})\n" in out, out[:2500])
        # The page's cards and columns name each by its pid, not "rank 0" four times.
        rc, out, err = cli(["report", "--format", "html", *glob.glob(os.path.join(work, "d.*.json"))])
        page = out.decode()
        eq((page.count("<th>rank 0</th>"), [page.count(f"<th>pid {p}</th>") for p in pids],
            [page.count(f'<span class="peak-name">pid {p}</span>') for p in pids]), (0, [1] * 4, [1] * 4),
           "the page's names")
        # A launcher's rank: absent from the dump (true), compared by rank as before.
        r = run([os.path.join(T, "t_driver")], report="off", env={"RANK": "1", "VRAMTRACE_OUT": os.path.join(work, "r.json")})
        ok("rank_known" not in json.load(open(os.path.join(work, "r.json"))), "said only when no rank is known")


@test
def cli_json_has_pytorchs_view():
    """The text and HTML reports show PyTorch's own view (allocated and
    reserved, categories, largest tensors) of a dump that has one; the JSON
    report left it out. Now each process and each failure has its `torch`,
    as the dump says it, stacks resolved to their call sites."""
    d = json.load(open(seed("torch.json")))
    rc, out, err = cli(["report", "--format", "json", seed("torch.json")])
    eq((rc, err), (0, ""), "status")
    p = json.loads(out)["processes"][0]

    def as_report(v, request):
        want = {k: v[k] for k in ("device", "allocated_bytes", "reserved_bytes", "largest_free_block_bytes", "steps",
                                  "free_bytes", "total_bytes", "outside_bytes", "categories", "settings")}
        if request:
            want["request_bytes"] = v["request_bytes"]
        g = v["growth"]
        want["growth"] = {"site": "steady_state tests/progs/t_phases.c:20", "unit": g["unit"], "units": g["units"],
                          "bytes_per_unit": g["bytes_per_unit"], "rise_bytes": g["rise_bytes"],
                          "span_ns": g["span_ns"], "holder": g["holder"]}
        want["tensors"] = [{k: t[k] for k in ("bytes", "shape", "dtype", "category", "name", "holder", "block_address",
                                              "segment_address")} for t in v["tensors"]]
        want["tensors"][0]["site"] = "warmup_buffer tests/progs/t_phases.c:14"
        return want

    eq(p["torch"], [as_report(d["torch"][0], False)], "the process's")
    eq(p["ooms"][0]["torch"], [as_report(d["ooms"][0]["torch"][0], True)], "the failure's")
    rc, out, err = cli(["report", "--format", "json", os.path.join(GOLDEN, R0)])
    ok("torch" not in json.loads(out)["processes"][0], "none without one")


@test
def cli_at_oom_compares_the_ranks_that_failed():
    """--at oom over ranks 0 and 2, which failed holding the same 48 MiB,
    and rank 1, which never failed: rank 1 counted as holding nothing at
    oom, so the weights every rank holds were "48.00 MiB on 2 of 3 ranks
    (0, 2)". Now the comparison is over the ranks with holders at oom, and
    says which have none."""
    with workdir("vt-atoom-") as work:
        for r, prog, cap in ((0, "t_oom", "64M"), (1, "t_driver", "1G"), (2, "t_oom", "64M")):
            run([os.path.join(T, prog)], report="off",
                env={"RANK": str(r), "WORLD_SIZE": "3", "SIMGPU_CAPACITY": cap,
                     "VRAMTRACE_OUT": os.path.join(work, "d.%r.json")})
        paths = [os.path.join(work, f"d.{r}.json") for r in (0, 1, 2)]
        rc, out, err = cli(["report", "--at", "oom", *paths])
        out = out.decode()
        eq((rc, err), (0, ""), "status")
        ok("\ncall sites that differ across ranks (at oom): 0, over the 2 ranks with holders at oom; none at rank 1\n"
           "holders at oom combined" in out, out[:3000])
        rc, out, err = cli(["report", *paths])
        ok("\ncall sites that differ across ranks (at exit): " in out.decode(), "at exit as before")


@test
def cli_ranks_missing_above_the_highest_by_the_jobs_size():
    """Ranks 0 and 1 of a job of 4 (WORLD_SIZE) left dumps, 2 and 3 were
    killed before they wrote one: the report counts them missing."""
    with workdir("vt-world-") as work:
        for r in (0, 1):
            run([os.path.join(T, "t_driver")], report="off",
                env={"RANK": str(r), "WORLD_SIZE": "4", "VRAMTRACE_OUT": os.path.join(work, "d.%r.json")})
        eq([json.load(open(os.path.join(work, f"d.{r}.json")))["world_size"] for r in (0, 1)], [4, 4], "the dumps say it")
        rc, out, err = cli(["report", os.path.join(work, "d.0.json"), os.path.join(work, "d.1.json")])
        out = out.decode() if isinstance(out, bytes) else out
        eq((rc, err or ""), (0, ""), "status")
        ok("\nranks: 2 dumps of 2 ranks from 0 to 1 of a job of 4; missing 2 of 0 to 3: 2-3\n" in out, out[:1500])
        rc, out, err = cli(["report", "--format", "json", os.path.join(work, "d.0.json"), os.path.join(work, "d.1.json")])
        j = json.loads(out)
        eq([(p["rank"], p["world_size"]) for p in j["processes"]], [(0, 4), (1, 4)], "the JSON's world_size")
        ok("first_to_fail" not in j, "no failure, none first")
        # Rank 2 fails: the JSON names it as the text does.
        run([os.path.join(T, "t_oom")], report="off",
            env={"RANK": "2", "WORLD_SIZE": "4", "SIMGPU_CAPACITY": "64M", "VRAMTRACE_OUT": os.path.join(work, "d.%r.json")})
        paths = [os.path.join(work, f"d.{r}.json") for r in (0, 1, 2)]
        rc, out, err = cli(["report", "--format", "json", *paths])
        eq(json.loads(out)["first_to_fail"], 2, "the JSON's first to fail: its place in processes")
        rc, out, err = cli(["report", *paths])
        out = out.decode() if isinstance(out, bytes) else out
        ok("first to fail: rank 2" in out, out[:1500])
        run([os.path.join(T, "t_driver")], report="off", env={"RANK": "2", "VRAMTRACE_OUT": os.path.join(work, "n.json")})
        ok("world_size" not in json.load(open(os.path.join(work, "n.json"))), "none said without a size")
        run([os.path.join(T, "t_driver")], report="off",
            env={"RANK": "5", "WORLD_SIZE": "4", "VRAMTRACE_OUT": os.path.join(work, "d.%r.json")})
        rc, out, err = cli(["report", os.path.join(work, "d.0.json"), os.path.join(work, "d.5.json")])
        out = out.decode() if isinstance(out, bytes) else out
        ok("\nranks: 2 dumps of 2 ranks from 0 to 5 of a job of 4 (the highest rank is past it); missing 4 of 0 to 5: "
           "1-4\n" in out, out[:1500])


# ------------------------------------------------------------ 21. wording


@test
def cli_singular_plural_and_layout():
    with workdir("vt-cli-words-") as work:
        d = json.load(open(os.path.join(GOLDEN, R0)))
        d["events"] = [d["events"][0], d["events"][-1]]            # one allocation, one OOM
        d["live"] = d["live"][:1]
        d["totals"].update(live_count=1, alloc_count=1, free_count=1, oom_count=1)
        d["ooms"].append(dict(d["ooms"][0]))
        d["ooms"][0].update(total_bytes=16 * MiB, free_bytes=8 * MiB, live_bytes=4 * MiB,
                            other_processes=[{"pid": 7, "name": "other", "used_bytes": 1 << 20}])
        path = os.path.join(work, "one.json")
        json.dump(d, open(path, "w"))
        rc, out, _ = cli(["report", path, "--top", "1"])
        text = out.decode()
        ok("totals:\n  live at exit: 4.00 MiB in 1 allocation; peak 12.00 MiB at 0.001 s\n"
           "  allocations 1, frees 1, failed 1 (out of memory 1)\n" in text, text)
        ok("timeline: 2 events over 0.071 s (1 allocation, 0 frees, 1 OOM);" in text, text)
        ok("(1 more out-of-memory failure)\n" in text, text)
        ok("  device: 8.00 MiB free of 16.00 MiB\n"
           "  held outside this process's tracked allocations: 4.00 MiB (CUDA context, other processes, "
           "untracked APIs)\n  tracked on device 0: 4.00 MiB live at the failure\n"
           "  other processes on this GPU (NVML): pid 7 (other) 1.00 MiB\n  requested from:\n"
           "    #0 0x55abb532521f in huge_request tests/progs/t_phases.c:32\n" in text,
           "the OOM's stack has its heading:\n" + text)
        rc, out, _ = cli(["report", path, "--format", "html"])
        ok("live 4.00 MiB in 1 allocation; peak 12.00 MiB at 0.001 s; 1 allocation, 1 free, "
           "1 out-of-memory failure</p>" in out.decode(), "html totals")
        rc, out, _ = cli(["report", os.path.join(GOLDEN, "python.json")])
        text = out.decode()
        ok("0x0 in" not in text, "no address on a Python frame")
        ok("      #6 in alloc /src/vramtrace/tests/py/frames.py:34\n" in text, "a Python frame's line")
        p = subprocess.run([CLI, "--help"], capture_output=True, text=True)
        env = p.stdout.split("environment:\n", 1)[1].splitlines()
        with open(os.path.join(ROOT, "README.md")) as f:
            options = re.findall(r"^\| `(VRAMTRACE_[A-Z_]+)` \|", f.read(), re.M)
        eq(sorted(l.split()[0] for l in env), sorted(options), "one line per option, as in the README's table")
        eq(len({l.index(" default ") for l in env}), 1, "the default column lines up")
        eq(len({re.match(r"  \S+ +default \S+ +", l).end() for l in env}), 1, "the meaning column lines up")


# ----------------------------------------- a label cut inside a character


@test
def cli_long_names_cut_at_a_character():
    """A name is cut at load to 1,023 bytes ending in "..." (VM_NAME_MAX),
    before a character the cut would split: cut inside 'é' it was not
    UTF-8, the pickle could not be read and JSON lost the holder."""
    path = seed("cli-long-name.json")
    rc, out, err = cli(["report", path, "--format", "torch"])
    eq((rc, err), (0, ""), "torch status")
    names = [s["frames"][1]["name"] for s in pickle.loads(out)["segments"]]
    eq(sorted(names), ["a" * 1020 + "...", "steady_state"], "the torch label cut before the character")
    sites = [s["frames"][0]["name"] for s in pickle.loads(out)["segments"]]
    eq(sorted(sites), ["a" * (1023 - len(" (call site)")) + " (call site)", "steady_state (call site)"],
       "the call site's name cut before the character too, its ' (call site)' kept")
    rc, out, err = cli(["report", path, "--format", "json"])
    holders = json.loads(out)["processes"][0]["holders"]
    eq(sorted(h["site"] for h in holders), ["a" * 1020 + "...", "steady_state tests/progs/t_phases.c:20"],
       "both holders in JSON, the long site cut before the character")
    rc, out, err = cli(["report", path, "--format", "folded"])
    eq(sorted({l.split(";", 1)[0] for l in out.decode().splitlines()}), sorted(h["site"] for h in holders),
       "the folded roots are the JSON holders' sites, the long one cut where they cut it (before: its file:line "
       "after the cut name)")
    rc, out, err = cli(["report", path, "--format", "html"])
    ok(out.count(b'class="flame"') == 1 and b'"' + b"a" * 1020 + b'..."' in out and b"a" * 1021 not in out,
       "the flame graph keeps the frame")


def many_names_dump(version, napis):
    """A dump whose live allocations name `napis` distinct APIs over the
    kinds "async" and "vmm" (so napis + 2 names), every 997th a VMM handle
    beside its address; version 1 from optional-fields.json, version 2 from
    v2-host-vmm.json. Returns (dump, the live entries as the JSON report
    should list them)."""
    d = json.load(open(seed("optional-fields.json" if version == 1 else "v2-host-vmm.json")))
    want, live = [], []
    for i in range(napis):
        kind = "vmm" if i % 997 == 0 else "async"
        e = {"address": "0x%x" % (0x7f0000000000 + i * 0x1000), "bytes": 4096 + i, "kind": kind, "api": "api_%05d" % i,
             "device": 0, "stack": 0, "thread": 1 + i % 7, "time_ns": i}
        if kind == "vmm":
            e["handle"] = "0x%x" % (0x10000 + i)
        want.append(e)
    if version == 1:
        d["live"] = want
    else:
        base = len(d["strings"])
        d["strings"] += ["async", "vmm"] + [e["api"] for e in want]
        for i, e in enumerate(want):
            row = [e["address"], e["bytes"], base + (1 if e["kind"] == "vmm" else 0), base + 2 + i, 0, 0, e["thread"],
                   e["time_ns"]]
            live.append(row + [e["handle"]] if "handle" in e else row)
        d["live"] = live
    return d, want


@test
def cli_live_names_many_and_too_many():
    """A live allocation keeps its kind and API as an index into the dump's
    names (cli/model_names.c: 16 bits, so 40 bytes an allocation, not 64):
    65,535 distinct names in all are read back, every allocation with its
    own name, kind and handle, in both versions; one more is one error
    line, never a wrong name."""
    fields = ("address", "bytes", "kind", "api", "device", "thread", "time_ns", "handle")
    with workdir("vt-cli-names-") as work:
        for version in (1, 2):
            path = os.path.join(work, "d%d.json" % version)
            d, want = many_names_dump(version, 65533)
            json.dump(d, open(path, "w"))
            rc, out, err = cli(["report", path, "--format", "json"])
            eq((rc, err), (0, ""), f"version {version}: 65,535 names: status")
            got = json.loads(out)["processes"][0]["live"]
            eq(len(got), 65533, f"version {version}: every allocation listed")
            wrong = [i for i, (g, w) in enumerate(zip(got, want))
                     if {k: g[k] for k in fields if k in g} != {k: w[k] for k in fields if k in w}]
            eq(wrong[:3], [], f"version {version}: each allocation's own kind, API and handle (the first wrong)")
            d, _ = many_names_dump(version, 65534)
            json.dump(d, open(path, "w"))
            rc, out, err = cli(["report", path, "--format", "json"])
            eq(rc, 1, f"version {version}: 65,536 names refused")
            one_error_line(err, "vramtrace report: ", f"version {version}: 65,536 names")
            ok("more than 65535 distinct kinds and APIs" in err, f"version {version}: the error says why: {err!r}")


@test
def cli_holder_counts_in_32_bits():
    """A holder's allocation count is kept in 32 bits (cli/model.h: a
    holder is 16 bytes, as the tracker's are): 4,294,967,295 allocations
    at a call site read back exactly, in both versions, with the bytes
    beside them; one more is one error line naming the holder, never a
    count cut to 0."""
    with workdir("vt-cli-count-") as work:
        for version in (1, 2):
            d = json.load(open(seed("optional-fields.json" if version == 1 else "v2-host-vmm.json")))
            path = os.path.join(work, "d%d.json" % version)
            for count, good in ((2**32 - 1, True), (2**32, False)):
                if version == 1:
                    d["holders"][1]["count"] = count
                    d["holders"][1]["bytes"] = 2**40 + 3
                else:
                    d["holders"][5] = count
                    d["holders"][4] = 2**40 + 3
                json.dump(d, open(path, "w"))
                rc, out, err = cli(["report", path, "--format", "json"])
                if good:
                    eq((rc, err), (0, ""), f"version {version}: a count of 2^32 - 1: status")
                    held = [(h["count"], h["bytes"]) for h in json.loads(out)["processes"][0]["holders"]
                            if h["bytes"] == 2**40 + 3]
                    eq(held, [(2**32 - 1, 2**40 + 3)], f"version {version}: the holder's count and bytes")
                else:
                    eq(rc, 1, f"version {version}: a count of 2^32 refused")
                    one_error_line(err, "vramtrace report: ", f"version {version}: a count of 2^32")
                    want = 'holders: field "count" is out of range' if version == 1 else "holders[1] is malformed"
                    ok(want in err, f"version {version}: says which: {err!r}")


@test
def cli_dumps_of_one_process_are_said_so():
    """Three dumps, two of them of one process (the same pid, host and
    start: named dumps, or one beside the exit dump): the text report says
    so once, for that process, whose newest dump alone the holders combined
    take; two dumps of two processes get no such line."""
    work = tempfile.mkdtemp(prefix="vt-cli-same-")
    try:
        for name, src in (("a.json", R0), ("b.json", R0), ("c.json", R1)):
            shutil.copy(os.path.join(GOLDEN, src), os.path.join(work, name))
        rc, out, err = cli(["report"] + [os.path.join(work, n) for n in ("a.json", "b.json", "c.json")])
        eq((rc, err), (0, ""), "status")
        notes = [l for l in out.decode().splitlines() if l.startswith("note:")]
        eq(notes, ["note: 2 of these dumps are of one process (pid 8447 on node1): the holders combined take its "
                   "newest alone"], "one note, for pid 8447")
        eq(out.decode().splitlines()[0], "3 dumps of 2 processes:", "the table's header")
        rc, out, err = cli(["report", os.path.join(GOLDEN, R0), os.path.join(GOLDEN, R1)])
        eq([l for l in out.decode().splitlines() if l.startswith("note:")], [], "none for two processes")
    finally:
        shutil.rmtree(work, ignore_errors=True)


@test
def cli_header_says_when_the_dump_was_written():
    """The header's "dump written ..." for each reason a dump has (a named
    dump read "dump written at named")."""
    with workdir("vt-cli-reason-") as work:
        d = json.load(open(os.path.join(GOLDEN, R0)))
        for reason, said in (("exit", "at exit"), ("oom", "at oom"), ("signal", "on a signal"),
                             ("named", "by vramtrace_dump")):
            d["reason"] = reason
            path = os.path.join(work, f"{reason}.json")
            json.dump(d, open(path, "w"))
            rc, out, err = cli(["report", path])
            eq((rc, out.decode().splitlines()[0].rsplit("(", 1)[1]), (0, f"dump written {said})"), reason)
            rc, out, err = cli(["report", path, "--format", "html"])
            ok(f'<p class="totals">dump written {said};' in out.decode(), f"{reason}: the page's line")


@test
def cli_live_columns_are_the_ones_named():
    """A version 2 dump's live rows are read by place, so its "live_fields"
    must name the columns this reader reads: reordered, missing or with a
    column added, the dump is refused with one line (it was read as if they
    were the usual ones); the usual list, with or without "handle", reads."""
    from dumpview import v2_of
    d = v2_of(json.load(open(os.path.join(GOLDEN, R0))))
    usual = d["live_fields"]
    eq(usual, ["address", "bytes", "kind", "api", "device", "stack", "thread", "time_ns", "handle"], "as written")
    with workdir("vt-cli-cols-") as work:
        for name, fields, ok_rc in (("usual", usual, 0), ("eight", usual[:8], 0), ("reversed", usual[::-1], 1),
                                    ("missing", None, 1), ("added", usual + ["color"], 1),
                                    ("not a list", "address", 1)):
            doc = dict(d)
            if fields is None:
                del doc["live_fields"]
            else:
                doc["live_fields"] = fields
            path = os.path.join(work, "d.json")
            json.dump(doc, open(path, "w"))
            rc, out, err = cli(["report", path])
            eq(rc, ok_rc, f"{name}: {err}")
            if ok_rc:
                eq(err, f"vramtrace report: {path}: dump: field \"live_fields\" is not [\"address\", \"bytes\", "
                        "\"kind\", \"api\", \"device\", \"stack\", \"thread\", \"time_ns\", \"handle\"], the "
                        "columns this vramtrace reads (a newer vramtrace's dump?)\n", f"{name}: one line")


@test
def cli_failures_holders_read_alike_in_both_versions():
    """A version 2 dump's failures' holder lists are cut out of the text
    and found again by the failure's place: an object of the dump's own
    that looks like the reader's placeholder ({"v2span": 1}) is not a list
    (it was read as the second failure's list), and every format reads the
    version 1 and 2 forms alike. A failure whose holders were not kept
    (null) is said so, not "no out-of-memory failure"."""
    import copy
    from dumpview import v2_of
    base = json.load(open(os.path.join(GOLDEN, R0)))
    o = base["ooms"][0]
    second = copy.deepcopy(o)
    second["holders"] = o["holders"][:1]
    second["device_holders"] = o["holders"][:1]
    with workdir("vt-cli-span-") as work:
        for name, first in (("forged", {"v2span": 1}), ("null", None)):
            d = copy.deepcopy(base)
            d["ooms"] = [dict(copy.deepcopy(o), holders=None), second]
            paths = []
            for version, doc in ((1, d), (2, v2_of(d))):
                doc["ooms"][0]["holders"] = first
                paths.append(os.path.join(work, f"{name}.v{version}.json"))
                json.dump(doc, open(paths[-1], "w"))
            for fmt in ("text", "json", "folded", "html"):
                outs = [cli(["report", p, "--at", "oom", "--format", fmt]) for p in paths]
                eq(outs[0][0], outs[1][0], f"{name} {fmt}: status")
                if fmt != "html":
                    eq(outs[0][1].replace(paths[0].encode(), b"DUMP"), outs[1][1].replace(paths[1].encode(), b"DUMP"),
                       f"{name} {fmt}: versions 1 and 2 read alike")
            rc, out, err = cli(["report", paths[1], "--at", "oom"])
            ok(b"largest holders at oom: this dump has none (the first out-of-memory failure's holders were not "
               b"kept)\n" in out, f"{name}: " + out.decode()[:1500])


@test
def cli_folded_sums_held_at_the_top():
    """Two holders of 2^64 - 1 bytes at one call site (a hostile dump):
    the folded line holds at 2^64 - 1 as the text and json sums do (it
    wrapped to 2^64 - 2), and so does the rank comparison's sum."""
    d = json.load(open(os.path.join(GOLDEN, R0)))
    top = (1 << 64) - 1
    d["holders"] = [{"stack": 1, "bytes": top, "count": 1}, {"stack": 2, "bytes": top, "count": 1}]
    with workdir("vt-cli-top-") as work:
        path = os.path.join(work, "d.json")
        json.dump(d, open(path, "w"))
        rc, out, err = cli(["report", path, "--format", "folded"])
        eq((rc, [int(l.rsplit(b" ", 1)[1]) for l in out.splitlines()]), (0, [top]), "one line, held at 2^64 - 1")
        d["pid"] += 1
        other = os.path.join(work, "e.json")
        json.dump(d, open(other, "w"))
        rc, out, err = cli(["report", path, other, "--format", "folded"])
        eq((rc, sorted(int(l.rsplit(b" ", 1)[1]) for l in out.splitlines())), (0, [top, top]), "per process")


# ------------------------------------------------- 22. counts past INT64_MAX


def request_dumps(work, request):
    """phases.r0.json (version 1) and the same as version 2, with its OOM's
    request and the OOM event's bytes set to `request`; their paths."""
    from dumpview import v2_of
    d = json.load(open(seed("phases.r0.json")))
    d["ooms"][0]["requested_bytes"] = request
    next(e for e in d["events"] if e[1] == "oom")[3] = request
    paths = []
    for version, doc in ((1, d), (2, v2_of(d))):
        paths.append(os.path.join(work, f"v{version}.{request}.json"))
        json.dump(doc, open(paths[-1], "w"))
    return paths


@test
def cli_counts_above_int64_read_exactly():
    """The library writes a request as the uint64 it is: a program passing
    (size_t)-1 leaves 18446744073709551615, which jansson refused ("too big
    integer"), so the dump of the OOM most in need of explaining could not
    be read. Both versions now read it, and every output says it exactly,
    the rest byte for byte as with an ordinary request; 2^64 stays an
    error, and neither a string of digits nor a forged marker is a count."""
    big, small = 2**64 - 1, 2**40
    with workdir("vt-cli-u64-") as work:
        for path, plain in zip(request_dumps(work, big), request_dumps(work, small)):
            name = os.path.basename(path)
            for fmt in ("text", "json", "html", "folded"):
                rc, out, err = cli(["report", path, "--format", fmt])
                eq((rc, err), (0, ""), f"{name} {fmt}: status")
                _, want, _ = cli(["report", plain, "--format", fmt])
                want = want.replace(os.path.basename(plain).encode(), name.encode())
                for a, b in (("1.00 TiB (1099511627776 bytes)", "16384.00 PiB (18446744073709551615 bytes)"),
                             ('"requested_bytes": 1099511627776', '"requested_bytes": 18446744073709551615'),
                             ("1.00 TiB requested", "16384.00 PiB requested"),
                             ("1099511627776", "18446744073709551615")):
                    want = want.replace(a.encode(), b.encode())
                eq(out.decode(), want.decode(), f"{name} {fmt}: the request exactly, the rest as before")
            eq(json.loads(cli(["report", path, "--format", "json"])[1])["processes"][0]["ooms"][0]
               ["requested_bytes"], big, f"{name}: json's request")
            rc, out, err = cli(["report", path, "--format", "torch"])
            eq((rc, err), (0, ""), f"{name} torch: status")
            sizes = [e["size"] for t in pickle.loads(out)["device_traces"] for e in t if e["action"] == "oom"]
            # PyTorch's snapshot holds int64s: past INT64_MAX, INT64_MAX
            # (memory_viz's unpickler makes a longer integer a BigInt).
            eq(sizes, [min(big, 2**63 - 1)], f"{name} torch: the OOM's size")
            rc, out, err = cli(["diff", path, path])
            eq((rc, err), (0, ""), f"{name} diff: status")
            eq(out.decode(), cli(["diff", plain, plain])[1].decode().replace(os.path.basename(plain), name),
               f"{name} diff")
        # Past 2^64 - 1 jansson's refusal stands; a string is not a count;
        # a marker written in the dump is refused as any \u0000 is.
        d = json.load(open(seed("phases.r0.json")))
        path = os.path.join(work, "bad.json")
        for value, why in ((2**64, "not valid JSON (line 1, column %d: too big integer near '18446744073709551616')"),
                           (str(big), 'oom: field "requested_bytes" is missing or not an integer'),
                           (big, "not valid JSON (line 1, column %d: \\u0000 is not allowed)")):
            d["ooms"][0]["requested_bytes"] = value
            if value == big:
                d["ooms"][0]["live_bytes"] = ["\0" + str(big)]
            text = json.dumps(d)
            open(path, "w").write(text)
            column = (text.index("\\u0000") + 1 if value == big else
                      text.index('"requested_bytes": ') + len('"requested_bytes": ') + len(str(value)))
            rc, out, err = cli(["report", path])
            eq((rc, out, err), (1, b"", f"vramtrace report: {path}: " + (why % column if "%d" in why else why) + "\n"),
               f"requested_bytes {value!r} refused")


@test
def cli_no_failure_at_oom_is_status_0_in_every_format():
    """`--at oom` on a dump with no out-of-memory failure: every format says
    there is none and ends with status 0; folded writes no line and says so
    on stderr. Folded alone failed with status 1 (a script looping over the
    formats read it as a broken dump; from an outside check)."""
    path = os.path.join(GOLDEN, "python.json")
    for fmt in ("text", "json", "folded", "html", "torch"):
        rc, out, err = cli(["report", path, "--at", "oom", "--format", fmt])
        eq(rc, 0, f"{fmt}: status ({err})")
        if fmt == "folded":
            eq((out, err), (b"", f"vramtrace report: {path} has no holders at oom: nothing to fold\n"), "folded")
        else:
            eq(err, "", f"{fmt}: nothing on stderr")


@test
def cli_json_lists_cut_to_top_when_asked():
    """`--top N` cuts the JSON's lists too, saying how many it left out:
    the holders to the N largest of each of the N largest call sites, live
    to its N largest: a holder's frames are about 10 KB of JSON, and a dump
    of a million stacks made 10 GB whatever --top said (from an outside
    check). Without --top, every one, as before."""
    with workdir("vt-cli-top-") as work:
        path = os.path.join(work, "d.json")
        run([os.path.join(T, "t_deepleak"), "50"], env={"VRAMTRACE_OUT": path})
        rc, out, err = cli(["report", "--format", "json", path])
        eq(rc, 0, err)
        whole = json.loads(out)
        p = whole["processes"][0]
        eq((len(p["holders"]), len(p["live"]), len(whole["combined_holders"])), (50, 50, 2), "every one without --top")
        ok(not any(k.endswith("_left_out") for k in p), f"nothing left out: {sorted(p)}")
        rc, out, err = cli(["report", "--format", "json", "--top", "5", path])
        eq(rc, 0, err)
        cut = json.loads(out)
        q = cut["processes"][0]
        sites = [c["site"] for c in whole["combined_holders"]]
        eq(sorted(set(h["site"] for h in p["holders"])), sorted(sites), "the holders' 2 call sites")
        largest, seen = [], {}
        for h in p["holders"]:   # in order: largest first
            seen[h["site"]] = seen.get(h["site"], 0) + 1
            if seen[h["site"]] <= 5:
                largest.append(h)
        eq((q["holders"], q["holders_left_out"]), (largest, 40), "each call site's 5 largest holders, 40 left out")
        eq(len(largest), 10, "5 of each site")
        eq((q["live"], q["live_left_out"]), (p["live"][:5], 45), "the 5 largest live allocations, 45 left out")
        eq(cut["combined_holders"], whole["combined_holders"], "2 call sites: none left out")
        rc, out, err = cli(["report", "--format", "json", "--top", "1", path])
        one = json.loads(out)
        eq(one["combined_holders"], whole["combined_holders"][:1], "the largest call site")
        eq((one["processes"][0]["holders"], one["processes"][0]["holders_left_out"]),
           ([next(h for h in p["holders"] if h["site"] == sites[0])], 49), "its largest holder, 49 left out")


@test
def cli_json_top_keeps_the_text_reports_call_sites():
    """`--top N` keeps in the JSON's holders (by stack) the stacks of the N
    call sites the text report's holders table lists, the N largest of
    each: it kept the N largest stacks, so that a call site reached by many
    stacks (a helper called from 10 lines, 100 MiB in 10 MiB stacks) lost
    to one stack of 50 MiB, and `--top 1` named `one` in JSON, `grab` in
    text (from an outside check). Equal bytes come by call-site name, as
    the text's rows: `alpha` before `zeta`, allocated first."""
    with workdir("vt-cli-ranks-") as work:
        path = os.path.join(work, "d.json")
        run([os.path.join(T, "t_ranks")], env={"VRAMTRACE_OUT": path})
        at = {f: f"{f} tests/progs/t_ranks.c:{source_line('t_ranks.c', 'static void *' + f + '(')}"
              for f in ("grab", "one", "zeta", "alpha")}
        MiB = 1 << 20
        rc, out, err = cli(["report", "--top", "2", path])
        eq(rc, 0, err)
        rows = re.findall(r"^ +([0-9.]+ MiB) +[0-9.]+% +\d+ allocs? +(.*)$",
                          out.decode().split("largest holders by call site (4 call sites):\n")[1], re.M)[:2]
        eq(rows, [("100.00 MiB", at["grab"]), ("50.00 MiB", at["one"])], "the text's 2 rows")

        def json_holders(*top):
            rc, out, err = cli(["report", "--format", "json", *top, path])
            eq(rc, 0, err)
            p = json.loads(out)["processes"][0]
            return [(h["site"], h["bytes"] // MiB) for h in p["holders"]], p.get("holders_left_out")
        eq(json_holders("--top", "1"), ([(at["grab"], 10)], 12), "--top 1: a stack of grab, the text's row")
        eq(json_holders(), ([(at["one"], 50), (at["alpha"], 30), (at["zeta"], 30)] + [(at["grab"], 10)] * 10, None),
           "every stack, largest first, equal bytes by call-site name")
        eq(json_holders("--top", "2"), ([(at["one"], 50), (at["grab"], 10), (at["grab"], 10)], 10),
           "--top 2: one, and grab's 2 largest stacks")
        eq(json_holders("--top", "3"), ([(at["one"], 50), (at["alpha"], 30)] + [(at["grab"], 10)] * 3, 8),
           "--top 3: alpha, whose name comes before zeta's")


@test
def cli_text_after_the_dump_refused():
    """Text after a version 2 dump's closing brace (a stray byte, a second
    dump appended to the same file) is refused with jansson's one line, as
    after a version 1 dump: the reader's scanner of version 2 stopped at the
    brace and printed the first dump alone. White space after it is read."""
    d = open(seed("v2-host-vmm.json"), "rb").read().rstrip()
    with workdir("vt-cli-tail-") as work:
        path = os.path.join(work, "d.json")
        open(path, "wb").write(d)
        want = cli(["report", path])
        eq((want[0], want[2]), (0, ""), "the dump itself")
        lines = d.decode().count("\n") + 1
        for tail, why in ((b"X", "line %d, column %d: end of file expected near 'X'" % (lines, len(d.decode().rsplit("\n", 1)[-1]) + 1)),
                          (b"\n" + d, "line %d, column 1: end of file expected near '{'" % (lines + 1))):
            open(path, "wb").write(d + tail)
            for fmt in ("text", "json", "folded", "html", "torch"):
                rc, out, err = cli(["report", path, "--format", fmt])
                eq((rc, out, err), (1, b"", f"vramtrace report: {path}: not valid JSON ({why})\n"),
                   f"{tail[:2]!r} after the dump, {fmt}")
        open(path, "wb").write(d + b"\n \t\r\n")
        eq(cli(["report", path]), want, "white space after the dump")


@test
def cli_escaped_keys_read_as_jansson_reads_them():
    """A version 2 dump whose "version" key is written with an escape, or
    with a key of its own holding an escaped quote, is read as Python and
    jansson read it: every format the same as from the plain dump. Both
    were refused as a dump of an unsupported version (the version key was
    compared undecoded, and an escaped quote ended a key)."""
    text = open(seed("v2-host-vmm.json")).read()
    with workdir("vt-cli-esc-") as work:
        plain = os.path.join(work, "plain.json")
        open(plain, "w").write(text)
        for name, edited in (("version", text.replace('"version"', '"versio\\u006e"', 1)),
                             ("own key", text.rstrip()[:-1] + ', "x\\"y]": [1, "}"]}'),
                             ("own key first", '{"a\\"b": 1, ' + text.lstrip()[1:])):
            eq(json.loads(edited)["version"], 2, f"{name}: Python reads it as version 2")
            path = os.path.join(work, "d.json")
            open(path, "w").write(edited)
            for fmt in ("text", "json", "folded", "html", "torch"):
                rc, out, err = cli(["report", path, "--format", fmt])
                want = cli(["report", plain, "--format", fmt])
                eq((rc, err), (0, ""), f"{name}, {fmt}")
                eq(out.replace(b"d.json", b"plain.json"), want[1], f"{name}, {fmt}: as from the plain dump")


@test
def cli_minus_zero_count_read_as_jansson_reads_it():
    """A count written "-0" in a version 2 dump's tables (live allocations'
    times) is 0, as Python and jansson read it: every format the same as
    from the dump with 0 there. It was refused as a malformed row, while
    "-0" where a signed value stands was read. "-1" stays refused."""
    d = json.load(open(seed("v2-host-vmm.json")))
    d["live"][0][7] = 0
    d["live"][2][7] = 0
    with workdir("vt-cli-m0-") as work:
        plain = os.path.join(work, "plain.json")
        text = json.dumps(d)
        open(plain, "w").write(text)
        edited = text
        for row in (d["live"][0], d["live"][2]):
            was = json.dumps(row)
            eq(was.endswith(", 0]"), True, "the time ends the row")
            edited = edited.replace(was, was[:-2] + "-0]", 1)
        eq(edited.count(", -0]"), 2, "both times written as -0")
        eq(json.loads(edited), d, "Python reads -0 as 0")
        path = os.path.join(work, "d.json")
        open(path, "w").write(edited)
        for fmt in ("text", "json", "folded", "html", "torch"):
            rc, out, err = cli(["report", path, "--format", fmt])
            want = cli(["report", plain, "--format", fmt])
            eq((rc, err), (0, ""), fmt)
            eq(want[0], 0, fmt + " from the plain dump")
            eq(out.replace(b"d.json", b"plain.json"), want[1], f"{fmt}: as from the dump with 0")
        open(path, "w").write(edited.replace(", -0]", ", -1]", 1))
        rc, out, err = cli(["report", path])
        eq(rc, 1, "a time of -1 is refused")


@test
def cli_duplicate_keys_refused_whichever_field():
    """A top-level key given twice is refused with jansson's one error line,
    whichever field it is: before, a second copy of a version 2 table that
    the reader's own scanner reads (live, holders, strings ...) was
    silently ignored, while jq and Python take the last copy. Also when
    the copy is written with escapes, and at the end of the document."""
    d = json.load(open(seed("v2-host-vmm.json")))
    with workdir("vt-cli-dup-") as work:
        path = os.path.join(work, "dup.json")
        for key in ("strings", "frames", "nodes", "stacks", "live", "events", "holders", "peak_holders",
                    "totals", "live_fields"):
            value = json.dumps(d[key])
            rest = json.dumps(d)[1:]
            for second, where in (('"%s"' % key, "first"), ('"%s\\u%04x%s"' % (key[:2], ord(key[2]), key[3:]), "escaped"),
                                  ('"%s"' % key, "last")):
                if where == "last":
                    text = '{' + rest[:-1] + ',\n' + second + ': ' + value + '}'
                else:
                    text = '{"%s": %s,\n%s: %s, %s' % (key, value, second, value, rest)
                open(path, "w").write(text)
                column = len(second)
                rc, out, err = cli(["report", path])
                eq((rc, out, err), (1, b"", f"vramtrace report: {path}: not valid JSON (line 2, column {column}: "
                                             f"duplicate object key near '{second}')\n"), f"{key} twice ({where})")


@test
def cli_endless_input_refused_early():
    """An input that is no regular file and whose first 64 KiB do not begin
    a JSON object (/dev/zero, a FIFO that never ends) is refused after
    them, in bounded memory: before, it was read whole first (/dev/zero
    grew by 2 GB every 10 s). A dump through a pipe reads as before."""
    def limited():
        resource.setrlimit(resource.RLIMIT_AS, (256 << 20, 256 << 20))
    p = subprocess.run([CLI, "report", "/dev/zero"], capture_output=True, text=True, timeout=30, preexec_fn=limited)
    eq((p.returncode, p.stdout, p.stderr), (1, "", "vramtrace report: /dev/zero: not valid JSON (line 1, column 1: "
                                            "'[' or '{' expected near end of file); read no further than its first "
                                            "65536 bytes, as a dump begins with '{'\n"), "/dev/zero")
    yes = subprocess.Popen(["yes", "[1,"], stdout=subprocess.PIPE)
    try:
        p = subprocess.run([CLI, "report", "/dev/stdin"], stdin=yes.stdout, capture_output=True, text=True,
                           timeout=30, preexec_fn=limited)
    finally:
        yes.kill()
        yes.wait()
    eq((p.returncode, p.stdout), (1, ""), "an endless array: status")
    eq(p.stderr, "vramtrace report: /dev/stdin: not valid JSON (line 2048, column 2: maximum parsing depth "
                 "reached near '1'); read no further than its first 65536 bytes, as a dump begins with '{'\n",
       "an endless array: one line")
    golden = os.path.join(GOLDEN, R0)
    with open(golden, "rb") as f:
        text = f.read() + b" " * (1 << 17)
    p = subprocess.run([CLI, "report", "/dev/stdin"], input=text, capture_output=True, timeout=30)
    eq((p.returncode, p.stderr), (0, b""), "a dump through a pipe: status")
    eq(p.stdout, cli(["report", golden])[1].replace(golden.encode(), b"/dev/stdin"), "a dump through a pipe")


@test
def cli_report_of_one_process_dumps_compares_it_with_nothing():
    """One process's on-demand dumps and its exit dump (kill -USR2, then
    report vt.*.json): one process, so no "peaks: highest ... lowest" and
    no "peak imbalance" of the process against itself (1.22x and 1.08x
    were printed under "the dumps of one process as one: 1 pid"; now "1 process"), and no
    rank column of 0 for a process no launcher gave a rank."""
    with workdir("vt-one-proc-") as work:
        r = run([os.path.join(T, "t_leaks"), "signal"], env={"VRAMTRACE_REPORT": "off",
                                            "VRAMTRACE_OUT": os.path.join(work, "d.%p.json")})
        eq(r.rc, 0, r.err)
        paths = sorted(glob.glob(os.path.join(work, "d.*.json")))
        eq(len(paths), 3, "two on-demand dumps and the exit's")
        rc, out, err = cli(["report", *paths])
        out = out.decode()
        pid, host = (json.load(open(paths[0]))[k] for k in ("pid", "host"))
        lines = out.split("\n\n")[0].splitlines()
        eq((rc, err), (0, ""), "status")
        eq([l.split()[:2] for l in lines[2:5]], [[str(pid), "-"]] * 3, "the table: no rank")
        eq(lines[5:7], [f"note: 3 of these dumps are of one process (pid {pid} on {host}): "
                        "the holders combined take its newest alone",
                        "ranks: 3 of these 3 dumps say no rank (no RANK, LOCAL_RANK or the like held a rank): "
                        "compared by pid, the dumps of one process as one: 1 process"], out[:2000])
        eq(lines[7], "holders at exit combined across processes:", out[:2000])
        ok(f"\n== pid {pid}, no rank, host {host}: " in out, out[:3000])


@test
def cli_report_of_processes_with_several_dumps_differs_at_their_exit():
    """Two ranks, each with two named dumps and its exit dump, that free
    before exit what they made between the named dumps: the call sites
    that differ at exit are those of each process's exit dump (the site
    freed before exit was named from the named dumps, "20.00 MiB to 40.00
    MiB (rank 1)", beside holders combined that had no such site)."""
    with workdir("vt-multidump-") as work:
        for rank, mib in ((0, 10), (1, 20)):
            r = run([os.path.join(T, "t_multidump"), str(mib)],
                    env={"RANK": str(rank), "WORLD_SIZE": "2", "VRAMTRACE_REPORT": "off",
                         "VRAMTRACE_OUT": os.path.join(work, "vt.%p.json")})
            eq(r.rc, 0, r.err)
        paths = sorted(glob.glob(os.path.join(work, "vt.*.json")))
        eq(len(paths), 6, "two named dumps and the exit's, of two processes")
        rc, out, err = cli(["report", *paths])
        out = out.decode()
        keep = source_line("t_multidump.c", "cudaMalloc(&p, mib << 20);")
        eq((rc, err), (0, ""), "status")
        head = out.split("\n\n")[0]
        ok("\ncall sites that differ across ranks (at exit): 1\n"
           f"  keep tests/progs/t_multidump.c:{keep}: 10.00 MiB to 20.00 MiB (rank 1) on 2 of 2 ranks (0-1)\n"
           "holders at exit combined across processes:\n"
           f"    30.00 MiB in 2 allocations in 2 processes  keep tests/progs/t_multidump.c:{keep}" in head, head)


@test
def cli_first_to_fail_of_processes_without_a_rank_names_the_pid():
    """Two processes no launcher gave a rank, each failing: the first to
    fail is named by its pid, as the table ("-") and the ranks line ("say
    no rank") name them (it said "rank 0 (pid N)")."""
    with workdir("vt-cli-first-") as work:
        for _ in range(2):
            r = run([os.path.join(T, "t_oom")], env={"SIMGPU_CAPACITY": "64M", "VRAMTRACE_REPORT": "off",
                                                    "VRAMTRACE_OUT": os.path.join(work, "o.%p.json")})
            eq(r.rc, 1, r.err)
        paths = sorted(glob.glob(os.path.join(work, "o.*.json")), key=lambda p: json.load(open(p))["start_unix_ns"])
        first = json.load(open(paths[0]))["pid"]
        for fmt, want in (("text", f"\nfirst to fail: pid {first}, 32.00 MiB requested by cudaMalloc: "),
                          ("html", f'<p class="first-to-fail">first to fail: pid {first}, 32.00 MiB requested by ')):
            rc, out, err = cli(["report", "--format", fmt, *paths])
            out = out.decode()
            eq((rc, err), (0, ""), f"{fmt}: status")
            ok(want in out and "first to fail: rank" not in out, f"{fmt}:\n" + out[:1500])


@test
def cli_report_says_which_process_of_a_rank_and_where_the_job_is():
    """Dumps of one rank's several processes (multiprocessing workers that
    all say rank 0): the peaks name their pids, not "rank 0" twice; one
    dump of a job of several ranks says the rest of the job is not among
    the dumps given."""
    with open(os.path.join(GOLDEN, R0)) as f:
        d = json.load(f)
    work = tempfile.mkdtemp(prefix="vt-ranks-")
    try:
        a, b = copy.deepcopy(d), copy.deepcopy(d)
        b["pid"] = a["pid"] + 1
        b["totals"]["peak_bytes"] = 2 * a["totals"]["peak_bytes"]
        paths = [os.path.join(work, "a.json"), os.path.join(work, "b.json")]
        for x, p in zip((a, b), paths):
            with open(p, "w") as f:
                json.dump(x, f)
        rc, out, err = cli(["report"] + paths)
        lines = [l for l in out.decode().splitlines() if l.startswith(("peaks", "peak imbalance"))]
        eq((rc, err, lines), (0, "", [
            f"peaks: highest 24.00 MiB (rank 0, pid {b['pid']}), lowest 12.00 MiB (rank 0, pid {a['pid']}); the "
            "highest is 2.00x the lowest",
            f"peak imbalance: highest 24.00 MiB (rank 0, pid {b['pid']}) over the median 18.00 MiB = 1.33x"]),
           "the peaks by pid")
        c = copy.deepcopy(d)
        c["rank"], c["world_size"] = 2, 4
        with open(paths[0], "w") as f:
            json.dump(c, f)
        rc, out, err = cli(["report", paths[0]])
        eq(out.decode().splitlines()[:2], ["ranks: this dump is rank 2's of a job of 4; the other ranks' dumps are "
                                           "not among these", ""], "one rank's dump of a job of four")
        rc, out, err = cli(["report", os.path.join(GOLDEN, R0)])
        ok(not out.decode().startswith("ranks:"), "a dump of no job of ranks says nothing of them")
    finally:
        shutil.rmtree(work, ignore_errors=True)


@test
def cli_report_tables_keep_their_columns_for_a_long_run():
    """A job three days long: the devices' "peak at" and the live
    allocations' times fit their columns (whole seconds past 9999.999 s)
    instead of pushing the row out of line."""
    with open(os.path.join(GOLDEN, R0)) as f:
        d = json.load(f)
    d["devices"][0]["peak_time_ns"] = 259212122000000
    for a in d["live"]:
        a["time_ns"] = 259206898000000
    work = tempfile.mkdtemp(prefix="vt-long-")
    try:
        path = os.path.join(work, "long.json")
        with open(path, "w") as f:
            json.dump(d, f)
        rc, out, err = cli(["report", path])
        lines = out.decode().splitlines()
        head = next(i for i, l in enumerate(lines) if l.startswith("  #   name"))
        row = lines[head + 1]
        at = lines[head].index("peak at")
        eq(row[at - 2:at + 7], "  259212s", "the devices' peak at, under its header")
        eq(len(row.split("  GPU-")[0]), len(lines[head].split("  uuid")[0]), "the uuid column where the header has it")
        live = [l for l in lines if " dev 0  0x" in l]
        ok(live and all(" 259207s  " in l for l in live), f"the live allocations' times: {live}")
    finally:
        shutil.rmtree(work, ignore_errors=True)


# ------------------------------------------- 20. figures a program's dump gives


def report_of(argv, env=None, formats=("text",)):
    """Run argv under vramtrace; the text (or other formats') reports of its
    dump, with the dump itself."""
    with workdir("vt-figures-") as work:
        path = os.path.join(work, "d.json")
        r = run(argv, report="off", env=dict(env or {}, VRAMTRACE_OUT=path))
        outs = []
        for fmt in formats:
            rc, out, err = cli(["report", "--format", fmt, path])
            eq((rc, err), (0, ""), f"report --format {fmt}: status")
            outs.append(out.decode())
        return r, load_dump(path), outs


@test
def cli_timeline_counts_a_refused_free_apart():
    """A free the driver refuses (cuMemFreeHost of registered memory,
    cuMemHostUnregister of cuMemHostAlloc's memory) is in the history as a
    free and the allocation's return. The timeline line counted both as a
    free and an allocation: 6 allocations and 5 frees, two lines below the
    totals' 4 and 3. Now the two refused frees are said apart and the
    counts agree with the totals; with older events dropped (which of the
    kept ones are refused cannot be told) the events are counted as kept."""
    _, d, (text,) = report_of([os.path.join(T, "t_host"), "host-register"])
    eq((d["totals"]["alloc_count"], d["totals"]["free_count"], len(d["events"])), (4, 3, 11), "the dump")
    lines = text.splitlines()
    eq([l for l in lines if l.startswith("  allocations ")], ["  allocations 4, frees 3, failed 3 (out of memory 0)"],
       "the totals")
    eq([re.sub(r" over [0-9.]+ s", " over T s", l.split(";")[0]) for l in lines if l.startswith("timeline:")],
       ["timeline: 11 events over T s (4 allocations, 3 frees, 2 frees the driver refused, 0 OOMs)"],
       "the timeline's counts")
    _, d, (text,) = report_of([os.path.join(T, "t_host"), "host-register"], env={"VRAMTRACE_EVENTS": "4"})
    eq((len(d["events"]), d["events_dropped"]), (4, 7), "the newest 4 events kept")
    eq([re.sub(r" over [0-9.]+ s", " over T s", l.split(";")[0]) for l in text.splitlines()
        if l.startswith("timeline:")],
       ["timeline: 4 events over T s (1 allocation, 3 frees, 0 OOMs, older events dropped)"],
       "the events kept, as they are")


@test
def cli_json_has_the_imported_memory_the_text_has():
    """Memory of another process opened through IPC (a handle opened twice,
    one mapping, and closed once: still open at exit) is in the dump's
    `imported_memory` and the text report's line; the JSON report left it
    out. Now each process has it next to `host_memory`."""
    _, d, (text, js) = report_of([os.path.join(T, "t_arrays"), "ipc-twice"], formats=("text", "json"))
    eq(d["imported_memory"], {"live_bytes": 1 << 20, "live_count": 1}, "the dump")
    eq([l for l in text.splitlines() if "IPC" in l], ["  memory opened from other processes (IPC): 1.00 MiB in 1 mapping"],
       "the text report")
    p = json.loads(js)["processes"][0]
    eq(p["imported_memory"], {"live_bytes": 1 << 20, "live_count": 1}, "the JSON report")
    eq(list(p).index("imported_memory"), list(p).index("host_memory") + 1, "next to host_memory")


@test
def cli_dumps_of_one_process_say_which_dump_each_is():
    """Rank 5's on-demand dumps 1 and 2 and its exit dump, beside rank 0's:
    the table's three rows of rank 5 read alike but for their figures, and
    the sections said "(dump written on a signal)" twice. Now, where a
    process has several dumps, a column and each section say which dump it
    is: why it was written, an on-demand dump's number, and when."""
    with workdir("vt-cli-which-") as work:
        base = json.load(open(os.path.join(GOLDEN, R0)))
        paths = []
        for name, rank, reason, number, ms in (("a", 0, "exit", None, 900), ("b", 5, "signal", 1, 250),
                                               ("c", 5, "signal", 2, 500), ("d", 5, "exit", None, 750)):
            d = copy.deepcopy(base)
            d.update(rank=rank, reason=reason, time_ns=ms * 1000000, pid=8400 + rank)
            if number:
                d["dump_number"] = number
            paths.append(os.path.join(work, f"{name}.json"))
            json.dump(d, open(paths[-1], "w"))
        rc, out, err = cli(["report", *paths])
        out = out.decode()
        eq((rc, err), (0, ""), "status")
        lines = out.splitlines()
        eq(lines[1:6],
           ["  pid      rank  host                        peak        live  ooms  dump                  command",
            "  8400     0     node1                  12.00 MiB    4.00 MiB     1  exit, 0.900 s         "
            "/src/vramtrace/build/tests/t_phases",
            "  8405     5     node1                  12.00 MiB    4.00 MiB     1  signal 1, 0.250 s     "
            "/src/vramtrace/build/tests/t_phases",
            "  8405     5     node1                  12.00 MiB    4.00 MiB     1  signal 2, 0.500 s     "
            "/src/vramtrace/build/tests/t_phases",
            "  8405     5     node1                  12.00 MiB    4.00 MiB     1  exit, 0.750 s         "
            "/src/vramtrace/build/tests/t_phases"], "the table's rows")
        eq([l.split(": ", 1)[1] for l in lines if l.startswith("== pid ")],
           ["/src/vramtrace/build/tests/t_phases (dump written at exit)",
            "/src/vramtrace/build/tests/t_phases (dump written on a signal, number 1, at 0.250 s)",
            "/src/vramtrace/build/tests/t_phases (dump written on a signal, number 2, at 0.500 s)",
            "/src/vramtrace/build/tests/t_phases (dump written at exit, at 0.750 s)"], "each section says which dump")
        rc, out, err = cli(["report", "--format", "json", *paths])
        eq([(p["reason"], p.get("dump_number")) for p in json.loads(out)["processes"]],
           [("exit", None), ("signal", 1), ("signal", 2), ("exit", None)], "the JSON's processes")
        rc, out, err = cli(["report", "--format", "html", *paths])
        page = out.decode()
        eq([page.count(f">rank 5 (pid 8405, {w})</option>") for w in ("signal 1, 0.250 s", "signal 2, 0.500 s",
                                                                       "exit, 0.750 s")], [1, 1, 1], "the page's choices")


def pid1_dumps(work, base, reasons=(("signal", 1, 55000000), ("signal", 2, 451000000), ("exit", 0, 851000000))):
    """Three containers' programs, each pid 1 on one host, begun one after
    another, each with two on-demand dumps and its exit dump (R0's holders):
    the nine paths, in the order a shell's glob gives them (each dump's
    number first: signal 1 of each, then signal 2, then exit)."""
    paths = []
    for number, (reason, dump_number, t) in enumerate(reasons):
        for k in range(3):
            d = dict(base, pid=1, rank_known=False, reason=reason, time_ns=t + k * 1000000,
                     start_unix_ns=base["start_unix_ns"] + (2 - k) * 857000000)
            d.pop("dump_number", None)
            if dump_number:
                d["dump_number"] = dump_number
            paths.append(os.path.join(work, f"d{number}.{k}.json"))
            json.dump(d, open(paths[-1], "w"))
    return paths


def began(ns):
    return f"begun {time.strftime('%Y-%m-%d %H:%M:%S', time.gmtime(ns // 10**9))}.{ns % 10**9 // 10**6:03d} UTC"


@test
def cli_folded_takes_each_process_newest_dump_alone():
    """Several dumps of one process (on-demand dumps beside its exit dump)
    were each folded, so that its bytes were multiplied by its number of
    dumps, and three pid-1 containers' processes (one pid on one host,
    begun one after another) read as one 'pid 1' frame: 9 dumps of 3
    processes holding 4 MiB each folded to 36 MiB where the holders
    combined said 12 MiB in 3 processes. Folded now takes of each process
    its newest dump alone, and a process of a pid shared on its host is
    told by when it began, as the text's note says it."""
    base = json.load(open(os.path.join(GOLDEN, R0)))
    with workdir("vt-cli-foldnewest-") as work:
        paths = pid1_dumps(work, base)
        rc, out, err = cli(["report", *paths, "--format", "folded"])
        eq((rc, err), (0, ""), "status")
        frames = ";_start;__libc_start_main;__libc_start_call_main;main;steady_state 4194304"
        eq(out.decode().splitlines(),
           [f"steady_state tests/progs/t_phases.c:20;pid 1 {began(base['start_unix_ns'] + (2 - k) * 857000000)}"
            + frames for k in range(3)], "one line of each process, its exit dump's 4 MiB")
        rc, out, err = cli(["report", *paths])
        ok("    12.00 MiB in 6 allocations in 3 processes  steady_state tests/progs/t_phases.c:20\n"
           in out.decode(), out.decode()[:3000])
        # A parent and its child (two pids), each with an on-demand dump
        # and its exit dump: each folded once.
        r1 = json.load(open(os.path.join(GOLDEN, R1)))
        two = []
        for name, doc in (("p", base), ("c", dict(r1, rank_known=False, pid=8448))):
            for reason, t in (("signal", 30000000), ("exit", 90000000)):
                two.append(os.path.join(work, f"{name}.{reason}.json"))
                json.dump(dict(doc, rank_known=False, reason=reason, time_ns=t), open(two[-1], "w"))
        rc, out, err = cli(["report", *two, "--format", "folded"])
        eq((rc, err), (0, ""), "status of the two")
        eq(out.decode().splitlines(),
           ["steady_state tests/progs/t_phases.c:20;pid 8447" + frames,
            "steady_state tests/progs/t_phases.c:20;pid 8448" + frames,
            "rank_extra tests/progs/t_phases.c:26;pid 8448;_start;__libc_start_main;__libc_start_call_main;main;"
            "rank_extra 1048576"], "each process's bytes once")


@test
def cli_rows_of_one_process_lie_together_and_say_which_pid_1():
    """Nine dumps of three pid-1 containers' processes, given as a glob
    gives them, were listed signal 1 three times, signal 2 three times,
    exit three times, each row 'pid 1' alike: which row was which process
    could not be told. The rows (and the sections below them) now list
    each process's dumps together, processes by when they began and dumps
    by when they were written, and where processes of one pid on one host
    are given, the dump column and the section say when the process began,
    as its note does; a parent and its child keep a dump column as wide
    as before."""
    base = json.load(open(os.path.join(GOLDEN, R0)))
    with workdir("vt-cli-rows-") as work:
        rc, out, err = cli(["report", *pid1_dumps(work, base)])
        eq((rc, err), (0, ""), "status")
        lines = out.decode().splitlines()
        starts = [base["start_unix_ns"] + k * 857000000 for k in range(3)]
        rows = []
        for k, s in enumerate(starts):
            t = (2 - k) * 0.001   # pid1_dumps: the k-th given began (2 - k) * 0.857 s after the first
            for which in (f"signal 1, {0.055 + t:.3f} s", f"signal 2, {0.451 + t:.3f} s", f"exit, {0.851 + t:.3f} s"):
                rows.append(f"  1        -     {'node1':<20} {'12.00 MiB':>11} {'4.00 MiB':>11}     1  "
                            f"{which + ', ' + began(s):<52}  {base['argv'][0]}")
        eq(lines[2:11], rows, "rows of one process together, each saying which")
        eq(lines[1], "  pid      rank  host                        peak        live  ooms  " + "dump".ljust(52) +
           "  command", "the header")
        heads = [l for l in lines if l.startswith("== ")]
        eq(heads[:3], [f"== pid 1, no rank, host node1: {base['argv'][0]} (dump written {w}, {began(starts[0])})"
                       for w in ("on a signal, number 1, at 0.057 s", "on a signal, number 2, at 0.453 s",
                                 "at exit, at 0.853 s")], "the first process's sections, in the table's order")
        # A parent (its exit dump given first) and its child: each's rows
        # together, without a start.
        r1 = json.load(open(os.path.join(GOLDEN, R1)))
        two = []
        for name, doc, reason, t in (("p1", base, "exit", 90000000), ("c1", r1, "signal", 30000000),
                                     ("p0", base, "signal", 30000000), ("c2", r1, "exit", 90000000)):
            two.append(os.path.join(work, f"{name}.json"))
            json.dump(dict(doc, rank_known=False, rank=0, reason=reason, time_ns=t), open(two[-1], "w"))
        rc, out, err = cli(["report", *two])
        eq([l[:10] + l[69:].replace(base["argv"][0], "CMD") for l in out.decode().splitlines()[1:6]],
           ["  pid     dump                  command", "  8447    signal, 0.030 s       CMD",
            "  8447    exit, 0.090 s         CMD", "  8448    signal, 0.030 s       CMD",
            "  8448    exit, 0.090 s         CMD"], "parent's dumps, then the child's")
