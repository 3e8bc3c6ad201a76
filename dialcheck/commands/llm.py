"""`dialcheck llm serve`: an OpenAI-compatible server over the small local model (SmolLM2-135M-Instruct,
from the `test` extra; workers/llm/local_server.py), so the LLM steps can be tried without a GPU
server. `dialcheck llm yardstick`: the LLM steps measured on a DialFact-format file against that model
(or `--url` any endpoint): FV macro-F1 of r0 / r5 / r5g, what R5 did with each claim (used, refused
and what the reply was, gate accepted or rejected), a few rewrites, and the judge's agreement with the
gold labels (docs/llm-steps.md, docs/llm-judge.md)."""
from __future__ import annotations

import argparse
import json
import sys
import time
from collections import Counter


def register(sub) -> None:
    p = sub.add_parser("llm", help="the small local LLM: serve it, or measure the LLM steps on it")
    llm_sub = p.add_subparsers(dest="llm_command", metavar="{serve,yardstick}", required=True)

    s = llm_sub.add_parser("serve", help="serve SmolLM2-135M-Instruct on /v1/chat/completions (tests, trying the steps)")
    s.add_argument("--host", default="127.0.0.1", help="bind address (default 127.0.0.1)")
    s.add_argument("--port", type=int, default=8011, help="port (default 8011)")
    s.add_argument("--max-tokens-cap", type=int, default=256, help="most completion tokens per request (default 256)")
    s.add_argument("--threads", type=int, default=None, help="torch threads (default: torch's)")
    s.set_defaults(func=serve)

    y = llm_sub.add_parser("yardstick", help="FV macro-F1 r0/r5/r5g and the judge's agreement, on the local model")
    y.add_argument("--data", default=None, help="DialFact JSONL (default: <data-dir>/dialfact/testsmall.jsonl)")
    y.add_argument("--claims", type=int, default=60, help="records for r0/r5/r5g, spread evenly over the file (60; "
                   "0: none)")
    y.add_argument("--judge-claims", type=int, default=30, help="records for the judge run (0: none; 30)")
    y.add_argument("--url", default=None, help="an OpenAI-compatible endpoint instead of the local model")
    y.add_argument("--threads", type=int, default=None, help="torch threads of the local model")
    y.add_argument("--output", default=None, help="write the per-claim rows (JSON lines) here")
    y.add_argument("--quotes", type=int, default=6, help="rewrites quoted in the result (6)")
    y.set_defaults(func=yardstick)


def serve(args: argparse.Namespace) -> int:
    from dialcheck.errors import UsageError, check_port_free
    from workers.llm.local_server import LocalLLMServer, LocalChatModel

    check_port_free(args.host, args.port, "--port")
    if not args.port:  # 0: a free one, chosen now so the URL printed is the one served
        from streams.processes import free_port

        args.port = free_port()
    if args.max_tokens_cap < 1:
        raise UsageError("--max-tokens-cap must be at least 1")
    model = LocalChatModel(threads=args.threads)
    server = LocalLLMServer(model, max_tokens_cap=args.max_tokens_cap)
    print(f"local LLM {server.model_id} loaded in {model.load_s:.0f} s from {model.path}\n"
          f"  DIALCHECK_LLM_URL=http://{args.host}:{args.port}/v1", flush=True)
    server.serve(args.host, args.port)
    return 0


def even_spread(records: list, n: int) -> list:
    """n records spread evenly over the file (its label mix, not its first n)."""
    if n <= 0:
        return []
    if n >= len(records):
        return list(records)
    step = len(records) / n
    return [records[int(i * step)] for i in range(n)]


def yardstick(args: argparse.Namespace) -> int:
    from dialcheck.errors import UsageError
    from lab.evaluation.scoring import score_run, verdict_row
    from schemas.items import load_dialfact
    from schemas.protocols import turn_verdicts
    from schemas.settings import load_settings
    from workers.llm.replies import COUNTS
    from workers.pipeline import Pipeline

    if args.claims < 0 or args.judge_claims < 0 or not (args.claims or args.judge_claims):
        raise UsageError("--claims and --judge-claims must be 0 or more, and one of them above 0")
    if args.quotes < 0:
        raise UsageError(f"--quotes must be 0 or more (got {args.quotes})")
    base_settings = load_settings()
    data = args.data or base_settings.data.dialfact_sample
    try:
        every = load_dialfact(data)
    except (OSError, ValueError) as e:
        raise UsageError(f"{data}: {e}") from None
    server = None
    url = args.url
    if not url:
        from workers.llm.local_server import LocalChatModel, LocalLLMServer

        server = LocalLLMServer(LocalChatModel(threads=args.threads))
        url = server.start()
        print(f"[llm] local model loaded in {server.chat_model.load_s:.0f} s", file=sys.stderr)
    # a slow local model on shared cores: generous per-request and batch waits (the run measures
    # answers, not outages); the judge asked for every unsure claim of a batch, not the first 8
    llm = {"url": url, "timeout_s": 600, "retries": 0, "concurrency": 2, "batch_timeout_s": 3600, "max_tokens": 64,
           "judge_timeout_s": 600, "judge_max_tokens": 192, "judge_max_calls_per_batch": 32}
    settings = base_settings.updated(llm=llm)
    out: dict = {"data": data, "endpoint": "local SmolLM2-135M-Instruct Q4_1 (transformers, greedy)" if server else url,
                 "settings": {k: llm[k] for k in ("max_tokens", "judge_max_tokens")}}
    rows_out: list[dict] = []
    try:
        records = even_spread(every, args.claims)
        base = Pipeline.from_settings(settings, protocol="fv", surface="r0")
        rows, notes = [], {}
        for name in ("r0", "r5", "r5g") if records else ():
            t = time.perf_counter()
            pipe = base.with_options(surface=name)
            for i in range(0, len(records), 32):
                chunk = records[i:i + 32]
                for r, v in zip(chunk, turn_verdicts(pipe.check_turns([x.to_check_item("fv") for x in chunk]))):
                    d = v.to_dict()
                    rows.append({"protocol": "fv", "surface_mode": name, **verdict_row(d, r.id)})
                    notes[(name, r.id)] = (d.get("rationale") or {}).get("r5")
            print(f"[llm] fv {name}: {len(records)} claims in {time.perf_counter() - t:.0f} s", file=sys.stderr)
        if records:
            scored = score_run(rows, records, data, protocol="fv")
            out["records"] = len(records)
            out["surfaces"] = {n: {k: m[k] for k in ("accuracy", "macro_f1", "f1", "rewritten_share",
                                                      "gate_acceptance_rate") if k in m}
                               for n, m in scored["surfaces"].items()}
            out["r5"] = r5_summary(records, notes, args.quotes)
            out["replies_r5"] = COUNTS.snapshot().get("r5", {})
        for row in rows:
            rows_out.append({**{k: row.get(k) for k in ("record_id", "surface_mode", "claim", "label")},
                             "surface": row["surface"]["text"], "r5": notes.get((row["surface_mode"], row["record_id"]))})
        if args.judge_claims:
            judged = even_spread(every, args.judge_claims)
            jp = Pipeline(settings.updated(llm={"judge": True}), base.nli, base.encoder, None, "fv", "r0")
            t = time.perf_counter()
            jrows = []
            for i in range(0, len(judged), 32):
                chunk = judged[i:i + 32]
                for r, v in zip(chunk, turn_verdicts(jp.check_turns([x.to_check_item("fv") for x in chunk]))):
                    jrows.append((r, (v.to_dict().get("rationale") or {}).get("judge") or {}))
            print(f"[llm] judge: {len(judged)} claims in {time.perf_counter() - t:.0f} s", file=sys.stderr)
            out["judge"] = judge_summary(jrows)
            out["replies_judge"] = COUNTS.snapshot().get("judge", {})
            rows_out.extend({"record_id": r.id, "surface_mode": "r0+judge", "claim": r.response, "gold": r.label,
                             "judge": j} for r, j in jrows)
    finally:
        if server is not None:
            server.stop()
    if args.output:
        with open(args.output, "w", encoding="utf-8") as f:
            for row in rows_out:
                f.write(json.dumps(row, ensure_ascii=False) + "\n")
    print(json.dumps(out, indent=1, ensure_ascii=False))
    return 0


def r5_summary(records, notes: dict, quotes: int) -> dict:
    """What R5 did per claim (r5 run: used / refused by kind / unchanged / unavailable; r5g run: the
    gate's acceptance of the rewrites it was offered) and a few rewrites, gate score beside them."""
    r5 = [notes.get(("r5", r.id)) or {} for r in records]
    r5g = [notes.get(("r5g", r.id)) or {} for r in records]
    outcomes = Counter(n.get("outcome", "none") for n in r5)
    refused = Counter(n.get("reply") for n in r5 if n.get("outcome") == "refused")
    gated = Counter(n.get("outcome", "none") for n in r5g)
    offered = sum(gated[k] for k in ("accepted", "accepted-for-retrieval", "rejected"))
    shown = []
    for r, n, g in zip(records, r5, r5g):
        if len(shown) >= quotes:
            break
        if n.get("outcome") == "used" or n.get("outcome") == "refused":
            shown.append({"context": r.context[-1] if r.context else "", "claim": r.response,
                          "reply": n.get("text"), "outcome": n.get("outcome"), "reply_kind": n.get("reply"),
                          "reason": n.get("reason"), "gate": g.get("outcome"), "gate_score": g.get("gate_score")})
    return {"outcomes": dict(outcomes), "refused_by_kind": dict(refused), "gate": dict(gated),
            "gate_offered": offered,
            "gate_accepted_fv_pct": round(100 * gated["accepted"] / offered, 1) if offered else None,
            "quotes": shown}


def judge_summary(jrows: list) -> dict:
    """How often the judge was asked and answered usably, and its agreement with gold beside the NLI's
    on the same claims."""
    asked = [(r, j) for r, j in jrows if j.get("model")]
    usable = [(r, j) for r, j in asked if j.get("used")]
    agree = sum(j["label"] == r.label for r, j in usable)
    nli_right = sum(j["nli_label"] == r.label for r, j in usable)
    return {"claims": len(jrows), "asked": len(asked), "usable_answers": len(usable),
            "replies": dict(Counter(j.get("reply") for _, j in asked)),
            "judge_agrees_with_gold": agree, "nli_agrees_with_gold_same_claims": nli_right,
            "judge_changed_label": sum(j["label"] != j["nli_label"] for _, j in usable),
            "examples": [{"claim": r.response, "gold": r.label, "nli": j.get("nli_label"), "reply": j.get("reply"),
                          "answer": (j.get("answer") or "")[-200:]} for r, j in asked[:4]]}
