"""Evidence sufficiency: is a window about the same thing as the claim?

Why: the NLI model (SNLI annotated "both sentences describe the same event") gives high
contradiction when evidence is merely about something else, so an off-topic window must not be
allowed to REFUTE (docs/method.md §6). Coverage is the share of the
claim's key terms found in the window or its passage title, with anchors (numbers, names) counted
twice; a number of the claim's kind that the window states differently ("1887" vs "1889") fills
its slot: that window is on topic *and* conflicts. Stop words are scikit-learn's English list plus
chat fillers, so "yeah I think" covers nothing."""
from __future__ import annotations

import re
from functools import lru_cache

from ..text import KEY_TERM_STOP, TERM  # TERM: the decision's one tokeniser
from ..windows import normalise

_ORDINAL = re.compile(r"(?<=\d)(st|nd|rd|th)$")
STOP = KEY_TERM_STOP  # workers/text.py: scikit-learn's English list plus chat fillers
# The on-topic level: the coverage from which a window counts as about the claim (it may REFUTE, its
# evidence is "strong"). Fixed, not fitted: the yardstick's sets come with gold evidence, which is on
# topic by construction, so they cannot show what the guard is for (retrieved passages about
# something else, the Disneyland-for-Eiffel case). Half the claim's key terms (names and numbers
# count twice) is the design value; the swap probe (`tune decision --lodo` report) measures it.
# Every method, the guarded rule, the LLM judge and the fit read it from here.
ON_TOPIC = 0.5


def _num(tok: str) -> str:
    return _ORDINAL.sub("", tok.replace(",", "").rstrip("."))


@lru_cache(maxsize=65536)
def key_terms(text: str) -> tuple[frozenset, frozenset, frozenset]:
    """(anchors, content words, numbers) of a claim, stemmed like the pre-score (windows.normalise)."""
    anchors, content, numbers = set(), set(), set()
    for i, m in enumerate(TERM.finditer(text)):
        tok = m.group()
        if tok[0].isdigit():
            numbers.add(_num(tok))
            continue
        low = tok.lower().replace("’", "'")
        if low in STOP or len(low) < 2:
            continue
        stems = [t for t in normalise(low) if len(t) > 1]  # "World's" → world (not "s")
        if not stems:
            continue
        sentence_start = i == 0 or text[:m.start()].rstrip()[-1:] in ".!?"
        (anchors if tok[0].isupper() and not sentence_start else content).update(stems)
    return frozenset(anchors), frozenset(content - anchors), frozenset(numbers)


@lru_cache(maxsize=262144)
def window_terms(text: str) -> tuple[frozenset, frozenset]:
    """(normalised words, numbers) of a window's text, once per text: what coverage and the subject check read."""
    return frozenset(normalise(text)), frozenset(_num(t) for t in TERM.findall(text) if t[0].isdigit())


def _shape(n: str) -> str:
    """A year (four digits from 1000 to 2999) is only replaced by a year, any other number by a number."""
    return "year" if len(n) == 4 and n.isdigit() and n[0] in "12" else "number"


def coverage(claim: str, window: str, title: str = "") -> tuple[float, bool]:
    """(share of the claim's key terms the window or title covers, whether a claim number is
    stated differently in the window). A claim with no key terms is fully covered."""
    anchors, content, numbers = key_terms(claim)
    words, nums = window_terms(f"{title} {window}" if title else window)
    conflict = False
    hit = 2 * len(anchors & words) + len(content & words)
    for n in numbers:
        if n in nums:
            hit += 2
        elif any(_shape(m) == _shape(n) for m in nums):
            hit += 2
            conflict = True
    total = 2 * len(anchors) + len(content) + 2 * len(numbers)
    return (hit / total if total else 1.0), conflict


_SELF = {"i", "we", "you", "me", "us"}


def middle_names(span) -> frozenset:
    """Stems of the inner words of every name of three or more capitalised proper nouns in a spaCy
    span: middle names are often left out where a person is named ("Elvis Presley"), so they
    count as ordinary key terms, not as names every window must contain."""
    inner: set[str] = set()
    run: list = []
    for tok in [*span, None]:
        if tok is not None and tok.pos_ == "PROPN" and tok.is_title:
            run.append(tok)
            continue
        if len(run) >= 3:
            for t in run[1:-1]:
                inner.update(x for x in normalise(t.lower_) if len(x) > 1)
        run = []
    return frozenset(inner)


@lru_cache(maxsize=65536)
def subject_terms(text: str) -> frozenset | None:
    """Key terms of what the claim is about: its main clause's grammatical subject (through "I
    think / I read that ..." wrappers). None when that subject is a third-person pronoun ("it",
    "he", "they": no clear referent, so no window can be shown to be about it); empty when no
    subject is found (nothing required)."""
    from ..surfaces.pronouns import parse

    doc = parse(text)
    for sent in doc.sents:
        head = sent.root
        for _ in range(4):  # "I think that he said X was ..." → the clause that states the fact
            subj = next((t for t in head.children if t.dep_ in ("nsubj", "nsubjpass")), None)
            inner = next((t for t in head.children if t.dep_ in ("ccomp", "xcomp")), None)
            if subj is not None and subj.lower_ in _SELF and inner is not None:
                head = inner
                continue
            break
        if subj is None:
            continue
        if subj.pos_ == "PRON" and subj.lower_ not in _SELF:
            return None
        span = doc[subj.left_edge.i: subj.right_edge.i + 1]
        anchors, content, numbers = key_terms(span.text)
        middle = middle_names(span)  # "Elvis Aaron Presley": a window naming "Elvis Presley" is about him
        anchors, content = anchors - middle, content | (anchors & middle)
        return frozenset({("anchor", t) for t in anchors | numbers} | {("word", t) for t in content})
    return frozenset()


def subject_covered(topic: str, window: str, title: str = "") -> bool:
    """The window (or its passage title) names the claim's subject: every name and number in it
    ("Eiffel" and "Tower", not just a tower) and half its key terms at least."""
    terms = subject_terms(topic)
    if terms is None:
        return False
    if not terms:
        return True
    words, nums = window_terms(f"{title} {window}" if title else window)
    present = words | nums
    if any(kind == "anchor" and t not in present for kind, t in terms):
        return False
    return 2 * sum(t in present for _, t in terms) >= len(terms)


def strength(cov: float | None, on_topic: float) -> str:
    """The verdict's `status.evidence`: none (nothing read), weak (the deciding window is off the
    claim's topic) or strong."""
    if cov is None:
        return "none"
    return "strong" if cov >= on_topic else "weak"


_SENTENCE = re.compile(r"(?<=[.!?])\s+")
# a question with one of these words passes its content on as a fact ("did you know / can you believe /
# have you heard that ..."); any other question asks and states nothing ("Do you like animation movies?")
_PRESUPPOSING = re.compile(r"\b(know|knew|hear|heard|believe|realis|realiz|aware|see|seen|notice)", re.I)
# a sentence of these alone is the speaker's reaction, not a fact ("True.", "That's funny.", "My bad.")
REACTIONS = frozenset("""true exactly correct indeed absolutely definitely totally agree agreed bad funny cute
interesting fascinating amazing incredible impressive awesome cool neat wonderful lovely nice great wow crazy weird
sad shame glad sorry hello hi hey thanks thank haha hmm nope wrong""".split())
_REACTION_STEMS = frozenset(t for w in REACTIONS for t in normalise(w))


@lru_cache(maxsize=65536)
def stated(text: str) -> str:
    """The sentences of a reply that state something: a question that presupposes nothing and a
    reaction alone ("True.", "How interesting!") are the speaker's turn-taking, not claims, so
    coverage asks nothing of them. A reply of nothing else is read whole."""
    keep = []
    for sent in _SENTENCE.split(text.strip()):
        if sent.rstrip().endswith("?") and not _PRESUPPOSING.search(sent):
            continue
        anchors, content, numbers = key_terms(sent)
        if not numbers and (anchors or content) and (anchors | content) <= _REACTION_STEMS:
            continue
        keep.append(sent)
    return " ".join(keep) if keep else text


@lru_cache(maxsize=65536)
def claim_terms(text: str) -> tuple[tuple[str, str, frozenset], ...]:
    """The claim's key terms as (kind, the word as written, its stems): kind anchor (a name),
    number, or word; the stop words and the speaker's framing ("I think", "did you know") are not
    terms (STOP), the same choice `key_terms` makes, nor are the sentences that state nothing (`stated`)."""
    text = stated(text)
    anchors, content, numbers = key_terms(text)
    out, seen = [], set()
    for m in TERM.finditer(text):
        tok = m.group()
        if tok[0].isdigit():
            n = _num(tok)
            if n in numbers and n not in seen:
                seen.add(n)
                out.append(("number", tok.rstrip(".,"), frozenset({n})))
            continue
        low = tok.lower().replace("’", "'")
        stems = frozenset(t for t in normalise(low) if len(t) > 1) & (anchors | content)
        if stems and not stems <= seen:
            seen |= stems
            out.append(("anchor" if stems & anchors else "word", tok, stems))
    return tuple(out)


def uncovered(claim: str, texts: tuple[str, ...]) -> tuple[list[str], bool]:
    """(the claim's names, numbers and content words that none of `texts` states, as written in
    the claim; whether one of its uncovered numbers is stated differently there — a value in the
    same slot). The SUPPORTS twin of `coverage`: a reply that restates the evidence and adds a
    name or a number of its own leaves that term here."""
    words, nums = set(), set()
    for t in texts:
        w, n = window_terms(t)
        words |= w
        nums |= n
    missing, conflict = [], False
    for kind, written, stems in claim_terms(claim):
        if kind == "number":
            n = next(iter(stems))
            if n not in nums:
                missing.append(written)
                conflict |= any(_shape(m) == _shape(n) for m in nums)
        elif not stems & words:
            missing.append(written)
    return missing, conflict
