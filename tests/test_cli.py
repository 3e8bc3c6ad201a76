"""The user-facing commands run end to end and print what the issues promise."""
import json

from dialcheck.cli import main


def test_nli_evaluate_prints_json(capsys, data_dir):
    assert main(["nli", "evaluate", "--limit", "60", "--json", "--data-dir", str(data_dir)]) == 0
    out = json.loads(capsys.readouterr().out)
    for key in ("snli_test_accuracy", "anli_dev_accuracy", "true_dialfact_roc_auc", "temperature",
                "ece_before", "ece_after", "pairs_per_second"):
        assert key in out, key
    assert out["snli_test_pairs"] == 60 and 0.0 <= out["snli_test_accuracy"] <= 1.0


def test_eval_fv_prints_metric_table(capsys, data_dir):
    assert main(["eval", "--protocol", "fv", "--surfaces", "r0,r4g", "--limit", "8", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["records"] == 8
    for name in ("r0", "r4g"):
        m = out["surfaces"][name]
        assert set(m["f1"]) == {"SUPPORTS", "REFUTES", "NOT ENOUGH INFO"}
        assert 0 <= m["macro_f1"] <= 100 and "rewritten_share" in m and "gate_acceptance_rate" in m


def test_eval_ir_prints_recall(capsys, data_dir, index_dir):
    assert main(["eval", "--protocol", "ir", "--surfaces", "r0", "--limit", "8", "--index", str(index_dir),
                 "--json"]) == 0
    m = json.loads(capsys.readouterr().out)["surfaces"]["r0"]
    assert {"bm25", "dense", "top1"} <= set(m) and "macro_recall" in m["bm25"]["@180"]


def test_check_command(capsys, data_dir):
    assert main(["check", "--protocol", "fv", "--context", "I love Elvis Presley.",
                 "--claim", "He was born in Tupelo", "--evidence", "Elvis Presley was born in Tupelo, Mississippi."]) == 0
    v = json.loads(capsys.readouterr().out)
    assert v["claim"] == "He was born in Tupelo" and v["label"] in ("SUPPORTS", "REFUTES", "NOT ENOUGH INFO")
    assert v["surface"]["candidate_text"].startswith("Elvis Presley was born")
