"""`dialcheck score` and `dialcheck verdicts --gold` on hostile files: each one is one line
`dialcheck: FILE:LINE: reason` and exit 2 (never a traceback, never a silent exit 0), and the
protocol, duplicates and the coverage line behave as commands/score.py documents.

Runs `main()` in this process (no models load: scoring is pure Python). The gold records are
three made-up DialFact-format lines, not data from ../shared."""
from __future__ import annotations

import json

import pytest

from dialcheck.cli import main
from schemas.items import DialFactRecord
from lab.evaluation.scoring import response_claim_id

pytestmark = pytest.mark.unit

GOLD = [{"id": f"g{i}", "context": ["Where is Paris?"], "response": text, "response_label": label,
         "type_label": "factual"}
        for i, (text, label) in enumerate([("Paris is in France.", "SUPPORTS"), ("Paris is in Peru.", "REFUTES"),
                                           ("I like Paris.", "NOT ENOUGH INFO")])]


def row(i: int, label: str = "SUPPORTS", protocol: str | None = "fv", **changes) -> dict:
    g = GOLD[i]
    rec = DialFactRecord(id=g["id"], context_id=g["id"], context=g["context"], response=g["response"],
                         label=g["response_label"], type_label="factual", evidence=[])
    r = {"claim_id": response_claim_id(rec), "claim": g["response"], "label": label,
         "surface": {"name": "r0", "text": g["response"], "gate": None}, "status": {"state": "ok", "reason": None},
         "model_versions": {"nli": "x"}, "surface_mode": "r0"}
    if protocol:
        r["protocol"] = protocol
    r.update(changes)
    return r


def lines(*rows) -> bytes:
    return "".join(json.dumps(r) + "\n" for r in rows).encode()


@pytest.fixture
def gold(tmp_path):
    p = tmp_path / "gold.jsonl"
    p.write_bytes(lines(*GOLD))
    return p


def score(capsys, *argv) -> tuple[int, str, str]:
    code = main(["score", *map(str, argv)])
    out = capsys.readouterr()
    return code, out.out, out.err


DEEP = b'{"claim_id": "x", "a": ' + b"[" * 40 + b"]" * 40 + b"}\n"
HOSTILE_RUNS = {
    "not_json": (lines(row(0)) + b'{"claim_id": "a", oops\n', ":2: not JSON"),
    "nested_100k": (b"[" * 100_000 + b"\n", ":1: not JSON"),
    "nested_40": (DEEP, ":1: JSON nested deeper than 32 levels"),
    "not_an_object": (b"[1, 2, 3]\n", ":1: not a JSON object (a list)"),
    "a_string_row": (lines(row(0)) + b'"just text"\n', ":2: not a JSON object (a str)"),
    "no_claim_id": (lines({k: v for k, v in row(0).items() if k != "claim_id"}), ":1: missing claim_id"),
    "unknown_label": (lines(row(0), row(1, label="BANANA")), ":2: unknown label 'BANANA'"),
    "binary": (b"\x89PNG\r\n\x1a\n\x00\x00\xff\xfe\n", ":1: not UTF-8 text"),
    "latin1": (lines(row(0)) + '{"claim_id": "café"}\n'.encode("latin-1"), ":2: not UTF-8 text"),
    "versions_string": (lines(row(0, model_versions="fv")), ":1: model_versions is a str, not an object"),
    "gate_yes": (lines(row(0, surface={"name": "r4g", "text": "x", "gate": {"accepted": "yes"}})),
                 ":1: surface.gate.accepted is not true or false"),
    "no_protocol_first": (lines(row(0, protocol=None), row(1)), ":1: no protocol"),
    "unknown_protocol": (lines(row(0, protocol="zz")), ":1: unknown protocol 'zz'"),
    "status_missing": (lines({k: v for k, v in row(0).items() if k != "status"}), ":1: status is not an object"),
}


@pytest.mark.parametrize("name", sorted(HOSTILE_RUNS))
def test_hostile_run_file_is_one_line_naming_file_and_line(name, gold, tmp_path, capsys):
    content, reason = HOSTILE_RUNS[name]
    run = tmp_path / f"{name}.jsonl"
    run.write_bytes(content)
    code, out, err = score(capsys, run, "--gold", gold)
    assert code == 2 and out == ""
    assert err.count("\n") == 1 and err.startswith(f"dialcheck: {run}{reason}"), err


@pytest.mark.parametrize("content", [b"", b"\n\n  \n"])
def test_empty_run_file_is_an_error(content, gold, tmp_path, capsys):
    run = tmp_path / "empty.jsonl"
    run.write_bytes(content)
    code, out, err = score(capsys, run, "--gold", gold)
    assert (code, out) == (2, "") and err == f"dialcheck: {run}: no rows (an empty run file)\n"


def test_missing_run_file_and_directory(gold, tmp_path, capsys):
    code, _, err = score(capsys, tmp_path / "nope.jsonl", "--gold", gold)
    assert code == 2 and err == f"dialcheck: no such file: {tmp_path / 'nope.jsonl'} (run file)\n"
    code, _, err = score(capsys, tmp_path, "--gold", gold)
    assert code == 2 and err == f"dialcheck: not a file: {tmp_path} (run file)\n"


HOSTILE_GOLD = {
    "banana": (lines(GOLD[0], {**GOLD[1], "response_label": "BANANA"}), ":2: unknown response_label 'BANANA'"),
    "deep": (b'{"id": "g", "context": ' + b"[" * 100_000 + b"\n", ":1: not JSON"),
    "deep_40": (b'{"id": "g", "x": ' + b"[" * 40 + b"]" * 40 + b"}\n", ":1: JSON nested deeper"),
    "binary": (b"\xff\xfe\x00\x01\n", ":1: not UTF-8 text"),
    "context_not_list": (lines({**GOLD[0], "context": "Where?"}), ":1: context is not a list of strings"),
    "no_response": (lines({k: v for k, v in GOLD[0].items() if k != "response"}), ":1: missing response"),
    "empty": (b"", ": no gold records (an empty file)"),
}


@pytest.mark.parametrize("name", sorted(HOSTILE_GOLD))
def test_hostile_gold_file_is_one_line(name, tmp_path, capsys):
    content, reason = HOSTILE_GOLD[name]
    bad_gold = tmp_path / f"{name}.gold.jsonl"
    bad_gold.write_bytes(content)
    run = tmp_path / "run.jsonl"
    run.write_bytes(lines(row(0)))
    code, out, err = score(capsys, run, "--gold", bad_gold)
    assert code == 2 and out == "" and err.count("\n") == 1
    assert err.startswith(f"dialcheck: {bad_gold}{reason}"), err


def test_run_matching_no_gold_claim_is_an_error(gold, tmp_path, capsys):
    run = tmp_path / "other.jsonl"
    run.write_bytes(lines(row(0, claim_id="0123456789abcdef0123")))
    code, out, err = score(capsys, run, "--gold", gold)
    assert code == 2 and out == "" and "none of its fv claims is a record of" in err


def test_duplicates_first_row_wins_and_are_counted(gold, tmp_path, capsys):
    run = tmp_path / "dups.jsonl"
    run.write_bytes(lines(row(0, label="SUPPORTS"), row(1, label="REFUTES"), row(0, label="REFUTES")))
    code, out, err = score(capsys, run, "--gold", gold, "--json")
    result = json.loads(out)
    r0 = result["surfaces"]["r0"]
    assert code == 0 and r0["n"] == 2 and r0["missing"] == 1 and r0["accuracy"] == 100.0  # the first row scored
    assert "1 rows repeat an earlier claim id (1 with another label)" in err


def test_protocol_is_the_one_most_rows_declare(gold, tmp_path, capsys):
    """One stray e2e row first does not make the fv rows unscored (it once picked the first row's)."""
    stray = row(2, protocol="e2e")
    run = tmp_path / "mixed.jsonl"
    run.write_bytes(lines(stray, row(0), row(1, label="REFUTES")))
    code, out, _ = score(capsys, run, "--gold", gold, "--json")
    result = json.loads(out)
    assert code == 0 and result["protocol"] == "fv" and result["surfaces"]["r0"]["n"] == 2
    run.write_bytes(lines(row(0, protocol=None, model_versions={"protocol": "fv"})))  # model_versions says it
    code, out, _ = score(capsys, run, "--gold", gold, "--json")
    assert code == 0 and json.loads(out)["surfaces"]["r0"]["n"] == 1


def test_text_output_says_how_many_were_scored(gold, tmp_path, capsys):
    run = tmp_path / "one.jsonl"
    run.write_bytes(lines(row(1, label="REFUTES")))
    code, out, _ = score(capsys, run, "--gold", gold)
    assert code == 0 and "r0   1 of 3 scored, 2 missing" in out.splitlines()[-1]


def test_topic_rows_that_cannot_be_scored_are_left_out_and_counted(gold, capsys):
    """`verdicts --gold` reads a shared topic: a foreign verdict is counted, the rest are scored."""
    from dialcheck.commands.score import load_gold, score_rows, usable_rows

    rows = usable_rows([row(0), row(1, label="BANANA"), {"claim_id": 3}], "chat.verdicts")
    assert len(rows) == 1 and "2 of 3 verdicts on chat.verdicts cannot be scored" in capsys.readouterr().err
    (result,) = score_rows(rows, load_gold(str(gold)), str(gold), [None], "chat.verdicts")
    assert result["surfaces"]["r0"]["n"] == 1
