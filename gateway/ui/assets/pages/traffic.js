// Traffic: requests per second and latency percentiles, live, for all
// imposters together or one of them. The server sends one sample a second
// over Server-Sent Events (GET /stats); this page keeps the last two
// minutes of them.
import { h, fill, stream, fmtMs } from "../app.js";
import { lineChart } from "../chart.js";

const KEEP = 120;

export async function traffic(main, _match, signal) {
  const pick = h("select", { id: "imposter" }, h("option", { value: "all" }, "all imposters"));
  const state = h("span", { class: "muted", id: "stream-state" }, "connecting…");
  const rps = document.createElementNS("http://www.w3.org/2000/svg", "svg");
  rps.id = "rps-chart";
  const lat = document.createElementNS("http://www.w3.org/2000/svg", "svg");
  lat.id = "latency-chart";
  const table = h("div", { id: "top" });
  fill(main, h("h1", {}, "Traffic"),
    h("div", { class: "toolbar" }, "Show ", pick, " ", state),
    h("section", {}, h("h2", {}, "Requests per second"), rps),
    h("section", {}, h("h2", {}, "Latency"), h("p", { class: "legend" },
      h("span", { class: "p50" }, "p50"), " ", h("span", { class: "p90" }, "p90"), " ", h("span", { class: "p99" }, "p99")), lat),
    h("section", {}, h("h2", {}, "Busiest imposters, last second"), table));

  const history = new Map([["all", []]]); // key -> [{t, rps, p50, p90, p99}]
  const names = new Map();
  function push(key, t, v) {
    if (!history.has(key)) history.set(key, []);
    const hs = history.get(key);
    hs.push({ t, ...v });
    if (hs.length > KEEP) hs.shift();
  }
  function draw() {
    const hs = history.get(pick.value) || [];
    lineChart(rps, [{ name: "req/s", cls: "rps", points: hs.map(p => [p.t, p.rps]) }], v => v.toFixed(v < 10 ? 1 : 0));
    lineChart(lat, ["p99", "p90", "p50"].map(q => ({ name: q, cls: q, points: hs.filter(p => p.rps > 0).map(p => [p.t, p[q]]) })), fmtMs);
  }
  pick.addEventListener("change", draw);

  stream("/stats", (type, s) => {
    if (type !== "sample") return;
    push("all", s.t, s.total);
    const seen = new Set();
    for (const i of s.imposters) {
      const key = String(i.port);
      seen.add(key);
      push(key, s.t, i);
      if (!names.has(key)) {
        names.set(key, i.name);
        pick.append(h("option", { value: key }, `${i.protocol}:${i.port}${i.name ? ` ${i.name}` : ""}`));
      }
    }
    for (const key of history.keys()) {
      if (key !== "all" && !seen.has(key)) push(key, s.t, { rps: 0, p50: 0, p90: 0, p99: 0 });
    }
    draw();
    const top = [...s.imposters].sort((a, b) => b.rps - a.rps).slice(0, 20);
    fill(table, top.length === 0 ? h("p", { class: "muted" }, "No requests in the last second.") :
      h("table", {},
        h("thead", {}, h("tr", {}, ["Imposter", "Name", "req/s", "no match/s", "p50", "p90", "p99"].map(t => h("th", {}, t)))),
        h("tbody", {}, top.map(i => h("tr", { dataset: { port: i.port } },
          h("td", {}, h("a", { href: `/imposters/${i.port}` }, `${i.protocol}:${i.port}`)),
          h("td", { class: "name" }, i.name || ""),
          h("td", { class: "num" }, i.rps.toFixed(1)),
          h("td", { class: "num" }, i.noMatch.toFixed(1)),
          h("td", { class: "num" }, fmtMs(i.p50)),
          h("td", { class: "num" }, fmtMs(i.p90)),
          h("td", { class: "num" }, fmtMs(i.p99)))))));
  }, signal, st => { state.textContent = st; });
  draw();
}
