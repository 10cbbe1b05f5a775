// Home: every imposter with its protocol, port, name, requests and match
// rate, filtered and paged (50 rows at a time, however many there are).
import { h, fill, api, pager, confirmAction, errorBox } from "../app.js";

const PAGE = 50;

export async function home(main, _match, signal) {
  let offset = 0;
  let filter = "";
  const search = h("input", { type: "search", id: "filter", placeholder: "filter by port or name" });
  const body = h("div", { id: "imposters" });
  fill(main, h("h1", {}, "Imposters"), h("div", { class: "toolbar" }, search), body);

  async function draw() {
    let list, stats;
    try {
      [list, stats] = await Promise.all([api("GET", "/imposters"), api("GET", "/stats?plugins=false")]);
    } catch (err) {
      fill(body, errorBox(err));
      return;
    }
    const counts = new Map(stats.imposters.map(s => [s.port, s]));
    const f = filter.toLowerCase();
    const shown = list.imposters.filter(i => !f || String(i.port).includes(f) || (i.name || "").toLowerCase().includes(f));
    if (offset >= shown.length) offset = Math.max(0, Math.floor((shown.length - 1) / PAGE) * PAGE);
    const rows = shown.slice(offset, offset + PAGE).map(i => {
      const s = counts.get(i.port) || { requests: 0, noMatch: 0 };
      const rate = s.requests ? `${(100 * (s.requests - s.noMatch) / s.requests).toFixed(1)}%` : "–";
      return h("tr", { dataset: { port: i.port } },
        h("td", {}, h("a", { href: `/imposters/${i.port}` }, String(i.port))),
        h("td", {}, i.protocol),
        h("td", { class: "name" }, i.name || ""),
        h("td", { class: "num requests" }, String(s.requests)),
        h("td", { class: "num rate" }, rate),
        h("td", {}, h("button", { class: "danger delete", on: { click: () => remove(i) } }, "Delete")));
    });
    fill(body,
      shown.length === 0 ? h("p", { class: "muted" }, list.imposters.length ? "No imposter matches." : "No imposters yet: POST one to /imposters.")
        : h("table", {},
          h("thead", {}, h("tr", {}, ["Port", "Protocol", "Name", "Requests", "Matched", ""].map(t => h("th", {}, t)))),
          h("tbody", {}, rows)),
      pager(offset, PAGE, shown.length, o => { offset = o; draw(); }));
  }

  async function remove(i) {
    if (!await confirmAction(`Delete imposter ${i.port}${i.name ? ` (${i.name})` : ""}? Its stubs, recorded requests and flows go with it.`)) return;
    try {
      await api("DELETE", `/imposters/${i.port}`);
    } catch (err) {
      body.prepend(errorBox(err));
      return;
    }
    draw();
  }

  search.addEventListener("input", () => { filter = search.value; offset = 0; draw(); });
  await draw();
  const timer = setInterval(draw, 2000);
  signal.addEventListener("abort", () => clearInterval(timer));
}
