/* fmt_html.c -- one self-contained HTML page: no network access, charts as
 * inline SVG. A timeline of live bytes per device (peak and OOMs marked), a
 * flame graph of the chosen moment (click a frame to zoom, click the root to
 * zoom out), sortable tables of holders and live allocations, device facts.
 *
 * Everything taken from a dump is escaped: text through html(), data for
 * the script as JSON with <, > and & written as \u escapes, and the script
 * puts names into the page with textContent only. Behind that, the page's
 * content policy runs no script and applies no style but the page's own
 * one block of each, named by their SHA-256 hashes: no inline event
 * handler, no injected <script> or style attribute, no network, no form,
 * no <base>. */
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "reporters.h"
#include "sha256.h"

#define B(v, buf) vr_bytes((v), (buf), sizeof(buf))
#define W 960
#define H 220

/* s as HTML text (or a quoted attribute value): markup characters as
 * entities, control characters in their display form (as the text report
 * shows them). */
static void html(FILE *f, const char *s) {
    char ch[VR_CHAR_MAX + 1];
    for (size_t n; s && (n = vr_display_char(s, ch)) > 0; s += n) {
        switch (ch[0]) {
        case '<': fputs("&lt;", f); break;
        case '>': fputs("&gt;", f); break;
        case '&': fputs("&amp;", f); break;
        case '"': fputs("&quot;", f); break;
        case '\'': fputs("&#39;", f); break;
        default: fputs(ch, f);
        }
    }
}

/* JSON for a <script> block: no "</script>" can appear in it. */
static void script_json(FILE *f, json_t *j) {
    char *s = json_dumps(j, JSON_COMPACT | JSON_ENSURE_ASCII);
    for (char *p = s; p && *p; p++) {
        if (*p == '<') fputs("\\u003c", f);
        else if (*p == '>') fputs("\\u003e", f);
        else if (*p == '&') fputs("\\u0026", f);
        else fputc(*p, f);
    }
    free(s);
}

static const char *style =
    "body{font:14px system-ui,sans-serif;margin:24px;color:#222}"
    "h1{font-size:20px}h2{font-size:16px;margin-top:28px}"
    "table{border-collapse:collapse;margin:8px 0}td,th{padding:3px 10px;border-bottom:1px solid #ddd;"
    "text-align:left;font-variant-numeric:tabular-nums}th{cursor:pointer;background:#f4f4f4}"
    "td.n{text-align:right}.flame{position:relative;width:960px;font:11px monospace}"
    ".flame div{position:absolute;height:17px;overflow:hidden;white-space:nowrap;border:1px solid #fff;"
    "box-sizing:border-box;cursor:pointer;padding-left:2px}.oom{color:#b00;font-weight:600}"
    "code{background:#f4f4f4;padding:1px 3px}svg{border:1px solid #ddd}";

/* Sorting for every table with class "sortable"; the flame graph for every
 * div with class "flame", from the JSON in the script block its data-src
 * names. */
static const char *script =
    "function sortTable(th){const t=th.closest('table'),i=[...th.parentNode.children].indexOf(th),"
    "asc=th.dataset.asc!=='1';th.dataset.asc=asc?'1':'0';const rows=[...t.tBodies[0].rows];"
    "rows.sort((a,b)=>{const x=a.cells[i].dataset.v??a.cells[i].textContent,"
    "y=b.cells[i].dataset.v??b.cells[i].textContent;const nx=Number(x),ny=Number(y);"
    "const c=(!isNaN(nx)&&!isNaN(ny))?nx-ny:x.localeCompare(y);return asc?c:-c});"
    "rows.forEach(r=>t.tBodies[0].appendChild(r))}"
    "document.querySelectorAll('table.sortable th').forEach(th=>th.addEventListener('click',()=>sortTable(th)));"
    "function fmt(b){const u=['B','KiB','MiB','GiB','TiB'];let i=0;while(b>=1024&&i<4){b/=1024;i++}"
    "return (i?b.toFixed(2):b)+' '+u[i]}"
    "function color(n){let h=0;for(const c of n)h=(h*31+c.charCodeAt(0))>>>0;"
    "return 'hsl('+(10+h%50)+',80%,'+(60+h%20)+'%)'}"
    "function flame(el,root){el.textContent='';let depth=0;(function d(n,k){depth=Math.max(depth,k);"
    "(n.c||[]).forEach(c=>d(c,k+1))})(root,0);el.style.height=(depth+1)*18+'px';"
    "function draw(n,x,w,k){if(w<0.5)return;const e=document.createElement('div');"
    "e.className='flame-node';e.style.left=x+'px';e.style.width=w+'px';e.style.top=(k*18)+'px';"
    "e.style.background=k?color(n.n):'#ddd';e.textContent=n.n+' ('+fmt(n.v)+')';"
    "e.title=n.n+'\\n'+fmt(n.v)+' ('+n.v+' bytes)';e.addEventListener('click',ev=>{ev.stopPropagation();"
    "flame(el,k?n:el._root);if(k)el._zoomed=n});el.appendChild(e);let cx=x;"
    "(n.c||[]).forEach(c=>{const cw=w*c.v/n.v;draw(c,cx,cw,k+1);cx+=cw})}"
    "draw(root,0,960,0)}"
    "document.querySelectorAll('.flame').forEach(el=>{const data=JSON.parse("
    "document.getElementById(el.dataset.src).textContent);el._root=data;flame(el,data)});"
    /* With #selftest in the URL the page clicks its own controls and says
     * what happened: the tests open it in a real browser. */
    "if(location.hash==='#selftest'){const r=[];const t=document.querySelector('table.sortable.live');"
    "const col=()=>[...t.tBodies[0].rows].map(x=>Number(x.cells[0].dataset.v));const th=t.tHead.rows[0].cells[0];"
    "th.click();let v=col();const up=v.every((x,i)=>!i||v[i-1]<=x);th.click();v=col();"
    "const down=v.every((x,i)=>!i||v[i-1]>=x);r.push('sort '+(up&&down?'ok':'failed'));"
    "const el=document.querySelector('.flame');"
    "const leaf=[...el.querySelectorAll('.flame-node')].find(n=>parseFloat(n.style.width)<959);"
    "if(leaf){const name=leaf.textContent;leaf.click();let top=el.querySelector('.flame-node');"
    "r.push('zoom '+(top.textContent===name&&parseFloat(top.style.width)===960?'ok':'failed'));top.click();"
    "top=el.querySelector('.flame-node');r.push('unzoom '+(top.textContent.startsWith('all')?'ok':'failed'))}"
    "else r.push('zoom: nothing to zoom into');const p=document.createElement('pre');p.id='selftest';"
    "p.textContent=r.join('; ');document.body.appendChild(p)}";

struct node {
    char *name;
    uint64_t value;
    struct node *child, *next;
};

static struct node *child_of(struct node *n, const char *name) {
    for (struct node *c = n->child; c; c = c->next)
        if (strcmp(c->name, name) == 0) return c;
    struct node *c = calloc(1, sizeof *c);
    if (!c) return NULL;
    c->name = strdup(name);
    c->next = n->child;
    n->child = c;
    return c;
}

static json_t *node_json(struct node *n) {
    json_t *o = json_pack("{s:s,s:I}", "n", n->name ? n->name : "?", "v", (json_int_t)n->value);
    if (n->child) {
        json_t *c = json_array();
        for (struct node *x = n->child; x; x = x->next) json_array_append_new(c, node_json(x));
        json_object_set_new(o, "c", c);
    }
    return o;
}

static void node_free(struct node *n) {
    while (n) {
        struct node *next = n->next;
        node_free(n->child);
        free(n->name);
        free(n);
        n = next;
    }
}

/* The flame graph data of one dump at the chosen moment: a tree from the
 * outermost frame in. */
static json_t *flame_tree(const struct vm_dump *d, const struct vm_holder *h, size_t n, const char *root) {
    struct node top = {(char *)root, 0, NULL, NULL};
    for (size_t i = 0; i < n; i++) {
        const struct vm_stack *s = &d->stacks[h[i].stack];
        struct node *at = &top;
        top.value += h[i].bytes;
        for (size_t k = s->nframes; k-- > 0 && at;) {
            char label[1024], safe[2048];
            at = child_of(at, vr_safe(vm_frame_label(&s->frames[k], label, sizeof label), safe, sizeof safe));
            if (at) at->value += h[i].bytes;
        }
    }
    json_t *j = node_json(&top);
    node_free(top.child);
    return j;
}

/* Live bytes per device over the recorded history, as SVG polylines. */
static void timeline(FILE *f, const struct vm_dump *d) {
    static const char *colors[] = {"#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#ff7f0e", "#8c564b"};
    uint64_t tmax = d->time_ns ? d->time_ns : 1;
    uint64_t ymax = 1;
    for (size_t i = 0; i < d->ndevices; i++)
        if (d->devices[i].peak_bytes > ymax) ymax = d->devices[i].peak_bytes;
    char a[32], b[32];
    fprintf(f, "<svg id=\"timeline\" width=\"%d\" height=\"%d\" viewBox=\"0 0 %d %d\" "
               "xmlns=\"http://www.w3.org/2000/svg\">\n", W, H + 30, W, H + 30);
    fprintf(f, "<text x=\"4\" y=\"12\" font-size=\"11\">%s</text>"
               "<text x=\"4\" y=\"%d\" font-size=\"11\">0 s</text>"
               "<text x=\"%d\" y=\"%d\" font-size=\"11\" text-anchor=\"end\">%.3f s</text>\n",
            B(ymax, a), H + 25, W - 4, H + 25, (double)tmax / 1e9);
    for (size_t di = 0; di < d->ndevices; di++) {
        int dev = d->devices[di].ordinal;
        /* Start so that the history ends at the device's live bytes: right
         * also when the ring dropped older events. */
        int64_t delta = 0;
        for (size_t i = 0; i < d->nevents; i++) {
            const struct vm_event *e = &d->events[i];
            if (e->device != dev || e->type == 'o') continue;
            delta += e->type == 'a' ? (int64_t)e->bytes : -(int64_t)e->bytes;
        }
        int64_t live = (int64_t)d->devices[di].live_bytes - delta;
        if (live < 0) live = 0;
        fprintf(f, "<polyline class=\"series\" data-device=\"%d\" fill=\"none\" stroke=\"%s\" "
                   "stroke-width=\"1.5\" points=\"0,%.1f", dev, colors[di % 6],
                H - (double)live * (H - 20) / (double)ymax);
        double lastx = 0;
        for (size_t i = 0; i < d->nevents; i++) {
            const struct vm_event *e = &d->events[i];
            if (e->device != dev || e->type == 'o') continue;
            double x = (double)e->time_ns * W / (double)tmax;
            double y0 = H - (double)live * (H - 20) / (double)ymax;
            live += e->type == 'a' ? (int64_t)e->bytes : -(int64_t)e->bytes;
            double y1 = H - (double)live * (H - 20) / (double)ymax;
            fprintf(f, " %.1f,%.1f %.1f,%.1f", x, y0, x, y1);
            lastx = x;
        }
        double yend = H - (double)live * (H - 20) / (double)ymax;
        fprintf(f, " %.1f,%.1f %d,%.1f\"/>\n", lastx, yend, W, yend);
        const struct vm_device *v = &d->devices[di];
        double px = (double)v->peak_time_ns * W / (double)tmax;
        double py = H - (double)v->peak_bytes * (H - 20) / (double)ymax;
        fprintf(f, "<circle class=\"peak\" cx=\"%.1f\" cy=\"%.1f\" r=\"4\" fill=\"%s\"><title>device %d peak %s"
                   "</title></circle>\n", px, py, colors[di % 6], dev, B(v->peak_bytes, b));
    }
    for (size_t i = 0; i < d->nooms; i++) {
        double x = (double)d->ooms[i].time_ns * W / (double)tmax;
        fprintf(f, "<line class=\"oom-mark\" x1=\"%.1f\" x2=\"%.1f\" y1=\"14\" y2=\"%d\" stroke=\"#b00\" "
                   "stroke-dasharray=\"4 3\"><title>out of memory: %s requested</title></line>\n",
                x, x, H, B(d->ooms[i].requested, a));
    }
    fputs("</svg>\n", f);
}

static void site_cell(FILE *f, const struct vm_dump *d, size_t stack) {
    char where[1024];
    fputs("<td>", f);
    html(f, vm_site_label(d, stack, where, sizeof where));
    fputs("</td>", f);
}

static void section(FILE *f, const struct vm_dump *d, size_t index, const struct vr_opts *o) {
    char a[32], b[32], c[32];
    fprintf(f, "<h2>pid %d, rank %d, host ", d->pid, d->rank);
    html(f, d->host ? d->host : "?");
    fputs(": <code>", f);
    for (size_t i = 0; i < d->argc && i < 16; i++) {
        if (i) fputc(' ', f);
        html(f, d->argv[i]);
    }
    fputs("</code></h2>\n", f);
    const struct vm_totals *t = &d->totals;
    fputs("<p>dump written at ", f);
    html(f, d->reason);
    fprintf(f, "; live %s in %" PRIu64 " %s; peak %s at %.3f s; %" PRIu64 " %s, %" PRIu64 " %s, %" PRIu64
               " out-of-memory %s</p>\n",
            B(t->live_bytes, a), t->live_count, vr_plural(t->live_count, "allocation", "allocations"),
            B(t->peak_bytes, b), (double)t->peak_time_ns / 1e9, t->alloc_count,
            vr_plural(t->alloc_count, "allocation", "allocations"), t->free_count,
            vr_plural(t->free_count, "free", "frees"), t->oom_count,
            vr_plural(t->oom_count, "failure", "failures"));
    fputs("<table class=\"devices\"><tr><th>device</th><th>name</th><th>uuid</th><th>total</th><th>live</th>"
          "<th>peak</th><th>OOMs</th></tr>\n", f);
    for (size_t i = 0; i < d->ndevices; i++) {
        const struct vm_device *v = &d->devices[i];
        fprintf(f, "<tr><td>%d</td><td>", v->ordinal);
        html(f, v->name ? v->name : "?");
        fputs("</td><td>", f);
        html(f, v->uuid ? v->uuid : "?");
        fprintf(f, "</td><td class=n>%s</td><td class=n>%s</td><td class=n>%s</td><td class=n>%" PRIu64
                   "</td></tr>\n", B(v->total_bytes, a), B(v->live_bytes, b), B(v->peak_bytes, c), v->oom_count);
    }
    fputs("</table>\n<h3>live bytes over time</h3>\n", f);
    timeline(f, d);
    for (size_t i = 0; i < d->nooms && i < (size_t)o->top; i++) {
        const struct vm_oom *x = &d->ooms[i];
        fprintf(f, "<p class=\"oom\">out of memory at %.3f s: %s requested by ", (double)x->time_ns / 1e9,
                B(x->requested, a));
        html(f, x->api);
        fprintf(f, " on device %d", x->device);
        if (x->have_info) fprintf(f, "; %s free of %s", B(x->free_bytes, b), B(x->total_bytes, c));
        fputs(" — at ", f);
        char where[1024];
        html(f, vm_site_label(d, x->stack, where, sizeof where));
        fputs("</p>\n", f);
    }
    size_t n;
    int missing;
    const struct vm_holder *h = vr_holders_at(d, o->at, &n, &missing);
    fprintf(f, "<h3>flame graph of the holders at %s</h3>\n", vr_moment_name(o->at));
    if (missing) {
        fputs("<p>this dump has no holders for that moment</p>\n", f);
    } else {
        char root[64];
        snprintf(root, sizeof root, "all (%s)", vr_moment_name(o->at));
        json_t *tree = flame_tree(d, h, n, root);
        fprintf(f, "<script type=\"application/json\" id=\"flame-data-%zu\">", index);
        script_json(f, tree);
        json_decref(tree);
        fprintf(f, "</script>\n<div class=\"flame\" id=\"flame-%zu\" data-src=\"flame-data-%zu\"></div>\n",
                index, index);
        fputs("<h3>holders by call site</h3>\n<table class=\"sortable holders\"><thead><tr><th>bytes</th>"
              "<th>allocations</th><th>call site</th></tr></thead><tbody>\n", f);
        for (size_t i = 0; i < n; i++) {
            fprintf(f, "<tr><td class=n data-v=\"%" PRIu64 "\">%s</td><td class=n>%" PRIu64 "</td>",
                    h[i].bytes, B(h[i].bytes, a), h[i].count);
            site_cell(f, d, h[i].stack);
            fputs("</tr>\n", f);
        }
        fputs("</tbody></table>\n", f);
    }
    fputs("<h3>live allocations</h3>\n<table class=\"sortable live\"><thead><tr><th>bytes</th><th>kind</th>"
          "<th>api</th><th>device</th><th>address</th><th>time (s)</th><th>call site</th></tr></thead><tbody>\n",
          f);
    for (size_t i = 0; i < d->nlive && i < 5000; i++) {
        const struct vm_alloc *x = &d->live[i];
        fprintf(f, "<tr><td class=n data-v=\"%" PRIu64 "\">%s</td><td>", x->bytes, B(x->bytes, a));
        html(f, x->kind);
        fputs("</td><td>", f);
        html(f, x->api);
        fprintf(f, "</td><td class=n>%d</td><td>0x%" PRIx64 "</td><td class=n>%.6f</td>", x->device, x->address,
                (double)x->time_ns / 1e9);
        site_cell(f, d, x->stack);
        fputs("</tr>\n", f);
    }
    fputs("</tbody></table>\n", f);
    if (d->nlive > 5000)
        fprintf(f, "<p>(%zu more live %s in the dump)</p>\n", d->nlive - 5000,
                vr_plural(d->nlive - 5000, "allocation", "allocations"));
}

int vr_html(FILE *f, const struct vr_input *in, const struct vr_opts *o, char *err, size_t errsize) {
    (void)err; (void)errsize;
    char a[32], script_hash[45], style_hash[45];
    vt_sha256_base64(script, script_hash);
    vt_sha256_base64(style, style_hash);
    fprintf(f, "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">\n"
               "<meta http-equiv=\"Content-Security-Policy\" content=\"default-src 'none'; "
               "script-src 'sha256-%s'; style-src 'sha256-%s'; base-uri 'none'; form-action 'none'\">\n"
               "<title>vramtrace report</title>\n"
               "<style>%s</style></head><body>\n<h1>vramtrace: GPU memory report</h1>\n",
            script_hash, style_hash, style);
    if (in->n > 1) {
        fputs("<h2>processes</h2><table class=\"sortable processes\"><thead><tr><th>pid</th><th>rank</th>"
              "<th>host</th><th>peak</th><th>live</th><th>OOMs</th></tr></thead><tbody>\n", f);
        for (size_t i = 0; i < in->n; i++) {
            const struct vm_dump *d = &in->dumps[i];
            fprintf(f, "<tr><td>%d</td><td>%d</td><td>", d->pid, d->rank);
            html(f, d->host ? d->host : "?");
            fprintf(f, "</td><td class=n data-v=\"%" PRIu64 "\">%s</td>", d->totals.peak_bytes,
                    B(d->totals.peak_bytes, a));
            fprintf(f, "<td class=n data-v=\"%" PRIu64 "\">%s</td><td class=n>%" PRIu64 "</td></tr>\n",
                    d->totals.live_bytes, B(d->totals.live_bytes, a), d->totals.oom_count);
        }
        fputs("</tbody></table>\n<h2>holders combined across processes</h2><table class=\"sortable combined\">"
              "<thead><tr><th>bytes</th><th>allocations</th><th>processes</th><th>call site</th></tr></thead>"
              "<tbody>\n", f);
        size_t n;
        struct vr_combined *c = vr_combine(in, o->at, &n);
        for (size_t i = 0; i < n; i++) {
            fprintf(f, "<tr><td class=n data-v=\"%" PRIu64 "\">%s</td><td class=n>%" PRIu64 "</td><td class=n>%zu"
                       "</td><td>", c[i].bytes, B(c[i].bytes, a), c[i].count, c[i].processes);
            html(f, c[i].where);
            fputs("</td></tr>\n", f);
        }
        vr_combined_free(c, n);
        fputs("</tbody></table>\n", f);
    }
    for (size_t i = 0; i < in->n; i++) section(f, &in->dumps[i], i, o);
    fprintf(f, "<script>%s</script>\n</body></html>\n", script);
    return ferror(f) ? -1 : 0;
}
