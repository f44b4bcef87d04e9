/* t_start_canload.c -- a program that can load a library after its start
 * (it imports dlopen), and does nothing unless asked: with "fdsize" it
 * prints its descriptor table's size (/proc/self/status's FDSize), with a
 * path it loads that library first. Against /bin/true, which can load
 * none, it tells where vramtrace grows the table at the start. */
#include <dlfcn.h>
#include <stdio.h>
#include <string.h>

static void fdsize(void) {
    FILE *f = fopen("/proc/self/status", "r");
    char line[256];
    while (f && fgets(line, sizeof line, f))
        if (strncmp(line, "FDSize:", 7) == 0) fputs(line, stdout);
    if (f) fclose(f);
}

int main(int argc, char **argv) {
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "fdsize") == 0) {
            fdsize();
        } else if (!dlopen(argv[i], RTLD_NOW)) {
            printf("dlopen: %s\n", dlerror());
            return 2;
        }
    }
    return 0;
}
