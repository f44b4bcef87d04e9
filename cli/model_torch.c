/* model_torch.c -- reading and checking the dump's "torch" arrays. */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "model_torch.h"
#include "model_u64.h"

const char *const vm_torch_categories[VM_TORCH_NCAT] = {"parameter", "buffer", "gradient",
                                                        "optimizer_state", "activation", "other"};

struct tctx {
    char *err;
    size_t errsize;
    int failed;
};

static void tfail(struct tctx *c, const char *what, size_t i, const char *key) {
    if (c->failed) return;
    c->failed = 1;
    snprintf(c->err, c->errsize, "torch[%zu]: %s \"%s\"", i, what, key);
}

static uint64_t tu64(struct tctx *c, json_t *o, const char *key, size_t i) {
    uint64_t v;
    if (!vm_json_u64(json_object_get(o, key), &v)) {
        tfail(c, "missing or not a count:", i, key);
        return 0;
    }
    return v;
}

/* An optional count: 1 with *out set, 0 when absent or null. */
static int topt(struct tctx *c, json_t *o, const char *key, size_t i, uint64_t *out) {
    json_t *v = json_object_get(o, key);
    if (!v || json_is_null(v)) return 0;
    *out = tu64(c, o, key, i);
    return !c->failed;
}

static const char *tstr(struct tctx *c, json_t *o, const char *key, size_t i) {
    json_t *v = json_object_get(o, key);
    if (!json_is_string(v)) {
        tfail(c, "missing or not a string:", i, key);
        return "";
    }
    return json_string_value(v);
}

static uint64_t thex(struct tctx *c, json_t *o, const char *key, size_t i) {
    const char *s = tstr(c, o, key, i);
    if (c->failed) return 0;
    char *end;
    unsigned long long v = strncmp(s, "0x", 2) == 0 ? strtoull(s + 2, &end, 16) : 0;
    if (strncmp(s, "0x", 2) != 0 || end == s + 2 || *end) tfail(c, "not an address:", i, key);
    return v;
}

static void load_tensor(struct tctx *c, json_t *x, size_t nstacks, struct vm_torch_tensor *t, size_t i) {
    if (!json_is_object(x)) { tfail(c, "a tensor is not an object in", i, "tensors"); return; }
    t->bytes = tu64(c, x, "bytes", i);
    t->shape = tstr(c, x, "shape", i);
    t->dtype = tstr(c, x, "dtype", i);
    t->category = tstr(c, x, "category", i);
    t->name = tstr(c, x, "name", i);
    t->holder = tstr(c, x, "holder", i);
    t->block = thex(c, x, "block_address", i);
    t->segment = thex(c, x, "segment_address", i);
    uint64_t st;
    if (topt(c, x, "stack", i, &st)) {
        if (st >= nstacks) tfail(c, "a tensor's stack is out of range:", i, "stack");
        t->has_stack = 1;
        t->stack = (size_t)st;
    }
}

/* The device's "growth" (null or absent: none); dumps before it said the
 * growth per step in "growth_per_step_bytes" and "growth_steps". */
static void load_growth(struct tctx *c, json_t *o, size_t nstacks, struct vm_torch_device *d, size_t i) {
    topt(c, o, "growth_per_step_bytes", i, &d->per_step);
    topt(c, o, "growth_steps", i, &d->growth_steps);
    json_t *g = json_object_get(o, "growth");
    if (!g || json_is_null(g)) return;
    if (!json_is_object(g)) { tfail(c, "not an object:", i, "growth"); return; }
    uint64_t st = tu64(c, g, "stack", i);
    const char *unit = tstr(c, g, "unit", i);
    d->growth_units = tu64(c, g, "units", i);
    d->growth_per_unit = tu64(c, g, "bytes_per_unit", i);
    d->growth_rise = tu64(c, g, "rise_bytes", i);
    d->growth_span_ns = tu64(c, g, "span_ns", i);
    d->growth_holder = tstr(c, g, "holder", i);
    topt(c, g, "run_steps", i, &d->growth_run_steps);
    topt(c, g, "history_from_ns", i, &d->growth_history_from_ns);
    if (c->failed) return;
    if (st >= nstacks) { tfail(c, "a growth's stack is out of range:", i, "stack"); return; }
    if (strcmp(unit, "step") != 0 && strcmp(unit, "second") != 0 && strcmp(unit, "allocation") != 0) {
        tfail(c, "not a unit:", i, "unit");
        return;
    }
    d->growth_unit = strcmp(unit, "step") == 0 ? "step" : strcmp(unit, "second") == 0 ? "second" : "allocation";
    d->growth_stack = (size_t)st;
    d->has_growth = 1;
    int steps = strcmp(d->growth_unit, "step") == 0;
    d->per_step = steps ? d->growth_per_unit : 0;
    d->growth_steps = steps ? d->growth_units : 0;
}

static void load_device(struct tctx *c, json_t *o, size_t nstacks, struct vm_torch_device *d, size_t i) {
    if (!json_is_object(o)) { tfail(c, "not an object:", i, "torch"); return; }
    json_t *dev = json_object_get(o, "device");
    if (!json_is_integer(dev) || json_integer_value(dev) < 0 || json_integer_value(dev) > 4095) {
        tfail(c, "missing or not a device ordinal:", i, "device");
        return;
    }
    d->device = (int)json_integer_value(dev);
    d->allocated = tu64(c, o, "allocated_bytes", i);
    d->reserved = tu64(c, o, "reserved_bytes", i);
    d->largest_free = tu64(c, o, "largest_free_block_bytes", i);
    d->has_outside = topt(c, o, "outside_bytes", i, &d->outside);
    d->has_request = topt(c, o, "request_bytes", i, &d->request);
    json_t *rounded = json_object_get(o, "request_rounded"); /* absent: the bytes asked */
    d->request_rounded = rounded && json_is_true(rounded);
    d->has_free = topt(c, o, "free_bytes", i, &d->free_bytes) & topt(c, o, "total_bytes", i, &d->total_bytes);
    topt(c, o, "steps", i, &d->steps);
    load_growth(c, o, nstacks, d, i);
    json_t *s = json_object_get(o, "settings");
    d->settings = json_is_string(s) ? json_string_value(s) : NULL;
    json_t *cat = json_object_get(o, "categories");
    if (!json_is_object(cat)) { tfail(c, "missing or not an object:", i, "categories"); return; }
    for (int k = 0; k < VM_TORCH_NCAT; k++) topt(c, cat, vm_torch_categories[k], i, &d->cat[k]);
    json_t *ts = json_object_get(o, "tensors");
    if (!json_is_array(ts)) { tfail(c, "missing or not an array:", i, "tensors"); return; }
    d->ntensors = json_array_size(ts);
    if (!(d->tensors = calloc(d->ntensors ? d->ntensors : 1, sizeof *d->tensors))) {
        tfail(c, "out of memory at", i, "tensors");
        return;
    }
    for (size_t j = 0; j < d->ntensors && !c->failed; j++)
        load_tensor(c, json_array_get(ts, j), nstacks, &d->tensors[j], i);
}

void vm_torch_free(struct vm_torch *t) {
    if (!t) return;
    for (size_t i = 0; t->devices && i < t->ndevices; i++) free(t->devices[i].tensors);
    free(t->devices);
    free(t);
}

int vm_torch_load(json_t *o, size_t nstacks, struct vm_torch **out, char *err, size_t errsize) {
    *out = NULL;
    json_t *arr = json_object_get(o, "torch");
    if (!arr) return 0;
    struct tctx c = {err, errsize, 0};
    if (!json_is_array(arr)) {
        snprintf(err, errsize, "field \"torch\" is not an array");
        return -1;
    }
    struct vm_torch *t = calloc(1, sizeof *t);
    size_t n = json_array_size(arr);
    if (t) t->devices = calloc(n ? n : 1, sizeof *t->devices);
    if (!t || !t->devices) {
        free(t);
        snprintf(err, errsize, "out of memory");
        return -1;
    }
    t->ndevices = n;
    for (size_t i = 0; i < n && !c.failed; i++) load_device(&c, json_array_get(arr, i), nstacks, &t->devices[i], i);
    if (c.failed) {
        vm_torch_free(t);
        return -1;
    }
    *out = t;
    return 0;
}
