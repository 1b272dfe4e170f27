"""The embedded default dataset: long dates between two languages, e.g. "Saturday, November 21, 2026" (en_US)
-> "Samstag, 21. November 2026" (de_DE).

Babel formats each date with each locale's CLDR "full" pattern, so any locale pair works and some reorder the
phrase (hu_HU: "2026. november 21., szombat"). Generated from a seed, nothing downloaded (lessons 06 and 07).
"""

from __future__ import annotations

import datetime
import random
import re
from functools import lru_cache

from babel import Locale
from babel.core import UnknownLocaleError
from babel.dates import format_date

SPLITS = ("train", "validation", "test")
#: The default range of years of every split (the training run's dates come from it).
FIRST_YEAR, LAST_YEAR = 1900, 2099


def _parse_locale(name: str, role: str) -> Locale:
    try:
        return Locale.parse(name)
    except (UnknownLocaleError, ValueError, TypeError) as error:
        raise ValueError(
            f"{role}={name!r} is not a CLDR locale known to Babel ({error}); "
            "expected a name such as 'en_US', 'de_DE' or 'hu_HU'"
        ) from None


@lru_cache(maxsize=8)
def _split_dates(
    n_train: int, n_validation: int, n_test: int, seed: int, start_year: int, end_year: int
) -> dict[str, tuple[datetime.date, ...]]:
    first = datetime.date(start_year, 1, 1)
    n_days = (datetime.date(end_year, 12, 31) - first).days + 1
    wanted = n_train + n_validation + n_test
    if wanted > n_days:
        raise ValueError(
            f"asked for {wanted} distinct dates ({n_train} train + {n_validation} validation "
            f"+ {n_test} test) but {start_year}-{end_year} has only {n_days} days"
        )
    # One shuffled draw of distinct days, cut into three parts, keeps the splits
    # disjoint. Test comes first so that it does not change when n_train does.
    offsets = random.Random(seed).sample(range(n_days), wanted)
    days = [first + datetime.timedelta(days=k) for k in offsets]
    return {
        "test": tuple(days[:n_test]),
        "validation": tuple(days[n_test : n_test + n_validation]),
        "train": tuple(days[n_test + n_validation :]),
    }


def date_pair(
    date: datetime.date, src_locale: str = "en_US", tgt_locale: str = "de_DE"
) -> tuple[str, str]:
    """Format one date as a (source, target) pair of long dates."""
    src = _parse_locale(src_locale, "src_locale")
    tgt = _parse_locale(tgt_locale, "tgt_locale")
    return format_date(date, format="full", locale=src), format_date(date, format="full", locale=tgt)


def load_dates(
    split: str = "train",
    src_locale: str = "en_US",
    tgt_locale: str = "de_DE",
    n_train: int = 20_000,
    n_validation: int = 1_000,
    n_test: int = 1_000,
    seed: int = 0,
    start_year: int = FIRST_YEAR,
    end_year: int = LAST_YEAR,
) -> list[tuple[str, str]]:
    """Load one split of the date-translation dataset.

    The dates of the three splits are distinct days drawn without replacement
    from ``start_year``-01-01 .. ``end_year``-12-31, so no test date is ever seen
    in training. The same arguments always give the same pairs in the same
    order; the test split depends only on ``seed``, ``n_test`` and the year range.
    """
    if split not in SPLITS:
        raise ValueError(f"split must be one of {SPLITS}, got {split!r}")
    for name, value in (("n_train", n_train), ("n_validation", n_validation), ("n_test", n_test)):
        if not isinstance(value, int) or value < 0:
            raise ValueError(f"{name} must be a non-negative int, got {value!r}")
    if not (1 <= start_year <= end_year <= 9999):
        raise ValueError(
            f"expected 1 <= start_year <= end_year <= 9999, got start_year={start_year}, "
            f"end_year={end_year}"
        )
    src = _parse_locale(src_locale, "src_locale")
    tgt = _parse_locale(tgt_locale, "tgt_locale")
    days = _split_dates(n_train, n_validation, n_test, seed, start_year, end_year)[split]
    return [(format_date(d, format="full", locale=src), format_date(d, format="full", locale=tgt)) for d in days]


def _candidate_dates(text: str, loc: Locale) -> list[datetime.date]:
    """Every real date whose year, day and month name (in ``loc``) all occur in ``text``."""
    folded = text.casefold()
    numbers = sorted({int(n) for n in re.findall(r"\d+", text)})
    months = [m for m, name in loc.months["format"]["wide"].items() if name.casefold() in folded]
    found = []
    for year in (n for n in numbers if 1 <= n <= 9999):
        for month in months:
            for day in (n for n in numbers if 1 <= n <= 31):
                try:
                    found.append(datetime.date(year, month, day))
                except ValueError:
                    continue
    return found


def parse_long_date(text: str, locale: str = "en_US") -> datetime.date | None:
    """The date that ``text`` spells out in ``locale``'s full format, or None."""
    loc = _parse_locale(locale, "locale")
    wanted = text.strip()
    for date in _candidate_dates(wanted, loc):
        if format_date(date, format="full", locale=loc) == wanted:
            return date
    return None


def wrong_weekday(text: str, locale: str = "en_US") -> datetime.date | None:
    """The date of a full ``locale`` date whose weekday is not that date's, or None.

    "Saturday, March 3, 2023" gives ``date(2023, 3, 3)``, a Friday: the text is what
    :func:`date_pair` writes for that date except for the name of the day. The dataset never
    holds such a sentence, so ``translate`` says what is wrong with it.
    """
    loc = _parse_locale(locale, "locale")
    wanted = text.strip()
    names = loc.days["format"]["wide"]  # 0 is Monday, as for datetime.date.weekday()
    for date in _candidate_dates(wanted, loc):
        right = format_date(date, format="full", locale=loc)
        own = names[date.weekday()]
        if own not in right:
            continue
        if any(right.replace(own, other, 1) == wanted for day, other in names.items() if day != date.weekday()):
            return date
    return None
