"""The user-facing commands run end to end and print what their documentation promises."""
import json
from pathlib import Path

import pytest

from dialcheck.cli import main


@pytest.mark.model
def test_nli_evaluate_prints_json(capsys, data_dir):
    assert main(["nli", "evaluate", "--limit", "60", "--json", "--data-dir", str(data_dir)]) == 0
    out = json.loads(capsys.readouterr().out)
    for key in ("snli_test_accuracy", "anli_dev_accuracy", "true_dialfact_roc_auc", "temperature",
                "ece_before", "ece_after", "pairs_per_second"):
        assert key in out, key
    assert out["snli_test_pairs"] == 60 and out["anli_dev_pairs"] == 60
    # an accuracy is a count of the 60 pairs (rounded to 4 places), and the shipped model is far above
    # 3-way chance on SNLI (measured 0.7667 = 46/60 on these pairs; ANLI dev is adversarial: 0.35)
    assert abs(out["snli_test_accuracy"] * 60 - round(out["snli_test_accuracy"] * 60)) < 0.01
    assert out["snli_test_accuracy"] > 0.5
    calibration = json.loads((Path(out["model_dir"]) / "calibration.json").read_text())
    assert out["temperature"] == round(calibration["temperature"], 4)  # the artifact's own temperature


@pytest.mark.model
def test_eval_fv_prints_metric_table(capsys, data_dir):
    assert main(["eval", "--protocol", "fv", "--surfaces", "r0,r4g", "--limit", "8", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["records"] == 8
    for name in ("r0", "r4g"):
        m = out["surfaces"][name]
        assert set(m["f1"]) == {"SUPPORTS", "REFUTES", "NOT ENOUGH INFO"}
        # every record is labelled and counted once; macro-F1 is the plain mean of the per-class F1
        assert m["n"] == 8 and m["missing"] == 0 and sum(m["predicted"].values()) == 8
        assert sum(m["status"].values()) == 8
        assert m["macro_f1"] == pytest.approx(sum(m["f1"].values()) / 3, abs=0.01)
        assert abs(m["accuracy"] * 8 / 100 - round(m["accuracy"] * 8 / 100)) < 0.01
        assert "rewritten_share" in m and "gate_acceptance_rate" in m
    assert out["surfaces"]["r0"]["rewritten_share"] == 0.0 and out["surfaces"]["r0"]["gate_candidates"] == 0
    assert out["surfaces"]["r4g"]["gate_candidates"] > 0  # R4 resolves pronouns in this slice (6 of 8 measured)


@pytest.mark.model
def test_eval_ir_prints_recall(capsys, data_dir, index_dir):
    assert main(["eval", "--protocol", "ir", "--surfaces", "r0", "--limit", "8", "--index", str(index_dir),
                 "--json"]) == 0
    m = json.loads(capsys.readouterr().out)["surfaces"]["r0"]
    assert {"bm25", "dense", "top1"} <= set(m) and "macro_recall" in m["bm25"]["@180"]


@pytest.mark.model
def test_check_command(capsys, data_dir):
    assert main(["check", "--protocol", "fv", "--surface", "r4g", "--context", "I love Elvis Presley.",
                 "--claim", "He was born in Tupelo", "--evidence", "Elvis Presley was born in Tupelo, Mississippi."]) == 0
    captured = capsys.readouterr()
    v = json.loads(captured.out)
    # the evidence states the claim once its pronoun is resolved (entailment 0.85 measured)
    assert v["claim"] == "He was born in Tupelo" and v["label"] == "SUPPORTS", v
    assert v["surface"]["candidate_text"].startswith("Elvis Presley was born")
    # loading is reported on its own line (stderr), not inside the claim's timings
    assert "loaded before the first claim: models" in captured.err and "warm-up" in captured.err, captured.err
    assert not {"models", "index", "warm_up"} & set(v["timings_ms"])


@pytest.mark.unit
def test_check_text_prints_stage_times_not_the_batch_count():
    """`dialcheck check --verbose`'s text shows milliseconds for stages only; `batch_items` is a count (it
    once printed "batch_items 2 ms") and the `dense_client_side` flag is no stage."""
    from dialcheck.commands.check import format_text
    from schemas import Verdict
    from test_ui_store import good_verdict

    v = Verdict.from_dict(good_verdict("c", "t1", "claim"))
    v.timings_ms = {"surfaces": 16.56, "verify": 34.32, "batch_items": 2, "dense_client_side": 1.0}
    assert not any(ln.startswith("timings:") for ln in format_text(v).splitlines())  # engineers' detail: --verbose
    line = next(ln for ln in format_text(v, verbose=True).splitlines() if ln.startswith("timings:"))
    assert "surfaces 17 ms" in line and "verify 34 ms" in line, line
    assert "batch_items" not in line and "dense_client_side" not in line, line
    assert "of 2 claims" in line, line
    v.timings_ms = {"verify": 3.0}  # a verdict of one claim alone: no batch note
    line = next(ln for ln in format_text(v, verbose=True).splitlines() if ln.startswith("timings:"))
    assert line == "timings:   verify 3 ms", line


@pytest.mark.unit
def test_check_text_for_people_display_source_plain_why_uncovered_and_folded_evidence():
    """For people: what an app shows, the source with its link, why in plain words (no rule or
    threshold names), the uncovered terms, near-duplicate evidence folded; numbers only verbose."""
    from dialcheck.commands.check import format_text
    from schemas import Display, Evidence, Verdict
    from test_ui_store import good_verdict

    v = Verdict.from_dict(good_verdict("c", "t1", "The Eiffel Tower was built by Gustave Eiffel in Berlin.",
                                       label="SUPPORTS", evidence_text="The Eiffel Tower is in Paris."))
    v.evidence = [Evidence("p1", "Eiffel Tower", "The Eiffel Tower is in Paris.", window="The Eiffel Tower is in Paris."),
                  Evidence("p2", "Eiffel Tower", "the Eiffel-Tower is in Paris!", url="https://en.wikipedia.org/wiki/Eiffel_Tower"),
                  Evidence("p3", "Paris", "Paris has the Eiffel Tower. The Eiffel Tower is in Paris, France."),
                  Evidence("p4", "Berlin", "Berlin is the capital of Germany.")]
    v.display = Display(True, "supported", "high")
    v.uncovered = ["Gustave", "Berlin"]
    v.rationale = {"rule": "layer:guarded", "numbers": {"entail": 0.9, "t_supports": 0.35, "windows_read": 4},
                   "window": {"passage_id": "p1", "title": "Eiffel Tower", "text": "The Eiffel Tower is in Paris."},
                   "summary": "SUPPORTS by layer:guarded over 4 window(s); deciding window from 'Eiffel Tower' (entail 0.90)."}
    lines = format_text(v).splitlines()
    assert lines[0] == "✔ supported (high confidence) — shown to users", lines
    assert "source:    Eiffel Tower — https://en.wikipedia.org/wiki/Eiffel_Tower" in lines, lines
    i = lines.index("why:       The passage 'Eiffel Tower' states this.")
    assert lines[i + 1] == "           The evidence does not mention: Gustave, Berlin.", lines
    assert "  1. Eiffel Tower — https://en.wikipedia.org/wiki/Eiffel_Tower   (+2 near-duplicates)" in lines, lines
    assert "  2. Berlin" in lines and not any(ln.startswith("  3.") for ln in lines), lines
    text = "\n".join(lines)
    assert not any(w in text for w in ("layer", "guarded", "t_supports", "0.9", "entail", "timings")), text
    assert "t_supports 0.35" in format_text(v, verbose=True)

    v.label, v.display, v.uncovered = "NOT ENOUGH INFO", Display(False, "unverified", "low"), None
    lines = format_text(v).splitlines()
    assert lines[0] == "? unverified — not shown" and not any(ln.startswith("source:") for ln in lines), lines
    assert "why:       The passages found do not say this." in lines, lines
    v.rationale = {"rule": "not-check-worthy", "numbers": {}, "window": None,
                   "summary": "NOT ENOUGH INFO: question — the turn states no checkable fact."}
    assert "why:       Not checked: it is a question, not a statement of fact." in format_text(v).splitlines()


@pytest.mark.unit
def test_every_option_of_every_command_has_a_help_text():
    """`dialcheck <command> --help` explains every option: the parser tree is walked, each argument
    (positionals too) must carry a help string (argparse.SUPPRESS hides one on purpose)."""
    import argparse

    from dialcheck.cli import build_parser

    def walk(parser, path):
        for action in parser._actions:
            if isinstance(action, argparse._SubParsersAction):
                for name, sub in action.choices.items():
                    yield from walk(sub, [*path, name])
            elif not isinstance(action, (argparse._HelpAction, argparse._VersionAction)):
                yield " ".join(path), "/".join(action.option_strings) or action.dest, action.help

    seen = list(walk(build_parser(), ["dialcheck"]))
    assert len(seen) > 100  # the whole tree was walked, not the top level only
    bare = [f"{cmd} {opt}" for cmd, opt, text in seen if not text or not str(text).strip()]
    assert not bare, "options without a help text: " + ", ".join(bare)


@pytest.mark.unit
def test_no_library_warning_or_debug_line_reaches_the_terminal(capfd):
    """onnxruntime's quantizer logs "Please consider to run pre-processing before quantization" on
    the root logger, which installs Python's default handler; bm25s sets its own logger to DEBUG, so
    every later bm25s call printed `DEBUG:bm25s:...`. The CLI's handler keeps both off stderr and
    still shows a real warning."""
    import logging

    from dialcheck.cli import quiet_libraries

    quiet_libraries()
    logging.warning("Please consider to run pre-processing before quantization. Refer to example: ...")
    logging.getLogger("bm25s").debug("Building index from IDs objects")
    logging.getLogger("bm25s").info("Loaded")
    logging.getLogger("kafka.net.selector").warning("Task <kafka.net.selector.Task> ran for 0.126s (>0.100s threshold)")
    logging.getLogger("kafka.coordinator.consumer").warning("group_id is None: disabling auto-commit.")
    logging.getLogger("dialcheck.test").warning("a real warning")
    err = capfd.readouterr().err
    assert "Please consider" not in err and "bm25s" not in err and "threshold" not in err and "group_id" not in err, err
    assert "a real warning" in err


@pytest.mark.unit
def test_why_never_credits_a_passage_about_something_else():
    """A SUPPORTS from the Albert Camus passage for "Albert Einstein was born in France." (found on
    the default index): the text view must not say "The passage 'Albert Camus' states this."."""
    from dialcheck.commands.check import format_text
    from schemas import Evidence, Verdict
    from test_ui_store import good_verdict

    camus = "Albert Camus was a French philosopher, author and journalist, born in French Algeria."
    v = Verdict.from_dict(good_verdict("c", "t1", "Albert Einstein was born in France.", label="SUPPORTS",
                                       evidence_text=camus))
    v.evidence = [Evidence("p1", "Albert Camus", camus, window=camus)]
    v.rationale = {"rule": "layer:guarded", "numbers": {"windows_read": 1},
                   "window": {"passage_id": "p1", "title": "Albert Camus", "text": camus}, "summary": ""}
    why = next(ln for ln in format_text(v).splitlines() if ln.startswith("why:"))
    assert why == ("why:       The passage 'Albert Camus' reads as agreeing, but it does not name what the claim "
                   "is about, so it does not confirm it."), why
    einstein = "Albert Einstein was born in Ulm, in the Kingdom of Württemberg in the German Empire."
    v.evidence = [Evidence("p2", "Albert Einstein", einstein, window=einstein)]
    v.rationale["window"] = {"passage_id": "p2", "title": "Albert Einstein", "text": einstein}
    assert "why:       The passage 'Albert Einstein' states this." in format_text(v).splitlines()
