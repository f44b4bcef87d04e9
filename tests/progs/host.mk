# The traced program's own behaviour (signals, fork, errno, descriptors):
# tests/integration/test_host.py.
PROGS += $(T)/t_host

$(T)/t_host: tests/progs/t_host.c $(SIM)/libcuda.so.1 $(SIM)/libcudart_sim.so
	@mkdir -p $(T)
	$(CC) $(TEST_CFLAGS) -o $@ $< $(SIMLINK) -lcuda $(SIM)/libcudart_sim.so -lpthread
PROGS += $(T)/t_twosites
