#!/usr/bin/env node
// A chat backend in Node.js with kafkajs: produce one conversation's turns to dialcheck, then wait
// for the verdict on the assistant's turn (docs/integration.md). The Python examples do the same
// in two scripts; tests/test_integration_example.py runs both against a real broker and worker.
//
//   npm ci && node chat_backend.js --bootstrap HOST:PORT --conversation node-1 [--timeout 300]
//   (or DIALCHECK_KAFKA_BOOTSTRAP=HOST:PORT; `dialcheck demo` and `dialcheck worker` print the address)
"use strict";
const { Kafka, logLevel } = require("kafkajs");

function arg(name, fallback) {
  const i = process.argv.indexOf(`--${name}`);
  return i > 0 ? process.argv[i + 1] : fallback;
}

const bootstrap = arg("bootstrap", process.env.DIALCHECK_KAFKA_BOOTSTRAP || "");
const CONNECT_TIMEOUT_MS = 8000; // an unreachable broker is one line after 8 s, not a minute of retries
if (!bootstrap) {
  console.error("chat_backend.js: no broker: pass --bootstrap HOST:PORT or set DIALCHECK_KAFKA_BOOTSTRAP");
  process.exit(2);
}
const conversation = arg("conversation", `node-${Date.now()}`);
const timeoutS = Number(arg("timeout", "300"));

// A chat turn as schemas/chat_turn.schema.json describes it; `ts` is the send time in seconds.
const turn = (turnId, speaker, text) => ({
  conversation_id: conversation, turn_id: turnId, speaker, text, ts: Date.now() / 1000,
});

function withTimeout(promise, ms) {
  return Promise.race([promise, new Promise((_, reject) => setTimeout(() => reject(new Error("timeout")), ms))]);
}

async function main() {
  const kafka = new Kafka({
    clientId: "chat-backend-example", brokers: bootstrap.split(","), logLevel: logLevel.NOTHING,
    connectionTimeout: CONNECT_TIMEOUT_MS, retry: { retries: 0 },
  });
  const consumer = kafka.consumer({ groupId: `chat-backend-example-${conversation}` });
  try {
    await withTimeout(consumer.connect(), CONNECT_TIMEOUT_MS);
  } catch (e) {
    console.error(`chat_backend.js: no Kafka broker answers at ${bootstrap} (--bootstrap / DIALCHECK_KAFKA_BOOTSTRAP)`);
    process.exit(2);
  }
  await consumer.subscribe({ topics: ["chat.verdicts", "chat.deadletter"], fromBeginning: true });

  const seen = new Set(); // claim ids: delivery is at-least-once, dedup by claim_id
  const done = new Promise((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`no verdict within ${timeoutS} s`)), timeoutS * 1000);
    consumer.run({
      eachMessage: async ({ topic, message }) => {
        if (!message.key || message.key.toString() !== conversation) return;
        if (topic === "chat.deadletter") {
          const header = (name) => (message.headers[name] ? message.headers[name].toString() : null);
          console.log(JSON.stringify({
            dead_letter: conversation, code: header("dialcheck.reason.code"), reason: header("dialcheck.reason"),
          }));
          return;
        }
        const v = JSON.parse(message.value.toString());
        if (seen.has(v.claim_id)) return;
        seen.add(v.claim_id);
        const best = (v.evidence || [])[0];
        console.log(JSON.stringify({
          conversation_id: v.conversation_id, turn_id: v.turn_id, claim_id: v.claim_id, label: v.label,
          confidence: Math.round((v.probabilities[v.label] || 0) * 1000) / 1000, status: v.status.state,
          evidence_title: best ? best.title : null, evidence: best ? best.window : null,
          latency_ms: v.latency_ms === undefined ? null : v.latency_ms, // produce→publish (newer workers)
          display: v.display || null, // schema 2.1: {show, tone, confidence}; absent from older workers
          source_url: best && best.url ? best.url : null,
        }));
        clearTimeout(timer);
        resolve();
      },
    });
  });

  const producer = kafka.producer();
  await producer.connect();
  // key = conversation id: one conversation stays on one partition, so its turns are read in order
  await producer.send({
    topic: "chat.turns",
    acks: -1,
    messages: [
      turn(`${conversation}/1`, "user", "Do you know where Elvis Presley was born?"),
      turn(`${conversation}/2`, "assistant", "Yes, he was born in Tupelo, Mississippi."),
    ].map((t) => ({ key: conversation, value: JSON.stringify(t) })),
  });
  await producer.disconnect();

  try {
    await done;
  } finally {
    await consumer.disconnect();
  }
}

main().catch((e) => {
  console.error(`chat_backend.js: ${e.message}`);
  process.exit(1);
});
