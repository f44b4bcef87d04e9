"""PyTorch checks for tests/gpu/run.sh, one mode per process.

usage: torch_checks.py MODE FACTS.json [DUMP_DIR]

Each mode runs a piece of PyTorch work (under vramtrace when run.sh says so)
and writes what PyTorch itself reported to FACTS.json; `check MODE FACTS DUMP`
then compares that with vramtrace's dump and prints PASS/FAIL lines.

modes: train (default caching allocator, grows until out of memory),
       expandable (expandable_segments:True), async (backend:cudaMallocAsync),
       nocache (PYTORCH_NO_CUDA_MEMORY_CACHING=1: live bytes vs
       memory_allocated), limit (VRAMTRACE_LIMIT), overhead (steps/s)
"""
import glob
import json
import os
import signal
import sys
import time

MiB = 1 << 20
GiB = 1 << 30
KEPT = 512 * MiB          # every kept activation is exactly this big


def grow_until_oom(facts):
    import torch
    dev = torch.device("cuda")
    weights = torch.ones(64 * MiB // 4, device=dev)   # 64 MiB that stays
    kept = []
    try:
        while True:
            kept.append(torch.empty(KEPT // 4, device=dev))  # KEEP-LINE
            kept[-1].fill_(1.0)
    except torch.OutOfMemoryError as e:
        free, total = torch.cuda.mem_get_info()
        facts.update(message=str(e).splitlines()[0], kept=len(kept), free_after=free, total=total,
                     allocated=torch.cuda.memory_allocated(), reserved=torch.cuda.memory_reserved())
    del weights


def keep_line():
    with open(__file__) as f:
        return 1 + next(i for i, line in enumerate(f) if "# KEEP-LINE" in line and "kept.append" in line)


def mode_nocache(facts):
    import torch
    dev = torch.device("cuda")
    ts = [torch.empty(n, device=dev) for n in (1 << 20, 3 << 20, 5 << 20, 777)]
    torch.cuda.synchronize()
    facts["allocated"] = torch.cuda.memory_allocated()
    os.kill(os.getpid(), signal.SIGUSR2)       # vramtrace writes a dump now
    time.sleep(2)
    facts["tensors"] = len(ts)


def mode_limit(facts):
    import torch
    dev = torch.device("cuda")
    limit = int(os.environ["VRAMTRACE_LIMIT_BYTES"])
    held, predicted, failed = [], None, None
    for i in range(64):
        if predicted is None and torch.cuda.memory_reserved() + GiB > limit:
            predicted = i
        try:
            held.append(torch.empty(GiB // 4, device=dev))
        except torch.OutOfMemoryError as e:
            failed = i
            facts["message"] = str(e).splitlines()[0]
            break
    facts.update(predicted=predicted, failed=failed, limit=limit)


def mode_overhead(facts):
    import torch
    dev = torch.device("cuda")
    torch.manual_seed(0)
    model = torch.nn.Sequential(*[torch.nn.Linear(2048, 2048) for _ in range(6)]).to(dev)
    opt = torch.optim.SGD(model.parameters(), lr=1e-3)
    x = torch.randn(256, 2048, device=dev)
    if os.environ.get("RECORD_HISTORY") == "1":
        torch.cuda.memory._record_memory_history(max_entries=100000)

    def step():
        opt.zero_grad(set_to_none=True)
        loss = model(x).square().mean()
        loss.backward()
        opt.step()
        # new tensors every step, as a real loop makes them
        return torch.empty(8 << 20, device=dev)

    for _ in range(20):
        step()
    torch.cuda.synchronize()
    n, t0 = 300, time.perf_counter()
    for _ in range(n):
        step()
    torch.cuda.synchronize()
    facts["steps_per_s"] = n / (time.perf_counter() - t0)


# --------------------------------------------------------------- checks

def check(mode, facts_path, dump_dir):
    facts = json.load(open(facts_path))
    dumps = sorted(glob.glob(os.path.join(dump_dir, "*.json")), key=os.path.getmtime)
    fails = 0

    def say(what, ok, detail=""):
        nonlocal fails
        print(f"{'PASS' if ok else 'FAIL'} {mode}: {what}" + (f" ({detail})" if detail else ""))
        fails += not ok

    if not dumps:
        say("a dump was written", False)
        return 1
    exit_dumps = [p for p in dumps if json.load(open(p))["reason"] == "exit"]
    d = json.load(open(exit_dumps[-1] if exit_dumps else dumps[-1]))

    def site(stack):
        for f in d["stacks"][stack]["frames"]:
            if f.get("python"):
                return f
        return None

    if mode in ("train", "expandable", "async"):
        ooms = d["ooms"]
        say("OOMs recorded", len(ooms) >= 1, f"{len(ooms)}; PyTorch said: {facts.get('message', '?')}")
        if ooms:
            want_api = {"train": "cudaMalloc", "expandable": "cuMemCreate", "async": "cudaMallocAsync"}[mode]
            say("the failing API", ooms[0]["api"] == want_api, ooms[0]["api"])
            if mode != "expandable":
                say("request = PyTorch's rounded request", ooms[0]["requested_bytes"] == KEPT,
                    f"{ooms[0]['requested_bytes']} vs {KEPT}")
            last = ooms[-1]
            say("device total = torch.cuda.mem_get_info", last["total_bytes"] == facts["total"],
                f"{last['total_bytes']} vs {facts['total']}")
            diff = abs(last["free_bytes"] - facts["free_after"])
            say("device free within 64 MiB of torch.cuda.mem_get_info after the error", diff <= 64 * MiB,
                f"{last['free_bytes']} vs {facts['free_after']}")
            f = site(ooms[0]["stack"])
            say("the OOM names the script's line", f is not None and f["line"] == keep_line() and
                f["file"].endswith("torch_checks.py"), str(f and (f["file"], f["line"])))
            holders = [h for h in (ooms[0].get("holders") or [])]
            top = site(holders[0]["stack"]) if holders else None
            say("the largest holder is the script's line", top is not None and top["line"] == keep_line(),
                str(top and (top["file"], top["line"])))
            ids = [x["id"] for x in ooms[0]["findings"]]
            say("findings name the growth or the dominant site",
                "growing_site" in ids or "one_site_dominates" in ids, str(ids))
    elif mode == "nocache":
        sig = [json.load(open(p)) for p in dumps if json.load(open(p))["reason"] == "signal"]
        say("an on-demand dump", len(sig) == 1, str(len(sig)))
        if sig:
            live = sum(a["bytes"] for a in sig[0]["live"] if a["kind"] != "host")
            say("live bytes = torch.cuda.memory_allocated()", live == facts["allocated"],
                f"{live} vs {facts['allocated']}")
    elif mode == "limit":
        say("PyTorch raised out of memory under the budget", facts["failed"] is not None, facts.get("message", ""))
        say("where the budget says it should", facts["failed"] == facts["predicted"],
            f"failed at tensor {facts['failed']}, predicted {facts['predicted']}")
        say("the OOM is marked budget", any(o["budget"] for o in d["ooms"]))
    return 1 if fails else 0


def main():
    mode = sys.argv[1]
    if mode == "check":
        sys.exit(check(sys.argv[2], sys.argv[3], sys.argv[4]))
    facts = {}
    {"train": grow_until_oom, "expandable": grow_until_oom, "async": grow_until_oom,
     "nocache": mode_nocache, "limit": mode_limit, "overhead": mode_overhead}[mode](facts)
    with open(sys.argv[2], "w") as f:
        json.dump(facts, f)
    print(json.dumps(facts))


main()
