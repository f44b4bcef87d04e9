# The report's model of a dump's stacks, printed frame by frame
# (tests/integration/test_reader_mem.py).
PROGS += $(T)/t_model_frames
MODEL_SRC := cli/model.c cli/demangle.c cli/model_torch.c cli/model_u64.c cli/model_v2.c cli/model_scan.c cli/model_file.c \
             cli/model_label.c cli/model_tree.c cli/model_names.c cli/model_steps.c cli/model_mappings.c cli/model_events.c $(COMMON_C)
$(T)/t_model_frames: tests/progs/t_model_frames.c $(MODEL_SRC) $(HEADERS)
	@mkdir -p $(T)
	$(CC) $(TEST_CFLAGS) -o $@ $< $(MODEL_SRC) $(CLI_LIBS)

# A command's peak resident memory, measured from a small parent.
PROGS += $(T)/t_peak_rss
$(T)/t_peak_rss: tests/progs/t_peak_rss.c
	@mkdir -p $(T)
	$(CC) $(TEST_CFLAGS) -o $@ $<

# The CLI with the folded format's line hash narrowed to two bits, so that
# lines that hash alike but read differently are compared at every turn,
# and its room for frames' texts to 64 bytes, so that most frames' texts
# are made at each use and the first few from the cache
# (cli/fmt_folded.c; tests/integration/test_reader_mem.py); the JSON
# report's room for frames' objects likewise, to 600 bytes (cli/fmt_json.c).
PROGS += $(T)/vramtrace_fold_collide
$(T)/vramtrace_fold_collide: $(CLI_C) $(HEADERS) $(HTML_ASSETS) $(B)/prefix.stamp
	@mkdir -p $(T)
	$(CC) $(BASE) $(LIBDIR_DEF) $(CFLAGS) -DVR_FOLDED_HASH_MASK=3 -DVR_FOLDED_LABELS_ROOM=64 -DVR_JSON_FRAMES_ROOM=600 -o $@ $(CLI_C) $(CLI_LIBS) $(CLI_TOP_LIBS)

# The event-heavy dump: bench/bench_alloc.c's pairs under the library
# (tests/integration/test_reader_mem.py).
PROGS += $(B)/bench/bench_alloc
