// The layout checks of layout.py, run in the page: (uid, range, unitless) → the problems found, one line each.
async ({ uid, range, unitless }) => {
  const problems = [];
  const say = (what, e) => problems.push(`${what}: ${(e && (e.closest('[data-panel]')?.querySelector('h2')?.textContent
    || e.closest('[data-card]')?.dataset.card || e.textContent)) || ''}`.slice(0, 240));
  const R = (e) => e.getBoundingClientRect();
  const shown = (e) => { const b = R(e); return b.width > 0 && b.height > 0 && !e.closest('[hidden], #tooltip'); };
  const scrolls = (p) => { const s = getComputedStyle(p); return /(auto|scroll)/.test(s.overflowX + s.overflowY); };
  const scrollerOf = (e, stop) => { for (let p = e.parentElement; p && p !== stop; p = p.parentElement) if (scrolls(p)) return p;
    return null; };
  const inside = (a, b, tol = 1) => a.left >= b.left - tol && a.right <= b.right + tol && a.top >= b.top - tol
    && a.bottom <= b.bottom + tol;

  // the page itself never scrolls sideways
  if (document.documentElement.scrollWidth > innerWidth + 1) say(`the page is ${document.documentElement.scrollWidth}px wide`);

  // 1. every element stays inside its panel, card or tile (or inside a box that scrolls, itself inside)
  for (const box of document.querySelectorAll('.panel, .card, .tile, header')) {
    if (!shown(box)) continue;
    const b = R(box);
    for (const e of box.querySelectorAll('*')) {
      if (!shown(e) || scrollerOf(e, box) || scrolls(box)) continue;  // a box that scrolls holds what is wider
      if (!inside(R(e), b)) { say(`<${e.tagName.toLowerCase()}> "${(e.textContent || '').slice(0, 30)}" overflows`, box); break; }
    }
  }
  // 2. SVG text inside its chart (an SVG clips what is outside)
  for (const t of document.querySelectorAll('svg text')) {
    if (shown(t) && !inside(R(t), R(t.ownerSVGElement))) say(`label "${t.textContent}" is clipped`, t);
  }
  // 3. no two text boxes overlap (each text node's own box, where it can be seen)
  const boxes = [];
  const walk = document.createTreeWalker(document.body, NodeFilter.SHOW_TEXT);
  for (let n = walk.nextNode(); n; n = walk.nextNode()) {
    const e = n.parentElement;
    if (!n.textContent.trim() || !e || !shown(e) || e.closest('script, style, option, select')) continue;
    const range = document.createRange();
    range.selectNodeContents(n);
    for (const r of range.getClientRects()) {
      if (r.width < 1 || r.height < 1) continue;
      const sc = scrollerOf(e, null);
      if (sc && sc !== document.documentElement && !inside(r, R(sc), 0)) continue;  // scrolled out of sight
      boxes.push({ r, n, text: n.textContent.trim().slice(0, 40) });
    }
  }
  boxes.sort((a, b) => a.r.top - b.r.top);
  for (let i = 0; i < boxes.length; i++) {
    for (let j = i + 1; j < boxes.length && boxes[j].r.top < boxes[i].r.bottom - 1; j++) {
      const a = boxes[i].r, c = boxes[j].r;
      if (boxes[i].n === boxes[j].n) continue;
      const w = Math.min(a.right, c.right) - Math.max(a.left, c.left), h = Math.min(a.bottom, c.bottom) - Math.max(a.top, c.top);
      if (w > 1 && h > 1) say(`"${boxes[i].text}" overlaps "${boxes[j].text}"`, boxes[i].n.parentElement);
    }
  }
  // 4. words a reader should never meet
  const text = document.body.innerText;
  for (const [re, what] of [[/(?<![\w-])\d(\.\d+)?e[+-]\d+(?![\w-])/, 'a number in scientific notation'], [/(?<![\d.,])\b1 (calls|tokens|misses|attempts)\b/, 'a singular count in the plural'],
    [/\bNaN\b|\bundefined\b|\bInfinity\b/, 'a broken number'], [/\[object /, 'an object printed']]) {
    const m = text.match(re);
    if (m) say(`${what}: "${text.slice(Math.max(m.index - 20, 0), m.index + 20)}"`);
  }
  // 5. numbers in tables carry their unit
  for (const td of document.querySelectorAll('td.num')) {
    const t = td.textContent.trim();
    if (!shown(td) || t === '–' || t === '') continue;
    const table = td.closest('table'), col = [...td.parentElement.children].indexOf(td);
    const head = table.querySelector('tr')?.children[col];
    const name = head && head.tagName === 'TH' ? head.textContent.trim() : '';
    if (!unitless.includes(name) && !/[a-zA-Z$%×]/.test(t)) say(`"${t}" in column "${name}" has no unit`, td);
  }
  // 6. filter labels sit by their boxes
  for (const l of document.querySelectorAll('label')) {
    const box = l.querySelector('input, select, .segmented');
    const span = [...l.childNodes].find((c) => c.textContent.trim() && c !== box);
    if (!box || !span || !shown(l)) { if (!box && shown(l)) say(`label "${l.textContent}" has no box`); continue; }
    const range = document.createRange();
    range.selectNodeContents(span);
    const a = range.getBoundingClientRect(), b = R(box);
    if (Math.abs((a.top + a.bottom) / 2 - (b.top + b.bottom) / 2) > 4 || b.left - a.right > 12 || b.left < a.right - 1) {
      say(`label "${span.textContent.trim()}" is away from its box`);
    }
  }
  // 7. charts: axes from the data's meaning, legends for every series
  const parse = (s) => { const m = s.replace(/,/g, '').match(/-?[\d.]+/); if (!m) return NaN;
    const k = /\d(k|M|B)\b/.exec(s); return Number(m[0]) * (k ? { k: 1e3, M: 1e6, B: 1e9 }[k[1]] : 1); };
  const now = Date.now();
  for (const p of document.querySelectorAll('.panel[data-type=timeseries]')) {
    const svg = p.querySelector('svg');
    if (!svg) continue;
    const title = p.querySelector('h2').textContent;
    const frame = await (await fetch('/api/panel', { method: 'POST', headers: { 'Content-Type': 'application/json' },
      body: JSON.stringify({ uid, panel: Number(p.dataset.panel), from: now / 1000 - range, to: now / 1000 }) })).json();
    const num = frame.columns.map((c, i) => /Int|Float|Decimal/.test(c.type) ? i : -1).filter((i) => i >= 0);
    const values = frame.rows.flatMap((r) => num.map((i) => r[i])).filter((v) => v !== null).map(Number);
    const ticks = [...svg.querySelectorAll('text[data-axis=y]')].map((t) => t.textContent);
    if (values.length && values.every((v) => Number.isInteger(v))) {
      for (const t of ticks) if (!Number.isInteger(parse(t))) problems.push(`${title}: count tick "${t}" is not a whole number`);
    }
    if (p.dataset.unit === 'percentunit' && values.every((v) => v <= 1)) {
      for (const t of ticks) if (parse(t) > 100) problems.push(`${title}: percent tick "${t}" above 100%`);
    }
    const xs = [...svg.querySelectorAll('text[data-axis=x]')];
    const labels = xs.map((t) => t.textContent);
    if (new Set(labels).size !== labels.length) problems.push(`${title}: repeated time labels ${labels}`);
    const ts = xs.map((t) => Number(t.dataset.t));
    const span = range * 1000, from = now - span;
    if (!ts.length || Math.min(...ts) - from > span / 3 || now - Math.max(...ts) > span / 3) {
      problems.push(`${title}: the time axis does not span the selected range (${labels})`);
    }
    const legend = p.querySelector('.legend');
    const drawn = svg.querySelectorAll('path.series').length;
    const listed = legend.querySelectorAll('span[data-name]').length + Number(legend.querySelector('.more')?.dataset.more || 0);
    if (listed !== drawn) problems.push(`${title}: the legend accounts for ${listed} of ${drawn} series`);
    const keyed = frame.columns.some((c, i) => !num.includes(i) && !/DateTime|Date/.test(c.type));
    const names = [...legend.querySelectorAll('span[data-name]')].map((s) => s.dataset.name);
    for (const c of frame.columns) {
      if (keyed && names.includes(c.name)) problems.push(`${title}: a series named after the column "${c.name}"`);
    }
  }
  // 8. colours that mean something: an error rate is green only while it is low
  for (const p of document.querySelectorAll('.panel[data-type=stat]')) {
    const title = p.querySelector('h2').textContent, s = p.querySelector('.stat');
    if (s && /error rate/i.test(title) && parse(s.textContent) >= 1 && getComputedStyle(s).color === 'rgb(115, 191, 105)') {
      problems.push(`${title}: ${s.textContent} shown green`);
    }
  }
  return problems;
}
