/* model_mappings.c -- reading and checking the dump's VMM mappings
 * (model_mappings.h). */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "model_mappings.h"
#include "model_scan.h"
#include "model_u64.h"

static const char *const fields[] = {"handle", "address", "bytes", "device", "time_ns", "event", "unmap_ns",
                                     "unmap_event"};
#define NFIELDS (sizeof fields / sizeof *fields)

/* Whether root's "mapping_fields" is the list above: the rows are read by
 * place, so a writer that moved or added a column would have them misread. */
static int fields_known(json_t *root) {
    json_t *lf = json_object_get(root, "mapping_fields");
    if (!json_is_array(lf) || json_array_size(lf) != NFIELDS) return 0;
    for (size_t i = 0; i < NFIELDS; i++) {
        json_t *x = json_array_get(lf, i);
        if (!json_is_string(x) || strcmp(json_string_value(x), fields[i]) != 0) return 0;
    }
    return 1;
}

/* An integer in lo..hi into *v. */
static int int_in(struct vm_scan *p, int64_t *v, int64_t lo, int64_t hi) {
    return vm_scan_int(p, v) && *v >= lo && *v <= hi;
}

/* One row into *m, checked against the row before it (prev, NULL for the
 * first): its event never before prev's, its time never either. */
static int row(struct vm_scan *p, size_t nevents, const struct vm_mapping *prev, struct vm_mapping *m) {
    int64_t device;
    *m = (struct vm_mapping){0};
    if (!vm_scan_lit(p, '[') || !vm_scan_hex(p, &m->handle) || !vm_scan_lit(p, ',') ||
        !vm_scan_hex(p, &m->address) || !vm_scan_lit(p, ',') || !vm_scan_u64(p, &m->bytes) ||
        !vm_scan_lit(p, ',') || !int_in(p, &device, -1, 4095) || !vm_scan_lit(p, ',') ||
        !vm_scan_u64(p, &m->time_ns) || !vm_scan_lit(p, ',') || !int_in(p, &m->event, -1, (int64_t)nevents) ||
        !vm_scan_lit(p, ','))
        return 0;
    m->device = (int16_t)device;
    if (vm_scan_null(p)) {
        if (!vm_scan_lit(p, ',') || !vm_scan_null(p)) return 0;
    } else {
        if (!vm_scan_u64(p, &m->unmap_ns) || !vm_scan_lit(p, ',') ||
            !int_in(p, &m->unmap_event, m->event, (int64_t)nevents) || m->unmap_ns < m->time_ns)
            return 0;
        m->unmapped = 1;
    }
    if (!vm_scan_lit(p, ']')) return 0;
    return !prev || (m->event >= prev->event && m->time_ns >= prev->time_ns);
}

int vm_mappings_load(const char *at, size_t len, json_t *root, size_t nevents, struct vm_mapping **out, size_t *n,
                     uint64_t *total, char *err, size_t errsize) {
    *out = NULL;
    *n = 0;
    *total = 0;
    char *text = NULL;
    if (!at) {
        json_t *arr = json_object_get(root, "mappings");
        if (!arr) return 0;
        if (!json_is_array(arr)) {
            snprintf(err, errsize, "dump: field \"mappings\" is not an array");
            return -1;
        }
        /* Read as a version 2 dump's text is, by the one row reader. */
        if (!(text = json_dumps(arr, JSON_COMPACT))) {
            snprintf(err, errsize, "out of memory");
            return -1;
        }
        at = text;
        len = strlen(text);
    }
    uint64_t all;
    if (!vm_json_u64(json_object_get(root, "mappings_total"), &all)) {
        snprintf(err, errsize, "dump: field \"mappings_total\" is missing or not a count");
        free(text);
        return -1;
    }
    if (!fields_known(root)) {
        snprintf(err, errsize, "dump: field \"mapping_fields\" is not [\"handle\", \"address\", \"bytes\", "
                               "\"device\", \"time_ns\", \"event\", \"unmap_ns\", \"unmap_event\"], the columns "
                               "this vramtrace reads (a newer vramtrace's dump?)");
        free(text);
        return -1;
    }
    struct vm_mapping *v = NULL;
    size_t k = 0, cap = 0;
    struct vm_scan p = {at, at + len, NULL, NULL, NULL};
    int more = !vm_scan_lit(&p, '[') ? -1 : vm_scan_lit(&p, ']') ? 0 : 1;
    for (; more == 1; more = vm_scan_next(&p)) {
        if (k == cap) {
            size_t c = cap ? 2 * cap : 64;
            struct vm_mapping *g = realloc(v, c * sizeof *g);
            if (!g) {
                snprintf(err, errsize, "out of memory");
                goto bad;
            }
            v = g;
            cap = c;
        }
        if (!row(&p, nevents, k ? &v[k - 1] : NULL, &v[k])) {
            snprintf(err, errsize, "mappings[%zu] is malformed%s%s", k, p.err ? ": " : "", p.err ? p.err : "");
            goto bad;
        }
        k++;
    }
    if (more < 0) {
        snprintf(err, errsize, "dump: field \"mappings\" is not an array of rows%s%s", p.err ? ": " : "",
                 p.err ? p.err : "");
        goto bad;
    }
    if (all < k) {
        snprintf(err, errsize, "\"mappings_total\" (%" PRIu64 ") is below the %zu mappings kept", all, k);
        goto bad;
    }
    free(text);
    *out = v;
    *n = k;
    *total = all;
    return 0;
bad:
    free(v);
    free(text);
    return -1;
}
