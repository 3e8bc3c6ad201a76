"""The structural check: does the evidence relate the claim's words the way the claim does?

Why: the verifier entails a claim whose words all occur in the evidence, whatever their roles ("The
club fined the committee" from "The committee fined the club"; "Kyoto is the capital of Japan" from
a sentence where Kyoto was the capital and Tokyo is the capital of Japan): the lexical-overlap
heuristic (McCoy et al. 2019, HANS; docs/verifier-recipes.md §8). A question that needs no model:
each content edge of the claim's dependency parse must exist between the aligned words in the
evidence's parse.

Edges (spaCy's English parse, the model the surfaces already load):
- agent(verb, noun): the active subject, the passive "by" object, the noun a present participle modifies;
- patient(verb, noun): the object, the passive subject, the noun a past participle modifies;
- attached(a, b), undirected: a copula's subject and predicate ("Kyoto is the capital"), apposition,
  an adjective or compound on its noun, a preposition's object on its head;
- of(a, b): "a of b" and "b's a" (held by any attachment of the two, but a pronoun stands in for b
  only as "its a"); a noun compound shares its head's "of" ("the capital city of b": the capital of b).
Relative pronouns stand for the noun their clause modifies, a conjunct shares its conjunct's edge,
an infinitive ("decided to fine") its governor's subject; another pronoun in the evidence ("its
capital", "he died in") may stand for any noun in its place.

Precision first, like the off-topic REFUTES guard: an edge is asked only when both its words occur
in the evidence (the same lemma); a paraphrase with other words is the NLI model's job and costs no
badge here. The check fails when no single reading of the evidence (each claim word aligned to one
evidence word) holds all those edges: the words are there, their relation is not.

Two strengths of one test: the broad finding (`StructureCheck.failed`) is the display's veto and the
verdict's mismatch; its precise subset (`StructureCheck.precise`: no symmetric verb, no description
standing for a name, no part of a name, ...) is what the decision's `relation_clash` relabels. The
veto hides more; the label changes only where the parse is least likely to be wrong."""
from __future__ import annotations

from dataclasses import dataclass, field, replace
from enum import StrEnum
from functools import lru_cache

CONTENT = frozenset({"NOUN", "PROPN", "VERB", "ADJ", "NUM"})
RELATIVE = frozenset({"who", "whom", "which", "that", "whose"})
SUBJECTS = frozenset({"nsubj", "csubj"})
PREDICATES = frozenset({"attr", "acomp", "oprd"})
ATTACHED = frozenset({"amod", "compound", "nmod", "nummod"})
MODIFIERS = frozenset({"amod", "compound", "nmod", "nummod", "flat", "poss"})
CLOSE = frozenset({"amod", "compound", "nmod", "flat", "appos"})  # a word this close to a noun is not another one
PLACES = frozenset({"GPE", "LOC"})  # "Phoenix, Arizona": the state is where, not what, Phoenix is
# verbs whose subject and object may be exchanged without changing the fact ("Panama borders
# Colombia" / "bordered by Costa Rica"): for the precise test another word in a role of theirs is no rival
SYMMETRIC = frozenset({"meet", "marry", "border", "neighbor", "neighbour", "adjoin", "resemble", "match", "equal",
                       "touch", "divorce", "date", "fight", "battle", "befriend", "collaborate"})


class Role(StrEnum):
    """A content edge's relation: the verdict's structure mismatch `type`."""
    AGENT = "agent"  # who does it: the active subject, the passive "by" object
    PATIENT = "patient"  # to whom or what: the object, the passive subject
    THEME = "theme"  # an intransitive verb's subject, held by either of the two above
    ATTACH = "attached"  # an adjective, compound or modifier on its noun
    OF = "of"  # "a of b", "b's a"
    PREP = "prep"  # a preposition's object on its head
    BE = "be"  # a copula's subject and predicate, an apposition


class RivalKind(StrEnum):
    """How the evidence gave the claim's relation to another word (`StructureCheck.rival`)."""
    REPLACED = "replaced"  # a named participant replaced, the rest of the statement kept
    AGENT = "agent"  # the verb's agent is someone else
    THEME = "theme"  # "the Orinoco flows through Venezuela"
    SWAPPED = "swapped"  # the same two words, the roles swapped
    PATIENT = "patient"  # "herbs are dried" for "spices are dried"
    PREDICATE = "predicate"  # the predicate said of another ("Tokyo is the capital")
    OF = "of"  # "the capital of X" for "the capital of Y"
    PLACE = "place"  # "died in Princeton" for "born in Princeton"
    POSSESSED = "possessed"  # broad only: the name owns another name in a window silent on the relation


AGENT, PATIENT, ATTACH, OF, PREP, THEME, BE = Role.AGENT, Role.PATIENT, Role.ATTACH, Role.OF, Role.PREP, Role.THEME, Role.BE
ATTACHMENTS = frozenset({ATTACH, OF, PREP, BE})  # held by one another: a parser's choice among them is no evidence
ROLES_HELD = {AGENT: {AGENT, THEME}, PATIENT: {PATIENT, THEME}, THEME: {AGENT, PATIENT, THEME}}


@dataclass(frozen=True)
class Edge:
    role: Role
    head: str  # the words as written (what the verdict names)
    dep: str
    kind: RivalKind | str = ""  # an evidence edge that rivals the claim's: how (`_competitor`); "" for a claim edge

    def text(self) -> str:
        return {AGENT: f"{self.dep} → {self.head} (who does it)", PATIENT: f"{self.head} → {self.dep} (to whom/what)",
                THEME: f"{self.dep} → {self.head}", ATTACH: f"{self.head} — {self.dep}", OF: f"{self.head} of {self.dep}",
                PREP: f"{self.head} — {self.dep}", BE: f"{self.dep} is {self.head}"}[self.role]


@dataclass(frozen=True)
class StructureCheck:
    """The claim's edges asked (both words in the evidence) and the first one no reading holds (None: all hold)."""
    asked: int
    failed: Edge | None
    other: Edge | None = None  # the evidence edge that gives the failed relation to another word (`_competitor`)
    # the finding under the precise test as well (`_competitor(precise=True)`: no symmetric verb, no part
    # of the claim word's own name, no name read as a relation, no place apposition): what the label may
    # act on (guarded.py `relation_clash`); None when only the broad test, the display's veto, finds one
    precise: "StructureCheck | None" = None

    @property
    def agreed(self) -> bool:
        return self.failed is None

    @property
    def evidence(self) -> str:
        """How the evidence relates those words (e.g. "committee → fine (who does it)"); "" when agreed."""
        return self.other.text() if self.other is not None else ""

    @property
    def rival(self) -> str:
        """How the relation went to another word (a `RivalKind`); "" when none."""
        return self.other.kind if self.other is not None else ""


def _word(tok) -> str:
    return tok.lemma_.lower() if tok.pos_ != "PROPN" else tok.lower_


def _resolve(tok):
    """A relative pronoun → the noun its clause modifies ("the senator who met" → senator)."""
    if tok.lower_ in RELATIVE and tok.head.dep_ in ("relcl", "acl") and tok.head.head is not tok.head:
        noun = tok.head.head
        if noun.dep_ == "attr":  # "Ramón Tapia was a boxer who won": the one who won is Ramón Tapia
            subj = next((c for c in noun.head.children if c.dep_ in SUBJECTS), None)
            return subj if subj is not None else noun
        return noun
    return tok


def _copular(tok) -> bool:
    return any(c.dep_ in PREDICATES for c in tok.children)


def _subject(verb):
    s = next((c for c in verb.children if c.dep_ in SUBJECTS | {"nsubjpass"}), None)
    if s is None and verb.dep_ in ("xcomp", "conj") and verb.head.pos_ in ("VERB", "AUX"):
        return _subject(verb.head) if verb.dep_ == "xcomp" or verb.head.pos_ == verb.pos_ else None
    return s


def edges(doc) -> list[tuple[Role, object, object]]:
    """(role, head token, dependent token) of every content edge of a parse."""
    out: list[tuple[Role, object, object]] = []

    def add(role: Role, head, dep):
        if head is None or dep is None:
            return
        head, dep = _resolve(head), _resolve(dep)
        if head.i == dep.i or head.pos_ not in CONTENT or dep.pos_ not in CONTENT | {"PRON"}:
            return
        for conjunct in [dep, *dep.conjuncts]:
            if conjunct.pos_ in CONTENT or conjunct.pos_ == "PRON":
                out.append((role, head, conjunct))
                # a name's other parts stand for it ("Ramón Tapia Zapata won": Tapia won)
                out.extend((role, head, part) for part in conjunct.children
                           if conjunct.pos_ == "PROPN" and part.pos_ == "PROPN" and part.dep_ in ("compound", "flat"))

    for tok in doc:
        dep, head = tok.dep_, tok.head
        if dep in SUBJECTS:
            _subject_edges(tok, add)
        elif dep == "nsubjpass":
            add(PATIENT, head, tok)
        elif dep in ("dobj", "dative"):
            add(PATIENT, head, tok)
        elif dep == "pobj" and head.dep_ in ("prep", "agent"):
            gov = head.head
            if head.dep_ == "agent":
                add(AGENT, gov, tok)
            elif gov.pos_ == "AUX":
                continue  # handled from the subject
            else:
                add(OF if head.lower_ == "of" else PREP, gov, tok)
                if head.lower_ == "of" and gov.pos_ == "NOUN":  # "the capital city of X": the capital of X
                    for c in (c for c in gov.children if c.dep_ == "compound" and c.pos_ == "NOUN"):
                        add(OF, c, tok)
        elif dep == "poss":  # "Japan's capital" = "the capital of Japan"
            add(OF, head, tok)
        elif dep == "appos":  # "the capital, Berlin,": Berlin is the capital
            add(BE, head, tok)
        elif dep in ATTACHED:
            add(ATTACH, head, tok)
        elif dep == "acl" and tok.pos_ == "VERB":  # "the tower designed by Eiffel", "the man running it"
            add(PATIENT if tok.tag_ == "VBN" else AGENT, tok, head)
    return out


def _subject_edges(tok, add) -> None:
    """The edges of a subject: of a copula's predicate, of a preposition after "is", of its verbs."""
    head = tok.head
    if _copular(head):  # "Kyoto is the capital", "Tokyo became the capital"
        for pred in (c for c in head.children if c.dep_ in PREDICATES):
            add(BE, pred, tok)
    elif head.pos_ == "AUX":  # "Berlin is in Germany": the subject is what the preposition attaches to
        for prep in (c for c in head.children if c.dep_ == "prep"):
            for obj in (c for c in prep.children if c.dep_ == "pobj"):
                add(PREP, tok, obj)
    else:
        for verb in [head, *(c for c in head.conjuncts if c.pos_ == head.pos_ and _subject(c) is None)]:
            # an intransitive verb's subject may be its transitive object ("the audience increased" /
            # "radio increased the audience"): a theme, held by either role
            transitive = any(c.dep_ in ("dobj", "dative", "ccomp", "xcomp") for c in verb.children)
            add(AGENT if transitive else THEME, verb, tok)
        for x in (c for c in head.children if c.dep_ == "xcomp" and _subject(c) is tok):
            add(AGENT, x, tok)


@lru_cache(maxsize=16384)
def _claim_edges(text: str):
    from ..surfaces.pronouns import parse

    return edges(parse(text))


@dataclass
class EvidenceGraph:
    """The evidence texts' parses read together: their content edges, each content word's tokens,
    the word pairs that share a sentence. A token is (text number, token)."""
    relation: dict = field(default_factory=dict)  # (head id, dep id) → the first role between them
    roles: dict = field(default_factory=dict)  # (head id, dep id) → every role between them
    pronoun_roles: dict = field(default_factory=dict)  # head id → roles a pronoun takes on it ("its capital")
    edges: list = field(default_factory=list)  # (role, (k, head token), (k, dep token)), pronouns left out
    by_word: dict = field(default_factory=dict)  # a content word → its tokens
    together: set = field(default_factory=set)  # (word, word) stated in one sentence
    near: dict = field(default_factory=dict)  # token id → its neighbours by any edge

    @classmethod
    def of(cls, texts: tuple[str, ...]) -> "EvidenceGraph":
        from ..surfaces.pronouns import parse

        graph = cls()
        for k, doc in enumerate(parse(t) for t in texts if t.strip()):
            graph._add(k, doc)
        for head_id, dep_id in graph.relation:
            graph.near.setdefault(head_id, set()).add(dep_id)
            graph.near.setdefault(dep_id, set()).add(head_id)
        return graph

    def _add(self, k: int, doc) -> None:
        for role, head, dep in edges(doc):
            head_id, dep_id = (k, head.i), (k, dep.i)
            if dep.pos_ == "PRON":  # "its capital", "he died in ...": the pronoun may stand for any noun there
                self.pronoun_roles.setdefault(head_id, set()).add(role)
                continue
            self.relation.setdefault((head_id, dep_id), role)
            self.roles.setdefault((head_id, dep_id), set()).add(role)
            self.edges.append((role, (k, head), (k, dep)))
        for tok in doc:
            if tok.pos_ in CONTENT:
                self.by_word.setdefault(_word(tok), []).append((k, tok))
        # only edges whose two words occur together in one evidence sentence are asked: words the
        # evidence states apart are not a relation it denies
        for sent in doc.sents:
            words = {_word(t) for t in sent if t.pos_ in CONTENT}
            self.together |= {(a, b) for a in words for b in words}

    def asks(self, role: Role, head, dep) -> bool:
        """Is this claim edge asked: its words in one evidence sentence, or a named participant's
        anywhere ("The legislative capital is Eswatini": a page names its subject in one sentence and
        says what else is the capital in another)?"""
        return (_word(head), _word(dep)) in self.together \
            or (_named(role, head, dep) and _word(head) in self.by_word and _word(dep) in self.by_word)

    def holds(self, role: Role, a, b) -> bool:
        """Does the evidence relate these two aligned tokens by this role?"""
        (ka, tok_a), (kb, tok_b) = a, b
        if ka != kb:
            return False
        ia, ib = (ka, tok_a.i), (ka, tok_b.i)
        if role in ATTACHMENTS:  # undirected, and "X of Y" may be read as any attachment ("Oxford University")
            if (ia, ib) in self.relation or (ib, ia) in self.relation:
                return True
            if tok_a.head.i == tok_b.head.i and tok_a.dep_ in MODIFIERS and tok_b.dep_ in MODIFIERS:
                return True  # two modifiers of one noun: "Ramón Tapia Zapata", "the dark pigment eumelanin"
            if role == PREP and (any(tok_b.dep_ == "pobj" and (m, ib) in self.relation for m in self.near.get(ia, ()))
                                 or any(tok_a.dep_ == "pobj" and (m, ia) in self.relation for m in self.near.get(ib, ()))):
                return True  # a preposition's attachment is the parser's guess: to the verb or its object
        elif ROLES_HELD.get(role, {role}) & self.roles.get((ia, ib), set()):
            return True
        return bool(ROLES_HELD.get(role, {role}) & self.pronoun_roles.get(ia, set()))  # "its capital": a pronoun there

    def consistent(self, claim_edges: list) -> bool:
        """Is there one reading of the evidence (each claim word aligned to one evidence token of its
        word) that holds all these claim edges? A backtracking search over the alignments."""
        order = list(dict.fromkeys(t.i for _, h, d in claim_edges for t in (h, d)))
        token_of = {t.i: t for _, h, d in claim_edges for t in (h, d)}
        aligned: dict[int, tuple] = {}

        def fits(i: int) -> bool:
            return all(self.holds(r, aligned[h.i], aligned[d.i]) for r, h, d in claim_edges
                       if h.i in aligned and d.i in aligned and i in (h.i, d.i))

        def search(n: int) -> bool:
            if n == len(order):
                return True
            i = order[n]
            for candidate in self.by_word[_word(token_of[i])]:
                aligned[i] = candidate
                if fits(i) and search(n + 1):
                    return True
            aligned.pop(i, None)
            return False

        return search(0)


def check(claim: str, evidence: tuple[str, ...]) -> StructureCheck:
    """The claim's content edges against the evidence texts (each parsed on its own, read together).

    Fails only when (1) no reading of the evidence holds all the edges it is asked, and (2) the
    evidence gives one of those relations to another word: the verb's agent or object is someone
    else ("The committee fined the club" for "The club fined the committee"), the predicate is said
    of another ("Tokyo is the capital" for "Kyoto is the capital"), the noun is "of" something else,
    or the place or time is the verb's sibling's ("died in Princeton" for "born in Princeton").
    Without (2) the evidence relates the words in a way the parse does not show (a nominalisation, a
    modifier chain, a preposition attached elsewhere): measured on the yardstick's right badges,
    that is mostly the parser, not the claim."""
    claim_edges = _claim_edges(claim)
    if not claim_edges:
        return StructureCheck(0, None)
    graph = EvidenceGraph.of(evidence)
    asked = [(role, head, dep) for role, head, dep in claim_edges if graph.asks(role, head, dep)]
    if not asked:
        return _held(0, claim_edges, graph.edges, graph.by_word)
    if graph.consistent(asked):
        return _held(len(asked), claim_edges, graph.edges, graph.by_word)
    found = None  # the broad finding: the first edge with a rival (what the display's veto and the verdict read)
    for role, head, dep in asked:
        other = _rival(role, head, dep, claim_edges, graph, precise=False)
        if other is None:
            continue
        if found is None:
            found = StructureCheck(len(asked), Edge(role, head.text, dep.text), other)
        sharp = _rival(role, head, dep, claim_edges, graph, precise=True)  # asked only where the broad test found one
        if sharp is not None:
            return replace(found, precise=StructureCheck(len(asked), Edge(role, head.text, dep.text), sharp))
    return found or StructureCheck(len(asked), None)  # None: not held as parsed, but given to nothing else


def _rival(role: Role, head, dep, claim_edges: list, graph: EvidenceGraph, precise: bool) -> Edge | None:
    """The evidence edge that gives this claim edge's relation to another word (`_competitor`), with
    the precise test's own exclusions."""
    claim_args = {_word(x) for _, h, x in claim_edges if h.i == head.i and x.i != dep.i}
    if precise and role == BE and (_place_appos(head, dep) or dep.pos_ not in ("NOUN", "PROPN", "PRON")):
        return None  # a place named beside its place; a number or a word read as a subject
    if precise and role == PREP and graph.consistent([(role, head, dep)]):
        return None  # the evidence states this place itself ("transferred to Kent State ... graduated from Kent State")
    other = _competitor(role, head, dep, graph.edges, claim_args, precise)
    if other is None and role == BE and head.pos_ == "PROPN" and dep.pos_ == "NOUN" and dep.dep_ in SUBJECTS \
            and not _indefinite(dep):  # "the capital is West Africa": the evidence names Porto-Novo the capital
        other = _competitor(BE, dep, head, graph.edges, claim_args, precise)
    return other


def _held(asked: int, claim_edges: list, evidence_edges: list, by_word: dict) -> StructureCheck:
    """The edges asked hold (or none could be asked): agreed, unless the claim's name is the owner of
    another name there (`_owned_elsewhere`, which asks one relation of its own)."""
    owned = _owned_elsewhere(claim_edges, evidence_edges, by_word)
    return StructureCheck(max(asked, 1), *owned) if owned else StructureCheck(asked, None)


def _owned_elsewhere(claim_edges: list, evidence_edges: list, by_word: dict) -> tuple[Edge, Edge] | None:
    """"George Orwell wrote Brave New World" against "… George Orwell's Nineteen Eighty-Four": the claim
    relates a name to another name by a verb the evidence does not have, and the evidence has the
    first name only as the possessor of a third name, never beside the claim's. A broad finding (the
    display's veto; `precise` stays None, so the label is untouched): the window is silent on the
    claim's relation and gives the name's work, team or title to another."""
    for role, verb, doer in claim_edges:
        if role not in (AGENT, THEME) or verb.pos_ != "VERB" or _word(verb) in by_word or doer.pos_ != "PROPN":
            continue
        objects = [x for r, v, x in claim_edges if v.i == verb.i and r == PATIENT and x.pos_ == "PROPN"]
        if not objects:
            continue
        theirs = set().union(*(_name(x) for x in objects))
        mine = _name(doer)
        related = any(_word(a) in mine and _word(b) in theirs or _word(b) in mine and _word(a) in theirs
                      for _, (_, a), (_, b) in evidence_edges)
        for r, (_, owned), (_, owner) in evidence_edges:
            if r == OF and owner.dep_ == "poss" and _word(owner) in mine and owned.pos_ == "PROPN" \
                    and not related and not (_name(owned) & (theirs | mine)):
                return (Edge(role, verb.text, doer.text),
                        Edge(OF, _name_text(owned), _name_text(owner), RivalKind.POSSESSED))
    return None


def _name_text(tok) -> str:
    """A name as written, all its parts (as `_name` reads them): "Nineteen Eighty-Four" for "Four"."""
    top = _name_head(tok)
    parts = [c.i for c in top.children if c.dep_ in ("compound", "flat") and c.pos_ == "PROPN"]
    return tok.doc[min([top.i, *parts]):top.i + 1].text


def _verbal(tok) -> bool:
    """A verb, or a noun standing in for an elided one ("the Danube flows into X, and the Rhine into Y")."""
    return tok.pos_ in ("VERB", "AUX") or (tok.dep_ == "conj" and tok.head.pos_ == "VERB")


def _has_prep(verb, evidence_edges: list) -> bool:
    """Has this verb a place or time of its own ("born in Ulm and died in Princeton")?"""
    return any(r == PREP and head.i == verb.i and head.doc is verb.doc for r, (_, head), _ in evidence_edges)


def _indefinite(tok) -> bool:
    """"a sport", "a group of districts": one of many, not an identity."""
    return any(c.dep_ == "det" and c.lower_ in ("a", "an") for c in tok.children)


def _named(role: Role, head, dep) -> bool:
    """A relation with a named participant: asked wherever the evidence has both words, not only in
    one sentence (a page names an entity in one sentence and says the same of another in the next)."""
    return (dep.pos_ == "PROPN" and role in (BE, AGENT, THEME, PATIENT)) or (role == BE and head.pos_ == "PROPN")


def _place_appos(head, dep) -> bool:
    """"Phoenix, Arizona": a place named beside its place, not an identity."""
    return dep.dep_ == "appos" and dep.pos_ == head.pos_ == "PROPN" and dep.ent_type_ in PLACES


def _name_head(tok):
    """The head of the name a token is part of ("Anthony" of "Anthony Quinn": Quinn), else the token."""
    return tok.head if tok.dep_ in ("compound", "flat") and tok.pos_ == "PROPN" and tok.head.pos_ == "PROPN" else tok


def _name_dep(tok) -> str:
    """The dependency of the name a token is part of ("Summer" of "the Summer Olympics were created": nsubjpass)."""
    return _name_head(tok).dep_


def _name(tok) -> set[str]:
    """The words of the name a token is part of ("Anthony Quinn": anthony, quinn)."""
    top = _name_head(tok)
    return {_word(top)} | {_word(c) for c in top.children if c.dep_ in ("compound", "flat") and c.pos_ == "PROPN"}


def _competitor(role: Role, head, dep, evidence_edges: list, claim_args: frozenset | set = frozenset(),
                precise: bool = False) -> Edge | None:
    """An evidence edge that gives the claim edge's relation to another word, or None.

    Asked narrowly (measured on the yardstick's right badges, the loose versions vetoed more right
    badges than wrong ones), and only in an evidence sentence that names the claim's word too: a
    verb's agent, a passive verb's subject or an intransitive verb's named subject that is someone
    else; a predicate said of another ("Tokyo is the capital"); a named "of" complement or a named
    place of another verb; the same two words with the roles swapped. Another
    word the evidence says is the claim's word ("GNR ... is a band ... formed", "a type of dance
    that originated") or a part of its name is no other.

    `precise` asks less, for the label (measured on the yardstick's right SUPPORTS, docs/stress.md):
    no rival to a symmetric verb's participant, nor a part of the claim word's own name, nor a word
    that is only part of the claim's head's name ("the American Falls"), nor the rival's own "of"
    complement, nor a word that is only part of a longer name there; "of" only on a common noun
    ("Lamb of God" is a name); no place apposition ("Phoenix, Arizona") as a rival predicate."""
    if precise and role in (AGENT, PATIENT, THEME) and _word(head) in SYMMETRIC:
        return None
    return _Competition(role, head, dep, evidence_edges, frozenset(claim_args), precise).first()


class _Competition:
    """One claim edge (role, head, dep) against the evidence's edges: `first` is the first evidence
    edge that gives its relation to another word, each `RivalKind` asked by a method of its own."""

    def __init__(self, role: Role, head, dep, evidence_edges: list, claim_args: frozenset, precise: bool):
        self.role, self.head, self.dep, self.precise = role, head, dep, precise
        self.evidence_edges, self.claim_args = evidence_edges, claim_args
        self.head_word, self.dep_word = _word(head), _word(dep)
        self.same = self._same_as_dep()
        self.named = role == BE and dep.pos_ == "PROPN"  # a named subject: a named rival anywhere in the evidence

    def _same_as_dep(self) -> set[str]:
        """Words the evidence says are the claim's dependent word (or a part of its name, precise): no rival."""
        dep_word, edges_ = self.dep_word, self.evidence_edges
        same = (_name(self.dep) if self.precise else {dep_word}) \
            | {_word(y) for r, (_, x), (_, y) in edges_ if r == BE and _word(x) == dep_word} \
            | {_word(x) for r, (_, x), (_, y) in edges_ if r == BE and _word(y) == dep_word}
        return same | {_word(y) for r, (_, x), (_, y) in edges_ if r in (OF, ATTACH) and _word(x) in same}  # "a type of dance"

    def first(self) -> Edge | None:
        for rel, ev_head, ev_dep in self.evidence_edges:
            ev_head, ev_dep = ev_head[1], ev_dep[1]
            if self.precise and rel == BE and (_place_appos(ev_head, ev_dep) or _place_appos(ev_dep, ev_head)):
                continue
            found = self.replaced(rel, ev_head, ev_dep)
            if found is not None:
                return found
            if not self.beside(ev_head) and not (self.named and rel == BE):
                continue
            for kind in (self.agent, self.theme, self.swapped, self.patient, self.predicate, self.of, self.place):
                found = kind(rel, ev_head, ev_dep)
                if found is not None:
                    return found
        return None

    def other(self, tok, named: bool = False) -> bool:
        """Not the claim's word, nor one close to it: a part of its name, its conjunct, the noun it
        modifies ("gray hair", "bowl game", "Ramón Tapia Zapata", "the government of Iran")."""
        if _word(tok) in self.same or _word(tok) == self.head_word or tok.pos_ not in ("NOUN", "PROPN"):
            return False
        if named and tok.pos_ != "PROPN":
            return False
        part = tok.dep_ in ("compound", "flat") and tok.pos_ == tok.head.pos_ == "PROPN"
        # ... but "the Cenozoic Era" for the claim's common noun "era": a name of that kind names another one
        kind = part and _word(tok.head) == self.head_word and self.head.pos_ == "NOUN"
        if self.precise and not kind and tok.dep_ in CLOSE and _word(tok.head) == self.head_word \
                and (tok.dep_ != "appos" or tok.head.pos_ == "PROPN"):
            return False  # a part of the name the relation is about (not "the capital, Berlin,": that names another)
        if self.precise and not kind and part:
            return False  # a part of a longer name ("American" of "the North American Hockey League")
        near = [*tok.children, *tok.conjuncts, tok.head, *tok.head.children]
        if self.precise:  # ... and the rival's own "of" complement ("the government of Iran" for Iran)
            near += [g for c in tok.children if c.dep_ == "prep" and c.lower_ == "of" for g in c.children]
        return not any(_word(t) == self.dep_word and (t in tok.conjuncts or t.dep_ in CLOSE | {"pobj", "poss"}
                                                      or tok.dep_ in CLOSE) for t in near)

    def beside(self, tok) -> bool:
        """Is the claim's word in this evidence sentence too (the rival and the word side by side)?"""
        return any(_word(t) == self.dep_word for t in tok.sent)

    def relates(self, ev_head, word: str) -> bool:
        """Does the evidence's verb relate this word already, in any role (then nothing was replaced)?"""
        return any(_word(y) == word for _, (_, x), (_, y) in self.evidence_edges if x.i == ev_head.i and x.doc is ev_head.doc)

    def shares(self, ev_head, ev_dep) -> bool:
        """Does the evidence's verb relate another of the claim verb's words too ("Guadalajara has the
        highest density" for "Jalisco has the highest density")? Then it is the same statement."""
        return any(_word(y) in self.claim_args for _, (_, x), (_, y) in self.evidence_edges
                   if x.i == ev_head.i and x.doc is ev_head.doc and y.i != ev_dep.i)

    def _named_rival(self) -> bool:
        """Precise: a name's rival must be a name ("the couple had" may be Wagner's)."""
        return self.precise and self.dep.pos_ == "PROPN"

    def replaced(self, rel, ev_head, ev_dep) -> Edge | None:
        """A named participant replaced, the rest of the statement kept (asked in any sentence)."""
        if self.role in (AGENT, THEME, PATIENT) and self.dep.pos_ == "PROPN" and rel in ROLES_HELD[self.role] \
                and _word(ev_head) == self.head_word and self.other(ev_dep, named=True) \
                and self.shares(ev_head, ev_dep) and not self.relates(ev_head, self.dep_word):
            return Edge(rel, ev_head.text, ev_dep.text, RivalKind.REPLACED)
        return None

    def agent(self, rel, ev_head, ev_dep) -> Edge | None:
        if rel == self.role == AGENT and _word(ev_head) == self.head_word and self.other(ev_dep, named=self._named_rival()):
            return Edge(rel, ev_head.text, ev_dep.text, RivalKind.AGENT)
        return None

    def theme(self, rel, ev_head, ev_dep) -> Edge | None:
        if self.role == THEME and rel in ROLES_HELD[THEME] and _word(ev_head) == self.head_word \
                and self.dep.pos_ == "PROPN" and self.other(ev_dep, named=True):
            return Edge(rel, ev_head.text, ev_dep.text, RivalKind.THEME)
        return None

    def swapped(self, rel, ev_head, ev_dep) -> Edge | None:
        """The same two words, the roles swapped (precise: not where the word is only part of a longer
        name there, "the Phoenix Metropolitan Area includes" is not "Phoenix includes"; nor a name for
        a common noun, "the Puppy Bowl mimics a bowl game")."""
        dep = self.dep
        if self.role in (AGENT, PATIENT) and rel in (AGENT, PATIENT) and rel != self.role \
                and _word(ev_head) == self.head_word and _word(ev_dep) == self.dep_word \
                and not (self.precise and (ev_dep.dep_ in ("compound", "flat") and dep.dep_ not in ("compound", "flat")
                                           or (ev_dep.pos_ == "PROPN") != (dep.pos_ == "PROPN"))):
            return Edge(rel, ev_head.text, ev_dep.text, RivalKind.SWAPPED)
        return None

    def patient(self, rel, ev_head, ev_dep) -> Edge | None:
        if rel == self.role == PATIENT and _name_dep(self.dep) == _name_dep(ev_dep) == "nsubjpass" \
                and _word(ev_head) == self.head_word and self.other(ev_dep, named=self._named_rival()):
            return Edge(rel, ev_head.text, ev_dep.text, RivalKind.PATIENT)
        return None

    def predicate(self, rel, ev_head, ev_dep) -> Edge | None:
        """The predicate said of another ("Tokyo is the capital"; "the style is a synthesis ..., but
        rapping is frequent": a class said of another beside the claim's word, not of it)."""
        if not (self.role == BE and rel == BE and (_indefinite(self.head) or not (_indefinite(ev_head) or _indefinite(ev_dep)))):
            return None
        for pred, subj in ((ev_head, ev_dep), (ev_dep, ev_head)):
            if _word(pred) == self.head_word and self.other(subj, named=self.named and not self.beside(ev_head)):
                return Edge(BE, pred.text, subj.text, RivalKind.PREDICATE)
        return None

    def of(self, rel, ev_head, ev_dep) -> Edge | None:
        """"The capital of X" for "the capital of Y" (precise: a relation noun, not a name)."""
        if self.role == OF and rel == OF and self.dep.pos_ == "PROPN" and _word(ev_head) == self.head_word \
                and self.other(ev_dep, named=True) and not (self.precise and self.head.pos_ != "NOUN"):
            return Edge(OF, ev_head.text, ev_dep.text, RivalKind.OF)
        return None

    def place(self, rel, ev_head, ev_dep) -> Edge | None:
        """"Died in Princeton" for "born in Princeton"; not "originated and evolved in the US"."""
        if self.role == PREP and rel == PREP and _verbal(self.head) and self.dep.pos_ == "PROPN" \
                and _word(ev_dep) == self.dep_word and _word(ev_head) != self.head_word and _verbal(ev_head) \
                and not any(_word(c) == self.head_word and not _has_prep(c, self.evidence_edges) for c in ev_head.conjuncts):
            return Edge(PREP, ev_head.text, ev_dep.text, RivalKind.PLACE)
        return None
