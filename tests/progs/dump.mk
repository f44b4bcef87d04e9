# The big-dump shape of bench/bench_dump.c, which tests/integration/test_dump.py also runs small.
PROGS += $(B)/bench/bench_dump

# A dump that shrinks while it is read (test_dump.py's truncated-while-read test).
PROGS += $(T)/libt_shrink.so
$(T)/libt_shrink.so: tests/progs/t_shrink.c
	@mkdir -p $(T)
	$(CC) $(TEST_CFLAGS) -fPIC -shared -o $@ $< -ldl

# Many VMM handles (bench/bench_vmm.c), which test_torch_export.py runs small.
PROGS += $(B)/bench/bench_vmm

# A process with two named dumps that frees before exit what it made between
# them (test_cli.py's report of several processes' several dumps).
PROGS += $(T)/t_multidump
$(T)/t_multidump: tests/progs/t_multidump.c include/vramtrace.h $(SIM)/libcudart_sim.so
	@mkdir -p $(T)
	$(CC) $(TEST_CFLAGS) -o $@ $< $(SIM)/libcudart_sim.so -Wl,-rpath,'$$ORIGIN/../sim' -ldl
