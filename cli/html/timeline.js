/* timeline.js -- one device's live bytes, stacked by call site, on a
 * canvas. The drawing is downsampled to the pixels drawn: one pass over
 * the events in view keeps, per pixel column, each series' bytes after the
 * column's last event and the highest total inside the column (drawn as a
 * line, so that a spike narrower than a pixel still shows). What is
 * hovered is exact: the series' bytes after the event under the pointer,
 * from a checkpoint every CHECK events. Step boundaries (the dump's
 * steps) are dashed lines on either axis, named in the hover; the OOMs
 * are red dashed lines, with a legend key per requested size. */
const CHECK = 8192, PAD_L = 74, PAD_R = 12, PAD_T = 14, PAD_B = 34, TL_H = 250, OOM_KEYS = 4;

class Timeline {
  constructor(parent, data, dev, names, colors) {
    this.d = data; this.dev = dev; this.names = names; this.colors = colors;
    const n = this.n = dev.n || 0, unit = dev.unit || 1;
    this.t = new Float64Array(n); this.b = new Float64Array(n); this.s = new Uint16Array(n);
    unpackTo(dev.dt, this.t);
    unpackTo(dev.b, this.b);
    let t = 0;
    for (let i = 0; i < n; i++) { t += this.t[i]; this.t[i] = t; this.b[i] *= unit; this.s[i] = SERIES_VALUE[dev.s.charCodeAt(i)]; }
    /* The packed events are not needed again. */
    dev.dt = dev.b = dev.s = null;
    this.ns = names.length;
    this.before = this.ns - 1;   /* the last series: bytes live before the history */
    this.checks = [];
    const st = new Float64Array(this.ns);
    st[this.before] = dev.base || 0;
    let total = dev.base || 0, peak = total, peakAt = -1;
    for (let i = 0; i < n; i++) {
      if (i % CHECK === 0) this.checks.push(st.slice());
      st[this.s[i]] += this.b[i]; total += this.b[i];
      if (total > peak) { peak = total; peakAt = i; }
    }
    this.peak = peak; this.peakAt = peakAt; this.ymax = Math.max(peak, 1);
    this.tEnd = Math.max(n ? this.t[n - 1] : 0, data.time || 0, 1);
    this.ooms = [];
    const oa = dev.oom_at || [];
    for (let i = 0; i + 2 < oa.length; i += 3) this.ooms.push({at: oa[i], t: oa[i + 1], bytes: oa[i + 2]});
    this.stepN = data.steps || []; this.stepT = data.steps_t || []; this.stepAt = dev.steps_at || [];
    this.axis = 'event'; this.hl = -1; this.mark = null;
    this.box = el('div', 'tl');
    this.box.appendChild(el('div', 'tl-title', 'device ' + dev.ordinal + ' (' + dev.name + '): ' + n +
      ' events, peak ' + fmtBytes(peak) + ' in the history, ' + fmtBytes(dev.live) + ' live at the end'));
    const plot = el('div', 'plot');
    this.canvas = el('canvas');
    this.canvas.dataset.device = dev.ordinal;
    this.tip = el('div', 'tip hidden');
    plot.appendChild(this.canvas); plot.appendChild(this.tip);
    this.box.appendChild(plot);
    this.legend = el('div', 'legend');
    this.box.appendChild(this.legend);
    parent.appendChild(this.box);
    this.reset(false);
    this.makeLegend();
    this.listen();
    this.draw();
  }

  x(i) { return this.axis === 'event' ? i : this.t[i]; }
  full() { return this.axis === 'event' ? [0, Math.max(this.n, 1)] : [0, this.tEnd]; }
  reset(redraw) { [this.lo, this.hi] = this.full(); if (redraw !== false) this.draw(); }
  setAxis(a) { this.axis = a; this.reset(); }
  zoomed() { const f = this.full(); return this.lo !== f[0] || this.hi !== f[1]; }

  /* Each series' bytes before event i. */
  stateAt(i) {
    i = Math.max(0, Math.min(i, this.n));
    const c = Math.min(Math.floor(i / CHECK), this.checks.length - 1);
    const st = c >= 0 ? this.checks[c].slice() : new Float64Array(this.ns);
    if (c < 0) st[this.before] = this.dev.base || 0;
    for (let k = Math.max(c, 0) * CHECK; k < i; k++) st[this.s[k]] += this.b[k];
    return st;
  }

  /* The first event at or after axis value v. */
  indexAt(v) {
    if (this.axis === 'event') return Math.max(0, Math.min(this.n, Math.ceil(v)));
    return lastAtOrBefore(this.t, v - 1e-9) + 1;
  }

  makeLegend() {
    this.legend.textContent = '';
    this.items = [];
    for (let k = 0; k < this.ns; k++) {
      if (k === this.before && !(this.dev.base > 0)) continue;
      const it = el('span', 'legend-item'), sw = el('span', 'swatch');
      sw.style.background = this.colors[k];
      it.appendChild(sw); it.appendChild(el('span', '', this.names[k]));
      it.title = this.names[k];
      it.dataset.series = k;
      it.addEventListener('click', () => this.highlight(this.hl === k ? -1 : k, null));
      this.legend.appendChild(it); this.items.push(it);
    }
    /* A key per requested size, those that failed most first (ties: the
     * first to fail), OOM_KEYS at most and one for the rest: thousands of
     * failures made a key each. */
    const sizes = new Map();
    for (const m of this.ooms) sizes.set(m.bytes, (sizes.get(m.bytes) || 0) + 1);
    const keys = [...sizes].sort((a, b) => b[1] - a[1]);
    const oomKey = text => this.legend.appendChild(el('span', 'legend-item oom-key', '\u2506 OOM: ' + text));
    for (const [bytes, n] of keys.slice(0, OOM_KEYS))
      oomKey(fmtBytes(bytes) + ' requested' + (n > 1 ? ', ' + n + ' times' : ''));
    if (keys.length > OOM_KEYS) {
      const rest = keys.slice(OOM_KEYS).reduce((n, k) => n + k[1], 0), other = keys.length - OOM_KEYS;
      oomKey(rest + ' more ' + (rest === 1 ? 'failure' : 'failures') + ' of ' + other + ' other ' +
        (other === 1 ? 'size' : 'sizes'));
    }
    this.legend.appendChild(el('span', 'legend-item peak-key', '\u25cf peak ' + fmtBytes(this.peak)));
    if (this.stepN.length) {
      const total = this.d.steps_total || this.stepN.length;
      this.legend.appendChild(el('span', 'legend-item step-key', '\u2506 step boundaries: ' + this.stepN.length +
        (total > this.stepN.length ? ' newest of ' + total : '')));
    }
  }

  /* Step boundary k on the current axis: before the stepAt[k]-th event of
   * this device, or at its time; -1 where the ring overwrote its events. */
  stepPos(k) { return this.axis === 'event' ? this.stepAt[k] : this.stepT[k]; }

  /* What the hover says of the steps at axis value v: the boundary within
   * 4 pixels of the pointer (the nearest, the first of those at the same
   * place), else the last boundary before it. */
  stepText(v) {
    let last = -1, near = -1, gap = 4 * (this.hi - this.lo) / this.w;
    for (let k = 0; k < this.stepN.length; k++) {
      const p = this.stepPos(k);
      if (p < 0) continue;
      if (Math.abs(p - v) < gap) { near = k; gap = Math.abs(p - v); }
      if (p <= v) last = k;
    }
    const at = k => (this.stepT[k] / 1e9).toFixed(6) + ' s' + (this.stepAt[k] >= 0 ? ', before event #' + this.stepAt[k] : '');
    if (near >= 0) return 'boundary of step ' + this.stepN[near] + ' (' + at(near) + ')';
    if (last >= 0) return 'after step ' + this.stepN[last] + ' (' + at(last) + ')';
    return this.stepN.length ? 'before step ' + this.stepN[0] + "'s boundary" : '';
  }

  highlight(series, mark) {
    this.hl = series; this.mark = mark;
    for (const it of this.items) it.classList.toggle('dim', series >= 0 && Number(it.dataset.series) !== series);
    this.draw();
  }

  px(v) { return PAD_L + (v - this.lo) / (this.hi - this.lo) * this.w; }

  draw() {
    const t0 = performance.now(), cv = this.canvas;
    const cssW = Math.max(this.box.clientWidth || 0, 480);
    cv.width = cssW; cv.height = TL_H; cv.style.height = TL_H + 'px';
    const g = cv.getContext('2d'), W = this.w = cssW - PAD_L - PAD_R, H = this.h = TL_H - PAD_T - PAD_B;
    g.fillStyle = '#fff'; g.fillRect(0, 0, cv.width, cv.height);
    const ns = this.ns, cols = new Float64Array((W + 1) * ns), top = new Float64Array(W + 1);
    let i = this.indexAt(this.lo);
    const st = this.stateAt(i), span = this.hi - this.lo;
    let total = 0;
    for (let k = 0; k < ns; k++) total += st[k];
    /* One pass, locals only (this loop is the page's hot path). */
    const xs = this.axis === 'event' ? null : this.t, ser = this.s, by = this.b, n = this.n, lo = this.lo, hi = this.hi;
    const scale = W / span;
    let col = 0, colMax = total;
    for (; i < n; i++) {
      const v = xs === null ? i : xs[i];
      if (v > hi) break;
      const c = Math.floor((v - lo) * scale);
      if (c > col) {
        for (; col < c && col <= W; col++) { cols.set(st, col * ns); top[col] = colMax; colMax = total; }
      }
      st[ser[i]] += by[i]; total += by[i];
      if (total > colMax) colMax = total;
    }
    for (; col <= W; col++) { cols.set(st, col * ns); top[col] = colMax; colMax = total; }
    const sy = H / this.ymax;
    const base = new Float64Array(W + 1);
    for (let k = 0; k < ns; k++) {
      g.fillStyle = this.colors[k];
      g.globalAlpha = this.hl >= 0 && this.hl !== k ? 0.22 : 1;
      for (let c = 0; c <= W; c++) {
        const v = cols[c * ns + k];
        if (v > 0) {
          const y0 = PAD_T + H - base[c] * sy, hgt = v * sy;
          g.fillRect(PAD_L + c, y0 - hgt, 1, Math.max(hgt, 0.5));
          base[c] += v;
        }
      }
    }
    g.globalAlpha = 1;
    g.strokeStyle = '#333'; g.lineWidth = 1; g.beginPath();
    for (let c = 0; c <= W; c++) {
      const y = PAD_T + H - top[c] * sy;
      if (c) g.lineTo(PAD_L + c + 0.5, y); else g.moveTo(PAD_L + 0.5, y);
    }
    g.stroke();
    this.axes(g, W, H);
    this.marks(g, H);
    this.drawMs = performance.now() - t0;
  }

  axes(g, W, H) {
    g.strokeStyle = '#999'; g.fillStyle = '#333'; g.font = '11px system-ui,sans-serif';
    g.strokeRect(PAD_L + 0.5, PAD_T + 0.5, W, H);
    g.textAlign = 'right'; g.textBaseline = 'middle';
    const yl = [], xl = [];
    for (const v of ticks(0, this.ymax, 5, 1024)) {
      const y = PAD_T + H - v / this.ymax * H;
      g.fillRect(PAD_L - 4, Math.round(y), 4, 1);
      g.fillText(fmtBytes(v), PAD_L - 6, y);
      yl.push(fmtBytes(v));
    }
    g.textAlign = 'center'; g.textBaseline = 'top';
    let unit = 1, name = 'event';
    if (this.axis === 'time') [unit, name] = timeUnit(this.hi - this.lo);
    for (const v of ticks(this.lo / unit, this.hi / unit, 8, 10)) {
      const x = this.px(v * unit);
      g.fillRect(Math.round(x), PAD_T + H, 1, 4);
      g.fillText(String(+v.toPrecision(6)), x, PAD_T + H + 6);
      xl.push(String(+v.toPrecision(6)));
    }
    this.xlabel = this.axis === 'event' ? 'event number' : 'time since start (' + name + ')';
    g.fillText(this.xlabel, PAD_L + W / 2, PAD_T + H + 20);
    /* The labels drawn, readable from the page's DOM (the tests read them). */
    this.canvas.dataset.yticks = yl.join(' | ');
    this.canvas.dataset.xticks = this.xlabel + ': ' + xl.join(' | ');
  }

  marks(g, H) {
    const inView = v => v >= this.lo && v <= this.hi;
    g.setLineDash([4, 3]); g.strokeStyle = '#b00'; g.fillStyle = '#b00'; g.textAlign = 'left';
    for (const m of this.ooms) {
      const v = this.axis === 'event' ? m.at : m.t;
      if (!inView(v)) continue;
      const x = Math.round(this.px(v)) + 0.5;
      g.beginPath(); g.moveTo(x, PAD_T); g.lineTo(x, PAD_T + H); g.stroke();
      g.textAlign = x > PAD_L + this.w - 40 ? 'right' : 'left';
      g.fillText('OOM', x + (g.textAlign === 'right' ? -3 : 3), PAD_T + 2);
    }
    /* Step boundaries: a grey dashed line each, named where there is room. */
    g.strokeStyle = '#8a8a8a'; g.fillStyle = '#666'; g.setLineDash([2, 3]); g.textAlign = 'left';
    this.stepsDrawn = [];
    let named = -Infinity;
    for (let k = 0; k < this.stepN.length; k++) {
      const v = this.stepPos(k);
      if (v < 0 || !inView(v)) continue;
      const x = Math.round(this.px(v)) + 0.5;
      g.beginPath(); g.moveTo(x, PAD_T + 12); g.lineTo(x, PAD_T + H); g.stroke();
      if (x - named > 48) { g.fillText('step ' + this.stepN[k], x + 2, PAD_T + 12); named = x; }
      this.stepsDrawn.push(k);
    }
    g.setLineDash([]);
    if (this.mark !== null) {
      const v = this.axis === 'event' ? this.indexAt(this.mark) : this.mark;
      if (inView(v)) {
        const x = Math.round(this.px(v)) + 0.5;
        g.strokeStyle = '#0050c8'; g.lineWidth = 2;
        g.beginPath(); g.moveTo(x, PAD_T); g.lineTo(x, PAD_T + H); g.stroke(); g.lineWidth = 1;
      }
    }
    if (this.peakAt >= 0) {
      const v = this.x(this.peakAt);
      if (inView(v)) {
        const x = this.px(v), y = PAD_T + H - this.peak / this.ymax * H;
        g.fillStyle = '#000'; g.beginPath(); g.arc(x, y, 4, 0, 2 * Math.PI); g.fill();
        g.textAlign = x > PAD_L + this.w - 120 ? 'right' : 'left';
        g.fillText('peak ' + fmtBytes(this.peak), x + (g.textAlign === 'right' ? -6 : 6), y + 2);
      }
    }
  }

  /* What is under the pointer at canvas position (cx, cy): the event, the
   * series band and their exact bytes. */
  hover(cx, cy) {
    const t0 = performance.now();
    if (cx < PAD_L || cx > PAD_L + this.w || this.n === 0) { this.tip.classList.add('hidden'); return null; }
    const v = this.lo + (cx - PAD_L) / this.w * (this.hi - this.lo);
    let i = this.axis === 'event' ? Math.min(this.n - 1, Math.floor(v)) : lastAtOrBefore(this.t, v);
    const st = this.stateAt(i + 1);
    let total = 0;
    for (let k = 0; k < this.ns; k++) total += st[k];
    const want = (PAD_T + this.h - cy) / this.h * this.ymax;
    let acc = 0, band = -1;
    for (let k = 0; k < this.ns; k++) { if (st[k] > 0 && want >= acc && want < acc + st[k]) band = k; acc += st[k]; }
    const lines = [];
    if (band >= 0) lines.push(this.names[band], fmtBytes(st[band]) + ' (' + st[band] + ' bytes) of ' + fmtBytes(total) + ' live');
    else lines.push(fmtBytes(total) + ' (' + total + ' bytes) live');
    if (i >= 0) {
      const b = this.b[i];
      lines.push('after event #' + i + ' at ' + (this.t[i] / 1e9).toFixed(6) + ' s: ' + (b >= 0 ? 'alloc ' : 'free ') +
        fmtBytes(Math.abs(b)) + ' from ' + this.names[this.s[i]]);
    } else lines.push('before the first event');
    const step = this.stepText(v);
    if (step) lines.push(step);
    this.tip.textContent = lines.join('\n');
    this.tip.classList.remove('hidden');
    this.tip.style.left = Math.min(cx + 14, this.canvas.width - 260) + 'px';
    this.tip.style.top = (cy + 12) + 'px';
    this.hoverMs = performance.now() - t0;
    return {band, bytes: band >= 0 ? st[band] : total, total, index: i};
  }

  /* Zoom to the axis range between canvas x positions a and b. */
  zoomPx(a, b) {
    const t0 = performance.now();
    const v = x => this.lo + (Math.max(PAD_L, Math.min(PAD_L + this.w, x)) - PAD_L) / this.w * (this.hi - this.lo);
    const lo = v(Math.min(a, b)), hi = v(Math.max(a, b));
    if (hi - lo > (this.axis === 'event' ? 2 : 1)) { this.lo = lo; this.hi = hi; this.draw(); }
    this.zoomMs = performance.now() - t0;
  }

  listen() {
    const cv = this.canvas, pos = e => { const r = cv.getBoundingClientRect(); return [e.clientX - r.left, e.clientY - r.top]; };
    let drag = null;
    cv.addEventListener('mousedown', e => { drag = pos(e)[0]; e.preventDefault(); });
    cv.addEventListener('mousemove', e => {
      const [x, y] = pos(e);
      this.hover(x, y);
      if (drag !== null) {
        const g = cv.getContext('2d');
        this.draw();
        g.fillStyle = 'rgba(0,80,200,0.15)';
        g.fillRect(Math.min(drag, x), PAD_T, Math.abs(x - drag), this.h);
      }
    });
    cv.addEventListener('mouseup', e => {
      if (drag === null) return;
      const x = pos(e)[0];
      if (Math.abs(x - drag) > 3) this.zoomPx(drag, x); else this.draw();
      drag = null;
    });
    cv.addEventListener('mouseleave', () => { this.tip.classList.add('hidden'); if (drag !== null) { drag = null; this.draw(); } });
    cv.addEventListener('dblclick', () => this.reset());
  }
}
