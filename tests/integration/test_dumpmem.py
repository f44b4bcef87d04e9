"""Dumps written while the process goes on recording: the snapshot reads
the event ring in place (lent, not copied) and holds back the events
recorded meanwhile, so each dump's events are exactly the history's at its
moment, and what could not be held back is counted (records_lost)."""
import json

from run_tests import *  # noqa: F401,F403
from dumpview import v1_view


def ring_dumps(ndumps, events):
    """Run t_dumpring (a thread allocating and freeing without pause while
    the main one writes named dumps) with a ring of `events`; return the
    pairs it made and each dump as a raw dict, in order."""
    with workdir("vt-dumpring-") as work:
        out = os.path.join(work, "d.json")
        r = run([os.path.join(T, "t_dumpring"), str(ndumps)],
                env={"VRAMTRACE_OUT": out, "VRAMTRACE_EVENTS": str(events)}, report="off")
        eq(r.rc, 0, f"t_dumpring: {r.err[-500:]}")
        lines = r.out.split("\n")
        head = lines[0].split()
        eq((head[0], head[2], head[3]), ("pairs", "dumps", str(ndumps)), r.out)
        dumps = []
        for i in range(ndumps):
            with open(os.path.join(work, f"d.ring{i}.json")) as f:
                dumps.append(json.load(f))
        return int(head[1]), dumps


def recorder_pairs(events):
    """The recording thread's events (4096 + k bytes) as pair numbers k,
    with the type: [(k, type), ...] in the dump's order."""
    return [(e[3] - 4096, e[1]) for e in events if 4096 <= e[3] < (1 << 20)]


@test
def dumpmem_events_exact_while_another_thread_records():
    """Four dumps, each while 20,000 to 200,000 events are recorded by
    another thread, with a ring of 1,000: each dump's 1,000 events are one
    run of the thread's pairs (alloc k, free k, alloc k + 1, ...) with no
    event out of place; a gap only where records_lost counts the events
    that could not be held back; the totals are the live
    list's."""
    pairs, dumps = ring_dumps(4, 1000)
    ok(pairs >= 20000, f"pairs made: {pairs}")
    last_end = 0
    for i, d in enumerate(dumps):
        v = v1_view(d)
        ev = v["events"]
        eq(d["nevents"], 1000, f"dump {i}: nevents")
        eq(len(ev), 1000, f"dump {i}: events decoded")
        rec = recorder_pairs(ev)
        ok(len(rec) >= 998, f"dump {i}: the recorder's events: {len(rec)} of 1000")
        # Event j of the run is pair j // 2's allocation (j even) or free.
        idx = [2 * k + (t == "free") for k, t in rec]
        missing = 0
        for a, b in zip(idx, idx[1:]):
            ok(b > a, f"dump {i}: event {b} after event {a}")
            missing += b - a - 1
        lost = d["totals"]["records_lost"]
        ok(missing <= lost, f"dump {i}: {missing} events missing from its run, {lost} counted lost")
        ok(rec[0][0] >= last_end, f"dump {i} starts at pair {rec[0][0]}, after the last dump's {last_end}")
        last_end = rec[-1][0]
        # One moment: the counts are the live list's (the warm-up's 1 MiB
        # and at most the one pair in flight).
        eq(d["totals"]["live_count"], len(d["live"]), f"dump {i}: live count and list")
        eq(d["totals"]["live_bytes"], sum(a[1] for a in d["live"]), f"dump {i}: live bytes and list")
        ok(len(d["live"]) in (1, 2), f"dump {i}: live {d['live']}")
        eq(d["totals"]["alloc_count"] - d["totals"]["free_count"], len(d["live"]), f"dump {i}: allocs - frees")


@test
def dumpmem_live_list_exact():
    """The live list written from the compact snapshot (40 bytes a live
    allocation, sorted in place): t_host host-vmm's seven live allocations
    largest first, each with its address (a VMM handle's mapped address
    first and the handle last), size, kind, API, device and stack, as the
    dumps before the compact snapshot wrote them."""
    with workdir("vt-dumpmem-live-") as work:
        path = os.path.join(work, "d.json")
        r = run([os.path.join(T, "t_host"), "host-vmm"], env={"VRAMTRACE_OUT": path}, report="off")
        eq(r.rc, 0, r.err[-500:])
        with open(path) as f:
            d = json.load(f)
    eq(d["live_fields"], ["address", "bytes", "kind", "api", "device", "stack", "thread", "time_ns", "handle"],
       "fields")
    s = d["strings"]
    got = [[a[0], a[1], s[a[2]], s[a[3]], a[4], a[5]] + a[8:] for a in d["live"]]
    want = [["0x700000000200", 16777216, "host_async", "cuMemAllocFromPoolAsync", -1, 4],
            ["0x7e0000000000", 8388608, "host_vmm", "cuMemCreate", -1, 0, "0x1000"],
            ["0x700001080600", 4194304, "async", "cuMemAllocFromPoolAsync", 0, 6],
            ["0x1002", 2097152, "host_vmm", "cuMemCreate", -1, 2, "0x1002"],
            ["0x1003", 2097152, "vmm", "cuMemCreate", 0, 3, "0x1003"],
            ["0x700001480800", 1048576, "host_async", "cuMemAllocFromPoolAsync", -1, 7],
            ["0x700001000400", 524288, "async", "cuMemAllocFromPoolAsync", 0, 5]]
    eq(got, want, "the live list")
    eq(len({a[6] for a in d["live"]}), 1, "one thread made them")
    times = [a[7] for a in d["live"]]
    ok(times[3] <= times[4], f"equal sizes, the older first: {times}")
