/* t_static.c -- a statically linked program: no dynamic loader, so
 * LD_PRELOAD never reaches it. `vramtrace run --leak-check` must say so
 * rather than pass. Exits with the status given as its argument. */
#include <stdlib.h>

int main(int argc, char **argv) { return argc > 1 ? atoi(argv[1]) : 0; }
