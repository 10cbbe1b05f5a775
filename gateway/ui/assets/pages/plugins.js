// Plugins: each registered WebAssembly module with its hash, limits, pool
// use, calls and failures (traps among them), refreshed every 2 s.
import { h, fill, api, errorBox } from "../app.js";

export async function plugins(main, _match, signal) {
  const body = h("div", { id: "plugins" });
  fill(main, h("h1", {}, "Plugins"), body);
  async function draw() {
    let list, stats;
    try {
      [list, stats] = await Promise.all([api("GET", "/plugins"), api("GET", "/stats?imposters=false")]);
    } catch (err) {
      fill(body, errorBox(err));
      return;
    }
    // The host loads modules by content (a hash, with limits when they are
    // not the default); a registered name is one of them.
    const byHash = new Map();
    for (const p of stats.plugins) {
      const a = byHash.get(p.sha256) || { calls: 0, errors: {}, instances: { live: 0 } };
      a.calls += p.calls;
      a.instances.live += p.instances.live;
      for (const [k, v] of Object.entries(p.errors || {})) a.errors[k] = (a.errors[k] || 0) + v;
      byHash.set(p.sha256, a);
    }
    if (!list.plugins.length) {
      fill(body, h("p", { class: "muted" }, "No plugin is registered. PUT a module to /plugins/<name>, or name a .wasm file in a stub."));
      return;
    }
    fill(body, h("table", {},
      h("thead", {}, h("tr", {}, ["Module", "SHA-256", "Size", "Exports", "Limits", "Pool", "Calls", "Traps", "Other failures"].map(t => h("th", {}, t)))),
      h("tbody", {}, list.plugins.map(p => {
        const s = byHash.get(p.sha256) || { calls: 0, errors: {}, instances: {} };
        const errs = s.errors || {};
        const other = Object.entries(errs).filter(([k]) => k !== "trap").map(([k, v]) => `${k} ${v}`).join(", ");
        const l = p.limits || {};
        return h("tr", { class: "plugin", dataset: { name: p.name } },
          h("td", { class: "name" }, p.name),
          h("td", { class: "hash", title: p.sha256 }, p.sha256.slice(0, 12)),
          h("td", { class: "num" }, `${(p.size / 1024).toFixed(1)} KiB`),
          h("td", {}, (p.exports || []).join(", ")),
          h("td", { class: "limits" }, `${l.memoryPages} pages, ${l.deadlineMs === -1 ? "no deadline" : `${l.deadlineMs} ms`}, ` +
            `${l.maxResponseBytes} B out, recycle after ${l.recycleAfter}`),
          h("td", { class: "num pool" }, `${s.instances.live ?? 0} / ${l.poolSize}`),
          h("td", { class: "num calls" }, String(s.calls)),
          h("td", { class: "num traps" }, String(errs.trap || 0)),
          h("td", {}, other || "–"));
      }))));
  }
  await draw();
  const timer = setInterval(draw, 2000);
  signal.addEventListener("abort", () => clearInterval(timer));
}
