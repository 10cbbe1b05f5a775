// Cluster: the group as this node sees it (GET /cluster), the flows each
// member holds as it counts them (GET /cluster/flows), and this node's
// owner RPC latency from its histogram in GET /metrics, refreshed every
// 2 s. On a single node GET /cluster is not found, and the page says so.
import { h, fill, api, send, errorBox, fmtMs, APIError } from "../app.js";
import { lineChart } from "../chart.js";

const EVERY = 2000;
const KEEP = 90; // latency points: three minutes
const NS = "http://www.w3.org/2000/svg";

export async function cluster(main, _match, signal) {
  let st;
  try {
    st = await api("GET", "/cluster");
  } catch (err) {
    if (!(err instanceof APIError && err.status === 404)) throw err;
    fill(main, h("h1", {}, "Cluster"), h("section", { class: "card", id: "single" },
      h("p", {}, h("strong", {}, "This node is not in a cluster."),
        " It runs alone: its imposters and flows are its own. Start riftgate with --cluster-node-name and ",
        "--cluster-bootstrap or --cluster-join to make it a member (docs/cluster.md).")));
    return;
  }
  const summary = h("dl", { id: "summary" });
  const members = h("div", { id: "members" });
  const ringSvg = document.createElementNS(NS, "svg");
  ringSvg.id = "ring";
  ringSvg.setAttribute("class", "ring");
  const ringNote = h("p", { class: "muted", id: "ring-note" });
  const rpc = h("p", { id: "rpc" }, "waiting for metrics…");
  const latSvg = document.createElementNS(NS, "svg");
  latSvg.id = "rpc-chart";
  fill(main, h("h1", {}, "Cluster"), summary,
    h("section", {}, h("h2", {}, "Members"), members),
    h("section", {}, h("h2", {}, "Flows per member"), h("div", { class: "ringbox" }, ringSvg, ringNote)),
    h("section", {}, h("h2", {}, "Owner RPC latency, from this node"), rpc, h("p", { class: "legend" },
      h("span", { class: "p50" }, "p50"), " ", h("span", { class: "p99" }, "p99"), " per 2 s, upper bounds of power-of-two buckets"), latSvg));

  const history = [];
  let last = null; // the previous histogram, for per-interval quantiles

  async function draw() {
    const [s, own, text] = await Promise.allSettled([
      st ? Promise.resolve(st) : api("GET", "/cluster"),
      api("GET", "/cluster/flows"),
      send("GET", "/metrics", undefined, "text/plain").then(r => r.ok ? r.text() : Promise.reject(new Error(`HTTP ${r.status}`))),
    ]);
    st = null;
    if (s.status === "rejected") {
      fill(summary, errorBox(s.reason));
      return;
    }
    const flows = own.status === "fulfilled" ? own.value : null;
    drawSummary(summary, s.value, flows);
    drawMembers(members, s.value, flows, own.status === "rejected" ? own.reason : null);
    drawRing(ringSvg, ringNote, flows);
    if (text.status === "fulfilled") {
      const hist = parseHistogram(text.value, "riftgate_cluster_owner_rpc_seconds");
      const delta = last ? hist.map((b, i) => ({ le: b.le, n: b.n - last[i].n })) : null;
      last = hist;
      const total = hist.length ? hist[hist.length - 1].n : 0;
      fill(rpc, "Since this node started: ",
        h("span", { id: "rpc-count" }, String(total)), " RPCs, p50 ≤ ",
        h("span", { id: "rpc-p50" }, fmtSeconds(quantile(hist, 0.5))), ", p99 ≤ ",
        h("span", { id: "rpc-p99" }, fmtSeconds(quantile(hist, 0.99))), ".");
      if (delta) {
        const n = delta.length ? delta[delta.length - 1].n : 0;
        history.push({ t: Date.now(), n, p50: quantile(delta, 0.5), p99: quantile(delta, 0.99) });
        if (history.length > KEEP) history.shift();
      }
      const busy = history.filter(p => p.n > 0);
      lineChart(latSvg, ["p99", "p50"].map(q => ({ name: q, cls: q, points: busy.map(p => [p.t, p[q] * 1000]) })), fmtMs);
    } else {
      fill(rpc, errorBox(text.reason));
    }
  }
  await draw();
  // A member that does not answer holds GET /cluster/flows up to 2 s: a
  // tick that finds the last draw still waiting skips.
  let busy = false;
  const timer = setInterval(() => {
    if (busy) return;
    busy = true;
    draw().catch(err => fill(summary, errorBox(err))).finally(() => { busy = false; });
  }, EVERY);
  signal.addEventListener("abort", () => clearInterval(timer));
}

function drawSummary(el, s, flows) {
  const isolated = flows ? flows.members.filter(m => m.answered && m.isolated).map(m => m.name) : [];
  if (s.isolated && !isolated.includes(s.self)) isolated.push(s.self);
  fill(el,
    h("dt", {}, "This node"), h("dd", { id: "self" }, s.self),
    h("dt", {}, "Leader"), h("dd", { id: "leader", class: s.leader === null ? "error" : undefined },
      s.leader === null ? "none known (no quorum, or an election is running)" : s.leader),
    h("dt", {}, "Term"), h("dd", { id: "term" }, String(s.term)),
    h("dt", {}, "Membership index"), h("dd", { id: "membership-index" }, String(s.membershipIndex)),
    h("dt", {}, "Applied index"), h("dd", { id: "applied-index" }, String(s.appliedIndex)),
    h("dt", {}, "Isolated"), h("dd", { id: "isolated", class: isolated.length ? "badge-bad" : undefined },
      isolated.length ? `${isolated.join(", ")}: ${isolated.length === 1 ? "sees" : "see"} no leader a quorum acknowledged, and refuse${isolated.length === 1 ? "s" : ""} owner-side flow operations (503)` : "none"));
}

function drawMembers(el, s, flows, err) {
  const byName = new Map((flows ? flows.members : []).map(m => [m.name, m]));
  const cols = ["Name", "ID", "Role", "Peer URL", "Reachable", "Flows owned", "Replicas", "Other copies"];
  fill(el, err ? errorBox(err) : null, h("table", {},
    h("thead", {}, h("tr", {}, cols.map(t => h("th", {}, t)))),
    h("tbody", {}, s.members.map(m => {
      const f = byName.get(m.name);
      const marks = [];
      if (m.name === s.leader) marks.push(h("span", { class: "tag leader" }, "leader"));
      if (m.name === s.self) marks.push(h("span", { class: "tag self" }, "this node"));
      if (f && f.answered && f.isolated) marks.push(h("span", { class: "tag isolated" }, "isolated"));
      const count = k => f && f.answered ? String(f[k]) : "?";
      return h("tr", { class: `member${m.reachable ? "" : " unreachable"}`, dataset: { id: m.id } },
        h("td", {}, h("span", { class: "name" }, m.name), " ", marks),
        h("td", { class: "hash" }, m.id),
        h("td", { class: "role" }, m.role),
        h("td", { class: "peer" }, m.peerURL),
        h("td", { class: `reach ${m.reachable ? "ok" : "bad"}` }, m.reachable ? "reachable" : "unreachable"),
        h("td", { class: "num owned", title: f && !f.answered ? f.error : undefined }, count("owned")),
        h("td", { class: "num replicas" }, count("replicas")),
        h("td", { class: "num other" }, count("other")));
    }))));
}

// drawRing draws the flows each member owns as a ring of arcs, one per
// member in name order, each as long as its share.
function drawRing(svg, note, flows) {
  const S = 220, R = 90, W = 26, C = S / 2;
  svg.setAttribute("viewBox", `0 0 ${S} ${S}`);
  const kids = [];
  const svgEl = (tag, attrs, text) => {
    const e = document.createElementNS(NS, tag);
    for (const [k, v] of Object.entries(attrs)) e.setAttribute(k, String(v));
    if (text !== undefined) e.textContent = text;
    return e;
  };
  const ms = flows ? flows.members : [];
  const total = ms.reduce((a, m) => a + (m.answered ? m.owned : 0), 0);
  kids.push(svgEl("circle", { cx: C, cy: C, r: R, class: "ring-track", "stroke-width": W }));
  let at = 0;
  ms.forEach((m, i) => {
    if (!m.answered || m.owned === 0) return;
    const frac = m.owned / total;
    const arc = svgEl("path", { d: arcPath(C, R, at, at + frac), class: `ring-arc c${i % 5}`, "stroke-width": W });
    arc.append(svgEl("title", {}, `${m.name}: ${m.owned} flows`));
    kids.push(arc);
    at += frac;
  });
  kids.push(svgEl("text", { x: C, y: C - 2, "text-anchor": "middle", class: "ring-total", id: "ring-total" }, String(total)));
  const silent = ms.filter(m => !m.answered).length;
  kids.push(svgEl("text", { x: C, y: C + 16, "text-anchor": "middle", class: "axis" }, total === 1 ? "flow owned" : "flows owned"));
  if (silent) kids.push(svgEl("text", { x: C, y: C + 30, "text-anchor": "middle", class: "axis error" }, `${silent} member${silent === 1 ? "" : "s"} not counted`));
  svg.replaceChildren(...kids);
  fill(note, ms.length === 0 ? "No member reported its flows." : h("ul", { class: "ring-legend" }, ms.map((m, i) =>
    h("li", { class: "ring-member" }, h("span", { class: `swatch c${i % 5}` }), h("span", { class: "name" }, m.name), ": ",
      m.answered ? `${m.owned} owned, ${m.replicas} replicas` : h("span", { class: "error", title: m.error }, "did not answer: its flows are not counted")))),
  h("p", { class: "muted" }, "Each member counts the flows in its own shard on the ring of the membership it runs; response-cycle positions of stubs count as flows."));
}

function arcPath(c, r, from, to) {
  if (to - from >= 0.9999) to = from + 0.9999; // a whole circle is not an arc
  const pt = f => [c + r * Math.sin(2 * Math.PI * f), c - r * Math.cos(2 * Math.PI * f)];
  const [x0, y0] = pt(from), [x1, y1] = pt(to);
  return `M${x0.toFixed(2)},${y0.toFixed(2)}A${r},${r} 0 ${to - from > 0.5 ? 1 : 0} 1 ${x1.toFixed(2)},${y1.toFixed(2)}`;
}

// parseHistogram reads a Prometheus histogram's cumulative buckets
// [{le, n}] (le in seconds, the last +Inf) from the text format.
export function parseHistogram(text, name) {
  const out = [];
  const prefix = `${name}_bucket{le="`;
  for (const line of text.split("\n")) {
    if (!line.startsWith(prefix)) continue;
    const end = line.indexOf('"', prefix.length);
    const le = line.slice(prefix.length, end);
    out.push({ le: le === "+Inf" ? Infinity : Number(le), n: Number(line.slice(line.lastIndexOf(" ") + 1)) });
  }
  return out;
}

// quantile is the upper bound (seconds) of the bucket holding quantile q,
// as the server's own Quantile reads it, or NaN with no observations.
function quantile(buckets, q) {
  const total = buckets.length ? buckets[buckets.length - 1].n : 0;
  if (total <= 0) return NaN;
  const rank = Math.floor(q * total);
  for (const b of buckets) if (b.n > rank) return b.le;
  return Infinity;
}

function fmtSeconds(s) {
  if (Number.isNaN(s)) return "–";
  if (s === Infinity) return "∞";
  return fmtMs(s * 1000);
}
