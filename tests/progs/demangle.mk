# The in-process demangler when the C++ runtime came only with a library
# loaded RTLD_LOCAL (tests/integration/test_demangle.py).
PROGS += $(T)/t_cxxlocal $(T)/libt_cxxlocal.so

$(T)/libt_cxxlocal.so: tests/progs/t_cxxlocal_lib.cc $(SIM)/libcudart_sim.so
	@mkdir -p $(T)
	$(CXX) -O0 -g -fPIC -shared -I$(CUDA_HOME)/include -o $@ $< $(SIM)/libcudart_sim.so -Wl,-rpath,'$$ORIGIN/../sim'

$(T)/t_cxxlocal: tests/progs/t_cxxlocal.c
	@mkdir -p $(T)
	$(CC) $(TEST_CFLAGS) -o $@ $< -ldl
