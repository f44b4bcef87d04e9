#!/bin/sh
# deps.sh -- install the Debian packages vramtrace needs to build and test,
# if any are missing. As root it runs apt-get; otherwise it prints the exact
# command and fails.
set -u
PKGS="gcc g++ make libc6-dev uthash-dev libunwind-dev libdw-dev libjansson-dev libasan8 libubsan1 libtsan2 python3 util-linux chromium valgrind clang libclang-rt-14-dev"
missing=""
for p in $PKGS; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing="$missing $p"
done
if [ -n "$missing" ]; then
    if [ "$(id -u)" = 0 ]; then
        echo "vramtrace: installing:$missing"
        { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $missing; } || exit 1
    else
        echo "vramtrace: missing build packages. Run as root:" >&2
        echo "  apt-get update && apt-get install -y$missing" >&2
        exit 1
    fi
fi
CUDA_HOME=${CUDA_HOME:-/usr/local/cuda}
if [ ! -f "$CUDA_HOME/include/cuda.h" ]; then
    echo "vramtrace: no CUDA toolkit at $CUDA_HOME (cuda.h not found)." >&2
    echo "  Install the CUDA toolkit, or point CUDA_HOME at it: make CUDA_HOME=/path/to/cuda ..." >&2
    exit 1
fi
exit 0
