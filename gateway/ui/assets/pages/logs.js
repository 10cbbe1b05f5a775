// Logs: the process's log, live over Server-Sent Events, filtered by
// level. The last 500 lines that pass the filter are kept on the page.
import { h, fill, stream } from "../app.js";

const KEEP = 500;
const LEVELS = ["debug", "info", "warn", "error"];

export async function logs(main, _match, signal) {
  const level = h("select", { id: "level" }, LEVELS.map(l => h("option", { value: l, selected: l === "info" }, l)));
  const state = h("span", { class: "muted", id: "stream-state" }, "connecting…");
  const list = h("ol", { id: "log", class: "log" });
  fill(main, h("h1", {}, "Logs"), h("div", { class: "toolbar" }, "Level at least ", level, " ", state), list);
  const entries = [];
  const passes = e => LEVELS.indexOf(e.level) >= LEVELS.indexOf(level.value);
  const line = e => h("li", { class: `level-${e.level}` },
    h("time", {}, e.timestamp), " ", h("span", { class: "lvl" }, e.level), " ", h("span", { class: "msg" }, e.message));
  function redraw() {
    fill(list, ...entries.filter(passes).slice(-KEEP).map(line));
    list.scrollTop = list.scrollHeight;
  }
  level.addEventListener("change", redraw);
  stream("/logs", (_type, e) => {
    entries.push(e);
    if (entries.length > 4 * KEEP) entries.splice(0, entries.length - 4 * KEEP);
    if (!passes(e)) return;
    list.append(line(e));
    while (list.childElementCount > KEEP) list.firstElementChild.remove();
    list.scrollTop = list.scrollHeight;
  }, signal, s => { state.textContent = s; });
}
