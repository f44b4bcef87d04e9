# Test programs of the call-site label in every output
# (tests/integration/test_sitefirst.py).
PROGS += $(T)/t_sitefirst $(T)/libt_chain.so

$(T)/libt_chain.so: tests/progs/t_chain_lib.c $(SIM)/libcudart_sim.so
	@mkdir -p $(T)
	$(CC) $(TEST_CFLAGS) -fPIC -shared -Wl,-soname,libt_chain.so -o $@ $< $(SIM)/libcudart_sim.so -Wl,-rpath,'$$ORIGIN/../sim'

$(T)/t_sitefirst: tests/progs/t_sitefirst.c $(T)/libt_chain.so $(SIM)/libcudart_sim.so
	@mkdir -p $(T)
	$(CC) $(TEST_CFLAGS) -o $@ $< $(T)/libt_chain.so $(SIM)/libcudart_sim.so -Wl,-rpath,'$$ORIGIN' -Wl,-rpath,'$$ORIGIN/../sim'
