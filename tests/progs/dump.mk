# The big-dump shape of bench/bench_dump.c, which tests/integration/test_dump.py also runs small.
PROGS += $(B)/bench/bench_dump
