# A child forked after its parent's first GPU call, signalled
# (tests/integration/test_forksig.py).
PROGS += $(T)/t_forksig
$(T)/t_forksig: tests/progs/t_forksig.c $(SIM)/libcudart_sim.so
	@mkdir -p $(T)
	$(CC) $(TEST_CFLAGS) -o $@ $< $(SIM)/libcudart_sim.so -Wl,-rpath,'$$ORIGIN/../sim'
