// nemori view: reads the server's JSON and draws it. Every text goes in through
// textContent (never as markup), so what a chat holds is shown, never run.
"use strict";

const state = { first: null, last: null, asOf: null, episodes: [], facts: [], unbuilt: [] };

function el(tag, cls, text) {
  const node = document.createElement(tag);
  if (cls) node.className = cls;
  if (text !== undefined && text !== null) node.textContent = String(text);
  return node;
}

function clear(node) {
  while (node.firstChild) node.removeChild(node.firstChild);
}

async function get(path) {
  const answer = await fetch(path, { headers: { Accept: "application/json" } });
  const body = await answer.json();
  if (!answer.ok) throw new Error(body.error || answer.statusText);
  return body;
}

function status(text) {
  document.getElementById("status").textContent = text || "";
}

function query() {
  return state.asOf === null ? "" : "?as_of=" + encodeURIComponent(state.asOf);
}

function drawTimeline() {
  const box = document.getElementById("timeline");
  clear(box);
  const words = document.getElementById("search").value.trim().toLowerCase();
  const cut = Number(document.getElementById("zoom").value);
  const shown = state.episodes.filter((e) => !words || (e.title + " " + e.narrative).toLowerCase().includes(words));
  box.appendChild(el("h2", null, shown.length + " episodes"));
  let group = null;
  for (const e of shown) {
    const key = e.start.slice(0, cut);
    if (key !== group) {
      group = key;
      box.appendChild(el("h3", "day", key));
    }
    const row = el("div", "episode");
    row.dataset.id = e.id;
    row.appendChild(el("span", "when", e.start.slice(11, 16)));
    row.appendChild(el("span", "title", e.title));
    row.addEventListener("click", () => showEpisode(e.id));
    box.appendChild(row);
  }
  drawUnbuilt(box, words, cut);
}

// Messages stored but not built into episodes yet (`ingest --build later`): until the build runs they are
// the memory, so they are shown as said, by day, under the episodes.
function drawUnbuilt(box, words, cut) {
  const until = state.asOf === null ? null : Date.parse(state.asOf);
  const shown = state.unbuilt.filter(
    (m) => (until === null || Date.parse(m.timestamp) <= until) && (!words || (m.speaker + " " + m.content).toLowerCase().includes(words)),
  );
  if (!shown.length) return;
  box.appendChild(el("h2", "unbuilt", shown.length + " messages not built into episodes yet"));
  box.appendChild(el("p", "hint", "Searchable and answerable as they are; `nemori build` makes their episodes and facts."));
  let group = null;
  for (const m of shown) {
    const key = m.timestamp.slice(0, cut);
    if (key !== group) {
      group = key;
      box.appendChild(el("h3", "day", key));
    }
    const row = el("div", "message");
    row.appendChild(el("span", "when", m.timestamp.slice(11, 16)));
    row.appendChild(el("span", "speaker", m.speaker));
    row.appendChild(el("span", null, m.content));
    box.appendChild(row);
  }
}

function drawFacts() {
  const box = document.getElementById("facts");
  clear(box);
  box.appendChild(el("h2", null, state.facts.length + " facts"));
  for (const f of state.facts) {
    const row = el("div", f.status === "active" ? "fact" : "fact superseded");
    const until = f.valid_until ? f.valid_until.slice(0, 10) : "now";
    row.appendChild(el("span", "when", (f.valid_from ? f.valid_from.slice(0, 10) : "?") + " to " + until));
    row.appendChild(el("span", null, f.text));
    if (f.superseded_by) row.appendChild(el("span", "when", " replaced by F" + f.superseded_by));
    row.addEventListener("click", () => showFact(f.id));
    box.appendChild(row);
  }
}

async function showEpisode(id) {
  const box = document.getElementById("detail");
  try {
    const e = await get("/api/episode/" + id);
    clear(box);
    box.appendChild(el("h2", null, "E" + e.id + " " + e.title));
    box.appendChild(el("div", "when", e.start + " to " + e.end));
    box.appendChild(el("div", "label", "narrative"));
    box.appendChild(el("div", "narrative", e.narrative));
    box.appendChild(el("div", "label", e.messages.length + " messages"));
    for (const m of e.messages) {
      const row = el("div", "message");
      row.appendChild(el("span", "speaker", m.speaker));
      row.appendChild(el("span", "when", (m.timestamp || "").slice(0, 16)));
      row.appendChild(el("div", null, m.content));
      box.appendChild(row);
    }
    status("");
  } catch (err) {
    status(err.message);
  }
}

async function showFact(id) {
  const box = document.getElementById("detail");
  try {
    const f = await get("/api/fact/" + id);
    clear(box);
    box.appendChild(el("h2", null, "F" + f.id + " " + f.text));
    box.appendChild(el("div", "when", (f.valid_from || "?") + " to " + (f.valid_until || "now") + " (" + f.status + ", " + f.origin + ")"));
    if (f.superseded_by) box.appendChild(el("div", null, "replaced by F" + f.superseded_by + ": " + (f.superseded_reason || "")));
    for (const r of f.replaced || []) box.appendChild(el("div", null, "it replaced F" + r.id + ": " + r.text));
    if (f.episode) {
      box.appendChild(el("div", "label", "distilled from"));
      const row = el("div", "episode", "E" + f.episode.id + " " + f.episode.title);
      row.addEventListener("click", () => showEpisode(f.episode.id));
      box.appendChild(row);
    }
    const p = f.prediction || {};
    box.appendChild(el("div", "label", "what memory predicted of that episode"));
    box.appendChild(el("div", "narrative", p.recorded ? p.predicted || p.note || "(nothing)" : p.note));
    if (p.recorded && p.missed) {
      box.appendChild(el("div", "label", "what the prediction missed (the facts made of it)"));
      for (const m of p.missed) box.appendChild(el("div", "narrative", "- " + m));
    }
    status("");
  } catch (err) {
    status(err.message);
  }
}

async function load() {
  try {
    const [episodes, facts, unbuilt] = await Promise.all([
      get("/api/episodes" + query()),
      get("/api/facts" + query()),
      get("/api/unbuilt"),
    ]);
    state.episodes = episodes.episodes;
    state.facts = facts.facts;
    state.unbuilt = unbuilt.messages;
    drawTimeline();
    drawFacts();
    status("");
  } catch (err) {
    status(err.message);
  }
}

function onSlide() {
  const slider = document.getElementById("asof");
  const label = document.getElementById("asof-label");
  if (state.first === null || Number(slider.value) >= Number(slider.max)) {
    state.asOf = null;
    label.textContent = "now";
  } else {
    const at = state.first + ((state.last - state.first) * Number(slider.value)) / Number(slider.max);
    state.asOf = new Date(at * 1000).toISOString();
    label.textContent = state.asOf.slice(0, 16).replace("T", " ");
  }
  load();
}

async function start() {
  try {
    const summary = await get("/api/summary");
    state.first = summary.first;
    state.last = summary.last;
    document.getElementById("who").textContent = "user " + summary.user + " in " + summary.store;
  } catch (err) {
    status(err.message);
  }
  document.getElementById("search").addEventListener("input", drawTimeline);
  document.getElementById("zoom").addEventListener("change", drawTimeline);
  document.getElementById("asof").addEventListener("change", onSlide);
  await load();
  // A link may name what to open: #E3 (an episode) or #F7 (a fact).
  const wanted = /^#([EF])(\d+)$/.exec(window.location.hash);
  if (wanted) await (wanted[1] === "E" ? showEpisode(Number(wanted[2])) : showFact(Number(wanted[2])));
}

document.addEventListener("DOMContentLoaded", start);
