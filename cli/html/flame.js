/* flame.js -- the flame graph (an icicle: the outermost frame on top) of
 * the holders at one moment (exit, the peak, each OOM) on one device or
 * all of them, full width. A click on a frame zooms into it,
 * its ancestors stay drawn above it and named in the breadcrumb; library
 * frames (data.lib) can be folded away; a search highlights the frames
 * whose name holds the text and says what share of the bytes they hold. */
const ROW = 18;

class Flame {
  constructor(section, data) {
    this.d = data; this.sec = section;
    this.box = section.querySelector('.flame');
    this.crumbs = section.querySelector('.crumbs');
    this.shareEl = section.querySelector('.share');
    this.note = section.querySelector('.flame-note');
    this.select = section.querySelector('.moment');
    this.device = section.querySelector('.fdevice');
    this.collapse = section.querySelector('.collapse');
    this.search = section.querySelector('.search');
    this.moments = this.listMoments();
    this.select.textContent = '';
    this.moments.forEach((m, i) => { const o = el('option', '', m.name); o.value = i; this.select.appendChild(o); });
    this.select.value = String(this.pick());
    this.device.textContent = '';
    const devs = (data.devices || []).map(x => x.ordinal);
    for (const v of devs.length === 1 ? devs : devs.concat(['all'])) {
      const o = el('option', '', v === 'all' ? 'all devices' : 'device ' + v);
      o.value = String(v); this.device.appendChild(o);
    }
    this.followMoment();
    this.select.addEventListener('change', () => { this.followMoment(); this.build(); });
    this.device.addEventListener('change', () => this.build());
    this.collapse.addEventListener('change', () => this.build());
    this.search.addEventListener('input', () => this.find());
    this.build();
  }

  /* The moments there are holders for: exit, the peak, each OOM; each
   * with its holders over all devices (h: stack, bytes, count), each
   * holder's device (hd: -1 not known, -2 split) and the splits (hs:
   * holder, device, bytes, count; data.c, bydevice.c); an OOM's holders of
   * its device alone where the dump has them (own). An OOM of host
   * memory is named by what it asked for (host: data.c's label), as the
   * text report names it, not by its device (-1, none). */
  listMoments() {
    const d = this.d, out = [];
    if (d.exit) out.push({name: 'exit', h: d.exit, hd: d.exit_dev, hs: d.exit_split, key: 'exit'});
    /* The process's peak, split by device: a device's own peak may be at
     * another moment (the devices table has it). */
    if (d.peak) out.push({name: 'peak of all devices together' + (d.peak_at ? ' (' + (d.peak_at / 1e9).toFixed(3) +
      ' s)' : ''), h: d.peak, hd: d.peak_dev, hs: d.peak_split, key: 'peak'});
    (d.ooms || []).forEach((o, i) => {
      if (o.holders) out.push({name: 'OOM #' + (i + 1) + ' (' + (o.host || 'device ' + o.device) + ', ' + (o.t / 1e9).toFixed(3) + ' s)',
        h: o.holders, hd: o.holders_dev, hs: o.holders_split, own: o.device_holders, key: 'oom', device: o.device});
    });
    if (!out.length) out.push({name: 'exit', h: [], hd: [], hs: [], key: 'exit'});
    return out;
  }

  pick() {
    const i = this.moments.findIndex(m => m.key === this.d.at);
    return i < 0 ? 0 : i;
  }

  /* An OOM's flame graph opens on the OOM's device. */
  followMoment() {
    const m = this.moments[Number(this.select.value) || 0];
    if (m.device !== undefined && [...this.device.options].some(o => o.value === String(m.device))) this.device.value = String(m.device);
  }

  /* The chosen moment's holders on the chosen device (all: every device),
   * and the bytes held on stacks that could not be put on one device. An
   * OOM's own device shows the holders the dump kept of it (own), exact,
   * as the holders table and the text report do. */
  holders() {
    const m = this.moments[Number(this.select.value) || 0], dev = this.device.value;
    if (dev === 'all' || !m.hd) return {h: m.h, unknown: 0};
    if (m.own && Number(dev) === m.device) return {h: m.own, unknown: 0};
    const h = [], want = Number(dev);
    let unknown = 0;
    for (let j = 0; j < m.hd.length; j++) {
      if (m.hd[j] === want) h.push(m.h[3 * j], m.h[3 * j + 1], m.h[3 * j + 2]);
      else if (m.hd[j] === -1) unknown += m.h[3 * j + 1];
    }
    for (let i = 0; i + 3 < m.hs.length; i += 4) if (m.hs[i + 1] === want) h.push(m.h[3 * m.hs[i]], m.hs[i + 2], m.hs[i + 3]);
    return {h, unknown};
  }

  label(f) { return f < 0 ? 'all' : this.d.fw[f]; }

  /* The tree of the chosen moment's holders from the outermost frame in,
   * library frames left out when folded. */
  build() {
    const d = this.d, {h, unknown} = this.holders(), fold = this.collapse.checked;
    const root = {f: -1, v: 0, kids: new Map(), up: null, depth: 0};
    let depth = 0;
    this.libShown = 0;
    for (let i = 0; i + 2 < h.length; i += 3) {
      const frames = stackFrames(d, h[i]), bytes = h[i + 1];
      let at = root;
      root.v += bytes;
      let kept = 0;
      for (let k = frames.length - 1; k >= 0; k--) {
        const f = frames[k];
        if (fold && d.lib[f] && !(k === 0 && kept === 0)) continue;
        kept++;
        let c = at.kids.get(f);
        if (!c) { c = {f, v: 0, kids: new Map(), up: at, depth: at.depth + 1}; at.kids.set(f, c); }
        c.v += bytes; at = c;
        if (at.depth > depth) depth = at.depth;
      }
    }
    this.root = root; this.zoom = root; this.depth = depth;
    this.note.textContent = unknown ? fmtBytes(unknown) + ' held on stacks used on several devices could not be split ' +
      'by device (the history does not go back far enough): "all devices" counts them' : '';
    this.draw();
  }

  draw() {
    const t0 = performance.now(), box = this.box, W = Math.max(box.clientWidth || 0, 480);
    box.textContent = '';
    const chain = [];
    for (let n = this.zoom; n; n = n.up) chain.unshift(n);
    box.style.height = (this.depth + 1) * ROW + 'px';
    this.nodes = [];
    chain.forEach((n, k) => { if (n !== this.zoom) this.cell(n, 0, W, k, true); });
    const walk = (n, x, w, k) => {
      if (w < 1) return;
      this.cell(n, x, w, k, false);
      let cx = x;
      const kids = [...n.kids.values()].sort((a, b) => b.v - a.v);
      for (const c of kids) { const cw = n.v ? w * c.v / n.v : 0; walk(c, cx, cw, k + 1); cx += cw; }
    };
    walk(this.zoom, 0, W, chain.length - 1);
    this.crumbs.textContent = '';
    chain.forEach((n, k) => {
      if (k) this.crumbs.appendChild(document.createTextNode(' \u203a '));
      const a = el('a', '', this.label(n.f));
      a.addEventListener('click', () => { this.zoom = n; this.draw(); });
      this.crumbs.appendChild(a);
    });
    this.find();
    this.drawMs = performance.now() - t0;
  }

  cell(n, x, w, k, ancestor) {
    const e = el('div', 'flame-node'), lib = n.f >= 0 && this.d.lib[n.f] === 1, name = this.label(n.f);
    if (lib) { e.classList.add('lib'); this.libShown++; }
    if (ancestor) e.classList.add('ancestor');
    e.style.left = x + 'px'; e.style.width = w + 'px'; e.style.top = k * ROW + 'px';
    e.style.background = n.f < 0 ? '#ddd' : frameColor(name, lib);
    const pct = share(n.v, this.root.v);
    e.textContent = name + ' (' + fmtBytes(n.v) + ', ' + pct + ')';
    e.title = (n.f >= 0 ? this.d.fw[n.f] : 'all') + '\n' + fmtBytes(n.v) + ' (' + n.v + ' bytes), ' + pct;
    e.addEventListener('click', ev => { ev.stopPropagation(); this.zoom = n; this.draw(); });
    e._node = n;
    this.box.appendChild(e);
    this.nodes.push(e);
  }

  /* Highlight the drawn frames whose name holds the search text; the share
   * counts each matching frame's bytes once (not again under a matching
   * ancestor), over the whole tree, not only what is drawn. */
  find() {
    const q = this.search.value.trim().toLowerCase();
    for (const e of this.nodes) e.classList.toggle('match', !!q && e._node.f >= 0 && this.label(e._node.f).toLowerCase().includes(q));
    if (!q) { this.shareEl.textContent = ''; this.matched = 0; return; }
    let bytes = 0, frames = 0;
    const walk = n => {
      if (n.f >= 0 && this.label(n.f).toLowerCase().includes(q)) { bytes += n.v; frames++; return; }
      for (const c of n.kids.values()) walk(c);
    };
    walk(this.root);
    this.matched = frames;
    this.shareEl.textContent = frames + ' matching frame' + (frames === 1 ? '' : 's') + ' hold ' + fmtBytes(bytes) +
      ' of ' + fmtBytes(this.root.v) + ' (' + share(bytes, this.root.v) + ')';
  }
}
