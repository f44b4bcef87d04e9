/* selftest.js -- with "selftest" in the URL's fragment the page works each
 * of its controls as a user would (synthetic mouse and input events) and
 * says what happened in <pre id="selftest">; with "bench" it times the
 * opening, hovers and zooms into <pre id="bench">. The tests open the page
 * in headless Chromium and read these. */
function vtMouse(target, type, x, y) {
  const r = target.getBoundingClientRect();
  target.dispatchEvent(new MouseEvent(type, {bubbles: true, clientX: r.left + x, clientY: r.top + y}));
}

function vtSelftest() {
  const r = [], say = (name, good, why) => r.push(name + (good ? ' ok' : ' failed' + (why ? ' (' + why + ')' : '')));
  const dump = DUMPS.find(x => x.ready), box = dump.box;
  const live = dump.tables.find(t => t.def.name === 'live');
  if (live && live.def.n > 1) {
    const th = live.table.tHead.rows[0].cells[0], col = () => [...live.body.rows].map(x => Number(x.cells[0].dataset.v));
    th.click(); let v = col(); const up = v.every((x, i) => !i || v[i - 1] <= x);
    th.click(); v = col(); const down = v.every((x, i) => !i || v[i - 1] >= x);
    live.filter.value = live.body.rows[0].cells[7].textContent; live.filter.dispatchEvent(new Event('input'));
    const kept = live.rows.length; live.filter.value = ''; live.filter.dispatchEvent(new Event('input'));
    say('sort', up && down && kept >= 1 && kept <= live.def.n);
  } else r.push('sort: fewer than two live allocations');
  const fl = dump.flame, inner = fl.nodes.find(e => e._node !== fl.root && parseFloat(e.style.width) < fl.box.clientWidth - 1);
  if (inner) {
    const node = inner._node;
    inner.click();
    const top = fl.nodes.find(e => e._node === node);
    say('zoom', top && Math.abs(parseFloat(top.style.width) - Math.max(fl.box.clientWidth, 480)) < 1 &&
      fl.crumbs.querySelectorAll('a').length === node.depth + 1);
    fl.crumbs.querySelector('a').click();
    say('unzoom', fl.zoom === fl.root);
  } else r.push('zoom: nothing to zoom into');
  const tl = dump.timelines[0];
  if (tl && tl.n) {
    const cv = tl.canvas;
    vtMouse(cv, 'mousemove', PAD_L + tl.w / 2, PAD_T + tl.h - 2);
    const h = tl.hover(PAD_L + tl.w / 2, PAD_T + tl.h - 2);
    /* The hovered figures against a sum from the first event. */
    const st = new Float64Array(tl.ns);
    st[tl.before] = tl.dev.base || 0;
    for (let k = 0; h && k <= h.index; k++) st[tl.s[k]] += tl.b[k];
    const sum = st.reduce((a, b) => a + b, 0), exact = h && h.total === sum && (h.band < 0 || h.bytes === st[h.band]);
    say('hover', !tl.tip.classList.contains('hidden') && exact && tl.tip.textContent.includes(h.bytes + ' bytes') &&
      tl.tip.textContent.includes(h.band >= 0 ? tl.names[h.band] : 'live'), exact ? '' : 'not the sum of the events');
    const span = tl.hi - tl.lo;
    vtMouse(cv, 'mousedown', PAD_L + tl.w * 0.25, 40); vtMouse(cv, 'mousemove', PAD_L + tl.w * 0.5, 40);
    vtMouse(cv, 'mouseup', PAD_L + tl.w * 0.75, 40);
    const zoomed = tl.hi - tl.lo < span * 0.6 && tl.zoomed();
    box.querySelector('.unzoom').click();
    say('timeline zoom', zoomed && !tl.zoomed());
    const axis = box.querySelector('.axis');
    axis.value = 'time'; axis.dispatchEvent(new Event('change'));
    const timed = tl.axis === 'time' && tl.xlabel.startsWith('time since start (');
    axis.value = 'event'; axis.dispatchEvent(new Event('change'));
    say('axis', timed && tl.axis === 'event' && tl.xlabel === 'event number');
  } else r.push('timeline: no events');
  const stepped = dump.timelines.find(t => t.stepN.length && t.n);
  if (stepped) { const why = vtSteps(stepped, box.querySelector('.axis')); say('steps', !why, why); }
  else r.push('steps: none');
  const leaf = fl.nodes.filter(e => e._node.f >= 0 && !e._node.kids.size)[0];
  if (leaf) {
    fl.search.value = fl.label(leaf._node.f); fl.search.dispatchEvent(new Event('input'));
    const marked = fl.box.querySelectorAll('.flame-node.match').length;
    say('search', marked >= 1 && fl.matched >= 1 && /\(\d+\.\d%\)$/.test(fl.shareEl.textContent));
    fl.search.value = ''; fl.search.dispatchEvent(new Event('input'));
  } else r.push('search: no frames');
  const libBefore = fl.box.querySelectorAll('.flame-node.lib').length;
  fl.collapse.checked = true; fl.collapse.dispatchEvent(new Event('change'));
  const libAfter = [...fl.box.querySelectorAll('.flame-node.lib')].filter(e => e._node.kids.size).length;
  fl.collapse.checked = false; fl.collapse.dispatchEvent(new Event('change'));
  if (libBefore) say('collapse', libAfter === 0 && fl.box.querySelectorAll('.flame-node.lib').length === libBefore);
  else r.push('collapse: no library frames');
  say('flame device', vtFlameDevices(fl));
  const tens = dump.tables.filter(t => t.def.name.startsWith('tensors'));
  if (tens.length) say('tensors', tens.every(t => vtTensors(dump, t)));
  else r.push('tensors: none');
  const holders = dump.tables.find(t => t.def.name === 'holders');
  const row = holders && holders.body.rows[0];
  if (row) {
    row.click();
    const items = dump.stackList.querySelectorAll('li:not(.sep)').length;
    const frames = stackFrames(dump.d, holders.def.stack(Number(row.dataset.row))).length;
    say('row', items === Math.max(frames, 1) && (!tl || tl.hl === dump.selected.series) &&
      (dump.selected.user === 0 || dump.stackList.querySelector('li').className === 'user'));
  } else r.push('row: no holders');
  if (RANK_SELECT && DUMPS.length > 1) {
    const was = Number(RANK_SELECT.value), other = (was + 1) % DUMPS.length;
    RANK_SELECT.value = String(other); RANK_SELECT.dispatchEvent(new Event('change'));
    const shown = !DUMPS[other].box.classList.contains('hidden') && DUMPS[was].box.classList.contains('hidden') &&
      DUMPS[other].ready && DUMPS[other].box.querySelectorAll('canvas').length === (DUMPS[other].d.devices || []).length;
    RANK_SELECT.value = String(was); RANK_SELECT.dispatchEvent(new Event('change'));
    say('rank', shown);
  } else r.push('rank: one dump');
  r.push('errors ' + (VT_ERRORS.length ? VT_ERRORS.join(' | ') : 'none'));
  const p = el('pre', '', r.join('; '));
  p.id = 'selftest';
  document.body.appendChild(p);
}

/* Step boundaries on both axes: each one in view drawn, and the hover on
 * its line names it (or one drawn within 2 pixels of it), with its time and
 * the event it comes before. Returns what went wrong, or ''. */
function vtSteps(tl, axis) {
  let why = '';
  for (const a of ['event', 'time']) {
    axis.value = a; axis.dispatchEvent(new Event('change'));
    const want = [];
    tl.stepN.forEach((_, k) => { const v = tl.stepPos(k); if (v >= 0 && v >= tl.lo && v <= tl.hi) want.push(k); });
    if (!want.length || tl.stepsDrawn.join() !== want.join()) why = why || a + ': drew ' + tl.stepsDrawn.length + ' of ' + want.length;
    for (const k of want) {
      const x = tl.px(tl.stepPos(k)), here = want.filter(j => Math.abs(tl.px(tl.stepPos(j)) - x) < 2);
      vtMouse(tl.canvas, 'mousemove', x, PAD_T + 30);
      const names = here.map(j => 'boundary of step ' + tl.stepN[j] + ' (' + (tl.stepT[j] / 1e9).toFixed(6) + ' s' +
        (tl.stepAt[j] >= 0 ? ', before event #' + tl.stepAt[j] : '') + ')');
      const said = tl.tip.textContent.split('\n').pop();
      if (!names.includes(said)) why = why || a + ': the hover says ' + said;
    }
  }
  axis.value = 'event'; axis.dispatchEvent(new Event('change'));
  tl.tip.classList.add('hidden');
  return why;
}

/* Every moment on every device of the flame graph's selectors: the root
 * holds the bytes the data block puts there, and the devices' bytes with
 * those not split by device add up to all devices'. */
function vtFlameDevices(fl) {
  let good = fl.device.options.length >= 1;
  const was = fl.device.value;
  fl.moments.forEach((m, mi) => {
    fl.select.value = String(mi); fl.select.dispatchEvent(new Event('change'));
    good = good && (m.device === undefined || fl.device.options.length === 1 || fl.device.value === String(m.device));
    let all = 0, devices = 0, unknown = 0;
    for (let j = 0; j < m.h.length / 3; j++) { all += m.h[3 * j + 1]; if (m.hd[j] === -1) unknown += m.h[3 * j + 1]; }
    for (const o of fl.device.options) {
      fl.device.value = o.value; fl.device.dispatchEvent(new Event('change'));
      let want = 0;
      if (o.value === 'all') want = all;
      else {
        const v = Number(o.value);
        m.hd.forEach((x, j) => { if (x === v) want += m.h[3 * j + 1]; });
        for (let i = 0; i + 3 < m.hs.length; i += 4) if (m.hs[i + 1] === v) want += m.hs[i + 2];
        devices += want;
      }
      good = good && fl.root.v === want;
    }
    good = good && devices + unknown === all;
  });
  fl.select.value = String(fl.pick()); fl.select.dispatchEvent(new Event('change'));
  fl.device.value = was; fl.device.dispatchEvent(new Event('change'));
  return good;
}

/* A tensors table: sorted by bytes both ways, filtered by a row's name,
 * and a row's click shows its stack (or that none was found). */
function vtTensors(dump, t) {
  if (!t.def.n) return t.more.textContent === 'none';
  const th = t.table.tHead.rows[0].cells[0], col = () => [...t.body.rows].map(x => Number(x.cells[0].dataset.v));
  th.click(); let v = col(); const up = v.every((x, i) => !i || v[i - 1] <= x);
  th.click(); v = col(); const down = v.every((x, i) => !i || v[i - 1] >= x);
  const q = t.body.rows[0].cells[5].textContent.toLowerCase();
  t.filter.value = q; t.filter.dispatchEvent(new Event('input'));
  const kept = [...t.body.rows].every(x => [...x.cells].some(c => c.textContent.toLowerCase().includes(q)));
  const n = t.rows.length;
  t.filter.value = ''; t.filter.dispatchEvent(new Event('input'));
  const row = t.body.rows[0];
  row.click();
  const frames = stackFrames(dump.d, t.def.stack(Number(row.dataset.row))).length;
  const items = dump.stackList.querySelectorAll('li:not(.sep)').length;
  return up && down && v.length === Math.min(t.def.n, SHOWN) && kept && n >= 1 && items === Math.max(frames, 1) &&
    dump.stackTitle.textContent.startsWith(t.def.name + ' row: bytes ');
}

function vtBench() {
  const dump = DUMPS.find(x => x.ready), tl = dump.timelines[0], hov = [], zoom = [];
  /* The page's first layout belongs to its opening, not to the first hover. */
  document.body.getBoundingClientRect();
  const opened = performance.now();
  for (let k = 0; k < 50; k++) {
    const t0 = performance.now();
    vtMouse(tl.canvas, 'mousemove', PAD_L + tl.w * (k + 0.5) / 50, PAD_T + tl.h * (0.3 + (k % 5) / 8));
    hov.push(performance.now() - t0);
  }
  for (let k = 0; k < 5; k++) {
    const t0 = performance.now();
    tl.zoomPx(PAD_L + tl.w * 0.1, PAD_L + tl.w * 0.7);
    zoom.push(performance.now() - t0);
  }
  tl.reset();
  const t0 = performance.now();
  tl.setAxis('time');
  const axis = performance.now() - t0;
  const med = a => a.slice().sort((x, y) => x - y)[a.length >> 1], max = a => Math.max(...a);
  const p = el('pre', '', 'open_ms ' + opened.toFixed(0) + ' script_done_ms ' + VT_OPEN_MS.toFixed(0) + ' draw_ms ' + dump.openMs.toFixed(0) +
    ' hover_median_ms ' + med(hov).toFixed(1) + ' hover_max_ms ' + max(hov).toFixed(1) + ' zoom_median_ms ' +
    med(zoom).toFixed(1) + ' zoom_max_ms ' + max(zoom).toFixed(1) + ' axis_ms ' + axis.toFixed(1) +
    ' events ' + tl.n + ' flame_nodes ' + dump.flame.nodes.length);
  p.id = 'bench';
  document.body.appendChild(p);
}

if (/selftest/.test(location.hash)) vtSelftest();
if (/bench/.test(location.hash)) vtBench();
