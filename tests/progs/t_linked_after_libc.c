/* t_linked_after_libc.c -- a program whose NEEDED list names the C library
 * before libvramtrace.so (-lc ahead of -lvramtrace): vramtrace is loaded
 * at start-up, yet behind the C library. It asks the API whether it is
 * active. */
#include <stdio.h>

#include "vramtrace.h"

int main(void) {
    printf("active %d\n", vramtrace_active());
    return 0;
}
