# Test programs of the start area: what a process pays for the preload
# before its first GPU call (tests/integration/test_start.py).
PROGS += $(T)/t_start_env $(T)/t_start_quiet $(T)/libt_start_weak.so $(T)/libt_start_empty.so $(T)/t_start_pages \
         $(T)/t_start_canload

$(T)/t_start_env: tests/progs/t_start_env.c $(SIM)/libcuda.so.1
	@mkdir -p $(T)
	$(CC) $(TEST_CFLAGS) -o $@ $< $(SIMLINK) -lcuda

$(T)/t_start_quiet: tests/progs/t_start_quiet.c
	@mkdir -p $(T)
	$(CC) $(TEST_CFLAGS) -o $@ $< -ldl

$(T)/libt_start_weak.so: tests/progs/t_start_weak.c
	@mkdir -p $(T)
	$(CC) $(TEST_CFLAGS) -fPIC -shared -o $@ $<

$(T)/libt_start_empty.so: tests/progs/t_start_empty.c
	@mkdir -p $(T)
	$(CC) $(TEST_CFLAGS) -fPIC -shared -o $@ $<

$(T)/t_start_pages: tests/progs/t_start_pages.c
	@mkdir -p $(T)
	$(CC) $(TEST_CFLAGS) -o $@ $<

$(T)/t_start_canload: tests/progs/t_start_canload.c
	@mkdir -p $(T)
	$(CC) $(TEST_CFLAGS) -o $@ $< -ldl
