/* t_leaks.c -- known leaks: the leak check, growth, the dump signal.
 *
 *   t_leaks          leaks: load_once 1 MiB, leaky_step 8 x 64 KiB (a
 *                    staircase), third_party_init 4 KiB; steady_step frees
 *                    what it takes
 *   t_leaks clean    frees everything
 *   t_leaks signal   also raises the dump signal twice mid-run, waiting for
 *                    each dump ("signal-at-exit": once, as main returns) */
#include <cuda_runtime_api.h>
#include <dirent.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static void *load_once(void) {
    void *p = NULL;
    cudaMalloc(&p, 1 << 20);
    return p;
}

static void *leaky_step(void) {
    void *p = NULL;
    cudaMalloc(&p, 64 << 10);
    return p;
}

static void steady_step(void) {
    void *p = NULL;
    cudaMalloc(&p, 256 << 10);
    cudaFree(p);
}

static void *third_party_init(void) {
    void *p = NULL;
    cudaMalloc(&p, 4096);
    return p;
}

/* Dumps written in the folder of VRAMTRACE_OUT (finished ones: named
 * *.json, not a temporary *.tmp.*). */
static int dumps_written(const char *dir) {
    DIR *d = opendir(dir);
    if (!d) return -1;
    int n = 0;
    for (struct dirent *e; (e = readdir(d));) {
        size_t len = strlen(e->d_name);
        n += len > 5 && strcmp(e->d_name + len - 5, ".json") == 0 && !strstr(e->d_name, ".tmp.");
    }
    closedir(d);
    return n;
}

/* The folder of VRAMTRACE_OUT in dir; 0 when it names none. */
static int out_folder(char *dir, size_t size) {
    const char *out = getenv("VRAMTRACE_OUT");
    const char *slash = out ? strrchr(out, '/') : NULL;
    if (!slash || (size_t)(slash - out) >= size) return 0;
    memcpy(dir, out, (size_t)(slash - out));
    dir[slash - out] = 0;
    return 1;
}

/* The name of on-demand dump n (1 or 2) where VRAMTRACE_OUT is a name
 * ending ".json" whose only pattern is %p: NAME.n.json; 0 otherwise. */
static int dump_name(int n, char *name, size_t size) {
    const char *out = getenv("VRAMTRACE_OUT");
    size_t len = out ? strlen(out) : 0;
    const char *p = out ? strstr(out, "%p") : NULL;
    if (!p || len < 5 || strcmp(out + len - 5, ".json") != 0 || strchr(p + 2, '%') || memchr(out, '%', (size_t)(p - out)))
        return 0;
    int k = snprintf(name, size, "%.*s%d%.*s.%d.json", (int)(p - out), out, (int)getpid(), (int)(len - 5 - (size_t)(p - out) - 2),
                     p + 2, n);
    return k > 0 && (size_t)k < size;
}

static ino_t inode_of(const char *name) {
    struct stat st;
    return stat(name, &st) == 0 ? st.st_ino : 0;
}

/* What stood at each on-demand dump's name when the run began (an
 * earlier run's dump, which this run's will keep aside). */
static ino_t earlier[3];

/* Wait until the watcher has written the n-th on-demand dump (another
 * thread writes it, in its own time), at most 30 s: until its name holds
 * another file than when the run began, where the name is known; else
 * until the folder holds n more dumps than `before` (what earlier runs
 * left there; a dump of theirs that one of this run's replaces is kept
 * aside, one more file all the same: counted as soon as it is kept aside,
 * so the name is waited for where it can be); with no folder to look in,
 * 200 ms. */
static void wait_for_dump(int before, int n) {
    char dir[4096], name[4096];
    if (dump_name(n, name, sizeof name)) {
        for (int i = 0; i < 3000; i++) {
            ino_t now = inode_of(name);
            if (now && now != earlier[n]) return;
            usleep(10000);
        }
        return;
    }
    if (!out_folder(dir, sizeof dir)) {
        usleep(200000);
        return;
    }
    for (int i = 0; i < 3000 && dumps_written(dir) < before + n; i++) usleep(10000);
}

int main(int argc, char **argv) {
    int clean = argc > 1 && strcmp(argv[1], "clean") == 0;
    int sig = argc > 1 && strcmp(argv[1], "signal") == 0;
    int sig_at_exit = argc > 1 && strcmp(argv[1], "signal-at-exit") == 0;
    void *kept[8];
    char dir[4096];
    int before = sig && out_folder(dir, sizeof dir) ? dumps_written(dir) : 0;
    for (int n = 1; n <= 2; n++) {
        char name[4096];
        if (sig && dump_name(n, name, sizeof name)) earlier[n] = inode_of(name);
    }
    void *once = load_once();
    void *tp = third_party_init();
    for (int i = 0; i < 8; i++) {
        kept[i] = leaky_step();
        steady_step();
        /* A step's work: the staircase lasts 175 ms, well past what the
         * exit takes after it (growth without steps is counted in time). */
        usleep(25000);
        if (sig && (i == 2 || i == 5)) {
            raise(SIGUSR2);
            wait_for_dump(before, i == 2 ? 1 : 2);
        }
    }
    if (clean) {
        for (int i = 0; i < 8; i++) cudaFree(kept[i]);
        cudaFree(once);
        cudaFree(tp);
    }
    printf("done\n");
    if (sig_at_exit) raise(SIGUSR2);
    return 0;
}
