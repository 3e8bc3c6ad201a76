"""Contrastive twins from real sentences: the words stay, the meaning changes.

A parsed sentence (spaCy en_core_web_sm) gives a short *entailed twin* (its core clause: subject,
verb, object and the phrase that matters, modifiers dropped) and, beside it, a *wrong twin* made of
the same words with the roles or one value changed:

- swap: subject and object exchanged ("The committee fined the club" → "The club fined the
  committee"); for a passive clause the subject and the "by" agent.
- passive: an active clause inverted ("The club was fined by the committee", entailed) beside the
  inversion with the roles swapped ("The committee was fined by the club").
- recombine: the predicate of one coordinated or subordinate clause given to the other clause's
  subject ("The Danube flows into the Black Sea, and the Rhine into the North Sea" / "Kyoto was
  …, while Tokyo is the capital" → "Tokyo was …"), or a relative clause's noun given the main
  predicate (HANS subsequence: "The actor who met the senator was famous" → "The senator was famous").
- entity: a named entity replaced by another of the same type from the same passage (the other
  entity's sentence is part of the evidence, so every word of the claim is there).
- number: a year, date, ordinal, count or quantity changed, the right value stated in the evidence.

Labelling rule (by construction, NLI labels): the entailed twin is `entailment`. A wrong twin made
by swapping roles, recombining or replacing an entity is `neutral`: the evidence does not say it,
but neither does it rule it out (the club may also have fined the committee; Tokyo may have been
a capital too) — labelling it contradiction would teach "different = contradiction", the failure
that once made false REFUTES (docs: verifier recipes §1). A wrong twin whose number, year, date
or ordinal differs from the one the evidence states for the same clause is `contradiction`: the
slot holds one value (comparatives and ranges, "more than 300", "between 1901 and 2000", are
skipped, since another value may still be true). For the stress probe's gold labels this is
SUPPORTS (entailed), NOT ENOUGH INFO (neutral) and REFUTES (contradiction); the probe counts any
SUPPORTS on a wrong twin as wrong.

Deterministic: the same texts and seed give the same twins (random.Random(seed), sorted input)."""
from __future__ import annotations

import random
import re
from dataclasses import asdict, dataclass
from typing import Iterable, Iterator, Sequence

KINDS = ("swap", "passive", "recombine", "entity", "number")
GOLD = {"entailment": "SUPPORTS", "neutral": "NOT ENOUGH INFO", "contradiction": "REFUTES"}

# verbs whose subject and object can be exchanged without changing the fact
SYMMETRIC = {"meet", "marry", "join", "border", "resemble", "match", "equal", "face", "neighbor", "neighbour",
             "touch", "accompany", "divorce", "date", "fight", "battle", "play", "share", "include", "have",
             "contain", "become", "cross", "surround", "connect", "link", "oppose", "befriend", "collaborate"}
PRONOUNS = {"i", "you", "he", "she", "it", "we", "they", "me", "him", "her", "us", "them", "this", "that", "these",
            "those", "which", "who", "whom", "what", "there", "itself", "himself", "herself", "themselves", "one",
            "some", "many", "most", "all", "both", "each", "others", "other", "several", "few", "any", "none"}
ENTITY_TYPES = ("PERSON", "ORG", "GPE", "LOC", "NORP", "WORK_OF_ART", "EVENT", "FAC", "PRODUCT", "LANGUAGE")
NUMBER_TYPES = ("DATE", "CARDINAL", "ORDINAL", "QUANTITY", "PERCENT", "MONEY")
# words before or in a value that make another value possibly true too
VAGUE = {"more", "less", "fewer", "than", "over", "under", "about", "around", "approximately", "nearly", "almost",
         "least", "most", "up", "between", "and", "or", "to", "from", "until", "till", "through", "since", "c.",
         "circa", "some", "roughly", "above", "below", "by", "within", "after", "before", "early", "late", "mid",
         "-", "–", "—", "/", "several", "many", "few", "hundreds", "thousands", "millions", "every", "per", "each",
         "estimated", "only", "just", "any", "decade", "decades", "century", "centuries", "s", "'s", "past", "last",
         "next", "first", "among", "one", "of"}
ORDINALS = ["first", "second", "third", "fourth", "fifth", "sixth", "seventh", "eighth", "ninth", "tenth"]
NUMBER_WORDS = ["two", "three", "four", "five", "six", "seven", "eight", "nine", "ten", "eleven", "twelve"]
CORE_DEPS = {"nsubj", "nsubjpass", "aux", "auxpass", "neg", "dobj", "attr", "acomp", "oprd", "agent", "dative",
             "prt", "xcomp", "ccomp"}
DROP_IN_SPAN = {"relcl", "appos", "acl", "punct", "advcl", "parataxis", "cc", "conj", "mark"}
CLAUSE_MARKS = {"while", "whereas", "but", "although", "though"}


@dataclass(frozen=True)
class Twin:
    """One pair: evidence, claim, NLI label (entailment / neutral / contradiction), kind, and the
    group id that joins a wrong twin to its entailed twin (`twin` is "entailed" or "wrong")."""
    evidence: str
    claim: str
    label: str
    kind: str
    group: str
    twin: str
    source: str = ""

    def row(self) -> dict:
        return {**asdict(self), "gold": GOLD[self.label]}


def nlp():
    """The pinned small English pipeline (pyproject), loaded once for the process: the same object
    the pronoun surface (workers.surfaces.pronouns) parses with."""
    from workers.surfaces.pronouns import nlp as shared

    return shared()


# ---------------------------------------------------------------- rendering spans

def _span_tokens(tok, drop=DROP_IN_SPAN) -> list:
    """tok's subtree without relative clauses, appositions, clause children and punctuation."""
    out = [tok]
    for c in tok.children:
        if c.dep_ in drop and c.tag_ != "HYPH":
            continue
        out.extend(_span_tokens(c, drop))
    return out


def _render(tokens: Sequence, replace: dict | None = None) -> str:
    """Tokens in sentence order as text; `replace` maps a head token's index to (text, token indices
    it covers) so that a whole phrase is exchanged for another phrase's text."""
    replace = replace or {}
    covered = {i for _, ids in replace.values() for i in ids}
    words, done = [], set()
    toks = sorted(tokens, key=lambda t: t.i)
    for k, t in enumerate(toks):
        nxt = toks[k + 1].i if k + 1 < len(toks) else None
        gap = t.whitespace_ if nxt == t.i + 1 else " "
        if t.i in covered:
            for head, (text, ids) in replace.items():
                if t.i in ids and head not in done:
                    last = t.doc[max(ids)]
                    words.append(text + (last.whitespace_ if nxt == max(ids) + 1 or nxt is None else " "))
                    done.add(head)
            continue
        words.append(t.text + gap)
    text = "".join(words)
    text = re.sub(r"\s+([,.;:%)'])", r"\1", text).replace("( ", "(").replace(" 's", "'s").replace(" n't", "n't")
    return re.sub(r"\s+", " ", text).strip()


def _phrase(tok) -> tuple[str, set]:
    toks = _span_tokens(tok)
    return _render(toks), {t.i for t in toks}


def _sentence(text: str) -> str:
    text = text.strip().rstrip(",;:")
    if not text:
        return text
    text = text[0].upper() + text[1:]
    return text if text.endswith((".", "!", "?")) else text + "."


def _lower_head(text: str, tok) -> str:
    """A phrase moved out of sentence-initial position: 'The club' → 'the club' (names keep case)."""
    first = tok.doc[min(i for i in _phrase(tok)[1])]
    if first.i == first.sent.start and first.pos_ not in ("PROPN",) and not (first.text.isupper() and len(first.text) > 1):
        return text[:1].lower() + text[1:]
    return text


def _core_tokens(verb, keep_children: Iterable = ()) -> list:
    """The clause's core: subject, auxiliaries, negation, the verb, its object or complement, its
    particle, and the children named in keep_children (e.g. the prep holding a value)."""
    keep = {c.i for c in keep_children}
    if not keep and not any(c.dep_ in ("dobj", "attr", "acomp", "oprd", "agent", "ccomp", "xcomp") for c in verb.children):
        keep = {c.i for c in verb.children if c.dep_ == "prep"}  # "flows into the sea", not "flows"
        keep = {min(keep)} if keep else keep
    toks = [verb]
    for c in verb.children:
        if c.dep_ in CORE_DEPS or c.i in keep:
            if c.dep_ in ("ccomp", "xcomp") and c.i not in keep:
                continue
            toks.extend(_span_tokens(c))
    return toks


def _ok_np(tok) -> bool:
    return (tok.pos_ in ("NOUN", "PROPN") and tok.text.lower() not in PRONOUNS
            and not any(t.pos_ == "PRON" or t.text.lower() in PRONOUNS for t in _span_tokens(tok)
                        if t.dep_ in ("det", "poss") and t.text.lower() not in ("the", "a", "an")))


def _child(tok, *deps):
    return next((c for c in tok.children if c.dep_ in deps), None)


def _prep_objects(verb):
    """(prep, pobj) children of the verb: 'into' → 'the Black Sea'."""
    for p in verb.children:
        if p.dep_ in ("prep", "agent"):
            o = _child(p, "pobj")
            if o is not None:
                yield p, o


def _plain(sent) -> bool:
    """Clauses worth using: not a question, not quoted, not too long, no parenthesis or list."""
    t = sent.text
    return (5 <= len(sent) <= 40 and "?" not in t and '"' not in t and "(" not in t and ";" not in t
            and not t.strip().startswith(("-", "*")))


# ---------------------------------------------------------------- kinds

def _swaps(sent, gid: str) -> Iterator[tuple[str, str, str, str]]:
    """(kind, entailed claim, wrong claim, evidence) for role swaps and passive inversions."""
    for verb in sent:
        if verb.pos_ not in ("VERB", "AUX") or verb.lemma_.lower() in SYMMETRIC:
            continue
        subj, obj = _child(verb, "nsubj"), _child(verb, "dobj")
        if subj is not None and obj is not None and _ok_np(subj) and _ok_np(obj):
            core = _core_tokens(verb)
            (st, sids), (ot, oids) = _phrase(subj), _phrase(obj)
            if st.lower() in ot.lower() or ot.lower() in st.lower() or _plural(subj) != _plural(obj):
                continue
            right = _render(core)
            wrong = _render(core, {subj.i: (_sentence_case(ot, obj), sids), obj.i: (_lower_head(st, subj), oids)})
            yield "swap", _sentence(right), _sentence(wrong), sent.text
            # passive inversion of a regular past-tense verb: "O was V-ed by S"
            if verb.tag_ == "VBD" and verb.text.endswith("ed") and not _child(verb, "aux", "neg", "prt", "dative") \
                    and len(core) == len(sids) + len(oids) + 1:
                be_o = "were" if obj.tag_ in ("NNS", "NNPS") else "was"
                be_s = "were" if subj.tag_ in ("NNS", "NNPS") else "was"
                ent = f"{_sentence_case(ot, obj)} {be_o} {verb.text} by {_lower_head(st, subj)}"
                bad = f"{st} {be_s} {verb.text} by {_lower_head(ot, obj)}"
                yield "passive", _sentence(ent), _sentence(bad), sent.text
        subjpass, agent = _child(verb, "nsubjpass"), _child(verb, "agent")
        by = _child(agent, "pobj") if agent is not None else None
        if subjpass is not None and by is not None and _ok_np(subjpass) and _ok_np(by) \
                and verb.lemma_.lower() not in SYMMETRIC and _child(verb, "auxpass") is not None \
                and _plural(subjpass) == _plural(by):
            core = _core_tokens(verb)
            (st, sids), (bt, bids) = _phrase(subjpass), _phrase(by)
            if st.lower() in bt.lower() or bt.lower() in st.lower():
                continue
            right = _render(core)
            wrong = _render(core, {subjpass.i: (_sentence_case(bt, by), sids), by.i: (_lower_head(st, subjpass), bids)})
            yield "passive", _sentence(right), _sentence(wrong), sent.text


def _sentence_case(text: str, tok) -> str:
    return text


def _plural(tok) -> bool:
    return tok.tag_ in ("NNS", "NNPS") or any(c.dep_ == "conj" for c in tok.children)


def _predicate_tokens(verb, subj) -> list:
    sub = {t.i for t in _span_tokens(subj)}
    return [t for t in _core_tokens(verb) if t.i not in sub]


def _recombine(sent, gid: str) -> Iterator[tuple[str, str, str, str]]:
    """Coordinated/subordinate clauses with their own subjects: one clause's predicate given to the
    other's subject; a relative clause's noun given the main predicate (HANS subsequence)."""
    for v1 in sent:
        s1 = _child(v1, "nsubj", "nsubjpass")
        if v1.pos_ not in ("VERB", "AUX") or s1 is None or not _ok_np(s1):
            continue
        for v2 in v1.children:
            if v2.dep_ not in ("conj", "advcl") or v2.pos_ not in ("VERB", "AUX"):
                continue
            if v2.dep_ == "advcl" and not any(c.dep_ == "mark" and c.text.lower() in CLAUSE_MARKS for c in v2.children):
                continue
            s2 = _child(v2, "nsubj", "nsubjpass")
            if s2 is None or not _ok_np(s2):
                continue
            (t1, ids1), (t2, ids2) = _phrase(s1), _phrase(s2)
            if t1.lower() in t2.lower() or t2.lower() in t1.lower() or (s1.tag_ in ("NNS", "NNPS")) != (s2.tag_ in ("NNS", "NNPS")):
                continue
            for va, sa, ta, ida, sb, tb in ((v1, s1, t1, ids1, s2, t2), (v2, s2, t2, ids2, s1, t1)):
                pred = _predicate_tokens(va, sa)
                if len(pred) < 2:
                    continue
                core = _core_tokens(va)
                right = _render(core)
                wrong = _render(core, {sa.i: (tb, ida)})
                if right.lower() != wrong.lower():
                    yield "recombine", _sentence(right), _sentence(wrong), sent.text
        # relative clause on the subject: "The actor who met the senator was famous"
        rc = _child(s1, "relcl")
        if rc is not None:
            n2 = _child(rc, "dobj") or _child(rc, "nsubj")
            if n2 is not None and _ok_np(n2) and n2.text.lower() not in PRONOUNS:
                core = _core_tokens(v1)
                (t1, ids1), (t2, _) = _phrase(s1), _phrase(n2)
                if t1.lower() not in t2.lower() and t2.lower() not in t1.lower():
                    right = _render(core)
                    wrong = _render(core, {s1.i: (_lower_head(t2, n2), ids1)})
                    yield "recombine", _sentence(right), _sentence(wrong), sent.text


def _entities(doc, sent, rng: random.Random) -> Iterator[tuple[str, str, str, str]]:
    """A named entity of the clause's core replaced by another of its type from the same passage;
    the evidence is the sentence plus the other entity's sentence (so every word is in it)."""
    for verb in sent:
        subj = _child(verb, "nsubj", "nsubjpass")
        if verb.pos_ not in ("VERB", "AUX") or subj is None or not _ok_np(subj):
            continue
        objs = [o for _, o in _prep_objects(verb)] + [c for c in verb.children if c.dep_ in ("dobj", "attr")]
        for target in [subj] + objs:
            ent = next((e for e in sent.ents if e.root.i == target.i and e.label_ in ENTITY_TYPES), None)
            if ent is None:
                continue
            if ent.label_ in ("GPE", "LOC") and target.dep_ == "pobj" and target.head.text.lower() in (
                    "in", "at", "near", "from", "within", "of", "across", "throughout", "on"):
                continue  # "born in Rome" → "born in Italy" may be true too: a place inside a place
            others = sorted({e.text: e for e in doc.ents if e.label_ == ent.label_ and e.text.lower() not in sent.text.lower()
                             and ent.text.lower() not in e.text.lower() and e.text.lower() not in ent.text.lower()
                             and len(e.text) > 2 and e.root.pos_ == ent.root.pos_
                             and e.root.dep_ in ("nsubj", "nsubjpass", "dobj", "pobj", "attr", "conj", "appos")
                             and (ent.label_ != "PERSON" or (len(e) >= 2 and len(ent) >= 2))}.items())
            if not others:
                continue
            other = rng.choice(others)[1]
            keep = [p for p, o in _prep_objects(verb) if o.i == target.i]
            if target.i == subj.i and not _child(verb, "dobj", "attr", "acomp"):
                keep = [p for p, _ in _prep_objects(verb)][:1]  # "X was born in Y", not "X was born"
            core = _core_tokens(verb, keep)
            if not any(t.i == ent.root.i for t in core):
                continue
            ids = {t.i for t in ent}
            right = _render(core)
            wrong = _render(core, {ent.root.i: (other.text, ids)})
            ev = " ".join(s.text for _, s in sorted({sent.start: sent, other.sent.start: other.sent}.items()))
            yield "entity", _sentence(right), _sentence(wrong), ev
            break


_YEAR = re.compile(r"^(1[0-9]{3}|20[0-9]{2})$")
_INT = re.compile(r"^[0-9][0-9,]*$")


def _changed_value(ent, rng: random.Random) -> str | None:
    """Another value for a number, year, ordinal or count (None: a range, a comparative, vague)."""
    words = [t.text.lower() for t in ent]
    before = [t.text.lower() for t in ent.doc[max(ent.start - 2, ent.sent.start):ent.start]]
    if VAGUE & (set(words[:-1]) | set(before)) or any(w in ("-", "–", "/") for w in words):
        return None
    toks = list(ent)
    for k, t in enumerate(toks):
        w = t.text.lower()
        if _YEAR.match(t.text):
            y = int(t.text)
            swapped = t.text[:2] + t.text[3] + t.text[2]
            choices = [str(y + d) for d in (-20, -10, -3, -2, 2, 3, 10, 20) if y + d <= 2025]
            if swapped != t.text:
                choices.append(swapped)
            new = rng.choice(choices)
        elif w in ORDINALS and before[-1:] == ["the"]:
            new = rng.choice([o for o in ORDINALS[:5] if o != w])
            new = new.capitalize() if t.text[0].isupper() else new
        elif re.match(r"^[0-9]+(st|nd|rd|th)$", w):
            n = int(re.match(r"^[0-9]+", w).group()) + rng.choice([1, 2, 3])
            new = f"{n}{'th' if 10 <= n % 100 <= 20 else {1: 'st', 2: 'nd', 3: 'rd'}.get(n % 10, 'th')}"
        elif w in NUMBER_WORDS:
            new = rng.choice([n for n in NUMBER_WORDS if n != w])
        elif _INT.match(t.text) and ent.label_ != "DATE":
            n = int(t.text.replace(",", ""))
            if n < 3:
                return None
            m = rng.choice([n * 2, n * 3, max(2, n // 2) if n // 2 != n else n + 5, n + max(1, n // 4)])
            if m == n:
                return None
            new = f"{m:,}" if "," in t.text else str(m)
        elif ent.label_ == "DATE" and re.match(r"^[0-9]{1,2}$", t.text) and k + 1 < len(toks):
            d = int(t.text)
            new = str(d + 1 if d < 28 else d - 1)
        else:
            continue
        return " ".join([x.text for x in toks[:k]] + [new] + [x.text for x in toks[k + 1:]])
    return None


def _numbers(sent, rng: random.Random) -> Iterator[tuple[str, str, str, str]]:
    for ent in sent.ents:
        if ent.label_ not in NUMBER_TYPES:
            continue
        new = _changed_value(ent, rng)
        if new is None or new == ent.text:
            continue
        # the clause holding the value: walk up to the verb, keep the child on the path
        tok, path = ent.root, []
        while tok.head.i != tok.i and tok.pos_ not in ("VERB", "AUX"):
            path.append(tok)
            tok = tok.head
        verb = tok
        subj = _child(verb, "nsubj", "nsubjpass")
        if verb.pos_ not in ("VERB", "AUX") or subj is None or not _ok_np(subj):
            continue
        keep = [path[-1]] if path else []
        core = _core_tokens(verb, keep)
        if not all(any(t.i == e.i for t in core) for e in ent):
            continue
        ids = {t.i for t in ent}
        right = _render(core)
        wrong = _render(core, {ent.root.i: (new, ids)})
        if right != wrong:
            yield "number", _sentence(right), _sentence(wrong), sent.text
        return


# ---------------------------------------------------------------- driver

LABEL_OF_WRONG = {"swap": "neutral", "passive": "neutral", "recombine": "neutral", "entity": "neutral",
                  "number": "contradiction"}


def twins_of(text: str, rng: random.Random, source: str = "", doc=None, kinds: Sequence[str] = KINDS,
             prefix: str = "") -> list[Twin]:
    """Every twin pair one passage yields (a passage: one or a few sentences of one document)."""
    doc = doc if doc is not None else nlp()(text)
    out, seen = [], set()
    for si, sent in enumerate(doc.sents):
        if not _plain(sent):
            continue
        found = []
        if "swap" in kinds or "passive" in kinds:
            found += list(_swaps(sent, prefix))
        if "recombine" in kinds:
            found += list(_recombine(sent, prefix))
        if "entity" in kinds:
            found += list(_entities(doc, sent, rng))
        if "number" in kinds:
            found += list(_numbers(sent, rng))
        for kind, right, wrong, evidence in found:
            if kind not in kinds or (kind, right, wrong) in seen or right == wrong or len(right.split()) < 3:
                continue
            seen.add((kind, right, wrong))
            gid = f"{prefix}{si}-{len(out) // 2}"
            out.append(Twin(evidence, right, "entailment", kind, gid, "entailed", source))
            out.append(Twin(evidence, wrong, LABEL_OF_WRONG[kind], kind, gid, "wrong", source))
    return out


def generate(texts: Sequence[tuple[str, str]], seed: int = 0, per_kind: int | None = None,
             kinds: Sequence[str] = KINDS, batch: int = 64) -> list[Twin]:
    """Twins from (source id, text) pairs, deterministic for a seed; at most per_kind groups per kind
    (chosen by the seeded shuffle of all groups found)."""
    rng = random.Random(seed)
    texts = sorted(texts)
    all_twins: list[Twin] = []
    for (src, text), doc in zip(texts, nlp().pipe([t for _, t in texts], batch_size=batch)):
        all_twins += twins_of(text, rng, src, doc=doc, kinds=kinds, prefix=f"{src}#")
    if per_kind is None:
        return all_twins
    groups: dict[str, list[list[Twin]]] = {}
    by_gid: dict[str, list[Twin]] = {}
    for t in all_twins:
        by_gid.setdefault(t.group, []).append(t)
    for gid, ts in by_gid.items():
        groups.setdefault(ts[0].kind, []).append(ts)
    out = []
    for kind in kinds:
        gs = groups.get(kind, [])
        random.Random(f"{seed}-{kind}").shuffle(gs)
        for ts in gs[:per_kind]:
            out.extend(ts)
    return out


WIKI_SOURCES = ("vitaminc+fever", "semi_automatic_wiki", "climate_fever", "foolmetwice", "wice")


def training_texts(root: str = "/work/shared/data", limit: int | None = None, wiki_only: bool = False,
                   sources: Sequence[str] | None = None) -> list[tuple[str, str]]:
    """(source, premise) of the verifier's training pairs — the training side of lab/nli/data.py's
    stable split only (its validation pairs, and every evaluation set, are never used) — unique,
    in file order; `wiki_only`: the Wikipedia-text sources alone."""
    from lab.nli.data import TRAIN_SOURCES, is_validation

    want = set(sources or (WIKI_SOURCES if wiki_only else [s.name for s in TRAIN_SOURCES]))
    out, seen = [], set()
    for src in TRAIN_SOURCES:
        if src.name not in want:
            continue
        for pair in src.reader(__import__("pathlib").Path(root)):
            if pair is None or is_validation(pair) or pair.premise in seen:
                continue
            seen.add(pair.premise)
            out.append((pair.source, pair.premise))
            if limit is not None and len(out) >= limit:
                return out
    return out


CONTRASTIVE_SOURCES = ("vitaminc+fever", "semi_automatic_wiki", "climate_fever", "lingnli", "cad_snli", "conjnli")


def training_passages(root: str = "/work/shared/data", seed: int = 13, exclude: set[str] | None = None,
                      sources: Sequence[str] = CONTRASTIVE_SOURCES) -> list[tuple[str, str]]:
    """Texts to build training twins from: premises of the training-side NLI pairs (lab/nli/data.py;
    never its validation split, never an evaluation set — FoolMeTwice and WiCE are the yardstick's
    and are left out), and VitaminC evidence sentences grouped by page into passages of up to 3
    sentences (so that an entity can be replaced by another from the same passage), pages of the
    silent probe left out. `exclude`: lower-cased sentences to leave out (the stress set's)."""
    from collections import defaultdict

    from lab.nli.hard_pairs import is_probe_page, page_claims

    exclude = exclude or set()
    keep = lambda t: not any(s.strip().rstrip(".").lower() in exclude for s in t.split(". "))  # noqa: E731
    texts = [(s, t) for s, t in training_texts(root, sources=sources) if keep(t)]
    pages: dict[str, list[str]] = defaultdict(list)
    for r in page_claims(root):
        if is_probe_page(r.page) or r.evidence in pages[r.page] or not keep(r.evidence):
            continue
        from lab.nli.data import NLIPair, is_validation

        if is_validation(NLIPair(r.evidence, r.claim, r.label, r.source)):
            continue
        pages[r.page].append(r.evidence)
    rng = random.Random(seed)
    for page, sents in sorted(pages.items()):
        if len(sents) >= 2:
            rng.shuffle(sents)
            texts.append(("vitaminc_page", " ".join(sents[:3])))
    return texts


def training_twins(root: str = "/work/shared/data", n_groups: int = 1500, seed: int = 13,
                   exclude: set[str] | None = None, parse_limit: int = 12000) -> list[Twin]:
    """Up to n_groups twin groups for training, balanced over kinds (entity twins from page passages),
    deterministic for a seed."""
    rng = random.Random(seed)
    texts = training_passages(root, seed, exclude)
    rng.shuffle(texts)
    texts = [(f"{s}:{i}", t) for i, (s, t) in enumerate(texts[:parse_limit]) if 20 <= len(t) <= 600]
    per_kind = n_groups // len(KINDS)
    return generate(texts, seed=seed, per_kind=per_kind)


def write_training_file(out: str, twins: Sequence[Twin], replay: Sequence, seed: int = 13) -> dict:
    """Twins (as NLI pairs, source contrastive_<kind>) + replay pairs, shuffled, as lab/nli/hard_pairs'
    JSONL (what `nli train --pairs-file` reads)."""
    from collections import Counter

    from lab.nli.data import NLIPair
    from lab.nli.hard_pairs import write_pairs
    from lab.nli.labels import label_id

    pairs = [NLIPair(t.evidence, t.claim, label_id(t.label), f"contrastive_{t.kind}") for t in twins] + list(replay)
    random.Random(seed).shuffle(pairs)
    write_pairs(out, pairs)
    return {"pairs": len(pairs), "by_source": dict(sorted(Counter(p.source for p in pairs).items())),
            "by_label": dict(sorted(Counter(p.label for p in pairs).items()))}


def stress_sentences() -> set[str]:
    """Lower-cased sentences of the starter knowledge base and of the stress probe's pairs: the
    training twins never use them (the probe's sources stay unseen)."""
    import json
    from pathlib import Path

    from schemas.settings import load_settings
    from workers.retrieval.starter import starter_records

    out = set()
    texts = [r["text"] for r in starter_records(load_settings().retrieval.starter_dir)]
    probes = Path(__file__).resolve().parents[1] / "probes"
    for name in ("stress_pairs.jsonl", "stress_examples.jsonl"):
        texts += [json.loads(ln)["evidence"] for ln in (probes / name).read_text().splitlines() if ln.strip()]
    for t in texts:
        out.update(s.strip().rstrip(".").lower() for s in t.split(". "))
    return out


def main(argv: Sequence[str] | None = None) -> int:
    """`python -m lab.nli.contrastive --out FILE`: the training file of the relation-sensitive
    fine-tune (twins + a replay of the v3 mix), then `dialcheck nli train --pairs-file FILE`."""
    import argparse
    import json

    from lab.nli.hard_pairs import read_pairs
    from lab.nli.pair_sets import build_training_file

    ap = argparse.ArgumentParser(description=main.__doc__.split("\n")[0])
    ap.add_argument("--out", required=True, help="the pairs JSONL to write")
    ap.add_argument("--data-dir", default="/work/shared/data")
    ap.add_argument("--groups", type=int, default=1500, help="twin groups (two pairs each), balanced over kinds")
    ap.add_argument("--parse-limit", type=int, default=9000, help="training texts parsed")
    ap.add_argument("--same", type=int, default=500, help="replay: hard same-page NEI pairs")
    ap.add_argument("--nearest", type=int, default=450, help="replay: hard nearest-page NEI pairs")
    ap.add_argument("--dialogue", type=int, default=450, help="replay: dialogue-style pairs")
    ap.add_argument("--replay", type=int, default=1600, help="replay: general training pairs")
    ap.add_argument("--seed", type=int, default=13)
    args = ap.parse_args(argv)
    twins = training_twins(args.data_dir, args.groups, args.seed, stress_sentences(), args.parse_limit)
    replay_file = args.out + ".replay"
    build_training_file(args.data_dir, replay_file, None, n_same=args.same, n_nearest=args.nearest,
                        n_dialogue=args.dialogue, n_replay=args.replay, seed=29)
    print(json.dumps(write_training_file(args.out, twins, read_pairs(replay_file), seed=args.seed), indent=1))
    return 0


if __name__ == "__main__":
    import sys

    sys.exit(main())
