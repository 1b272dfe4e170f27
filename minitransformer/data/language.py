"""Does a sentence look German or English? A small, transparent guess for the translator's warnings.

It counts each language's commonest short words and says nothing on thin evidence (fewer than two, or a tie),
so a warning is only given for a clear case.
"""

from __future__ import annotations

import re

#: Frequent function words that are not also frequent words of the other language.
FUNCTION_WORDS: dict[str, frozenset[str]] = {
    "de": frozenset("""der die das den dem des ein eine einer einem einen eines und oder ist sind war
        waren hat haben wird werden mit auf im ins vom zum zur von zu bei nach aus für über unter vor
        hinter neben zwischen sich nicht auch noch ich du er sie es wir ihr sein seine ihre ihren
        dieser diese dieses wer wie wo während weil dass als""".split()),
    "en": frozenset("""the a and or is are was were has have will be been with on of to at from
        for by over under behind next between not still i you he she it we they his her their
        this that these those who what where while because than into onto its""".split()),
}
_WORD = re.compile(r"[^\W\d_]+", re.UNICODE)


def guess_language(sentence: str, min_evidence: int = 2) -> str | None:
    """"de", "en", or None when the sentence gives too little evidence either way."""
    if not isinstance(sentence, str):
        raise TypeError(f"sentence must be a str, got {type(sentence).__name__}")
    words = [w.lower() for w in _WORD.findall(sentence)]
    counts = {lang: sum(w in vocab for w in words) for lang, vocab in FUNCTION_WORDS.items()}
    (best, high), (_, low) = sorted(counts.items(), key=lambda item: -item[1])
    if high >= min_evidence and high > low:
        return best
    return None
