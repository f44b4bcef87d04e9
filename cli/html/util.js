/* util.js -- what the page's parts share: formatting, elements, colours,
 * axis ticks. The page's script is this file and timeline.js, flame.js,
 * tables.js, main.js and selftest.js, concatenated in that order by the
 * build. Every name from a dump reaches the page through textContent (el's
 * text argument) or the title property, never through markup. */
'use strict';
const VT_ERRORS = [];
window.addEventListener('error', e => VT_ERRORS.push(String(e.message)));

/* Bytes for people, in binary units: "1.50 GiB", as the reports print
 * them (vt_fmt_bytes): the unit is the one the figure has once rounded to
 * two decimals (1048575 bytes are "1.00 MiB", never "1024.00 KiB"). */
function fmtBytes(b) {
  const u = ['B', 'KiB', 'MiB', 'GiB', 'TiB', 'PiB'];
  let i = 0, v = Math.abs(b);
  while (v >= 1024 && i < u.length - 1) { v /= 1024; i++; }
  if (i && i < u.length - 1 && v.toFixed(2) === '1024.00') { v /= 1024; i++; }
  return (b < 0 ? '-' : '') + (i ? v.toFixed(2) : String(v)) + ' ' + u[i];
}

/* part as a share of whole with one digit after the point, as the reports
 * print it (vt_fmt_pct): never "100.0%" unless part is all of whole, never
 * "0.0%" unless it is none ("<0.1%"). */
function share(part, whole) {
  const p = whole ? 100 * part / whole : 0;
  if (part > 0 && whole && p < 0.1) return '<0.1%';
  return (part < whole && p > 99.9 ? 99.9 : p).toFixed(1) + '%';
}

/* Seconds for people, in the unit that suits `span` (the axis's width). */
function timeUnit(span) {
  if (span >= 1e9) return [1e9, 's'];
  if (span >= 1e6) return [1e6, 'ms'];
  if (span >= 1e3) return [1e3, '\u00b5s'];
  return [1, 'ns'];
}

/* An element with a class and text (text set as textContent only). */
function el(tag, cls, text) {
  const e = document.createElement(tag);
  if (cls) e.className = cls;
  if (text !== undefined && text !== null) e.textContent = String(text);
  return e;
}

const PALETTE = ['#1f77b4', '#ff7f0e', '#2ca02c', '#d62728', '#9467bd', '#8c564b', '#e377c2', '#17becf',
  '#bcbd22', '#393b79', '#637939', '#8c6d31', '#843c39', '#7b4173', '#3182bd', '#e6550d', '#31a354',
  '#756bb1', '#636363', '#9c9ede', '#cedb9c', '#e7ba52', '#e7969c', '#de9ed6'];
const OTHER_COLOR = '#b8b8b8', BEFORE_COLOR = '#dddddd';

/* A warm colour for a user frame, a cool grey-blue for a library frame,
 * fixed by the name so that a frame keeps its colour across views. */
function frameColor(name, lib) {
  let h = 0;
  for (let i = 0; i < name.length; i++) h = (h * 31 + name.charCodeAt(i)) >>> 0;
  return lib ? 'hsl(' + (200 + h % 30) + ',25%,' + (72 + h % 14) + '%)'
    : 'hsl(' + (10 + h % 45) + ',80%,' + (58 + h % 20) + '%)';
}

/* Round ticks over [lo, hi]: about `count` values of 1, 2 or 5 times a
 * power of `base` (10 for counts and times, 1024 for bytes). */
function ticks(lo, hi, count, base) {
  const span = hi - lo;
  if (!(span > 0)) return [lo];
  let unit = 1;
  if (base === 1024) while (span / (unit * 1024) >= 1) unit *= 1024;
  const raw = span / unit / count, p = Math.pow(10, Math.floor(Math.log10(raw)));
  const m = raw / p, step = (m < 1.5 ? 1 : m < 3.5 ? 2 : m < 7.5 ? 5 : 10) * p * unit;
  const out = [];
  for (let v = Math.ceil(lo / step) * step; v <= hi + step * 1e-9; v += step) out.push(v);
  return out;
}

/* The last index i with a[i] <= v in the sorted array a, or -1. */
function lastAtOrBefore(a, v) {
  let lo = 0, hi = a.length - 1, r = -1;
  while (lo <= hi) {
    const mid = (lo + hi) >> 1;
    if (a[mid] <= v) { r = mid; lo = mid + 1; } else hi = mid - 1;
  }
  return r;
}

/* A packed array (cli/html/pack.c) back as numbers: its kind letter ('u'
 * unsigned, 's' signed, 'd' signed differences), then base64 of varints.
 * unpackTo writes them into `out` (an array or typed array; those past its
 * length are left out) and says how many there were; unpack returns them
 * as an array, and anything else (null, an array) as it is. */
function unpackTo(s, out) {
  const bin = atob(s.slice(1)), kind = s[0], grow = Array.isArray(out);
  let v = 0, mul = 1, sum = 0, n = 0;
  for (let i = 0; i < bin.length; i++) {
    const c = bin.charCodeAt(i);
    v += (c & 127) * mul;
    if (c & 128) { mul *= 128; continue; }
    if (kind !== 'u') v = v % 2 ? -(v + 1) / 2 : v / 2;
    if (kind === 'd') v = sum += v;
    if (grow) out.push(v); else if (n < out.length) out[n] = v;
    n++;
    v = 0; mul = 1;
  }
  return n;
}

function unpack(s) {
  if (typeof s !== 'string') return s;
  const out = [];
  unpackTo(s, out);
  return out;
}

/* The names table's entry k as text (data.c, pack.c). */
function nameOf(d, k) {
  const a = d.names[3 * k], b = d.names[3 * k + 1], line = d.names[3 * k + 2];
  return d.strs[a] + (b ? ' ' + d.strs[b - 1] : '') + (line ? ':' + line : '');
}

/* The data block as the script reads it: the packed arrays unpacked (each
 * device's events are unpacked by its Timeline, straight into its own
 * arrays), the
 * frames' and call sites' names from the names table, node parents from
 * distances back (data.c), and the series digits as numbers. */
function readData(text) {
  const d = JSON.parse(text);
  for (const k of ['np', 'nf', 'sn', 'so', 'sp', 'names', 'exit', 'exit_dev', 'exit_split', 'peak', 'peak_dev',
    'peak_split']) d[k] = unpack(d[k]);
  for (const o of d.ooms || []) for (const k of ['holders', 'holders_dev', 'holders_split', 'device_holders']) o[k] = unpack(o[k]);
  if (d.live) for (const k of ['b', 'k', 'a', 'd', 'x', 't', 'th', 's']) d.live[k] = unpack(d.live[k]);
  const lib = d.lib || '', np = d.np || [], sp = d.sp || [];
  d.lib = new Uint8Array(lib.length);
  d.fw = new Array(lib.length);
  for (let i = 0; i < lib.length; i++) { d.lib[i] = lib.charCodeAt(i) - 48; d.fw[i] = nameOf(d, i); }
  d.sites = [];
  for (let i = 0; i < sp.length; i += sp[i] + 1) {
    const parts = [];
    for (let j = 1; j <= sp[i]; j++) parts.push(nameOf(d, sp[i + j]));
    d.sites.push(parts.join(' -> '));
  }
  d.par = new Int32Array(np.length);
  for (let i = 0; i < np.length; i++) d.par[i] = np[i] ? i - np[i] : -1;
  return d;
}
const SERIES_DIGITS = '0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ';
const SERIES_VALUE = new Uint8Array(128);
for (let k = 0; k < SERIES_DIGITS.length; k++) SERIES_VALUE[SERIES_DIGITS.charCodeAt(k)] = k;

/* The frames of stack `s` of dump data `d`, innermost first, as frame
 * indices (empty for no stack). */
function stackFrames(d, s) {
  const out = [];
  if (!d.sn || s < 0 || s >= d.sn.length) return out;
  for (let n = d.sn[s]; n >= 0; n = d.par[n]) out.push(d.nf[n]);
  return out;
}
