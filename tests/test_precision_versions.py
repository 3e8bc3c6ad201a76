"""Live precision per NLI model version: the feedback store's join, /metrics and the page's JSON.

Why: an adapted verifier is rolled out by swapping the model directory under a running worker; the
rollout is judged by the precision of the badges each model showed, so a judgement must count under
the version of the verdict it judges (the verdict's `model_versions.nli`, which an adapted model's
calibration.json names from its base and its data), never under whichever model runs when the
judgement arrives. The real store (a SQLite file, and a PostgreSQL database) and the page's real
store; no mocks."""
from __future__ import annotations

import json

import orjson
import pytest
from prometheus_client import generate_latest
from prometheus_client.parser import text_string_to_metric_families

from schemas.feedback import feedback_from_dict
from schemas.settings import load_settings
from streams.feedback_store import FeedbackStore
from streams.observability import Observability, _PrecisionCollector
from streams.precision import ALL_VERSIONS, UNKNOWN_VERSION, clopper_pearson
from streams.ui.store import MAX_VERSIONS, OTHER_VERSIONS, Store
from test_ui_store import good_verdict

pytestmark = pytest.mark.unit

BASE = "dialcheck-nli-minilm-l6-fp32-step438"
ADAPTED = BASE + "+adapt-0123abcd"  # what `dialcheck adapt` names a model: its base and its data's hash


def verdict(i: int, version: str | None, label: str = "SUPPORTS", show: bool = True, conf: str = "medium") -> dict:
    v = good_verdict("c", f"t{i}", f"claim {i}", label=label)
    v["model_versions"] = {"nli": version, "protocol": "e2e"} if version is not None else {"protocol": "e2e"}
    v["display"] = {"show": show, "tone": "supported" if label == "SUPPORTS" else "disputed", "confidence": conf}
    return v


def judgement(v: dict, right: bool, by_index: bool = False) -> dict:
    ref = {"claim_index": 0} if by_index else {"claim_id": v["claim_id"]}
    return {"conversation_id": v["conversation_id"], "turn_id": v["turn_id"], **ref, "label_shown": v["label"],
            "judgement": "right" if right else "wrong", "source": "moderator", "ts": 1.0}


# base: 10 shown SUPPORTS judged 6 right (4 wrong), 4 hidden; adapted: 8 shown SUPPORTS judged all
# right (2 high), 2 shown REFUTES judged wrong; one judgement of a verdict never stored
BASE_VERDICTS = [verdict(i, BASE, show=i < 10) for i in range(14)]
ADAPTED_VERDICTS = ([verdict(100 + i, ADAPTED, conf="high" if i < 2 else "medium") for i in range(8)]
                    + [verdict(200 + i, ADAPTED, label="REFUTES") for i in range(2)])
JUDGED = [(v, i < 6) for i, v in enumerate(BASE_VERDICTS[:10])] + [(v, i < 8) for i, v in enumerate(ADAPTED_VERDICTS)]
JUDGEMENTS = [judgement(v, right) for v, right in JUDGED] + [judgement(verdict(999, ADAPTED), True)]


@pytest.fixture
def store(feedback_store_url):
    """The same judgements on each backend: the version comes out of the stored verdict's JSON in SQL."""
    with FeedbackStore(feedback_store_url) as s:
        for verdicts in (BASE_VERDICTS, ADAPTED_VERDICTS, [verdict(300, None)]):  # the rollout comes later
            s.add_verdicts(verdicts)
        s.add_feedback([feedback_from_dict(j) for j in JUDGEMENTS])
        yield s


def test_judgements_count_under_the_version_of_the_verdict_they_judge(store):
    by = {v: {r.label: r for r in rows} for v, rows in store.precision_by_version(0.85, 0.9).items()}
    assert list(by) == [ALL_VERSIONS, BASE, ADAPTED, UNKNOWN_VERSION]  # pooled, then first stored first
    b, a = by[BASE]["SUPPORTS"], by[ADAPTED]["SUPPORTS"]
    assert (b.right, b.wrong, b.shown, b.verdicts) == (6, 4, 10, 14) and b.coverage == pytest.approx(10 / 14)
    assert (b.lower, b.upper) == pytest.approx(clopper_pearson(6, 10, 0.9)) and b.alarm  # 0.6: upper 0.83 < 0.85
    assert (a.right, a.wrong, a.shown, a.verdicts, a.alarm) == (8, 0, 8, 10, False)
    assert (by[ADAPTED]["high"].right, by[BASE]["high"].n) == (2, 0)
    assert (by[ADAPTED]["REFUTES"].wrong, by[BASE]["REFUTES"].n) == (2, 0)
    u = by[UNKNOWN_VERSION]["SUPPORTS"]  # the unstored verdict's judgement; the stored one naming no model
    assert (u.right, u.wrong, u.verdicts) == (1, 0, 1)
    pooled = by[ALL_VERSIONS]["SUPPORTS"]
    assert (pooled.right, pooled.wrong, pooled.shown, pooled.verdicts) == (15, 4, 19, 25)
    assert store.precision(0.85, 0.9) == store.precision_by_version(0.85, 0.9)[ALL_VERSIONS]


def test_a_judged_verdict_names_its_model_version(store):
    versions = [j.nli_version for j in store.judged(joined_only=False)]
    assert versions.count(BASE) == 10 and versions.count(ADAPTED) == 10 and versions.count(UNKNOWN_VERSION) == 1


def test_metrics_carry_the_model_version_as_a_label(store, monkeypatch):
    obs = Observability(load_settings())
    obs.attach_feedback(store, 0.85, 0.9)
    monkeypatch.setattr(_PrecisionCollector, "CACHE_S", 0.0)
    s = {(x.name, x.labels.get("label"), x.labels.get("nli_version")): x.value
         for fam in text_string_to_metric_families(generate_latest(obs.registry).decode()) for x in fam.samples}
    assert s[("dialcheck_shown_precision", "SUPPORTS", BASE)] == pytest.approx(0.6)
    assert s[("dialcheck_shown_precision", "SUPPORTS", ADAPTED)] == 1.0
    assert s[("dialcheck_shown_precision", "SUPPORTS", ALL_VERSIONS)] == pytest.approx(15 / 19)
    assert s[("dialcheck_precision_alarm", "SUPPORTS", BASE)] == 1 and s[("dialcheck_precision_alarm", "SUPPORTS", ADAPTED)] == 0
    assert s[("dialcheck_shown_judged", "REFUTES", ADAPTED)] == 2 and s[("dialcheck_shown_judged", "REFUTES", BASE)] == 0
    assert s[("dialcheck_shown_coverage", "SUPPORTS", ADAPTED)] == pytest.approx(0.8)
    assert ("dialcheck_shown_precision", "REFUTES", BASE) not in s  # nothing judged: no made-up number
    assert s[("dialcheck_precision_target", "SUPPORTS", None)] == pytest.approx(0.85)  # one target, no version


def test_the_page_shows_precision_per_model_version():
    """The page joins a judgement to a verdict it read by claim id, else by turn (a claim index), also
    when the judgement came first; versions first read first; `rows` stay the pooled ones."""
    page = Store()
    early = judgement(ADAPTED_VERDICTS[0], True)  # judged before the page read its verdict
    assert page.add_feedback_raw(orjson.dumps({**early, "source": "user"}))
    for v in BASE_VERDICTS + ADAPTED_VERDICTS:
        page.add_verdict_raw(orjson.dumps(v))
    for i, (v, right) in enumerate(JUDGED):
        page.add_feedback_raw(orjson.dumps(judgement(v, right, by_index=i % 2 == 0)))
    view = page.snapshot()["precision"]
    versions = {v["nli_version"]: {r["label"]: r for r in v["rows"]} for v in view["versions"]}
    assert [v["nli_version"] for v in view["versions"]] == [BASE, ADAPTED]
    assert (versions[BASE]["SUPPORTS"]["right"], versions[BASE]["SUPPORTS"]["wrong"]) == (6, 4)
    assert versions[ADAPTED]["SUPPORTS"]["right"] == 9 and versions[ADAPTED]["SUPPORTS"]["coverage"] == 0.8
    assert [v["alarm"] for v in view["versions"]] == [["SUPPORTS"], ["REFUTES"]]
    pooled = {r["label"]: r for r in view["rows"]}
    assert (pooled["SUPPORTS"]["right"], pooled["SUPPORTS"]["wrong"], pooled["SUPPORTS"]["verdicts"]) == (15, 4, 24)


def test_the_page_keeps_a_bounded_number_of_versions_apart():
    page = Store()
    for i in range(MAX_VERSIONS + 5):
        page.add_verdict_raw(orjson.dumps(verdict(i, f"v{i}")))
    names = [v["nli_version"] for v in page.snapshot()["precision"]["versions"]]
    assert len(names) == MAX_VERSIONS + 1 and names[-1] == OTHER_VERSIONS


def test_feedback_stats_shows_each_model_version_of_a_rollout(store, feedback_store_url, capsys):
    """`dialcheck feedback stats` on a store that saw a rollout: the pooled rows, then each version's
    (text and --json), the adapted model's badges judged apart from its base's."""
    from dialcheck.cli import main

    assert main(["feedback", "stats", "--store", feedback_store_url]) == 1  # the pooled SUPPORTS rows alarm: exit 1
    out = capsys.readouterr().out
    assert "ALARM" in out and f"NLI model {BASE}:" in out and f"NLI model {ADAPTED}:" in out
    assert out.index(f"NLI model {BASE}:") < out.index(f"NLI model {ADAPTED}:")
    assert main(["feedback", "stats", "--store", feedback_store_url, "--json"]) == 1
    got = json.loads(capsys.readouterr().out)
    per = {v: {r["label"]: r for r in rows} for v, rows in got["by_nli_version"].items()}
    assert list(per) == [BASE, ADAPTED, UNKNOWN_VERSION]
    assert (per[BASE]["SUPPORTS"]["right"], per[BASE]["SUPPORTS"]["wrong"]) == (6, 4)
    assert (per[ADAPTED]["SUPPORTS"]["right"], per[ADAPTED]["SUPPORTS"]["wrong"]) == (8, 0)
    assert {r["label"]: r["n"] for r in got["precision"]}["SUPPORTS"] == 19
