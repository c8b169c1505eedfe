// The report page of wtrace (package report): no library, no network.
// It reads the model (the JSON element #model), decodes its columns of
// marks, and draws the visible lanes as SVG: each lane's marks binned
// per few pixels at the current zoom (one mark where a bin holds one,
// an aggregate with its count where it holds more), so that what is drawn
// never exceeds what the screen can show. Event bytes, bodies and an
// exchange's details live in gzip'd chunks (#cN), decoded on first use.
(function () {
  'use strict';
  const M = JSON.parse(document.getElementById('model').textContent);
  const LANE = 18, BIN = 4, VIRTUAL = 400;
  const TYPES = ['ADDED', 'MODIFIED', 'DELETED', 'BOOKMARK', 'ERROR', 'other'];
  const COLORS = ['#2e9d4a', '#2f6fd6', '#d23c3c', '#9aa0a6', '#8e24aa', '#555'];
  const $ = (id) => document.getElementById(id);
  const NS = 'http://www.w3.org/2000/svg';
  const esc = (s) => String(s).replace(/[&<>"']/g, (c) => ({ '&': '&amp;', '<': '&lt;', '>': '&gt;', '"': '&quot;', "'": '&#39;' }[c]));

  // varints decodes a base64 string of zigzag LEB128 varints.
  function varints(b64, n, Arr) {
    if (!b64) return new (Arr || Float64Array)(n || 0); // a column of zeros
    const bin = atob(b64);
    const out = new (Arr || Float64Array)(n === undefined ? bin.length : n);
    let x = 0, mul = 1, k = 0;
    for (let i = 0; i < bin.length; i++) {
      const c = bin.charCodeAt(i);
      x += (c & 0x7f) * mul;
      if (c & 0x80) { mul *= 128; continue; }
      out[k++] = (x % 2) ? -(x + 1) / 2 : x / 2;
      x = 0; mul = 1;
    }
    return k === out.length ? out : out.subarray(0, k);
  }

  // The store: items by number, chunks decoded once.
  const items = varints(M.items);
  const chunkCache = new Map();
  function chunk(c) {
    if (!chunkCache.has(c)) {
      chunkCache.set(c, (async () => {
        const bin = atob($('c' + c).textContent);
        const u8 = new Uint8Array(bin.length);
        for (let i = 0; i < bin.length; i++) u8[i] = bin.charCodeAt(i);
        const ds = new Blob([u8]).stream().pipeThrough(new DecompressionStream('gzip'));
        return new Uint8Array(await new Response(ds).arrayBuffer());
      })());
    }
    return chunkCache.get(c);
  }
  async function item(i) {
    if (i < 0 || 3 * i + 2 >= items.length) return null;
    const c = await chunk(items[3 * i]);
    return c.subarray(items[3 * i + 1], items[3 * i + 1] + items[3 * i + 2]);
  }
  const utf8 = new TextDecoder('utf-8', { fatal: true });
  function text(bytes) { try { return utf8.decode(bytes); } catch (e) { return null; } }
  async function json(i) { const b = await item(i); return b ? JSON.parse(new TextDecoder().decode(b)) : null; }

  // Sessions: columns decoded, times made absolute (µs since the start).
  const S = M.sessions.map((s, si) => {
    const ev = {}, rq = {};
    const ec = s.events.cols, rc = s.requests.cols;
    ev.t = varints(ec.t, s.events.n); ev.type = varints(ec.type, s.events.n, Uint8Array);
    ev.flags = varints(ec.flags, s.events.n, Uint8Array); ev.name = varints(ec.name, s.events.n, Int32Array);
    ev.seq = varints(ec.seq, s.events.n); ev.item = varints(ec.item, s.events.n, Int32Array); ev.json = varints(ec.json, s.events.n, Int32Array);
    rq.t = varints(rc.t, s.requests.n); rq.dur = varints(rc.dur, s.requests.n); rq.ex = varints(rc.ex, s.requests.n);
    rq.method = varints(rc.method, s.requests.n, Int32Array); rq.status = varints(rc.status, s.requests.n, Int32Array);
    rq.flags = varints(rc.flags, s.requests.n, Uint8Array); rq.name = varints(rc.name, s.requests.n, Int32Array);
    for (const l of s.lanes) {
      for (let i = l.firstEvent + 1; l.firstEvent >= 0 && i < l.firstEvent + l.events; i++) { ev.t[i] += ev.t[i - 1]; ev.seq[i] += ev.seq[i - 1]; }
      for (let i = l.firstRequest + 1; l.firstRequest >= 0 && i < l.firstRequest + l.requests; i++) rq.t[i] += rq.t[i - 1];
    }
    const ex = varints(s.exchanges), details = new Map();
    for (let i = 0; i + 1 < ex.length; i += 2) details.set(ex[i], ex[i + 1]);
    const anomaliesOf = new Map(); // lane (-1: the session) → anomaly indexes
    s.anomalies.forEach((a, i) => { if (!anomaliesOf.has(a.lane)) anomaliesOf.set(a.lane, []); anomaliesOf.get(a.lane).push(i); });
    const diffsOf = new Map(); // lane → differences placed on it
    if (M.diff) M.diff.differences.forEach((d, i) => { const p = si === 0 ? d.a : d.b; if (!p) return; if (!diffsOf.has(p.lane)) diffsOf.set(p.lane, []); diffsOf.get(p.lane).push(i); });
    return { s, si, ev, rq, details, start: s.start, anomaliesOf, diffsOf };
  });
  const SPAN = Math.max(1, ...M.sessions.map((s) => s.span));

  // Times: µs since a session's start as RFC 3339 with microseconds.
  function fmtAbs(sess, us) {
    const st = sess.start;
    if (!st) return fmtRel(us);
    const base = Date.parse(st.slice(0, 19) + 'Z');
    const frac = Number(st.slice(20, 26) || 0);
    const tot = frac + us;
    const ms = base + Math.floor(tot / 1e6) * 1000;
    const rest = ((tot % 1e6) + 1e6) % 1e6;
    return new Date(ms).toISOString().slice(0, 19) + '.' + String(Math.floor(rest)).padStart(6, '0') + 'Z';
  }
  function dur(us) { const s = fmtRel(us); return s === '0' ? '0' : s.slice(1); }
  function fmtRel(us) {
    const a = Math.abs(us), sg = us < 0 ? '-' : '+';
    if (a === 0) return '0';
    if (a < 1e3) return sg + a.toFixed(0) + 'µs';
    if (a < 1e6) return sg + (a / 1e3).toFixed(a < 1e4 ? 2 : 1) + 'ms';
    if (a < 60e6) return sg + (a / 1e6).toFixed(a < 1e7 ? 3 : 2) + 's';
    const m = Math.floor(a / 60e6), sec = (a - m * 60e6) / 1e6;
    if (m < 60) return sg + m + 'm' + sec.toFixed(sec < 10 ? 1 : 0).padStart(2, '0') + 's';
    return sg + Math.floor(m / 60) + 'h' + String(m % 60).padStart(2, '0') + 'm';
  }

  // The view: [t0, t1] in µs, the filters, the folded groups.
  const view = { t0: 0, t1: SPAN * 1.02 + 1 };
  const filt = { resource: '', namespace: '', name: '', client: '', types: new Set([0, 1, 2, 3, 4, 5]) };
  const folded = new Set();
  let rows = [], rowOf = [], nameOK = [], selected = null, selDiff = -1;

  function laneEventOK(x, i) { return filt.types.has(x.ev.type[i]) && (!filt.name || (x.ev.name[i] >= 0 && nameOK[x.si][x.ev.name[i]])); }
  function laneReqOK(x, i) { return !filt.name || (x.rq.name[i] >= 0 && nameOK[x.si][x.rq.name[i]]); }

  // rows: a header per session, then per group (A's and B's lanes of the
  // same title together in a diff) a header and its lanes that pass the
  // filters.
  function layout() {
    const has = (v, f) => !f || String(v || '').toLowerCase().includes(f.toLowerCase());
    nameOK = S.map((x) => x.s.names.map((n) => has(n, filt.name)));
    rows = []; rowOf = S.map((x) => new Array(x.s.lanes.length).fill(-1));
    for (const x of S) rows.push({ kind: 'sess', si: x.si });
    const titles = [], byTitle = new Map();
    for (const x of S) x.s.groups.forEach((g, gi) => {
      if (!byTitle.has(g.title)) { byTitle.set(g.title, []); titles.push(g.title); }
      byTitle.get(g.title).push([x, g, gi]);
    });
    for (const title of titles) {
      const parts = byTitle.get(title);
      const g0 = parts[0][1];
      if (!has(g0.resource || 'other', filt.resource) || !has(g0.namespace, filt.namespace)) continue;
      const lanes = [];
      for (const [x, g] of parts) for (const li of g.lanes) {
        const l = x.s.lanes[li];
        if (!has(l.client, filt.client)) continue;
        if (filt.name) {
          let ok = false;
          for (let i = l.firstEvent; !ok && l.firstEvent >= 0 && i < l.firstEvent + l.events; i++) ok = laneEventOK(x, i);
          for (let i = l.firstRequest; !ok && l.firstRequest >= 0 && i < l.firstRequest + l.requests; i++) ok = laneReqOK(x, i);
          if (!ok) continue;
        }
        lanes.push({ kind: 'lane', si: x.si, li });
      }
      if (!lanes.length) continue;
      rows.push({ kind: 'group', title, n: lanes.length });
      if (folded.has(title)) continue;
      for (const r of lanes) { rowOf[r.si][r.li] = rows.length; rows.push(r); }
    }
    $('spacer').style.height = (rows.length * LANE) + 'px';
    overview();
    schedule();
  }

  let pending = false;
  function schedule() { if (!pending) { pending = true; requestAnimationFrame(() => { pending = false; render(); }); } }

  function width() { return Math.max(100, $('rows').clientWidth - parseInt(getComputedStyle(document.documentElement).getPropertyValue('--label'))); }
  function xOf(t, W) { return (t - view.t0) / (view.t1 - view.t0) * W; }
  function lower(a, lo, hi, t) { while (lo < hi) { const m = (lo + hi) >> 1; if (a[m] < t) lo = m + 1; else hi = m; } return lo; }

  // render draws the rows in view (all of them up to VIRTUAL rows).
  function render() {
    const W = width(), box = $('rows');
    let r0 = 0, r1 = rows.length;
    if (rows.length > VIRTUAL) {
      r0 = Math.max(0, Math.floor(box.scrollTop / LANE) - 5);
      r1 = Math.min(rows.length, r0 + Math.ceil(box.clientHeight / LANE) + 10);
    }
    const svg = $('marks');
    svg.setAttribute('width', W); svg.setAttribute('height', (r1 - r0) * LANE);
    svg.style.top = (r0 * LANE) + 'px';
    const out = ['<defs><pattern id="hatch" width="6" height="6" patternUnits="userSpaceOnUse" patternTransform="rotate(45)"><rect width="3" height="6" fill="#e6e9ee"/></pattern></defs>'];
    const lab = [];
    const nb = Math.ceil(W / BIN) + 1;
    const cnt = new Int32Array(nb), first = new Int32Array(nb), per = new Int32Array(nb * 6), caused = new Uint8Array(nb);
    for (let r = r0; r < r1; r++) {
      const row = rows[r], y = (r - r0) * LANE;
      const ly = r * LANE;
      if (row.kind === 'sess') {
        const x = S[row.si];
        lab.push(`<div class="row sess" style="top:${ly}px" data-sess="${row.si}" title="${esc(x.s.name)}">${x.s.label ? esc(x.s.label) + ': ' : ''}${esc(x.s.name)}</div>`);
        out.push(`<rect class="bg grp" x="0" y="${y}" width="${W}" height="${LANE}"/>`);
        for (const i of x.anomaliesOf.get(-1) || []) out.push(anomaly(x, i, W, y));
        if (M.diff) diffMarks(row.si, -1, W, y, out);
        continue;
      }
      if (row.kind === 'group') {
        lab.push(`<div class="row group${folded.has(row.title) ? ' folded' : ''}" style="top:${ly}px" data-group="${esc(row.title)}">${esc(row.title)} <span class="cnt">${row.n}</span></div>`);
        out.push(`<rect class="bg grp" x="0" y="${y}" width="${W}" height="${LANE}"/>`);
        continue;
      }
      const x = S[row.si], l = x.s.lanes[row.li];
      const tags = (x.s.label ? `<span class="tag">${esc(x.s.label)}</span>` : '') + (l.kind === 'watch' ? '<span class="tag">watch</span>' : '<span class="tag">req</span>') + (l.tested ? '<span class="tag t" title="the client under test">test</span>' : '');
      const n = l.kind === 'watch' ? l.events : l.requests;
      lab.push(`<div class="row lane s${row.si}${l.tested ? ' tested' : ''}" style="top:${ly}px" data-s="${row.si}" data-lane="${row.li}" data-kind="${l.kind}" data-exchange="${l.exchange}" title="${esc(l.title)}">${tags}${esc(l.label)}<span class="cnt">${n}</span></div>`);
      out.push(`<rect class="bg${r % 2 ? ' odd' : ''}${row.si ? ' s1' : ''}" x="0" y="${y}" width="${W}" height="${LANE}"/>`);
      const mid = y + LANE / 2;
      if (l.kind === 'watch') {
        const a = Math.max(-5, xOf(l.from, W)), b = Math.min(W + 5, xOf(Math.max(l.to, l.from), W));
        if (b > a) out.push(`<line class="span${l.end && l.end !== 'complete' ? ' cut' : ''}" x1="${a.toFixed(1)}" x2="${b.toFixed(1)}" y1="${mid}" y2="${mid}"/>`);
        if (l.silence) {
          const sa = Math.max(-5, xOf(l.silence[0], W)), sb = Math.min(W + 5, xOf(l.silence[1], W));
          if (sb - sa > 2) out.push(`<rect class="silence" x="${sa.toFixed(1)}" y="${y + 3}" width="${(sb - sa).toFixed(1)}" height="${LANE - 6}"><title>longest silence ${fmtRel(l.silence[1] - l.silence[0])}</title></rect>`);
        }
      }
      // events, binned
      if (l.firstEvent >= 0) {
        cnt.fill(0); caused.fill(0); per.fill(0);
        const e = x.ev, lo = lower(e.t, l.firstEvent, l.firstEvent + l.events, view.t0), hi = lower(e.t, l.firstEvent, l.firstEvent + l.events, view.t1 + 1);
        const k = W / (view.t1 - view.t0) / BIN;
        for (let i = lo; i < hi; i++) {
          if (!laneEventOK(x, i)) continue;
          const bi = Math.floor((e.t[i] - view.t0) * k);
          if (bi < 0 || bi >= nb) continue;
          if (cnt[bi]++ === 0) first[bi] = i;
          per[bi * 6 + e.type[i]]++;
          if (e.flags[i] & 1) caused[bi] = 1;
        }
        // one mark where a bin holds one event; the bins holding more are
        // drawn as one path per type for the whole lane (a column per bin,
        // as high as the log of its count, in its types' colours)
        const paths = ['', '', '', '', '', ''];
        let agg = 0, aggCaused = false;
        for (let bi = 0; bi < nb; bi++) {
          const c = cnt[bi];
          if (!c) continue;
          const px = bi * BIN;
          if (c === 1) {
            const i = first[bi];
            out.push(`<rect class="m e${e.type[i]}${e.flags[i] & 1 ? ' caused' : ''}" data-s="${row.si}" data-e="${i}" x="${px}" y="${y + 5}" width="${BIN - 1}" height="${LANE - 10}" rx="1"/>`);
            continue;
          }
          agg += c;
          if (caused[bi]) aggCaused = true;
          const h = Math.min(LANE - 10, 4 + 1.2 * Math.log2(c));
          let yy = mid + h / 2;
          for (let ty = 0; ty < 6; ty++) {
            const n = per[bi * 6 + ty];
            if (!n) continue;
            const hh = h * n / c;
            yy -= hh;
            paths[ty] += `M${px} ${yy.toFixed(1)}h${BIN}v${hh.toFixed(2)}h-${BIN}z`;
          }
        }
        if (agg) out.push(`<g class="agg${aggCaused ? ' caused' : ''}" data-s="${row.si}" data-lane="${row.li}" data-n="${agg}"><title>${agg} events in columns of more than one: click one to zoom in</title>${paths.map((d, ty) => d ? `<path class="e${ty}" d="${d}"/>` : '').join('')}</g>`);
      }
      // requests, binned by their start
      if (l.firstRequest >= 0) {
        cnt.fill(0);
        let ragg = 0, rpath = '';
        const q = x.rq, lo = lower(q.t, l.firstRequest, l.firstRequest + l.requests, view.t0), hi = lower(q.t, l.firstRequest, l.firstRequest + l.requests, view.t1 + 1);
        const k = W / (view.t1 - view.t0) / BIN;
        for (let i = lo; i < hi; i++) {
          if (!laneReqOK(x, i)) continue;
          const bi = Math.floor((q.t[i] - view.t0) * k);
          if (bi < 0 || bi >= nb) continue;
          if (cnt[bi]++ === 0) first[bi] = i;
        }
        for (let bi = 0; bi < nb; bi++) {
          const c = cnt[bi];
          if (!c) continue;
          const px = bi * BIN;
          if (c === 1) {
            const i = first[bi], f = q.flags[i];
            const cls = 'r m' + (f & 1 ? ' w' + (f & 2 ? '' : ' env') : '') + (f & 8 ? ' f' : '');
            if (f & 1) out.push(`<path class="${cls}" data-s="${row.si}" data-r="${i}" d="M${px + 2} ${y + 3}l4 ${LANE - 6}h-8z"/>`);
            else {
              const wpx = Math.max(3, Math.min(W - px, q.dur[i] * W / (view.t1 - view.t0)));
              out.push(`<rect class="${cls}" data-s="${row.si}" data-r="${i}" x="${px}" y="${y + 5}" width="${wpx.toFixed(1)}" height="${LANE - 10}"/>`);
            }
          } else {
            ragg += c;
            rpath += `M${px} ${y + 3}h${BIN}v${LANE - 6}h-${BIN}z`;
          }
        }
        if (ragg) out.push(`<path class="ragg" data-s="${row.si}" data-lane="${row.li}" data-n="${ragg}" d="${rpath}"><title>${ragg} requests in columns of more than one: click one to zoom in</title></path>`);
      }
      for (const i of x.anomaliesOf.get(row.li) || []) out.push(anomaly(x, i, W, y));
      if (M.diff) diffMarks(row.si, row.li, W, y, out);
    }
    svg.innerHTML = out.join('');
    $('labels').innerHTML = lab.join('');
    axis(W);
    ovWindow();
    $('z-range').textContent = fmtRel(view.t0) + ' … ' + fmtRel(view.t1) + ' (' + dur(view.t1 - view.t0) + ')';
    document.body.dataset.ready = '1';
  }

  function anomaly(x, i, W, y) {
    const a = x.s.anomalies[i], px = xOf(a.t, W);
    if (px < -6 || px > W + 6) return '';
    return `<path class="a k-${esc(a.kind)}" data-s="${x.si}" data-a="${i}" d="M${(px - 4).toFixed(1)} ${y}h8l-4 5z"><title>${esc(a.text)}</title></path>`;
  }

  function diffMarks(si, li, W, y, out) {
    for (const i of S[si].diffsOf.get(li) || []) {
      const d = M.diff.differences[i], p = si === 0 ? d.a : d.b;
      const px = xOf(p.t, W);
      if (px < -6 || px > W + 6) continue;
      out.push(`<path class="d${i === selDiff ? ' sel' : ''}" data-d="${i}" d="M${(px - 4).toFixed(1)} ${y + LANE}h8l-4-5z"><title>${esc(diffLine(d))}</title></path>`);
    }
  }

  function axis(W) {
    const span = view.t1 - view.t0, steps = [1, 2, 5, 10, 20, 50, 100, 200, 500, 1e3, 2e3, 5e3, 1e4, 2e4, 5e4, 1e5, 2e5, 5e5, 1e6, 2e6, 5e6, 1e7, 15e6, 3e7, 6e7, 12e7, 3e8, 6e8, 9e8, 18e8, 36e8, 72e8, 144e8, 288e8, 864e8];
    const want = span / Math.max(2, W / 110);
    const step = steps.find((s) => s >= want) || steps[steps.length - 1];
    const o = [];
    for (let t = Math.ceil(view.t0 / step) * step; t <= view.t1; t += step) {
      const px = xOf(t, W).toFixed(1);
      o.push(`<line x1="${px}" x2="${px}" y1="14" y2="22"/><text x="${px}" y="11" text-anchor="middle">${fmtRel(t)}</text>`);
    }
    const ax = $('ax'); ax.setAttribute('width', W); ax.innerHTML = o.join('');
  }

  // The overview: every event that passes the filters, over the whole
  // session, and the window in view.
  let ovBins = null;
  function overview() {
    const ov = $('ov'), W = Math.max(100, ov.clientWidth), n = Math.floor(W / 2);
    const bins = new Float64Array(n);
    for (const x of S) for (let li = 0; li < x.s.lanes.length; li++) {
      if (rowOf[x.si][li] < 0) continue;
      const l = x.s.lanes[li];
      for (let i = l.firstEvent; l.firstEvent >= 0 && i < l.firstEvent + l.events; i++) {
        if (!laneEventOK(x, i)) continue;
        bins[Math.min(n - 1, Math.floor(x.ev.t[i] / (SPAN * 1.02 + 1) * n))]++;
      }
    }
    let mx = 1; for (const v of bins) mx = Math.max(mx, v);
    const o = [];
    for (let i = 0; i < n; i++) if (bins[i]) { const h = 2 + 40 * Math.log1p(bins[i]) / Math.log1p(mx); o.push(`<rect class="bar" x="${i * 2}" y="${(44 - h).toFixed(1)}" width="2" height="${h.toFixed(1)}"/>`); }
    if (M.diff) for (const d of M.diff.differences) { const p = d.a || d.b; if (p) o.push(`<rect class="dm" x="${(p.t / (SPAN * 1.02 + 1) * W).toFixed(1)}" y="0" width="1.5" height="6"/>`); }
    o.push('<rect class="win" id="ovwin" x="0" y="0" width="0" height="45"/>');
    ov.innerHTML = o.join('');
    ovBins = bins;
    ovWindow();
  }
  function ovWindow() {
    const w = $('ovwin'); if (!w) return;
    const W = $('ov').clientWidth, full = SPAN * 1.02 + 1;
    const a = view.t0 / full * W, b = view.t1 / full * W;
    w.setAttribute('x', a.toFixed(1)); w.setAttribute('width', Math.max(2, b - a).toFixed(1));
  }

  // zoom keeps the time under px where it is.
  function zoom(f, px) {
    const W = width(), full = SPAN * 1.02 + 1;
    const at = view.t0 + (px === undefined ? W / 2 : px) / W * (view.t1 - view.t0);
    let span = Math.min(full, Math.max(20, (view.t1 - view.t0) * f));
    let t0 = at - (at - view.t0) * span / (view.t1 - view.t0);
    setView(t0, t0 + span);
  }
  function setView(t0, t1) {
    const full = SPAN * 1.02 + 1, span = Math.min(full, Math.max(20, t1 - t0));
    t0 = Math.max(-span * 0.02, Math.min(full - span, t0));
    view.t0 = t0; view.t1 = t0 + span;
    schedule();
  }

  // Details.
  const detail = $('detail');
  function dl(pairs) { return '<dl>' + pairs.filter((p) => p[1] !== undefined && p[1] !== '' && p[1] !== null).map(([k, v]) => `<dt>${esc(k)}</dt><dd>${v}</dd>`).join('') + '</dl>'; }
  function hexdump(b) {
    const o = [];
    for (let i = 0; i < b.length && i < 4096; i += 16) {
      const row = Array.from(b.subarray(i, i + 16));
      o.push(i.toString(16).padStart(6, '0') + '  ' + row.map((c) => c.toString(16).padStart(2, '0')).join(' ').padEnd(48) + '  ' + row.map((c) => (c >= 32 && c < 127 ? String.fromCharCode(c) : '.')).join(''));
    }
    return o.join('\n');
  }
  // asJSON shows the JSON the apiserver would have sent for a protobuf or
  // CBOR event or body (written by the report, apiserver/codec).
  async function asJSON(i) {
    const b = i > 0 ? await item(i - 1) : null;
    if (!b) return '';
    const t = new TextDecoder().decode(b);
    let p = t; try { p = JSON.stringify(JSON.parse(t), null, 2); } catch (e) { /* shown as it is */ }
    return `<h3>as JSON (what the apiserver sends a JSON client)</h3><pre class="json">${esc(p)}</pre>`;
  }
  function bytesView(b, cut) {
    if (!b) return '<p class="hint">The bytes are not in this report (past its budget of embedded bytes). <code>wtrace events --data</code> prints them.</p>';
    const t = text(b);
    let h = '';
    if (t !== null) {
      h += `<h3>bytes${cut ? ' (the first ' + b.length + ')' : ''}</h3><pre class="raw" id="bytes">${esc(t)}</pre>`;
      if (/^\s*[{[]/.test(t)) { try { h += `<h3>as JSON</h3><pre class="json">${esc(JSON.stringify(JSON.parse(t), null, 2))}</pre>`; } catch (e) { /* not whole JSON */ } }
    } else h += `<h3>bytes (binary: protobuf or CBOR)${cut ? ' (the first ' + b.length + ')' : ''}</h3><pre class="raw hex" id="bytes">${esc(hexdump(b))}</pre>`;
    return h;
  }
  function headers(hs) {
    if (!hs || !hs.length) return '';
    return '<pre>' + hs.map((h) => esc(h.name) + ': ' + (h.redacted ? `<i>(redacted, ${h.length} bytes)</i>` : esc(h.value))).join('\n') + '</pre>';
  }
  async function exchangeHTML(x, ex, bodies) {
    const it = x.details.get(ex);
    if (it === undefined) return `<p class="hint">The details of exchange ${ex} were left out of this report (its budget); <code>wtrace inspect --json</code> shows them.</p>`;
    const d = await json(it);
    const e = d.exchange, r = e.request, p = e.response;
    let h = `<h3>exchange ${e.exchange}${d.conn ? ' on ' + esc(d.conn.conn) : ''}</h3>`;
    // A run file's response note says how the replay answered (formats.ReplayAnswer).
    const notes = e.end && e.end.note ? e.end.note.split('; ') : [], how = notes.find((n) => n.startsWith('replay answer: '));
    const endNote = notes.filter((n) => n !== how).join('; ');
    h += dl([['request', r.missing ? '<i>not captured</i>' : esc(r.method + ' ' + r.target + ' ' + (r.proto || ''))], ['at', r.time ? esc(r.time) : ''],
      ['response', p ? esc((p.status || '?') + ' ' + (p.reason || '') + ' ' + (p.proto || '')) : '<i>none captured</i>'], ['framing', p ? esc(p.framing + (p.encoding ? ', ' + p.encoding : '') + (p.eventFormat ? ', events ' + p.eventFormat : '')) : ''],
      ['ended', e.end ? esc(e.end.status + ' at ' + e.end.time + (endNote ? ' (' + endNote + ')' : '')) : '<i>the file ended first</i>'],
      ['events', e.events ? esc(e.events + ' ' + JSON.stringify(e.eventTypes || {})) : ''], ['body', esc(e.bodyBytes + ' bytes, ' + e.chunks + ' chunks')],
      ['longest silence', e.longestSilence ? esc(e.longestSilence.seconds.toFixed(3) + ' s, until ' + e.longestSilence.until) : ''],
      ['answered', x.s.meta && x.s.meta.source === 'replay' ? (how ? esc(how.slice('replay answer: '.length)) + ' <small>(by the replay: a session of replay --out)</small>' : 'by the replay (a session of replay --out)') : (x.s.meta ? 'as recorded (' + esc(x.s.meta.source || '?') + ')' : '')]]);
    for (const end of [e.requestEnd, e.end]) if (end && end.redactions) h += '<p>redacted: ' + end.redactions.map((rd) => esc(`${rd.count} ${rd.reason} of ${rd.object || '?'} (${rd.fields || ''}), ${rd.bytes} bytes`)).join('; ') + '</p>';
    if (e.errors) h += '<p>ERROR events: ' + e.errors.map((er) => esc(`#${er.seq} ${er.code} ${er.reason}`)).join(', ') + '</p>';
    h += '<h3>request headers</h3>' + headers(r.headers);
    if (p) h += '<h3>response headers</h3>' + headers(p.headers);
    if (bodies) for (const [what, ref] of [['request body', d.requestBody], ['response body', d.responseBody]]) {
      if (!ref) continue;
      h += `<h3>${what} (${ref.size} bytes${ref.type ? ', ' + esc(ref.type) : ''}${ref.decoded ? ', gunzipped' : ''})</h3>`;
      h += ref.item < 0 ? '<p class="hint">left out of this report (its budget of embedded bytes)</p>' : bytesView(await item(ref.item), ref.shown < ref.size).replace(/<h3>[^<]*<\/h3>/, '').replace(/id="bytes"/g, '') + (ref.json ? await asJSON(ref.json) : '');
    }
    return h;
  }
  function select(el) {
    if (selected) selected.classList.remove('sel-mark');
    selected = el; if (el) el.classList.add('sel-mark');
  }
  // paired says which name diff gave an object whose name the apiserver
  // generated, and its name in the other run.
  function paired(si, nsName) {
    if (!M.diff || !M.diff.pairing) return '';
    const name = nsName.includes('/') ? nsName.split('/')[1] : nsName;
    const p = M.diff.pairing.find((p) => (si === 0 ? p.a : p.b) === name);
    if (!p) return '';
    return esc(`${p.object.name} (A: ${p.a || '-'}, B: ${p.b || '-'})`);
  }
  async function showEvent(si, i) {
    const x = S[si], e = x.ev;
    let li = x.s.lanes.findIndex((l) => l.firstEvent >= 0 && i >= l.firstEvent && i < l.firstEvent + l.events);
    const l = x.s.lanes[li];
    const f = e.flags[i];
    let h = `<h2>${TYPES[e.type[i]]} ${e.name[i] >= 0 ? esc(x.s.names[e.name[i]]) : ''}</h2>`;
    h += dl([['event', `${e.seq[i]} of exchange ${l.exchange}`], ['captured', esc(fmtAbs(x, e.t[i])) + ' (' + fmtRel(e.t[i]) + ')'], ['watch', esc(l.title)], ['client', esc(l.client)],
      ['change by', f & 1 ? 'the client under test (a write it made)' : (e.type[i] <= 2 ? 'the environment' : '')], ['redacted', f & 2 ? 'values replaced by placeholders' : ''],
      ['paired as', e.name[i] >= 0 ? paired(si, x.s.names[e.name[i]]) : '']]);
    detail.innerHTML = h + '<p class="hint">loading…</p>';
    const b = e.item[i] > 0 ? await item(e.item[i] - 1) : null;
    detail.innerHTML = h + await asJSON(e.json[i]) + bytesView(b, f & 4) + await exchangeHTML(x, l.exchange, false);
    detail.dataset.event = si + ':' + i;
    detail.dataset.exchange = String(l.exchange);
    detail.dataset.seq = String(e.seq[i]);
  }
  async function showRequest(si, i) {
    const x = S[si], q = x.rq, f = q.flags[i];
    detail.dataset.exchange = String(q.ex[i]);
    let h = `<h2>${esc(x.s.methods[q.method[i]])} ${q.status[i] || ''}</h2>`;
    h += dl([['at', esc(fmtAbs(x, q.t[i])) + ' (' + fmtRel(q.t[i]) + ')'], ['took', dur(q.dur[i])], ['write', f & 1 ? (f & 2 ? 'by the client under test' : 'by the environment (another client)') : ''], ['failed', f & 8 ? 'yes' : '']]);
    detail.innerHTML = h + '<p class="hint">loading…</p>';
    detail.innerHTML = h + await exchangeHTML(x, q.ex[i], true);
    detail.dataset.request = si + ':' + i;
  }
  async function showAnomaly(si, i) {
    const x = S[si], a = x.s.anomalies[i];
    let h = `<h2>${esc(a.kind)}</h2>` + dl([['at', esc(fmtAbs(x, a.t)) + ' (' + fmtRel(a.t) + ')'], ['what', esc(a.text)]]);
    detail.innerHTML = h + (a.exchange !== undefined ? await exchangeHTML(x, a.exchange, false) : '');
  }

  // Diffs.
  function diffLine(d) {
    let s = (d.category === 'state' ? 'end state' : d.category + (d.what ? ' ' + d.what : '')) + ' ' + d.kind;
    if (d.detail) s += ': ' + d.detail;
    return s;
  }
  function place(label, p, x) {
    if (!p) return `<p>${label}: <i>absent</i></p>`;
    return `<p>${label}: exchange ${p.exchange}${p.seq !== undefined ? ' event ' + p.seq : ''} at ${esc(fmtRel(p.t))} <span class="link" data-goto="${x.si}:${p.lane}:${p.t}">show</span>${p.status ? ', status ' + p.status : ''}${p.name ? ', ' + esc(p.name) : ''}<br><small>${esc(p.request || '')}</small></p>`;
  }
  function sideBySide(u) {
    const L = [], R = [];
    const o = ['<div class="sbs">'];
    const flush = () => { const n = Math.max(L.length, R.length); for (let i = 0; i < n; i++) o.push(`<div class="${L[i] !== undefined ? 'del' : ''}">${esc(L[i] ?? '')}</div><div class="${R[i] !== undefined ? 'add' : ''}">${esc(R[i] ?? '')}</div>`); L.length = 0; R.length = 0; };
    for (const line of u.split('\n')) {
      if (line.startsWith('---')) { flush(); o.push(`<div class="hd">${esc(line.slice(4))}</div>`); continue; }
      if (line.startsWith('+++')) { o.push(`<div class="hd">${esc(line.slice(4))}</div>`); continue; }
      if (line.startsWith('@@')) { flush(); o.push(`<div class="hunk">${esc(line)}</div>`); continue; }
      if (line.startsWith('-')) { L.push(line.slice(1)); continue; }
      if (line.startsWith('+')) { R.push(line.slice(1)); continue; }
      flush(); const t = esc(line.slice(1)); o.push(`<div>${t}</div><div>${t}</div>`);
    }
    flush(); o.push('</div>');
    return o.join('');
  }
  async function showDiff(i) {
    const d = M.diff.differences[i];
    selDiff = i;
    document.querySelectorAll('#difflist li.sel').forEach((li) => li.classList.remove('sel'));
    const li = document.querySelector(`#difflist li[data-d="${i}"]`); if (li) li.classList.add('sel');
    let h = `<h2>${esc(M.diff.groups[d.group].subject)}</h2><p>${esc(diffLine(d))}${d.stream ? '<br>' + esc(d.stream) : ''}${d.count ? '<br>' + d.count + ' events' : ''}${d.delta ? '<br>moved ' + fmtRel(d.delta / 1e3) : ''}</p>`;
    h += place('A', d.a, S[0]) + place('B', d.b, S[1]);
    if (d.diff >= 0) h += '<h3>normalized documents, side by side (A left, B right)</h3>' + sideBySide(new TextDecoder().decode(await item(d.diff)));
    for (const [lab, p, x] of [['A', d.a, S[0]], ['B', d.b, S[1]]]) {
      if (!p || p.seq === undefined || p.lane < 0) continue;
      const l = x.s.lanes[p.lane];
      for (let j = l.firstEvent; l.firstEvent >= 0 && j < l.firstEvent + l.events; j++) if (x.ev.seq[j] === p.seq) {
        const b = x.ev.item[j] > 0 ? await item(x.ev.item[j] - 1) : null;
        h += `<h3>the event in ${lab}</h3>` + bytesView(b, x.ev.flags[j] & 4).replace(/<h3>[^<]*<\/h3>/g, '').replace(/id="bytes"/g, '') + await asJSON(x.ev.json[j]);
        break;
      }
    }
    detail.innerHTML = h;
    detail.dataset.diff = String(i);
    const ts = [d.a && d.a.t, d.b && d.b.t].filter((t) => t !== undefined && t !== null);
    if (ts.length && (Math.min(...ts) < view.t0 || Math.max(...ts) > view.t1)) { const lo = Math.min(...ts), hi = Math.max(...ts), pad = Math.max(1e5, (hi - lo) * 0.3); setView(lo - pad, hi + pad); } else schedule();
  }
  function goto(si, li, t) {
    if (li >= 0 && rowOf[si][li] >= 0) $('rows').scrollTop = Math.max(0, rowOf[si][li] * LANE - $('rows').clientHeight / 2);
    const span = view.t1 - view.t0;
    if (t < view.t0 || t > view.t1) setView(t - span / 2, t + span / 2); else schedule();
  }

  // Headline, verdict, summary, the differences' list.
  function headline() {
    $('title').textContent = M.title;
    const parts = S.map((x) => {
      const st = x.s.stats;
      return (x.s.label ? x.s.label + ': ' : '') + `${st.conns} connections, ${st.exchanges} exchanges, ${st.events} events, ${x.s.anomalies.length} anomalies; ${dur(x.s.span)} from ${x.s.start || '?'}; client under test: ${x.s.clientRule}`;
    });
    $('headline').innerHTML = parts.map(esc).join('<br>');
    const ft = $('f-types');
    ft.innerHTML = TYPES.map((t, i) => `<label><input type="checkbox" data-type="${i}" checked><span class="sw" style="background:${COLORS[i]}"></span>${t}</label>`).join('') +
      '<label title="writes of the client under test (filled) and of others (hollow)"><span class="sw" style="background:#e08a00"></span>write</label><label title="anomalies"><span class="sw" style="background:#b3261e"></span>anomaly</label>' + (M.diff ? '<label><span class="sw" style="background:#ff1744"></span>difference</label>' : '');
    if (M.diff) {
      const D = M.diff, v = $('verdict');
      v.hidden = false; v.className = D.same ? 'same' : 'differ';
      const cats = [['end state', 'state'], ['writes', 'writes'], ['events', 'events'], ['streams', 'streams'], ['exchanges', 'exchanges']];
      const catOf = { 'state': 'state', 'writes': 'write', 'events': 'event', 'streams': 'stream', 'exchanges': 'exchange' };
      const cols = ['compared', 'missing', 'extra', 'reordered', 'changed', 'status', 'resourceVersion', 'timing', 'bytesOnly', 'attempts'];
      let h = `${esc(S[0].s.name)} and ${esc(S[1].s.name)} ${D.same ? 'are the same ✓' : 'differ ✗'} <small>(verdict: ${esc((D.verdict || []).join(', '))})</small>`;
      h += '<table id="counts"><tr><th></th>' + cols.map((c) => `<th>${c}</th>`).join('') + '</tr>' + cats.map(([name, k]) => `<tr data-cat="${catOf[k]}"><th>${name}${(D.verdict || []).includes(catOf[k]) ? '' : ' <small>(not in the verdict)</small>'}</th>` + cols.map((c) => `<td class="n">${D.summary[k][c] || ''}</td>`).join('') + '</tr>').join('') + '</table>';
      v.innerHTML = h;
      const list = $('difflist'), o = [];
      D.groups.forEach((g) => {
        o.push(`<li class="subj">${esc(g.subject)}</li>`);
        for (let i = g.first; i < g.first + g.n; i++) {
          const d = D.differences[i];
          o.push(`<li class="diff-item" data-d="${i}">${esc(diffLine(d))}${d.a ? ' <small>A @' + fmtRel(d.a.t) + '</small>' : ''}${d.b ? ' <small>B @' + fmtRel(d.b.t) + '</small>' : ''}</li>`);
        }
      });
      if (D.omitted) o.push(`<li class="subj">… ${D.omitted} more differences counted, not listed</li>`);
      list.innerHTML = o.join('');
      $('diffs').hidden = false;
      let extra = '';
      if (D.pairing && D.pairing.length) extra += '<h3>generated names paired</h3><table><tr><th>object</th><th>A</th><th>B</th></tr>' + D.pairing.map((p) => `<tr><td>${esc(p.object.resource + ' ' + (p.object.namespace ? p.object.namespace + '/' : '') + p.object.name)}</td><td>${esc(p.a || '-')}</td><td>${esc(p.b || '-')}</td></tr>`).join('') + '</table>';
      if (D.states && D.states.length) extra += '<h3>end state</h3><table><tr><th></th><th>A</th><th>B</th><th>object</th></tr>' + D.states.filter((s, i) => !s.same || i < 200).map((s) => `<tr><td>${s.same ? '=' : '<b class="warn">≠</b>'}</td><td>${esc(s.a ? s.a.state : '-')}</td><td>${esc(s.b ? s.b.state : '-')}</td><td>${esc(s.subject)}</td></tr>`).join('') + '</table>';
      if (D.warnings) extra += '<h3>warnings</h3>' + D.warnings.map((w) => `<p class="warn">${esc(w)}</p>`).join('');
      $('diffs').insertAdjacentHTML('beforeend', extra);
    }
    const sum = [];
    for (const x of S) {
      const st = x.s.stats;
      let h = `<h2>${x.s.label ? esc(x.s.label) + ': ' : ''}${esc(x.s.name)}</h2><div class="cols">`;
      h += '<div><h3>exchanges by verb and status</h3><table>' + st.byVerb.map(([m, s, n]) => `<tr><td>${esc(m)}</td><td>${s || '—'}</td><td class="n">${n}</td></tr>`).join('') + `</table><p>${st.conns} connections; writes: ${st.writes} (${st.testedWrites} by the client under test); events caused by them: ${st.caused}</p></div>`;
      h += '<div><h3>events per resource</h3><table><tr><th></th>' + TYPES.map((t) => `<th>${t}</th>`).join('') + '<th>all</th></tr>' + st.byResource.map((r) => `<tr><td>${esc(r.title)}</td>` + TYPES.map((t) => `<td class="n">${r.types[t] || ''}</td>`).join('') + `<td class="n">${r.n}</td></tr>`).join('') + '</table></div>';
      h += '<div><h3>busiest seconds</h3><table>' + st.busiest.map(([t, n]) => `<tr><td><span class="link" data-goto="${x.si}:-1:${t + 5e5}" data-span="3e6">${esc(fmtAbs(x, t).slice(11, 19))} (${fmtRel(t)})</span></td><td class="n">${n} events</td></tr>`).join('') + '</table></div>';
      const an = x.s.anomalies;
      h += `<div><h3>anomalies (${an.length})</h3><table>` + an.slice(0, 300).map((a, i) => `<tr><td><span class="link" data-anomaly="${x.si}:${i}">${fmtRel(a.t)}</span></td><td>${esc(a.kind)}</td><td>${esc(a.text.slice(0, 160))}</td></tr>`).join('') + (an.length > 300 || x.s.anomaliesLeft ? `<tr><td colspan="3">… ${an.length - 300 + (x.s.anomaliesLeft || 0)} more (wtrace inspect lists every one)</td></tr>` : '') + '</table></div>';
      if (x.s.problems) h += '<div><h3>problems</h3>' + x.s.problems.map((p) => `<p class="warn">${esc(p)}</p>`).join('') + '</div>';
      sum.push(h + '</div>');
    }
    $('summary').innerHTML = sum.join('');
    $('foot').textContent = `${M.tool ? 'written by ' + M.tool + '; ' : ''}${(M.embedded / 1048576).toFixed(1)} MiB of events and bodies embedded` + (M.left ? `, ${(M.left / 1048576).toFixed(1)} MiB left out (the budget: each exchange keeps its share, the marks of the rest show their metadata)` : '') + `; each cut at ${M.maxBody >> 10} KiB; a watch silent for ${M.stallSecs} s is marked as stalled.`;
  }

  // Events.
  function bind() {
    const marks = $('marks'), rowsEl = $('rows');
    rowsEl.addEventListener('scroll', schedule);
    window.addEventListener('resize', () => { overview(); schedule(); });
    let drag = null;
    marks.addEventListener('mousedown', (ev) => { if (ev.button === 0) { drag = { x: ev.clientX, t0: view.t0, t1: view.t1, moved: false }; } });
    window.addEventListener('mousemove', (ev) => {
      if (!drag) return;
      const dx = ev.clientX - drag.x;
      if (Math.abs(dx) > 3) { drag.moved = true; marks.classList.add('panning'); }
      if (drag.moved) { const dt = dx / width() * (drag.t1 - drag.t0); setView(drag.t0 - dt, drag.t1 - dt); }
    });
    window.addEventListener('mouseup', () => { setTimeout(() => { drag = null; marks.classList.remove('panning'); }, 0); });
    marks.addEventListener('wheel', (ev) => {
      ev.preventDefault();
      const r = marks.getBoundingClientRect();
      if (ev.shiftKey || Math.abs(ev.deltaX) > Math.abs(ev.deltaY)) { const dt = (ev.deltaX || ev.deltaY) / width() * (view.t1 - view.t0); setView(view.t0 + dt, view.t1 + dt); return; }
      zoom(Math.pow(1.0015, ev.deltaY), ev.clientX - r.left);
    }, { passive: false });
    marks.addEventListener('click', (ev) => {
      if (drag && drag.moved) return;
      const el = ev.target.closest('[data-n]') || ev.target, d = el.dataset;
      if (d.e !== undefined) { select(el); showEvent(+d.s, +d.e); }
      else if (d.r !== undefined) { select(el); showRequest(+d.s, +d.r); }
      else if (d.a !== undefined) { select(el); showAnomaly(+d.s, +d.a); }
      else if (d.d !== undefined) showDiff(+d.d);
      else if (d.n !== undefined) { const W = width(), k = (view.t1 - view.t0) / W, px = ev.clientX - marks.getBoundingClientRect().left; const t = view.t0 + (Math.floor(px / BIN) + 0.5) * BIN * k; setView(t - 40 * BIN * k, t + 40 * BIN * k); }
    });
    $('labels').addEventListener('click', async (ev) => {
      const el = ev.target.closest('.row'); if (!el) return;
      if (el.dataset.group !== undefined) { const t = el.dataset.group; folded.has(t) ? folded.delete(t) : folded.add(t); layout(); return; }
      if (el.dataset.lane !== undefined) {
        const x = S[+el.dataset.s], l = x.s.lanes[+el.dataset.lane];
        if (l.kind === 'watch') detail.innerHTML = `<h2>${esc(l.label)}</h2>` + dl([['client', esc(l.client)], ['open', fmtRel(l.from) + ' … ' + fmtRel(l.to)], ['events', l.events]]) + await exchangeHTML(x, l.exchange, false);
        else detail.innerHTML = `<h2>${esc(l.label)}</h2><p>${l.requests} requests; click one.</p>`;
      }
    });
    document.addEventListener('click', (ev) => {
      const g = ev.target.closest('[data-goto]');
      if (g) { const [si, li, t] = g.dataset.goto.split(':').map(Number); if (g.dataset.span) setView(t - g.dataset.span / 2, t + g.dataset.span / 2); goto(si, li, t); return; }
      const a = ev.target.closest('[data-anomaly]');
      if (a) { const [si, i] = a.dataset.anomaly.split(':').map(Number); const an = S[si].s.anomalies[i]; goto(si, an.lane, an.t); showAnomaly(si, i); return; }
      const li = ev.target.closest('#difflist li.diff-item');
      if (li) showDiff(+li.dataset.d);
    });
    const ov = $('ov');
    let ovDrag = null;
    const ovT = (ev) => (ev.clientX - ov.getBoundingClientRect().left) / ov.clientWidth * (SPAN * 1.02 + 1);
    ov.addEventListener('mousedown', (ev) => { ovDrag = ovT(ev); });
    ov.addEventListener('mousemove', (ev) => { if (ovDrag !== null) { const t = ovT(ev); if (Math.abs(t - ovDrag) > 0) setView(Math.min(t, ovDrag), Math.max(t, ovDrag)); } });
    window.addEventListener('mouseup', (ev) => { if (ovDrag !== null && Math.abs(ovT(ev) - ovDrag) < (SPAN / 500)) { const span = view.t1 - view.t0; setView(ovDrag - span / 2, ovDrag + span / 2); } ovDrag = null; });
    $('z-in').onclick = () => zoom(1 / 2); $('z-out').onclick = () => zoom(2); $('z-fit').onclick = () => setView(0, SPAN * 1.02 + 1);
    document.addEventListener('keydown', (ev) => {
      if (ev.target.tagName === 'INPUT') return;
      if (ev.key === '+' || ev.key === '=') zoom(1 / 2); else if (ev.key === '-') zoom(2); else if (ev.key === '0') setView(0, SPAN * 1.02 + 1);
      else if (ev.key === 'ArrowLeft') setView(view.t0 - (view.t1 - view.t0) / 4, view.t1 - (view.t1 - view.t0) / 4);
      else if (ev.key === 'ArrowRight') setView(view.t0 + (view.t1 - view.t0) / 4, view.t1 + (view.t1 - view.t0) / 4);
    });
    let ft = null;
    for (const k of ['resource', 'namespace', 'name', 'client']) $('f-' + k).addEventListener('input', (ev) => { filt[k] = ev.target.value.trim(); clearTimeout(ft); ft = setTimeout(layout, 120); });
    $('f-types').addEventListener('change', (ev) => { const t = +ev.target.dataset.type; ev.target.checked ? filt.types.add(t) : filt.types.delete(t); layout(); });
  }

  // For tests and scripts: the view, and what is drawn.
  window.wtraceReport = {
    model: M,
    view: () => ({ t0: view.t0, t1: view.t1 }),
    setView: (t0, t1) => { setView(t0, t1); },
    zoom: (f) => zoom(f),
    render: () => render(),
    // find is the index of event seq of exchange ex in session si (-1: none).
    find: (si, ex, seq) => {
      const x = S[si], l = x.s.lanes.find((l) => l.kind === 'watch' && l.exchange === ex);
      if (!l) return -1;
      for (let i = l.firstEvent; l.firstEvent >= 0 && i < l.firstEvent + l.events; i++) if (x.ev.seq[i] === seq) return i;
      return -1;
    },
    drawn: () => { let n = 0; document.querySelectorAll('#marks .m[data-e]').forEach(() => n++); document.querySelectorAll('#marks .agg').forEach((a) => { n += +a.dataset.n; }); return n; },
  };
  headline();
  bind();
  layout();
})();
