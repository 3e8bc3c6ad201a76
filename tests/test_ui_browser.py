"""`dialcheck ui` in a real headless Chromium against a real broker, worker and replay.

Why: the page is the product for people who look instead of reading JSON; only a browser shows
that the SSE stream, the snapshot and the rendering agree with what the worker published. The
badges' labels are compared with the verdict topic's, one evidence panel is opened, and a
screenshot is kept (artifacts/test-output/ui-browser.png; copied to docs/figures/ui.png for the README).

Every process (broker, worker, ui, chromedriver + chromium) is started inside one ExitStack, so
each is stopped whichever step fails.
"""
from __future__ import annotations

import contextlib
import json
import os
import shutil
import statistics
import subprocess
import sys
import threading
import urllib.error
import urllib.request
from pathlib import Path

import orjson
import pytest

from dialcheck.wiring import DEFAULT_CHECKER
from schemas.items import load_dialfact
from schemas.settings import REPO_ROOT, load_settings
from streams.broker import EmbeddedBroker
from streams.processes import terminate
from streams.replay import iter_claim_ids, replay
from streams.topics import ensure_topics
from streams.verdicts import collect_verdicts
from streams.worker import WorkerProcess

pytestmark = pytest.mark.broker

PIPELINE = os.environ.get("DIALCHECK_TEST_STREAM_PIPELINE", DEFAULT_CHECKER)
N_RECORDS = 5
ARTIFACTS = REPO_ROOT / "artifacts" / "test-output"
# generous bounds for a loaded 2-core machine; they only stop a hung run, nothing is timed
WAIT_S = 600


def _child_env() -> dict[str, str]:
    """This checkout first on the path of child processes (as streams.worker does)."""
    return {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(REPO_ROOT), os.environ.get("PYTHONPATH", "")]))}


class UIProcess:
    """`dialcheck ui --port 0` as a child process; the URL is read from its first line."""

    def __init__(self, bootstrap: str, log_path: Path, *extra: str):
        self.bootstrap, self.log_path, self.extra = bootstrap, log_path, extra
        self.proc: subprocess.Popen | None = None
        self.url: str | None = None

    def __enter__(self) -> "UIProcess":
        self.proc = subprocess.Popen([sys.executable, "-u", "-m", "dialcheck.cli", "ui", "--broker", self.bootstrap,
                                      "--port", "0", *self.extra], cwd=str(REPO_ROOT), env=_child_env(), stdout=subprocess.PIPE,
                                     stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, text=True)
        lines: list[str] = []
        found = threading.Event()

        def pump() -> None:  # keep reading so the child never blocks on a full pipe
            with open(self.log_path, "w") as log:
                for line in self.proc.stdout:
                    log.write(line)
                    log.flush()
                    lines.append(line)
                    if line.startswith("dialcheck ui at "):
                        self.url = line.split()[3]
                        found.set()
            found.set()

        threading.Thread(target=pump, daemon=True).start()
        found.wait(120)
        if self.url is None:
            self.__exit__()
            raise RuntimeError("dialcheck ui did not start:\n" + "".join(lines)[-3000:])
        return self

    def __exit__(self, *exc) -> None:
        if self.proc:
            terminate(self.proc, grace_s=15)


@contextlib.contextmanager
def headless_chromium():
    """Debian's chromium through its chromedriver (both from apt; infra/setup.sh installs them)."""
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    chromium, driver_bin = shutil.which("chromium"), shutil.which("chromedriver")
    assert chromium and driver_bin, "chromium / chromedriver missing: run infra/setup.sh as root (apt-get install chromium chromium-driver)"
    opts = webdriver.ChromeOptions()
    opts.binary_location = chromium
    for arg in ("--headless=new", "--no-sandbox", "--disable-dev-shm-usage", "--disable-gpu",
                "--window-size=1400,1300", "--force-color-profile=srgb"):
        opts.add_argument(arg)
    opts.set_capability("goog:loggingPrefs", {"browser": "ALL"})  # console errors (CSP violations among them)
    driver = webdriver.Chrome(service=Service(driver_bin), options=opts)
    try:
        yield driver
    finally:
        driver.quit()  # also ends chromium and chromedriver


def test_ui_shows_the_topics_verdicts_in_chromium(tmp_path):
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support import expected_conditions as EC
    from selenium.webdriver.support.ui import WebDriverWait

    records = load_dialfact(load_settings().data.dialfact_sample, N_RECORDS)
    expected = set(iter_claim_ids(records))
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    with contextlib.ExitStack() as stack:
        broker = stack.enter_context(EmbeddedBroker(log_path=str(tmp_path / "broker.log")))
        settings = load_settings(kafka={"bootstrap": broker.bootstrap},
                                 stream={"feedback_store": str(tmp_path / "feedback.sqlite3")})
        if PIPELINE == DEFAULT_CHECKER and settings.retrieval.backend == "embedded":
            from workers.retrieval.build import ensure_index
            ensure_index(settings)
        ensure_topics(settings)
        worker = stack.enter_context(WorkerProcess(settings, tmp_path / "worker.log", extra_args=["--pipeline", PIPELINE]))
        ui = stack.enter_context(UIProcess(broker.bootstrap, tmp_path / "ui.log"))
        driver = stack.enter_context(headless_chromium())
        wait = WebDriverWait(driver, WAIT_S)

        driver.get(ui.url)
        wait.until(EC.text_to_be_present_in_element((By.ID, "status"), "live"))  # snapshot arrived over SSE
        worker.wait_ready(timeout_s=WAIT_S)
        replay(settings, records)
        vlog = collect_verdicts(settings, expected, WAIT_S, alive=worker.alive)
        assert expected <= vlog.verdicts.keys(), "worker did not answer every claim:\n" + worker.log_text()[-3000:]
        topic = {cid: ("error" if v.status.state == "error" else v.label)
                 for cid, v in vlog.verdicts.items() if cid in expected}

        badges_css = "button.badge[data-claim-id]"
        wait.until(lambda d: len(d.find_elements(By.CSS_SELECTOR, badges_css)) >= N_RECORDS)
        badges = driver.find_elements(By.CSS_SELECTOR, badges_css)
        shown = {b.get_attribute("data-claim-id"): b.get_attribute("data-label") for b in badges}
        assert shown == topic
        for b in badges:  # the label is written out, not only coloured
            assert shown[b.get_attribute("data-claim-id")] in b.text
        assert not driver.find_elements(By.CSS_SELECTOR, '.badge[data-label="pending"]')

        # produce→verdict latency per conversation: the median of its verdicts' latency_ms as published
        for section in driver.find_elements(By.CSS_SELECTOR, "section.conversation"):
            conv_id = section.get_attribute("data-conversation-id")
            lats = [v.latency_ms for cid, v in vlog.verdicts.items() if cid in expected and v.conversation_id == conv_id]
            assert lats and None not in lats, conv_id  # the worker stamps every verdict it publishes
            counts = section.find_element(By.CSS_SELECTOR, ".conv-counts")
            assert float(counts.get_attribute("data-latency-ms")) == statistics.median(lats), conv_id
            assert " to verdict · last turn " in counts.text

        # open the evidence of a verdict that has some: its window is highlighted inside its passage
        with_ev = [cid for cid in sorted(topic) if vlog.verdicts[cid].evidence]
        assert with_ev, "no verdict carried evidence"
        cid = with_ev[0]
        ev = vlog.verdicts[cid].evidence[0]
        badge = driver.find_element(By.CSS_SELECTOR, f'button.badge[data-claim-id="{cid}"]')
        driver.execute_script("arguments[0].scrollIntoView({block: 'center'})", badge)
        badge.click()
        panel = driver.find_element(By.ID, f"ev-{cid}")
        wait.until(EC.visibility_of(panel))
        assert badge.get_attribute("aria-expanded") == "true"
        first = panel.find_element(By.CSS_SELECTOR, ".passage")
        assert first.get_attribute("data-passage-id") == ev.passage_id
        mark = first.find_element(By.CSS_SELECTOR, ".passage-text mark")
        assert mark.text.split() == ev.window.split()  # rendered text: whitespace may be collapsed
        assert first.find_element(By.CSS_SELECTOR, ".passage-text").text.split() == ev.text.split()

        driver.execute_script("arguments[0].scrollIntoView({block: 'center'})", panel)
        png = ARTIFACTS / "ui-browser.png"
        assert driver.save_screenshot(str(png))
        assert png.stat().st_size > 10_000

        # the topic's verdicts, read back by `dialcheck verdicts`, score like an eval run file
        gold = tmp_path / "gold.jsonl"
        with open(load_settings().data.dialfact_sample, encoding="utf-8") as f:
            gold.write_text("".join([line for line in f if line.strip()][:N_RECORDS]), encoding="utf-8")
        run = tmp_path / "topic.jsonl"
        run.write_text(_cli("verdicts", "--broker", broker.bootstrap, "--json"))
        assert len(run.read_text().splitlines()) == N_RECORDS
        by_score = json.loads(_cli("score", str(run), "--gold", str(gold), "--json"))
        by_verdicts = json.loads(_cli("verdicts", "--broker", broker.bootstrap, "--gold", str(gold), "--json"))
        assert by_score == by_verdicts
        (surface,) = by_score["surfaces"].values()
        gold_labels = [r.label for r in records]
        assert surface["n"] == N_RECORDS and surface["missing"] == 0
        assert surface["accuracy"] == round(100 * sum(
            g == vlog.verdicts[c].label for g, c in zip(gold_labels, iter_claim_ids(records))) / N_RECORDS, 2)

        # memory stays bounded: a second ui that keeps 2 conversations reads the same topics
        small = stack.enter_context(UIProcess(broker.bootstrap, tmp_path / "ui-small.log", "--max-conversations", "2"))
        state = wait.until(lambda d: _state_if(small.url, lambda st: st["counts"]["verdicts"] == N_RECORDS))
        assert len(state["conversations"]) == 2 and state["counts"]["evicted"] >= N_RECORDS - 2
        assert {c["id"] for c in state["conversations"]} <= {r.id for r in records}


def _severe_console(driver) -> list[str]:
    return [e["message"] for e in driver.get_log("browser") if e.get("level") == "SEVERE"]


def test_ui_survives_hostile_verdicts_in_chromium(tmp_path):
    """One off-schema verdict on chat.verdicts used to break the page for everyone (a thrown
    render, a consumer restarting from offset 0 for ever, /events failing on orjson.dumps). Here one of
    each goes through a real broker to `dialcheck ui` while a page is open, then a good conversation:
    it must render on the open page (live) and on a fresh one (snapshot), with the bad records counted,
    Bob's turn "1" never showing Alice's verdict on her turn "1", and no console error (CSP included)."""
    from kafka import KafkaProducer
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support import expected_conditions as EC
    from selenium.webdriver.support.ui import WebDriverWait

    from streams.kafka_config import kafka_python_kwargs
    from test_ui_store import good_verdict, hostile_verdicts, turn

    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    with contextlib.ExitStack() as stack:
        broker = stack.enter_context(EmbeddedBroker(log_path=str(tmp_path / "broker.log")))
        settings = load_settings(kafka={"bootstrap": broker.bootstrap})
        ensure_topics(settings)
        ui = stack.enter_context(UIProcess(broker.bootstrap, tmp_path / "ui.log"))
        driver = stack.enter_context(headless_chromium())
        wait = WebDriverWait(driver, WAIT_S)
        driver.get(ui.url)
        wait.until(EC.text_to_be_present_in_element((By.ID, "status"), "live"))

        producer = KafkaProducer(acks="all", **kafka_python_kwargs(settings))
        stack.callback(producer.close)
        k = settings.kafka

        def send(topic: str, conv: str, value: bytes) -> None:
            producer.send(topic, key=conv.encode(), value=value).get(timeout=60)

        alice = good_verdict("alice", "1", "Paris is in Spain.", label="REFUTES")
        # schema 2.1 on alice's and the ghost's verdicts (display hint, source link, latency); good's stays 2
        alice.update(schema_version="2.1", latency_ms=1234.5, ts=1_700_000_000.0,
                     display={"show": True, "tone": "disputed", "confidence": "low"})
        alice["evidence"][0]["url"] = "https://en.wikipedia.org/wiki/Paris"
        ghost = good_verdict("ghost", "never-sent", "A claim whose turn never came.", label="NOT ENOUGH INFO", gate=False)
        ghost.update(schema_version="2.1", latency_ms=800.0, display={"show": False, "tone": "unverified", "confidence": "low"})
        ghost["evidence"][0]["url"] = "javascript:alert(document.domain)"
        send(k.topic_turns, "alice", turn("alice", "1", "Paris is in Spain."))
        send(k.topic_turns, "bob", turn("bob", "1", "I like tea."))  # same turn id, another conversation
        send(k.topic_verdicts, "alice", orjson.dumps(alice))
        hostile = hostile_verdicts()
        for raw in hostile.values():
            send(k.topic_verdicts, "hostile", raw)
        send(k.topic_verdicts, "ghost", orjson.dumps(ghost))  # a verdict for a turn never seen
        # then a good conversation, which must render
        good = good_verdict("good", "2", "The Eiffel Tower is in Paris.", label="SUPPORTS")
        send(k.topic_turns, "good", turn("good", "1", "Where is the Eiffel Tower?", speaker="user", check=False))
        send(k.topic_turns, "good", turn("good", "2", "The Eiffel Tower is in Paris."))
        send(k.topic_verdicts, "good", orjson.dumps(good))

        def check_page(how: str) -> None:
            good_badge = f'section[data-conversation-id="good"] button.badge[data-claim-id="{good["claim_id"]}"]'
            wait.until(lambda d: d.find_elements(By.CSS_SELECTOR, good_badge))
            assert driver.find_element(By.ID, "status").text == "live", how
            assert driver.find_element(By.CSS_SELECTOR, good_badge).get_attribute("data-label") == "SUPPORTS"
            shown = {s.get_attribute("data-conversation-id") for s in driver.find_elements(By.CSS_SELECTOR, "section.conversation")}
            assert shown == {"alice", "bob", "ghost", "good"}, how  # nothing of the hostile records
            a1 = driver.find_element(By.CSS_SELECTOR, 'section[data-conversation-id="alice"] li[data-turn-id="1"]')
            b1 = driver.find_element(By.CSS_SELECTOR, 'section[data-conversation-id="bob"] li[data-turn-id="1"]')
            assert a1.find_element(By.CSS_SELECTOR, ".badge").get_attribute("data-label") == "REFUTES"
            assert [b.get_attribute("data-label") for b in b1.find_elements(By.CSS_SELECTOR, ".badge")] == ["pending"], how
            assert "Paris" not in b1.text and "I like tea." in b1.text
            g = driver.find_element(By.CSS_SELECTOR, 'section[data-conversation-id="ghost"] li[data-turn-id="never-sent"]')
            assert g.get_attribute("data-unseen") == "true" and "A claim whose turn never came." in g.text
            wait.until(lambda d: d.find_element(By.ID, "counters").get_attribute("data-rejected") == str(len(hostile)))
            assert driver.find_element(By.ID, "counters").get_attribute("data-render-errors") == "0"
            assert _severe_console(driver) == [], how

        check_page("live page")  # the page that was open while the hostile records arrived
        driver.get(ui.url)  # a fresh page: everything through the snapshot
        wait.until(EC.text_to_be_present_in_element((By.ID, "status"), "live"))
        check_page("fresh page")
        _page_for_people(driver, ui.url)
        driver.save_screenshot(str(ARTIFACTS / "ui-hostile.png"))

        state = _state_if(ui.url, lambda st: True)
        assert state["counts"]["rejected"] == len(hostile) and state["counts"]["verdicts"] == 3
        assert sum(state["rejected"].values()) == len(hostile)
        assert {r["where"].split("/")[0] for r in state["last_rejected"]} == {k.topic_verdicts}
        assert "Traceback" not in (tmp_path / "ui.log").read_text()

        # the page's own guard, for items the server never sends: a snapshot fed to the page directly
        errors = driver.execute_script("""
          applySnapshot({conversations: [
            {turns: [{conversation_id: 5, turn_id: "1"}],
             verdicts: [{conversation_id: "odd", turn_id: "1", claim_id: "z", label: "REFUTES",
                         surface: {gate: {accepted: true}}, evidence: [1, {text: 7, entail: "x"}]}]},
            "not an object",
            {turns: [{conversation_id: "fine", turn_id: "1", speaker: "user", text: "still drawn"}], verdicts: []}]});
          return renderErrors;""")
        assert errors == 2  # the turn without a string conversation id, and the conversation that is a string
        assert "still drawn" in driver.find_element(By.CSS_SELECTOR, 'section[data-conversation-id="fine"]').text
        odd = driver.find_element(By.CSS_SELECTOR, 'section[data-conversation-id="odd"] button.badge')
        assert odd.get_attribute("data-label") == "REFUTES"

        # the page's own link check, for links the server never sends: only http(s) becomes an <a>
        driver.execute_script("""
          const ev = (url) => ({passage_id: url, title: "t", text: "x", window: "x", url});
          applySnapshot({conversations: [{turns: [], verdicts: [{conversation_id: "links", turn_id: "1", claim_id: "l",
            label: "SUPPORTS", status: {state: "ok"}, display: {show: "no", confidence: "sure"},
            evidence: [ev("javascript:alert(1)"), ev("JAVASCRIPT:alert(1)"), ev(" javascript:alert(1)"),
                       ev("data:text/html,<b>x</b>"), ev("vbscript:x"), ev("/relative"), ev("https://u:p@example.org/"),
                       ev({toString: () => "https://example.org"}), ev("javascript://example.org/%0aalert(1)"),
                       ev("ftp://example.org/x"), ev("http://example.org/ok")]}]}]});""")
        links = driver.find_element(By.CSS_SELECTOR, 'section[data-conversation-id="links"]')
        assert [a.get_attribute("href") for a in links.find_elements(By.CSS_SELECTOR, "a")] == ["http://example.org/ok"]
        lb = links.find_element(By.CSS_SELECTOR, "button.badge")  # an unusable display hint is no hint
        assert lb.get_attribute("data-confidence") is None and lb.get_attribute("data-show") is None
        assert links.find_element(By.CSS_SELECTOR, "li.turn").get_attribute("data-muted") is None
        assert driver.execute_script("return renderErrors;") == 2 and _severe_console(driver) == []

        # the headers and the Host allow-list of the real `dialcheck ui`
        with urllib.request.urlopen(ui.url, timeout=10) as r:
            assert "default-src 'self'" in r.headers["Content-Security-Policy"]
            assert "frame-ancestors 'none'" in r.headers["Content-Security-Policy"]
            assert r.headers["X-Content-Type-Options"] == "nosniff" and r.headers["X-Frame-Options"] == "DENY"
        req = urllib.request.Request(ui.url + "api/state", headers={"Host": "rebind.attacker.test"})
        try:
            urllib.request.urlopen(req, timeout=10).close()
            raise AssertionError("a foreign Host header was answered")
        except urllib.error.HTTPError as e:
            assert e.code == 421

        # a grounded reply (schema 2.4): its claims not shown as supported are underlined, on the open page
        # (live) and on a fresh one (snapshot), each opening the passage it was checked against
        from test_ui_store import grounded_verdicts
        send(k.topic_turns, "rag", turn("rag", "1", GROUNDED_REPLY))
        for v in grounded_verdicts("rag", "1", GROUNDED_REPLY, GROUNDED_CLAIMS, url="https://help.example.com/plans"):
            send(k.topic_verdicts, "rag", orjson.dumps(v))
        _grounded_reply_underlined(driver, wait, "live page")
        # right / wrong in an underlined claim's panel judges that claim's verdict, not the whole reply
        (nei,) = [v for v in grounded_verdicts("rag", "1", GROUNDED_REPLY, GROUNDED_CLAIMS) if v["label"] == "NOT ENOUGH INFO"]
        judge(driver, wait, nei["claim_id"], "wrong", f'.claim-evidence[data-claim-id="{nei["claim_id"]}"] span.feedback')
        (judged,) = _records(settings, k.topic_feedback, 1)
        assert (judged["claim_id"], judged["label_shown"], judged["judgement"]) == (nei["claim_id"], "NOT ENOUGH INFO", "wrong")
        driver.get(ui.url)
        wait.until(EC.text_to_be_present_in_element((By.ID, "status"), "live"))
        _grounded_reply_underlined(driver, wait, "fresh page")
        driver.save_screenshot(str(ARTIFACTS / "ui-grounded.png"))


# a reply with characters outside the BMP before its claims (one code point, two UTF-16 units each):
# a page slicing with String.slice would underline one character off
GROUNDED_REPLY = "🎉 Our plan costs $10 a month. 𝄞 It includes phone support. It started in 1999."
GROUNDED_CLAIMS = [("Our plan costs $10 a month.", "SUPPORTS"), ("It includes phone support.", "NOT ENOUGH INFO"),
                   ("It started in 1999.", "REFUTES")]


def _grounded_reply_underlined(driver, wait, how: str) -> None:
    """The NOT ENOUGH INFO claim dotted, the REFUTES one wavy, the SUPPORTS one plain, each exactly its
    claim's characters; the badge is the turn's summary (its worst label); clicking an underline opens
    the passage with its title, link, window and where it came from."""
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support import expected_conditions as EC

    li_css = 'section[data-conversation-id="rag"] li[data-turn-id="1"]'
    wait.until(lambda d: d.find_elements(By.CSS_SELECTOR, f'{li_css}[data-underlined="2"]'))
    li = driver.find_element(By.CSS_SELECTOR, li_css)
    underlined = {u.text: u.get_attribute("data-kind") for u in li.find_elements(By.CSS_SELECTOR, ".text span.claim")}
    assert underlined == {"It includes phone support.": "unsupported", "It started in 1999.": "disputed"}, how
    assert li.find_element(By.CSS_SELECTOR, ".text").text == GROUNDED_REPLY, how
    assert li.find_element(By.CSS_SELECTOR, "button.badge").get_attribute("data-label") == "REFUTES", how
    styles = {u.get_attribute("data-kind"): u.value_of_css_property("text-decoration-style")
              for u in li.find_elements(By.CSS_SELECTOR, ".text span.claim")}
    assert styles == {"unsupported": "dotted", "disputed": "wavy"}, how
    nei = li.find_element(By.CSS_SELECTOR, '.text span.claim[data-kind="unsupported"]')
    panel = driver.find_element(By.ID, nei.get_attribute("aria-controls"))
    assert not panel.is_displayed(), how
    driver.execute_script("arguments[0].scrollIntoView({block: 'center'})", nei)
    nei.click()
    wait.until(EC.visibility_of(panel))
    assert nei.get_attribute("aria-expanded") == "true", how
    assert "It includes phone support." in panel.find_element(By.CSS_SELECTOR, ".claim-head").text, how
    passage = panel.find_element(By.CSS_SELECTOR, ".passage")
    assert "help article for 1" in passage.text and "given with the reply" in passage.text, how
    assert passage.find_element(By.CSS_SELECTOR, ".passage-source").get_attribute("data-source") == "turn", how
    assert passage.find_element(By.CSS_SELECTOR, "a.source").get_attribute("href") == "https://help.example.com/plans", how
    assert passage.find_element(By.CSS_SELECTOR, "mark").text == "Paris is in France.", how
    assert _severe_console(driver) == [], how


def _records(settings, topic: str, n: int) -> list[dict]:
    """The first `n` records of `topic`, parsed (a real consumer, from the beginning)."""
    from kafka import KafkaConsumer

    from streams.kafka_config import kafka_python_kwargs

    consumer = KafkaConsumer(topic, auto_offset_reset="earliest", consumer_timeout_ms=WAIT_S * 1000,
                             **kafka_python_kwargs(settings))
    try:
        return [json.loads(r.value) for _, r in zip(range(n), consumer)]
    finally:
        consumer.close()


def _page_for_people(driver, url: str) -> None:
    """For people: a key that is not a button and says badges open the evidence; the gate's
    internals off until the "show checker details" toggle is on; counts, median latency and time per
    conversation (the same counts /api/state gives); the display hint on the badge (a low-confidence
    mark, a faded verdict not for users); http(s) source links only, opening a new page without
    opener or referrer; a filter by label."""
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import Select

    legend = driver.find_element(By.ID, "legend")
    assert "click a badge for its evidence" in legend.text
    assert not legend.find_elements(By.CSS_SELECTOR, "button, .badge, a, input")

    # the gate's numbers and the probabilities: on no turn until the toggle is on, then on each verdict
    internals = driver.find_elements(By.CSS_SELECTOR, ".internals")
    assert len(internals) == 3 and not any(i.is_displayed() for i in internals)
    alice = driver.find_element(By.CSS_SELECTOR, 'section[data-conversation-id="alice"]')
    assert "gate" not in alice.text and "τ" not in alice.text
    toggle = driver.find_element(By.ID, "internals")
    toggle.click()
    assert all(i.is_displayed() for i in internals)
    assert "rewrite used (gate score 0.910 ≥ τ 0.80)" in alice.find_element(By.CSS_SELECTOR, ".internals").text
    assert "verdict 1.2 s after the turn" in alice.find_element(By.CSS_SELECTOR, ".internals").text
    toggle.click()
    assert not any(i.is_displayed() for i in internals)

    # counts per conversation, as /api/state counts them
    counts = driver.find_element(By.CSS_SELECTOR, 'section[data-conversation-id="good"] .conv-counts')
    assert (counts.get_attribute("data-turns"), counts.get_attribute("data-checked")) == ("2", "1")
    assert "2 turns · 1 checked: 1 SUPPORTS" in counts.text and "to verdict" not in counts.text  # good has no latency
    a_counts = alice.find_element(By.CSS_SELECTOR, ".conv-counts")
    assert float(a_counts.get_attribute("data-latency-ms")) == 1234.5
    assert "1 checked: 1 REFUTES · median 1.2 s to verdict · last turn" in a_counts.text
    for conv in _state_if(url, lambda st: True)["conversations"]:
        c = driver.find_element(By.CSS_SELECTOR, f'section[data-conversation-id="{conv["id"]}"] .conv-counts')
        summary = conv["summary"]
        assert json.loads(c.get_attribute("data-labels")) == summary["labels"], conv["id"]
        assert int(c.get_attribute("data-checked")) == summary["checked"], conv["id"]
        assert int(c.get_attribute("data-turns")) == summary["turns"], conv["id"]
        page_ms = c.get_attribute("data-latency-ms")
        assert (None if page_ms is None else float(page_ms)) == summary["latency_ms_median"], conv["id"]

    # the display hint: alice's badge says low confidence; the ghost's verdict is drawn, faded
    a_badge = alice.find_element(By.CSS_SELECTOR, "button.badge")
    assert (a_badge.get_attribute("data-confidence"), a_badge.get_attribute("data-tone")) == ("low", "disputed")
    assert "low confidence" in a_badge.text and "shown as" not in a_badge.text  # disputed is REFUTES' own tone
    ghost = driver.find_element(By.CSS_SELECTOR, 'section[data-conversation-id="ghost"] li.turn')
    g_badge = ghost.find_element(By.CSS_SELECTOR, "button.badge")
    assert ghost.get_attribute("data-muted") == "true" and g_badge.is_displayed()
    assert g_badge.get_attribute("data-show") == "false" and "not shown to users" in ghost.text
    assert float(g_badge.value_of_css_property("opacity")) < 1
    assert alice.find_element(By.CSS_SELECTOR, "li.turn").get_attribute("data-muted") is None
    g_text = driver.find_element(By.CSS_SELECTOR, 'section[data-conversation-id="good"] button.badge').text
    assert "confidence" not in g_text  # a schema 2 verdict: no hint, no mark

    # source links: alice's https link, opening a new page with neither opener nor referrer; none for
    # the ghost's javascript: link, nor anywhere an evidence item has no url
    a_badge.click()
    link = alice.find_element(By.CSS_SELECTOR, ".evidence a.source")
    assert link.is_displayed() and link.get_attribute("href") == "https://en.wikipedia.org/wiki/Paris"
    assert set(link.get_attribute("rel").split()) == {"noopener", "noreferrer"} and link.get_attribute("target") == "_blank"
    assert "en.wikipedia.org" in link.text
    g_badge.click()
    assert ghost.find_element(By.CSS_SELECTOR, ".evidence .passage").is_displayed()
    assert not ghost.find_elements(By.CSS_SELECTOR, "a")
    assert [a.get_attribute("href") for a in driver.find_elements(By.CSS_SELECTOR, "a")] == [link.get_attribute("href")]
    a_badge.click()
    g_badge.click()

    def shown() -> set[str]:
        return {s.get_attribute("data-conversation-id") for s in driver.find_elements(By.CSS_SELECTOR, "section.conversation")
                if s.is_displayed()}
    choose = Select(driver.find_element(By.ID, "filter"))
    for value, expected in (("REFUTES", {"alice"}), ("pending", {"bob"}), ("SUPPORTS", {"good"}),
                            ("", {"alice", "bob", "ghost", "good"})):
        choose.select_by_value(value)
        assert shown() == expected, value
    choose.select_by_value("REFUTES")
    assert [li.get_attribute("data-turn-id") for li in driver.find_elements(By.CSS_SELECTOR, "li.turn") if li.is_displayed()] == ["1"]
    choose.select_by_value("")


def _cli(*args: str) -> str:
    proc = subprocess.run([sys.executable, "-m", "dialcheck.cli", *args], cwd=str(REPO_ROOT), env=_child_env(),
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return proc.stdout


def _state_if(url: str, ready):
    """/api/state once `ready(state)` holds, else None (a WebDriverWait condition)."""
    import urllib.request

    with urllib.request.urlopen(url + "api/state", timeout=10) as r:
        st = json.load(r)
    return st if ready(st) else None


def _claims_by_label(prefix: str, want: dict[str, int]) -> list[tuple[str, str]]:
    """(claim, the stand-in's label for it) until each label has its count (the stand-in labels by hash)."""
    import hashlib

    from tests.stream_standin import LABELS

    out, have, i = [], {k: 0 for k in want}, 0
    while any(have[k] < n for k, n in want.items()):
        claim = f"{prefix} claim {i}{' (high)' if i % 2 else ''} is stated."
        label = LABELS[int(hashlib.sha1(claim.encode()).hexdigest(), 16) % 3]
        if have.get(label, 10**9) < want.get(label, 0):
            have[label] += 1
            out.append((claim, label))
        i += 1
    return out


def live_page(stack: contextlib.ExitStack, settings, tmp_path: Path, worker_log: Path, worker_args: list[str]):
    """The feedback tests' set-up on `stack`: the topics, a worker, the live page and a headless Chromium
    showing it live; returns (worker, ui, driver, wait) once the worker is ready."""
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support import expected_conditions as EC
    from selenium.webdriver.support.ui import WebDriverWait

    ensure_topics(settings)
    worker = stack.enter_context(WorkerProcess(settings, worker_log, extra_args=worker_args))
    ui = stack.enter_context(UIProcess(settings.kafka.bootstrap, tmp_path / "ui.log"))
    driver = stack.enter_context(headless_chromium())
    wait = WebDriverWait(driver, WAIT_S)
    driver.get(ui.url)
    wait.until(EC.text_to_be_present_in_element((By.ID, "status"), "live"))
    worker.wait_ready(timeout_s=WAIT_S)
    return worker, ui, driver, wait


JUDGE_TRIES = 3
_JUDGED = """const g = document.querySelector(arguments[0]); if (!g) return null;
const b = g.querySelector(`button.fb[data-judgement="${arguments[1]}"]`);
if (b && b.getAttribute("aria-pressed") === "true") return "sent";
return g.dataset.state === "error" ? "error: " + g.title : null;"""


def judge(driver, wait, cid: str, judgement: str, group: str | None = None) -> None:
    """Click right / wrong on claim `cid`'s turn (or in the `group` of buttons named) as a person would:
    click, wait until the page says the judgement was sent (aria-pressed) or not sent ("click again":
    the broker did not take it in time), and click again then, at most JUDGE_TRIES times. Each look
    finds the buttons anew: a verdict event may redraw the turn between the click and the answer."""
    from selenium.webdriver.common.by import By

    group = group or f'li.turn:has(button.badge[data-claim-id="{cid}"]) span.feedback'
    outcome = None
    for _ in range(JUDGE_TRIES):
        b = driver.find_element(By.CSS_SELECTOR, f'{group} button.fb[data-judgement="{judgement}"]')
        driver.execute_script("arguments[0].scrollIntoView({block: 'center'})", b)
        b.click()
        outcome = wait.until(lambda d: d.execute_script(_JUDGED, group, judgement))
        if outcome == "sent":
            return
    raise AssertionError(f"judgement {judgement} on {cid} not sent after {JUDGE_TRIES} clicks: {outcome}")


def test_feedback_buttons_store_judgements_and_the_page_shows_precision_in_chromium(tmp_path):
    """Feedback: right / wrong on each verdict in a real Chromium → POST → chat.feedback → the worker's
    store, joined to the verdict it published (source "user"); a changed mind replaces the first click;
    the page's live precision per badge and the drift alarm's banner follow the judgements read back
    from the topic, and the worker's /metrics says the same. A file imported with `dialcheck feedback
    import` lands in the same store. Model-free checker with display hints (tests/feedback_standin.py)."""
    from selenium.webdriver.common.by import By

    from schemas import ChatTurn
    from streams.feedback_store import FeedbackStore
    from streams.observability import METRICS_MARKER
    from streams.replay import TurnProducer

    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    claims = _claims_by_label("fbui", {"SUPPORTS": 2, "REFUTES": 2, "NOT ENOUGH INFO": 1})
    store_path = tmp_path / "feedback.sqlite3"
    with contextlib.ExitStack() as stack:
        broker = stack.enter_context(EmbeddedBroker(log_path=str(tmp_path / "broker.log")))
        settings = load_settings(kafka={"bootstrap": broker.bootstrap},
                                 stream={"feedback_store": str(store_path), "trace_records": True})
        worker, ui, driver, wait = live_page(stack, settings, tmp_path, tmp_path / "worker.log",
                                             ["--pipeline", "tests.feedback_standin:create"])
        metrics = worker.wait_for(METRICS_MARKER, 30).split(METRICS_MARKER, 1)[1].strip()
        with TurnProducer(settings) as p:
            for i, (claim, _) in enumerate(claims):
                p.send_turn(ChatTurn(f"fbui-{i}", f"fbui-{i}#r", "assistant", claim, check=True))
        badges_css = "button.badge[data-claim-id]"
        wait.until(lambda d: len(d.find_elements(By.CSS_SELECTOR, badges_css)) >= len(claims))
        assert not driver.find_element(By.ID, "alarm").is_displayed()

        by_label: dict[str, list[str]] = {}
        for b in driver.find_elements(By.CSS_SELECTOR, badges_css):
            by_label.setdefault(b.get_attribute("data-label"), []).append(b.get_attribute("data-claim-id"))
        assert sorted(map(len, by_label.values())) == [1, 2, 2]
        for cid in by_label["SUPPORTS"]:
            judge(driver, wait, cid, "right")
        for cid in by_label["REFUTES"]:
            judge(driver, wait, cid, "wrong")
        judge(driver, wait, by_label["SUPPORTS"][0], "wrong")  # a changed mind: replaces the first click
        judge(driver, wait, by_label["SUPPORTS"][0], "right")  # and back

        # the page: precision per badge from the judgements read back from chat.feedback, and the banner
        # read in one script: each precision event redraws the rows (an element found before may be gone)
        def rows() -> dict[str, dict]:
            return driver.execute_script(
                "const o = {}; for (const r of document.querySelectorAll('.precision-row'))"
                " o[r.dataset.label] = {...r.dataset, text: r.textContent}; return o;")
        def settled(d) -> bool:  # the last click (back to right) read back too
            got = rows()
            return (got.get("REFUTES", {}).get("n") == "2" and got.get("SUPPORTS", {}).get("n") == "2"
                    and got["SUPPORTS"].get("precision") == "1")
        wait.until(settled)
        wait.until(lambda d: d.find_element(By.ID, "alarm").is_displayed())
        got = rows()
        assert got["REFUTES"]["alarm"] == "true" and got["SUPPORTS"]["alarm"] == "false"
        assert float(got["SUPPORTS"]["precision"]) == 1.0 and "shown 40.0 % of 5 verdicts" in got["SUPPORTS"]["text"]
        # one row per NLI model version of the judged verdicts (the stand-in's verdicts name none)
        versions = driver.execute_script("return [...document.querySelectorAll('.precision-version')]"
                                         ".map((r) => [r.dataset.nliVersion, r.dataset.alarm, r.textContent]);")
        assert [v[:2] for v in versions] == [["unknown", "true"]] and "SUPPORTS 100.0 %" in versions[0][2]
        alarm = driver.find_element(By.ID, "alarm").text
        assert "REFUTES" in alarm and "85.0 %" in alarm
        png = ARTIFACTS / "ui-feedback.png"
        assert driver.save_screenshot(str(png)) and png.stat().st_size > 10_000
        assert not [m for m in _severe_console(driver) if "favicon" not in m]

        # the worker's store: one row per click target (the changed mind replaced), joined, source user
        def stored():
            with FeedbackStore(store_path) as st:
                return st.judged()
        wait.until(lambda d: len(stored()) == 4 and {j.judgement for j in stored()
                                                     if j.claim_id == by_label["SUPPORTS"][0]} == {"right"})
        judged = stored()
        assert {j.source for j in judged} == {"user"}
        assert {j.claim_id: j.judgement for j in judged} == {**{c: "right" for c in by_label["SUPPORTS"]},
                                                            **{c: "wrong" for c in by_label["REFUTES"]}}
        assert all(j.verdict["claim_id"] == j.claim_id and j.shown is True for j in judged)

        # /metrics of the worker agrees with the page
        from prometheus_client.parser import text_string_to_metric_families

        def gauges():
            try:  # a scrape on a loaded machine may time out: the wait asks again
                with urllib.request.urlopen(metrics, timeout=30) as r:
                    body = r.read().decode()
            except OSError:
                return {}
            return {(x.name, x.labels.get("label")): x.value for fam in text_string_to_metric_families(body)
                    for x in fam.samples}
        wait.until(lambda d: gauges().get(("dialcheck_precision_alarm", "REFUTES")) == 1)
        g = gauges()
        assert g[("dialcheck_shown_precision", "SUPPORTS")] == 1.0 and g[("dialcheck_shown_judged", "REFUTES")] == 2
        assert g[("dialcheck_shown_coverage", "SUPPORTS")] == pytest.approx(0.4)

        # and from a file: an annotator's export of the NEI verdict and one more judgement
        nei = by_label["NOT ENOUGH INFO"][0]
        v = next(j.verdict for j in judged)
        export = tmp_path / "export.jsonl"
        export.write_text(json.dumps({"conversation_id": v["conversation_id"], "turn_id": v["turn_id"],
                                      "claim_id": v["claim_id"], "label_shown": v["label"], "judgement": "unsure",
                                      "source": "annotator", "ts": 1.0}) + "\n")
        out = _cli("feedback", "import", str(export), "--store", str(store_path))
        assert "imported 1 judgements" in out and "the store holds 5 judgements" in out
        assert nei in {b.get_attribute("data-claim-id") for b in driver.find_elements(By.CSS_SELECTOR, badges_css)}
