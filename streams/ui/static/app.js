// dialcheck ui: renders the server's snapshot, then applies turn / verdict / evict events (SSE).
// DOM is built with textContent only: turn and passage text is untrusted input.
"use strict";

const ICONS = { "SUPPORTS": "✔", "REFUTES": "✘", "NOT ENOUGH INFO": "?", "error": "⚠", "pending": "…" };
const main = document.getElementById("conversations");
const statusEl = document.getElementById("status");
const convs = new Map();  // conversation id → {section, list, turns: Map(turn id → li)}

function el(tag, attrs = {}, text) {
  const e = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs)) e.setAttribute(k, v);
  if (text !== undefined) e.textContent = text;
  return e;
}

function conversation(id) {
  let c = convs.get(id);
  if (!c) {
    const section = document.getElementById("conversation-tpl").content.firstElementChild.cloneNode(true);
    section.dataset.conversationId = id;
    section.querySelector(".conv-id").textContent = id;
    c = { section, list: section.querySelector(".turns"), turns: new Map() };
    convs.set(id, c);
  }
  main.prepend(c.section);  // most recently active first
  return c;
}

function turnItem(c, turnId) {
  let li = c.turns.get(turnId);
  if (!li) {
    li = el("li", { class: "turn", "data-turn-id": turnId });
    li.append(el("span", { class: "speaker" }), el("span", { class: "text" }), el("div", { class: "check" }));
    c.turns.set(turnId, li);
    c.list.append(li);
  }
  return li;
}

function badgeLabel(v) { return v.status && v.status.state === "error" ? "error" : v.label; }

// where the window lies in its passage: exact, else word by word across any whitespace
// (bi-sentence windows are two sentences joined by one space)
function findWindow(text, win) {
  if (!win) return null;
  const i = text.indexOf(win);
  if (i >= 0) return [i, i + win.length];
  const words = win.trim().split(/\s+/).map((w) => w.replace(/[.*+?^${}()|[\]\\]/g, "\\$&"));
  const m = new RegExp(words.join("\\s+")).exec(text);
  return m ? [m.index, m.index + m[0].length] : null;
}

// the evidence window highlighted inside its passage (or after it, if it cannot be found there)
function passageWithWindow(text, win) {
  const p = el("div", { class: "passage-text" });
  const span = findWindow(text, win);
  if (!span) {
    p.append(document.createTextNode(text));
    if (win) { p.append(el("br")); p.append(el("mark", {}, win)); }
  } else {
    p.append(document.createTextNode(text.slice(0, span[0])), el("mark", {}, text.slice(span[0], span[1])),
             document.createTextNode(text.slice(span[1])));
  }
  return p;
}

function rewriteLine(surface) {
  const g = surface && surface.gate;
  if (!g) return null;
  const accepted = !!g.accepted;
  const div = el("div", { class: "rewrite", "data-accepted": String(accepted) });
  div.append(el("span", { class: "verdict-word" }, accepted ? "✔ rewrite accepted" : "✘ rewrite rejected"),
             document.createTextNode(` (gate score ${g.score.toFixed(3)} ${accepted ? "≥" : "<"} τ ${g.threshold.toFixed(2)}): `),
             el("q", {}, surface.candidate_text || ""));
  return div;
}

function evidencePanel(v, id) {
  const panel = el("div", { class: "evidence", id, hidden: "" });
  if (!v.evidence.length) panel.append(el("div", {}, "no evidence window (nothing retrieved or verified)"));
  for (const e of v.evidence) {
    const item = el("div", { class: "passage", "data-passage-id": e.passage_id });
    item.append(el("div", { class: "passage-title" }, e.title),
                passageWithWindow(e.text || "", e.window || ""),
                el("div", { class: "probs" },
                   `entail ${(+e.entail).toFixed(2)} · neutral ${(+e.neutral).toFixed(2)} · contradict ${(+e.contradict).toFixed(2)}`));
    panel.append(item);
  }
  return panel;
}

function renderCheck(li, turn, v) {
  const box = li.querySelector(".check");
  box.replaceChildren();
  if (!v) {
    if (turn && turn.check) box.append(el("span", { class: "badge", "data-label": "pending" }, `${ICONS.pending} checking`));
    return;
  }
  const label = badgeLabel(v);
  const panelId = `ev-${v.claim_id}`;
  const badge = el("button", { class: "badge", type: "button", "data-label": label, "data-claim-id": v.claim_id,
                               "aria-expanded": "false", "aria-controls": panelId,
                               title: "show the evidence" });
  badge.append(el("span", { "aria-hidden": "true" }, ICONS[label] || "•"), document.createTextNode(` ${label}`));
  const panel = evidencePanel(v, panelId);
  badge.addEventListener("click", () => {
    const open = panel.hidden;
    panel.hidden = !open;
    badge.setAttribute("aria-expanded", String(open));
  });
  box.append(badge);
  const rw = rewriteLine(v.surface);
  if (rw) box.append(rw);
  if (v.status && v.status.state !== "ok" && v.status.reason) box.append(el("div", { class: "status-reason" }, `${v.status.state}: ${v.status.reason}`));
  box.append(panel);
}

const turnsById = new Map(), verdictsByTurn = new Map();

function applyTurn(t) {
  turnsById.set(t.turn_id, t);
  const c = conversation(t.conversation_id);
  const li = turnItem(c, t.turn_id);
  li.dataset.speaker = t.speaker;
  li.querySelector(".speaker").textContent = t.speaker;
  li.querySelector(".text").textContent = t.text;
  renderCheck(li, t, verdictsByTurn.get(t.turn_id));
}

function applyVerdict(v) {
  verdictsByTurn.set(v.turn_id, v);
  const c = conversation(v.conversation_id);
  const li = turnItem(c, v.turn_id);
  if (!turnsById.has(v.turn_id)) li.querySelector(".text").textContent = v.claim;  // verdict before its turn
  renderCheck(li, turnsById.get(v.turn_id), v);
}

function evict(id) {
  const c = convs.get(id);
  if (!c) return;
  for (const turnId of c.turns.keys()) { turnsById.delete(turnId); verdictsByTurn.delete(turnId); }
  c.section.remove();
  convs.delete(id);
}

function applySnapshot(s) {
  for (const id of [...convs.keys()]) evict(id);
  for (const conv of [...s.conversations].reverse()) {  // oldest first, so the newest ends on top
    for (const t of conv.turns) applyTurn(t);
    for (const v of conv.verdicts) applyVerdict(v);
  }
}

function connect() {
  const es = new EventSource("/events");
  es.addEventListener("snapshot", (m) => { applySnapshot(JSON.parse(m.data)); statusEl.dataset.state = "live"; statusEl.textContent = "live"; });
  es.addEventListener("turn", (m) => applyTurn(JSON.parse(m.data).turn));
  es.addEventListener("verdict", (m) => applyVerdict(JSON.parse(m.data).verdict));
  es.addEventListener("evict", (m) => evict(JSON.parse(m.data).conversation_id));
  es.onerror = () => { statusEl.dataset.state = "reconnecting"; statusEl.textContent = "reconnecting…"; };
}

connect();
