"""Shown-badge precision with an exact binomial interval: what the live page, /metrics and
`dialcheck feedback stats` report, and the one-sided bounds `dialcheck calibrate` certifies with.

Why Clopper–Pearson (scipy's `binomtest(...).proportion_ci(method="exact")` and `beta.ppf`, never a
hand-written incomplete beta): its coverage is guaranteed at every n, which is what an alarm that
fires on a few dozen judgements needs; Wilson or normal intervals undercover at small n.
Plain numbers in, plain numbers out: no store, no Kafka (streams/ and lab/ both import it)."""
from __future__ import annotations

from dataclasses import asdict, dataclass

BUCKETS = ("SUPPORTS", "REFUTES", "high")  # per badge label, and the "high" confidence band of either
DEFAULT_CONFIDENCE = 0.9
# the model-version dimension: rows over every version, and the version of a judgement whose verdict
# is not stored (yet) or names no NLI model
ALL_VERSIONS = "all"
UNKNOWN_VERSION = "unknown"


def preload() -> None:
    """Import scipy.stats now (seconds on a busy machine): a worker or page calls this at start, so
    the first scrape or feedback event never waits on the import."""
    import scipy.stats  # noqa: F401


def clopper_pearson(k: int, n: int, confidence: float = DEFAULT_CONFIDENCE) -> tuple[float, float]:
    """Two-sided exact interval for k successes in n trials; (0, 1) when n is 0."""
    if n <= 0:
        return 0.0, 1.0
    from scipy.stats import binomtest

    ci = binomtest(int(k), int(n)).proportion_ci(confidence_level=confidence, method="exact")
    return float(ci.low), float(ci.high)


def upper_bound(k: int, n: int, confidence: float = DEFAULT_CONFIDENCE) -> float:
    """One-sided exact upper bound on a rate: P(rate <= bound) >= confidence (1 when n is 0 or k == n).
    For certification: the error rate of shown badges is at most this, at `confidence`."""
    if n <= 0 or k >= n:
        return 1.0
    from scipy.stats import beta

    return float(beta.ppf(confidence, k + 1, n - k))


def lower_bound(k: int, n: int, confidence: float = DEFAULT_CONFIDENCE) -> float:
    """One-sided exact lower bound on a rate (0 when n is 0 or k is 0)."""
    if n <= 0 or k <= 0:
        return 0.0
    from scipy.stats import beta

    return float(beta.ppf(1.0 - confidence, k, n - k + 1))


@dataclass(frozen=True)
class Precision:
    """One badge bucket: judged right / wrong (unsure left out), the precision with its interval, the
    coverage (shown badges of this bucket / verdicts) and the drift alarm (upper end below target)."""
    label: str
    right: int
    wrong: int
    n: int
    precision: float | None
    lower: float | None
    upper: float | None
    shown: int
    verdicts: int
    coverage: float | None
    target: float
    confidence: float
    alarm: bool

    def to_dict(self) -> dict:
        return asdict(self)


def precision_row(label: str, right: int, wrong: int, shown: int = 0, verdicts: int = 0, target: float = 0.85,
                  confidence: float = DEFAULT_CONFIDENCE) -> Precision:
    """The row for one bucket; with no judgement the precision and interval are None and no alarm fires."""
    n = right + wrong
    lo, hi = clopper_pearson(right, n, confidence) if n else (None, None)
    return Precision(label, right, wrong, n, right / n if n else None, lo, hi, shown, verdicts,
                     shown / verdicts if verdicts else None, target, confidence, bool(n and hi < target))


def precision_rows(judged: dict[str, tuple[int, int]], shown: dict[str, int], verdicts: int, target: float = 0.85,
                   confidence: float = DEFAULT_CONFIDENCE) -> list[Precision]:
    """`judged`: bucket → (right, wrong) over shown badges; `shown`: bucket → shown badges among `verdicts`."""
    return [precision_row(b, *judged.get(b, (0, 0)), shown.get(b, 0), verdicts, target, confidence) for b in BUCKETS]


def buckets_of(label: str, confidence: str | None, shown: bool | None) -> tuple[str, ...]:
    """The buckets a judged badge counts in: its label (SUPPORTS / REFUTES) and "high" when it was
    shown with high confidence; none when it was not a shown badge. `shown` None: the judge saw a
    label, so a badge label counts as shown."""
    if label not in ("SUPPORTS", "REFUTES"):
        return ()
    if shown is False:
        return ()
    return (label, "high") if confidence == "high" else (label,)


def nli_version_of(verdict: dict | None) -> str:
    """The NLI model version a published verdict names (`model_versions.nli`; an adapted model's
    names its base and its data), UNKNOWN_VERSION when there is no verdict or it names none.
    Why the NLI's: a model directory swaps the verifier with its decision and display, and the
    verifier's version is the one that names the directory, so it tells a rollout's verdicts apart."""
    versions = verdict.get("model_versions") if isinstance(verdict, dict) else None
    nli = versions.get("nli") if isinstance(versions, dict) else None
    return str(nli) if nli not in (None, "") else UNKNOWN_VERSION


def rows_by_version(judged: dict[str, dict[str, tuple[int, int]]], shown: dict[str, dict[str, int]],
                    verdicts: dict[str, int], target: float = 0.85,
                    confidence: float = DEFAULT_CONFIDENCE) -> dict[str, list[Precision]]:
    """`precision_rows` per model version (version → bucket → counts, as `precision_rows` takes them),
    and under ALL_VERSIONS the rows over every version pooled (the drift alarm of all traffic). The
    versions come in the order `verdicts` names them (first seen first), then those only judged."""
    versions = list(dict.fromkeys([*verdicts, *judged, *shown]))
    pooled_judged: dict[str, list[int]] = {}
    pooled_shown = {b: 0 for b in BUCKETS}
    for v in versions:
        for b, (r, w) in judged.get(v, {}).items():
            pair = pooled_judged.setdefault(b, [0, 0])
            pair[0] += r
            pair[1] += w
        for b, n in shown.get(v, {}).items():
            pooled_shown[b] = pooled_shown.get(b, 0) + n
    out = {ALL_VERSIONS: precision_rows({b: (r, w) for b, (r, w) in pooled_judged.items()}, pooled_shown,
                                        sum(verdicts.values()), target, confidence)}
    for v in versions:
        out[v] = precision_rows(judged.get(v, {}), shown.get(v, {}), verdicts.get(v, 0), target, confidence)
    return out
