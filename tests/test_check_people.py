"""`dialcheck check` for people: the text says what an app shows and why in plain
words (numbers only with --verbose), many claims are checked in one process with the models loaded
once (--file of JSON lines, stdin), the old one-object --file still works, and a missing claim is
one line with exit 2."""
import io
import json
import re

import pytest

from dialcheck.cli import main

pytestmark = pytest.mark.model

ENGINEER_WORDS = ("t_supports", "t_refutes", "prescore", "layer:", "guarded", "entail", "contradict", "threshold",
                  "windows_read", "on_topic", "coverage", "timings", "models:", "rule", "SUPPORTS", "REFUTES")
NUMBERS = re.compile(r"\b[01]\.\d\d|\d ms\b")  # a probability or a threshold; a timing
DISPLAY_LINES = ("✔ supported (", "✘ disputed (", "? unverified — not shown")


def _record(data_dir) -> dict:
    with open(data_dir / "dialfact" / "testsmall.jsonl", encoding="utf-8") as f:
        return json.loads(f.readline())


@pytest.fixture
def load_count(monkeypatch):
    """How often the pipeline loaded its models (workers.models.factory.load_models calls)."""
    import workers.models.factory as factory

    calls = []
    real = factory.load_models
    monkeypatch.setattr(factory, "load_models", lambda settings: calls.append(1) or real(settings))
    return calls


def _blocks(out: str) -> list[str]:
    return [b for b in out.split("\n\n") if b.strip()]


def test_file_of_json_lines_three_plain_verdicts_models_loaded_once(tmp_path, capsys, data_dir, load_count):
    f = tmp_path / "claims.jsonl"
    lines = [{"context": ["Do you know where Elvis Presley was born?"], "claim": "He was born in Tupelo.",
              "evidence": ["Elvis Presley was born in Tupelo, Mississippi, in 1935."]},
             {"context": [], "claim": "The Eiffel Tower is in Berlin.",
              "evidence": ["The Eiffel Tower is a wrought-iron tower in Paris, France.",
                           "The Eiffel Tower is a wrought-iron tower in Paris, France. It opened in 1889."]},
             _record(data_dir)]
    f.write_text("\n".join(json.dumps(x) for x in lines) + "\n")
    assert main(["check", "--protocol", "fv", "--file", str(f), "--format", "text"]) == 0
    captured = capsys.readouterr()
    blocks = _blocks(captured.out)
    assert len(blocks) == 3, captured.out
    assert load_count == [1], "the models must load once for all claims"
    assert captured.err.count("loaded before the first claim") == 1, captured.err
    for block in blocks:
        first, *rest = block.splitlines()
        assert first.startswith(DISPLAY_LINES) and ("shown to users" in first or "not shown" in first), block
        assert any(ln.startswith("why:") for ln in rest), block
        said = block.split("\nevidence:")[0]  # what we write (the evidence lines quote the passages)
        for word in ENGINEER_WORDS:  # no rule, threshold, probability or timing in the plain text
            assert word not in said, (word, block)
        assert not NUMBERS.search(said), block
    assert "claim:     He was born in Tupelo." in blocks[0]
    # the first gold window's words are contained in the second's first window: folded into one entry
    assert "(+1 near-duplicate)" in blocks[1] and blocks[1].count("wrought-iron tower in Paris") == 1, blocks[1]
    assert "source:    the evidence you gave" in blocks[1], blocks[1]


def test_stdin_plain_and_json_lines_verbose_shows_the_numbers(monkeypatch, capsys, data_dir, load_count):
    record = _record(data_dir)
    monkeypatch.setattr("sys.stdin", io.StringIO("Elvis Presley was born in Tupelo.\n\n" + json.dumps(record) + "\n"))
    assert main(["check", "-", "--protocol", "fv", "--format", "text", "--verbose",
                 "--evidence", "Elvis Presley was born in Tupelo, Mississippi, in 1935."]) == 0
    out = capsys.readouterr().out
    blocks = _blocks(out)
    assert len(blocks) == 2 and load_count == [1], out
    first = blocks[0]
    assert first.splitlines()[0].startswith(DISPLAY_LINES), first
    # the engineer's detail: probabilities, the rule's numbers, NLI scores, timings, model versions
    assert "--- detail" in first and "(S 0." in first and "rule:" in first and "t_supports" in first, first
    assert "entail 0." in first and "timings:" in first and "models:    nli " in first, first
    assert "claim:     Elvis Presley was born in Tupelo." in first
    assert f"claim:     {record['response'].strip()[:40]}" in blocks[1], blocks[1]


def test_old_single_object_file_and_json_alias(tmp_path, capsys, data_dir):
    f = tmp_path / "one.json"
    f.write_text(json.dumps({"context": ["I love Elvis Presley."], "claim": "He was born in Tupelo",
                             "evidence": ["Elvis Presley was born in Tupelo, Mississippi."]}, indent=2))
    assert main(["check", "--protocol", "fv", "--file", str(f), "--json"]) == 0
    out = capsys.readouterr().out.strip().splitlines()
    assert len(out) == 1, out
    v = json.loads(out[0])
    assert v["claim"] == "He was born in Tupelo" and v["display"]["tone"] in ("supported", "disputed", "unverified")
    assert v["rationale"]["numbers"], "the JSON keeps the numbers"


@pytest.mark.parametrize("argv, stdin, expected", [
    (["--file", "{f}"], None, "{f}:2: no claim ('claim', or a DialFact record's 'response')"),
    (["-"], "", "no claim on standard input (one claim per line, or JSON lines)"),
    (["--claim", " "], None, "the claim is empty (--claim TEXT)"),
    (["-"], '{"context": ["hi"]}\n', "stdin:1: no claim ('claim', or a DialFact record's 'response')"),
    (["--file", "{f}", "--claim", "x"], None, "give one of --claim, --file or '-' (stdin), not --claim and --file"),
])
def test_a_missing_claim_is_one_line_exit_2(tmp_path, capsys, monkeypatch, load_count, argv, stdin, expected):
    f = tmp_path / "claims.jsonl"
    f.write_text('{"claim": "Elvis was born in Tupelo.", "evidence": ["Elvis was born in Tupelo."]}\n'
                 '{"context": ["Where was he born?"]}\n')
    if stdin is not None:
        monkeypatch.setattr("sys.stdin", io.StringIO(stdin))
    assert main(["check", "--protocol", "fv", *(a.replace("{f}", str(f)) for a in argv)]) == 2
    err = capsys.readouterr().err
    assert err == f"dialcheck: {expected.replace('{f}', str(f))}\n", err
    assert load_count == [], "a mistake in the input is found before any model loads"
