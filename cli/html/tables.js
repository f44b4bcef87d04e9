/* tables.js -- sortable, filterable tables drawn from a dump's data. A
 * table is one definition: its title, its row count, its columns (a
 * heading, a sort value and a text per row) and, per row, the stack and
 * the moment to show when the row is clicked, and optional notes under the
 * title. TABLES lists them (an entry may make several tables, or none).
 * Only the first SHOWN rows of the sorted, filtered order are drawn. */
const SHOWN = 200;

function siteOf(d, s) { return d.so && s >= 0 && s < d.so.length ? d.sites[d.so[s]] : '(no stack)'; }

const TABLES = [
  /* The holders at the report's moment (--at), by stack: at the first
   * OOM, of the failing device alone where the dump kept them apart, as
   * the text report and the flame graph of that device show them. */
  d => {
    const o = d.at === 'oom' && d.ooms && d.ooms.length && d.ooms[0].holders ? d.ooms[0] : null;
    const h = d.at === 'peak' && d.peak ? d.peak : o ? o.device_holders || o.holders : d.exit || [];
    const at = h === d.exit ? 'exit' : d.at, of = o && o.device_holders ? ' of device ' + o.device + '\'s memory' : '';
    let total = 0;
    for (let i = 1; i < h.length; i += 3) total += h[i];
    return {
      name: 'holders', title: 'holders' + of + ' at ' + at + ' by stack (' + fmtBytes(total) + ')', n: h.length / 3,
      cols: [
        {h: 'bytes', num: true, v: i => h[3 * i + 1], text: i => fmtBytes(h[3 * i + 1])},
        {h: 'share', num: true, v: i => h[3 * i + 1], text: i => share(h[3 * i + 1], total)},
        {h: 'allocations', num: true, v: i => h[3 * i + 2], text: i => String(h[3 * i + 2])},
        {h: 'call site', v: i => siteOf(d, h[3 * i]), text: i => siteOf(d, h[3 * i])},
      ],
      stack: i => h[3 * i], time: () => null,
    };
  },
  d => {
    const L = d.live || {b: []};
    return {
      name: 'live', title: 'live allocations (' + L.b.length + ')', n: L.b.length,
      cols: [
        {h: 'bytes', num: true, v: i => L.b[i], text: i => fmtBytes(L.b[i])},
        {h: 'kind', v: i => L.kinds[L.k[i]], text: i => L.kinds[L.k[i]]},
        {h: 'api', v: i => L.apis[L.a[i]], text: i => L.apis[L.a[i]]},
        {h: 'device', num: true, v: i => L.d[i], text: i => String(L.d[i])},
        {h: 'address', num: true, v: i => L.x[i], text: i => '0x' + L.x[i].toString(16)},
        {h: 'time (s)', num: true, v: i => L.t[i], text: i => (L.t[i] / 1e9).toFixed(6)},
        {h: 'thread', num: true, v: i => Number(L.threads[L.th[i]]), text: i => L.threads[L.th[i]]},
        {h: 'call site', v: i => siteOf(d, L.s[i]), text: i => siteOf(d, L.s[i])},
      ],
      stack: i => L.s[i], time: i => L.t[i], device: i => L.d[i],
    };
  },
  d => {
    const out = [];
    if (d.torch) out.push(tensorTable(d, d.torch, 'tensors', 'when the dump was written'));
    (d.ooms || []).forEach((o, k) => { if (o.torch) out.push(tensorTable(d, o.torch, 'tensors-oom' + (k + 1), 'at OOM #' + (k + 1))); });
    return out;
  },
];

/* PyTorch's largest live tensors of one torch record (data.c's "torch"),
 * every device's in one table, with each device's bytes by category. */
function tensorTable(d, rec, name, when) {
  const dev = [], j = [];
  rec.forEach((x, k) => x.b.forEach((_, i) => { dev.push(k); j.push(i); }));
  const X = r => rec[dev[r]], cats = d.tcats || [];
  let total = 0;
  for (let r = 0; r < j.length; r++) total += X(r).b[j[r]];
  const notes = rec.map(x => {
    let known = 0;
    const parts = cats.map((c, k) => { known += x.cat[k]; return c + ' ' + fmtBytes(x.cat[k]) + ' (' + share(x.cat[k], x.allocated) + ')'; });
    return 'device ' + x.device + ': ' + fmtBytes(x.allocated) + ' allocated by PyTorch, ' + fmtBytes(x.reserved) +
      ' reserved; by category: ' + parts.join(', ') + '; in no category ' + fmtBytes(Math.max(x.allocated - known, 0));
  });
  const col = (h, f) => ({h, v: r => f(X(r), j[r]), text: r => f(X(r), j[r])});
  return {
    name, notes, n: j.length,
    title: 'PyTorch\'s largest tensors ' + when + ' (' + j.length + ', ' + fmtBytes(total) + ')',
    cols: [
      {h: 'bytes', num: true, v: r => X(r).b[j[r]], text: r => fmtBytes(X(r).b[j[r]])},
      {h: 'device', num: true, v: r => X(r).device, text: r => String(X(r).device)},
      col('shape', (x, i) => x.shape[i]), col('dtype', (x, i) => x.dtype[i]), col('category', (x, i) => x.category[i]),
      col('name', (x, i) => x.name[i] || '(unnamed)'), col('holder', (x, i) => x.holder[i]),
      {h: 'call site', v: r => X(r).s[j[r]] < 0 ? '' : siteOf(d, X(r).s[j[r]]),
        text: r => X(r).s[j[r]] < 0 ? '(no allocation found)' : siteOf(d, X(r).s[j[r]])},
    ],
    stack: r => X(r).s[j[r]], time: () => null, device: r => X(r).device,
  };
}

class Table {
  constructor(parent, def, onRow) {
    this.def = def; this.onRow = onRow;
    this.wrap = el('div', 'vt-table-wrap');
    const head = el('h3', '', def.title);
    this.filter = el('input');
    this.filter.type = 'search'; this.filter.placeholder = 'filter';
    this.filter.className = 'filter';
    head.appendChild(this.filter);
    this.wrap.appendChild(head);
    for (const note of def.notes || []) this.wrap.appendChild(el('p', 'table-note', note));
    this.table = el('table', 'vt-table ' + def.name);
    const tr = el('tr');
    def.cols.forEach((c, k) => {
      const th = el('th', '', c.h);
      th.addEventListener('click', () => this.sort(k));
      tr.appendChild(th);
    });
    this.table.appendChild(el('thead')).appendChild(tr);
    this.body = this.table.appendChild(el('tbody'));
    this.wrap.appendChild(this.table);
    this.more = this.wrap.appendChild(el('p', 'more'));
    parent.appendChild(this.wrap);
    this.order = Array.from({length: def.n}, (_, i) => i);
    this.rows = this.order;
    this.key = -1; this.asc = false;
    this.filter.addEventListener('input', () => this.apply());
    this.render();
  }

  sort(k) {
    this.asc = this.key === k ? !this.asc : true;
    this.key = k;
    const c = this.def.cols[k], v = this.def.cols[k].v, dir = this.asc ? 1 : -1;
    const keys = new Map();
    for (const i of this.order) keys.set(i, v(i));
    this.order.sort((a, b) => {
      const x = keys.get(a), y = keys.get(b);
      return dir * (c.num ? x - y : String(x).localeCompare(String(y))) || a - b;
    });
    [...this.table.tHead.rows[0].cells].forEach((th, j) => {
      th.classList.toggle('asc', j === k && this.asc); th.classList.toggle('desc', j === k && !this.asc);
    });
    this.apply();
  }

  /* Keep the rows whose text in any column holds the filter's text. */
  apply() {
    const q = this.filter.value.trim().toLowerCase();
    this.rows = !q ? this.order : this.order.filter(i => this.def.cols.some(c => String(c.text(i)).toLowerCase().includes(q)));
    this.render();
  }

  render() {
    this.body.textContent = '';
    const n = Math.min(this.rows.length, SHOWN);
    for (let r = 0; r < n; r++) {
      const i = this.rows[r], tr = el('tr', 'row');
      tr.dataset.row = i;
      for (const c of this.def.cols) {
        const td = el('td', c.num ? 'n' : '', c.text(i));
        td.dataset.v = c.v(i);
        tr.appendChild(td);
      }
      tr.addEventListener('click', () => {
        for (const x of this.body.querySelectorAll('tr.sel')) x.classList.remove('sel');
        tr.classList.add('sel');
        this.onRow(this.def, i);
      });
      this.body.appendChild(tr);
    }
    this.more.textContent = this.rows.length > n ? (this.rows.length - n) + ' more rows: sort or filter to see them'
      : this.def.n === 0 ? 'none' : '';
  }
}
