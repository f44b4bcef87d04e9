/* t_start_empty.c -- libt_start_empty.so: a preloaded library that does
 * nothing, with a large zeroed area as vramtrace has (the loader maps one
 * more region for it): the floor any LD_PRELOAD costs. */
static char zeroed[256 << 10] __attribute__((used));
void t_start_empty(void) { zeroed[0] = 0; }
