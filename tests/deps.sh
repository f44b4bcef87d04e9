#!/bin/sh
# deps.sh -- install the Debian packages vramtrace needs to build and test,
# if any are missing. As root it runs apt-get; otherwise it prints the exact
# command and fails.
set -u
# clang's runtime libraries (libFuzzer, its sanitizers) are packaged under
# clang's version, which is Debian's: 14 on Debian 12, 19 on Debian 13;
# elsewhere the version the "clang" package depends on.
case "$(cat /etc/debian_version 2>/dev/null)" in
12*|bookworm*) CLANG_V=14 ;;
13*|trixie*) CLANG_V=19 ;;
*) CLANG_V=$(apt-cache depends clang 2>/dev/null | sed -n 's/^ *Depends: clang-\([0-9][0-9]*\)$/\1/p' | head -1)
   CLANG_V=${CLANG_V:-14} ;;
esac
# python3-venv: `make torch-env` creates a virtual environment.
# libgtest-dev: examples/gtest_vramtrace.cc, built and run by the tests.
# libncurses-dev: `vramtrace top`; tmux drives it in the tests; prometheus
# (promtool and the server) checks `vramtrace metrics`.
PKGS="gcc g++ make libc6-dev uthash-dev libunwind-dev libdw-dev libjansson-dev libasan8 libubsan1 libtsan2 python3 python3-venv util-linux chromium valgrind clang libclang-rt-$CLANG_V-dev libgtest-dev libncurses-dev tmux prometheus strace"
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
