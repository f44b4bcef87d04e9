# A child forked after its parent's first GPU call, signalled
# (tests/integration/test_forksig.py).
PROGS += $(T)/t_forksig
$(T)/t_forksig: tests/progs/t_forksig.c $(SIM)/libcudart_sim.so
	@mkdir -p $(T)
	$(CC) $(TEST_CFLAGS) -o $@ $< $(SIM)/libcudart_sim.so -Wl,-rpath,'$$ORIGIN/../sim'

# Threads coming and going, every kind of allocation, frees of each
# other's memory, a dump signal every 30 ms and a fork every 50 ms, under
# the library as built and its TSan build (tests/integration/test_forksig.py).
PROGS += $(T)/t_stress
$(T)/t_stress: tests/progs/t_stress.c $(SIM)/libcuda.so.1
	@mkdir -p $(T)
	$(CC) $(TEST_CFLAGS) -o $@ $< $(SIMLINK) -lcuda -lpthread
