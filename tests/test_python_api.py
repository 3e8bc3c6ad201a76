"""The Python API (`from dialcheck import Checker`): what a notebook user imports, the rules its
input is held to (a chat turn's, shared with serve-api), one pipeline call per batch, and the
example script run for real (examples/python_api.py, real models and the tests' index).

Why: peers are used as libraries; a user must not have to read the CLI to check a claim, and a
claim the worker would dead-letter must not pass here."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from schemas.settings import load_settings

REPO = Path(__file__).resolve().parent.parent
pytestmark = pytest.mark.unit


@pytest.fixture(scope="module")
def standin_checker():
    """A Checker around the model-free stand-in (tests/stream_standin.py), counting its calls."""
    from dialcheck import Checker
    from tests.stream_standin import StandIn

    class Counting(StandIn):
        calls: list = []

        def check_turns(self, items):
            self.calls.append(len(items))
            return super().check_turns(items)

    settings = load_settings(stream={"max_text_chars": 60, "context_turns": 2})
    return Checker(Counting(settings), settings, "e2e")


def test_importing_dialcheck_is_cheap_and_exports_only_the_public_names():
    code = ("import sys, dialcheck; heavy = [m for m in ('torch', 'workers', 'aiohttp', 'faust') if m in sys.modules]; "
            "from dialcheck import Checker, InvalidInput, Verdict; "
            "heavy += [m for m in ('torch', 'workers', 'aiohttp', 'faust') if m in sys.modules]; "
            "print(heavy, sorted(dialcheck.__all__), issubclass(InvalidInput, ValueError))")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=REPO, timeout=120,
                          env={**os.environ, "PYTHONPATH": str(REPO)})
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "[] ['Checker', 'InvalidInput', 'Verdict'] True"


def test_check_returns_the_published_verdict_of_the_cleaned_claim(standin_checker):
    from dialcheck import Verdict
    from schemas import parse_verdict

    v = standin_checker.check("Paris is\u200b the capital of \ufb00rance.", context=["Where is Paris?"])
    assert isinstance(v, Verdict) and v.claim == "Paris is the capital of ffrance."  # NFKC, invisibles out
    assert v.model_versions["context_sha1"]  # the context reached the checker
    assert parse_verdict(v.to_json()).claim_id == v.claim_id  # valid against schemas/verdict.schema.json


def test_check_many_is_one_pipeline_call_and_gives_a_verdict_per_item_in_order(standin_checker):
    standin_checker._pipe.calls.clear()
    out = standin_checker.check_many(["One claim.", {"claim": "Two claims.", "context": ["a", "b"]}, "Three."])
    assert standin_checker._pipe.calls == [3]
    assert [v.claim for v in out] == ["One claim.", "Two claims.", "Three."]
    assert len({v.claim_id for v in out}) == 3
    assert standin_checker.check_many([]) == []


@pytest.mark.parametrize("call, code, says", [
    (lambda c: c.check("\u200b "), "empty_text", "claim: empty text"),
    (lambda c: c.check("x" * 61), "too_large", "claim: text too long: 61 > 60"),
    (lambda c: c.check(42), "schema", "claim must be a string"),
    (lambda c: c.check("x", context=["a", "b", "c"]), "too_large", "context has 3 turns > 2"),
    (lambda c: c.check("x", context="a turn"), "schema", "context must be a list"),
    (lambda c: c.check("x", evidence="e"), "schema", "evidence must be a list of passages"),
    (lambda c: c.check("x", evidence=[{"title": "t"}]), "schema", "evidence[0]: an object passage needs \"text\""),
    (lambda c: c.check_many(["fine", {"claim": "x", "admin": True}]), "schema", "item 1: unknown field 'admin'"),
    (lambda c: c.check_many(["fine", 7]), "schema", "item 1: a claim (str)"),
    (lambda c: c.score(["e1", "e2"], ["c1", "c2", "c3"]), "schema", "2 evidence texts for 3 claims"),
    (lambda c: c.score("\u2800", "a claim"), "empty_text", "evidence[0]"),
])
def test_invalid_input_is_one_short_value_error_and_nothing_is_checked(standin_checker, call, code, says):
    from dialcheck import InvalidInput

    standin_checker._pipe.calls.clear()
    with pytest.raises(InvalidInput) as e:
        call(standin_checker)
    assert isinstance(e.value, ValueError) and e.value.code == code and says in str(e.value), str(e.value)
    assert "\n" not in str(e.value) and len(str(e.value)) < 300
    assert standin_checker._pipe.calls == []


def test_load_refuses_an_unknown_protocol_or_surface_before_loading_anything():
    from dialcheck import Checker, InvalidInput

    with pytest.raises(InvalidInput, match="unknown protocol 'nli'"):
        Checker.load(protocol="nli")
    with pytest.raises(InvalidInput, match="unknown surface 'r9'"):
        Checker.load(surface="r9")


def test_an_fv_checker_asks_for_evidence():
    from dialcheck import Checker, InvalidInput
    from tests.stream_standin import StandIn

    settings = load_settings()
    fv = Checker(StandIn(settings), settings, "fv")
    with pytest.raises(InvalidInput, match='add "evidence"'):
        fv.check("x")
    assert fv.check("Tupelo is in Mississippi.", evidence=["Tupelo is a city in Mississippi."]).label


@pytest.mark.model
def test_the_example_script_checks_claims_with_the_real_models(index_dir):
    """examples/python_api.py as a user runs it: a plain script, real models, the tests' index."""
    done = subprocess.run([sys.executable, str(REPO / "examples" / "python_api.py")], capture_output=True, text=True,
                          cwd=REPO, timeout=900, env={**os.environ, "PYTHONPATH": str(REPO),
                                                      "DIALCHECK_INDEX_DIR": str(index_dir)})
    assert done.returncode == 0, done.stderr[-3000:]
    lines = [json.loads(ln) for ln in done.stdout.splitlines()]
    kinds = [next(iter(ln)) for ln in lines]
    assert kinds == ["loaded", "check", "check_many", "check_many", "score", "refused"], lines
    checked = [ln[k] for ln, k in zip(lines, kinds) if k in ("check", "check_many")]
    assert all(c["status"] == "ok" and c["label"] in ("SUPPORTS", "REFUTES", "NOT ENOUGH INFO") for c in checked)
    assert checked[0]["evidence_title"] == "Elvis Presley"  # retrieved for "he", resolved from the context
    tupelo, memphis = lines[4]["score"].values()
    assert tupelo > 0.5 > memphis, lines[4]  # the evidence says Tupelo
    assert lines[5] == {"refused": "claim: empty text (after NFKC and removal of invisible characters)",
                        "code": "empty_text"}


class _TwoClaims:
    """A pipe that splits every reply in two claims, as the segmenting pipeline does: each claim's
    verdict with its span, then the reply's own (schemas/protocols.py TurnResult)."""

    def __init__(self, settings):
        from tests.stream_standin import StandIn

        self.standin = StandIn(settings)

    def check_turns(self, items):
        from dataclasses import replace

        from schemas import ClaimSpan
        from schemas.items import CheckItem
        from schemas.protocols import TurnResult

        out = []
        for it in items:
            cut = it.claim.index(". ") + 1
            parts = [(0, cut), (cut + 1, len(it.claim))]
            claims = [CheckItem(it.conversation_id, it.turn_id, it.context, it.claim[a:b], it.gold_evidence)
                      for a, b in parts]
            verdicts = [replace(r.verdict, claim_span=ClaimSpan(a, b))
                        for r, (a, b) in zip(self.standin.check_turns(claims), parts)]
            summary = replace(self.standin.check_turns([it])[0].verdict, claim_span=ClaimSpan(0, len(it.claim)))
            out.append(TurnResult(it, [*verdicts, summary]))
        return out


def test_check_turn_gives_every_claims_verdict_and_check_the_replys_own():
    from dialcheck import Checker

    settings = load_settings()
    checker = Checker(_TwoClaims(settings), settings, "e2e")
    reply = "The plan costs $10. It includes phone support."
    every = checker.check_turn(reply, evidence=["The Basic plan costs $10 a month."])
    assert [reply[v.claim_span.start:v.claim_span.end] for v in every] == [
        "The plan costs $10.", "It includes phone support.", reply]
    assert checker.check(reply, evidence=["The Basic plan costs $10 a month."]).claim == reply
    assert [v.claim for v in checker.check_many([reply])] == [reply]
