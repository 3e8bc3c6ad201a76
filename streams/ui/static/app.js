// dialcheck ui: renders the server's snapshot, then applies turn / verdict / evict / counts events (SSE).
// DOM is built with textContent only: turn and passage text is untrusted input.
// The server validates every record (streams/ui/store.py); the page still treats each item as
// untrusted: each is drawn inside its own guard, so one item it cannot draw never stops the others.
"use strict";

const ICONS = { "SUPPORTS": "✔", "REFUTES": "✘", "NOT ENOUGH INFO": "?", "error": "⚠", "pending": "…" };
const main = document.getElementById("conversations");
const statusEl = document.getElementById("status");
const countersEl = document.getElementById("counters");
const filterEl = document.getElementById("filter");
const internalsEl = document.getElementById("internals");
const LABEL_ORDER = ["REFUTES", "SUPPORTS", "NOT ENOUGH INFO", "error", "pending"];
// the display hint's tone a label has by default (schema 2.1); a different tone is written on the badge
const LABEL_TONE = { "SUPPORTS": "supported", "REFUTES": "disputed", "NOT ENOUGH INFO": "unverified" };
const TONES = ["supported", "disputed", "unverified"];
// schema 2.4's evidence[].source, in words
const SOURCES = { "turn": "given with the reply", "conversation": "the conversation's knowledge", "index": "dialcheck's index" };
// how an underlined claim is described (underlineKind)
const UNDERLINE_WORDS = { "disputed": "disputed by the passage it was checked against",
                          "unsupported": "not supported by the passages it was checked against" };
const CONFIDENCES = ["high", "medium", "low"];
// conversation id → {section, list, slots: Map(turn id → {li, turn, verdict})}: a turn id means
// something only inside its conversation (Bob's turn "1" is not Alice's turn "1")
const convs = new Map();
let limits = { max_turns: 100, max_verdicts: 100 };
let serverCounts = {};
let renderErrors = 0;
// this page's judgements: one feedback id per page and claim, so a changed mind replaces the first click
const PAGE_ID = (window.crypto && crypto.randomUUID) ? crypto.randomUUID() : `${Date.now()}-${Math.random()}`;
const precisionEl = document.getElementById("precision");
const modelEl = document.getElementById("model");
const alarmEl = document.getElementById("alarm");

function el(tag, attrs = {}, text) {
  const e = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs)) e.setAttribute(k, v);
  if (text !== undefined) e.textContent = text;
  return e;
}

const str = (x) => (typeof x === "string" ? x : "");
const num = (x, digits) => (typeof x === "number" && Number.isFinite(x) ? x.toFixed(digits) : "?");
const arr = (x) => (Array.isArray(x) ? x : []);
const finite = (x) => (typeof x === "number" && Number.isFinite(x) ? x : null);
const obj = (x) => (x && typeof x === "object" && !Array.isArray(x) ? x : {});
const oneOf = (x, allowed) => (allowed.includes(x) ? x : null);

// "840 ms" / "2.3 s" / "1.2 min": a produce→verdict latency for people
function duration(ms) {
  if (ms === null) return "?";
  if (Math.abs(ms) < 1000) return `${Math.round(ms)} ms`;
  if (Math.abs(ms) < 60000) return `${(ms / 1000).toFixed(1)} s`;
  return `${(ms / 60000).toFixed(1)} min`;
}

function median(xs) {
  if (!xs.length) return null;
  const s = [...xs].sort((a, b) => a - b), m = s.length >> 1;
  return s.length % 2 ? s[m] : (s[m - 1] + s[m]) / 2;
}

// an evidence source link only for an absolute http(s) URL with a host and no credentials (the
// server checks the same; javascript:, data: and relative links are never drawn)
function safeHref(u) {
  if (typeof u !== "string" || !u || u.length > 2048) return null;
  let url;
  try { url = new URL(u); } catch (e) { return null; }
  if ((url.protocol !== "http:" && url.protocol !== "https:") || !url.hostname || url.username || url.password) return null;
  return url;
}

// schema 2.1's display hint, only its known values (older verdicts have none)
function displayHint(v) {
  const d = obj(v.display);
  return { show: typeof d.show === "boolean" ? d.show : null, tone: oneOf(d.tone, TONES),
           confidence: oneOf(d.confidence, CONFIDENCES) };
}

function showCounters() {
  const rejected = +serverCounts.rejected || 0;
  countersEl.dataset.rejected = String(rejected);
  countersEl.dataset.renderErrors = String(renderErrors);
  countersEl.textContent = `${convs.size} conversations · ${rejected} records rejected by the server` +
    (renderErrors ? ` · ${renderErrors} items the page could not show` : "");
}

// one item that cannot be drawn is counted and logged, never thrown into the caller's loop
function guarded(what, fn) {
  return (item) => {
    try {
      fn(item);
    } catch (e) {
      renderErrors += 1;
      console.warn(`dialcheck ui: could not show a ${what}:`, e);
      showCounters();
    }
  };
}

function conversation(id) {
  if (typeof id !== "string") throw new TypeError("conversation_id is not a string");
  let c = convs.get(id);
  if (!c) {
    const section = document.getElementById("conversation-tpl").content.firstElementChild.cloneNode(true);
    section.dataset.conversationId = id;
    section.querySelector(".conv-id").textContent = id;
    c = { section, list: section.querySelector(".turns"), slots: new Map() };
    convs.set(id, c);
  }
  main.prepend(c.section);  // most recently active first
  return c;
}

function slot(c, turnId) {
  if (typeof turnId !== "string") throw new TypeError("turn_id is not a string");
  let s = c.slots.get(turnId);
  if (!s) {
    const li = el("li", { class: "turn", "data-turn-id": turnId });
    li.append(el("span", { class: "speaker" }), el("span", { class: "text" }), el("div", { class: "check" }));
    s = { li, turn: null, verdict: null, claims: new Map(), claimJudging: new Map(), at: Date.now() / 1000 };
    s.judging = { current: () => li.querySelector(".check > .feedback") };
    c.slots.set(turnId, s);
    c.list.append(li);
    // the page keeps no more than the server does (oldest first)
    while (c.slots.size > (+limits.max_turns || 100) + (+limits.max_verdicts || 100)) {
      const [oldId, old] = c.slots.entries().next().value;
      old.li.remove();
      c.slots.delete(oldId);
    }
  }
  return s;
}

function badgeLabel(v) { return v.status && v.status.state === "error" ? "error" : str(v.label); }

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

// the checker's internals (the gate's decision on a rewrite, the probabilities, the latency) are for
// whoever tunes it, not for the people in the chat: drawn on every verdict but shown only while the
// header's "show checker details" toggle is on
function internals(v) {
  const box = el("div", { class: "internals" });
  const surface = obj(v.surface);
  const g = surface.gate;
  if (g && typeof g === "object") {
    const accepted = g.accepted === true;
    const rw = el("div", { class: "rewrite", "data-accepted": String(accepted) });
    rw.append(el("span", { class: "verdict-word" }, accepted ? "rewrite used" : "rewrite not used"),
              document.createTextNode(` (gate score ${num(g.score, 3)} ${accepted ? "≥" : "<"} τ ${num(g.threshold, 2)}): `),
              el("q", {}, str(surface.candidate_text)));
    box.append(rw);
  }
  const p = obj(v.probabilities);
  const lat = finite(v.latency_ms);
  box.append(el("div", { class: "internals-numbers" },
                `surface ${str(surface.name) || "?"} · P(S) ${num(p.SUPPORTS, 2)} · P(R) ${num(p.REFUTES, 2)} · ` +
                `P(NEI) ${num(p["NOT ENOUGH INFO"], 2)}` + (lat !== null ? ` · verdict ${duration(lat)} after the turn` : "")));
  return box;
}

function evidencePanel(v, id) {
  const panel = el("div", { class: "evidence", id, hidden: "" });
  const evidence = arr(v.evidence);
  if (!evidence.length) panel.append(el("div", {}, "no evidence window (nothing retrieved or verified)"));
  for (const e of evidence) {
    if (!e || typeof e !== "object") continue;
    const item = el("div", { class: "passage", "data-passage-id": str(e.passage_id) });
    const title = el("div", { class: "passage-title" });
    title.append(el("span", {}, str(e.title)));
    const source = oneOf(e.source, Object.keys(SOURCES));
    if (source) title.append(el("span", { class: "passage-source", "data-source": source }, SOURCES[source]));
    const href = safeHref(e.url);
    if (href) {
      const a = el("a", { class: "source", href: href.href, rel: "noopener noreferrer", target: "_blank",
                          title: href.href }, `source: ${href.hostname} ↗`);
      title.append(document.createTextNode(" "), a);
    }
    item.append(title,
                passageWithWindow(str(e.text), str(e.window)),
                el("div", { class: "probs" },
                   `entail ${num(e.entail, 2)} · neutral ${num(e.neutral, 2)} · contradict ${num(e.contradict, 2)}`));
    panel.append(item);
  }
  return panel;
}

// A claim is underlined unless it is shown as supported: a SUPPORTS the display hint does not hide.
// "disputed" for a REFUTES the hint shows; "unsupported" for the rest (NOT ENOUGH INFO: the passages
// do not decide it; a hidden badge: the checker is not sure enough; an error: not checked). The
// product's promise is "what is not underlined is backed", so doubt underlines (docs/integration.md).
function underlineKind(v) {
  const label = badgeLabel(v), shown = displayHint(v).show !== false;
  if (label === "SUPPORTS" && shown) return null;
  return label === "REFUTES" && shown ? "disputed" : "unsupported";
}

// a claim_span [start, end) in code points of `chars` (Python's str offsets), or null if unusable
function spanIn(v, chars) {
  const sp = obj(v.claim_span);
  const ok = Number.isInteger(sp.start) && Number.isInteger(sp.end) && sp.start >= 0 && sp.start < sp.end && sp.end <= chars.length;
  return ok ? [sp.start, sp.end] : null;
}

// the turn's text with each claim that is not shown as supported underlined; the offsets are code
// points, so the text is sliced as Array.from(text) (a JavaScript string is UTF-16: an emoji before
// the claim would shift String.slice by one). Overlapping spans: the first wins.
function underlinedText(text, claims) {
  const chars = Array.from(text);
  const marks = [];
  for (const v of claims) {
    const span = spanIn(v, chars), kind = underlineKind(v);
    if (span && kind) marks.push({ span, kind, v });
  }
  marks.sort((a, b) => a.span[0] - b.span[0]);
  const out = [];
  let at = 0;
  for (const { span, kind, v } of marks) {
    if (span[0] < at) continue;
    out.push(document.createTextNode(chars.slice(at, span[0]).join("")));
    const claimId = str(v.claim_id);
    const u = el("span", { class: "claim", role: "button", tabindex: "0", "data-claim-id": claimId, "data-kind": kind,
                           "aria-expanded": "false", "aria-controls": `cl-${claimId}`,
                           title: `${UNDERLINE_WORDS[kind]}: click for the passage` }, chars.slice(span[0], span[1]).join(""));
    out.push(u);
    at = span[1];
  }
  out.push(document.createTextNode(chars.slice(at).join("")));
  return out;
}

// the passage an underlined claim was checked against, opened by clicking the underline, with
// right / wrong for that claim's verdict (a judgement of the claim itself, not of the whole reply)
function claimPanel(s, v) {
  const claimId = str(v.claim_id);
  const panel = evidencePanel(v, `cl-${claimId}`);
  panel.classList.add("claim-evidence");
  panel.dataset.claimId = claimId;
  const head = el("div", { class: "claim-head" });
  head.append(el("q", {}, str(v.claim)), document.createTextNode(` — ${badgeLabel(v)}`));
  if (!s.claimJudging.has(claimId)) {
    s.claimJudging.set(claimId, { current: () => s.li.querySelector(`.claim-evidence[data-claim-id="${CSS.escape(claimId)}"] .feedback`) });
  }
  head.append(feedbackButtons(s.claimJudging.get(claimId), v, badgeLabel(v)));
  const st = obj(v.status);
  if (str(st.reason)) head.append(el("div", { class: "status-reason" }, str(st.reason)));
  panel.prepend(head);
  return panel;
}

function toggleOnClick(opener, panel) {
  const flip = () => {
    const open = panel.hidden;
    panel.hidden = !open;
    opener.setAttribute("aria-expanded", String(open));
  };
  opener.addEventListener("click", flip);
  if (opener.tagName !== "BUTTON") opener.addEventListener("keydown", (e) => { if (e.key === "Enter" || e.key === " ") { e.preventDefault(); flip(); } });
}

function renderText(s) {
  const textEl = s.li.querySelector(".text");
  const claims = [...s.claims.values()];
  textEl.replaceChildren(...underlinedText(str(s.turn.text), claims));
  const box = s.li.querySelector(".check");
  for (const u of textEl.querySelectorAll("span.claim")) {
    const v = s.claims.get(u.dataset.claimId);
    const badge = box.querySelector("button.badge");
    if (badge && s.verdict && str(s.verdict.claim_id) === u.dataset.claimId) {  // the reply is this one claim: its underline opens the badge's panel
      u.setAttribute("aria-controls", badge.getAttribute("aria-controls"));
      const follow = () => { badge.click(); u.setAttribute("aria-expanded", badge.getAttribute("aria-expanded")); };
      u.addEventListener("click", follow);
      u.addEventListener("keydown", (e) => { if (e.key === "Enter" || e.key === " ") { e.preventDefault(); follow(); } });
      continue;
    }
    const panel = claimPanel(s, v);
    box.append(panel);
    toggleOnClick(u, panel);
  }
  s.li.dataset.underlined = String(textEl.querySelectorAll("span.claim").length);
}

function renderCheck(s) {
  const box = s.li.querySelector(".check");
  box.replaceChildren();
  const v = s.verdict;
  if (!v) {
    const pending = s.turn && s.turn.check === true;
    s.li.dataset.label = pending ? "pending" : "none";
    if (pending) box.append(el("span", { class: "badge", "data-label": "pending" }, `${ICONS.pending} checking`));
    return;
  }
  const label = badgeLabel(v);
  s.li.dataset.label = label;
  const hint = displayHint(v);
  // a verdict the app is told not to show (display.show false) is still drawn here, faded
  if (hint.show === false) s.li.dataset.muted = "true"; else delete s.li.dataset.muted;
  const claimId = str(v.claim_id);
  const panelId = `ev-${claimId}`;
  const about = [hint.tone && `tone ${hint.tone}`, hint.confidence && `${hint.confidence} confidence`,
                 hint.show === false && "not shown to users"].filter(Boolean);
  const badge = el("button", { class: "badge", type: "button", "data-label": label, "data-claim-id": claimId,
                               "aria-expanded": "false", "aria-controls": panelId,
                               title: `show the evidence${about.length ? ` (${about.join(", ")})` : ""}` });
  if (hint.tone) badge.dataset.tone = hint.tone;
  if (hint.confidence) badge.dataset.confidence = hint.confidence;
  if (hint.show !== null) badge.dataset.show = String(hint.show);
  badge.append(el("span", { "aria-hidden": "true" }, ICONS[label] || "•"), document.createTextNode(` ${label}`));
  // high confidence needs no mark; a tone other than the label's own is written out
  if (hint.confidence === "low" || hint.confidence === "medium") badge.append(el("span", { class: "confidence" }, `${hint.confidence} confidence`));
  if (hint.tone && label !== "error" && hint.tone !== LABEL_TONE[label]) badge.append(el("span", { class: "tone" }, `shown as ${hint.tone}`));
  const panel = evidencePanel(v, panelId);
  toggleOnClick(badge, panel);
  box.append(badge, feedbackButtons(s.judging, v, label));
  if (hint.show === false) box.append(el("span", { class: "muted-note" }, "not shown to users"));
  const st = obj(v.status);
  if (st.state !== "ok" && str(st.reason)) box.append(el("div", { class: "status-reason" }, `${str(st.state)}: ${str(st.reason)}`));
  box.append(internals(v), panel);
}

// right / wrong on a verdict: one record on chat.feedback (the server adds source "user" and the time).
// `j` keeps what was sent for that verdict across redraws: {feedbackState, judged, current()}, where
// current() finds the verdict's buttons as drawn now (a verdict event may redraw the turn)
function feedbackButtons(j, v, label) {
  const group = el("span", { class: "feedback", role: "group", "aria-label": "was this verdict right?" });
  if (label === "error") return group;
  group.dataset.state = j.feedbackState || "";
  for (const [judgement, icon] of [["right", "✓"], ["wrong", "✗"]]) {
    const b = el("button", { class: "fb", type: "button", "data-judgement": judgement,
                             "aria-pressed": String(j.judged === judgement), title: `this verdict is ${judgement}` });
    b.append(el("span", { "aria-hidden": "true" }, icon), document.createTextNode(` ${judgement}`));
    b.addEventListener("click", () => sendFeedback(j, v, judgement, group));
    group.append(b);
  }
  return group;
}

function sendFeedback(j, v, judgement, group) {
  const hint = displayHint(v);
  const body = { conversation_id: str(v.conversation_id), turn_id: str(v.turn_id), claim_id: str(v.claim_id),
                 label_shown: str(v.label), judgement, feedback_id: `${PAGE_ID}:${str(v.claim_id)}` };
  if (hint.confidence) body.confidence_shown = hint.confidence;
  if (hint.show !== null) body.shown = hint.show;
  j.feedbackState = group.dataset.state = "sending";
  fetch("/api/feedback", { method: "POST", headers: { "Content-Type": "application/json" }, body: JSON.stringify(body) })
    .then((r) => r.json().catch(() => ({})).then((answer) => {
      if (!r.ok) throw new Error(str(answer.reason) || `HTTP ${r.status}`);
      j.judged = judgement;
      markFeedback(j, group, "sent", `sent: ${judgement}`, judgement);
    }))
    .catch((e) => markFeedback(j, group, "error", `not sent (${e.message}); click again`));
}

// the answer to a click, on the clicked buttons and on the verdict's current ones
function markFeedback(j, group, state, title, judgement = null) {
  j.feedbackState = state;
  for (const g of new Set([group, j.current()])) {
    if (!g) continue;
    g.dataset.state = state;
    g.title = title;
    if (judgement) for (const b of g.querySelectorAll("button.fb")) b.setAttribute("aria-pressed", String(b.dataset.judgement === judgement));
  }
}

// live precision per badge (from the feedback so far) and the drift alarm's banner
function pct(x) { return typeof x === "number" && Number.isFinite(x) ? `${(100 * x).toFixed(1)} %` : "?"; }

function renderPrecision(p) {
  p = obj(p);
  const rows = arr(p.rows);
  precisionEl.replaceChildren(el("span", { class: "precision-title" },
    `shown-badge precision from feedback (${pct(p.confidence).replace(".0 ", " ")} interval):`));
  const alarms = [];
  for (const r of rows) {
    if (!r || typeof r !== "object") continue;
    const label = str(r.label);
    const n = finite(r.n) ?? 0;
    const item = el("span", { class: "precision-row", "data-label": label, "data-n": String(n),
                              "data-alarm": String(r.alarm === true) });
    if (finite(r.precision) !== null) item.dataset.precision = String(r.precision);
    const prec = finite(r.precision) === null ? "no feedback yet" : `${pct(r.precision)} [${pct(r.lower)}, ${pct(r.upper)}] n=${n}`;
    const cov = finite(r.coverage) === null ? "" : ` · shown ${pct(r.coverage)} of ${finite(r.verdicts) ?? "?"} verdicts`;
    item.textContent = `${label}: ${prec}${cov}`;
    precisionEl.append(item);
    if (r.alarm === true) alarms.push(`${label} badges are right at most ${pct(r.upper)} of the time`);
  }
  // per NLI model version of the judged verdicts (first seen first): a rollout judged before and after
  const versions = arr(p.versions).filter((v) => v && typeof v === "object");
  for (const v of versions) {
    const name = str(v.nli_version);
    const item = el("span", { class: "precision-version", "data-nli-version": name,
                              "data-alarm": String(arr(v.alarm).length > 0) });
    const parts = [];
    for (const r of arr(v.rows)) {
      if (!r || typeof r !== "object") continue;
      const n = finite(r.n) ?? 0;
      parts.push(finite(r.precision) === null ? `${str(r.label)} –` : `${str(r.label)} ${pct(r.precision)} [${pct(r.lower)}, ${pct(r.upper)}] n=${n}`);
      if (r.alarm === true && versions.length > 1) alarms.push(`${str(r.label)} badges of model ${name} are right at most ${pct(r.upper)} of the time`);
    }
    item.textContent = `model ${name}: ${parts.join(" · ")}`;
    precisionEl.append(item);
  }
  alarmEl.hidden = alarms.length === 0;
  alarmEl.textContent = alarms.length ? `Drift alarm: ${alarms.join("; ")} (upper end of the interval), below the ` +
    `${pct(p.target)} target. The display policy needs recalibrating (dialcheck calibrate --from-feedback).` : "";
}

// the model in use and the adaptation loop's last steps (the feedback store's model events)
function renderModel(m) {
  m = obj(m);
  const events = arr(m.events).filter((e) => e && typeof e === "object");
  modelEl.hidden = events.length === 0 && !m.live;
  const children = [el("span", { class: "model-live", "data-nli-version": str(m.live) },
                       `model in use: ${m.live ? str(m.live) : "as started"}`)];
  for (const e of events.slice().reverse()) {  // newest first
    const when = finite(e.ts) === null ? "" : new Date(e.ts * 1000).toLocaleString();
    const item = el("span", { class: "model-event", "data-event": str(e.event), "data-version": str(e.version) },
                    `${when} ${str(e.event).replace("_", " ")} ${str(e.version)}${e.reason ? ` — ${str(e.reason)}` : ""}`);
    children.push(item);
  }
  modelEl.replaceChildren(...children);
}

function render(s) {
  if (s.turn) {
    s.li.dataset.speaker = str(s.turn.speaker);
    s.li.querySelector(".speaker").textContent = str(s.turn.speaker);
    delete s.li.dataset.unseen;
  } else if (s.verdict) {  // verdict before (or without) its turn: show the claim it checked
    s.li.dataset.unseen = "true";
    s.li.querySelector(".text").textContent = str(s.verdict.claim);
  }
  renderCheck(s);
  if (s.turn) renderText(s);  // after the check: the claims' panels follow the badge's
}

// per conversation: turns, checked turns by label, median produce→verdict latency, the time of the
// last turn; and the filter
function summarise(c) {
  let turns = 0, last = 0, visible = 0;
  const labels = new Map();
  const latencies = [];
  for (const s of c.slots.values()) {
    if (s.turn) turns += 1;
    const label = s.li.dataset.label;
    if (s.verdict) labels.set(label, (labels.get(label) || 0) + 1);
    const lat = s.verdict ? finite(s.verdict.latency_ms) : null;
    if (lat !== null) latencies.push(lat);
    const ts = (s.turn && finite(s.turn.ts)) ?? (s.verdict && finite(s.verdict.ts)) ?? s.at;
    last = Math.max(last, ts);
    s.li.hidden = !!filterEl.value && label !== filterEl.value;
    if (!s.li.hidden) visible += 1;
  }
  const checked = [...labels.values()].reduce((a, b) => a + b, 0);
  const byLabel = LABEL_ORDER.filter((l) => labels.has(l)).map((l) => `${labels.get(l)} ${l}`).join(", ");
  const when = last ? new Date(last * 1000).toLocaleTimeString() : "";
  const med = median(latencies);
  const counts = c.section.querySelector(".conv-counts");
  counts.dataset.turns = String(turns);
  counts.dataset.checked = String(checked);
  counts.dataset.labels = JSON.stringify(Object.fromEntries(labels));
  if (med !== null) counts.dataset.latencyMs = String(med); else delete counts.dataset.latencyMs;
  counts.textContent = `${turns} turn${turns === 1 ? "" : "s"} · ${checked} checked${byLabel ? `: ${byLabel}` : ""}` +
    (med !== null ? ` · median ${duration(med)} to verdict` : "") + (when ? ` · last turn ${when}` : "");
  c.section.hidden = !!filterEl.value && visible === 0;
}

function applyTurn(t) {
  const c = conversation(t.conversation_id);
  const s = slot(c, t.turn_id);
  s.turn = t;
  render(s);
  summarise(c);
}

function applyVerdict(v) {
  const c = conversation(v.conversation_id);
  const s = slot(c, v.turn_id);
  // the badge is the turn's summary over its claims (schema 2.4), else its one verdict; every claim
  // verdict with a span may be underlined
  if (v.summary === true || !s.verdict || s.verdict.summary !== true) s.verdict = v;
  if (v.summary !== true && v.claim_span) s.claims.set(str(v.claim_id), v);
  render(s);
  summarise(c);
}

function evict(id) {
  const c = convs.get(id);
  if (!c) return;
  c.section.remove();
  convs.delete(id);
}

const safeTurn = guarded("turn", applyTurn);
const safeVerdict = guarded("verdict", applyVerdict);
const safeEvict = guarded("eviction", (ev) => evict(ev.conversation_id));

function applySnapshot(snap) {
  for (const id of [...convs.keys()]) evict(id);
  if (snap.limits && typeof snap.limits === "object") limits = snap.limits;
  serverCounts = snap.counts && typeof snap.counts === "object" ? snap.counts : {};
  guarded("precision", renderPrecision)(snap.precision);
  guarded("model", renderModel)(snap.model);
  for (const conv of [...arr(snap.conversations)].reverse()) {  // oldest first, so the newest ends on top
    if (!conv || typeof conv !== "object") { renderErrors += 1; continue; }
    for (const t of arr(conv.turns)) safeTurn(t);
    for (const v of arr(conv.verdicts)) safeVerdict(v);
    for (const v of arr(conv.claims)) safeVerdict(v);
  }
}

function live() { statusEl.dataset.state = "live"; statusEl.textContent = "live"; }

function connect() {
  const es = new EventSource("/events");
  const on = (type, fn) => es.addEventListener(type, guarded(`${type} event`, (m) => { fn(JSON.parse(m.data)); showCounters(); }));
  on("snapshot", (snap) => { try { applySnapshot(snap); } finally { live(); } });
  on("turn", (ev) => safeTurn(ev.turn));
  on("verdict", (ev) => safeVerdict(ev.verdict));
  on("evict", safeEvict);
  on("counts", (ev) => { serverCounts = ev.counts || serverCounts; });
  on("precision", (ev) => guarded("precision", renderPrecision)(ev.precision));
  on("model", (ev) => guarded("model", renderModel)(ev.model));
  es.onerror = () => {
    statusEl.dataset.state = "reconnecting"; statusEl.textContent = "reconnecting…";
    if (es.readyState === EventSource.CLOSED) setTimeout(connect, 5000);  // e.g. 503: too many pages open
  };
}

function showInternals() { main.dataset.internals = String(internalsEl.checked); }
internalsEl.addEventListener("change", showInternals);
showInternals();
filterEl.addEventListener("change", () => {
  main.dataset.filter = filterEl.value;
  for (const c of convs.values()) guarded("conversation", summarise)(c);
});
connect();
