// One imposter: its stubs (predicates and responses), its recorded
// requests (searched and paged by the server), and its flows with their
// scenario states. Actions: delete it, clear its requests, reset scenarios.
import { h, fill, api, pager, pretty, confirmAction, errorBox } from "../app.js";

const STUBS = 20, REQUESTS = 25, FLOWS = 20;

export async function imposter(main, match) {
  const port = match[1];
  const base = `/imposters/${port}`;
  let imp;
  try {
    // One page of stubs at a time: an imposter may hold 100,000 recorded.
    imp = await api("GET", `${base}?replayable=true&stubOffset=0&stubLimit=${STUBS}`);
  } catch (err) {
    fill(main, h("h1", {}, `Imposter ${port}`), errorBox(err));
    return;
  }
  const status = h("p", { id: "status", class: "muted", role: "status" });
  const act = (label, cls, question, run) => h("button", {
    class: cls, on: {
      click: async () => {
        if (!await confirmAction(question)) return;
        try {
          await run();
        } catch (err) {
          status.textContent = String(err.message);
        }
      },
    },
  }, label);
  const stubs = h("section", { id: "stubs" });
  const requests = h("section", { id: "requests" });
  const flows = h("section", { id: "flows" });
  fill(main,
    h("h1", {}, `${imp.protocol}:${imp.port} `, h("span", { class: "name", id: "imposter-name" }, imp.name || "")),
    h("div", { class: "toolbar" },
      act("Delete imposter", "danger", `Delete imposter ${port}? Its stubs, recorded requests and flows go with it.`, async () => {
        await api("DELETE", base);
        location.assign("/imposters");
      }),
      act("Clear recorded requests", "", `Clear the requests imposter ${port} recorded?`, async () => {
        await api("DELETE", `${base}/savedRequests`);
        status.textContent = "Recorded requests cleared.";
        drawRequests(0);
      }),
      act("Reset all scenarios", "", `Move every scenario of every flow of imposter ${port} back to Started?`, async () => {
        await api("POST", `${base}/scenarios/reset`);
        status.textContent = "Scenarios reset.";
        drawFlows("");
      })),
    status,
    h("p", { class: "muted" }, imp.recordRequests ? "Records requests." : "Does not record requests (recordRequests is false)."),
    stubs, requests, flows);

  async function drawStubs(offset) {
    let page = imp;
    if (offset !== imp._stubWindow.offset) {
      try {
        page = await api("GET", `${base}?replayable=true&stubOffset=${offset}&stubLimit=${STUBS}`);
      } catch (err) {
        fill(stubs, h("h2", {}, "Stubs"), errorBox(err));
        return;
      }
    }
    const list = page.stubs || [], total = page._stubWindow.total;
    fill(stubs, h("h2", {}, `Stubs (${total})`),
      h("ol", { start: offset + 1, class: "stubs" }, list.map(s => {
        const { predicates, responses, ...rest } = s;
        return h("li", { class: "stub" },
          h("div", { class: "cols" },
            h("div", {}, h("h3", {}, "Predicates"), h("pre", {}, predicates && predicates.length ? pretty(predicates) : "(matches every request)")),
            h("div", {}, h("h3", {}, "Responses"), h("pre", {}, pretty(responses || [])))),
          Object.keys(rest).length ? h("pre", { class: "muted" }, pretty(rest)) : null);
      })),
      total > STUBS ? pager(offset, STUBS, total, drawStubs) : null);
  }

  let query = "";
  const search = h("input", { type: "search", id: "request-search", placeholder: "search method, path, query, headers, body" });
  search.addEventListener("change", () => { query = search.value; drawRequests(0); });
  search.addEventListener("keydown", e => { if (e.key === "Enter") { query = search.value; drawRequests(0); } });

  // A tcp or WebSocket request's data stands where an http body does
  // (its type, for WebSocket, where the method does); a gRPC request's
  // message (JSON) and metadata where the body and headers do.
  const isGRPC = r => r.peer !== undefined && r.value !== undefined;
  const bodyOf = r => r.body || r.data || (isGRPC(r) && r.value !== null ? pretty(r.value) : "");
  const headersOf = r => r.headers || r.metadata || {};

  async function drawRequests(offset) {
    let page;
    try {
      page = await api("GET", `${base}/savedRequests?order=desc&offset=${offset}&limit=${REQUESTS}&q=${encodeURIComponent(query)}`);
    } catch (err) {
      fill(requests, h("h2", {}, "Recorded requests"), errorBox(err));
      return;
    }
    fill(requests,
      h("h2", {}, `Recorded requests (${page.total})`),
      page.dropped ? h("p", { class: "muted dropped" }, `${page.dropped} older requests were dropped: this imposter keeps the newest ${page.max}.`) : null,
      h("div", { class: "toolbar" }, search, " ", h("button", { on: { click: () => { query = search.value; drawRequests(0); } } }, "Search"),
        query ? h("span", { class: "muted" }, ` ${page.matched} match`) : null),
      page.requests.length === 0 ? h("p", { class: "muted" }, "None.") :
        h("table", { class: "requests" },
          h("thead", {}, h("tr", {}, ["Time", "Method", "Path", "Query", "Headers", "Body"].map(t => h("th", {}, t)))),
          h("tbody", {}, page.requests.map(r => h("tr", { class: "request" },
            h("td", { class: "nowrap" }, r.timestamp || ""),
            h("td", {}, r.method || r.type || (isGRPC(r) ? "gRPC" : "")),
            h("td", { class: "path" }, r.path),
            h("td", {}, Object.keys(r.query || {}).length ? h("pre", {}, pretty(r.query)) : ""),
            h("td", {}, h("details", {}, h("summary", {}, `${Object.keys(headersOf(r)).length} headers`), h("pre", {}, pretty(headersOf(r))))),
            h("td", { class: "body" }, bodyOf(r) ? h("pre", {}, bodyOf(r).length > 2000 ? bodyOf(r).slice(0, 2000) + "…" : bodyOf(r)) : ""))))),
      pager(offset, REQUESTS, page.matched, drawRequests));
  }

  const cursors = [""]; // the "after" of each flow page seen, for "prev"
  async function drawFlows(after) {
    let page;
    try {
      page = await api("GET", `${base}/flows?limit=${FLOWS}${after ? `&after=${encodeURIComponent(after)}` : ""}`);
    } catch (err) {
      fill(flows, h("h2", {}, "Flows"), errorBox(err));
      return;
    }
    const states = await Promise.all(page.flows.map(id =>
      api("GET", `${base}/scenarios?flowId=${encodeURIComponent(id)}`).then(s => s.scenarios, () => [])));
    const at = cursors.indexOf(after);
    if (page.next && !cursors.includes(page.next)) cursors.push(page.next);
    fill(flows,
      h("h2", {}, "Flows and scenarios"),
      page.flows.length === 0 ? h("p", { class: "muted" }, "No flow holds state yet.") :
        h("table", { class: "flows" },
          h("thead", {}, h("tr", {}, ["Flow", "Scenario", "State", "Possible states", ""].map(t => h("th", {}, t)))),
          h("tbody", {}, page.flows.flatMap((id, i) => {
            const sc = states[i];
            if (!sc.length) return [h("tr", { class: "flow" }, h("td", { class: "flow-id" }, id), h("td", { class: "muted" }, "(no scenarios)"), h("td"), h("td"), h("td"))];
            return sc.map(s => h("tr", { class: "flow", dataset: { flow: id, scenario: s.name } },
              h("td", { class: "flow-id" }, id),
              h("td", {}, s.name),
              h("td", { class: "state" }, s.state),
              h("td", { class: "muted" }, s.possibleStates.join(", ")),
              h("td", {}, s.state === "Started" ? "" : h("button", {
                class: "reset", on: {
                  click: async () => {
                    if (!await confirmAction(`Reset scenario ${s.name} of flow ${id} to Started?`)) return;
                    await api("PUT", `${base}/scenarios/${encodeURIComponent(s.name)}/state?flowId=${encodeURIComponent(id)}`, { state: "Started" });
                    drawFlows(after);
                  },
                },
              }, "Reset"))));
          }))),
      h("div", { class: "pager" },
        h("button", { class: "prev", disabled: at <= 0, on: { click: () => drawFlows(cursors[at - 1]) } }, "‹ prev"),
        h("button", { class: "next", disabled: !page.next, on: { click: () => drawFlows(page.next) } }, "next ›")));
  }

  drawStubs(0);
  await Promise.all([drawRequests(0), drawFlows("")]);
}
