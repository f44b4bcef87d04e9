# A request whose size passes 2^64 - 1, through each API that computes one
# (tests/integration/test_sizes.py).
PROGS += $(T)/t_sizewrap

$(T)/t_sizewrap: tests/progs/t_sizewrap.c $(SIM)/libcudart_sim.so $(SIM)/libcuda.so.1
	@mkdir -p $(T)
	$(CC) $(TEST_CFLAGS) -o $@ $< $(SIM)/libcudart_sim.so $(SIMLINK) -lcuda
