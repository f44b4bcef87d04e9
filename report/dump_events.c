/* dump_events.c -- the event ring of a version 2 dump, packed.
 *
 * Each event is a run of bytes, each field relative to the event before
 * (docs/dump-format.md): zigzag varint of the time's change, one byte of
 * type (bits 0-1), kind (bits 2-5) and device (bits 6-7: 0 for -1, 1 or 2
 * for devices 0 and 1, 3 when a varint of device + 1 follows), zigzag
 * varint of the address's change, zigzag varint of the size's change and a
 * varint of the stack. An allocation loop's event then takes about ten
 * bytes; the whole run is one base64 string. */
#include <inttypes.h>
#include <string.h>

#include "dump_tables.h"

struct b64 {
    FILE *f;
    unsigned char in[3];
    int nin;
    char out[4096];
    size_t nout;
};

static const char alphabet[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

static void b64_flush(struct b64 *b) {
    fwrite(b->out, 1, b->nout, b->f);
    b->nout = 0;
}

static void b64_byte(struct b64 *b, unsigned char c) {
    b->in[b->nin++] = c;
    if (b->nin < 3) return;
    uint32_t v = (uint32_t)b->in[0] << 16 | (uint32_t)b->in[1] << 8 | b->in[2];
    if (b->nout + 4 > sizeof b->out) b64_flush(b);
    for (int k = 0; k < 4; k++) b->out[b->nout++] = alphabet[(v >> (18 - 6 * k)) & 63];
    b->nin = 0;
}

static void b64_end(struct b64 *b) {
    if (b->nin) {
        int n = b->nin;
        while (b->nin) b64_byte(b, 0);   /* pads to a whole group */
        b->nout -= (size_t)(3 - n);
        for (int k = n; k < 3; k++) b->out[b->nout++] = '=';
    }
    b64_flush(b);
}

static void varint(struct b64 *b, uint64_t v) {
    while (v >= 0x80) {
        b64_byte(b, (unsigned char)(v | 0x80));
        v >>= 7;
    }
    b64_byte(b, (unsigned char)v);
}

static void zigzag(struct b64 *b, uint64_t now, uint64_t before) {
    int64_t d = (int64_t)(now - before);
    varint(b, ((uint64_t)d << 1) ^ (uint64_t)(d >> 63));
}

static const char *event_type(int type) {
    return type == VT_EV_ALLOC ? "alloc" : type == VT_EV_FREE ? "free" : "oom";
}

void vt_dump_write_events(FILE *f, const struct vt_snapshot *s) {
    fputs(",\n\"event_types\":[", f);
    for (int t = 0; t < 3; t++) fprintf(f, "%s\"%s\"", t ? "," : "", event_type(t));
    fputs("],\"event_kinds\":[", f);
    for (int k = 0; k < VT_KIND_COUNT; k++) fprintf(f, "%s\"%s\"", k ? "," : "", vt_kind_name(k));
    fprintf(f, "],\"events_dropped\":%" PRIu64 ",\"nevents\":%zu,\n\"events\":\"", s->events_dropped, s->nevents);
    struct b64 b = {.f = f};
    uint64_t t = 0, address = 0, bytes = 0;
    for (size_t i = 0; i < s->nevents; i++) {
        const struct vt_event ev = vt_event_at(s, i), *e = &ev;
        zigzag(&b, e->time_ns, t);
        int dev = e->device + 1;
        b64_byte(&b, (unsigned char)((e->type & 3) | (e->kind & 15) << 2 | (dev >= 0 && dev < 3 ? dev : 3) << 6));
        if (dev < 0 || dev >= 3) varint(&b, (uint64_t)(int64_t)dev);
        zigzag(&b, e->address, address);
        zigzag(&b, e->bytes, bytes);
        varint(&b, e->stack);
        t = e->time_ns;
        address = e->address;
        bytes = e->bytes;
    }
    b64_end(&b);
    fputc('"', f);
}
