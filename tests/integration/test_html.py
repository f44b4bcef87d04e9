"""The HTML report: its controls clicked in headless Chromium (the page's
own #selftest), one screenshot per view checked for content, the figures
the page states, the data block it draws from, and hostile names."""
import base64
import copy
import itertools
import re
import struct
import zlib

from run_tests import *
from dumpview import fmt_bytes

SELFTEST_ONE = ("sort ok; zoom ok; unzoom ok; hover ok; timeline zoom ok; axis ok; steps: none; search ok; collapse ok; "
                "flame device ok; tensors: none; row ok; rank: one dump; errors none")
SELFTEST_MULTI = SELFTEST_ONE.replace("rank: one dump", "rank ok")


def chromium_run(page, fragment="", shot=None, size="1100,800"):
    """Chromium's DOM (or, with shot, a screenshot) of the page, and the
    console lines it logged."""
    exe = shutil.which("chromium") or shutil.which("chromium-browser")
    if not exe:
        raise Failure("chromium is not installed (make deps installs it)")
    prof = tempfile.mkdtemp(prefix="vt-html-chromium-")
    try:
        args = [exe, "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                "--disable-background-networking", "--disable-component-update", "--disable-sync",
                "--hide-scrollbars", f"--user-data-dir={prof}", f"--window-size={size}", "--enable-logging=stderr",
                "--v=0"]
        args += [f"--screenshot={shot}"] if shot else ["--virtual-time-budget=3000", "--dump-dom"]
        p = subprocess.run(args + ["file://" + page + fragment], capture_output=True, text=True, timeout=180)
    finally:
        shutil.rmtree(prof, ignore_errors=True)
    eq(p.returncode, 0, "chromium status")
    console = [l for l in p.stderr.splitlines() if "CONSOLE" in l or "Content Security Policy" in l]
    return p.stdout, console


def page_of(work, name, args):
    path = os.path.join(work, name)
    rc, _, err = report(args + ["--format", "html", "-o", path])
    eq((rc, err), (0, ""), f"report {args}")
    return path


def selftest_of(dom):
    m = re.search(r'<pre id="selftest">([^<]*)</pre>', dom)
    ok(m, "the page ran its self-test")
    return m.group(1)


def png_pixels(path):
    """(width, height, rows of RGB tuples) of an 8-bit RGB or RGBA PNG."""
    data = open(path, "rb").read()
    eq(data[:8], b"\x89PNG\r\n\x1a\n", "a PNG")
    pos, idat, w = 8, b"", 0
    while pos < len(data):
        n, kind = struct.unpack(">I4s", data[pos:pos + 8])
        body = data[pos + 8:pos + 8 + n]
        if kind == b"IHDR":
            w, h, depth, ctype = struct.unpack(">IIBB", body[:10])
            eq((depth, ctype in (2, 6)), (8, True), "8-bit RGB(A)")
            bpp = 4 if ctype == 6 else 3
        elif kind == b"IDAT":
            idat += body
        pos += 12 + n
    raw, stride, prev, rows = zlib.decompress(idat), w * bpp, bytearray(w * bpp), []
    for y in range(h):
        f, line = raw[y * (stride + 1)], bytearray(raw[y * (stride + 1) + 1:(y + 1) * (stride + 1)])
        if f == 1:
            for i in range(bpp, stride):
                line[i] = (line[i] + line[i - bpp]) & 255
        elif f == 2:
            line = bytearray((a + b) & 255 for a, b in zip(line, prev))
        elif f == 3:
            for i in range(stride):
                line[i] = (line[i] + ((line[i - bpp] if i >= bpp else 0) + prev[i]) // 2) & 255
        elif f == 4:
            for i in range(stride):
                a, b, c = (line[i - bpp] if i >= bpp else 0), prev[i], (prev[i - bpp] if i >= bpp else 0)
                p = a + b - c
                pa, pb, pc = abs(p - a), abs(p - b), abs(p - c)
                line[i] = (line[i] + (a if pa <= pb and pa <= pc else b if pb <= pc else c)) & 255
        rows.append([tuple(line[i:i + 3]) for i in range(0, stride, bpp)])
        prev = line
    return w, h, rows


@test
def html_selftest_clicks_every_control():
    """Sort and filter, flame zoom and unzoom, timeline hover (its bytes
    checked against a sum of the events), drag-zoom and reset, axis switch,
    search, folding library frames, a row's stack, the rank selector: each
    worked in Chromium, and nothing went to the console."""
    work = tempfile.mkdtemp(prefix="vt-html-")
    try:
        for args, want in ((["python.json"], SELFTEST_ONE), ([R0, R1], SELFTEST_MULTI),
                           ([R0, R1, "--at", "oom"], SELFTEST_MULTI)):
            dom, console = chromium_run(page_of(work, "p.html", args), "#selftest")
            eq(selftest_of(dom), want, f"self-test of {args}")
            eq(console, [], f"console of {args}")
    finally:
        shutil.rmtree(work, ignore_errors=True)


@test
def html_selftest_at_checkpoint_scale():
    """A generated dump of 30,000 events, past the timeline's checkpoints
    (every 8192 events): the hovered bytes still equal the sum of the
    events, and every control works."""
    sys.path.insert(0, os.path.join(ROOT, "bench"))
    import bench_html
    work = tempfile.mkdtemp(prefix="vt-html-")
    try:
        path = os.path.join(work, "big.json")
        with open(path, "w") as f:
            json.dump(bench_html.dump(30000, 3000, 3000), f)
        dom, console = chromium_run(page_of(work, "big.html", [path]), "#selftest")
        eq(selftest_of(dom), SELFTEST_ONE, "self-test")
        eq(console, [], "console")
        ok('class="legend-item oom-key"' in dom and dom.count("<canvas") == 2, "two devices, the OOM in the legend")
    finally:
        shutil.rmtree(work, ignore_errors=True)


VIEWS = {  # view: (least distinct colours, least share of pixels not white)
    "summary": (20, 0.03), "timeline": (12, 0.10), "flame": (12, 0.04), "tables": (12, 0.02), "ranks": (12, 0.03),
}


@test
def html_screenshot_of_each_view_has_content():
    """One screenshot per view (#view=NAME shows it alone): each has text
    and colour, and the timeline its series' own colours, the flame graph
    its frames' (not a blank canvas)."""
    work = tempfile.mkdtemp(prefix="vt-html-")
    try:
        page = page_of(work, "m.html", [R0, R1])
        for view, (colours, share) in VIEWS.items():
            shot = os.path.join(work, view + ".png")
            _, console = chromium_run(page, "#view=" + view, shot=shot)
            eq(console, [], f"{view}: console")
            w, h, rows = png_pixels(shot)
            eq((w, h), (1100, 800), f"{view}: screenshot size")
            counts = {}
            for row in rows:
                for px in row:
                    counts[px] = counts.get(px, 0) + 1
            inked = 1 - counts.get((255, 255, 255), 0) / (w * h)
            ok(len(counts) >= colours and inked >= share,
               f"{view}: {len(counts)} colours, {inked:.3f} of the pixels not white")
            if view == "timeline":
                # warmup_buffer's and steady_state's bands: 12 MiB tall,
                # 4 MiB wide over 3 events, in the first two colours.
                ok(counts.get((0x1f, 0x77, 0xb4), 0) > 20000, f"the first series drawn: {counts.get((0x1f, 0x77, 0xb4))}")
                ok(counts.get((0xff, 0x7f, 0x0e), 0) > 5000, f"the second series drawn: {counts.get((0xff, 0x7f, 0x0e))}")
            if view == "flame":
                ok(counts.get((0xdd, 0xdd, 0xdd), 0) > 10000, "the root frame drawn across the width")
    finally:
        shutil.rmtree(work, ignore_errors=True)


@test
def html_top_says_what_happened():
    """The page opens with the post-mortem's words and figures: the OOM,
    what was held outside tracked allocations and free, the findings; the
    several-dump part names the first to fail and compares holders."""
    work = tempfile.mkdtemp(prefix="vt-html-")
    try:
        d = json.load(open(os.path.join(GOLDEN, R0)))
        d["ooms"][0].update(free_bytes=8 << 20, total_bytes=16 << 20, live_bytes=4 << 20)
        d["ooms"][0]["findings"] = [{"id": "fragmentation", "finding": "4.00 MiB is held outside tracked allocations",
                                     "next": "look for another allocator"}]
        path = os.path.join(work, "d.json")
        json.dump(d, open(path, "w"))
        raw = open(page_of(work, "d.html", [path])).read()
        ok('<p class="oom-line">out of memory #1 at 0.005 s: 14.00 MiB requested by cudaMalloc on device 0; '
           '8.00 MiB free of 16.00 MiB; 4.00 MiB tracked live</p>' in raw, "the OOM line")
        ok("<li>held outside tracked allocations: 4.00 MiB</li>" in raw, "outside tracked")
        ok('<li><span class="finding">4.00 MiB is held outside tracked allocations</span><br><span class="next">'
           'next: look for another allocator</span></li>' in raw, "the finding and its next step")
        ok("<td class=n>16.00 MiB</td><td class=n>4.00 MiB</td><td class=n>4.00 MiB (at OOM)</td>"
           "<td class=n>8.00 MiB (at OOM)</td><td class=n>12.00 MiB at 0.001 s</td><td class=n>1</td>" in raw,
           "the device: total, allocated, outside tracked, free, peak, OOMs")
        ok(raw.index('class="oom-line"') < raw.index('data-view="timeline"'), "the OOM above the timeline")
        raw = open(page_of(work, "m.html", [R0, R1])).read()
        ok('<p class="first-to-fail">first to fail: rank 0 (pid 8447), 14.00 MiB requested by cudaMalloc on '
           'device 0 at 0.005 s</p>' in raw, "the first to fail")
        ok('<tr><td>rank_extra tests/progs/t_phases.c:26</td><td class=n data-v="1048576">1.00 MiB</td>'
           '<td class=n data-v="0">0 B</td><td class=n data-v="1048576">1.00 MiB</td></tr>' in raw,
           "holders compared across ranks")
        eq(raw.count('<div class="peak-row">'), 2, "the peaks side by side")
        ok('<option value="0" selected>rank 0 (pid 8447)</option><option value="1">rank 1 (pid 8448)</option>' in raw,
           "the rank selector starts at the first to fail")
        # Two dumps of one process (on request, at exit): told apart by why.
        d = json.load(open(os.path.join(GOLDEN, R1)))
        d["reason"] = "signal"
        with open(os.path.join(work, "r1.signal.json"), "w") as f:
            json.dump(d, f)
        raw = open(page_of(work, "m2.html", [R0, R1, os.path.join(work, "r1.signal.json")])).read()
        ok('<option value="1">rank 1 (pid 8448, exit, 0.071 s)</option><option value="2">rank 1 (pid 8448, signal, '
           '0.071 s)</option>' in raw, "the selector tells a process's two dumps apart")
    finally:
        shutil.rmtree(work, ignore_errors=True)


@test
def html_timeline_axes_ticks_and_legend():
    """The timeline's axes with ticks in their units (bytes in binary units,
    the event number, or with "axis=time" in the fragment the time in the
    unit its span suits), the legend naming each call site's band, the other sites, the OOM and the
    peak; and the page self-contained: no address to fetch, no inline
    event handler, no style attribute in its markup."""
    work = tempfile.mkdtemp(prefix="vt-html-")
    try:
        page = page_of(work, "r.html", [R0])
        raw = open(page, encoding="utf-8").read()
        for bad in ("http:", "https:", "//cdn", "src=", "<link", "<iframe", " style="):
            ok(bad not in raw, f"not in the page: {bad!r}")
        ok(not re.search(r"<[^>]*\son[a-z]+\s*=", raw), "no inline event handler")
        dom, console = chromium_run(page, "#view=timeline")
        eq(console, [], "console")
        ok('data-yticks="0 B | 2.00 MiB | 4.00 MiB | 6.00 MiB | 8.00 MiB | 10.00 MiB | 12.00 MiB" '
           'data-xticks="event number: 0 | 1 | 2 | 3 | 4 | 5 | 6 | 7 | 8"' in dom, "the axes' ticks")
        legend = re.search(r'<div class="legend">(.*?)</div>', dom).group(1)
        eq(re.findall(r"<span>([^<]*)</span>|<span class=\"legend-item [a-z]+-key\">([^<]*)</span>", legend),
           [("warmup_buffer tests/progs/t_phases.c:14", ""), ("steady_state tests/progs/t_phases.c:20", ""),
            ("other call sites", ""), ("", "\u2506 OOM: 14.00 MiB requested"), ("", "\u25cf peak 12.00 MiB")],
           "the legend")
        dom, console = chromium_run(page, "#view=timeline&axis=time")
        eq(console, [], "console")
        ok('data-xticks="time since start (ms): 0 | 10 | 20 | 30 | 40 | 50 | 60 | 70"' in dom,
           "the time axis's ticks: " + dom[dom.find("data-xticks"):][:90])
    finally:
        shutil.rmtree(work, ignore_errors=True)


def many_failures_dump():
    """R0 failing 7004 times: 5000 times 14 MiB at huge_request, then 1, 2
    and 3 MiB once each, then 13 MiB 2000 times at steady_state on a
    worker thread and once more, the last failure (#7004, at 1.2 s), from
    main through another line (a stack of the same call site). Its
    records keep the first 12 failures and the last, as the library's
    ring keeps the first and the newest."""
    d = json.load(open(os.path.join(GOLDEN, R0)))
    MiB, events, reqs = 1 << 20, [e for e in d["events"] if e[1] != "oom"], []
    first = d["ooms"][0]
    failures = ([(14 * MiB, 3, 8447)] * 5000 + [(k * MiB, 3, 8447) for k in (1, 2, 3)] +
                [(13 * MiB, 1, 8450)] * 2000 + [(13 * MiB, 2, 8447)])
    times = [5000000 + 1000 * i for i in range(len(failures) - 1)] + [1200000000]
    records = []
    for i, ((nbytes, stack, thread), t) in enumerate(zip(failures, times)):
        events.append([t, "oom", "0x0", nbytes, 0, stack, "device"])
        if i < 12 or i == len(failures) - 1:
            records.append(dict(first, number=i + 1, requested_bytes=nbytes, stack=stack, thread=thread, time_ns=t))
        if reqs and reqs[-1]["requested_bytes"] == nbytes and reqs[-1]["stack"] == stack:
            reqs[-1].update(count=reqs[-1]["count"] + 1, last_number=i + 1, last_ns=t, last_thread=thread)
        else:
            reqs.append({"requested_bytes": nbytes, "api": "cudaMalloc", "kind": "device", "device": 0,
                         "stack": stack, "count": 1, "first_number": i + 1, "first_ns": t, "first_thread": thread,
                         "last_number": i + 1, "last_ns": t, "last_thread": thread})
    d["events"], d["ooms"], d["oom_requests"], d["time_ns"] = events, records, reqs, 1300000000
    for x in (d["totals"], d["devices"][0]):
        x["oom_count"] = x["failed_count"] = len(failures)
    return d


@test
def html_failures_by_request_and_the_last_failure():
    """7004 failures of six requests, the first 10 shown: the page lists
    the failures by request, the text report's lines (from the dump's
    oom_requests, the two stacks of one call site together), also when
    --top cuts them, and shows the last failure, a request the first 10
    never name; the timeline's legend has a key per requested size that
    failed most (4) and one for the rest, where it had one per failure."""
    work = tempfile.mkdtemp(prefix="vt-html-")
    try:
        path = os.path.join(work, "many.json")
        json.dump(many_failures_dump(), open(path, "w"))
        want = ["14.00 MiB by cudaMalloc on device 0 at huge_request tests/progs/t_phases.c:32: 5000 times, from "
                "0.005 s to 0.010 s",
                "13.00 MiB by cudaMalloc on device 0 at steady_state tests/progs/t_phases.c:20: 2001 times, from "
                "0.010 s to 1.200 s",
                "1.00 MiB by cudaMalloc on device 0 at huge_request tests/progs/t_phases.c:32: once, at 0.010 s",
                "2.00 MiB by cudaMalloc on device 0 at huge_request tests/progs/t_phases.c:32: once, at 0.010 s",
                "3.00 MiB by cudaMalloc on device 0 at huge_request tests/progs/t_phases.c:32: once, at 0.010 s"]
        for top, lines in ((None, want), ("2", want[:2] + ["(3 more failures of 3 other requests)"])):
            args = [path] + (["--top", top] if top else [])
            rc, out, err = report(args)
            eq((rc, err), (0, ""), f"text report {args}")
            text = out.decode()
            after = text[text.index("out-of-memory failures by request:\n"):].split("\n")[1:]
            eq([l[2:] for l in itertools.takewhile(lambda l: l.startswith("  "), after)], lines,
               f"the text's lines {args}")
            raw = open(page_of(work, "many.html", args)).read()
            shown = int(top or 10)
            ok(f"<p>({7004 - shown} more out-of-memory failures)</p>\n<h4>out-of-memory failures by request</h4>\n"
               '<ul class="oom-requests">' + "".join(f"<li>{l}</li>" for l in lines) + "</ul>\n" in raw,
               f"the page's list {args}: the text's lines")
            ok('<h4>the last out-of-memory failure</h4>\n<div class="oom"><p class="oom-line">out of memory #7004 at '
               '1.200 s: 13.00 MiB requested by cudaMalloc on device 0; 12.00 MiB free of 16.00 MiB; 4.00 MiB '
               'tracked live</p>' in raw, f"the last failure {args}")
            eq(raw.count('<p class="oom-line">'), shown + 1, f"the first {shown} failures and the last {args}")
        dom, console = chromium_run(os.path.join(work, "many.html"), "#view=timeline")
        eq(console, [], "console")
        eq(re.findall(r'<span class="legend-item oom-key">([^<]*)</span>', dom),
           ["\u2506 OOM: 14.00 MiB requested, 5000 times", "\u2506 OOM: 13.00 MiB requested, 2001 times",
            "\u2506 OOM: 1.00 MiB requested", "\u2506 OOM: 2.00 MiB requested",
            "\u2506 OOM: 1 more failure of 1 other size"], "the legend: a key per size, 5 in all")
    finally:
        shutil.rmtree(work, ignore_errors=True)


def unpack(s):
    """A packed array of the data block (cli/html/pack.c) as numbers, as the
    page's unpack reads it; anything else as it is."""
    if not isinstance(s, str):
        return s
    out, v, shift, total = [], 0, 0, 0
    for c in base64.b64decode(s[1:]):
        v |= (c & 127) << shift
        shift += 7
        if c & 128:
            continue
        if s[0] != "u":
            v = -(v + 1) // 2 if v & 1 else v // 2
        if s[0] == "d":
            total += v
            v = total
        out.append(v)
        v, shift = 0, 0
    return out


def data_block(raw, k=0):
    """The data block of dump k as the page's readData sees it: packed
    arrays unpacked, frame and call-site names from the names table."""
    m = re.search(r'<script type="application/json" id="vt-data-%d">(.*?)</script>' % k, raw, re.S)
    ok(m, "the data block")
    d = json.loads(m.group(1))
    for key in ("np", "nf", "sn", "so", "sp", "names", "exit", "exit_dev", "exit_split", "peak", "peak_dev",
                "peak_split"):
        d[key] = unpack(d.get(key))
    for dev in d["devices"]:
        dev["dt"], dev["b"] = unpack(dev["dt"]), unpack(dev["b"])
    for o in d["ooms"]:
        for key in ("holders", "holders_dev", "holders_split", "device_holders"):
            o[key] = unpack(o.get(key))
    for key in ("b", "k", "a", "d", "x", "t", "th", "s"):
        d["live"][key] = unpack(d["live"][key])

    def name(e):
        a, b, line = d["names"][3 * e:3 * e + 3]
        return d["strs"][a] + (" " + d["strs"][b - 1] if b else "") + (f":{line}" if line else "")
    d["lib"] = [int(c) for c in d["lib"]]
    d["fw"] = [name(e) for e in range(len(d["lib"]))]
    d["sites"], i = [], 0
    while i < len(d["sp"]):
        d["sites"].append(" -> ".join(name(e) for e in d["sp"][i + 1:i + 1 + d["sp"][i]]))
        i += d["sp"][i] + 1
    return d


@test
def html_folded_json_and_text_order_equal_holders_alike():
    """Holders of equal bytes come by call-site name in every format, as
    the text report's rows: `alpha` before `zeta` (allocated first) in the
    text, the JSON's holders, the folded lines and the page's holders (its
    table's rows as first drawn, its flame graph's), at exit and at the
    peak. JSON, folded and the page kept the dump's order, zeta first (from
    an outside check)."""
    with workdir("vt-html-ties-") as work:
        path = os.path.join(work, "d.json")
        run([os.path.join(T, "t_ranks")], env={"VRAMTRACE_OUT": path})
        at = {f: f"{f} tests/progs/t_ranks.c:{source_line('t_ranks.c', 'static void *' + f + '(')}"
              for f in ("grab", "one", "zeta", "alpha")}
        want = [at["one"], at["alpha"], at["zeta"], at["grab"]]
        for moment in ("exit", "peak"):
            rc, out, err = report([path, "--at", moment], cwd=work)
            eq((rc, err), (0, ""), "text")
            text = out.decode().split("call sites):\n")[1]
            eq(re.findall(r"^ +[0-9.]+ MiB +[0-9.]+% +\d+ allocs? +(.*)$", text, re.M)[:4],
               [at["grab"], at["one"], at["alpha"], at["zeta"]], f"{moment}: the text's rows")
            rc, out, err = report([path, "--at", moment, "--format", "json"], cwd=work)
            eq((rc, err), (0, ""), "json")
            sites = [h["site"] for h in json.loads(out)["processes"][0]["holders"]]
            eq(list(dict.fromkeys(sites)), want, f"{moment}: the JSON's holders")
            rc, out, err = report([path, "--at", moment, "--format", "folded"], cwd=work)
            eq((rc, err), (0, ""), "folded")
            eq([l.split(";")[0] for l in out.decode().splitlines()], want, f"{moment}: the folded lines")
            raw = open(page_of(work, "p.html", [path, "--at", moment]), encoding="utf-8").read()
            d = data_block(raw)
            h = d["exit" if moment == "exit" else "peak"]
            eq(list(dict.fromkeys(d["sites"][d["so"][s]] for s in h[0::3])), want, f"{moment}: the page's holders")


@test
def html_data_block_holds_the_dump():
    """The data the script draws: each device's events (time deltas, signed
    bytes in units, one series character each) add up to the dump's; the
    stack tree gives back every stack; library frames are flagged."""
    work = tempfile.mkdtemp(prefix="vt-html-")
    try:
        dump = json.load(open(os.path.join(GOLDEN, R0)))
        d = data_block(open(page_of(work, "r.html", [R0])).read())
        dev = d["devices"][0]
        evs = [e for e in dump["events"] if e[1] != "oom"]
        eq(dev["n"], len(evs), "events")
        eq([sum(dev["dt"][:i + 1]) for i in range(len(evs))], [e[0] for e in evs], "times")
        eq([b * dev["unit"] for b in dev["b"]], [e[3] if e[1] == "alloc" else -e[3] for e in evs], "bytes")
        eq(dev["base"] + sum(dev["b"]) * dev["unit"], dump["devices"][0]["live_bytes"], "ends at the live bytes")
        eq([d["sites"][d["series"][int(c, 36)]] if int(c, 36) < len(d["series"]) else "other" for c in dev["s"]],
           ["warmup_buffer tests/progs/t_phases.c:14"] * 6 + ["steady_state tests/progs/t_phases.c:20"] * 2, "series")
        eq(dev["oom_at"], [8, dump["ooms"][0]["time_ns"], 14 << 20], "the OOM after the 8th event")
        py = json.load(open(os.path.join(GOLDEN, "python.json")))
        d = data_block(open(page_of(work, "p.html", ["python.json"])).read())
        par = [i - p if p else -1 for i, p in enumerate(d["np"])]
        for s, stack in enumerate(py["stacks"]):
            got, n = [], d["sn"][s]
            while n >= 0:
                got.append(d["fw"][d["nf"][n]]); n = par[n]
            eq(len(got), len(stack["frames"]), f"stack {s}: its frames")
        lib = {w: l for w, l in zip(d["fw"], d["lib"])}
        eq(lib["alloc /src/vramtrace/tests/py/frames.py:34"], 0, "the user's Python")
        eq(lib["PyEval_EvalCode ./Include/internal/pycore_ceval.h:89"], 1, "the interpreter")
        eq(lib["ffi_call (libffi.so.8.1.2+0x6b0d)"], 1, "a system library")
    finally:
        shutil.rmtree(work, ignore_errors=True)


@test
def html_data_block_packed():
    """The data block's arrays as packed varints (cli/html/pack.c) and its
    names as pieces of one string table: for a generated dump of 30,000
    events, 3,000 live allocations and 3,000 stacks, the events take under
    6 bytes each and the whole block under 450,000 bytes (it was 9.9 bytes
    an event and 960,000 bytes as decimal JSON); every value comes back
    exact, addresses above 2^32 and time deltas included, and every
    frame's and call site's name reads as the text report has it."""
    sys.path.insert(0, os.path.join(ROOT, "bench"))
    import bench_html
    work = tempfile.mkdtemp(prefix="vt-html-")
    try:
        dump = bench_html.dump(30000, 3000, 3000)
        # An allocation at an address and with a size past 2^32, and a
        # time step past 2^32 ns.
        dump["live"][0].update(address="0x7fffffffe000", bytes=5 << 40)
        dump["events"][-2][0] += 1 << 33
        dump["events"][-1][0] += 1 << 33
        path = os.path.join(work, "gen.json")
        with open(path, "w") as f:
            json.dump(dump, f)
        raw = open(page_of(work, "gen.html", [path]), encoding="utf-8").read()
        block = re.search(r'<script type="application/json" id="vt-data-0">(.*?)</script>', raw, re.S).group(1)
        plain = json.loads(block)
        events = sum(len(json.dumps(dev[k])) for dev in plain["devices"] for k in ("dt", "b", "s"))
        ok(events < 6 * 30000 and len(block) < 450000, f"{events} bytes of events, {len(block)} of the block")
        d = data_block(raw)
        for dev in d["devices"]:
            evs = [e for e in dump["events"] if e[1] != "oom" and e[4] == dev["ordinal"]]
            t = 0
            times = [t := t + x for x in dev["dt"]]
            eq(times, [e[0] for e in evs], f"device {dev['ordinal']}: times")
            eq([b * dev["unit"] for b in dev["b"]], [e[3] if e[1] == "alloc" else -e[3] for e in evs], "bytes")
        L = d["live"]
        eq([(hex(x), b, dv, s, tt) for x, b, dv, s, tt in zip(L["x"], L["b"], L["d"], L["s"], L["t"])],
           [(a["address"], a["bytes"], a["device"], a["stack"], a["time_ns"]) for a in dump["live"]], "live")
        eq(d["exit"][:6], [dump["holders"][0]["stack"], dump["holders"][0]["bytes"], dump["holders"][0]["count"],
                           dump["holders"][1]["stack"], dump["holders"][1]["bytes"], dump["holders"][1]["count"]],
           "holders")
        par = [i - p if p else -1 for i, p in enumerate(d["np"])]
        for s in (0, 1, 2999):
            got, n = [], d["sn"][s]
            while n >= 0:
                got.append(d["fw"][d["nf"][n]]); n = par[n]
            eq(got[:4], ["cudaMalloc (libcudart.so.13+0x5000)",
                         "c10::cuda::CUDACachingAllocator::malloc (libc10_cuda.so+0x9000)",
                         f"forward_{s % 7} /venv/lib/python3.12/site-packages/torch/nn/modules/linear.py:{110 + s % 13}",
                         f"layer_{s % 100} model/block_{s % 20}.py:{10 + s // 100}"], f"stack {s}")
            eq(d["sites"][d["so"][s]], f"layer_{s % 100} model/block_{s % 20}.py:{10 + s // 100} -> forward_{s % 7} "
               f"torch/nn/modules/linear.py:{110 + s % 13}", f"stack {s}: its call site")
    finally:
        shutil.rmtree(work, ignore_errors=True)


HOSTILE = ['<script>alert(1)</script>', '<img src=x onerror=alert(2)>', '</script><script>alert(3)</script>',
           '"quoted\' & <b>bold</b>', 'esc\x1b[31mred\u202eevil\x07']


@test
def html_hostile_names_render_as_text():
    """Markup, script and control characters in every name a dump holds
    reach the page as text: nothing is injected, the data block stays one
    block, the controls still work, and a row's stack shows the names as
    they read in the text report (control characters as escapes)."""
    work = tempfile.mkdtemp(prefix="vt-html-")
    try:
        d = json.load(open(os.path.join(GOLDEN, R0)))
        for k, st in enumerate(d["stacks"]):
            for i, f in enumerate(st["frames"]):
                f["function"] = HOSTILE[(k + i) % len(HOSTILE)] + f"_{k}_{i}"
                f["file"] = HOSTILE[(k + i + 1) % len(HOSTILE)] + ".c"
            # The outermost frame named by its module's path.
            st["frames"][-1].update(file=None, module="/src/vramtrace/build/tests/" + HOSTILE[1] + "\x1b[0m")
        d["torch"] = [torch_device(0, [tensor(1 << 20, HOSTILE[k], HOSTILE[k + 1], 1, HOSTILE[k + 2], HOSTILE[k + 3],
                                              HOSTILE[(k + 4) % len(HOSTILE)]) for k in range(2)])]
        d["ooms"][0]["torch"] = [torch_device(0, [tensor(2 << 20, HOSTILE[4], HOSTILE[3], None)], request_bytes=1)]
        d["host"], d["reason"], d["argv"] = HOSTILE[0], HOSTILE[1], [HOSTILE[2]]
        d["devices"][0]["name"] = HOSTILE[3]
        for x in d["live"]:
            x["api"], x["kind"] = HOSTILE[4], HOSTILE[0]
        d["ooms"][0]["api"] = HOSTILE[1]
        path = os.path.join(work, "h.json")
        json.dump(d, open(path, "w"))
        page = page_of(work, "h.html", [path])
        raw = open(page, encoding="utf-8").read()
        for bad in ("<script>alert", "<img", "<b>bold", "</script><script>alert", "\x1b", "\u202e", "\x07"):
            ok(bad not in raw, f"not in the page: {bad!r}")
        eq(raw.count("<script"), 2, "the data block and the page's script, nothing more")
        data = data_block(raw)
        ok("<script>alert(1)</script>_0_0 <img src=x onerror=alert(2)>.c:14" in data["fw"] and
           r"esc\x1b[31mred\u202eevil\x07_0_4 (<img src=x onerror=alert(2)>\x1b[0m+0x10c1)" in data["fw"],
           "frames in their display form in the data")
        dom, console = chromium_run(page, "#selftest")
        eq(selftest_of(dom), SELFTEST_ONE.replace("tensors: none", "tensors ok"), "the controls work")
        eq(console, [], "console")
        ok("<img" not in dom and "<b>bold" not in dom and "alert(1)</script>" not in dom.split("<script")[0],
           "nothing injected into the DOM")
        # The first row: stack 2, whose call site's name ("</script>...")
        # comes before stack 1's ("<img ...") at equal bytes.
        ok('<li class="user">&lt;img src=x onerror=alert(2)&gt;_2_4 (&lt;img src=x onerror=alert(2)&gt;\\x1b[0m+0x10c1)'
           '</li><li class="sep">' in dom, "a row's stack as text, the user's frames first, a module's path")
        ok('<td data-v="&lt;script&gt;alert(1)&lt;/script&gt;">&lt;script&gt;alert(1)&lt;/script&gt;</td><td data-v="'
           '&lt;img src=x onerror=alert(2)&gt;">&lt;img src=x onerror=alert(2)&gt;</td>' in dom and
           r'<td data-v="esc\x1b[31mred\u202eevil\x07">esc\x1b[31mred\u202eevil\x07</td>' in dom,
           "a tensor's name, holder and dtype as text")
        ok(r'<li class="lib">esc\x1b[31mred\u202eevil\x07_2_2 &lt;script&gt;alert(1)&lt;/script&gt;.c:58</li>'
           r'<li class="lib">&lt;script&gt;alert(1)&lt;/script&gt;_2_3 &lt;img src=x onerror=alert(2)&gt;.c:360</li></ol>'
           in dom, "control characters as escapes, library frames last")
        ok("<title>vramtrace report</title>" in dom, "the title unchanged")
    finally:
        shutil.rmtree(work, ignore_errors=True)


def two_device_dump(dropped=0):
    """R0 on two devices: the second warm-up buffer (stack 0) and the second
    steady-state buffer (stack 2) on device 1, so that stack 0 is used on
    both devices and stack 2 on device 1 only."""
    d = json.load(open(os.path.join(GOLDEN, R0)))
    dev1 = dict(d["devices"][0], ordinal=1, uuid="GPU-1", live_bytes=2 << 20, live_count=1, peak_bytes=6 << 20,
                oom_count=0, failed_count=0)
    d["devices"][0].update(live_bytes=2 << 20, live_count=1, peak_bytes=8 << 20)
    d["devices"].append(dev1)
    for e in d["events"]:
        if e[2] in ("0x700000400200", "0x700000e00800"):
            e[4] = 1
    for x in d["live"]:
        if x["address"] == "0x700000e00800":
            x["device"] = 1
    d["events_dropped"] = dropped
    return d


@test
def html_flame_per_device_at_peak_and_oom():
    """The holders at exit, at the peak and at the OOM, kept by stack over
    all devices, split by device: a stack seen on one device is there, one
    seen on two is split by replaying the history (exact bytes and counts),
    or, when the history was overwritten, left unsplit and said so; the
    flame graph's device selector shows each in Chromium."""
    work = tempfile.mkdtemp(prefix="vt-html-")
    try:
        path = os.path.join(work, "two.json")
        json.dump(two_device_dump(), open(path, "w"))
        page = page_of(work, "two.html", [path])
        d = data_block(open(page).read())
        MiB = 1 << 20
        eq((d["exit"], d["exit_dev"], d["exit_split"]), ([1, 2 * MiB, 1, 2, 2 * MiB, 1], [0, 1], []),
           "exit: stack 1 on device 0, stack 2 on device 1")
        eq((d["peak"], d["peak_dev"], d["peak_split"]), ([0, 12 * MiB, 3], [-2], [0, 0, 8 * MiB, 2, 0, 1, 4 * MiB, 1]),
           "peak: stack 0 split by the history")
        eq(d["peak_at"], two_device_dump()["totals"]["peak_time_ns"],
           "the process's peak's time, for its name: 'peak of all devices together (T s)'")
        eq((d["ooms"][0]["holders_dev"], d["ooms"][0]["holders_split"]), ([0, 1], []), "OOM: by device")
        # Device 0 holds one stack at exit: a chain with nothing to zoom into.
        dom, console = chromium_run(page, "#selftest")
        eq(selftest_of(dom), SELFTEST_ONE.replace("zoom ok; unzoom ok", "zoom: nothing to zoom into"), "self-test")
        eq(console, [], "console")
        ok('<select class="fdevice"><option value="0">device 0</option><option value="1">device 1</option>'
           '<option value="all">all devices</option></select>' in dom, "the device selector")
        path = os.path.join(work, "dropped.json")
        json.dump(two_device_dump(dropped=1), open(path, "w"))
        page = page_of(work, "dropped.html", [path, "--at", "peak"])
        d = data_block(open(page).read())
        eq((d["peak_dev"], d["peak_split"]), ([-1], []), "peak: no history to split stack 0 by")
        eq((d["exit_dev"], d["exit_split"]), ([0, 1], []), "exit: single-device stacks still placed")
        dom, console = chromium_run(page, "#selftest")
        # Device 0 holds nothing it can be sure of at the peak: an empty graph.
        eq(selftest_of(dom), SELFTEST_ONE.replace("zoom ok; unzoom ok", "zoom: nothing to zoom into").replace(
            "search ok; collapse ok", "search: no frames; collapse: no library frames"), "self-test, history overwritten")
        ok('<p class="flame-note">12.00 MiB held on stacks used on several devices could not be split by device '
           '(the history does not go back far enough): "all devices" counts them</p>' in dom, "the note")
    finally:
        shutil.rmtree(work, ignore_errors=True)


@test
def html_holders_at_oom_of_the_failing_device():
    """--at oom where other devices held memory too: the holders table
    lists the failing device's holders alone (the OOM's device_holders),
    titled and shared out of that device's memory as the text report
    says it ("holders of device 0's memory"), and the flame graph of that
    device at the OOM holds the same bytes, exact even for a stack used on
    both devices that the history (overwritten) cannot split. The table
    listed every device's memory, shares of all of it."""
    work = tempfile.mkdtemp(prefix="vt-html-")
    try:
        MiB = 1 << 20
        d = two_device_dump(dropped=1)
        # Stack 0 on both devices (2 MiB each), stack 1 on device 0, stack 2 on device 1.
        d["ooms"][0]["holders"] = [{"stack": 0, "bytes": 4 * MiB, "count": 2}, {"stack": 1, "bytes": 2 * MiB, "count": 1},
                                   {"stack": 2, "bytes": 2 * MiB, "count": 1}]
        d["ooms"][0]["device_holders"] = [{"stack": 0, "bytes": 2 * MiB, "count": 1},
                                          {"stack": 1, "bytes": 2 * MiB, "count": 1}]
        path = os.path.join(work, "two.json")
        json.dump(d, open(path, "w"))
        rc, out, err = report([path, "--at", "oom"])
        eq((rc, err), (0, ""), "text report")
        ok("largest holders of device 0's memory at oom by call site (2 call sites):\n"
           "    2.00 MiB  50.0%      1 alloc   steady_state tests/progs/t_phases.c:20\n" in out.decode(),
           "the text: device 0's 4 MiB\n" + out.decode())
        page = page_of(work, "two.html", [path, "--at", "oom"])
        data = data_block(open(page).read())
        eq([o["device_holders"] for o in data["ooms"]], [[1, 2 * MiB, 1, 0, 2 * MiB, 1]],
           "the data: device 0's holders, equal bytes by call-site name as the text's rows")
        dom, console = chromium_run(page)
        eq(console, [], "console")
        table = re.search(r'<div class="vt-table-wrap"><h3>([^<]*)<input[^>]*></h3><table class="vt-table holders">'
                          r'(.*?)</table>', dom)
        ok(table, "the holders table")
        eq(table.group(1), "holders of device 0's memory at oom by stack (4.00 MiB)", "the table's title")
        eq(re.findall(r"<tr[^>]*>((?:<td[^>]*>[^<]*</td>)+)</tr>", table.group(2)),
           ['<td class="n" data-v="2097152">2.00 MiB</td><td class="n" data-v="2097152">50.0%</td><td class="n" '
            'data-v="1">1</td><td data-v="steady_state tests/progs/t_phases.c:20">steady_state tests/progs/'
            't_phases.c:20</td>',
            '<td class="n" data-v="2097152">2.00 MiB</td><td class="n" data-v="2097152">50.0%</td><td class="n" '
            'data-v="1">1</td><td data-v="warmup_buffer tests/progs/t_phases.c:14">warmup_buffer tests/progs/'
            't_phases.c:14</td>'], "the table's rows: device 0's, half each, as the text's")
        ok('<select class="fdevice"><option value="0">device 0</option>' in dom, "the flame graph on device 0")
        eq(re.findall(r'<div class="flame-node"[^>]*>(all \([^<]*)</div>', dom), ["all (4.00 MiB, 100.0%)"],
           "the flame graph of device 0 at the OOM: the same 4 MiB")
        ok('<p class="flame-note"></p>' in dom, "nothing left unsplit")
    finally:
        shutil.rmtree(work, ignore_errors=True)


def torch_device(dev, tensors, **extra):
    MiB = 1 << 20
    r = {"device": dev, "allocated_bytes": 3 * MiB, "reserved_bytes": 4 * MiB, "largest_free_block_bytes": MiB // 2,
         "outside_bytes": 300 * MiB, "free_bytes": 1024 * MiB, "total_bytes": 2048 * MiB, "steps": 7,
         "growth_per_step_bytes": MiB, "growth_steps": 6, "settings": "expandable_segments:False",
         "categories": {"parameter": MiB, "buffer": 0, "gradient": MiB, "optimizer_state": 0, "activation": 512,
                        "other": MiB // 2},
         "tensors": tensors}
    r.update(extra)
    return r


def tensor(nbytes, name, holder, stack, category="parameter", shape="[512, 512]", dtype="float32"):
    return {"bytes": nbytes, "shape": shape, "dtype": dtype, "category": category, "name": name, "holder": holder,
            "block_address": "0x7000", "segment_address": "0x7000", "stack": stack}


def torch_dump(names=("model.0.weight", "history[0]"), holders=("", "history")):
    """R0 with PyTorch's records: at exit (two tensors, the second without
    a stack) and in the OOM (one tensor and the failed request)."""
    MiB = 1 << 20
    d = json.load(open(os.path.join(GOLDEN, R0)))
    d["torch"] = [torch_device(0, [tensor(MiB, names[0], holders[0], 1),
                                   tensor(MiB // 2, names[1], holders[1], None, "other", "[1024]", "uint8")])]
    d["ooms"][0]["torch"] = [torch_device(0, [tensor(2 * MiB, names[0], holders[0], 2)], request_bytes=14 * MiB,
                                          allocated_bytes=2 * MiB, free_bytes=12 * MiB, total_bytes=16 * MiB)]
    return d


@test
def html_torch_view_and_tensors():
    """PyTorch's own figures per device at the top (allocated, reserved,
    outside PyTorch, free, the largest free block, the failed request at
    the OOM, steps, growth, categories), exact; and its tensors as tables,
    sorted, filtered and clicked to their stacks in Chromium."""
    work = tempfile.mkdtemp(prefix="vt-html-")
    try:
        path = os.path.join(work, "torch.json")
        json.dump(torch_dump(), open(path, "w"))
        page = page_of(work, "torch.html", [path])
        raw = open(page).read()
        cats = ("<th>device</th><th>parameter</th><th>buffer</th><th>gradient</th><th>optimizer_state</th>"
                "<th>activation</th><th>other</th><th>in no category</th></tr></thead><tbody>\n<tr><td class=n>0</td>"
                "<td class=n>1.00 MiB</td><td class=n>0 B</td><td class=n>1.00 MiB</td><td class=n>0 B</td>"
                "<td class=n>512 B</td><td class=n>512.00 KiB</td>")
        ok('<h4 class="torch-title">inside PyTorch at this out-of-memory error</h4>\n<table class="torch">' in raw and
           "<tr><td class=n>0</td><td class=n>2.00 MiB</td><td class=n>4.00 MiB</td><td class=n>300.00 MiB</td>"
           "<td class=n>12.00 MiB</td><td class=n>512.00 KiB</td><td class=n>14.00 MiB (does not fit)</td>"
           "<td class=n>7</td><td class=n>+1.00 MiB over 6 steps</td></tr>" in raw, "the OOM's own record")
        ok(cats + "<td class=n>0 B</td></tr>" in raw, "the OOM's categories (2 MiB allocated, all in some category)")
        ok("<h4 class=\"torch-title\">PyTorch&#39;s view when the dump was written (exit)</h4>" in raw and
           "<tr><td class=n>0</td><td class=n>3.00 MiB</td><td class=n>4.00 MiB</td><td class=n>300.00 MiB</td>"
           "<td class=n>1.00 GiB</td><td class=n>512.00 KiB</td><td class=n>-</td><td class=n>7</td>"
           "<td class=n>+1.00 MiB over 6 steps</td></tr>" in raw, "the record at exit")
        ok(cats + "<td class=n>511.50 KiB</td></tr>" in raw, "the categories at exit and what is in none")
        ok(raw.index('class="torch"') < raw.index('class="devices"'), "above the devices table")
        d = data_block(raw)
        t = d["torch"][0]
        eq((t["b"], t["name"], t["holder"], t["s"], t["shape"], t["dtype"], t["category"]),
           ([1 << 20, 1 << 19], ["model.0.weight", "history[0]"], ["", "history"], [1, -1], ["[512, 512]", "[1024]"],
            ["float32", "uint8"], ["parameter", "other"]), "the tensors in the data block")
        eq(d["ooms"][0]["torch"][0]["s"], [2], "the OOM's tensor")
        dom, console = chromium_run(page, "#selftest")
        eq(selftest_of(dom), SELFTEST_ONE.replace("tensors: none", "tensors ok"), "self-test")
        eq(console, [], "console")
        ok('<h3>PyTorch\'s largest tensors when the dump was written (2, 1.50 MiB)<input type="search" '
           'placeholder="filter" class="filter"></h3><p class="table-note">device 0: 3.00 MiB allocated by PyTorch, '
           '4.00 MiB reserved; by category: parameter 1.00 MiB (33.3%), buffer 0 B (0.0%), gradient 1.00 MiB (33.3%), '
           'optimizer_state 0 B (0.0%), activation 512 B (&lt;0.1%), other 512.00 KiB (16.7%); in no category 511.50 KiB'
           '</p>' in dom, "the tensors table's title and category breakdown")
        ok('<h3>PyTorch\'s largest tensors at OOM #1 (1, 2.00 MiB)' in dom, "the OOM's tensors table")
        ok('<tr class="row sel" data-row="0"><td class="n" data-v="1048576">1.00 MiB</td><td class="n" data-v="0">0</td>'
           '<td data-v="[512, 512]">[512, 512]</td><td data-v="float32">float32</td><td data-v="parameter">parameter'
           '</td><td data-v="model.0.weight">model.0.weight</td><td data-v=""></td><td data-v="steady_state '
           'tests/progs/t_phases.c:20">steady_state tests/progs/t_phases.c:20</td></tr>' in dom, "a tensor's row")
        ok('<td data-v="">(no allocation found)</td>' in dom, "the tensor without a stack")
    finally:
        shutil.rmtree(work, ignore_errors=True)


@test
def html_golden_skeleton_stored_once():
    """The golden pages keep the markup the CLI writes around every dump
    (its views, the header, the script's place) in one file, checked once,
    and each page's own parts apart (run_tests.py's html_parts)."""
    views = '<section class="view" data-view="timeline">'
    held = {}
    for name in sorted(os.listdir(EXPECTED)):
        with open(os.path.join(EXPECTED, name), encoding="utf-8", errors="replace") as f:
            n = f.read().count(views)
        if n:
            held[name] = n
    eq(held, {"html.skeleton.html": 1}, "the golden files holding a dump's views")


def inked_rows(page, fragment, work, size="1100,1400"):
    """How many pixel rows of the page's screenshot hold anything not white,
    with the console lines it logged."""
    shot = os.path.join(work, "shot.png")
    _, console = chromium_run(page, fragment, shot=shot, size=size)
    w, h, rows = png_pixels(shot)
    eq((w, h), tuple(int(x) for x in size.split(",")), "screenshot size")
    return sum(1 for row in rows if any(px != (255, 255, 255) for px in row)), rows, console


@test
def html_screenshots_of_torch_and_device_views():
    """Screenshots of the new parts: PyTorch's tables in the summary and
    its tensors tables take room the same dump without torch records
    leaves white (at least 150 rows of pixels more in each view); the
    flame graph of one device of two is drawn, its root across the width
    and its six frames deep."""
    work = tempfile.mkdtemp(prefix="vt-html-")
    try:
        with_torch, plain = os.path.join(work, "t.json"), os.path.join(work, "n.json")
        json.dump(torch_dump(), open(with_torch, "w"))
        json.dump(json.load(open(os.path.join(GOLDEN, R0))), open(plain, "w"))
        pages = page_of(work, "t.html", [with_torch]), page_of(work, "n.html", [plain])
        for view in ("tables", "summary"):
            (a, _, ca), (b, _, cb) = (inked_rows(p, "#view=" + view, work) for p in pages)
            eq((ca, cb), ([], []), f"{view}: console")
            ok(a - b >= 150, f"{view}: {a} rows of pixels inked with PyTorch's records, {b} without")
        path = os.path.join(work, "two.json")
        json.dump(two_device_dump(), open(path, "w"))
        n, rows, console = inked_rows(page_of(work, "two.html", [path]), "#view=flame", work, "1100,800")
        eq(console, [], "flame: console")
        grey = [sum(1 for px in row if px == (0xdd, 0xdd, 0xdd)) for row in rows]
        ok(max(grey) > 1000, f"the root frame across the width: {max(grey)} pixels")
        ok(n >= 6 * 18 + 60, f"six frames and the controls: {n} rows of pixels inked")
    finally:
        shutil.rmtree(work, ignore_errors=True)




@torch_test
def html_page_of_a_pytorch_run():
    """A small MLP trained with Adam by real PyTorch on the simulated GPU
    under `vramtrace run` (tests/gpu/torch_checks.py mlp): the page's top
    says what PyTorch itself reported (memory_allocated, memory_reserved),
    its tensors table holds the dump's tensors, its timeline the optimizer's
    steps, and every control works in Chromium, the tensors table's and the
    step boundaries' included."""
    work = tempfile.mkdtemp(prefix="vt-html-torch-")
    try:
        env = {k: v for k, v in os.environ.items()
               if not k.startswith(("VRAMTRACE_", "SIMGPU_")) and k not in ("LD_PRELOAD", "LD_LIBRARY_PATH", "PYTHONPATH")}
        env.update(SIMGPU_CAPACITY="8G", SIMGPU_CONTEXT="300M")
        facts, dump = os.path.join(work, "facts.json"), os.path.join(work, "d.json")
        p = subprocess.run([os.path.join(ROOT, "tests", "simgpu", "run"), "--torch", "--", CLI, "run", "--out", dump,
                            "--", "python3", os.path.join(ROOT, "tests", "gpu", "torch_checks.py"), "mlp", facts],
                           env=env, cwd=work, capture_output=True, text=True, timeout=300)
        eq(p.returncode, 0, f"mlp under vramtrace run: {p.stderr[-2000:]}")
        public = json.load(open(facts))["public"]
        page = page_of(work, "t.html", [dump])
        raw = open(page).read()
        ok(f"<tr><td class=n>0</td><td class=n>{fmt_bytes(public['allocated'])}</td><td class=n>"
           f"{fmt_bytes(public['reserved'])}</td>" in raw.split("PyTorch&#39;s view when the dump was written")[1],
           "PyTorch's own allocated and reserved at the top")
        want = json.load(open(dump))["torch"][0]["tensors"]
        got = data_block(raw)["torch"][0]
        eq(list(zip(got["b"], got["name"], got["dtype"], got["shape"], got["category"], got["holder"], got["s"])),
           [(t["bytes"], t["name"], t["dtype"], t["shape"], t["category"], t["holder"],
             -1 if t["stack"] is None else t["stack"]) for t in want], "the dump's tensors")
        ok(len(want) >= 8, f"{len(want)} tensors")
        steps = json.load(open(dump))["steps"]
        eq((data_block(raw)["steps"], len(steps)), ([s["step"] for s in steps], public["steps"]),
           "the optimizer's steps as step boundaries")
        dom, console = chromium_run(page, "#selftest")
        eq(selftest_of(dom), SELFTEST_ONE.replace("tensors: none", "tensors ok").replace("steps: none", "steps ok"),
           "self-test")
        eq(console, [], "console")
    finally:
        shutil.rmtree(work, ignore_errors=True)


T_STEPS = os.path.join(T, "t_steps")


@test
def html_step_boundaries_on_both_axes():
    """tests/progs/t_steps.c's step boundaries (steps 1, 2 and 3 before its
    events 1, 3 and 3): their places among the device's events and their
    times in the data block, exact; both axes draw each, and a hover on a
    boundary names its step (the page's self-test). With the event ring
    overwritten and more boundaries than kept, the legend says how many of
    all, and an overwritten boundary has no place on the event axis."""
    work = tempfile.mkdtemp(prefix="vt-html-")
    try:
        r = run([T_STEPS], report="off")
        eq(len(r.dumps), 1, "one dump")
        path = os.path.join(work, "s.json")
        json.dump(r.dumps[0], open(path, "w"))
        page = page_of(work, "s.html", [path])
        d = data_block(open(page).read())
        eq((d["steps"], d["steps_t"], d["steps_total"], d["devices"][0]["steps_at"]),
           ([1, 2, 3], [s["time_ns"] for s in r.dumps[0]["steps"]], 3, [1, 3, 3]), "the steps in the data block")
        dom, console = chromium_run(page, "#selftest")
        eq(selftest_of(dom), "sort: fewer than two live allocations; zoom: nothing to zoom into; hover ok; timeline "
           "zoom ok; axis ok; steps ok; search: no frames; collapse: no library frames; flame device ok; tensors: "
           "none; row: no holders; rank: one dump; errors none", "self-test")
        eq(console, [], "console")
        ok('<span class="legend-item step-key">\u2506 step boundaries: 3</span>' in dom, "the legend")
        r = run([T_STEPS, "5000"], report="off", env={"VRAMTRACE_EVENTS": "3"})
        path = os.path.join(work, "o.json")
        json.dump(r.dumps[0], open(path, "w"))
        page = page_of(work, "o.html", [path])
        d = data_block(open(page).read())
        want = [s["event"] for s in r.dumps[0]["steps"]]
        eq((len(d["steps"]), d["steps"][0], d["steps_total"]), (4096, 908, 5003), "the newest 4096 of 5003")
        eq(d["devices"][0]["steps_at"], want, "places among the device's events: the dump's own (one device)")
        dom, console = chromium_run(page, "#selftest")
        ok("; steps ok;" in selftest_of(dom), selftest_of(dom))
        ok('<span class="legend-item step-key">\u2506 step boundaries: 4096 newest of 5003</span>' in dom, "the legend")
    finally:
        shutil.rmtree(work, ignore_errors=True)


@test
def html_screenshot_of_step_boundaries():
    """The timeline's screenshot of tests/progs/t_steps.c's run shows its
    step boundaries: two dashed grey lines (steps 2 and 3 share a place),
    each at least 60 pixels of the line's colour (dashes 2 of every 5)."""
    work = tempfile.mkdtemp(prefix="vt-html-")
    try:
        r = run([T_STEPS], report="off")
        path = os.path.join(work, "s.json")
        json.dump(r.dumps[0], open(path, "w"))
        shot = os.path.join(work, "s.png")
        _, console = chromium_run(page_of(work, "s.html", [path]), "#view=timeline", shot=shot)
        eq(console, [], "console")
        w, h, rows = png_pixels(shot)
        cols = {}
        for row in rows:
            for x, px in enumerate(row):
                if px == (0x8a, 0x8a, 0x8a):
                    cols[x] = cols.get(x, 0) + 1
        lines = sorted(x for x, n in cols.items() if n >= 60)
        eq(len(lines), 2, f"columns of the boundaries' colour: {sorted(cols.items())[:12]}")
    finally:
        shutil.rmtree(work, ignore_errors=True)


@test
def html_compared_across_ranks_keeps_each_ranks_largest():
    """Twelve ranks, each holding at 15 call sites of its own (rank k's site
    j holds 1,000 x (j + 1) + k bytes), --top 3: the table compared across
    ranks has the 3 largest of all ranks together and each rank's own 3
    largest, 36 rows, each rank's bytes in its column and 0 B in the
    others, and says how many sites it left out (144). A row a site and a
    cell a rank made a 5.1 GB page from 200 dumps of 4,000 sites each."""
    with open(os.path.join(GOLDEN, R0)) as f:
        base = json.load(f)
    work = tempfile.mkdtemp(prefix="vt-html-compared-")
    try:
        paths = []
        for k in range(12):
            d = json.loads(json.dumps(base))
            d["rank"], d["pid"] = k, 5000 + k
            d["stacks"] = [{"frames": [{"function": f"r{k}_s{j}", "file": "x.c", "line": j + 1, "module": "/bin/x",
                                        "offset": "0x10", "address": "0x10"}]} for j in range(15)]
            d["holders"] = [{"stack": j, "bytes": 1000 * (j + 1) + k, "count": 1} for j in range(15)]
            d["peak_holders"], d["live"], d["ooms"], d["events"] = [], [], [], []
            paths.append(os.path.join(work, f"r{k}.json"))
            json.dump(d, open(paths[-1], "w"))
        raw = open(page_of(work, "c.html", paths + ["--top", "3"])).read()
        i = raw.index("compared across ranks</h3>")
        table = raw[i:raw.index("</table>", i)]
        rows = re.findall(r"<tr><td>r(\d+)_s(\d+) x\.c:\d+</td><td class=n data-v=\"(\d+)\">[^<]*</td>(.*?)</tr>",
                          table)
        eq(sorted((int(k), int(j)) for k, j, _, _ in rows), sorted((k, j) for k in range(12) for j in (12, 13, 14)),
           "each rank's three largest (the three largest of all among them)")
        for k, j, total, cells in rows:
            values = [int(v) for v in re.findall(r'data-v="(\d+)"', cells)]
            want = [1000 * (int(j) + 1) + int(k) if r == int(k) else 0 for r in range(12)]
            eq((int(total), values), (1000 * (int(j) + 1) + int(k), want), f"rank {k} site {j}: its column only")
        ok("<p>(144 more call sites, none among the 3 largest of all ranks or of any one rank: the text report lists "
           "them)</p>" in raw, "the sites left out, counted")
    finally:
        shutil.rmtree(work, ignore_errors=True)


@test
def html_figures_in_the_unit_they_round_to():
    """The page says bytes as the reports do, in the unit the figure has
    once rounded to two decimals: 1048575 bytes read "1024.00 KiB" in the
    holders table, and 2^40 - 1 "1024.00 GiB". The page's own formatter
    (cli/html/util.js) on each figure either side of a unit, then the
    holders table of a run that held 2^40 - 1, 1048575, 1024 and 1023
    bytes."""
    figures = ((1023, "1023 B"), (1024, "1.00 KiB"), (1048570, "1023.99 KiB"), (1048571, "1.00 MiB"),
               (1048575, "1.00 MiB"), (1048576, "1.00 MiB"), (2**30 - 1, "1.00 GiB"), (2**40 - 1, "1.00 TiB"),
               (2**40, "1.00 TiB"), (2**50 - 1, "1.00 PiB"), (2**60, "1024.00 PiB"), (2**64 - 1, "16384.00 PiB"))
    with workdir("vt-html-figures-") as work:
        page = os.path.join(work, "fmt.html")
        util = open(os.path.join(ROOT, "cli", "html", "util.js")).read()
        values = ", ".join(f"{n}" for n, _ in figures)
        open(page, "w").write(f'<!DOCTYPE html><html><body><pre id="figures"></pre><script>{util}\n'
                              f"document.getElementById('figures').textContent = [{values}].map(fmtBytes).join('|');"
                              "</script></body></html>")
        dom, console = chromium_run(page)
        eq(console, [], "console")
        eq(re.findall(r'<pre id="figures">([^<]*)</pre>', dom), ["|".join(s for _, s in figures)], "fmtBytes")
        path = os.path.join(work, "dump.json")
        r = run([os.path.join(T, "t_triage"), "keep", "1048575", "big", str(2**40 - 1), "other", "1023", "cache",
                 "1024"], env={"SIMGPU_CAPACITY": "2048G", "VRAMTRACE_OUT": path}, report="off")
        eq((r.rc, r.out), (0, "keep -> 0\nbig -> 0\nother -> 0\ncache -> 0\n"), "t_triage")
        dom, console = chromium_run(page_of(work, "run.html", [path]))
        eq(console, [], "console")
        table = re.search(r'<table class="vt-table holders">(.*?)</table>', dom)
        ok(table, "the holders table")
        eq(re.findall(r'<tr[^>]*><td class="n" data-v="(\d+)">([^<]*)</td>', table.group(1)),
           [(str(2**40 - 1), "1.00 TiB"), ("1048575", "1.00 MiB"), ("1024", "1.00 KiB"), ("1023", "1023 B")],
           "the holders table's bytes")


@test
def html_flame_names_a_host_failure_by_its_memory():
    # The flame graph's moments named a refusal of pinned host memory
    # "OOM #1 (device -1, ...)": now by the memory asked for, as the text
    # report names it; a device's refusal by its device still.
    with workdir("vt-html-") as work:
        dump = os.path.join(work, "dump.json")
        env = {k: v for k, v in os.environ.items() if not k.startswith(("VRAMTRACE_", "SIMGPU_"))}
        env.update(LD_LIBRARY_PATH=SIM, LD_PRELOAD=LIB, VRAMTRACE_OUT=dump, VRAMTRACE_REPORT="off",
                   SIMGPU_CAPACITY="1G")
        p = subprocess.run([os.path.join(T, "t_host"), "host-ooms"], env=env, cwd=work, capture_output=True,
                           text=True, timeout=120)
        eq(p.returncode, 0, "t_host host-ooms: " + p.stderr)
        page = page_of(work, "h.html", [dump])
        eq([o.get("host") for o in data_block(open(page).read())["ooms"]], ["pinned host memory"] * 5 + [None],
           "the data's label of each OOM")
        dom, console = chromium_run(page)
        eq(console, [], "console")
        eq([re.sub(r"\d+\.\d+ s", "T s", m) for m in
            re.findall(r'<option value="\d+">(OOM #[^<]*)</option>', dom)],
           [f"OOM #{n} (pinned host memory, T s)" for n in range(1, 6)] + ["OOM #6 (device 0, T s)"],
           "the flame graph's moments")
