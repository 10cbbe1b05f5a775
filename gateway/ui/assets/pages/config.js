// Config: the process's options and runtime, as GET /config gives them.
import { h, fill, api } from "../app.js";

export async function config(main) {
  const cfg = await api("GET", "/config");
  const dl = obj => h("dl", {}, Object.entries(obj).flatMap(([k, v]) =>
    [h("dt", {}, k), h("dd", {}, typeof v === "object" && v !== null ? JSON.stringify(v) : String(v))]));
  fill(main, h("h1", {}, `Config (riftgate ${cfg.version})`),
    h("section", { id: "options" }, h("h2", {}, "Options"), dl(cfg.options)),
    h("section", { id: "process" }, h("h2", {}, "Process"), dl(cfg.process)));
}
