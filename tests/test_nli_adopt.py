"""`dialcheck nli adopt` end to end with the real architectures: a DeBERTa-v2 three-way
checkpoint with a SentencePiece tokenizer and a BERT two-way checkpoint with a WordPiece vocab.

The weights are RANDOM: no DeBERTa/BERT NLI weights can be installed on this machine (the Hugging
Face hub is unreachable), so each checkpoint is built here — `DebertaV2ForSequenceClassification`
/ `BertForSequenceClassification`, 2 layers, hidden 64, with id2label names — and its tokenizer is
trained on local DialFact text (sentencepiece's trainer; tokenizers' WordPiece trainer), then
saved with save_pretrained. Every number these models give is meaningless as a quality number;
what is tested is the plumbing: label mapping by name, ONNX export against torch, tokenizer files,
max length, temperature, model card, the decision refit, both Triton repositories, `dialcheck
check` through the real tritonserver, and the old decision refused for the new model.
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

pytestmark = pytest.mark.model

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))
DIALCHECK = str(Path(sys.executable).parent / "dialcheck")
# a three-way model whose columns are NOT dialcheck's order: the mapping must come from the names
DEBERTA_LABELS = {0: "CONTRADICTION", 1: "Neutral", 2: "entailment"}
BERT_LABELS = {0: "entailment", 1: "not_entailment"}
PAIRS = [("The Eiffel Tower is in Paris and was finished in 1889.", "The tower is in Paris."),
         ("A man plays a guitar on stage.", "Nobody is playing music."),
         ("She was born in 1970 in Ohio.", "Her brother plays football every weekend."),
         (" ".join(["The old bridge crosses the river near the market square."] * 80), "The bridge is old.")]


def _texts(n: int = 1500) -> list[str]:
    from schemas.settings import load_settings

    out = []
    with open(load_settings().data.dialfact_sample) as f:
        for line in f:
            r = json.loads(line)
            out += [r["response"], *r.get("context", [])[-2:], *(e[2] for e in r.get("evidence_list", []))]
            if len(out) >= n:
                break
    return out


def build_deberta(out: Path, texts: list[str], labels: dict = DEBERTA_LABELS) -> Path:
    """A randomly initialised DeBERTa-v2 NLI checkpoint with a SentencePiece tokenizer (spm.model)
    trained on `texts`; DeBERTa-v3's conventions: [PAD]=0 [CLS]=1 [SEP]=2 [UNK]=3, no token types."""
    import sentencepiece as spm
    import torch
    from transformers import DebertaV2Config, DebertaV2ForSequenceClassification, DebertaV2Tokenizer

    out.mkdir(parents=True)
    spm.SentencePieceTrainer.train(
        sentence_iterator=iter(texts), model_prefix=str(out / "spm"), vocab_size=700, model_type="unigram",
        pad_id=0, pad_piece="[PAD]", bos_id=1, bos_piece="[CLS]", eos_id=2, eos_piece="[SEP]", unk_id=3,
        unk_piece="[UNK]", user_defined_symbols=["[MASK]"], minloglevel=2)
    (out / "spm.vocab").unlink()
    (out / "tokenizer_config.json").write_text(json.dumps({"tokenizer_class": "DebertaV2Tokenizer", "model_max_length": 512}))
    tok = DebertaV2Tokenizer.from_pretrained(str(out))  # converted from spm.model by sentencepiece
    torch.manual_seed(0)
    cfg = DebertaV2Config(vocab_size=len(tok), hidden_size=64, num_hidden_layers=2, num_attention_heads=2,
                          intermediate_size=128, max_position_embeddings=512, type_vocab_size=0,
                          relative_attention=True, position_buckets=256, pos_att_type=["p2c", "c2p"],
                          position_biased_input=False, pad_token_id=0, initializer_range=0.3,
                          num_labels=len(labels), id2label=labels, label2id={v: k for k, v in labels.items()})
    DebertaV2ForSequenceClassification(cfg).eval().save_pretrained(str(out))
    tok.save_pretrained(str(out))
    return out


def build_bert(out: Path, texts: list[str], labels: dict = BERT_LABELS) -> Path:
    """A randomly initialised BERT NLI checkpoint with a WordPiece vocab.txt trained on `texts`."""
    import torch
    from tokenizers import BertWordPieceTokenizer
    from transformers import BertConfig, BertForSequenceClassification, BertTokenizer

    out.mkdir(parents=True)
    wp = BertWordPieceTokenizer(lowercase=True)
    wp.train_from_iterator(texts, vocab_size=800, special_tokens=["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"])
    wp.save_model(str(out))
    tok = BertTokenizer.from_pretrained(str(out), model_max_length=128)
    torch.manual_seed(1)
    cfg = BertConfig(vocab_size=len(tok), hidden_size=64, num_hidden_layers=2, num_attention_heads=2,
                     intermediate_size=128, max_position_embeddings=128, initializer_range=0.3,
                     num_labels=len(labels), id2label=labels, label2id={v: k for k, v in labels.items()})
    BertForSequenceClassification(cfg).eval().save_pretrained(str(out))
    tok.save_pretrained(str(out))
    return out


def dialcheck(*argv: str, env: dict | None = None, timeout: int = 300) -> subprocess.CompletedProcess:
    full = {**os.environ, "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1", **(env or {})}
    return subprocess.run([DIALCHECK, *argv], capture_output=True, text=True, env=full, cwd=str(REPO), timeout=timeout)


def torch_logits(hf_dir: Path, pairs, max_length: int) -> np.ndarray:
    import torch
    from transformers import AutoModelForSequenceClassification, AutoTokenizer

    tok = AutoTokenizer.from_pretrained(str(hf_dir))
    model = AutoModelForSequenceClassification.from_pretrained(str(hf_dir)).eval()
    enc = tok([p for p, _ in pairs], [h for _, h in pairs], padding=True, truncation="longest_first",
              max_length=max_length, return_tensors="pt")
    with torch.no_grad():
        return model(**enc).logits.numpy()


@pytest.fixture(scope="module")
def work(tmp_path_factory):
    root = tmp_path_factory.mktemp("adopt")
    texts = _texts()
    return {"root": root, "deberta": build_deberta(root / "hf-deberta", texts), "bert": build_bert(root / "hf-bert", texts)}


@pytest.fixture(scope="module")
def adopted(work):
    """DeBERTa adopted with a small refit, a CPU Triton repository and a GPU repository."""
    root = work["root"]
    out = root / "deberta-nli"
    r = dialcheck("nli", "adopt", str(work["deberta"]), "--out", str(out), "--limit-per-set", "4",
                  "--valid-limit", "48", "--folds", "2", "--tune-cache", str(root / "tune-cache"),
                  "--triton-repo", str(root / "repo"), "--gpu-repo", str(root / "gpu-repo"), "--json")
    assert r.returncode == 0, r.stderr[-3000:]
    return {"out": out, "record": json.loads(r.stdout), "repo": root / "repo", "gpu": root / "gpu-repo"}


@pytest.fixture(scope="module")
def served(adopted):
    """The real tritonserver on the adopted CPU repository, started once for the tests that read it
    (the in-process comparison, `dialcheck check` and the stream worker): ~11 s a start and stop."""
    from infra.triton_server import TritonServer

    with TritonServer(adopted["repo"]) as server:
        yield server


def test_deberta_artifact(work, adopted):
    """Columns mapped by name (CONTRADICTION, Neutral, entailment → dialcheck's order), ONNX equal to
    torch (long pair truncated at the model's max length), SentencePiece file kept, card written,
    fingerprint = lab/tuning/data.py's, and the decision refitted for THIS model."""
    from lab.tuning.data import model_fingerprint
    from workers.models.onnx_nli import OnnxNLI

    out, rec = adopted["out"], adopted["record"]
    cal = json.loads((out / "calibration.json").read_text())
    assert cal["label_order"] == ["entailment", "neutral", "contradiction"]
    assert cal["source"]["columns"] == {"entailment": 2, "neutral": 1, "contradiction": 0}
    assert cal["max_length"] == 512 and cal["inputs"] == ["input_ids", "attention_mask"]  # DeBERTa-v3: no token types
    assert 0.05 <= cal["temperature"] <= 20 and cal["validation_pairs"] == 48
    assert (out / "tokenizer" / "spm.model").is_file()
    nli = OnnxNLI(out)
    assert nli.max_length == 512 and nli.version == rec["version"] and rec["version"].startswith("adopted-hf-deberta-fp32-")
    got = nli.logits([p for p, _ in PAIRS], [h for _, h in PAIRS])
    want = torch_logits(work["deberta"], PAIRS, 512)[:, [2, 1, 0]]
    assert np.abs(want).max() > 0.05, "logits too small to test the column mapping"
    assert np.abs(got - want).max() < 1e-3
    assert rec["fingerprint"] == model_fingerprint(out)
    card = (out / "MODEL_CARD.md").read_text()
    assert rec["version"] in card and rec["fingerprint"] in card and "entailment ← column 2" in card
    decision = json.loads((out / "decision.json").read_text())
    assert decision["meta"]["nli_model"]["version"] == rec["version"]
    assert decision["meta"]["nli_model"]["fingerprint"] == rec["fingerprint"]
    assert set(decision["meta"]["fitted_on"]["sets"]) >= {"dialfact", "hybridial"}
    assert (out / "DECISION_CARD.md").is_file()


def test_triton_serves_it_and_check_gets_a_verdict(work, adopted, served):
    """The real tritonserver on the adopted repository gives the in-process numbers; `dialcheck
    check --models triton://…` gets a verdict through it, decided by the refitted decision."""
    from workers.models.onnx_nli import OnnxNLI
    from workers.models.triton import TritonNLI

    out = adopted["out"]
    local = OnnxNLI(out)
    prem, hyp = [p for p, _ in PAIRS], [h for _, h in PAIRS]
    remote = TritonNLI.from_url(served.grpc_url)
    assert np.abs(remote.predict(prem, hyp) - local.predict(prem, hyp)).max() < 1e-4
    assert remote.version == local.version and abs(remote.temperature - local.temperature) < 1e-6
    remote.close()
    r = dialcheck("check", "--protocol", "fv", "--claim", "The Eiffel Tower is in Paris.",
                  "--evidence", "The Eiffel Tower is a wrought-iron tower in Paris, France.",
                  "--models", served.grpc_url, "--format", "json",
                  env={"DIALCHECK_NLI_MODEL_DIR": str(out), "DIALCHECK_DECISION_PARAMS": str(out / "decision.json")})
    assert r.returncode == 0, r.stderr[-2000:]
    verdict = json.loads(r.stdout)
    assert verdict["label"] in ("SUPPORTS", "REFUTES", "NOT ENOUGH INFO")
    assert verdict["model_versions"]["nli"] == local.version
    assert verdict["status"]["state"] == "ok"


def test_the_shipped_decision_is_refused_for_the_adopted_model(adopted):
    """The old decision (fitted for the shipped MiniLM) with the adopted model: one line, exit 2."""
    r = dialcheck("check", "--protocol", "fv", "--claim", "The Eiffel Tower is in Paris.",
                  "--evidence", "The Eiffel Tower is in Paris.", "--format", "json",
                  env={"DIALCHECK_NLI_MODEL_DIR": str(adopted["out"]),
                       "DIALCHECK_DECISION_PARAMS": str(REPO / "workers" / "decision" / "params" / "decision.json")})
    assert r.returncode == 2, (r.stdout, r.stderr[-2000:])
    lines = [x for x in r.stderr.splitlines() if x.strip()]
    assert len(lines) == 1 and lines[0].startswith("dialcheck: ") and adopted["record"]["version"] in lines[0], lines


def test_the_model_dir_alone_brings_its_decision_and_display(adopted):
    """DIALCHECK_NLI_MODEL_DIR=<adopted dir> and no other setting: the decision.json and display.json
    that adopt wrote beside the (random-weight) model decide and show the verdict. The shipped ones
    would be refused for this model (test above), so a verdict at all means the folder's were read."""
    env = {k: v for k, v in os.environ.items() if k not in ("DIALCHECK_DECISION_PARAMS", "DIALCHECK_DISPLAY_PARAMS")}
    env.update({"HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1", "DIALCHECK_NLI_MODEL_DIR": str(adopted["out"])})
    assert (adopted["out"] / "display.json").is_file()
    r = subprocess.run([DIALCHECK, "check", "--protocol", "fv", "--claim", "The Eiffel Tower is in Paris.",
                        "--evidence", "The Eiffel Tower is a wrought-iron tower in Paris, France.", "--format", "json"],
                       capture_output=True, text=True, env=env, cwd=str(REPO), timeout=300)
    assert r.returncode == 0, r.stderr[-2000:]
    verdict = json.loads(r.stdout)
    assert verdict["model_versions"]["nli"] == adopted["record"]["version"]
    assert verdict["label"] in ("SUPPORTS", "REFUTES", "NOT ENOUGH INFO") and verdict["status"]["state"] == "ok"
    assert verdict["display"] is not None


def test_gpu_repository_and_its_sentencepiece_tokenizer_step(adopted):
    """The GPU (NGC) repository for the adopted DeBERTa: no token_type_ids anywhere (its graph has
    none), the tokenizer step at the model's max length; that step (a python-backend model) runs on
    the CPU tritonserver here and gives the SentencePiece ids of the adopted tokenizer."""
    from transformers import AutoTokenizer

    from infra.triton_server import TritonServer
    from workers.models.triton import Endpoint, TritonTransport

    gpu = adopted["gpu"]
    for name in ("nli", "nli_tokenize", "nli_onnx"):
        assert "token_type_ids" not in (gpu / name / "config.pbtxt").read_text()
    assert 'key: "max_length" value: { string_value: "512" }' in (gpu / "nli_tokenize" / "config.pbtxt").read_text()
    tok = AutoTokenizer.from_pretrained(str(adopted["out"] / "tokenizer"))
    prem, hyp = [p for p, _ in PAIRS[:2]], [h for _, h in PAIRS[:2]]
    want = tok(prem, hyp, padding=True, truncation="longest_first", max_length=512, return_tensors="np")
    with TritonServer(gpu, models=["nli_tokenize"]) as server:
        t = TritonTransport(Endpoint.parse(server.grpc_url), "nli_tokenize")
        col = lambda xs: np.array([x.encode() for x in xs], dtype=np.object_).reshape(-1, 1)  # noqa: E731
        res = t.infer({"PREMISE": col(prem), "HYPOTHESIS": col(hyp)}, ["input_ids", "attention_mask", "VERSION"])
        t.close()
    assert (res["input_ids"] == want["input_ids"]).all() and (res["attention_mask"] == want["attention_mask"]).all()
    assert res["VERSION"].reshape(-1)[0].decode() == adopted["record"]["version"]


def test_two_way_bert(work, tmp_path):
    """BERT two-way (entailment / not_entailment): neutral gets the not-entailment logit, contradiction
    probability 0; token_type_ids kept (BERT has token type embeddings); max length = the model's 128."""
    from workers.models.nli_base import softmax
    from workers.models.onnx_nli import OnnxNLI

    out = tmp_path / "bert-nli"
    r = dialcheck("nli", "adopt", str(work["bert"]), "--out", str(out), "--skip-refit", "--valid-limit", "48", "--json")
    assert r.returncode == 0, r.stderr[-3000:]
    cal = json.loads((out / "calibration.json").read_text())
    assert cal["source"]["two_way"] and cal["source"]["columns"] == {"entailment": 0, "neutral": 1, "contradiction": None}
    assert cal["inputs"] == ["input_ids", "attention_mask", "token_type_ids"] and cal["max_length"] == 128
    assert not (out / "decision.json").exists()
    nli = OnnxNLI(out)
    probs = nli.predict([p for p, _ in PAIRS], [h for _, h in PAIRS])
    two = softmax(torch_logits(work["bert"], PAIRS, 128), nli.temperature)
    assert np.abs(probs[:, :2] - two).max() < 1e-4 and probs[:, 2].max() < 1e-6


def test_unknown_label_name_is_refused(work, tmp_path):
    """A label name that is not an NLI label (HF's default LABEL_0 ...) is one line and exit 2, never
    mapped by position."""
    bad = tmp_path / "hf-bad"
    bad.mkdir()
    for f in work["bert"].iterdir():
        (bad / f.name).symlink_to(f)
    (bad / "config.json").unlink()
    cfg = json.loads((work["bert"] / "config.json").read_text())
    cfg["id2label"], cfg["label2id"] = {"0": "LABEL_0", "1": "LABEL_1"}, {"LABEL_0": 0, "LABEL_1": 1}
    (bad / "config.json").write_text(json.dumps(cfg))
    r = dialcheck("nli", "adopt", str(bad), "--out", str(tmp_path / "out"), "--skip-refit")
    lines = [x for x in r.stderr.splitlines() if x.strip()]
    assert r.returncode == 2 and len(lines) == 1, r.stderr[-2000:]
    assert lines[0].startswith("dialcheck: ") and "'LABEL_0'" in lines[0] and "never guessed" in lines[0]
    assert not (tmp_path / "out").exists()


def test_label_mapping_spellings():
    from lab.nli.adopt import AdoptError, label_mapping

    assert label_mapping({0: "ENTAILMENT", 1: "NEUTRAL", 2: "CONTRADICTION"}) == ([0, 1, 2], False)
    assert label_mapping({"0": "contradiction", "1": "entail", "2": "neutral"}) == ([1, 2, 0], False)
    assert label_mapping({0: "not-entailment", 1: "Entailment"}) == ([1, 0, None], True)
    for bad in ({0: "entailment", 1: "entailment"}, {0: "entailment", 1: "neutral"}, {0: "yes", 1: "no"}):
        with pytest.raises(AdoptError):
            label_mapping(bad)


@pytest.mark.broker
@pytest.mark.timeout(900)
def test_a_stream_worker_gets_verdicts_through_the_adopted_model_on_triton(adopted, served, broker, tmp_path):
    """The adopted (random-weight) DeBERTa served by the real tritonserver, a real `dialcheck worker`
    on the embedded broker reading chat turns: every checked turn gets a verdict from that model,
    decided by the decision refitted for it (tests/test_llm_judge.py's fv checker hands each turn the
    two Elvis passages as gold evidence, so no passage index is built)."""
    from schemas import ChatTurn, claim_id
    from streams.replay import TurnProducer
    from streams.verdicts import collect_verdicts, end_offsets
    from streams.worker import WorkerProcess
    from tests.test_stream_resilience import stream_settings

    out = adopted["out"]
    s = stream_settings(broker, "adopted").updated(
        models={"backend": served.grpc_url, "nli_model_dir": str(out)},
        decision={"decision_params": str(out / "decision.json"), "display_params": ""})
    start = end_offsets(s, s.kafka.topic_verdicts)
    replies = {f"adopt-{i}": c for i, c in enumerate(("He was born in Tupelo.", "He moved to Memphis at 13."))}
    turns = [(ChatTurn(conv, f"{conv}#c0", "user", "I love Elvis Presley.", check=False),
              ChatTurn(conv, f"{conv}#r", "assistant", c, check=True)) for conv, c in replies.items()]
    want = {claim_id(r.conversation_id, r.turn_id, r.text) for _, r in turns}
    env = {"DIALCHECK_MODELS": served.grpc_url, "DIALCHECK_NLI_MODEL_DIR": str(out),
           "DIALCHECK_DECISION_PARAMS": str(out / "decision.json"), "DIALCHECK_DISPLAY_PARAMS": ""}
    w = WorkerProcess(s, tmp_path / "worker.log", env=env,
                      extra_args=["--pipeline", "tests.test_llm_judge:create", "--protocol", "fv", "--surface", "r0"])
    try:
        w.start().wait_ready(300)
        with TurnProducer(s) as producer:
            for ctx, reply in turns:
                producer.send_turn(ctx)
                producer.send_turn(reply)
        vlog = collect_verdicts(s, want, 300, start=start, alive=w.alive)
    finally:
        w.stop()
    assert want <= vlog.verdicts.keys() and not vlog.schema_errors
    for cid in want:
        v = vlog.verdicts[cid]
        assert v.model_versions["nli"] == adopted["record"]["version"], v.model_versions
        assert v.status.state == "ok" and v.rationale["rule"] == "layer:guarded"
