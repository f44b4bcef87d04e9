/* main.js -- the page: one Dump per data block, drawn when first shown
 * (the rank selector shows one dump at a time), the views named in the
 * URL's fragment ("#view=timeline"), and the static tables' sorting. */
class Dump {
  constructor(box) {
    this.box = box;
    this.d = readData(box.querySelector('script[type="application/json"]').textContent);
    this.ready = false;
  }

  init() {
    if (this.ready) return;
    this.ready = true;
    const d = this.d, t0 = performance.now();
    const series = d.series || [];
    this.names = series.map(s => d.sites[s]).concat(['other call sites', 'live before the recorded history']);
    this.colors = series.map((_, k) => PALETTE[k % PALETTE.length]).concat([OTHER_COLOR, BEFORE_COLOR]);
    this.seriesOfSite = new Map(series.map((s, k) => [s, k]));
    const tl = this.box.querySelector('.timelines');
    this.timelines = (d.devices || []).map(dev => new Timeline(tl, d, dev, this.names, this.colors));
    if (!this.timelines.length) tl.appendChild(el('p', '', 'no device memory was used'));
    this.axis = this.box.querySelector('.axis');
    this.axis.addEventListener('change', () => this.timelines.forEach(t => t.setAxis(this.axis.value)));
    /* "axis=time" in the URL's fragment opens on the time axis. */
    if (/axis=time/.test(location.hash)) { this.axis.value = 'time'; this.timelines.forEach(t => t.setAxis('time')); }
    this.box.querySelector('.unzoom').addEventListener('click', () => this.timelines.forEach(t => t.reset()));
    this.flame = new Flame(this.box.querySelector('[data-view="flame"]'), d);
    const tables = this.box.querySelector('.tables');
    this.tables = TABLES.flatMap(make => [].concat(make(d) || [])).map(def => new Table(tables, def, (t, i) => this.row(t, i)));
    this.stackTitle = this.box.querySelector('.stack-title');
    this.stackList = this.box.querySelector('.stack');
    this.openMs = performance.now() - t0;
  }

  /* A row's whole stack, the user's frames first, then the library's; and
   * its call site's band (and, for an allocation, its moment) highlighted
   * in the timelines. */
  row(def, i) {
    const d = this.d, s = def.stack(i), frames = stackFrames(d, s);
    this.stackTitle.textContent = def.name + ' row: ' + def.cols.map(c => c.h + ' ' + c.text(i)).join(', ');
    this.stackList.textContent = '';
    const user = frames.filter(f => !d.lib[f]), lib = frames.filter(f => d.lib[f]);
    for (const f of user) this.stackList.appendChild(el('li', 'user', d.fw[f]));
    if (lib.length) this.stackList.appendChild(el('li', 'sep', lib.length + ' library frame' + (lib.length === 1 ? '' : 's') + ', innermost first:'));
    for (const f of lib) this.stackList.appendChild(el('li', 'lib', d.fw[f]));
    if (!frames.length) this.stackList.appendChild(el('li', '', '(no stack)'));
    const site = d.so && s >= 0 && s < d.so.length ? d.so[s] : -1;
    const k = this.seriesOfSite.has(site) ? this.seriesOfSite.get(site) : (d.series || []).length;
    const t = def.time(i), dev = def.device ? def.device(i) : null;
    for (const tl of this.timelines) tl.highlight(k, dev === null || dev === tl.dev.ordinal ? t : null);
    this.selected = {series: k, frames: frames.length, user: user.length};
  }
}

const DUMPS = [...document.querySelectorAll('.dump')].map(b => new Dump(b));

function showDump(k) {
  DUMPS.forEach((x, i) => x.box.classList.toggle('hidden', i !== k));
  if (DUMPS[k]) DUMPS[k].init();
}

/* "#view=NAME" shows that view alone ("all", or none, shows every view). */
function showView() {
  const m = /view=([a-z]+)/.exec(location.hash), v = m ? m[1] : 'all';
  document.querySelectorAll('.view').forEach(s => s.classList.toggle('off', v !== 'all' && s.dataset.view !== v));
  document.querySelectorAll('nav a').forEach(a => a.classList.toggle('on', a.getAttribute('href') === '#view=' + v));
  for (const x of DUMPS) if (x.ready) { x.timelines.forEach(t => t.draw()); x.flame.draw(); }
}

function sortStatic(th) {
  const t = th.closest('table'), i = [...th.parentNode.children].indexOf(th), asc = th.dataset.asc !== '1';
  th.dataset.asc = asc ? '1' : '0';
  const rows = [...t.tBodies[0].rows];
  rows.sort((a, b) => {
    const x = a.cells[i].dataset.v ?? a.cells[i].textContent, y = b.cells[i].dataset.v ?? b.cells[i].textContent;
    const nx = Number(x), ny = Number(y), c = !isNaN(nx) && !isNaN(ny) ? nx - ny : x.localeCompare(y);
    return asc ? c : -c;
  });
  rows.forEach(r => t.tBodies[0].appendChild(r));
}

document.querySelectorAll('table.sortable th').forEach(th => th.addEventListener('click', () => sortStatic(th)));
document.querySelectorAll('.peak-row .bar').forEach(b => { b.style.width = (Number(b.dataset.share) * 320) + 'px'; });
const RANK_SELECT = document.getElementById('rank-select');
if (RANK_SELECT) RANK_SELECT.addEventListener('change', () => showDump(Number(RANK_SELECT.value)));
window.addEventListener('hashchange', showView);
let resizing = 0;
window.addEventListener('resize', () => {
  clearTimeout(resizing);
  resizing = setTimeout(() => { for (const x of DUMPS) if (x.ready) { x.timelines.forEach(t => t.draw()); x.flame.draw(); } }, 150);
});
showView();
showDump(RANK_SELECT ? Number(RANK_SELECT.value) : 0);
const VT_OPEN_MS = performance.now();
