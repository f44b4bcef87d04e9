# Test programs of the Python-frames area (tests/integration/test_pystack.py):
# a library whose native thread allocates while Python waits, and the
# fault-safe reader of another thread's frames against fake CPython objects.
PROGS += $(T)/libt_pyborrow.so $(T)/t_pyforeign

$(T)/libt_pyborrow.so: tests/progs/t_pyborrow_lib.c $(SIM)/libcuda.so.1
	@mkdir -p $(T)
	$(CC) $(TEST_CFLAGS) -fPIC -shared -o $@ $< $(SIMLINK) -lcuda -lpthread

$(T)/t_pyforeign: tests/progs/t_pyforeign.c tracker/pystack.c tracker/pyline.c tracker/pyborrow.c common/warn.c common/format.c $(HEADERS)
	@mkdir -p $(T)
	$(CC) $(BASE) -O1 -g -fsanitize=address,undefined -fno-sanitize-recover=all -o $@ \
	    tests/progs/t_pyforeign.c tracker/pystack.c tracker/pyline.c tracker/pyborrow.c common/warn.c common/format.c -ldl -lpthread

# The calling thread's walk per CPython version, on fake objects
# (tests/integration/test_pywalk.py runs it once for each of 3.10 to 3.13).
PROGS += $(T)/t_pywalk
$(T)/t_pywalk: tests/progs/t_pywalk.c tracker/pystack.c tracker/pyline.c tracker/pyborrow.c common/warn.c common/format.c $(HEADERS)
	@mkdir -p $(T)
	$(CC) $(BASE) -O1 -g -fsanitize=address,undefined -fno-sanitize-recover=all -rdynamic -o $@ \
	    tests/progs/t_pywalk.c tracker/pystack.c tracker/pyline.c tracker/pyborrow.c common/warn.c common/format.c -ldl -lpthread
