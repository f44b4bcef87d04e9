# A library whose destructors free its GPU memory, finalized after
# vramtrace's (tests/integration/test_exitorder.py).
PROGS += $(T)/t_libfini $(T)/libt_libfini.so

$(T)/libt_libfini.so: tests/progs/t_libfini_lib.cc $(SIM)/libcudart_sim.so
	@mkdir -p $(T)
	$(CXX) -O0 -g -fPIC -shared -I$(CUDA_HOME)/include -o $@ $< $(SIM)/libcudart_sim.so -Wl,-rpath,'$$ORIGIN/../sim'

$(T)/t_libfini: tests/progs/t_libfini.c $(T)/libt_libfini.so $(SIM)/libcudart_sim.so
	@mkdir -p $(T)
	$(CC) $(TEST_CFLAGS) -o $@ $< -L$(T) -lt_libfini $(SIM)/libcudart_sim.so -Wl,-rpath,'$$ORIGIN' \
	    -Wl,-rpath,'$$ORIGIN/../sim'

# stdout a quick_exit leaves unwritten (tests/integration/test_exitorder.py).
PROGS += $(T)/t_quickbuf
$(T)/t_quickbuf: tests/progs/t_quickbuf.c $(SIM)/libcudart_sim.so
	@mkdir -p $(T)
	$(CC) $(TEST_CFLAGS) -o $@ $< $(SIM)/libcudart_sim.so -Wl,-rpath,'$$ORIGIN/../sim'

# A thread's own key destructor that allocates after vramtrace's destructors
# for the thread have run (tests/integration/test_exitorder.py).
PROGS += $(T)/t_tsdexit
$(T)/t_tsdexit: tests/progs/t_tsdexit.c $(SIM)/libcudart_sim.so
	@mkdir -p $(T)
	$(CC) $(TEST_CFLAGS) -o $@ $< $(SIM)/libcudart_sim.so -Wl,-rpath,'$$ORIGIN/../sim' -lpthread

# A fork in another thread while the exit runs vramtrace's finalizer
# (tests/integration/test_exitorder.py): the helper library, preloaded
# after vramtrace, holds the fork between its prepare steps.
PROGS += $(T)/t_forkexit $(T)/libt_forkexit.so
$(T)/libt_forkexit.so: tests/progs/t_forkexit_lib.c
	@mkdir -p $(T)
	$(CC) $(TEST_CFLAGS) -fPIC -shared -o $@ $< -lpthread

$(T)/t_forkexit: tests/progs/t_forkexit.c $(SIM)/libcudart_sim.so
	@mkdir -p $(T)
	$(CC) $(TEST_CFLAGS) -o $@ $< $(SIM)/libcudart_sim.so -Wl,-rpath,'$$ORIGIN/../sim' -lpthread -ldl

# The exit while a dump asked for by signal is being written
# (tests/integration/test_exitorder.py).
PROGS += $(T)/t_exitwait
$(T)/t_exitwait: tests/progs/t_exitwait.c $(SIM)/libcudart_sim.so
	@mkdir -p $(T)
	$(CC) $(TEST_CFLAGS) -o $@ $< $(SIM)/libcudart_sim.so -Wl,-rpath,'$$ORIGIN/../sim'
