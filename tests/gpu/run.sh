#!/usr/bin/env bash
# run.sh -- vramtrace on a real NVIDIA GPU, in one go (under 8 minutes on an
# H200). Results go to $OUT/gpu-results.txt (OUT defaults to build/gpu-out)
# with the dumps and plots; docs/gpu-validation.md is written from them.
#
#   tests/gpu/run.sh          on a machine with a GPU, nvcc and PyTorch
#   tests/gpu/run.sh --sim    the same on the simulated GPU (PyTorch from
#                             build/torch-venv, `make torch-env`)
#   tests/gpu/run.sh [--sim] c|torch   one part only
#
# vramtrace comes from build/gpu-bundle when it is there (`make gpu-bundle`
# here, then carry build/gpu-bundle: the GPU machine has no package
# registry), else it is built with `make all`; on the simulated GPU always
# the build here.
set -u
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
cd "$ROOT"
OUT=${OUT:-$ROOT/build/gpu-out}
mkdir -p "$OUT"
LOG=$OUT/gpu-results.txt
: > "$LOG"
SIM=0
[ "${1:-}" = "--sim" ] && { SIM=1; shift; }
PARTS=${*:-c torch}   # which parts: c, torch (default both)
PY=${PYTHON:-python3}
pass=0
fail=0
say() { echo "$*" | tee -a "$LOG"; }
tally() {   # count the PASS/FAIL lines of a check's output
    tee -a "$LOG" <"$1"
    pass=$((pass + $(grep -c '^PASS ' "$1")))
    fail=$((fail + $(grep -c '^FAIL ' "$1")))   # not check_c's closing 'FAILED:' line
}

# ----------------------------------------------------------------- build
# On the simulated GPU the build here is the one under test (a bundle made
# earlier may be older).
if [ $SIM = 0 ] && [ -f build/gpu-bundle/lib/libvramtrace.so ]; then
    LIB=$ROOT/build/gpu-bundle/lib/libvramtrace.so
    CLI=$ROOT/build/gpu-bundle/bin/vramtrace
else
    make -s all >"$OUT/build.log" 2>&1 || { say "FAIL build: see build.log"; exit 1; }
    LIB=$ROOT/build/libvramtrace.so
    CLI=$ROOT/build/vramtrace
fi
say "vramtrace: $($CLI --version) ($LIB)"
say "date: $(date -u +%Y-%m-%dT%H:%M:%SZ)"

# --------------------------------------------------------------- machine
case " $PARTS " in *" torch "*) TORCH=1 ;; *) TORCH=0 ;; esac
case " $PARTS " in *" c "*) C=1 ;; *) C=0 ;; esac
TPY=$PY   # the Python with PyTorch
ON=       # the prefix that puts a command on the device
if [ $SIM = 1 ]; then
    make -s sim >/dev/null 2>&1
    export SIMGPU_CAPACITY=8G SIMGPU_CONTEXT=300M
    say "device: the simulated GPU (8 GiB)"
    if [ $TORCH = 1 ]; then
        if [ -x "$ROOT/build/torch-venv/bin/python3" ]; then
            TPY=python3
            ON="$ROOT/tests/simgpu/run --torch --"
            say "torch: $($ON python3 -c 'import torch; print(torch.__version__, torch.version.cuda)' 2>/dev/null | tail -1) (build/torch-venv)"
        else
            say "SKIP PyTorch: no build/torch-venv (make torch-env creates it)"
            TORCH=0
        fi
    fi
    export LD_LIBRARY_PATH=$ROOT/build/sim
else
    say "device: $(nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader 2>&1 | head -1)"
    say "nvcc: $(nvcc --version 2>&1 | tail -1)"
    say "torch: $($PY -c 'import torch; print(torch.__version__, torch.version.cuda)' 2>&1 | tail -1)"
fi

run_traced() {   # DIR ENV... -- CMD...: run CMD under vramtrace, dumps into DIR
    local dir=$1; shift
    rm -rf "$dir"; mkdir -p "$dir"
    local envs=()
    while [ "$1" != "--" ]; do envs+=("$1"); shift; done
    shift
    env "${envs[@]}" LD_PRELOAD="$LIB" VRAMTRACE_OUT="$dir/d.%p.json" VRAMTRACE_REPORT="$dir/report.txt" "$@"
}

# ------------------------------- 1. a CUDA C program: leaks, then OOM
if [ $C = 0 ]; then
    :
elif [ $SIM = 1 ]; then
    cc -g -O0 -I"${CUDA_HOME:-/usr/local/cuda}/include" -o "$OUT/leak_oom" tests/gpu/leak_oom.c \
        build/sim/libcudart_sim.so -Wl,-rpath,"$ROOT/build/sim"
else
    nvcc -g -O0 -o "$OUT/leak_oom" -x cu tests/gpu/leak_oom.c   # nvcc's default: the static runtime
fi
if [ $C = 1 ]; then
    run_traced "$OUT/c" -- "$OUT/leak_oom" >"$OUT/c.out" 2>&1
    $PY tests/gpu/check_c.py "$OUT/c.out" "$(ls "$OUT"/c/d.*.json | head -1)" >"$OUT/c.check" 2>&1
    say "== 1. CUDA C program (static runtime): leaks and an OOM"
    tally "$OUT/c.check"
fi

# ------------- 1b. cudaDeviceReset: what it gave back unfreed is released
# tests/progs/t_reset.c: 3 x 1 MiB (two stacks), 512 KiB (stream-ordered) and
# 4 KiB pinned host memory leaked before the reset, 8 KiB after it. As CUDA's
# documentation of cudaDeviceReset has it, the reset destroys the device
# memory and the pinned memory, not the stream-ordered memory: live at exit
# the 512 KiB and the 8 KiB, all six a leak, the device memory's and the
# pinned memory's "released by a context's reset or destruction" (the
# dump's `released` and, apart, `released_host`); the
# program says whether the driver still knows the pinned and the
# stream-ordered memory after the reset, and whether freeing the pinned
# memory then succeeded (0, 1 and 0 as documented).
if [ $C = 1 ]; then
    if [ $SIM = 1 ]; then
        cc -g -O0 -I"${CUDA_HOME:-/usr/local/cuda}/include" -o "$OUT/t_reset" tests/progs/t_reset.c \
            build/sim/libcudart_sim.so -Wl,-rpath,"$ROOT/build/sim"
    else
        nvcc -g -O0 -o "$OUT/t_reset" -x cu tests/progs/t_reset.c
    fi
    run_traced "$OUT/reset" VRAMTRACE_LEAK_CHECK=1 -- "$OUT/t_reset" >"$OUT/reset.out" 2>"$OUT/reset.err"
    echo $? >"$OUT/reset.rc"
    $PY - "$OUT" >"$OUT/reset.check" 2>&1 <<'PYEOF'
import glob, json, sys
o = sys.argv[1]
text = open(f"{o}/reset.err").read() + "".join(open(p).read() for p in glob.glob(f"{o}/reset/report.txt"))
rc = int(open(f"{o}/reset.rc").read())
want = ["    released by a context's reset or destruction without a free: 2097152 byte(s) in 2 object(s)",
        "    released by a context's reset or destruction without a free: 1048576 byte(s) in 1 object(s)",
        "    released by a context's reset or destruction without a free: 4096 byte(s) in 1 object(s)",
        "SUMMARY: vramtrace: 3682304 byte(s) leaked in 6 allocation(s)."]
missing = [w for w in want if w not in text.splitlines()]
print(("PASS" if rc == 23 and not missing else "FAIL") + f" reset: leak check status {rc} (want 23), "
      f"released and leaked lines {'all there' if not missing else 'missing: ' + repr(missing)}")
d = json.load(open(glob.glob(f"{o}/reset/d.*.json")[0]))
live = (d["totals"]["live_bytes"], d["totals"]["live_count"])
rel = [(d["released"][k + 1], d["released"][k + 2]) for k in range(0, len(d.get("released", [])), 3)]
host = [(d["released_host"][k + 1], d["released_host"][k + 2]) for k in range(0, len(d.get("released_host", [])), 3)]
print(("PASS" if live == (532480, 2) and rel == [(2 << 20, 2), (1 << 20, 1)] and host == [(4096, 1)] else "FAIL") +
      f" reset: live at exit {live} (want (532480, 2)), released {rel} (want 2 MiB in 2, 1 MiB), "
      f"released_host {host} (want 4 KiB)")
said = open(f"{o}/reset.out").read().splitlines()
want = ["after the reset: pinned memory known 0, stream-ordered memory known 1", "pinned memory freed after the reset 0"]
print(("PASS" if all(w in said for w in want) else "FAIL") +
      f" reset: the driver destroyed the pinned memory and kept the stream-ordered memory; the program said {said}")
PYEOF
    say "== 1b. cudaDeviceReset: memory given back unfreed"
    tally "$OUT/reset.check"
    # The last reference's cuDevicePrimaryCtxRelease resets the context:
    # 1 MiB kept across a release that is not the last, 3 MiB released at
    # the last, 8 KiB kept after a new retain.
    run_traced "$OUT/release" VRAMTRACE_LEAK_CHECK=1 -- "$OUT/t_reset" release >"$OUT/release.out" 2>"$OUT/release.err"
    echo $? >"$OUT/release.rc"
    $PY - "$OUT" >"$OUT/release.check" 2>&1 <<'PYEOF'
import glob, json, sys
o = sys.argv[1]
out = open(f"{o}/release.out").read().splitlines()
rc = int(open(f"{o}/release.rc").read())
d = json.load(open(glob.glob(f"{o}/release/d.*.json")[0]))
live = (d["totals"]["live_bytes"], d["totals"]["live_count"])
rel = sorted((d["released"][k + 1], d["released"][k + 2]) for k in range(0, len(d.get("released", [])), 3))
print(("PASS" if rc == 23 and live == (8192, 1) and rel == [(1 << 20, 1), (2 << 20, 1)] else "FAIL") +
      f" last primary release: status {rc} (want 23), live at exit {live} (want (8192, 1)), "
      f"released {rel} (want 1 MiB and 2 MiB); the program said {out}")
PYEOF
    tally "$OUT/release.check"
fi

# ------------- 1c. cuCtxDestroy: what a context of its own held unfreed is released
# tests/progs/t_ctxdestroy.c: 1 MiB in the primary context and 256 KiB
# stream-ordered stay live leaks; a context of its own held 2 MiB, 1 MiB
# pitched, 1 MiB managed and 8 KiB pinned host memory unfreed: released at
# cuCtxDestroy (the driver asked which memory was the context's).
if [ $C = 1 ]; then
    if [ $SIM = 1 ]; then
        cc -g -O0 -I"${CUDA_HOME:-/usr/local/cuda}/include" -o "$OUT/t_ctxdestroy" tests/progs/t_ctxdestroy.c \
            build/sim/libcudart_sim.so -Wl,-rpath,"$ROOT/build/sim" -ldl
    else
        nvcc -g -O0 -o "$OUT/t_ctxdestroy" -x cu tests/progs/t_ctxdestroy.c -ldl
    fi
    run_traced "$OUT/ctxd" VRAMTRACE_LEAK_CHECK=1 -- "$OUT/t_ctxdestroy" >"$OUT/ctxd.out" 2>"$OUT/ctxd.err"
    echo $? >"$OUT/ctxd.rc"
    $PY - "$OUT" >"$OUT/ctxd.check" 2>&1 <<'PYEOF'
import glob, json, sys
o = sys.argv[1]
text = open(f"{o}/ctxd.err").read() + "".join(open(p).read() for p in glob.glob(f"{o}/ctxd/report.txt"))
rc = int(open(f"{o}/ctxd.rc").read())
released = sorted(l for l in text.splitlines() if l.startswith("    released by"))
want = sorted("    released by a context's reset or destruction without a free: %d byte(s) in 1 object(s)" % b
              for b in (2 << 20, 1 << 20, 1 << 20, 8192))
summary = "SUMMARY: vramtrace: 5513216 byte(s) leaked in 6 allocation(s)."
print(("PASS" if rc == 23 and released == want and summary in text.splitlines() else "FAIL") +
      f" ctxdestroy: leak check status {rc} (want 23), released lines {released}, summary "
      f"{'there' if summary in text.splitlines() else 'missing'}; program said "
      f"{open(o + '/ctxd.out').read().split(chr(10))}")
d = json.load(open(glob.glob(f"{o}/ctxd/d.*.json")[0]))
live = (d["totals"]["live_bytes"], d["totals"]["live_count"])
print(("PASS" if live == ((1 << 20) + (256 << 10), 2) else "FAIL") +
      f" ctxdestroy: live at exit {live} (want ({(1 << 20) + (256 << 10)}, 2))")
PYEOF
    say "== 1c. cuCtxDestroy: a context's memory given back unfreed"
    tally "$OUT/ctxd.check"
fi

# ------------------------------------------------ 2-6. PyTorch
# Each mode of torch_checks.py once under vramtrace and, for the modes whose
# output vramtrace must not change, once without it: stdout, stderr and
# status must be identical (PyTorch's OutOfMemoryError text included). On
# the simulated GPU the PyTorch of build/torch-venv runs on the stand-ins
# (tests/simgpu/run --torch).
if [ $TORCH = 1 ]; then
    # PyTorch's own end, not vramtrace's: CPython 3.11 ends a thread that
    # asks for the GIL while the interpreter finalizes, and an autograd
    # device thread doing so from a destructor unwinds through noexcept
    # code: std::terminate, status 134 after the script's last line (seen
    # without vramtrace too; tests/integration/test_torch_truth.py says
    # more). Such a run, traced or plain, is run once more, and said so.
    torn_at_exit() {   # NAME: NAME.rc and NAME.err are that end
        [ "$(cat "$OUT/$1.rc")" = 134 ] && grep -q "terminate called without an active exception" "$OUT/$1.err" \
            && say "   ($1 ended by std::terminate at exit)"
    }
    run_mode() {   # MODE ENV...: the mode under vramtrace, its plain twin, the checks
        local mode=$1; shift
        say "== PyTorch: $mode $*"
        local t0=$(date +%s)
        local try
        for try in 1 2; do
            run_traced "$OUT/$mode" "$@" -- $ON timeout 240 $TPY tests/gpu/torch_checks.py $mode \
                "$OUT/$mode.facts" >"$OUT/$mode.out" 2>"$OUT/$mode.err"
            echo $? >"$OUT/$mode.rc"
            torn_at_exit $mode && [ $try = 1 ] || break
        done
        $PY tests/gpu/torch_checks.py check $mode "$OUT/$mode.facts" "$OUT/$mode" "$OUT/$mode.err" \
            >"$OUT/$mode.check" 2>&1
        case $mode in
        limit) ;;   # without vramtrace there is no budget
        *)
            for try in 1 2; do
                env "$@" $ON timeout 240 $TPY tests/gpu/torch_checks.py $mode "$OUT/$mode.plain.facts" \
                    >"$OUT/$mode.plain.out" 2>"$OUT/$mode.plain.err"
                echo $? >"$OUT/$mode.plain.rc"
                torn_at_exit $mode.plain && [ $try = 1 ] || break
            done
            # PyTorch's warnings start with their time ("[W1201 08:04:57.440355900 "): not compared
            for f in $mode.err $mode.plain.err; do
                sed -E 's/^\[([WEI])[0-9]{4} [0-9:.]+ /[\1 /' "$OUT/$f" >"$OUT/$f.untimed"
            done
            if cmp -s "$OUT/$mode.out" "$OUT/$mode.plain.out" && cmp -s "$OUT/$mode.err.untimed" \
                "$OUT/$mode.plain.err.untimed" && cmp -s "$OUT/$mode.rc" "$OUT/$mode.plain.rc"; then
                echo "PASS $mode: stdout, stderr and status as without vramtrace" >>"$OUT/$mode.check"
            else
                echo "FAIL $mode: output differs without vramtrace (diff $OUT/$mode.out $OUT/$mode.plain.out," \
                    "$mode.err, $mode.rc)" >>"$OUT/$mode.check"
            fi ;;
        esac
        tally "$OUT/$mode.check"
        say "   ($(( $(date +%s) - t0 )) s)"
    }
    run_mode mlp
    run_mode train
    run_mode expandable PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True
    run_mode async PYTORCH_CUDA_ALLOC_CONF=backend:cudaMallocAsync
    run_mode nocache PYTORCH_NO_CUDA_MEMORY_CACHING=1
    run_mode limit VRAMTRACE_LIMIT=6G VRAMTRACE_LIMIT_BYTES=$((6 << 30))
    # The PyTorch companion as a plain LD_PRELOAD gets it: its boot folder on PYTHONPATH.
    run_mode truth PYTHONPATH=$ROOT/python/vramtrace_torch/_boot
    run_mode frag PYTHONPATH=$ROOT/python/vramtrace_torch/_boot
    run_mode evalgraph PYTHONPATH=$ROOT/python/vramtrace_torch/_boot
    # --tensors' backend: no OOM observer, the record taken as the error is made
    run_mode asynctruth PYTHONPATH=$ROOT/python/vramtrace_torch/_boot PYTORCH_CUDA_ALLOC_CONF=backend:cudaMallocAsync

    # ---------- the stack walker against libunwind, inside PyTorch
    say "== stack walker against libunwind (VRAMTRACE_UNWIND=check) under PyTorch"
    run_traced "$OUT/uw" VRAMTRACE_UNWIND=check -- $ON timeout 240 $TPY tests/gpu/torch_checks.py mlp \
        "$OUT/uw.facts" >"$OUT/uw.out" 2>&1
    line=$(grep -h "unwind check:" "$OUT/uw.out" | tail -1)
    if echo "$line" | grep -Eq "check: [1-9][0-9]* stacks, 0 differ"; then
        echo "PASS unwind: $line" >"$OUT/uw.check"
    else
        echo "FAIL unwind: ${line:-no check line} (see uw.out)" >"$OUT/uw.check"
    fi
    $PY tests/gpu/torch_checks.py check mlp "$OUT/uw.facts" "$OUT/uw" >>"$OUT/uw.check" 2>&1
    tally "$OUT/uw.check"

    # ------------------------ the torch export in torch.cuda._memory_viz
    say "== torch export read by torch.cuda._memory_viz"
    : >"$OUT/viz.check"
    for mode in mlp train; do
        d=$(ls "$OUT"/$mode/*.json | head -1)
        mkdir -p "$OUT/viz-$mode"
        if $CLI report "$d" --format torch -o "$OUT/viz-$mode/snapshot.pickle" 2>"$OUT/viz-$mode/report.err"; then
            $ON $TPY tests/gpu/torch_checks.py viz "$OUT/$mode.facts" "$OUT/$mode" "$OUT/viz-$mode/snapshot.pickle" \
                "$OUT/viz-$mode" 2>"$OUT/viz-$mode/viz.err" | sed "s/^\(PASS\|FAIL\) viz:/\1 viz $mode:/" >>"$OUT/viz.check"
        else
            echo "FAIL viz $mode: vramtrace report --format torch: $(cat "$OUT/viz-$mode/report.err")" >>"$OUT/viz.check"
        fi
    done
    tally "$OUT/viz.check"
fi

if [ $SIM = 0 ]; then
    $CLI report "$OUT"/train/d.*.json --format html -o "$OUT/report.html" >/dev/null 2>&1

    # --------------------------------------------------- 7. overhead
    say "== overhead: training steps per second of a small model"
    for run in plain vramtrace history; do
        case $run in
        plain) env X=1 $PY tests/gpu/torch_checks.py overhead "$OUT/o-$run.facts" >/dev/null 2>&1 ;;
        vramtrace) run_traced "$OUT/o" X=1 -- $PY tests/gpu/torch_checks.py overhead "$OUT/o-$run.facts" \
            >/dev/null 2>&1 ;;
        history) env RECORD_HISTORY=1 $PY tests/gpu/torch_checks.py overhead "$OUT/o-$run.facts" >/dev/null 2>&1 ;;
        esac
    done
    $PY - "$OUT" <<'PYEOF' | tee -a "$LOG"
import json, sys
o = sys.argv[1]
s = {r: json.load(open(f"{o}/o-{r}.facts"))["steps_per_s"] for r in ("plain", "vramtrace", "history")}
print(f"steps/s: plain {s['plain']:.1f}, vramtrace {s['vramtrace']:.1f} ({s['vramtrace'] / s['plain']:.3f}x), "
      f"_record_memory_history with Python stacks {s['history']:.1f} ({s['history'] / s['plain']:.3f}x)")
PYEOF

    # ------------------------------- 8. CuPy and the dlsym route
    say "== CuPy (static runtime) and ctypes (dlsym on a handle)"
    run_traced "$OUT/cupy" -- $PY -c "import cupy; a = cupy.zeros(64 << 20, dtype=cupy.uint8); print(a.nbytes)" \
        >"$OUT/cupy.out" 2>&1
    run_traced "$OUT/ctypes" -- $PY -c "
import ctypes
cu = ctypes.CDLL('libcuda.so.1'); cu.cuInit(0)
dev = ctypes.c_int(); ctx = ctypes.c_void_p()
cu.cuDeviceGet(ctypes.byref(dev), 0); cu.cuDevicePrimaryCtxRetain(ctypes.byref(ctx), dev); cu.cuCtxSetCurrent(ctx)
p = ctypes.c_uint64(); print(cu.cuMemAlloc_v2(ctypes.byref(p), ctypes.c_size_t(96 << 20)))" >"$OUT/ctypes.out" 2>&1
    $PY - "$OUT" "$ROOT" <<'PYEOF' >"$OUT/misc.check" 2>&1
import glob, sys
o = sys.argv[1]
sys.path.insert(0, sys.argv[2] + "/tests")
from dumpview import load_dump   # every dump version, read as the other checks read it
for name, want in (("cupy", 64 << 20), ("ctypes", 96 << 20)):
    ds = [load_dump(p) for p in glob.glob(f"{o}/{name}/d.*.json")]
    got = [a["bytes"] for d in ds for a in d["live"]]
    print(("PASS" if any(b >= want for b in got) else "FAIL") + f" {name}: a {want}-byte allocation recorded")
PYEOF
    tally "$OUT/misc.check"
fi

say "gpu checks: $pass passed, $fail failed"
[ $fail = 0 ]
