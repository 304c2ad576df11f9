"""The comment taxonomy: which of RoFT's eight reasons a free-text explanation gives.

Players write "repitition", "un-grammatical", "doesnt make sense", "who is he??" and "weird" in
front of anything. A comment is read in three steps, each of which can be inspected:

1. `normalise`: lower case; hyphens and slashes between words become spaces; apostrophes go
   ("doesn't" → "doesnt"); letters repeated three times or more are cut to two; each word not in
   the cue vocabulary is replaced by the cue word it is one edit away from (two for long words),
   so misspellings such as "grammer", "irelevant" or "contridicts" find their cue.
2. `RULES`: readable cue patterns per reason. A cue does not count when its clause negates it
   ("not repetitive", "no typos", "the grammar is fine"); patterns that carry their own negation
   ("doesnt make sense", "has nothing to do with") are cues as a whole. "weird", "odd" and
   "strange" are no cue: what follows them decides.
3. A scikit-learn model (word and character n-gram TF-IDF, one logistic regression per reason)
   trained on the labelled development set `analysis/data/explanations.csv` (train split only).
   It adds the reasons it is very sure of (`ADD_THRESHOLD`) to the rules' reasons, and decides
   alone when no rule fires (`ALONE_THRESHOLD`, or its best reason above `FALLBACK_THRESHOLD`).

A comment gets every reason the rules and the model give (several when the text gives several);
when neither gives any, it is "other". `classify_comment` says which rule or the model decided.
Strict accuracy (the label set must match exactly, "other" never counts as right) and coverage
(the share given at least one reason) on the held-out test split are computed by `evaluate`.
"""

from __future__ import annotations

import csv
import re
import unicodedata
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

from roftcore.reasons import REASON_NAMES

DATA = Path(__file__).parent / "data" / "explanations.csv"
OTHER = "other"

# reason -> cue patterns (regular expressions over the normalised text, word-bounded).
RULES: dict[str, tuple[str, ...]] = {
    "repetition": (
        r"repeat\w*",
        r"repit\w*",
        r"repet\w*",
        r"reiterat\w*",
        r"redundan\w*",
        r"restat\w*",
        r"same (?:\w+ )?(?:thing|sentence|phrase|words?|idea|line|fact)",
        r"(?:over and over|again and again|broken record|in a loop|loops? back|stuck in a loop)",
        r"(?:duplicate\w*|copy paste|copy of|echoes)",
        r"(?:already said|said (?:this|that|it) already|said before|rewording)",
        r"rep",
        r"(\w+) \1\b",
        r"(\w+ \w+ \w+)\b.*\b\1",
        r"\d+ times|(?:so|too) many times|twice",
    ),
    "grammar": (
        r"(?:un ?)?grammar\w*",
        r"(?:un ?)?grammatical\w*",
        r"!punctua\w*|punctation",
        r"spell\w*|misspel\w*|typos?",
        r"(?:wording|worded|phrasing|phrased|sentence (?:structure|construction))",
        r"(?:run on|tense|capitali[sz]\w*|subject verb)",
        r"!(?:comma\w*|period|quote marks|verb)",
        r"(?:broken english|clunky|choppy|awkward\w*)",
        r"!(?:proper english|native speaker)",
        r"(?:missing (?:a |some )?words?|word is missing|sounds off)",
    ),
    "irrelevant": (
        r"(?:ir|un)relevan\w*|irelevan\w*",
        r"off ?topic|out of (?:place|context)|tangent|derails?|wanders? off|drifts?",
        r"(?:topic|subject)s? (?:change\w*|shift\w*|jump\w*|switch\w*)",
        r"(?:change\w*|shift\w*|jump\w*|switch\w*) (?:\w+ ){0,3}(?:topics?|subjects?)",
        r"(?:new|different|another) (?:topic|subject)",
        r"(?:unrelated|not related|unconnected|no connection|doesnt connect|does not connect)",
        r"(?:nothing to do with|has nothing to do|what does this have to do)",
        r"(?:doesnt|does not|dont|didnt) (?:follow|fit|belong)",
        r"(?:suddenly|now) (?:we are |were |its |it is |it s )?talking about",
        r"was about \w+ and (?:this|now)",
        r"why would (?:a|the|an) \w+ (?:talk|be|mention) about",
        r"(?:came|comes|out) of nowhere|random|non ?sequitur|why is this here",
        r"(?:abrupt\w*|sudden\w*) (?:shift|change|jump|topic)",
        r"no longer about|isnt about|not about|(?:talking|went) (?:about )?somewhere else",
        r"talking about something (?:totally |completely )?(?:different|else)",
    ),
    "contradicts_sentence": (
        r"contradict\w*|contradic\w*|contridict\w*|contradiction",
        r"inconsist\w*|inconsit\w*",
        r"(?:conflicts?|clashes|disagrees?) with",
        r"(?:opposite of|said the opposite|the opposite)",
        r"(?:earlier|before|previously|first) (?:it |he |she |they )?(?:said|stated|was|were)",
        r"(?:dont|doesnt|do not|does not) match",
        r"goes against",
        r"(?<!name )(?:changed|changes) from \w+ to",
        r"which is it",
        r"now (?:it |they |he |she )?says?",
        r"(?:said|stated|mentioned|told us) (?:\w+ )?(?:earlier|before|previously)",
        r"(?:before|earlier|previously) .{0,60}\bnow\b",
    ),
    "contradicts_knowledge": (
        r"factual\w*|facts?",
        r"(?:not|isnt|wasnt|un) ?true",
        r"(?:false|incorrect|inaccurate|inacurate|wrong) (?:\w+ )?"
        r"(?:information|info|fact\w*|statement|date|year|capital)",
        r"historic\w*|misinformation|geography",
        r"wrong (?:date|year|capital|name for)",
        r"(?:false|incorrect) (?:information|fact)|false info\w*",
        r"there (?:is|are) (?:no such|not \d+)",
        r"never said that",
        r"thats not how (?!cooking|baking)\w+ works?",
        r"is not (?:a|an|in) \w+|isnt (?:a|an|in) \w+|not in \w+",
    ),
    "common_sense": (
        r"(?:no|any|doesnt make|does not make|dont make|didnt make|not make) (?:\w+ )?sense",
        r"makes? no sense|make no sense",
        r"nonsen\w*|common sense|commen sense",
        r"impossible|not possible|could never happen|couldnt happen|implausib\w*|unrealistic",
        r"illogical|logic|absurd|ridiculous|silly",
        r"(?:wrong|backwards?|illogical) order|out of order|order makes no sense",
        r"(?:cant|cannot|can not|dont|doesnt|wouldnt) (?:\w+ ){0,2}(?:eat|walk|talk|drive|vote|"
        r"climb|cook|boil|bake|fly|frost|plate|serve|happen)",
        r"nobody (?:would|serves|does)|people dont do",
        r"not how (?:cooking|baking|\w+ing) works",
    ),
    "coreference": (
        r"coreferen\w*|pronouns?|pronoum\w*",
        r"!antecedent",
        r"who (?:is|s|was) (?:he|she|they|this|that|it|\w+)",
        r"(?:he she|she he|him who|her who)",
        r"(?:wrong|new|unknown|different) (?:person|character|name|pronoun)",
        r"characters?|narrator|pov|point of view",
        r"name (?:changed|changes)|(?:called|named) \w+ now|mix(?:es|ed)? up|mixup",
        r"refers? to (?:nothing|no one|nobody|someone|anyone)",
        r"(?:unclear|confus\w*) (?:who|which)|which (?:dog|one|person|man|woman)",
        r"(?:was|is) (?:a )?(?:he|she) (?:a moment ago|now|before)",
        r"(?:sister|brother|mother|father|son|daughter) is (?:suddenly|now)",
        r"gender",
        r"(?:no|never) (?:boy|girl|man|woman|one) (?:mentioned|in|there)",
    ),
    "generic": (
        r"generi\w*|generc",
        r"vague\w*|vauge\w*|bland\w*|filler|fluff|platitude|cliche\w*",
        r"says nothing|adds? (?:nothing|no \w+)|doesnt add|nothing specific|non specific",
        r"(?:empty|dull|boring|canned|template|general)\b",
        r"(?:any|every) (?:article|story|text)|anyone could",
        r"lacks? detail|too simple|overly simple|wishy washy|fortune cookie",
        r"kind of thing an? ai",
    ),
}

# Cue words misspellings are corrected towards (one edit; two for words of 9+ letters).
CUE_WORDS = tuple(
    [
        "repetition",
        "repetitive",
        "repeats",
        "repeated",
        "repeating",
        "grammar",
        "grammatical",
        "ungrammatical",
        "punctuation",
        "spelling",
        "misspelled",
        "irrelevant",
        "unrelated",
        "contradicts",
        "contradiction",
        "contradicting",
        "inconsistent",
        "factual",
        "factually",
        "incorrect",
        "inaccurate",
        "nonsense",
        "sense",
        "impossible",
        "illogical",
        "implausible",
        "coreference",
        "pronoun",
        "character",
        "characters",
        "generic",
        "vague",
        "bland",
        "cliche",
        "sentence",
        "sentences",
        "previous",
        "relevant",
        "wording",
        "phrasing",
        "awkward",
    ]
)
NEGATORS = frozenset(
    [
        "not",
        "no",
        "nothing",
        "isnt",
        "wasnt",
        "arent",
        "dont",
        "doesnt",
        "didnt",
        "without",
        "never",
        "neither",
        "nor",
    ]
)
FINE = frozenset(["fine", "ok", "okay", "perfect", "good", "correct", "great"])
CLAUSE_BREAK = re.compile(r"\b(?:but|though|although|yet|however)\b|[,.;:!?]")


def _edit_distance_at_most(a: str, b: str, limit: int) -> bool:
    if abs(len(a) - len(b)) > limit:
        return False
    previous = list(range(len(b) + 1))
    for i, ca in enumerate(a, start=1):
        current = [i]
        for j, cb in enumerate(b, start=1):
            current.append(min(previous[j] + 1, current[j - 1] + 1, previous[j - 1] + (ca != cb)))
        if min(current) > limit:
            return False
        previous = current
    return previous[-1] <= limit


@lru_cache(maxsize=65536)
def _correct(word: str) -> str:
    if len(word) < 6 or word in CUE_WORDS:
        return word
    limit = 2 if len(word) >= 9 else 1
    for cue in CUE_WORDS:
        if cue[0] == word[0] and _edit_distance_at_most(word, cue, limit):
            return cue
    return word


def normalise(text: str) -> str:
    """Lower case, hyphens and slashes to spaces, no apostrophes, misspelt cue words corrected;
    punctuation that ends a clause is kept (negation stops there)."""
    text = unicodedata.normalize("NFKD", str(text)).encode("ascii", "ignore").decode()
    text = text.lower().replace("’", "'").replace("‘", "'").replace("“", '"')
    text = text.replace("”", '"').replace("&", " and ").replace("+", " and ")
    text = re.sub(r"(?<=\w)'(?=\w)", "", text)
    text = re.sub(r"(?<=\w)[-/](?=\w)", " ", text)
    text = re.sub(r"(\w)\1{2,}", r"\1\1", text)
    text = re.sub(r"[^a-z0-9,.;:!? ]+", " ", text)
    words = [_correct(w) if w.isalpha() else w for w in re.findall(r"[a-z0-9]+|[,.;:!?]", text)]
    return re.sub(r" ([,.;:!?])", r"\1", " ".join(words)).strip()


def _compile(pattern: str) -> tuple[re.Pattern, bool]:
    """A cue and whether a negation before it cancels it. Cues that name a thing whose absence
    is the complaint ("no period", "no antecedent") start with "!"; only "X is fine" cancels
    them."""
    plain = pattern.removeprefix("!")
    return re.compile(rf"\b(?:{plain})\b"), not pattern.startswith("!")


_COMPILED = {reason: [_compile(p) for p in patterns] for reason, patterns in RULES.items()}
# One pattern per reason that matches when any of its cues does: most comments name one or two
# reasons, so the cues of the others need not be tried one by one.
# (Cues with a back-reference such as "(\w+) \1" are left out of it and always tried.)
_ANY = {
    reason: re.compile(
        "|".join(f"(?:{p.pattern})" for p, _ in compiled if "\\1" not in p.pattern) or "(?!)"
    )
    for reason, compiled in _COMPILED.items()
}
ADD_THRESHOLD = 0.9  # the model adds a reason to those the rules found
ALONE_THRESHOLD = 0.5  # the model's reasons when no rule fired
FALLBACK_THRESHOLD = 0.3  # ... or its single best one, when at least this likely


def _negated(text: str, start: int, end: int, pattern: str, negatable: bool) -> bool:
    """Is the cue at text[start:end] negated within its clause ("not X", "X is fine")?"""
    after = CLAUSE_BREAK.split(text[end:])[0].split()[:3]
    if FINE & set(after):
        return True
    if not negatable or re.search(r"\b(?:no|not|dont|doesnt|didnt|cant|nothing|isnt)\b", pattern):
        return False  # the pattern carries its own negation
    before = CLAUSE_BREAK.split(text[:start])[-1].split()[-3:]
    # "makes no sense grammatically": the negation belongs to "sense", not to the cue.
    return any(
        word in NEGATORS and (i + 1 == len(before) or before[i + 1] != "sense")
        for i, word in enumerate(before)
    )


def mark_negation(normalised: str) -> str:
    """For the model: words a negation governs get a `neg_` prefix ("not repetitive" →
    "not neg_repetitive"; "the grammar is fine" → "the neg_grammar is fine"), up to the end of the
    clause or three words; "no sense" keeps its meaning as a phrase."""
    out: list[str] = []
    for clause in re.split(r"(\b(?:but|though|although|yet|however)\b|[,.;:!?])", normalised):
        words = clause.split()
        marked = list(words)
        for i, word in enumerate(words):
            if word in NEGATORS and not (i + 1 < len(words) and words[i + 1] == "sense"):
                for j in range(i + 1, min(i + 4, len(words))):
                    marked[j] = "neg_" + words[j]
            if word in FINE and i >= 2 and words[i - 1] in ("is", "was", "seems", "looks"):
                marked[i - 2] = "neg_" + words[i - 2]
        out.append(" ".join(marked))
    return " ".join(part for part in out if part.strip())


def rule_reasons(normalised: str) -> dict[str, str]:
    """reason -> the first cue pattern that fired for it (negated cues do not fire)."""
    found: dict[str, str] = {}
    for reason, patterns in _COMPILED.items():
        maybe = bool(_ANY[reason].search(normalised))
        for pattern, negatable in patterns:
            if not maybe and "\\1" not in pattern.pattern:
                continue
            for match in pattern.finditer(normalised):
                if not _negated(normalised, match.start(), match.end(), pattern.pattern, negatable):
                    found[reason] = pattern.pattern.removeprefix(r"\b(?:").removesuffix(r")\b")
                    break
            if reason in found:
                break
    return found


@dataclass(frozen=True)
class Labelled:
    id: str
    text: str
    labels: tuple[str, ...]
    split: str


def read_development_set(path: Path = DATA) -> list[Labelled]:
    with Path(path).open(encoding="utf-8", newline="") as handle:
        return [
            Labelled(row["id"], row["text"], tuple(row["labels"].split(";")), row["split"])
            for row in csv.DictReader(handle)
        ]


class Model:
    """TF-IDF on words (1-2) and characters (2-5), one balanced logistic regression per reason."""

    def __init__(self, texts: list[str], labels: list[tuple[str, ...]], seed: int = 0):
        from sklearn.feature_extraction.text import TfidfVectorizer
        from sklearn.linear_model import LogisticRegression
        from sklearn.multiclass import OneVsRestClassifier
        from sklearn.pipeline import make_pipeline, make_union
        from sklearn.preprocessing import MultiLabelBinarizer

        self.binarizer = MultiLabelBinarizer(classes=list(REASON_NAMES))
        targets = self.binarizer.fit_transform(labels)
        features = make_union(
            TfidfVectorizer(ngram_range=(1, 2), sublinear_tf=True),
            TfidfVectorizer(analyzer="char_wb", ngram_range=(2, 5), sublinear_tf=True),
        )
        classifier = OneVsRestClassifier(
            LogisticRegression(C=20, class_weight="balanced", max_iter=2000, random_state=seed)
        )
        self.pipeline = make_pipeline(features, classifier)
        self.pipeline.fit([mark_negation(normalise(t)) for t in texts], targets)

    def probabilities(self, normalised: list[str]):
        return self.pipeline.predict_proba([mark_negation(n) for n in normalised])


@lru_cache(maxsize=1)
def default_model() -> Model:
    """The model trained on the development set's train split (never on its test split)."""
    train = [row for row in read_development_set() if row.split == "train"]
    return Model([r.text for r in train], [r.labels for r in train])


@dataclass(frozen=True)
class Classification:
    labels: tuple[str, ...]  # reasons in canonical order; () for "other"
    primary: str  # the most confident reason, or "other"
    decided_by: str  # e.g. "rule: repetition (repit\w*)", "model", "rule+model", "none"

    @property
    def other(self) -> bool:
        return not self.labels


def combine(rules: dict[str, str], probs) -> Classification:
    """The rules' reasons, plus the model's very confident ones; without a rule, the model's
    likely reasons, or its best one when that is at least fairly likely."""
    by_model = {name: float(p) for name, p in zip(REASON_NAMES, probs, strict=True)}
    threshold = ADD_THRESHOLD if rules else ALONE_THRESHOLD
    added = {name for name, p in by_model.items() if p >= threshold and name not in rules}
    if not rules and not added:
        best = max(by_model, key=by_model.get)
        if by_model[best] >= FALLBACK_THRESHOLD:
            added = {best}
    chosen = set(rules) | added
    if not chosen:
        return Classification((), OTHER, "none")
    labels = tuple(name for name in REASON_NAMES if name in chosen)
    primary = max(labels, key=lambda name: (name in rules, by_model[name]))
    parts = []
    if rules:
        parts.append("rule: " + "; ".join(f"{r} ({cue})" for r, cue in rules.items()))
    if added:
        parts.append("model: " + ", ".join(f"{n} {by_model[n]:.2f}" for n in sorted(added)))
    return Classification(labels, primary, " + ".join(parts))


def classify_many(texts: list[str], model: Model | None = None) -> list[Classification]:
    """Classify comments (rules, then the model on all of them at once)."""
    model = model or default_model()
    normalised = [normalise(t) for t in texts]
    if not normalised:
        return []
    probs = model.probabilities(normalised)
    return [combine(rule_reasons(n), p) for n, p in zip(normalised, probs, strict=True)]


def classify_comment(text: str) -> Classification:
    return classify_many([text])[0]


def strict_scores(gold: list[tuple[str, ...]], predicted: list[Classification]) -> dict:
    """Strict accuracy (exact label set; "other" never right), coverage, and per-label figures."""
    n = len(gold)
    exact = sum(
        set(g) == set(p.labels) and not p.other for g, p in zip(gold, predicted, strict=False)
    )
    covered = sum(not p.other for p in predicted)
    primary_right = sum(p.primary in g for g, p in zip(gold, predicted, strict=False))
    return {
        "n": n,
        "strict_accuracy": exact / n if n else None,
        "coverage": covered / n if n else None,
        "primary_accuracy": primary_right / n if n else None,
        "precision_when_labelled": (exact / covered) if covered else None,
    }


def evaluate(split: str = "test") -> dict:
    """Scores on one split of the development set with the model trained on the train split."""
    rows = [row for row in read_development_set() if row.split == split]
    predicted = classify_many([r.text for r in rows])
    return strict_scores([r.labels for r in rows], predicted) | {"split": split}
