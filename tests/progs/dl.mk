# Test programs of the dl area: how the library's CUDA names are seen and
# resolved (tests/integration/test_dl.py).
PROGS += $(T)/t_dl_weak $(T)/libt_dl_rt.so $(T)/t_dl_local $(T)/libt_dl_cu.so \
         $(T)/t_dl_two $(T)/libt_dl_drva.so $(T)/libt_dl_drvb.so

$(T)/t_dl_weak: tests/progs/t_dl_weak.c
	@mkdir -p $(T)
	$(CC) $(TEST_CFLAGS) -o $@ $< -ldl

$(T)/libt_dl_rt.so: tests/progs/t_dl_rt.c $(SIM)/libcudart_sim.so
	@mkdir -p $(T)
	$(CC) $(TEST_CFLAGS) -fPIC -shared -o $@ $< $(SIM)/libcudart_sim.so -Wl,-rpath,'$$ORIGIN/../sim'

$(T)/t_dl_local: tests/progs/t_dl_local.c
	@mkdir -p $(T)
	$(CC) $(TEST_CFLAGS) -o $@ $< -ldl

$(T)/libt_dl_cu.so: tests/progs/t_dl_cu.c $(SIM)/libcuda.so.1
	@mkdir -p $(T)
	$(CC) $(TEST_CFLAGS) -fPIC -shared -o $@ $< $(SIMLINK) -lcuda -ldl

$(T)/t_dl_two: tests/progs/t_dl_two.c
	@mkdir -p $(T)
	$(CC) $(TEST_CFLAGS) -o $@ $< -ldl

$(T)/libt_dl_drva.so: tests/progs/t_dl_drv.c
	@mkdir -p $(T)
	$(CC) $(TEST_CFLAGS) -fPIC -fvisibility=hidden -shared -DDRV_BASE=0xa0000000ull -o $@ $<

$(T)/libt_dl_drvb.so: tests/progs/t_dl_drv.c
	@mkdir -p $(T)
	$(CC) $(TEST_CFLAGS) -fPIC -fvisibility=hidden -shared -DDRV_BASE=0xb0000000ull -o $@ $<

# Plugins unloaded after they allocated (test_dl.py's unload tests).
PROGS += $(T)/t_unload $(T)/libt_unload_a.so $(T)/libt_unload_b.so $(T)/libt_unload_nobid_a.so $(T)/libt_unload_nobid_b.so \
         $(T)/libt_unload_based.so

$(T)/t_unload: tests/progs/t_unload.c $(SIM)/libcuda.so.1
	@mkdir -p $(T)
	$(CC) $(TEST_CFLAGS) -o $@ $< $(SIMLINK) -lcuda -ldl -lpthread

$(T)/libt_unload_a.so $(T)/libt_unload_b.so: $(T)/libt_unload_%.so: tests/progs/t_unload_plug.c $(SIM)/libcuda.so.1
	@mkdir -p $(T)
	$(CC) $(TEST_CFLAGS) -fPIC -shared -DPLUG=$* -o $@ $< $(SIMLINK) -lcuda

# The same plugins without a GNU build ID (as clang links by default).
$(T)/libt_unload_nobid_a.so $(T)/libt_unload_nobid_b.so: $(T)/libt_unload_nobid_%.so: tests/progs/t_unload_plug.c $(SIM)/libcuda.so.1
	@mkdir -p $(T)
	$(CC) $(TEST_CFLAGS) -fPIC -shared -Wl,--build-id=none -DPLUG=$* -o $@ $< $(SIMLINK) -lcuda

# Code made at run time (test_dl.py's dl_code_made_at_run_time_names_no_module).
PROGS += $(T)/t_jit

$(T)/t_jit: tests/progs/t_jit.c $(SIM)/libcuda.so.1
	@mkdir -p $(T)
	$(CC) $(TEST_CFLAGS) -o $@ $< $(SIMLINK) -lcuda

# The plugin linked to start at 0x10000, not 0.
$(T)/libt_unload_based.so: tests/progs/t_unload_plug.c $(SIM)/libcuda.so.1
	@mkdir -p $(T)
	$(CC) $(TEST_CFLAGS) -fPIC -shared -Wl,-Ttext-segment=0x10000 -DPLUG=a -o $@ $< $(SIMLINK) -lcuda

# A plugin host loading plugins with RTLD_DEEPBIND (test_dl.py's deepbind
# tests): one plugin linked with the driver, one with the runtime.
PROGS += $(T)/t_deepbind $(T)/libt_deepbind_cu.so $(T)/libt_deepbind_rt.so

$(T)/t_deepbind: tests/progs/t_deepbind.c
	@mkdir -p $(T)
	$(CC) $(TEST_CFLAGS) -o $@ $< -ldl

$(T)/libt_deepbind_cu.so: tests/progs/t_deepbind_cu.c $(SIM)/libcuda.so.1
	@mkdir -p $(T)
	$(CC) $(TEST_CFLAGS) -fPIC -shared -o $@ $< $(SIMLINK) -lcuda

$(T)/libt_deepbind_rt.so: tests/progs/t_deepbind_rt.c $(SIM)/libcudart_sim.so
	@mkdir -p $(T)
	$(CC) $(TEST_CFLAGS) -fPIC -shared -o $@ $< $(SIM)/libcudart_sim.so -Wl,-rpath,'$$ORIGIN/../sim'
