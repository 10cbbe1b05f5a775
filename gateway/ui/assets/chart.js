// A small SVG line chart: enough for requests/s and latency percentiles
// over the last minutes, with no library and nothing parsed as markup.
const NS = "http://www.w3.org/2000/svg";

function el(tag, attrs, text) {
  const e = document.createElementNS(NS, tag);
  for (const [k, v] of Object.entries(attrs)) e.setAttribute(k, String(v));
  if (text !== undefined) e.textContent = text;
  return e;
}

// lineChart draws series ([{name, cls, points: [[t, v], ...]}]) into svg,
// replacing what was there; fmt formats the y axis.
export function lineChart(svg, series, fmt) {
  const W = 640, H = 200, L = 64, R = 8, T = 8, B = 22;
  svg.setAttribute("viewBox", `0 0 ${W} ${H}`);
  const all = series.flatMap(s => s.points);
  const kids = [];
  if (all.length === 0) {
    kids.push(el("text", { x: W / 2, y: H / 2, "text-anchor": "middle", class: "axis" }, "waiting for traffic…"));
    svg.replaceChildren(...kids);
    return;
  }
  const t0 = Math.min(...all.map(p => p[0])), t1 = Math.max(...all.map(p => p[0]), t0 + 1);
  const top = niceMax(Math.max(...all.map(p => p[1]), 0));
  const x = t => L + (W - L - R) * (t - t0) / (t1 - t0);
  const y = v => T + (H - T - B) * (1 - v / top);
  for (let i = 0; i <= 4; i++) {
    const v = top * i / 4;
    kids.push(el("line", { x1: L, x2: W - R, y1: y(v), y2: y(v), class: "grid" }));
    kids.push(el("text", { x: L - 6, y: y(v) + 4, "text-anchor": "end", class: "axis" }, fmt(v)));
  }
  kids.push(el("text", { x: L, y: H - 6, class: "axis" }, `${Math.round((t1 - t0) / 1000)} s ago`));
  kids.push(el("text", { x: W - R, y: H - 6, "text-anchor": "end", class: "axis" }, "now"));
  for (const s of series) {
    if (!s.points.length) continue;
    const d = s.points.map((p, i) => `${i ? "L" : "M"}${x(p[0]).toFixed(1)},${y(p[1]).toFixed(1)}`).join("");
    kids.push(el("path", { d, class: `line ${s.cls}` }));
  }
  svg.replaceChildren(...kids);
  const last = series[0].points[series[0].points.length - 1];
  svg.dataset.points = String(series[0].points.length);
  svg.dataset.last = last ? String(last[1]) : "0";
}

function niceMax(v) {
  if (v <= 0) return 1;
  const p = 10 ** Math.floor(Math.log10(v));
  for (const m of [1, 2, 2.5, 5, 10]) if (m * p >= v) return m * p;
  return 10 * p;
}
