"""The verifier learns the deployment's traffic by itself, end to end in one stream test: a running
worker publishes verdicts, annotators judge them on chat.feedback, and `dialcheck adapt-loop` (its
own process, as deployed) builds a challenger with `dialcheck adapt --from-feedback` into the
candidates folder, scores it against the live model on the judgements that arrived after it was
built, promotes it (checked as the worker would, one symlink switch, SIGHUP) and, when a deliberately bad version is put
in use by hand, rolls it back on the drift alarm without a person. Each step is a model event in the
feedback store and on the worker's /metrics; every turn gets its verdict, every judgement is stored
joined, told apart by the model version of the verdict it judges.

The traffic is a deployment whose replies state capitals: for each region a right reply
("Sacramento is the capital of California.") and a wrong-relation one ("Sacramento is the capital of
the United States."), each its own conversation, both checked against the same passage ("Sacramento
is the capital city of the U.S. state of California."). The shipped verifier labels both SUPPORTS
(its known wrong-relation weakness); annotators judge every badge. Three batches of regions, none
read twice: 34 U.S. states with the Canadian provinces and Australian states build the challenger,
the 16 other U.S. states score it (the challenger never read them), Mexican states judge the bad
version. Why the scored states are U.S. ones: a challenger built on the U.S. states alone did not
score the Canadian and Australian replies better (Brier 0.432 → 0.437, ROC AUC 0.477 → 0.469 on 32
of them: "Toronto is the capital of Canada" is another pattern) and the gate refused it, rightly;
the loop promotes what helps the traffic that comes, so the test's traffic to come is like its past. The probe
is a claim of the same kind from a country the traffic never names ("Munich is the capital of
Germany." from the Bavaria passage).

Feedback tries to steer it and cannot: `user` clicks flip every judgement of the first two batches
and try to hold the bad version (not counted: `user` is off by default); one claim is judged both
ways by a moderator and an annotator (left out).

The bad version is the shipped weights under a new version name with a display that shows every
badge (SUPPORTS and REFUTES thresholds 0, no checks veto): on this traffic the shipped model calls
every reply SUPPORTS, so about half its shown badges are wrong — a real display failure of a real
model, judged by the same annotators, which is what the drift alarm is for. Why not a model
trained on flipped labels: another adapt run (a minute of CPU) for the same alarm; the gate that
refuses a poisoned challenger is tested in tests/test_adapt_loop_rules.py and tests/test_adapt.py.

Real parts throughout: the embedded broker, the `dialcheck worker` process with the real fv Pipeline
and the shipped NLI model (a copy: the deployment's own model directory), the real feedback store,
the real `dialcheck adapt-loop` and `dialcheck adapt` processes (fine-tuning on CPU, the guards, the
cross-fitted certification). What makes it small and fast, and what that costs:
- 100 judged replies to build on (99 without the claim judged both ways), two cross-fitting folds
  (`--folds 2`), 10 records per yardstick set in the report (`--limit-per-set 10`), 100 pairs of the
  general-NLI anchor (`--anchor-pairs 100`);
- `--target 0.8 --confidence 0.8`: 0.85 / 0.9 needs 15 supported replies shown with none wrong;
  0.8 / 0.8 needs 8. The gate (ranking with confidence, the safety guards) is otherwise adapt's own;
- `--min-new 24` judged conversations (default 50) before a build and before the challenger is scored.
Chat turns carry no evidence and the fv protocol reads gold evidence, so the checker hands each turn
its passage (`GoldEvidence`); no passage index is built."""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from dataclasses import replace

import orjson
import pytest

from schemas import ChatTurn, Verdict
from schemas.settings import REPO_ROOT
from streams.feedback_store import FeedbackStore
from streams.observability import METRICS_MARKER
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
MEXICO = {"Jalisco": "Guadalajara", "Nuevo León": "Monterrey", "Yucatán": "Mérida", "Sonora": "Hermosillo",
          "Baja California": "Mexicali", "Coahuila": "Saltillo", "Sinaloa": "Culiacán", "Tabasco": "Villahermosa",
          "Michoacán": "Morelia", "Veracruz": "Xalapa", "Quintana Roo": "Chetumal", "Tamaulipas": "Ciudad Victoria"}
HELD = 16  # U.S. states held out of the build: the challenger is scored on them, after it was built
BUILD = REGIONS[HELD:]  # what the challenger is built on: 34 U.S. states, the Canadian and Australian ones
SCORE = REGIONS[:HELD]
LATER = [(c, "Mexican state of", r, "Mexico") for r, c in MEXICO.items()]  # what judges the bad version
PROBE = ("Munich", "German state of", "Bavaria", "Germany")


def passage(city: str, kind: str, region: str) -> str:
    return f"{city} is the capital city of the {kind} {region}."


def replies(city: str, kind: str, region: str, country: str) -> dict[str, str]:
    """The right reply and the wrong-relation one (a capital, but not the country's)."""
    return {"right": f"{city} is the capital of {region}.", "wrong": f"{city} is the capital of {country}."}


# every reply's gold evidence, by its text: (title, passage)
EVIDENCE = {text: (city, passage(city, kind, region))
            for city, kind, region, country in [*REGIONS, *LATER, PROBE]
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

    def model_versions(self) -> dict[str, str]:  # /metrics' dialcheck_model_info
        return self.pipeline.model_versions()


def create(settings, protocol: str = "fv", surface: str = "r0"):
    from workers.pipeline import Pipeline

    return GoldEvidence(Pipeline.from_settings(settings, protocol="fv", surface=surface))


WORKER_ARGS = ["--pipeline", "tests.test_adapt_loop:create", "--protocol", "fv", "--surface", "r0"]


def publish_by_turn(settings, worker, turns: list[ChatTurn]) -> dict[str, Verdict]:
    """Send the turns; their verdicts by turn id (every turn answered, or it fails)."""
    return {v.turn_id: v for v in publish(settings, worker, turns, WAIT_S).values()}


def traffic(settings, worker, regions, batch: str) -> dict[str, Verdict]:
    """A right and a wrong-relation reply per region, each its own conversation; verdicts by turn id."""
    turns = [ChatTurn(f"{batch}{i:02d}-{kind}", f"{batch}{i:02d}-{kind}#r", "assistant", text, check=True)
             for i, region in enumerate(regions) for kind, text in replies(*region).items()]
    return publish_by_turn(settings, worker, turns)


def judgements(verdicts: dict[str, Verdict], source: str, prefix: str, say: str = "truth") -> list[tuple]:
    """Every badge (SUPPORTS / REFUTES) judged, with what the worker showed: as the traffic says
    (`truth`), the opposite (`flip`, a user's attack) or `right` whatever it was (users holding a version)."""
    def judgement(tid: str, v: Verdict) -> str:
        truth = (v.label == "SUPPORTS") == ("-right#" in tid)
        return "right" if {"truth": truth, "flip": not truth, "right": True}[say] else "wrong"
    return [(v.conversation_id.encode(), orjson.dumps(
        {"conversation_id": v.conversation_id, "turn_id": v.turn_id, "claim_id": v.claim_id, "label_shown": v.label,
         "judgement": judgement(tid, v), "source": source, "ts": 1_700_000_000.0 + i, "feedback_id": f"{prefix}-{i}",
         "shown": bool(v.display.show) if v.display else None}))
        for i, (tid, v) in enumerate(sorted(verdicts.items())) if v.label in ("SUPPORTS", "REFUTES")]


def probe(settings, worker, run: str) -> Verdict:
    turn = ChatTurn(f"probe-{run}", f"probe-{run}#r", "assistant", PROBE_TEXT, check=True)
    return publish_by_turn(settings, worker, [turn])[turn.turn_id]


def own_score(model_dir) -> float:
    """The model's own p(entailment) for the probe's passage and reply (what p(SUPPORTS) rests on)."""
    from workers.models.onnx_nli import OnnxNLI

    return float(OnnxNLI(str(model_dir)).predict([EVIDENCE[PROBE_TEXT][1]], [PROBE_TEXT])[0][0])


def version(model_dir) -> str:
    return json.loads((model_dir / "calibration.json").read_text())["version"]


def env_of(settings) -> dict:
    env = {**os.environ, **settings.env()}
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(REPO_ROOT), env.get("PYTHONPATH", "")]))
    return env


def start_loop(settings, live, worker, log) -> subprocess.Popen:
    """`dialcheck adapt-loop` as deployed: its own process, signalling the worker by the pid file the worker
    wrote (`DIALCHECK_PID_FILE`); a build as soon as
    24 judged conversations are there, then at most one an hour; a look every second."""
    cmd = [sys.executable, "-u", "-m", "dialcheck.cli", "adapt-loop", "--model-dir", str(live), "--pid-file",
           settings.stream.pid_file, "--every", "1h", "--check-every", "1", "--min-new", "24", "--target", "0.8",
           "--adapt", "--folds 2 --limit-per-set 10 --anchor-pairs 100 --target 0.8 --confidence 0.8"]
    with open(log, "w") as out:
        return subprocess.Popen(cmd, cwd=str(REPO_ROOT), env=env_of(settings), stdout=out, stderr=subprocess.STDOUT)


def bad_version(shipped, base: str, where) -> str:
    """The shipped weights as a new version whose display shows every badge: its own calibration,
    decision and display (the fitted-for version renamed), written beside the live directory."""
    shutil.copytree(shipped, where)
    bad = base + "+show-all"
    cal = json.loads((where / "calibration.json").read_text())
    (where / "calibration.json").write_text(json.dumps({**cal, "version": bad}))
    for name, path in (("decision.json", REPO_ROOT / "workers/decision/params/decision.json"),
                       ("display.json", REPO_ROOT / "workers/display/params/display.json")):
        d = json.loads(path.read_text())
        d["meta"]["nli_model"] = {**d["meta"]["nli_model"], "version": bad, "dir": str(where)}
        if name == "display.json":
            d.update(show={"SUPPORTS": 0.0, "REFUTES": 0.0}, checked=False)
        (where / name).write_text(json.dumps(d))
    return bad


def reloaded(worker, to: str, before: int) -> str:
    """Wait for the worker's next reload line (after `before` of them) and check it names `to`."""
    wait_until(lambda: worker.log_text().count(RELOADED) > before, WAIT_S, f"the worker did not reload to {to}")
    line = [ln for ln in worker.log_text().splitlines() if RELOADED in ln][-1]
    assert f"NLI model {to} from" in line and REFUSED not in worker.log_text(), line
    return line


def metrics(worker) -> str:
    import urllib.request

    url = [ln.split(METRICS_MARKER, 1)[1].strip() for ln in worker.log_text().splitlines() if METRICS_MARKER in ln][-1]
    with urllib.request.urlopen(url, timeout=30) as r:
        return r.read().decode()


@pytest.mark.timeout(2400)
def test_the_loop_builds_promotes_and_rolls_back_by_itself(fresh_broker, tmp_path):
    models = tmp_path / "models"
    live = models / "nli"
    shipped = stream_settings(fresh_broker.bootstrap, tmp_path, "adapt")
    shutil.copytree(shipped.models.nli_model_dir, live)  # the deployment's own model directory, not the source tree's
    pid_file = tmp_path / "run" / "worker.pid"  # the worker writes it once it takes SIGHUP; the loop reads it
    pid_file.parent.mkdir()  # its folder must exist (checked when the settings load)
    settings = shipped.updated(models={"nli_model_dir": str(live)}, stream={"pid_file": str(pid_file)})
    store_path = settings.stream.feedback_store
    base_version = version(live)
    sent: list[tuple] = []
    loop_log = tmp_path / "loop.log"
    loop = None

    def counts() -> dict:
        with FeedbackStore(store_path) as st:
            return st.counts()

    def judge(records: list[tuple]) -> None:
        sent.extend(records)
        send_feedback(settings, records)
        wait_until(lambda: counts()["feedback"] == len(sent) and counts()["unjoined"] == 0, WAIT_S,
                   "the judgements did not reach the worker's store, joined")

    def events() -> list:
        with FeedbackStore(store_path) as st:
            return st.events()

    def event(kind: str, n: int = 1):
        wait_until(lambda: sum(e.event == kind for e in events()) >= n or loop.poll() is not None, ADAPT_TIMEOUT_S,
                   f"no {kind!r} event")
        got = [e for e in events() if e.event == kind]
        assert len(got) >= n, f"no {kind!r} event: {[e.to_dict() for e in events()]}\n{loop_log.read_text()[-3000:]}"
        return got[n - 1]

    with WorkerProcess(settings, tmp_path / "worker.log", extra_args=WORKER_ARGS) as worker:
        worker.wait_ready(WAIT_S)
        pid = worker.pid
        assert pid_file.read_text().strip() == str(pid)  # written once ready, when SIGHUP no longer ends it

        # 1. the deployment's traffic and the probe, checked by the shipped verifier; judged on chat.feedback
        built_on = traffic(settings, worker, BUILD, "b")
        before = probe(settings, worker, "before")
        assert {v.model_versions["nli"] for v in [*built_on.values(), before]} == {base_version}
        wrong_shown = [tid for tid, v in built_on.items() if "-wrong#" in tid and v.label == "SUPPORTS"]
        assert len(wrong_shown) >= len(BUILD) // 2, "the shipped model no longer errs on this traffic: nothing to learn"
        honest = judgements(built_on, "annotator", "ann")
        attack = judgements(built_on, "user", "usr", say="flip")  # user clicks: not learned from
        first = next(v for tid, v in sorted(built_on.items()) if "-right#" in tid and v.label == "SUPPORTS")
        # ^ one claim judged both ways (right by an annotator, wrong by a moderator): left out
        conflict = [(first.conversation_id.encode(), orjson.dumps(
            {"conversation_id": first.conversation_id, "turn_id": first.turn_id, "claim_id": first.claim_id,
             "label_shown": first.label, "judgement": "wrong", "source": "moderator", "ts": 1_700_000_500.0}))]
        judge(honest + attack + conflict)

        # 2. the loop starts, sees enough judged conversations and builds a challenger beside the live model;
        #    meanwhile more traffic is checked by the live model (judged once the challenger is built)
        loop = start_loop(settings, live, worker, loop_log)
        try:
            scored_on = traffic(settings, worker, SCORE, "s")
            built = event("built")
            new_version = built.version
            assert new_version.startswith(base_version + "+adapt-") and built.other == base_version
            cand = models / "nli-candidates" / new_version
            report = json.loads((cand / "adapt.json").read_text())
            assert report["model"]["version"] == new_version and report["base_model"]["version"] == base_version
            assert report["data"]["left_out"] == {"other_source": len(attack), "conflicting": 2}
            assert report["data"]["pairs"] == len(honest) - 1
            held = report["holdout"]
            assert held["adapted"]["auc"] > held["shipped"]["auc"]  # adapt's gate, as it reported it
            assert {"model.onnx", "calibration.json", "decision.json", "display.json", "MODEL_CARD.md"} <= \
                {p.name for p in cand.iterdir()}
            assert "valid for the traffic it was adapted on" in (cand / "MODEL_CARD.md").read_text().lower()
            assert version(live) == base_version  # nothing live changed yet

            # 3. new traffic, judged after the build: the challenger is scored on it against the live model
            #    (offline: the verdicts are still the live model's) and promoted by the loop
            reloads = worker.log_text().count(RELOADED)
            scoring = judgements(scored_on, "annotator", "ann2")
            judge(scoring + judgements(scored_on, "user", "usr2", say="flip"))
            scored, promoted = event("scored"), event("promoted")
            assert (promoted.version, promoted.other, scored.version) == (new_version, base_version, new_version)
            gate = scored.detail
            assert gate["promote"] and gate["conversations"] >= 24 and gate["p_value"] <= 0.05, gate
            assert gate["replies"] <= len(scoring)  # scored as soon as 24 were in; the users' clicks not among them
            assert gate["brier_challenger"] < gate["brier_champion"] and promoted.detail["signalled"] == [pid]
            reloaded(worker, new_version, reloads)
            assert version(live) == new_version and version(models / "nli-previous") == base_version
            assert worker.alive() and worker.pid == pid

            # 4. the probe again: its verdict names the new model, its p(SUPPORTS) the new model's own
            #    (the directory alone serves: model, decision and display reloaded from it)
            after = probe(settings, worker, "after")
            p_base, p_new = own_score(models / "nli-previous"), own_score(live)
            assert after.model_versions["nli"] == new_version
            assert before.probabilities["SUPPORTS"] == pytest.approx(p_base, abs=1e-3)
            assert after.probabilities["SUPPORTS"] == pytest.approx(p_new, abs=1e-3)
            assert abs(p_new - p_base) > 0.01, f"the adapted model scores the probe as the shipped one ({p_base:.4f})"

            # 5. a bad version put in use by hand (recorded like the loop's own), judged as it shows its badges;
            #    users click "right" on every badge to keep it
            bad = bad_version(shipped.models.nli_model_dir, base_version, models / "nli-bad")
            reloads = worker.log_text().count(RELOADED)
            by_hand = subprocess.run([sys.executable, "-m", "dialcheck.cli", "adapt-loop", "--model-dir", str(live),
                                      "--worker-pid", str(pid), "--promote", str(models / "nli-bad")],
                                     cwd=str(REPO_ROOT), env=env_of(settings), capture_output=True, text=True,
                                     timeout=WAIT_S)
            assert by_hand.returncode == 0, by_hand.stderr[-2000:]
            reloaded(worker, bad, reloads)
            reloads = worker.log_text().count(RELOADED)
            shown_by_bad = traffic(settings, worker, LATER, "x")
            assert {v.model_versions["nli"] for v in shown_by_bad.values()} == {bad}
            assert all(v.display.show for v in shown_by_bad.values() if v.label in ("SUPPORTS", "REFUTES"))
            judge(judgements(shown_by_bad, "user", "usr3", say="right") + judgements(shown_by_bad, "annotator", "ann3"))

            # 6. the drift alarm fires for it: the loop rolls it back to the version before, without a person
            rolled = event("rolled_back")
            assert (rolled.version, rolled.other) == (bad, new_version), rolled.to_dict()
            assert rolled.detail["alarm"] and rolled.detail["rows"]["SUPPORTS"]["upper"] < 0.8
            assert rolled.detail["signalled"] == [pid]
            reloaded(worker, new_version, reloads)
            assert version(live) == new_version and (models / "nli-retired" / bad).is_dir()
            back = probe(settings, worker, "back")
            assert back.model_versions["nli"] == new_version
            assert back.probabilities["SUPPORTS"] == pytest.approx(p_new, abs=1e-3)

            # 7. every step visible: the store's events, the worker's /metrics
            assert [(e.event, e.version) for e in events()] == [
                ("built", new_version), ("scored", new_version), ("promoted", new_version), ("promoted", bad),
                ("rolled_back", bad)]
            text = metrics(worker)
            for kind, n in (("built", 1), ("scored", 1), ("promoted", 2), ("refused", 0), ("rolled_back", 1)):
                assert f'dialcheck_model_events_total{{event="{kind}"}} {n}.0' in text, kind
            assert f'dialcheck_model_info{{nli_version="{new_version}"}} 1.0' in text
        finally:
            if loop is not None:
                loop.terminate()  # SIGTERM as a supervisor sends it (SIGINT may be inherited ignored)
                try:
                    stopped = loop.wait(WAIT_S)
                except subprocess.TimeoutExpired:
                    loop.kill()
                    raise AssertionError(f"adapt-loop still running {WAIT_S} s after SIGTERM; its log:\n"
                                         + loop_log.read_text()[-3000:]) from None
        assert stopped == 0, f"adapt-loop exit {stopped} on SIGTERM; its log:\n{loop_log.read_text()[-3000:]}"

        # 8. nothing lost: every turn answered (publish checks), every judgement stored once and joined,
        #    each verdict counted under the version that decided it
        assert counts()["feedback"] == len(sent) and counts()["unjoined"] == 0
        with FeedbackStore(store_path) as st:
            verdicts = {v: rows[0].verdicts for v, rows in st.precision_by_version().items()}
        assert verdicts == {ALL_VERSIONS: len(built_on) + len(scored_on) + len(shown_by_bad) + 3,
                            base_version: len(built_on) + len(scored_on) + 1, new_version: 2, bad: len(shown_by_bad)}
    assert not pid_file.exists()  # the stopped worker took its pid file with it
    print(f"challenger {new_version} built on {report['data']['pairs']} judged replies in {report['seconds']} s "
          f"(hold-out ROC AUC {held['shipped']['auc']} → {held['adapted']['auc']}); scored on "
          f"{gate['conversations']} new conversations: {gate['why']}; probe p(SUPPORTS) {p_base:.4f} → {p_new:.4f}; "
          f"bad version rolled back: {rolled.reason}")
