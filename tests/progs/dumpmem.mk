# Dumps written while another thread records (tests/integration/test_dumpmem.py).
PROGS += $(T)/t_dumpring

$(T)/t_dumpring: tests/progs/t_dumpring.c include/vramtrace.h $(SIM)/libcudart_sim.so
	@mkdir -p $(T)
	$(CC) $(TEST_CFLAGS) -o $@ $< $(SIM)/libcudart_sim.so -Wl,-rpath,'$$ORIGIN/../sim' -ldl -lpthread

# A live list long enough to spill to a temporary file (VRAMTRACE_SPILL).
PROGS += $(T)/t_spill

$(T)/t_spill: tests/progs/t_spill.c include/vramtrace.h $(SIM)/libcudart_sim.so
	@mkdir -p $(T)
	$(CC) $(TEST_CFLAGS) -o $@ $< $(SIM)/libcudart_sim.so -Wl,-rpath,'$$ORIGIN/../sim' -ldl -lpthread

# Events past what a dump's lent ring holds back (VT_SPILL_MAX).
PROGS += $(T)/t_heldback

$(T)/t_heldback: tests/progs/t_heldback.c include/vramtrace.h $(SIM)/libcudart_sim.so
	@mkdir -p $(T)
	$(CC) $(TEST_CFLAGS) -o $@ $< $(SIM)/libcudart_sim.so -Wl,-rpath,'$$ORIGIN/../sim' -ldl
