/* test_tblock.c -- tracker/tblock.c alone: blocks carved in order from a
 * mapping, handed back and out again, the next mapping made ahead at a
 * quarter left and taken when the current one ends, the roots shown, a
 * forked child that finds a mapping under way in its copy, and threads
 * taking at once (run under TSan too). */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "../../tracker/tblock.h"
#include "check.h"

static int roots;
static size_t rooted;
static void root(const void *p, size_t bytes) {
    (void)p;
    roots++;
    rooted += bytes;
}

static int all_zero(const char *p, size_t n) {
    for (size_t i = 0; i < n; i++)
        if (p[i]) return 0;
    return 1;
}

static void carving(void) {
    struct vt_tblock_kind k = VT_TBLOCK_KIND(100, 8, root); /* 128-byte blocks, 8 a mapping */
    CHECK_EQ(k.size, 128);
    char *b[8];
    for (int i = 0; i < 8; i++) b[i] = vt_tblock_take(&k);
    CHECK_EQ(roots, 2); /* the first mapping at the first take; the next one made ahead at 1 left (< 8 / 4) */
    CHECK_EQ(rooted, 2 * 8 * 128);
    for (int i = 1; i < 8; i++) CHECK_EQ(b[i] - b[i - 1], 128);
    CHECK_EQ((uintptr_t)b[0] % 4096, 0);
    int zero = 1;
    for (int i = 0; i < 8; i++) zero &= all_zero(b[i], 128);
    CHECK(zero);
    CHECK(k.spare != NULL);
    char *spare = k.spare;
    CHECK_EQ(k.mapping, 0);
    /* The mapping is used up: the ninth block is the spare's first. */
    char *ninth = vt_tblock_take(&k);
    CHECK(ninth == spare);
    CHECK(k.spare == NULL);
    CHECK_EQ(roots, 2);
    /* Given back: handed out again, last given first, before any new one. */
    memset(b[3], 0x5a, 128);
    vt_tblock_give(&k, b[3]);
    vt_tblock_give(&k, b[5]);
    CHECK(vt_tblock_take(&k) == b[5]);
    char *again = vt_tblock_take(&k);
    CHECK(again == b[3]);
    CHECK_EQ((unsigned char)again[100], 0x5a); /* as its last taker left it (but its first word) */
    CHECK(vt_tblock_take(&k) == ninth + 128);
}

/* A forked child whose copy says a mapping is under way (the parent's
 * taker was making it out of the lock): the child makes its own. */
static void forked_child(void) {
    struct vt_tblock_kind k = VT_TBLOCK_KIND(64, 8, NULL);
    char *first = vt_tblock_take(&k);
    CHECK(first != NULL);
    k.mapping = getpid(); /* as if a taker of this process were mapping now */
    for (int i = 1; i < 7; i++) vt_tblock_take(&k);
    CHECK(k.spare == NULL); /* this process's own mapping under way: no second one */
    pid_t pid = fork();
    if (pid == 0) {
        vt_tblock_take(&k); /* the last block: the child maps the next one ahead */
        _exit(k.spare != NULL && k.mapping == 0 ? 0 : 1);
    }
    int status = 0;
    waitpid(pid, &status, 0);
    CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0);
}

/* Threads taking and giving at once: no block is handed to two holders. */
#define THREADS 8
#define ROUNDS 2000
static struct vt_tblock_kind shared = VT_TBLOCK_KIND(64, 16, NULL);
static int clashes;
static pthread_mutex_t clash_lock = PTHREAD_MUTEX_INITIALIZER;

static void *taker(void *arg) {
    uintptr_t me = (uintptr_t)arg + 1;
    char *held[4];
    for (int r = 0; r < ROUNDS; r++) {
        for (int i = 0; i < 4; i++) {
            held[i] = vt_tblock_take(&shared);
            __atomic_store_n((uintptr_t *)(held[i] + 8), me, __ATOMIC_RELAXED);
        }
        int bad = 0;
        for (int i = 0; i < 4; i++) bad |= __atomic_load_n((uintptr_t *)(held[i] + 8), __ATOMIC_RELAXED) != me;
        if (bad) {
            pthread_mutex_lock(&clash_lock);
            clashes++;
            pthread_mutex_unlock(&clash_lock);
        }
        for (int i = 0; i < 4; i++) vt_tblock_give(&shared, held[i]);
    }
    return NULL;
}

static void threads(void) {
    pthread_t t[THREADS];
    for (uintptr_t i = 0; i < THREADS; i++) pthread_create(&t[i], NULL, taker, (void *)i);
    for (int i = 0; i < THREADS; i++) pthread_join(t[i], NULL);
    CHECK_EQ(clashes, 0);
    /* Every block carved is back on the list; a block is carved only when
     * the list is empty, so no more than were ever held at once. */
    int blocks = 0;
    for (char *p = shared.free; p; p = *(char **)p) blocks++;
    CHECK(blocks >= 4 && blocks <= 4 * THREADS);
}

int main(void) {
    carving();
    forked_child();
    threads();
    return check_report("unit_tblock");
}
