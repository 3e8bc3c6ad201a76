"""bench/compare_lodo.py and bench_pipeline's variant files (a faster model is judged by the shipped badges)."""
import importlib.util
import json
import sys
from pathlib import Path

import pytest

from schemas.settings import REPO_ROOT, load_settings

pytestmark = pytest.mark.unit


def _bench(name: str):
    spec = importlib.util.spec_from_file_location(name, REPO_ROOT / "bench" / f"{name}.py")
    mod = importlib.util.module_from_spec(spec)
    sys.modules[name] = mod
    spec.loader.exec_module(mod)
    return mod


def _row(f1, cov, prec, n):
    return {"macro_f1": f1, "supports_precision": 90.0, "supports_predicted": 10, "refutes_precision": None,
            "refutes_predicted": 0, "shown": {"coverage": cov, "precision": prec, "n": n}}


def test_compare_lodo_gives_each_set_and_its_deltas():
    cmp = _bench("compare_lodo")
    a = {"left_out": {"dialfact": {"shipped": _row(47.3, 10.3, 96.8, 31)}, "wice": {"shipped": _row(69.9, 0.0, None, 0)}}}
    b = {"left_out": {"dialfact": {"shipped": _row(46.83, 10.7, 93.8, 32)}, "wice": {"shipped": _row(70.79, 2.0, 100.0, 7)}}}
    out = "\n".join(cmp.rows(a, b, "shipped", ("fp32", "int8")))
    assert "| dialfact | fp32 | 47.3 | 90.0 (10) | – (0) | 10.3 % | 96.8 % (31) | 3.2 |" in out  # s.e. sqrt(.968*.032/31)
    assert "| dialfact | -0.47 | +0.40 | -3.00 |" in out
    assert "| wice | +0.89 | +2.00 | – |" in out  # no shown precision on one side: no made-up delta


def test_variant_files_are_the_shipped_ones_relabelled(tmp_path):
    from workers.decision import load_decision
    from workers.display import load_display

    bench = _bench("bench_pipeline")
    base = load_settings()
    files = bench.shipped_files_for(base, "some-other-nli", tmp_path)["decision"]
    shipped = json.loads(Path(base.decision.decision_params).read_text())
    copy = json.loads(Path(files["decision_params"]).read_text())
    assert copy["meta"]["nli_model"]["version"] == "some-other-nli"
    assert {k: v for k, v in copy.items() if k != "meta"} == {k: v for k, v in shipped.items() if k != "meta"}
    s = base.updated(decision=files)
    decision = load_decision(s.decision, "e2e", "some-other-nli")  # accepted for the other model ...
    assert (decision.name, decision.params) == (shipped["method"], shipped["params"])  # ... and it is the shipped rule
    display, shipped_display = load_display(s.decision, "some-other-nli", "e2e"), load_display(base.decision)
    assert shipped_display is not None and display == shipped_display  # thresholds, scorer, evidence: the shipped ones
    with pytest.raises(ValueError):  # the originals still refuse another model
        load_decision(base.decision, "e2e", "some-other-nli")
