# Unit tests of the hot path's structures (tests/unit/test_hotpath.c):
# plain, ASan+UBSan, and TSan; `make unit` runs the three.
UNIT_HOTPATH := $(T)/unit_hotpath $(T)/unit_hotpath_asan $(T)/unit_hotpath_tsan

$(T)/unit_hotpath: tests/unit/test_hotpath.c tests/unit/check.h $(wildcard tracker/*.c report/*.c common/*.c) $(HEADERS)
	@mkdir -p $(T)
	$(CC) $(BASE) -O1 -g -o $@ tests/unit/test_hotpath.c $(UNIT_SRC) $(UNIT_LIBS)

$(T)/unit_hotpath_asan: tests/unit/test_hotpath.c tests/unit/check.h $(wildcard tracker/*.c report/*.c common/*.c) $(HEADERS)
	@mkdir -p $(T)
	$(CC) $(BASE) -O1 -g -fsanitize=address,undefined -fno-sanitize-recover=all \
	    -o $@ tests/unit/test_hotpath.c $(UNIT_SRC) $(UNIT_LIBS)

$(T)/unit_hotpath_tsan: tests/unit/test_hotpath.c tests/unit/check.h $(wildcard tracker/*.c report/*.c common/*.c) $(HEADERS)
	@mkdir -p $(T)
	$(CC) $(BASE) -O1 -g -fsanitize=thread -o $@ tests/unit/test_hotpath.c $(UNIT_SRC) $(UNIT_LIBS)
