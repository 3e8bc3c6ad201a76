#!/usr/bin/env node
// A RAG assistant's backend in Node.js with kafkajs (docs/integration.md#grounded-turns): retrieve
// passages for the user's question, send the assistant's reply WITH those passages as the turn's
// `evidence`, then read the reply's verdicts and print the reply with every claim that is not shown
// as supported marked: [[not backed by the passages]] and !![disputed by them]!!.
// examples/rag_assistant.py is the same in Python; tests/test_integration_example.py runs both.
//
//   DIALCHECK_SEGMENT=1 dialcheck worker    # claim by claim (else the reply is one claim)
//   npm ci && node rag_assistant.js --bootstrap HOST:PORT [--conversation rag-1] [--timeout 300]
//   (or DIALCHECK_KAFKA_BOOTSTRAP=HOST:PORT)
//
// claim_span offsets are Unicode code points (Python's str indices); a JavaScript string is UTF-16,
// so the reply is sliced as Array.from(text): an emoji before a claim would shift String.slice.
"use strict";
const { Kafka, logLevel } = require("kafkajs");

function arg(name, fallback) {
  const i = process.argv.indexOf(`--${name}`);
  return i > 0 ? process.argv[i + 1] : fallback;
}

const bootstrap = arg("bootstrap", process.env.DIALCHECK_KAFKA_BOOTSTRAP || "");
const CONNECT_TIMEOUT_MS = 8000;
if (!bootstrap) {
  console.error("rag_assistant.js: no broker: pass --bootstrap HOST:PORT or set DIALCHECK_KAFKA_BOOTSTRAP");
  process.exit(2);
}
const conversation = arg("conversation", `rag-node-${Date.now()}`);
const timeoutS = Number(arg("timeout", "300"));

// the app's own help centre: what its retriever searches (a real app has a vector store here)
const HELP_CENTRE = [
  { id: "kb-plans", title: "Plans and prices", url: "https://help.example.com/plans",
    text: "The Basic plan costs $10 a month and includes email support. The Pro plan costs $25 a month." },
  { id: "kb-support", title: "Contacting support", url: "https://help.example.com/support",
    text: "Email support answers within one business day. Support is closed on public holidays." },
  { id: "kb-export", title: "Exporting your data", url: "https://help.example.com/export",
    text: "You can export your projects as CSV files from the settings page." },
];
const QUESTION = "How much is the Basic plan, and what support does it include?";
// the assistant's reply (a real app asks its LLM): the first sentence is in the passages, the second is not
const REPLY = "The Basic plan costs $10 a month. It includes phone support around the clock.";
const MARKS = { unsupported: ["[[", "]]"], disputed: ["!![", "]!!"] };

const words = (text) => new Set(text.toLowerCase().match(/[a-z0-9$]+/g) || []);
const shared = (a, b) => [...a].filter((w) => b.has(w)).length;

// the k help articles sharing most words with the question (a stand-in for the app's retriever)
function retrieve(question, k = 2) {
  const q = words(question);
  return [...HELP_CENTRE].sort((a, b) => shared(q, words(`${b.text} ${b.title}`)) - shared(q, words(`${a.text} ${a.title}`)))
    .slice(0, k);
}

// the page's rule: a claim is marked unless it is shown as supported
function underline(v) {
  const shown = !(v.display && v.display.show === false) && v.status.state === "ok";
  if (v.label === "SUPPORTS" && shown) return null;
  return v.label === "REFUTES" && shown ? "disputed" : "unsupported";
}

// `text` with each marked claim between its markers, sliced by code points
function marked(text, claims) {
  const chars = Array.from(text);
  const out = [];
  let at = 0;
  for (const v of [...claims].sort((a, b) => a.claim_span.start - b.claim_span.start)) {
    const kind = underline(v), { start, end } = v.claim_span;
    if (!kind || start < at) continue;
    out.push(chars.slice(at, start).join(""), MARKS[kind][0], chars.slice(start, end).join(""), MARKS[kind][1]);
    at = end;
  }
  return out.join("") + chars.slice(at).join("");
}

// the promise, or an error after `ms`; the timer is cleared once the promise settles, so a pending
// timer never keeps the process alive after the work is done
function withTimeout(promise, ms, message) {
  let timer;
  const expired = new Promise((_, reject) => { timer = setTimeout(() => reject(new Error(message)), ms); });
  return Promise.race([promise, expired]).finally(() => clearTimeout(timer));
}

async function main() {
  const kafka = new Kafka({ clientId: "rag-assistant-example", brokers: bootstrap.split(","), logLevel: logLevel.NOTHING,
                            connectionTimeout: CONNECT_TIMEOUT_MS, retry: { retries: 0 } });
  const consumer = kafka.consumer({ groupId: `rag-assistant-example-${conversation}` });
  try {
    await withTimeout(consumer.connect(), CONNECT_TIMEOUT_MS, "timeout");
  } catch (e) {
    console.error(`rag_assistant.js: no Kafka broker answers at ${bootstrap} (--bootstrap / DIALCHECK_KAFKA_BOOTSTRAP)`);
    process.exit(2);
  }
  await consumer.subscribe({ topics: ["chat.verdicts"], fromBeginning: true });

  // the worker publishes each claim's verdict, then the turn's summary spanning the whole reply; a
  // one-claim reply gets one verdict spanning it all
  const turnId = `${conversation}/2`;
  const wholeEnd = Array.from(REPLY).length;
  const seen = new Map(); // claim id → verdict: delivery is at-least-once
  const claims = new Promise((resolve) => {
    consumer.run({
      eachMessage: async ({ message }) => {
        if (!message.key || message.key.toString() !== conversation) return;
        const v = JSON.parse(message.value.toString());
        if (v.turn_id !== turnId || seen.has(v.claim_id)) return;
        seen.set(v.claim_id, v);
        const whole = (s) => s && s.start === 0 && s.end === wholeEnd;
        if (whole(v.claim_span)) {
          const parts = [...seen.values()].filter((p) => p.claim_span && !whole(p.claim_span));
          resolve(parts.length ? parts : [v]);
        }
      },
    });
  });

  const producer = kafka.producer();
  await producer.connect();
  const now = Date.now() / 1000;
  await producer.send({
    topic: "chat.turns",
    acks: -1,
    messages: [
      { conversation_id: conversation, turn_id: `${conversation}/1`, speaker: "user", text: QUESTION, ts: now },
      // the reply with the passages its assistant was given: checked against these, not the index
      { conversation_id: conversation, turn_id: turnId, speaker: "assistant", text: REPLY, evidence: retrieve(QUESTION), ts: now },
    ].map((t) => ({ key: conversation, value: JSON.stringify(t) })),
  });
  await producer.disconnect();

  let got;
  try {
    got = await withTimeout(claims, timeoutS * 1000, `no verdict on ${turnId} within ${timeoutS} s`);
  } finally {
    await consumer.disconnect();
  }
  for (const v of [...got].sort((a, b) => a.claim_span.start - b.claim_span.start)) {
    const best = (v.evidence || [])[0] || {};
    console.log(JSON.stringify({
      claim: v.claim, span: v.claim_span, label: v.label, display: v.display || null, underline: underline(v),
      reason: v.status.reason,
      checked_against: { source: best.source, passage_id: best.passage_id, title: best.title, url: best.url, window: best.window },
    }));
  }
  console.log(JSON.stringify({ marked: marked(REPLY, got), underlined: got.filter((v) => underline(v)).length, claims: got.length }));
}

main().catch((e) => {
  console.error(`rag_assistant.js: ${e.message}`);
  process.exit(1);
});
