// Draws a pplab scene (pplab/scene/panels.py) on a <canvas>: timelines, bars and line charts.
// The kernel sends plain data; drawing here takes a few ms, so a slider redraws at once
// and no matplotlib is needed (the same file runs in JupyterLab and JupyterLite).
const FONT = "11px sans-serif";
const SMALL = "10px sans-serif";
const LEFT = 70, RIGHT = 190, HEAD = 40, FOOT = 36, ROW = 20;

function panelHeight(p) {
  if (p.type === "timeline") return HEAD + Math.max(p.ranks, 1) * ROW + FOOT;
  return p.height || 240;
}

function niceStep(span, n) {
  const raw = span / Math.max(n, 1), mag = Math.pow(10, Math.floor(Math.log10(raw)));
  const f = raw / mag;
  return (f < 1.5 ? 1 : f < 3 ? 2 : f < 7 ? 5 : 10) * mag;
}

function ticks(lo, hi, n) {
  if (!(hi > lo)) return [lo];
  const st = niceStep(hi - lo, n), out = [];
  for (let v = Math.ceil(lo / st) * st; v <= hi + st * 1e-9; v += st) out.push(+v.toFixed(10));
  return out;
}

function fmtNum(v) {
  const a = Math.abs(v);
  if (a !== 0 && (a >= 1e5 || a < 1e-3)) return v.toExponential(1);
  return String(+v.toPrecision(4));
}

function titles(ctx, p, x0, y0) {
  ctx.fillStyle = "#000"; ctx.font = "bold " + FONT; ctx.textAlign = "left";
  ctx.textBaseline = "alphabetic";
  ctx.fillText(p.title || "", x0 + 8, y0 + 15);
  ctx.font = FONT;
  if (p.subtitle) ctx.fillText(p.subtitle, x0 + 8, y0 + 30);
}

function legend(ctx, items, x, y) {
  ctx.font = SMALL; ctx.textAlign = "left"; ctx.textBaseline = "middle";
  items.forEach(([name, colour, hatch], i) => {
    const yy = y + 8 + i * 16;
    ctx.fillStyle = colour; ctx.fillRect(x, yy - 5, 12, 10);
    if (hatch) { ctx.strokeStyle = "#c8c8c8"; ctx.strokeRect(x, yy - 5, 12, 10); }
    ctx.fillStyle = "#000"; ctx.fillText(name, x + 17, yy);
  });
}

// Centred labels along one axis, left to right; counts those that would touch the one before
// (the browser tests require none: a crowded axis must thin its labels).
function labelRow(ctx, stats) {
  let right = -Infinity;
  return (text, x, y) => {
    const half = ctx.measureText(text).width / 2;
    if (x - half < right + 2) stats.overlaps++;
    right = x + half;
    ctx.fillText(text, x, y);
  };
}

function xAxis(ctx, x0, y, w, lo, hi, sx, label, fmt, stats) {
  ctx.strokeStyle = "#000"; ctx.lineWidth = 1;
  ctx.beginPath(); ctx.moveTo(x0, y + 0.5); ctx.lineTo(x0 + w, y + 0.5); ctx.stroke();
  ctx.fillStyle = "#000"; ctx.font = SMALL; ctx.textAlign = "center"; ctx.textBaseline = "top";
  const put = labelRow(ctx, stats);
  for (const t of ticks(lo, hi, Math.max(2, Math.floor(w / 80)))) {
    const x = sx(t);
    ctx.beginPath(); ctx.moveTo(x, y); ctx.lineTo(x, y + 4); ctx.stroke();
    put((fmt || fmtNum)(t), x, y + 6);
  }
  ctx.font = FONT; ctx.fillText(label || "", x0 + w / 2, y + 20);
}

function hatchPattern(ctx) {
  const c = document.createElement("canvas"); c.width = c.height = 8;
  const g = c.getContext("2d");
  g.fillStyle = "#f2f2f2"; g.fillRect(0, 0, 8, 8);
  g.strokeStyle = "#c8c8c8"; g.lineWidth = 1;
  g.beginPath(); g.moveTo(0, 8); g.lineTo(8, 0); g.stroke();
  return ctx.createPattern(c, "repeat");
}

// A big timeline comes as one string per rank, a character per pixel column of the span
// (panels.py: rank_strips): one rectangle per run of a kind, whatever P and M are.
function drawStrips(ctx, p, sx, top, byKind, stats) {
  p.strips.forEach((row, rank) => {
    const bin = p.span / row.length, y = top + rank * ROW + 2;
    for (let a = 0; a < row.length;) {
      let b = a + 1;
      while (b < row.length && row[b] === row[a]) b++;
      if (row[a] !== ".") {
        ctx.fillStyle = byKind[p.strip_chars[row[a]]] || "#999";
        ctx.fillRect(sx(a * bin), y, sx(b * bin) - sx(a * bin), ROW - 4);
        stats.boxes++;
      }
      a = b;
    }
  });
}

function drawTimeline(ctx, p, x0, y0, w, stats) {
  titles(ctx, p, x0, y0);
  const pw = w - LEFT - RIGHT, top = y0 + HEAD, xmax = p.xmax > 0 ? p.xmax : 1;
  const sx = t => x0 + LEFT + (t / xmax) * pw;
  ctx.fillStyle = hatchPattern(ctx);
  for (let r = 0; r < p.ranks; r++) ctx.fillRect(sx(0), top + r * ROW + 2, sx(p.span) - sx(0), ROW - 4);
  ctx.font = SMALL; ctx.textAlign = "right"; ctx.textBaseline = "middle"; ctx.fillStyle = "#000";
  for (let r = 0; r < p.ranks; r++) ctx.fillText("rank " + r, x0 + LEFT - 6, top + r * ROW + ROW / 2);
  const byKind = p.colors || {};
  ctx.textAlign = "center";
  const widths = {};           // labels repeat (microbatch numbers): measure each one once
  const textWidth = t => widths[t] ?? (widths[t] = ctx.measureText(t).width);
  if (p.strips) drawStrips(ctx, p, sx, top, byKind, stats);
  for (const [rank, s, e, label, kind] of p.boxes) {
    const a = sx(s), b = sx(e), y = top + rank * ROW + 2;
    ctx.fillStyle = byKind[kind] || "#999"; ctx.fillRect(a, y, Math.max(b - a - 0.6, 0.6), ROW - 4);
    if (b - a >= textWidth(label) + 4) {
      ctx.fillStyle = "#fff"; ctx.fillText(label, (a + b) / 2, y + (ROW - 4) / 2 + 0.5);
    }
    stats.boxes++;
  }
  for (const [rank, s, e, kind] of (p.lanes || [])) {   // communication: a thin lane per rank
    ctx.fillStyle = (p.lane_colors || {})[kind] || "#555";
    ctx.fillRect(sx(s), top + rank * ROW + ROW - 6, Math.max(sx(e) - sx(s), 1), 3);
  }
  xAxis(ctx, sx(0), top + p.ranks * ROW + 2, pw, 0, xmax, sx, p.xlabel, null, stats);
  const items = p.legend.concat(p.lane_legend || []).map(([n, c]) => [n, c]);
  items.push(["idle", hatchPattern(ctx), true]);
  legend(ctx, items, x0 + w - RIGHT + 12, top);
}

function yAxis(ctx, x, top, h, lo, hi, sy, label, fmt) {
  ctx.strokeStyle = "#000"; ctx.lineWidth = 1;
  ctx.beginPath(); ctx.moveTo(x - 0.5, top); ctx.lineTo(x - 0.5, top + h); ctx.stroke();
  ctx.fillStyle = "#000"; ctx.font = SMALL; ctx.textAlign = "right"; ctx.textBaseline = "middle";
  for (const t of ticks(lo, hi, Math.max(2, Math.floor(h / 40)))) {
    ctx.fillText((fmt || fmtNum)(t), x - 5, sy(t));
    ctx.beginPath(); ctx.moveTo(x - 3, sy(t)); ctx.lineTo(x, sy(t)); ctx.stroke();
  }
  ctx.save(); ctx.translate(x0Label(x), top + h / 2); ctx.rotate(-Math.PI / 2);
  ctx.textAlign = "center"; ctx.font = FONT; ctx.fillText(label || "", 0, 0); ctx.restore();
}

function x0Label(x) { return x - LEFT + 12; }

function fmtFrom(spec) {
  const m = /\{:\.(\d)f\}/.exec(spec || "");
  const d = m ? +m[1] : 1;
  return v => v.toFixed(d);
}

function drawBars(ctx, p, x0, y0, w, stats) {
  titles(ctx, p, x0, y0);
  const n = p.labels.length, top = y0 + HEAD, h = panelHeight(p) - HEAD - FOOT;
  const pw = w - LEFT - RIGHT, left = x0 + LEFT, slot = pw / Math.max(n, 1);
  const totals = p.labels.map((_, i) => p.stacked
    ? p.series.reduce((s, q) => s + q.values[i], 0)
    : Math.max(0, ...p.series.map(q => q.values[i])));
  const ymax = Math.max(1e-12, ...totals, p.limit || 0) * 1.15;
  const sy = v => top + h - (v / ymax) * h;
  const k = p.stacked ? 1 : p.series.length, bw = (slot * 0.75) / k, fmt = fmtFrom(p.fmt);
  ctx.font = SMALL; ctx.textAlign = "center"; ctx.textBaseline = "bottom";
  for (let i = 0; i < n; i++) {
    let base = 0;
    p.series.forEach((q, j) => {
      const v = q.values[i], x = left + i * slot + slot * 0.125 + (p.stacked ? 0 : j * bw);
      ctx.fillStyle = q.color; ctx.fillRect(x, sy(base + v), bw - 0.5, sy(base) - sy(base + v));
      stats.boxes++;
      if (!p.stacked && p.totals && slot >= 18) {
        ctx.fillStyle = "#000"; ctx.fillText(fmt(v), x + bw / 2, sy(v) - 1);
      }
      if (p.stacked) base += v;
    });
    if (p.stacked && p.totals) {
      const over = p.limit != null && totals[i] > p.limit;
      ctx.fillStyle = over ? "#b71c1c" : "#000";
      ctx.font = (over ? "bold " : "") + SMALL;
      ctx.fillText(fmt(totals[i]), left + (i + 0.5) * slot, sy(totals[i]) - 1);
      ctx.font = SMALL;
    }
  }
  if (p.limit != null) {
    ctx.strokeStyle = "#000"; ctx.setLineDash([5, 4]);
    ctx.beginPath(); ctx.moveTo(left, sy(p.limit)); ctx.lineTo(left + pw, sy(p.limit)); ctx.stroke();
    ctx.setLineDash([]); ctx.fillStyle = "#000"; ctx.textAlign = "right";
    ctx.fillText(p.limit_label || "", left + pw, sy(p.limit) - 2);
  }
  yAxis(ctx, left, top, h, 0, ymax / 1.15, sy, p.ylabel);
  ctx.strokeStyle = "#000";
  ctx.beginPath(); ctx.moveTo(left, top + h + 0.5); ctx.lineTo(left + pw, top + h + 0.5); ctx.stroke();
  ctx.fillStyle = "#000"; ctx.textAlign = "center"; ctx.textBaseline = "top";
  const every = Math.ceil(n / Math.max(1, Math.floor(pw / 46)));
  const put = labelRow(ctx, stats);
  p.labels.forEach((l, i) => { if (i % every === 0) put(l, left + (i + 0.5) * slot, top + h + 4); });
  ctx.font = FONT; ctx.fillText(p.xlabel || "", left + pw / 2, top + h + 20);
  legend(ctx, p.series.map(q => [q.name, q.color]), x0 + w - RIGHT + 12, top);
}

function drawLines(ctx, p, x0, y0, w, stats) {
  titles(ctx, p, x0, y0);
  const top = y0 + HEAD, h = panelHeight(p) - HEAD - FOOT, pw = w - LEFT - RIGHT;
  const left = x0 + LEFT, pts = p.series.flatMap(s => s.points);
  const tx = v => (p.xlog ? Math.log2(v) : v);
  let xlo = Math.min(...pts.map(q => tx(q[0]))), xhi = Math.max(...pts.map(q => tx(q[0])));
  if (!(xhi > xlo)) { xlo -= 1; xhi += 1; }
  const ymax = Math.max(1e-12, ...pts.map(q => q[1])) * 1.12;
  const ymin = Math.min(0, ...pts.map(q => q[1]));
  const pad = (xhi - xlo) * 0.03;
  const sx = v => left + ((tx(v) - xlo + pad) / (xhi - xlo + 2 * pad)) * pw;
  const sy = v => top + h - ((v - ymin) / (ymax - ymin)) * h;
  for (const s of p.series) {
    ctx.strokeStyle = s.color; ctx.fillStyle = s.color; ctx.lineWidth = 1.6;
    ctx.setLineDash(s.dash ? [5, 3] : []);
    if (s.line && s.points.length) {
      ctx.beginPath();
      s.points.forEach(([x, y], i) => {
        if (i === 0) ctx.moveTo(sx(x), sy(y));
        else if (s.step) { ctx.lineTo(sx(x), sy(s.points[i - 1][1])); ctx.lineTo(sx(x), sy(y)); }
        else ctx.lineTo(sx(x), sy(y));
      });
      ctx.stroke();
    }
    ctx.setLineDash([]);
    if (s.marker) for (const [x, y] of s.points) {
      ctx.beginPath();
      if (s.marker === "s") ctx.rect(sx(x) - 3.5, sy(y) - 3.5, 7, 7);
      else if (s.marker === "|") { ctx.moveTo(sx(x), sy(y) - 6); ctx.lineTo(sx(x), sy(y) + 6); }
      else ctx.arc(sx(x), sy(y), s.marker === "O" ? 8 : 3.5, 0, 2 * Math.PI);
      if (s.marker === "o" || s.marker === "s") { ctx.fillStyle = "#fff"; ctx.fill(); }
      ctx.stroke();
    }
    stats.boxes += s.points.length;
  }
  for (const [x, colour, dashed] of p.marks) {
    ctx.strokeStyle = colour; ctx.lineWidth = 1; ctx.setLineDash(dashed ? [5, 4] : []);
    ctx.beginPath(); ctx.moveTo(sx(x), top); ctx.lineTo(sx(x), top + h); ctx.stroke();
    ctx.setLineDash([]);
  }
  const pct = v => (v * 100).toFixed(0) + "%";
  yAxis(ctx, left, top, h, ymin, ymax / 1.12, sy, p.ylabel, p.percent ? pct : null);
  const xt = p.xticks || (p.xlog ? logTicks(pts.map(q => q[0]), xlo, xhi, Math.floor(pw / 60))
    : ticks(xlo, xhi, Math.floor(pw / 80)));
  ctx.strokeStyle = "#000"; ctx.lineWidth = 1;
  ctx.beginPath(); ctx.moveTo(left, top + h + 0.5); ctx.lineTo(left + pw, top + h + 0.5); ctx.stroke();
  ctx.fillStyle = "#000"; ctx.font = SMALL; ctx.textAlign = "center"; ctx.textBaseline = "top";
  const put = labelRow(ctx, stats);
  for (const t of xt) put(fmtNum(t), sx(t), top + h + 5);
  ctx.font = FONT; ctx.fillText(p.xlabel || "", left + pw / 2, top + h + 20);
  legend(ctx, p.series.filter(s => s.name).map(s => [s.name, s.color]), x0 + w - RIGHT + 12, top);
}

// Ticks on a log2 axis: the data's own x values when few, else powers of two spaced so that
// at most n labels fit (a planner scatter has hundreds of distinct x values).
function logTicks(xs, lo, hi, n) {
  const own = xs.filter((v, i, a) => a.indexOf(v) === i);
  if (own.length <= n) return own;
  let step = 1;
  while ((hi - lo) / step > n) step *= 2;
  const out = [];
  for (let e = Math.ceil(lo / step) * step; e <= hi + 1e-9; e += step) out.push(Math.pow(2, e));
  return out;
}

const DRAW = {timeline: drawTimeline, bars: drawBars, lines: drawLines};

function draw(canvas, scene, width) {
  const t0 = performance.now();
  const panels = (scene && scene.panels) || [];
  const h = panels.reduce((s, p) => s + panelHeight(p) + 8, 0) || 1;
  const dpr = window.devicePixelRatio || 1;
  canvas.width = Math.round(width * dpr); canvas.height = Math.round(h * dpr);
  canvas.style.width = width + "px"; canvas.style.height = h + "px";
  const ctx = canvas.getContext("2d");
  ctx.setTransform(dpr, 0, 0, dpr, 0, 0);
  ctx.fillStyle = "#fff"; ctx.fillRect(0, 0, width, h);
  const stats = {boxes: 0, overlaps: 0};
  let y = 0;
  for (const p of panels) { DRAW[p.type](ctx, p, 0, y, width, stats); y += panelHeight(p) + 8; }
  canvas.pplabScene = scene;
  canvas.dataset.boxes = String(stats.boxes);
  canvas.dataset.overlaps = String(stats.overlaps);     // tick labels touching: tests want 0
  canvas.dataset.drawMs = (performance.now() - t0).toFixed(1);   // for benchmarks
  canvas.dataset.frame = String((+canvas.dataset.frame || 0) + 1);
}

function render({ model, el }) {
  const canvas = document.createElement("canvas");
  canvas.className = "pplab-scene";
  el.appendChild(canvas);
  const width = () => Math.max(560, Math.min(el.clientWidth || 980, 1100));
  let last = 0;
  const scene = () => { const raw = model.get("scene");
                        return typeof raw === "string" ? JSON.parse(raw) : raw; };
  const redraw = () => { last = width(); draw(canvas, scene(), last); };
  let queued = false;              // scene and frame arrive in one message: draw once
  const soon = () => { if (!queued) { queued = true; queueMicrotask(() => { queued = false; redraw(); }); } };
  model.on("change:scene", soon);
  model.on("change:frame", soon);
  redraw();
  const ro = new ResizeObserver(() => { if (width() !== last) redraw(); });
  ro.observe(el);
  return () => { ro.disconnect(); model.off("change:scene", soon); model.off("change:frame", soon); };
}

export default { render };
