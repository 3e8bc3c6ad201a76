"""The verifier learns the deployment's traffic, end to end in one stream test: judgements of the
verdicts a running worker published arrive on chat.feedback, `dialcheck adapt --from-feedback` writes
a model directory from the worker's feedback store, the directory is rolled out as docs/operations.md
says (written beside, two renames, `kill -HUP`), and a probe verdict changes as the new model says;
the judgements are told apart by the model version of the verdict they judge; the rollback (the same
two renames and SIGHUP) brings the base model's numbers back.

The traffic is a deployment whose replies state capitals: for each U.S. state, Canadian province and
Australian state a right reply ("Sacramento is the capital of California.") and a wrong-relation one
("Sacramento is the capital of the United States."), each its own conversation (one after the other
in one conversation, the second reads as off the topic and gets no badge), both checked against the
same passage ("Sacramento is the capital city of the U.S. state of California."). The shipped
verifier shows a SUPPORTS badge on both (its known wrong-relation weakness); annotators judge every
badge. The probe is a claim of the same kind from a country the traffic never names ("Munich is the
capital of Germany." from the Bavaria passage).

Real parts throughout: the embedded broker, the `dialcheck worker` process with the real fv Pipeline
and the shipped NLI model (a copy: the deployment's own model directory), the real feedback store,
the real `dialcheck adapt` (fine-tuning on CPU, the forgetting check on the yardstick sets, the
hold-out certification). The shipped verifier is already a small model (MiniLM-L6), so no smaller
stand-in is used. What makes it small and fast, and what that costs:
- 132 judged replies (66 conversations), two cross-fitting folds (`--folds 2`: two fold models and
  the final one are trained), 10 records per yardstick set in the report (`--limit-per-set 10`), 100
  pairs of the general-NLI anchor (`--anchor-pairs 100`);
- `--target 0.8 --confidence 0.8`: 0.85 / 0.9 needs 15 supported replies shown with none wrong;
  0.8 / 0.8 needs 8. The gate (ranking with confidence, the safety guards) is otherwise adapt's own.
Chat turns carry no evidence and the fv protocol reads gold evidence, so the checker hands each turn
its passage (`GoldEvidence`); no passage index is built."""
from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
from dataclasses import replace

import orjson
import pytest

from schemas import ChatTurn, Verdict
from schemas.settings import REPO_ROOT
from streams.feedback_store import FeedbackStore
from streams.precision import ALL_VERSIONS
from streams.reload import REFUSED, RELOADED
from streams.worker import WorkerProcess
from tests.test_feedback_stream import publish, send_feedback, stream_settings
from tests.waiting import wait_until

pytestmark = [pytest.mark.broker, pytest.mark.model, pytest.mark.data]

WAIT_S = 300  # bounds a hung step on a loaded machine; nothing is timed
ADAPT_TIMEOUT_S = 1500
US = {"Alabama": "Montgomery", "Alaska": "Juneau", "Arizona": "Phoenix", "Arkansas": "Little Rock",
      "California": "Sacramento", "Colorado": "Denver", "Connecticut": "Hartford", "Delaware": "Dover",
      "Florida": "Tallahassee", "Georgia": "Atlanta", "Hawaii": "Honolulu", "Idaho": "Boise",
      "Illinois": "Springfield", "Indiana": "Indianapolis", "Iowa": "Des Moines", "Kansas": "Topeka",
      "Kentucky": "Frankfort", "Louisiana": "Baton Rouge", "Maine": "Augusta", "Maryland": "Annapolis",
      "Massachusetts": "Boston", "Michigan": "Lansing", "Minnesota": "Saint Paul", "Mississippi": "Jackson",
      "Missouri": "Jefferson City", "Montana": "Helena", "Nebraska": "Lincoln", "Nevada": "Carson City",
      "New Hampshire": "Concord", "New Jersey": "Trenton", "New Mexico": "Santa Fe", "New York": "Albany",
      "North Carolina": "Raleigh", "North Dakota": "Bismarck", "Ohio": "Columbus", "Oklahoma": "Oklahoma City",
      "Oregon": "Salem", "Pennsylvania": "Harrisburg", "Rhode Island": "Providence", "South Carolina": "Columbia",
      "South Dakota": "Pierre", "Tennessee": "Nashville", "Texas": "Austin", "Utah": "Salt Lake City",
      "Vermont": "Montpelier", "Virginia": "Richmond", "Washington": "Olympia", "West Virginia": "Charleston",
      "Wisconsin": "Madison", "Wyoming": "Cheyenne"}
CANADA = {"Ontario": "Toronto", "Quebec": "Quebec City", "British Columbia": "Victoria", "Alberta": "Edmonton",
          "Manitoba": "Winnipeg", "Saskatchewan": "Regina", "Nova Scotia": "Halifax", "New Brunswick": "Fredericton",
          "Newfoundland and Labrador": "St. John's", "Prince Edward Island": "Charlottetown"}
AUSTRALIA = {"New South Wales": "Sydney", "Victoria": "Melbourne", "Queensland": "Brisbane",
             "Western Australia": "Perth", "South Australia": "Adelaide", "Tasmania": "Hobart"}
# (city, "<kind> of", region, country)
REGIONS = ([(c, "U.S. state of", r, "the United States") for r, c in US.items()]
           + [(c, "Canadian province of", r, "Canada") for r, c in CANADA.items()]
           + [(c, "Australian state of", r, "Australia") for r, c in AUSTRALIA.items()])
PROBE = ("Munich", "German state of", "Bavaria", "Germany")


def passage(city: str, kind: str, region: str) -> str:
    return f"{city} is the capital city of the {kind} {region}."


def replies(city: str, kind: str, region: str, country: str) -> dict[str, str]:
    """The right reply and the wrong-relation one (a capital, but not the country's)."""
    return {"right": f"{city} is the capital of {region}.", "wrong": f"{city} is the capital of {country}."}


# every reply's gold evidence, by its text: (title, passage)
EVIDENCE = {text: (city, passage(city, kind, region))
            for city, kind, region, country in [*REGIONS, PROBE]
            for text in replies(city, kind, region, country).values()}
PROBE_TEXT = replies(*PROBE)["wrong"]


class GoldEvidence:
    """The real fv Pipeline, handing each turn the passage its reply is about (EVIDENCE); reloads
    (SIGHUP) are the Pipeline's own."""

    def __init__(self, pipeline):
        self.pipeline = pipeline

    def check_turns(self, items):
        return self.pipeline.check_turns([replace(it, gold_evidence=[EVIDENCE[it.claim]] if it.claim in EVIDENCE else [])
                                          for it in items])

    def reload(self) -> str:
        return self.pipeline.reload()


def create(settings, protocol: str = "fv", surface: str = "r0"):
    from workers.pipeline import Pipeline

    return GoldEvidence(Pipeline.from_settings(settings, protocol="fv", surface=surface))


WORKER_ARGS = ["--pipeline", "tests.test_adapt_loop:create", "--protocol", "fv", "--surface", "r0"]


def publish_by_turn(settings, worker, turns: list[ChatTurn]) -> dict[str, Verdict]:
    """Send the turns; their verdicts by turn id."""
    return {v.turn_id: v for v in publish(settings, worker, turns, WAIT_S).values()}


def probe(settings, worker, run: str) -> Verdict:
    turn = ChatTurn(f"probe-{run}", f"probe-{run}#r", "assistant", PROBE_TEXT, check=True)
    return publish_by_turn(settings, worker, [turn])[turn.turn_id]


def own_score(model_dir) -> float:
    """The model's own p(entailment) for the probe's passage and reply (what p(SUPPORTS) rests on)."""
    from workers.models.onnx_nli import OnnxNLI

    return float(OnnxNLI(str(model_dir)).predict([EVIDENCE[PROBE_TEXT][1]], [PROBE_TEXT])[0][0])


def sighup(worker, marker: str) -> str:
    """Signal the worker; the reload line it prints (this reload's: counted from the lines before)."""
    before = worker.log_text().count(marker)
    os.kill(worker.pid, signal.SIGHUP)
    wait_until(lambda: worker.log_text().count(marker) > before, WAIT_S, f"no {marker!r} line after SIGHUP")
    return [ln for ln in worker.log_text().splitlines() if marker in ln][-1]


def adapt(settings, store_path, base, out) -> subprocess.CompletedProcess:
    env = {**os.environ, **settings.env()}
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(REPO_ROOT), env.get("PYTHONPATH", "")]))
    return subprocess.run([sys.executable, "-m", "dialcheck.cli", "adapt", "--from-feedback", "--store", str(store_path),
                           "--base", str(base), "--out", str(out), "--folds", "2", "--limit-per-set", "10",
                           "--anchor-pairs", "100", "--target", "0.8", "--confidence", "0.8", "--quiet"],
                          cwd=str(REPO_ROOT), env=env, capture_output=True, text=True, timeout=ADAPT_TIMEOUT_S)


def check_with_model_dir(model_dir) -> dict:
    """`dialcheck check --protocol fv` in a fresh process whose only model setting is DIALCHECK_NLI_MODEL_DIR:
    the directory's model, decision and display are what a user gets (the probe's verdict as JSON)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("DIALCHECK_DECISION", "DIALCHECK_DISPLAY"))}
    env.update(DIALCHECK_NLI_MODEL_DIR=str(model_dir),
               PYTHONPATH=os.pathsep.join(filter(None, [str(REPO_ROOT), env.get("PYTHONPATH", "")])))
    premise, claim = EVIDENCE[PROBE_TEXT][1], PROBE_TEXT
    r = subprocess.run([sys.executable, "-m", "dialcheck", "check", "--protocol", "fv", "--evidence", premise,
                        "--claim", claim, "--json"], cwd=str(REPO_ROOT), env=env, capture_output=True, text=True,
                       timeout=600)
    assert r.returncode == 0, r.stderr[-2000:]
    return json.loads(r.stdout.strip().splitlines()[-1])


@pytest.mark.timeout(2400)
def test_judged_verdicts_adapt_the_verifier_the_worker_takes_on_sighup(fresh_broker, tmp_path):
    models = tmp_path / "models"
    live, beside, previous = models / "nli", models / "nli-new", models / "nli-previous"
    shipped = stream_settings(fresh_broker.bootstrap, tmp_path, "adapt")
    shutil.copytree(shipped.models.nli_model_dir, live)  # the deployment's own model directory, not the source tree's
    settings = shipped.updated(models={"nli_model_dir": str(live)})
    store_path = settings.stream.feedback_store
    base_version = json.loads((live / "calibration.json").read_text())["version"]
    log = tmp_path / "worker.log"
    with WorkerProcess(settings, log, extra_args=WORKER_ARGS) as worker:
        worker.wait_ready(WAIT_S)
        pid = worker.pid

        # 1. the deployment's traffic and the probe, checked by the shipped verifier
        turns = {f"c{i:02d}-{kind}#r": ChatTurn(f"c{i:02d}-{kind}", f"c{i:02d}-{kind}#r", "assistant", text, check=True)
                 for i, region in enumerate(REGIONS) for kind, text in replies(*region).items()}
        got = publish_by_turn(settings, worker, list(turns.values()))
        before = probe(settings, worker, "before")
        assert {v.model_versions["nli"] for v in [*got.values(), before]} == {base_version}
        badges = {tid: v for tid, v in got.items() if v.label in ("SUPPORTS", "REFUTES")}
        wrong_shown = [tid for tid, v in badges.items() if "-wrong#" in tid and v.label == "SUPPORTS"]
        assert len(wrong_shown) >= len(REGIONS) // 2, "the shipped model no longer errs on this traffic: nothing to learn"

        # 2. annotators judge every badge on chat.feedback; the worker stores them joined
        right = lambda tid, v: (v.label == "SUPPORTS") == ("-right#" in tid)  # noqa: E731
        records = [(v.conversation_id.encode(), orjson.dumps(
            {"conversation_id": v.conversation_id, "turn_id": v.turn_id, "claim_id": v.claim_id, "label_shown": v.label,
             "judgement": "right" if right(tid, v) else "wrong", "source": "annotator", "ts": 1_700_000_000.0 + i,
             "feedback_id": f"ann-{i}"})) for i, (tid, v) in enumerate(sorted(badges.items()))]
        send_feedback(settings, records)

        def counts() -> dict:
            with FeedbackStore(store_path) as st:
                return st.counts()
        wait_until(lambda: counts()["feedback"] == len(records) and counts()["unjoined"] == 0, WAIT_S,
                   "the judgements did not reach the worker's store, joined")

        # 3. adapt on the store, written beside the running model
        done = adapt(settings, store_path, live, beside)
        assert done.returncode == 0, done.stderr[-3000:]
        report = json.loads((beside / "adapt.json").read_text())
        new_version = json.loads((beside / "calibration.json").read_text())["version"]
        assert new_version.startswith(base_version + "+adapt-") and report["model"]["version"] == new_version
        assert report["base_model"]["version"] == base_version and report["data"]["pairs"] == len(records)
        held = report["holdout"]
        assert held["adapted"]["auc"] > held["shipped"]["auc"]  # adapt's gate, as it reported it
        assert {"model.onnx", "calibration.json", "decision.json", "display.json", "MODEL_CARD.md"} <= \
            {p.name for p in beside.iterdir()}
        assert "valid for the traffic it was adapted on" in (beside / "MODEL_CARD.md").read_text().lower()

        # 3b. the directory alone makes the verifier: `DIALCHECK_NLI_MODEL_DIR=DIR dialcheck check` serves it
        served = check_with_model_dir(beside)
        assert served["model_versions"]["nli"] == new_version and "display" in served
        assert served["probabilities"]["SUPPORTS"] == pytest.approx(own_score(beside), abs=1e-3)

        # 4. roll out: two renames, SIGHUP; the same process reloads and says which model it now uses
        live.rename(previous)
        beside.rename(live)
        line = sighup(worker, RELOADED)
        assert f"NLI model {new_version} from {live}" in line and REFUSED not in worker.log_text(), line
        assert worker.alive() and worker.pid == pid

        # 5. the probe again: its verdict names the new model and its p(SUPPORTS) is the new model's own
        after = probe(settings, worker, "after")
        p_base, p_new = own_score(previous), own_score(live)
        assert after.model_versions["nli"] == new_version
        assert before.probabilities["SUPPORTS"] == pytest.approx(p_base, abs=1e-3)
        assert after.probabilities["SUPPORTS"] == pytest.approx(p_new, abs=1e-3)
        assert abs(p_new - p_base) > 0.01, f"the adapted model scores the probe as the shipped one ({p_base:.4f})"

        # 6. a judgement of the new model's verdict is told apart from those of the base model's
        send_feedback(settings, [(after.conversation_id.encode(), orjson.dumps(
            {"conversation_id": after.conversation_id, "turn_id": after.turn_id, "claim_id": after.claim_id,
             "label_shown": after.label, "judgement": "wrong" if after.label == "SUPPORTS" else "right",
             "source": "moderator", "ts": 1_800_000_000.0}))])
        wait_until(lambda: counts()["feedback"] == len(records) + 1, WAIT_S, "the last judgement was not stored")
        with FeedbackStore(store_path) as st:
            by_judged = {}
            for j in st.judged():
                by_judged[j.nli_version] = by_judged.get(j.nli_version, 0) + 1
            verdicts = {v: rows[0].verdicts for v, rows in st.precision_by_version().items()}
        assert by_judged == {base_version: len(records), new_version: 1}
        assert verdicts == {ALL_VERSIONS: len(turns) + 2, base_version: len(turns) + 1, new_version: 1}

        # 7. roll back the same way: the base model's numbers again
        live.rename(models / "nli-rolled-back")
        previous.rename(live)
        line = sighup(worker, RELOADED)
        assert f"NLI model {base_version} from {live}" in line, line
        back = probe(settings, worker, "back")
        assert back.model_versions["nli"] == base_version
        assert back.probabilities["SUPPORTS"] == pytest.approx(p_base, abs=1e-3)
    print(f"adapted {new_version} on {len(records)} judged replies: hold-out ROC AUC {held['shipped']['auc']} → "
          f"{held['adapted']['auc']}, certified coverage {held['shipped']['certified_coverage']} % → "
          f"{held['adapted']['certified_coverage']} % (mix {report['chosen_weight']}, {report['seconds']} s); probe "
          f"p(SUPPORTS) {p_base:.4f} → {p_new:.4f} (worker: {before.probabilities['SUPPORTS']:.4f} → "
          f"{after.probabilities['SUPPORTS']:.4f}); labels {before.label} → {after.label}")
