// agentgym view: a single page over the viewer's JSON API (no build step, no library).
"use strict";

const view = document.getElementById("view");
const state = { updates: null, metrics: null, colour: "none", curve: "success_rate" };

function el(tag, attrs, ...children) {
  const node = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (k.startsWith("on")) node.addEventListener(k.slice(2), v);
    else node.setAttribute(k, v);
  }
  for (const c of children.flat(Infinity)) node.append(c instanceof Node ? c : String(c ?? ""));
  return node;
}

async function api(path, params) {
  const query = new URLSearchParams(params || {}).toString();
  const response = await fetch(`/api/${path}${query ? "?" + query : ""}`);
  const body = await response.json();
  if (!response.ok) throw new Error(body.error || response.statusText);
  return body;
}

function fmt(x) {
  if (x === null || x === undefined) return "";
  if (typeof x === "number") return Number.isInteger(x) ? String(x) : x.toFixed(3);
  return String(x);
}

function episodeLink(e) {
  return el("a", { href: `#/episode/${e.update}/${e.index}` }, `${e.update}/${e.index}`);
}

function episodeTable(rows, extra) {
  const columns = ["update/index", "task_id", "outcome", "success", "reward", "turns", ...(extra || [])];
  return el("table", { class: "episodes" },
    el("tr", {}, columns.map((c) => el("th", {}, c))),
    rows.map((e) => el("tr", { class: "episode-row", "data-outcome": e.outcome },
      el("td", {}, episodeLink(e)),
      el("td", {}, el("a", { href: `#/task/${encodeURIComponent(e.task_id)}` }, e.task_id ?? "")),
      el("td", { class: `outcome-${e.outcome}` }, e.outcome), el("td", {}, fmt(e.success)),
      el("td", {}, fmt(e.reward)), el("td", {}, fmt(e.turns)),
      (extra || []).map((c) => el("td", {}, fmt(e[c]))))));
}

// --- plots: inline SVG ------------------------------------------------------------------------

function plot(series, marks, onPick) {
  const W = 720, H = 260, L = 50, B = 30, ns = "http://www.w3.org/2000/svg";
  const svg = document.createElementNS(ns, "svg");
  svg.setAttribute("class", "plot"); svg.setAttribute("width", W); svg.setAttribute("height", H);
  const add = (tag, attrs, text) => {
    const n = document.createElementNS(ns, tag);
    for (const [k, v] of Object.entries(attrs)) n.setAttribute(k, v);
    if (text !== undefined) n.textContent = text;
    svg.append(n); return n;
  };
  const points = series.flatMap((s) => s.points);
  if (!points.length) { add("text", { x: L, y: H / 2 }, "no data yet"); return svg; }
  const xs = points.map((p) => p[0]).concat(marks.map((m) => m.step)), ys = points.map((p) => p[1]);
  let [x0, x1, y0, y1] = [Math.min(...xs), Math.max(...xs), Math.min(...ys), Math.max(...ys)];
  if (x1 === x0) x1 = x0 + 1; if (y1 === y0) { y1 += 0.5; y0 -= 0.5; }
  const X = (x) => L + ((x - x0) / (x1 - x0)) * (W - L - 10), Y = (y) => H - B - ((y - y0) / (y1 - y0)) * (H - B - 10);
  add("line", { x1: L, y1: H - B, x2: W - 10, y2: H - B, stroke: "#999" });
  add("line", { x1: L, y1: 10, x2: L, y2: H - B, stroke: "#999" });
  add("text", { x: 4, y: Y(y1) + 4, "font-size": 11 }, fmt(y1));
  add("text", { x: 4, y: Y(y0), "font-size": 11 }, fmt(y0));
  add("text", { x: L, y: H - 8, "font-size": 11 }, `update ${fmt(x0)}`);
  add("text", { x: W - 80, y: H - 8, "font-size": 11 }, `update ${fmt(x1)}`);
  for (const m of marks) {
    const line = add("line", { class: m.kind, x1: X(m.step), x2: X(m.step), y1: 10, y2: H - B });
    add("title", {}, m.label); line.append(svg.lastChild);
  }
  series.forEach((s) => {
    add("polyline", { fill: "none", stroke: s.colour, "stroke-width": 2,
      points: s.points.map((p) => `${X(p[0])},${Y(p[1])}`).join(" ") });
    for (const [x, y] of s.points) {
      const dot = add("circle", { cx: X(x), cy: Y(y), r: 4, fill: s.colour, class: "point", "data-step": x, style: "cursor:pointer" });
      const title = document.createElementNS(ns, "title");
      title.textContent = `${s.name}: update ${x}: ${fmt(y)}`; dot.append(title);
      dot.addEventListener("click", () => onPick(x));
    }
  });
  return svg;
}

function curve(metrics, key) {
  return metrics.filter((r) => typeof r[key] === "number" && !r.empty_steps).map((r) => [r.step, r[key]]);
}

// --- views ------------------------------------------------------------------------------------

async function showRun() {
  const runs = [await api("run")];
  if (runs[0].runs.length > 1) runs.push(await api("run", { run: 1 }));
  const [run] = runs;
  const keys = [...new Set(runs.flatMap((r) => r.metrics.flatMap(Object.keys)))].filter(
    (k) => runs.some((r) => r.metrics.some((m) => typeof m[k] === "number"))).sort();
  const select = el("select", { id: "curve", onchange: (e) => { state.curve = e.target.value; render(); } },
    keys.map((k) => el("option", k === state.curve ? { value: k, selected: "" } : { value: k }, k)));
  const colours = ["#2e7d32", "#6a1b9a"];
  const series = runs.map((r, i) => ({ name: r.path, colour: colours[i], points: curve(r.metrics, state.curve) }));
  const marks = [
    ...run.evaluations.map((e) => ({ kind: "eval", step: e.step, label: `evaluation: ${e.name}` })),
    ...run.events.map((e) => ({ kind: "event", step: e.update ?? e.step ?? 0,
      label: `guard ${e.monitor}: ${e.action}${e.message ? " — " + e.message : ""}` })),
  ];
  const updates = [...new Set(run.metrics.filter((m) => !m.empty_steps).map((m) => m.step))];
  view.replaceChildren(
    el("h2", {}, `run ${run.path}`),
    el("p", {}, `${run.episodes} episodes, ${run.metrics.length} metrics rows, `,
      `${run.events.length} guard events`),
    el("label", {}, "curve ", select),
    el("div", { class: "legend" }, series.map((s) => el("span", { style: `color:${s.colour}` }, `■ ${s.name} `)),
      "  dashed blue: evaluations, red: guard events; click a point for its update"),
    plot(series, marks, (step) => { location.hash = `#/update/${step}`; }),
    el("h3", {}, "updates"),
    el("p", { id: "update-links" }, updates.map((u) => [el("a", { href: `#/update/${u}` }, u), " "])),
    el("h3", {}, "resolved config"),
    el("pre", { id: "config" }, JSON.stringify(run.config, null, 2)));
}

async function showUpdate(update) {
  const { episodes } = await api("update", { update });
  const groups = new Map();
  for (const e of episodes) {
    if (!groups.has(e.group)) groups.set(e.group, []);
    groups.get(e.group).push(e);
  }
  view.replaceChildren(el("h2", {}, `update ${update}`),
    el("p", {}, `${episodes.length} episodes in ${groups.size} groups (advantage: mean over sampled tokens)`),
    el("div", { class: "groups" }, [...groups].map(([g, rows]) => el("div", { class: "group" },
      el("strong", {}, `group ${g}`), el("div", {}, `task ${rows[0].task_id}`),
      rows.map((e) => el("div", { class: "card" }, episodeLink(e),
        ` return ${fmt(e.reward)} · advantage ${fmt(e.advantage)} · `,
        el("span", { class: `outcome-${e.outcome}` }, e.outcome)))))));
}

const COLOURS = {
  none: null,
  logprob: { label: "sampling logprob (white 0, red -5 and below)", value: (t, i) => t.loss_mask[i] ? t.logprob[i] : null, colour: (v) => `rgba(229,57,53,${Math.min(1, -v / 5)})` },
  drift: { label: "trainer - sampler logprob (red: |gap| 0.5 and more)", value: (t, i) => t.loss_mask[i] && t.trainer_logprob ? t.trainer_logprob[i] - t.logprob[i] : null, colour: (v) => `rgba(229,57,53,${Math.min(1, Math.abs(v) / 0.5)})` },
  advantage: { label: "advantage (green positive, red negative)", value: (t, i) => t.loss_mask[i] && t.advantage ? t.advantage[i] : null, colour: (v) => v >= 0 ? `rgba(46,125,50,${Math.min(1, v)})` : `rgba(229,57,53,${Math.min(1, -v)})` },
  mask: { label: "loss mask (green: sampled, trained on)", value: (t, i) => (t.loss_mask[i] ? 1 : 0), colour: (v) => v ? "rgba(46,125,50,.35)" : "transparent" },
};

function tokenSpans(tokens, mode) {
  const spec = COLOURS[mode];
  return tokens.text.map((text, i) => {
    const attrs = { class: "tok", "data-i": i };
    if (spec) {
      const v = spec.value(tokens, i);
      if (v !== null && v !== undefined) {
        attrs.style = `background:${spec.colour(v)}`; attrs.title = `${mode} ${fmt(v)}`; attrs["data-value"] = v;
      }
    }
    return el("span", attrs, text);
  });
}

function message(m) {
  const calls = (m.tool_calls || []).map((c) => el("pre", { class: "tool-call" },
    `call ${c.function?.name ?? c.name}(${typeof c.function?.arguments === "string" ? c.function.arguments : JSON.stringify(c.function?.arguments ?? c.arguments)})`));
  const content = typeof m.content === "string" ? m.content : JSON.stringify(m.content);
  return el("div", { class: `msg ${m.role}` },
    el("div", { class: "role" }, m.role + (m.name ? ` ${m.name}` : "") + (m.tool_call_id ? ` (result of ${m.tool_call_id})` : "")),
    content, calls);
}

async function showEpisode(update, index) {
  const e = await api("episode", { update, index });
  const tokens = el("div", { class: "tokens", id: "tokens" }, tokenSpans(e.tokens, state.colour));
  const legend = el("div", { class: "legend", id: "colour-legend" }, COLOURS[state.colour]?.label ?? "");
  const select = el("select", { id: "colour", onchange: (ev) => {
    state.colour = ev.target.value;
    tokens.replaceChildren(...tokenSpans(e.tokens, state.colour));
    legend.textContent = COLOURS[state.colour]?.label ?? "";
  } }, Object.keys(COLOURS).map((k) => el("option", k === state.colour ? { value: k, selected: "" } : { value: k }, k)));
  const components = (e.reward_components || []).map((c, i) => el("tr", {}, el("td", {}, `turn ${i + 1}`),
    el("td", {}, fmt(e.rewards?.[i])), el("td", {}, c ? JSON.stringify(c) : "")));
  view.replaceChildren(
    el("h2", {}, `episode ${update}/${index}`),
    el("table", { id: "episode-facts" },
      [["outcome", e.outcome], ["cause", e.cause], ["success", e.success], ["return", e.reward],
       ["turns", e.turns], ["trained", e.trained], ["env", e.env_id], ["seed", e.seed], ["group", e.group],
       ["file", e.file]].map(([k, v]) => el("tr", {}, el("th", {}, k), el("td", { id: `fact-${k}` }, fmt(v)))),
      el("tr", {}, el("th", {}, "task"), el("td", {}, el("a", { href: `#/task/${encodeURIComponent(e.task_id)}` }, e.task_id ?? "")))),
    el("h3", {}, "reward components"), el("table", {}, el("tr", {}, el("th", {}, "turn"), el("th", {}, "reward"), el("th", {}, "components")), components),
    el("h3", {}, "conversation"), el("div", { id: "conversation" }, (e.messages || []).map(message)),
    el("h3", {}, "tokens"), el("label", {}, "colour by ", select), legend, tokens,
    el("h3", {}, "env info"), el("pre", {}, JSON.stringify({ reset: e.reset_info, steps: e.infos }, null, 2)));
}

const FILTERS = ["outcome", "success", "reward_min", "reward_max", "task_id", "text", "update_min", "update_max"];

async function showSearch(params) {
  const offset = Number(params.get("offset") || 0), limit = 50;
  const query = Object.fromEntries(FILTERS.filter((f) => params.get(f)).map((f) => [f, params.get(f)]));
  const page = await api("episodes", { ...query, offset, limit });
  const input = (name, attrs) => el("label", {}, `${name} `, el("input", { name, id: `f-${name}`, value: params.get(name) || "", ...attrs }));
  const choice = (name, options) => el("label", {}, `${name} `, el("select", { name, id: `f-${name}` },
    ["", ...options].map((o) => el("option", o === (params.get(name) || "") ? { value: o, selected: "" } : { value: o }, o || "any"))));
  const form = el("form", { class: "filters", onsubmit: (ev) => {
    ev.preventDefault();
    const data = new URLSearchParams([...new FormData(form)].filter(([, v]) => v));
    location.hash = `#/search?${data}`;
  } },
    choice("outcome", ["success", "failed", "invalid", "timeout", "truncated", "infra"]),
    choice("success", ["true", "false"]), input("reward_min"), input("reward_max"), input("task_id"),
    input("text"), input("update_min"), input("update_max"), el("button", { type: "submit", id: "apply" }, "search"));
  const go = (o) => { params.set("offset", o); location.hash = `#/search?${params}`; };
  view.replaceChildren(el("h2", {}, "episodes"), form,
    el("p", { id: "result-count" }, `${page.total} episodes; showing ${page.total ? offset + 1 : 0}–${offset + page.episodes.length}`),
    episodeTable(page.episodes),
    el("p", {}, offset > 0 ? el("button", { onclick: () => go(Math.max(0, offset - limit)) }, "previous") : "",
      offset + limit < page.total ? el("button", { id: "next", onclick: () => go(offset + limit) }, "next") : ""));
}

async function showTask(taskId) {
  const { episodes } = await api("task", { task_id: taskId });
  view.replaceChildren(el("h2", {}, `task ${taskId}`), el("p", {}, `${episodes.length} episodes across updates`),
    episodeTable(episodes));
}

async function showLook() {
  const lists = await api("look");
  view.replaceChildren(el("h2", {}, "look here"), Object.entries(lists).map(([name, rows]) => [
    el("h3", {}, `${name} (${rows.length})`),
    rows.length ? episodeTable(rows, ["answer_tokens", "drift"]) : el("p", {}, "none")]));
}

// --- routing and following a live run --------------------------------------------------------

async function render() {
  const [path, query] = location.hash.slice(1).split("?");
  const parts = path.split("/").filter(Boolean).map(decodeURIComponent);
  try {
    if (parts[0] === "update") await showUpdate(parts[1]);
    else if (parts[0] === "episode") await showEpisode(parts[1], parts[2]);
    else if (parts[0] === "search") await showSearch(new URLSearchParams(query || ""));
    else if (parts[0] === "task") await showTask(parts.slice(1).join("/"));
    else if (parts[0] === "look") await showLook();
    else await showRun();
  } catch (error) {
    view.replaceChildren(el("div", { class: "error" }, el("h1", {}, "This trace cannot be shown"),
      el("p", { id: "error-message" }, error.message)));
  }
}

async function follow() {
  try {
    const { updates, metrics } = await api("updates");
    const key = JSON.stringify([updates.map((u) => [u.file, u.mtime]), metrics.length]);
    document.getElementById("live-status").textContent = `${updates.length} update files, ${metrics.length} metrics rows`;
    if (state.updates !== null && key !== state.updates) {
      const [path] = location.hash.slice(1).split("?");
      if (!path.startsWith("/episode")) await render(); // an open episode does not change
    }
    state.updates = key;
  } catch (error) {
    document.getElementById("live-status").textContent = `not following: ${error.message}`;
  }
}

window.addEventListener("hashchange", render);
render();
follow();
setInterval(follow, 2000);
