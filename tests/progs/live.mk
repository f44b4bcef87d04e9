# The live view, top, metrics and the forecast (tests/integration/test_live.py).
PROGS += $(T)/t_live

$(T)/t_live: tests/progs/t_live.c include/vramtrace.h $(SIM)/libcudart_sim.so
	@mkdir -p $(T)
	$(CC) $(TEST_CFLAGS) -o $@ $< $(SIM)/libcudart_sim.so -Wl,-rpath,'$$ORIGIN/../sim' -ldl

# Forks at the start of vramtrace's helper threads (test_live.py).
PROGS += $(T)/t_forkstorm

$(T)/t_forkstorm: tests/progs/t_forkstorm.c $(SIM)/libcudart_sim.so
	@mkdir -p $(T)
	$(CC) $(TEST_CFLAGS) -o $@ $< $(SIM)/libcudart_sim.so -Wl,-rpath,'$$ORIGIN/../sim'
