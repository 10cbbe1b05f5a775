// riftgate's web UI: one module per page, drawn from the admin API's JSON.
// Everything shown is put in the DOM as text (h() below and textContent);
// nothing is ever parsed as HTML, and the page's Trusted Types policy makes
// the browser refuse it if some code tried.
import { home } from "./pages/home.js";
import { imposter } from "./pages/imposter.js";
import { plugins } from "./pages/plugins.js";
import { logs } from "./pages/logs.js";
import { traffic } from "./pages/traffic.js";
import { config } from "./pages/config.js";
import { cluster } from "./pages/cluster.js";

// The pages, in the order the navigation shows them. A page is one entry
// here and one module under pages/ (and its path in ui.go's pages).
const routes = [
  { path: /^\/(imposters)?$/, nav: "/imposters", title: "Imposters", draw: home },
  { path: /^\/imposters\/(\d+)$/, draw: imposter },
  { path: /^\/traffic$/, nav: "/traffic", title: "Traffic", draw: traffic },
  { path: /^\/plugins$/, nav: "/plugins", title: "Plugins", draw: plugins },
  { path: /^\/cluster$/, nav: "/cluster", title: "Cluster", draw: cluster },
  { path: /^\/logs$/, nav: "/logs", title: "Logs", draw: logs },
  { path: /^\/config$/, nav: "/config", title: "Config", draw: config },
];

// h builds an element: h("a", {href: "/x", class: "c"}, "text", child...).
// Strings become text nodes; attributes are set with setAttribute, and on*
// handlers through the "on" map, so no string is ever markup or script.
export function h(tag, attrs, ...children) {
  const el = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (v === undefined || v === null || v === false) continue;
    if (k === "on") {
      for (const [ev, fn] of Object.entries(v)) el.addEventListener(ev, fn);
    } else if (k === "dataset") {
      Object.assign(el.dataset, v);
    } else {
      el.setAttribute(k, v === true ? "" : String(v));
    }
  }
  append(el, children);
  return el;
}

// fill replaces el's children, with h's rules for what a child may be.
export function fill(el, ...children) {
  el.replaceChildren();
  append(el, children);
  return el;
}

function append(el, children) {
  for (const c of children) {
    if (c === undefined || c === null || c === false) continue;
    if (Array.isArray(c)) append(el, c);
    else el.append(c instanceof Node ? c : document.createTextNode(String(c)));
  }
}

// The API key, when the server wants one, lives in this tab's session
// storage (per origin: other ports on this host cannot read it) and goes
// in the x-api-key header, as any client sends it.
const KEY = "riftgate.apikey";

export class APIError extends Error {
  constructor(status, body) {
    const first = body && body.errors && body.errors[0];
    super(first ? `${first.code}: ${first.message}` : `HTTP ${status}`);
    this.status = status;
  }
}

// api calls the admin API and returns the decoded JSON body.
export async function api(method, path, body) {
  const res = await send(method, path, body, "application/json");
  const text = await res.text();
  if (!res.ok) {
    let data = null;
    try { data = JSON.parse(text); } catch { /* a route no handler serves answers plain text */ }
    throw new APIError(res.status, data);
  }
  return text ? JSON.parse(text) : {};
}

// send makes one admin request; on 401 it asks for the API key and
// tries again once the user gave it.
export async function send(method, path, body, accept, signal, extra) {
  for (;;) {
    const headers = { Accept: accept, ...extra };
    const key = sessionStorage.getItem(KEY);
    if (key) headers["x-api-key"] = key;
    if (body !== undefined) headers["Content-Type"] = "application/json";
    const res = await fetch(path, {
      method, headers, signal, credentials: "omit",
      body: body === undefined ? undefined : JSON.stringify(body),
    });
    if (res.status !== 401) return res;
    await askForKey(key);
  }
}

// asking is the open key prompt: requests that meet a 401 meanwhile wait
// for the same answer.
let asking = null;

function askForKey(previous) {
  if (!asking) asking = prompt(previous).finally(() => { asking = null; });
  return asking;
}

function prompt(previous) {
  return new Promise(resolve => {
    const input = h("input", { type: "password", id: "apikey", autocomplete: "off", placeholder: "API key" });
    const card = h("section", { class: "card", id: "keyprompt" },
      h("h1", {}, "API key"),
      h("p", {}, previous ? "That key was refused. " : "",
        "This server was started with --apikey. The key is kept in this tab only and sent in the x-api-key header."),
      input, " ", h("button", { id: "apikey-go", on: { click: () => go() } }, "Use key"));
    const go = () => {
      sessionStorage.setItem(KEY, input.value);
      card.remove();
      resolve();
    };
    input.addEventListener("keydown", e => { if (e.key === "Enter") go(); });
    document.getElementById("main").prepend(card);
    input.focus();
  });
}

// stream reads a Server-Sent Events stream from the admin API and calls
// onEvent(type, data, id) for each event, reconnecting (with the last id
// seen) until signal aborts. It reads with fetch, not EventSource, because
// EventSource cannot send the x-api-key header.
export async function stream(path, onEvent, signal, onState) {
  let last = "";
  while (!signal.aborted) {
    try {
      const res = await send("GET", path, undefined, "text/event-stream", signal, last ? { "Last-Event-ID": last } : {});
      if (!res.ok) throw new Error(`HTTP ${res.status}`);
      if (onState) onState("live");
      const reader = res.body.pipeThrough(new TextDecoderStream()).getReader();
      let buf = "";
      for (;;) {
        const { value, done } = await reader.read();
        if (done) break;
        buf += value;
        let cut;
        while ((cut = buf.indexOf("\n\n")) >= 0) {
          const frame = buf.slice(0, cut);
          buf = buf.slice(cut + 2);
          let type = "message", data = [], id = null;
          for (const line of frame.split("\n")) {
            const i = line.indexOf(":");
            const field = i < 0 ? line : line.slice(0, i);
            const val = i < 0 ? "" : line.slice(i + 1).replace(/^ /, "");
            if (field === "event") type = val;
            else if (field === "data") data.push(val);
            else if (field === "id") id = val;
          }
          if (id !== null) last = id;
          if (data.length) onEvent(type, JSON.parse(data.join("\n")), id);
        }
      }
    } catch (err) {
      if (signal.aborted) return;
      if (onState) onState(`reconnecting (${err.message})`);
    }
    await new Promise(r => setTimeout(r, 1000));
  }
}

// confirmAction shows the confirmation dialog and resolves true on Confirm.
export function confirmAction(text) {
  const dlg = document.getElementById("confirm");
  document.getElementById("confirm-text").textContent = text;
  return new Promise(resolve => {
    const done = v => () => { dlg.close(); resolve(v); };
    document.getElementById("confirm-ok").onclick = done(true);
    document.getElementById("confirm-cancel").onclick = done(false);
    dlg.oncancel = () => resolve(false);
    dlg.showModal();
  });
}

// pager draws "‹ prev  a–b of n  next ›" for a list paged by offset.
export function pager(offset, limit, total, go) {
  const last = Math.min(offset + limit, total);
  return h("div", { class: "pager" },
    h("button", { class: "prev", disabled: offset === 0, on: { click: () => go(Math.max(0, offset - limit)) } }, "‹ prev"),
    h("span", { class: "range" }, total === 0 ? "none" : `${offset + 1}–${last} of ${total}`),
    h("button", { class: "next", disabled: last >= total, on: { click: () => go(offset + limit) } }, "next ›"));
}

// pretty renders a JSON value for a <pre>, as text.
export function pretty(v) {
  return JSON.stringify(v, null, 2);
}

export function fmtMs(ms) {
  if (ms === undefined || ms === null || Number.isNaN(ms)) return "–";
  if (ms < 1) return `${(ms * 1000).toFixed(0)} µs`;
  if (ms < 1000) return `${ms.toFixed(ms < 10 ? 2 : 0)} ms`;
  return `${(ms / 1000).toFixed(2)} s`;
}

export function errorBox(err) {
  return h("p", { class: "error" }, String(err.message || err));
}

// A page's draw function gets the main element, the route's match and a
// signal that aborts when the user leaves; it may return nothing.
async function start() {
  const nav = document.getElementById("nav");
  const path = location.pathname;
  for (const r of routes) {
    if (!r.nav) continue;
    const active = r.path.test(path) || (r.nav === "/imposters" && path.startsWith("/imposters/"));
    nav.append(h("a", { href: r.nav, class: active ? "active" : undefined }, r.title));
  }
  const main = document.getElementById("main");
  const route = routes.find(r => r.path.test(path));
  if (!route) {
    fill(main, h("p", { class: "error" }, "No page here."));
    return;
  }
  const ctl = new AbortController();
  addEventListener("pagehide", () => ctl.abort());
  try {
    await route.draw(main, path.match(route.path), ctl.signal);
  } catch (err) {
    fill(main, errorBox(err));
  }
}

start();
