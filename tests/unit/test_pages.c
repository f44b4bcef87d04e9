/* test_pages.c -- what the tracker maps in the hot path is mapped in small
 * pages: the event ring and a live table's arrays of a megabyte or more.
 * A huge page's first touch clears 2 MiB inside one hooked call (1 to 3 ms
 * of its CPU time, measured by `bench_shapes maxcall`), so each of these
 * mappings must carry the kernel's "no huge pages" flag (VmFlags "nh" in
 * /proc/self/smaps), whatever the system's transparent huge page setting. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../../tracker/history.h"
#include "../../tracker/slot.h"
#include "check.h"

/* The VmFlags line of the mapping holding `p`, in `flags` (empty when
 * none was found). */
static void vm_flags_of(const void *p, char *flags, size_t size) {
    FILE *f = fopen("/proc/self/smaps", "r");
    char line[512];
    int in = 0;
    flags[0] = 0;
    if (!f) return;
    while (fgets(line, sizeof line, f)) {
        unsigned long lo, hi;
        if (sscanf(line, "%lx-%lx ", &lo, &hi) == 2 && strchr(line, '-') == line + strspn(line, "0123456789abcdef")) {
            in = (uintptr_t)p >= lo && (uintptr_t)p < hi;
            continue;
        }
        if (in && strncmp(line, "VmFlags:", 8) == 0) {
            snprintf(flags, size, "%s", line + 8);
            break;
        }
    }
    fclose(f);
}

static int has_flag(const char *flags, const char *flag) {
    char want[8];
    snprintf(want, sizeof want, " %s", flag);
    for (const char *s = flags; (s = strstr(s, want)); s += strlen(want))
        if (s[strlen(want)] == ' ' || s[strlen(want)] == '\n' || s[strlen(want)] == 0) return 1;
    return 0;
}

int main(void) {
    vt_tracker_init(64, 1000000);
    uintptr_t frames[2] = {0x1000, 0x2000};
    /* Past 32,768 live the table's array is 1 MiB or more: mapped. */
    for (uint64_t i = 0; i < 40000; i++) vt_tracker_alloc(0x10000000 + i * 256, 256, VT_KIND_DEVICE, 0, "x", frames, 2);
    struct vt_snapshot *s = vt_tracker_snapshot(); /* applies the logs: the ring is mapped */
    CHECK_EQ(s->totals.live_count, 40000);
    vt_snapshot_free(s);
    char flags[512];
    CHECK(vt_history.ring != NULL);
    vm_flags_of(vt_history.ring, flags, sizeof flags);
    CHECK(flags[0] != 0);
    CHECK(has_flag(flags, "nh"));
    CHECK(!has_flag(flags, "hg"));
    CHECK(vt_my_slot && vt_my_slot->table.cap * sizeof(struct live_entry) >= ((size_t)1 << 20));
    if (vt_my_slot) {
        vm_flags_of(vt_my_slot->table.e, flags, sizeof flags);
        CHECK(flags[0] != 0);
        CHECK(has_flag(flags, "nh"));
    }
    return check_report("unit-pages");
}
