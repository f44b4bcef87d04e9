"""Checks the dump of leak_oom against what the program printed.

usage: check_c.py PROGRAM_OUTPUT DUMP   (exit status 1 when a check fails)
"""
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
from dumpview import load_dump  # noqa: E402

out = dict(line.split() for line in open(sys.argv[1]) if len(line.split()) == 2)
d = load_dump(sys.argv[2])
fails = 0


def check(what, ok, detail=""):
    global fails
    print(("PASS " if ok else "FAIL ") + what + (f": {detail}" if detail else ""))
    fails += not ok


def site(stack):
    """The function of the stack's call site as the dump names it (the
    call-site rule of common/callsite.c: a rule of this script's own missed
    the static runtime's libcudart_static_<hash> frames on an H100)."""
    st = d["stacks"][stack]
    i = st.get("site", -1)
    fn = st["frames"][i]["function"] if i is not None and 0 <= i < len(st["frames"]) else None
    return fn.split("(")[0] if fn else None


live = d["live"]
check("leaked bytes", d["totals"]["live_bytes"] == int(out["leaked"]), f"{d['totals']['live_bytes']} vs {out['leaked']}")
check("leaked allocations", d["totals"]["live_count"] == 2, str(d["totals"]["live_count"]))
check("callers of the leaks", sorted(site(a["stack"]) for a in live) == ["leaked_cache", "weights"],
      str(sorted(site(a["stack"]) for a in live)))
ooms = d["ooms"]
check("one OOM", len(ooms) == 1, str(len(ooms)))
if ooms:
    o = ooms[0]
    check("OOM request", o["requested_bytes"] == int(out["requested"]), f"{o['requested_bytes']} vs {out['requested']}")
    check("OOM caller", site(o["stack"]) == "too_big", str(site(o["stack"])))
    check("device total", o["total_bytes"] == int(out["total"]), f"{o['total_bytes']} vs {out['total']}")
    diff = abs(o["free_bytes"] - int(out["free"]))
    check("device free within 64 MiB of cudaMemGetInfo", diff <= 64 << 20, f"{o['free_bytes']} vs {out['free']}")
    check("finding: request exceeds device", any(f["id"] == "request_exceeds_device" for f in o["findings"]))
print(f"{'ok' if not fails else 'FAILED'}: {fails} failed")
sys.exit(1 if fails else 0)
