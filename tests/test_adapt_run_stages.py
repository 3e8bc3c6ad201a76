"""`dialcheck adapt` in stages (lab/nli/adapt_run.py): the model written is the model measured, every
guard (the yardstick's limit among them) lets the next mix through, and the run stays readable.

Why: a certificate is only worth something for the model it was computed on; a guard checked after
the mix is chosen refuses a whole run that the next mix would have passed; and a 250-line function
with closures sharing dicts is where the last two came from."""
from __future__ import annotations

import ast
import json
from pathlib import Path

import numpy as np
import pytest

from lab.nli.judged import JudgedPair

pytestmark = pytest.mark.unit
REPO = Path(__file__).resolve().parent.parent
SHIPPED = REPO / "triton_models" / "nli" / "1"
LONGEST = 80  # lines: a function longer than a screen and a half is split into named steps


def test_no_function_in_the_adaptation_run_is_over_a_screen_and_a_half():
    tree = ast.parse((REPO / "lab" / "nli" / "adapt_run.py").read_text())
    long = {n.name: n.end_lineno - n.lineno + 1 for n in ast.walk(tree)
            if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef)) and n.end_lineno - n.lineno + 1 > LONGEST}
    assert not long, long


class _Ranks:
    """A scorer whose p(entailment) is `score(hypothesis)`: what the yardstick's ROC AUC reads."""

    def __init__(self, score):
        self.score = score

    def probs(self, premises, hypotheses):
        p = np.array([self.score(h) for h in hypotheses], float).reshape(-1)
        return np.stack([p, (1 - p) / 2, (1 - p) / 2], axis=1) if len(p) else np.zeros((0, 3))


def test_a_mix_failing_the_yardstick_guard_yields_to_the_next_mix():
    """With --guard-yardstick, the yardstick's per-set limit is one of the guards each mix is held to
    from the best-ranking down: a mix that forgets a set beyond it is passed over for the next (it
    used to be checked after the mix was chosen, refusing the whole run); without the flag the
    yardstick is reported, not guarded, and the best-ranking mix is kept."""
    from lab.nli.adapt_run import AdaptOptions, Forgetting, choose_mix, mix_guards

    supported = [JudgedPair("e", f"s{i}", "entailment", f"c{i}") for i in range(10)]
    not_supported = [JudgedPair("e", f"n{i}", "not_entailment", f"d{i}") for i in range(10)]
    ranked = {p.hypothesis: 0.6 + 0.03 * i for i, p in enumerate(supported)} | \
        {p.hypothesis: 0.1 + 0.03 * i for i, p in enumerate(not_supported)}
    shipped = _Ranks(ranked.get)
    mixes = {"1.0": _Ranks(lambda h: 1 - ranked[h]),  # ranks the set backwards: ROC AUC 1.0 → 0.0
             "0.75": _Ranks(ranked.get), "0.5": _Ranks(ranked.get)}
    forgetting = Forgetting(sets={"dialfact": supported + not_supported})
    said: list[str] = []

    def chosen(opts):
        guarded = {}

        def holds(w):
            guarded[w] = mix_guards(shipped, mixes[w], forgetting, opts, said.append)
            return guarded[w]["passed"]
        w, tries = choose_mix(list(mixes), holds, lambda w: {"none": False, "less": False})
        return w, list(tries), guarded

    w, tried, guarded = chosen(AdaptOptions(guard_yardstick=True))
    assert (w, tried) == ("0.75", ["0.75"])
    assert guarded["1.0"]["failures"] == ["dialfact ROC AUC 1.000 → 0.000"]
    assert guarded["1.0"]["yardstick"]["sets"]["dialfact"]["delta"] == -1.0
    assert said  # each set's figures are logged as the guard reads them
    w, tried, guarded = chosen(AdaptOptions())
    assert (w, tried) == ("1.0", ["1.0"]) and "yardstick" not in guarded["1.0"]


def test_the_gate_lists_each_refusal_in_the_order_the_stages_meet_it(tmp_path):
    """`refusal` is the one list: no mix ranks better; every mix that does fails a guard; none that
    holds the guards certifies as much as the shipped display; else nothing is refused."""
    from lab.nli.adapt_run import AdaptOptions, Run, refusal

    run = Run([], np.zeros(0), {"guards": {"candidates": {"0.5": {"failures": ["stress set accuracy 0.586 → 0.5"]}}}},
              SHIPPED, tmp_path, tmp_path / "work", AdaptOptions(), print, 0.0)
    run.gain, run.auc_mix, run.auc_base = {"0.5": {"gain": 0.01, "lower": -0.02}}, {"0.5": 0.79}, 0.78
    assert refusal(run).startswith("the adapted model does not rank")
    run.candidates = ["0.5"]
    assert refusal(run) is None  # ranked better, the mixes not tried yet
    run.tries = {}
    assert refusal(run) == ("every mix that ranks the deployment's conversations better fails a safety guard "
                            "(at mix 0.5: stress set accuracy 0.586 → 0.5)")
    run.tries = {"0.5": {"none": True}}
    assert refusal(run) == ("no mix that holds the guards certifies as many badges as the shipped model does "
                            "(mix 0.5: nothing certified from 0.75 up)")
    run.chosen = "0.5"
    assert refusal(run) is None


@pytest.mark.model
def test_the_written_model_gives_the_probabilities_the_run_measured(tmp_path):
    """One WiSE-FT path: each mix of the final fine-tune is exported once (TorchMixes.export), and
    that directory is what the guards score and what is written. Its probabilities under ONNX Runtime
    on the judged rows are the torch mix's, which the gate and the certificate read for the fold
    models by the same path, within 1e-5; its calibration names the mix and the version."""
    import torch
    from transformers import AutoModelForSequenceClassification

    from lab.nli.adapt import TUNED, TorchMixes, base_checkpoint
    from lab.nli.adapt_run import AdaptOptions, Run, _candidate
    from workers.models.onnx_nli import OnnxNLI

    ckpt = base_checkpoint(SHIPPED, tmp_path / "ckpt")
    tuned = tmp_path / "final-tuned"
    tuned.mkdir()
    (tuned / "calibration.json").write_text((SHIPPED / "calibration.json").read_text())
    state = AutoModelForSequenceClassification.from_pretrained(str(ckpt)).state_dict()
    gen = torch.Generator().manual_seed(0)
    torch.save({k: v + 0.02 * torch.randn(v.shape, generator=gen) if v.is_floating_point() else v
                for k, v in state.items()}, tuned / TUNED)  # a tuned model apart from the base
    rows = [JudgedPair("The Eiffel Tower is in Paris and was finished in 1889.", "It was finished in 1889.",
                       "entailment", "c1"),
            JudgedPair("Bob sold his car to Alice last week.", "Alice sold her car to Bob.", "not_entailment", "c2"),
            JudgedPair("The river floods every spring.", "The river never floods.", "not_entailment", "c3"),
            JudgedPair("Mount Everest is 8,849 metres high.", "Everest is 8,849 metres high.", "entailment", "c4")]
    run = Run(rows, np.zeros(len(rows), int), {"data": {"pairs_sha1": "abc"}, "base_model": {"version": "base"}},
              SHIPPED, tmp_path / "out", tmp_path / "work", AdaptOptions(), print, 0.0)
    run.final, run.steps = TorchMixes(ckpt, tuned), 3
    prem, hyp = [r.premise for r in rows], [r.hypothesis for r in rows]
    measured = run.final.probs(0.5, prem, hyp)
    written = _candidate(run, "0.5")
    served = OnnxNLI(written, threads=1, workers=1).predict(prem, hyp)
    assert np.abs(served - measured).max() < 1e-5, np.abs(served - measured).max()
    assert np.abs(measured - run.final.probs(1.0, prem, hyp)).max() > 1e-3  # the mix's weight matters
    cal = json.loads((written / "calibration.json").read_text())
    assert cal["adapt"]["weight"] == 0.5 and cal["version"] == run.version("0.5")
    assert cal["adapt"]["pairs"] == len(rows) and cal["adapt"]["folds"] == run.opts.folds
