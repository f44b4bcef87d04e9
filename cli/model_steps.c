/* model_steps.c -- reading and checking the dump's step boundaries. */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>

#include <string.h>

#include "model.h"
#include "model_steps.h"
#include "model_u64.h"

/* The count at key of o (up to 2^64 - 1, model_u64.h), at least lo, into
 * *out; 0 when it is not one. */
static int count_from(json_t *o, const char *key, uint64_t lo, uint64_t *out) {
    return vm_json_u64(json_object_get(o, key), out) && *out >= lo;
}

/* The integer at key of o within lo..hi into *out; 0 when it is not. */
static int in_range(json_t *o, const char *key, json_int_t lo, json_int_t hi, json_int_t *out) {
    json_t *v = json_object_get(o, key);
    if (!json_is_integer(v)) return 0;
    *out = json_integer_value(v);
    return *out >= lo && *out <= hi;
}

int vm_steps_load(json_t *root, size_t nevents, struct vm_step **steps, size_t *n, uint64_t *total, char *err,
                  size_t errsize) {
    *steps = NULL;
    *n = 0;
    *total = 0;
    json_t *arr = json_object_get(root, "steps");
    if (!arr) return 0;
    json_int_t all;
    if (!json_is_array(arr) || !in_range(root, "steps_total", 0, INT64_MAX, &all)) {
        snprintf(err, errsize, "\"steps\" is not an array, or \"steps_total\" is missing or negative");
        return -1;
    }
    size_t k = json_array_size(arr);
    if ((uint64_t)all < k) {
        snprintf(err, errsize, "\"steps_total\" (%" PRId64 ") is below the %zu steps kept", (int64_t)all, k);
        return -1;
    }
    struct vm_step *v = calloc(k ? k : 1, sizeof *v);
    if (!v) { snprintf(err, errsize, "out of memory"); return -1; }
    /* Numbers rise by one up to steps_total; an event index never goes
     * back (-1, overwritten, comes first). */
    for (size_t i = 0; i < k; i++) {
        json_t *o = json_array_get(arr, i);
        json_int_t step, ev;
        uint64_t t;
        uint64_t want = (uint64_t)all - k + i + 1;
        if (!json_is_object(o) || !in_range(o, "step", 1, all, &step) || (uint64_t)step != want ||
            !count_from(o, "time_ns", 0, &t) || !in_range(o, "event", -1, (json_int_t)nevents, &ev) ||
            (i && (ev < v[i - 1].event || t < v[i - 1].time_ns))) {
            snprintf(err, errsize, "steps[%zu] is malformed", i);
            free(v);
            return -1;
        }
        v[i] = (struct vm_step){(uint64_t)step, t, (int64_t)ev};
    }
    *steps = v;
    *n = k;
    *total = (uint64_t)all;
    return 0;
}

void vm_growth_unit(json_t *o, struct vm_growth *g) {
    json_t *u = json_object_get(o, "unit"), *h = json_object_get(o, "holder");
    uint64_t units, per, rise, span, cache, run, from;
    g->holder = json_is_string(h) && *json_string_value(h) ? json_string_value(h) : NULL;
    g->history_from_ns = count_from(o, "history_from_ns", 0, &from) ? from : 0;
    g->cache_bytes = count_from(o, "cache_bytes", 0, &cache) ? (cache < g->end_bytes ? cache : g->end_bytes) : 0;
    g->unit = "allocation";
    g->units = g->allocations;
    g->bytes_per_unit = g->bytes_per_allocation;
    g->rise_bytes = g->end_bytes > g->first_bytes ? g->end_bytes - g->first_bytes : 0;
    g->span_ns = g->last_ns - g->since_ns;
    if (json_is_string(u) && count_from(o, "units", 1, &units) && count_from(o, "bytes_per_unit", 0, &per)) {
        const char *v = json_string_value(u);
        const char *name = strcmp(v, "step") == 0 ? "step" : strcmp(v, "second") == 0 ? "second"
                           : strcmp(v, "allocation") == 0 ? "allocation" : NULL;
        if (!name) return;
        g->unit = name;
        g->units = units;
        g->bytes_per_unit = per;
        g->run_steps = strcmp(name, "step") == 0 && count_from(o, "run_steps", 0, &run) ? run : 0;
        /* Dumps of earlier vramtrace: the whole growth. */
        if (count_from(o, "rise_bytes", 0, &rise) && count_from(o, "span_ns", 0, &span)) {
            g->rise_bytes = rise;
            g->span_ns = span;
        }
    }
}
