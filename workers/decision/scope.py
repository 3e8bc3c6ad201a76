"""Language scope: is the reply in a language the verifier reads (English)?

Why: the NLI model and the key-term rules read English only. Asked about a German or Portuguese reply,
they still answer (words shared with the evidence, names, numbers) and a badge on it would be a
guess. So a reply the verifier cannot read is answered NOT ENOUGH INFO with a status reason naming
its language, before any evidence is read (workers/stages.py `LanguageStage`); a multilingual
verifier is a later step.

Said, not guessed: the language is py3langid's (langid.py's model, bundled, offline, ~4 ms a reply)
and a reply is called not English only when the identifier is confident and there is enough text to
be: short chat replies ("ok", "lol", "Paris", "haha yes") and replies whose words are mostly English
function words stay English. A reply written mostly in a non-Latin script is not English whatever
its length."""
from __future__ import annotations

import re
from dataclasses import dataclass
from functools import lru_cache

from ..text import ENGLISH_STOP_WORDS

VERIFIER_LANGUAGE = "en"
MIN_WORDS, MIN_LETTERS = 3, 12  # below this a Latin-script reply is too short to call
MIN_CONFIDENCE = 0.95  # py3langid's normalised probability of its top language
ENGLISH_SHARE = 0.30  # a reply whose words are at least this share English stop words is English
_WORD = re.compile(r"[^\W\d_]+")
NAMES = {"de": "German", "fr": "French", "es": "Spanish", "pt": "Portuguese", "it": "Italian", "nl": "Dutch",
         "sv": "Swedish", "da": "Danish", "no": "Norwegian", "nb": "Norwegian", "fi": "Finnish", "pl": "Polish",
         "cs": "Czech", "sk": "Slovak", "hu": "Hungarian", "ro": "Romanian", "tr": "Turkish", "ru": "Russian",
         "uk": "Ukrainian", "bg": "Bulgarian", "el": "Greek", "he": "Hebrew", "ar": "Arabic", "fa": "Persian",
         "hi": "Hindi", "bn": "Bengali", "ur": "Urdu", "ta": "Tamil", "th": "Thai", "vi": "Vietnamese",
         "id": "Indonesian", "ms": "Malay", "tl": "Tagalog", "zh": "Chinese", "ja": "Japanese", "ko": "Korean",
         "ca": "Catalan", "eu": "Basque", "gl": "Galician", "hr": "Croatian", "sr": "Serbian", "sl": "Slovenian",
         "lt": "Lithuanian", "lv": "Latvian", "et": "Estonian", "af": "Afrikaans", "sw": "Swahili", "la": "Latin",
         "eo": "Esperanto", "ga": "Irish", "cy": "Welsh", "is": "Icelandic", "mt": "Maltese", "sq": "Albanian"}


@dataclass(frozen=True)
class Language:
    code: str  # ISO 639-1, as py3langid names it
    confidence: float

    @property
    def name(self) -> str:
        return NAMES.get(self.code, self.code)

    def reason(self) -> str:
        """The verdict's status reason for a reply in this language."""
        return (f"not checked: the reply reads as {self.name} ({self.code}, confidence {self.confidence:.2f}); "
                "the verifier reads English only")


@lru_cache(maxsize=1)
def _identifier():
    from py3langid.langid import MODEL_FILE, LanguageIdentifier

    return LanguageIdentifier.from_pickled_model(MODEL_FILE, norm_probs=True)


def _latin(ch: str) -> bool:
    return ch < "\u0250" or "\u1e00" <= ch <= "\u1eff"  # Basic Latin … IPA, Latin Extended Additional


@lru_cache(maxsize=65536)
def foreign(text: str) -> Language | None:
    """The reply's language when it is confidently not English; None when it is English or too short
    or too uncertain to call."""
    letters = [c for c in text if c.isalpha()]
    if not letters:
        return None
    non_latin = sum(not _latin(c) for c in letters) / len(letters) >= 0.5
    words = _WORD.findall(text.lower())
    if not non_latin:
        if len(words) < MIN_WORDS or len(letters) < MIN_LETTERS:
            return None
        if sum(w in ENGLISH_STOP_WORDS for w in words) / len(words) >= ENGLISH_SHARE:
            return None
    code, p = _identifier().classify(text)
    if code == VERIFIER_LANGUAGE or (p < MIN_CONFIDENCE and not non_latin):
        return None
    return Language(code, float(p))
