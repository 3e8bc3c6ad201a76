"""docs/integration.md end to end, as a chat-app developer would run it: their own corpus indexed
alone (`index build --sources "" --tsv`), a real `dialcheck worker` started from another directory
against a real embedded Tansu broker, then examples/produce_turns.py and examples/consume_verdicts.py
(kafka-python only, run as separate processes exactly as documented), the confluent-kafka example
(examples/confluent_chat_backend.py, librdkafka with zstd and idempotence) and the Node.js example
(examples/node/chat_backend.js, kafkajs) get a verdict back.

Why each assertion: the verdict must come from the user's corpus (evidence titles from the TSV)
and decide the claim the example sends; the consumer must see exactly one verdict (the user turn
is context, not checked); the worker must not leave ./dialcheck-data in the directory it was
started from and must print where its state lives.
"""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
EXAMPLES = REPO / "examples"
CORPUS = EXAMPLES / "my_corpus.tsv"


def _env(**extra: str) -> dict[str, str]:
    env = {**os.environ, "PYTHONPATH": str(REPO), "DIALCHECK_METRICS_PORT": "0", **extra}
    env.pop("DIALCHECK_KAFKA_BOOTSTRAP", None)
    return env


@pytest.fixture(scope="module")
def own_index(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("own-index")
    done = subprocess.run([sys.executable, "-m", "dialcheck.cli", "index", "build", "--sources", "",
                           "--tsv", str(CORPUS), "--out", str(out)],
                          capture_output=True, text=True, env=_env(), cwd=REPO, timeout=600)
    assert done.returncode == 0, done.stderr
    meta = json.loads(done.stdout)
    rows = [ln for ln in CORPUS.read_text().splitlines()[1:] if ln.strip()]
    assert meta["sources"] == [f"tsv:{CORPUS}"] and meta["passages"] == len(rows), meta
    return out


@pytest.mark.model
def test_own_corpus_alone_is_indexed(own_index):
    titles = {json.loads(ln)["title"] for ln in (own_index / "passages.jsonl").read_text().splitlines()}
    assert titles == {ln.split("\t")[1] for ln in CORPUS.read_text().splitlines()[1:] if ln.strip()}


@pytest.fixture(scope="module")
def worker(own_index, broker, tmp_path_factory):
    """`dialcheck worker` as a user starts it: from a directory of their own, on their index."""
    from streams.app import READY_MARKER
    from streams.processes import terminate

    tmp = tmp_path_factory.mktemp("worker")
    cwd, xdg = tmp / "app-dir", tmp / "xdg-state"
    cwd.mkdir()
    log_path = tmp / "worker.log"
    # DIALCHECK_SEGMENT=1: a reply is checked claim by claim, as the RAG example's guide says to run it
    # (a one-sentence turn, as every other example sends, is one claim: the same verdict either way)
    env = _env(DIALCHECK_INDEX_DIR=str(own_index), XDG_STATE_HOME=str(xdg), DIALCHECK_SEGMENT="1")
    env.pop("DIALCHECK_STATE_DIR", None)
    with open(log_path, "wb") as log:
        proc = subprocess.Popen([sys.executable, "-u", "-m", "dialcheck.cli", "worker", "--broker", broker.bootstrap],
                                cwd=cwd, env=env, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 600
        while READY_MARKER not in log_path.read_text(errors="replace"):
            assert proc.poll() is None, log_path.read_text(errors="replace")[-3000:]
            assert time.monotonic() < deadline, "worker not ready"
            time.sleep(0.5)
        yield {"bootstrap": broker.bootstrap, "cwd": cwd, "xdg": xdg, "log": log_path}
    finally:
        terminate(proc, grace_s=30)


GUIDE = REPO / "docs" / "integration.md"


def doc_json(after: str) -> dict:
    """The first ```json block after the line starting `after` in docs/integration.md, parsed."""
    text = GUIDE.read_text()
    start = text.index("```json", text.index(after)) + len("```json")
    return json.loads(text[start:text.index("```", start)])


CONSUMER_EXAMPLE = "Real output of the consumer"
VERDICT_EXAMPLE = "## A verdict"


def same_as_documented(got: dict, documented: dict, keys: tuple[str, ...], close: tuple[str, ...] = ()) -> list[str]:
    """The documented fields that a real run does not reproduce (`close`: numbers within 0.02)."""
    bad = [k for k in keys if got.get(k) != documented.get(k)]
    return bad + [k for k in close if abs(float(got[k]) - float(documented[k])) > 0.02]


@pytest.mark.unit
def test_the_documented_verdict_has_the_current_schema_version_and_validates():
    from schemas.verdict import SCHEMA_VERSION
    from schemas.wire import validate

    v = doc_json(VERDICT_EXAMPLE)
    assert v["schema_version"] == SCHEMA_VERSION, (v["schema_version"], SCHEMA_VERSION)
    assert f'## A verdict (`schemas/verdict.schema.json`, `schema_version` "{SCHEMA_VERSION}")' in GUIDE.read_text()
    validate("verdict", v)


def _check_shown(shown: dict, conv: str) -> None:
    assert shown["turn_id"] == f"{conv}/2" and shown["status"] == "ok", shown
    assert shown["label"] == "SUPPORTS", shown  # "he was born in Tupelo, Mississippi" vs the Elvis passages
    corpus_titles = {ln.split("\t")[1] for ln in CORPUS.read_text().splitlines()[1:]}
    assert shown["evidence_title"] in corpus_titles, shown
    assert 0.0 < shown["confidence"] <= 1.0


@pytest.mark.broker
def test_python_example_gets_a_verdict(worker):
    conv = "integration-example-py"
    produced = subprocess.run([sys.executable, str(EXAMPLES / "produce_turns.py"), "--bootstrap",
                               worker["bootstrap"], "--conversation", conv],
                              capture_output=True, text=True, timeout=120)
    assert produced.returncode == 0, produced.stderr
    assert json.loads(produced.stdout) == {"conversation_id": conv, "turns": 2, "checked_turns": [f"{conv}/2"]}

    consumed = subprocess.run([sys.executable, str(EXAMPLES / "consume_verdicts.py"), "--bootstrap",
                               worker["bootstrap"], "--conversation", conv, "--count", "1", "--timeout", "300"],
                              capture_output=True, text=True, timeout=400)
    assert consumed.returncode == 0, consumed.stdout + consumed.stderr + worker["log"].read_text(errors="replace")[-3000:]
    lines = [json.loads(ln) for ln in consumed.stdout.splitlines()]
    assert len(lines) == 1, lines  # the user turn is context, not checked
    _check_shown(lines[0], conv)
    # docs/integration.md shows this line from a real run: what it says must still come out
    documented = doc_json(CONSUMER_EXAMPLE)
    differ = same_as_documented(lines[0], documented, ("label", "status", "evidence_title", "checked_text", "display",
                                                      "source_url", "reason"), ("confidence",))
    assert not differ, {k: (lines[0].get(k), documented.get(k)) for k in differ} | {"line": json.dumps(lines[0])}
    # the producer's ts is echoed and the produce→publish latency is measured from it
    assert isinstance(lines[0]["ts"], float) and lines[0]["latency_ms"] > 0, lines[0]


@pytest.mark.broker
def test_confluent_kafka_example_gets_a_verdict(worker):
    """examples/confluent_chat_backend.py: librdkafka, zstd, the idempotent producer and headers, as
    chat backends produce; its consumer reads the verdict back."""
    conv = "integration-example-confluent"
    ran = subprocess.run([sys.executable, str(EXAMPLES / "confluent_chat_backend.py"), "--bootstrap",
                          worker["bootstrap"], "--conversation", conv, "--timeout", "300"],
                         capture_output=True, text=True, timeout=400)
    assert ran.returncode == 0, ran.stdout + ran.stderr + worker["log"].read_text(errors="replace")[-3000:]
    lines = [json.loads(ln) for ln in ran.stdout.splitlines()]
    assert len(lines) == 1, lines
    _check_shown(lines[0], conv)


@pytest.mark.broker
def test_python_consumer_shows_dead_letters(worker):
    """A turn the contract refuses comes back on chat.deadletter with its code and reason."""
    from kafka import KafkaProducer

    conv = "integration-example-bad"
    producer = KafkaProducer(bootstrap_servers=worker["bootstrap"], acks="all")
    producer.send("chat.turns", key=conv.encode(), value=json.dumps(
        {"conversation_id": conv, "turn_id": "1", "speaker": "assistant"}).encode()).get(timeout=30)
    producer.close()
    consumed = subprocess.run([sys.executable, str(EXAMPLES / "consume_verdicts.py"), "--bootstrap",
                               worker["bootstrap"], "--conversation", conv, "--timeout", "20"],
                              capture_output=True, text=True, timeout=120)
    lines = [json.loads(ln) for ln in consumed.stdout.splitlines()]
    assert lines[0]["dead_letter"] == conv and lines[0]["code"] == "schema", lines
    assert "'text' is a required property" in lines[0]["reason"]
    assert lines[-1] == {"timeout": True, "verdicts": 0}  # no verdict for a refused turn


def kafkajs_example() -> Path:
    """examples/node with its pinned kafkajs installed (`npm ci`, once). Node.js and npm are on every
    machine this runs on (docs/local-stack.md): a missing one fails here, it is not skipped."""
    assert shutil.which("node") and shutil.which("npm"), "Node.js and npm are needed for the kafkajs example"
    node_dir = EXAMPLES / "node"
    if not (node_dir / "node_modules" / "kafkajs").exists():
        done = subprocess.run(["npm", "ci", "--no-audit", "--no-fund"], cwd=node_dir, capture_output=True, text=True,
                              timeout=600)
        assert done.returncode == 0, done.stderr[-2000:]
    return node_dir


@pytest.mark.broker
def test_node_example_gets_a_verdict(worker):
    """examples/node/chat_backend.js (kafkajs, pinned in its package.json) against the same worker."""
    node_dir = kafkajs_example()
    conv = "integration-example-node"
    ran = subprocess.run(["node", "chat_backend.js", "--bootstrap", worker["bootstrap"], "--conversation", conv,
                          "--timeout", "300"], cwd=node_dir, capture_output=True, text=True, timeout=400)
    assert ran.returncode == 0, ran.stdout + ran.stderr + worker["log"].read_text(errors="replace")[-3000:]
    lines = [json.loads(ln) for ln in ran.stdout.splitlines()]
    assert len(lines) == 1, lines
    _check_shown(lines[0], conv)


def _rag_lines(ran: subprocess.CompletedProcess, worker) -> list[dict]:
    assert ran.returncode == 0, ran.stdout + ran.stderr + worker["log"].read_text(errors="replace")[-3000:]
    return [json.loads(ln) for ln in ran.stdout.splitlines()]


@pytest.fixture(scope="module")
def rag_python(worker) -> list[dict]:
    """examples/rag_assistant.py's output: its reply sent with the passages it retrieved."""
    return _rag_lines(subprocess.run([sys.executable, str(EXAMPLES / "rag_assistant.py"), "--bootstrap",
                                      worker["bootstrap"], "--conversation", "integration-rag-py", "--timeout", "300"],
                                     capture_output=True, text=True, timeout=400), worker)


@pytest.mark.broker
def test_rag_example_marks_the_claim_its_passages_do_not_back(rag_python):
    """The RAG example (docs/integration.md#grounded-turns): the reply's two sentences are two claim
    verdicts with their offsets, each checked against a passage the example sent (source "turn", its
    id and url as given, not the worker's index); the sentence the passages do not back is marked and
    is no SUPPORTS."""
    sys.path.insert(0, str(EXAMPLES))
    try:
        from rag_assistant import HELP_CENTRE, REPLY
    finally:
        sys.path.remove(str(EXAMPLES))
    *claims, total = rag_python
    assert [c["claim"] for c in claims] == ["The Basic plan costs $10 a month.", "It includes phone support around the clock."]
    for c in claims:
        assert REPLY[c["span"]["start"]:c["span"]["end"]] == c["claim"], c
        given = {d["id"]: d for d in HELP_CENTRE}
        ev = c["checked_against"]
        assert ev["source"] == "turn" and ev["passage_id"] in given, c
        assert (ev["title"], ev["url"]) == (given[ev["passage_id"]]["title"], given[ev["passage_id"]]["url"]), c
    backed, unbacked = claims
    assert unbacked["label"] != "SUPPORTS" and unbacked["underline"] is not None, unbacked
    assert "[[It includes phone support around the clock.]]" in total["marked"] or \
        "!![It includes phone support around the clock.]!!" in total["marked"], total
    assert total["claims"] == 2 and total["underlined"] == sum(c["underline"] is not None for c in claims)
    assert backed["label"] == "SUPPORTS", backed  # "$10 a month" is in the Basic plan's passage
    assert total == doc_json("**Underlining what is unsupported.**"), total  # the guide shows this line


@pytest.mark.broker
def test_node_rag_example_says_what_the_python_one_says(worker, rag_python):
    """examples/node/rag_assistant.js: the same reply and passages, the same verdicts and marks
    (it slices the reply by code points, as the offsets count)."""
    node_dir = kafkajs_example()
    lines = _rag_lines(subprocess.run(["node", "rag_assistant.js", "--bootstrap", worker["bootstrap"], "--conversation",
                                       "integration-rag-node", "--timeout", "300"], cwd=node_dir, capture_output=True,
                                      text=True, timeout=400), worker)
    assert lines == rag_python


@pytest.mark.broker
def test_worker_leaves_the_current_directory_alone(worker):
    assert list(worker["cwd"].iterdir()) == [], os.listdir(worker["cwd"])  # no ./dialcheck-data
    state = worker["xdg"] / "dialcheck" / "dialcheck"
    assert f"worker state dir: {state} (DIALCHECK_STATE_DIR)" in worker["log"].read_text(errors="replace")
    assert state.is_dir()


@pytest.mark.unit
def test_published_verdict_echoes_ts_measures_latency_and_rounds():
    """streams/turn_worker.stamped and Verdict.to_json without a broker: the fields a chat app reads
    (`ts`, `latency_ms`, 4-place probabilities) are in the published JSON and valid in the schema."""
    from schemas import Evidence, Status, Surface, Verdict, parse_verdict
    from streams.turn_worker import stamped

    v = Verdict("c1", "t1", "id1", "claim", Surface("r0", "claim"), "SUPPORTS",
                {"SUPPORTS": 0.986170854218692, "REFUTES": 0.012464936084397938, "NOT ENOUGH INFO": 0.0013642096969100814},
                [Evidence("p1", "T", "text", "text", 0.9, 0.5, 0.8414738178253174, 0.07547307014465332, 0.08305307477712631)],
                {}, {}, Status())
    assert stamped(v, 100.0, 99.0, now=102.5).latency_ms == 2500.0      # from the producer's ts
    assert stamped(v, None, 99.0, now=102.5).latency_ms == 3500.0       # else the record timestamp
    assert stamped(v, None, None, now=102.5).latency_ms is None
    published = json.loads(stamped(v, 100.0, 99.0, now=102.5).to_json())
    assert published["ts"] == 100.0 and published["latency_ms"] == 2500.0
    assert published["probabilities"] == {"SUPPORTS": 0.9862, "REFUTES": 0.0125, "NOT ENOUGH INFO": 0.0014}
    assert published["evidence"][0]["entail"] == 0.8415
    back = parse_verdict(stamped(v, 100.0, 99.0, now=102.5).to_json())  # validates against the schema
    assert back.latency_ms == 2500.0 and back.ts == 100.0
    assert v.to_dict()["probabilities"]["SUPPORTS"] == 0.986170854218692  # run files keep full precision


@pytest.mark.broker
def test_verdicts_gold_limit_wait_scores_what_was_replayed(worker):
    """`replay --records 3` then `verdicts --gold F --limit 3 --wait S --json`: it waits for those
    three verdicts and scores 3 of 3 (without --limit it would score them against all 300 records).
    Labels come from the tiny own corpus, so only the coverage is asserted."""
    from schemas.settings import load_settings

    data = load_settings().data.dialfact_sample
    cli = [sys.executable, "-m", "dialcheck.cli"]
    replayed = subprocess.run([*cli, "replay", "--broker", worker["bootstrap"], "--records", "3", "--quiet"],
                              capture_output=True, text=True, env=_env(), cwd=REPO, timeout=300)
    assert replayed.returncode == 0, replayed.stderr
    scored = subprocess.run([*cli, "verdicts", "--broker", worker["bootstrap"], "--gold", data, "--limit", "3",
                             "--wait", "300", "--json"], capture_output=True, text=True, env=_env(), cwd=REPO, timeout=400)
    assert scored.returncode == 0, scored.stderr
    (m,) = json.loads(scored.stdout)["surfaces"].values()
    assert (m["n"], m["missing"]) == (3, 0), m


@pytest.mark.unit
def test_examples_say_so_in_one_line_when_no_broker_answers():
    """A port nothing listens on (bound and closed here): each Python example gives up after 8 s
    (kafka-python's bootstrap_timeout_ms 8000, the confluent-kafka example's metadata timeout; 8.9 s
    measured with interpreter start; no timed assertion here: speed is bench/'s) with one line and
    exit 2, and takes the broker from DIALCHECK_KAFKA_BOOTSTRAP when --bootstrap is not given. The
    four run side by side (each only waits out its timeout): one 8 s wait, not four."""
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    scripts = ["produce_turns.py", "consume_verdicts.py", "confluent_chat_backend.py", "rag_assistant.py"]
    procs = {script: subprocess.Popen([sys.executable, str(EXAMPLES / script)], stdout=subprocess.PIPE,
                                      stderr=subprocess.PIPE, text=True,
                                      env={**_env(), "DIALCHECK_KAFKA_BOOTSTRAP": f"127.0.0.1:{port}"})
             for script in scripts}
    try:
        done = {script: (p.communicate(timeout=60)[1], p.returncode) for script, p in procs.items()}
    finally:
        for p in procs.values():
            if p.poll() is None:
                p.kill()
                p.wait()
    for script, (stderr, returncode) in done.items():
        assert returncode == 2 and stderr == (
            f"{script}: no Kafka broker answers at the bootstrap address (--bootstrap / DIALCHECK_KAFKA_BOOTSTRAP)\n"), \
            (script, stderr)


@pytest.mark.unit
def test_node_example_says_so_in_one_line_when_no_broker_answers():
    """The kafkajs example takes the broker from DIALCHECK_KAFKA_BOOTSTRAP (no built-in 9092), and a
    port nothing listens on is one line and exit 2 (connect bounded at 8 s, no retries); no broker
    named at all is one line too."""
    import socket

    node_dir = kafkajs_example()
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    env = {k: v for k, v in os.environ.items() if k != "DIALCHECK_KAFKA_BOOTSTRAP"}
    done = subprocess.run(["node", "chat_backend.js"], cwd=node_dir, capture_output=True, text=True, timeout=60,
                          env={**env, "DIALCHECK_KAFKA_BOOTSTRAP": f"127.0.0.1:{port}"})
    assert done.returncode == 2 and done.stderr == (
        f"chat_backend.js: no Kafka broker answers at 127.0.0.1:{port} (--bootstrap / DIALCHECK_KAFKA_BOOTSTRAP)\n"), \
        done.stderr
    bare = subprocess.run(["node", "chat_backend.js"], cwd=node_dir, capture_output=True, text=True, timeout=60, env=env)
    assert bare.returncode == 2 and bare.stderr.count("\n") == 1 and "DIALCHECK_KAFKA_BOOTSTRAP" in bare.stderr


@pytest.mark.model
def test_the_documented_verdict_comes_out_of_a_real_run(settings, nli, encoder, index_dir):
    """The verdict in docs/integration.md, rerun as it says it was made: the worker's pipeline over
    the benchmark index, the Elvis conversation's two assistant turns checked in one batch."""
    from workers.pipeline import Pipeline
    from workers.retrieval.factory import load_searcher

    documented = doc_json(VERDICT_EXAMPLE)
    s = settings.updated(retrieval={"index_dir": str(index_dir)})
    pipe = Pipeline(s, nli, encoder, load_searcher(s, encoder), protocol="e2e", surface="r4g")
    got = pipe.scrub.verdict(pipe.check_turns(doc_turns())[0].verdict).to_dict()
    assert not same_as_documented(got, documented, ("schema_version", "claim", "label", "display", "status")), \
        {k: got.get(k) for k in ("label", "display", "status", "probabilities")}
    assert got["evidence"][0]["title"] == documented["evidence"][0]["title"]
    assert got["surface"]["name"] == documented["surface"]["name"]
    for label, p in documented["probabilities"].items():
        assert abs(got["probabilities"][label] - p) <= 0.02, (label, got["probabilities"], documented["probabilities"])


def doc_turns():
    """The batch docs/integration.md's verdict comes from; the documented verdict is the first."""
    from schemas.items import CheckItem

    return [CheckItem("support-chat-51", "support-chat-51/3",
                      ["Do you like Elvis Presley?", "I love his early records. When did his career start?"],
                      "His music career began in 1964, recording at Motown Records."),
            CheckItem("support-chat-42", "support-chat-42/2", ["Where was Elvis Presley born?"],
                      "Yes, he was born in Tupelo, Mississippi.")]


@pytest.mark.broker
def test_python_example_sends_the_turns_given_on_the_command_line(worker):
    """`produce_turns.py --turn SPEAKER TEXT ...`: your own exchange, in order; the assistant turn is checked."""
    conv = "integration-example-own-turns"
    said = "Elvis Presley was born in Tupelo, Mississippi."
    produced = subprocess.run([sys.executable, str(EXAMPLES / "produce_turns.py"), "--bootstrap", worker["bootstrap"],
                               "--conversation", conv, "--turn", "user", "Where was Elvis Presley born?",
                               "--turn", "assistant", said], capture_output=True, text=True, timeout=120)
    assert produced.returncode == 0, produced.stderr
    assert json.loads(produced.stdout) == {"conversation_id": conv, "turns": 2, "checked_turns": [f"{conv}/2"]}
    consumed = subprocess.run([sys.executable, str(EXAMPLES / "consume_verdicts.py"), "--bootstrap",
                               worker["bootstrap"], "--conversation", conv, "--count", "1", "--timeout", "300"],
                              capture_output=True, text=True, timeout=400)
    assert consumed.returncode == 0, consumed.stdout + consumed.stderr
    (line,) = [json.loads(ln) for ln in consumed.stdout.splitlines()]
    assert line["turn_id"] == f"{conv}/2" and line["checked_text"] == said and line["label"] == "SUPPORTS", line


@pytest.mark.broker
def test_produce_turns_names_every_turn_that_will_be_checked(broker):
    """Three assistant turns: all three are checked, and the example says so (it said one)."""
    conv = "integration-example-three"
    said = [("user", "Hi"), ("assistant", "Elvis was born in Tupelo."), ("assistant", "He moved to Memphis."),
            ("user", "Thanks"), ("bot", "Graceland is in Memphis.")]
    produced = subprocess.run([sys.executable, str(EXAMPLES / "produce_turns.py"), "--bootstrap", broker.bootstrap,
                               "--conversation", conv, *[a for s, t in said for a in ("--turn", s, t)]],
                              capture_output=True, text=True, timeout=120, env=_env())
    assert produced.returncode == 0, produced.stderr
    assert json.loads(produced.stdout) == {"conversation_id": conv, "turns": 5,
                                           "checked_turns": [f"{conv}/2", f"{conv}/3", f"{conv}/5"]}


@pytest.mark.broker
def test_consume_verdicts_stops_on_ctrl_c_without_a_traceback(broker):
    """Ctrl-C ends the loop and close() runs undisturbed: no traceback. The example before printed a
    KeyboardInterrupt traceback when Ctrl-C came again while close() left the consumer group (checked by
    hand: 5 of 5 runs of it with these presses; this one 0 of 5, and it exits within close()'s 3 s)."""
    import signal

    proc = subprocess.Popen([sys.executable, str(EXAMPLES / "consume_verdicts.py"), "--bootstrap", broker.bootstrap,
                             "--group", "ctrl-c-example"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env=_env())
    try:
        assert "Ctrl-C to stop" in proc.stderr.readline()  # polling from now on
        time.sleep(1.0)  # joining the group
        proc.send_signal(signal.SIGINT)
        time.sleep(0.1)  # pressed again while close() commits and leaves the group (at most 3 s)
        proc.send_signal(signal.SIGINT)
        out, err = proc.communicate(timeout=60)
    finally:
        proc.kill()
    assert "Traceback" not in err and "KeyboardInterrupt" not in err, err
    assert proc.returncode == 0, (proc.returncode, err)


def doc_python(after: str) -> str:
    """The first ```python block after the line starting `after` in docs/integration.md."""
    text = GUIDE.read_text()
    start = text.index("```python", text.index(after)) + len("```python")
    return text[start:text.index("```", start)]


@pytest.mark.broker
def test_the_documented_librdkafka_snippet_runs_as_written(worker):
    """docs/integration.md "Producing with librdkafka": the snippet, unchanged, against the worker
    (its broker from DIALCHECK_KAFKA_BOOTSTRAP, as the snippet says): it ends with the verdict's label."""
    ran = subprocess.run([sys.executable, "-c", doc_python("### Producing with librdkafka")], capture_output=True,
                         text=True, timeout=300, env={**_env(), "DIALCHECK_KAFKA_BOOTSTRAP": worker["bootstrap"]})
    assert ran.returncode == 0, ran.stderr[-3000:]
    assert ran.stdout.split() == ["SUPPORTS"], ran.stdout
