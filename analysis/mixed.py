"""Mixed models with crossed random effects for annotator and text, on all the rows.

One entry point, `fit`, serves every analysis that needs a model (the factor and learning
sections, the confirmatory analysis, the power simulation):

- points and signed distance: a linear mixed model, R's lme4 `lmer` through lmerTest (REML;
  t tests of each fixed effect with Satterthwaite degrees of freedom, and a joint F test of a set
  of them with `lmerTest::contest`);
- exact hit: a logistic mixed model, lme4 `glmer` (binomial, Laplace approximation); Wald z of
  each fixed effect, a joint Wald χ² of a set, and odds ratios with their intervals. Above
  `LAPLACE_MAX_ROWS` rows it is fitted with lme4's `nAGQ = 0` (the fixed effects estimated inside
  the penalised least squares step), which is faster and less exact; the result says so.

Random intercepts for annotator and text always; `slopes` adds a random slope of those fixed
effects by text (a condition whose effect may differ between texts). When that fit is singular
or does not converge, the slope is dropped, the intercepts-only model is reported, and the result
says so: the data did not support the slope.

R is reached through rpy2 (scripts/ensure-r.sh installs r-base-core, r-cran-lme4 and
r-cran-lmertest). Without R the fallbacks are named in `library`: statsmodels MixedLM (linear, up
to `STATSMODELS_MAX_ROWS`, where its dense crossed design stays fast), else least squares or a
logistic GLM with two-way clustered standard errors. Every result carries `library`, `model`,
`converged` and every warning the fit raised; nothing is silenced.
"""

from __future__ import annotations

import functools
import os
import warnings
from dataclasses import asdict, dataclass, field

import numpy as np
import pandas as pd
from scipy import stats

LEVEL = 0.95
FAMILIES = {"points": "gaussian", "distance": "gaussian", "exact_hit": "binomial"}
STATSMODELS_MAX_ROWS = 3000  # statsmodels' crossed effects are dense variance components
# The logistic model's Laplace fit over (variances, fixed effects) runs the penalised least
# squares once per step of its optimiser; at 10^6 rows that takes hours on a small machine, so
# larger data get nAGQ = 0 (docs/analysis.md, "Mixed models at scale").
LAPLACE_MAX_ROWS = 200_000

_R_CODE = r"""
roft_mixed_fit <- function(y, X, a, t, binomial, slopes, nagq) {
  d <- data.frame(y = y, a = factor(a), t = factor(t))
  xs <- paste0("x", seq_len(ncol(X)) - 1L)
  for (i in seq_along(xs)) d[[xs[i]]] <- X[, i]
  rhs <- paste(c("0", xs), collapse = " + ")
  text_term <- if (length(slopes)) {
    paste0("(1 + ", paste(xs[slopes + 1L], collapse = " + "), " | t)")
  } else "(1 | t)"
  f <- stats::as.formula(paste("y ~", rhs, "+ (1 | a) +", text_term))
  notes <- character(0)
  keep <- function(w) notes <<- c(notes, conditionMessage(w))
  model <- withCallingHandlers(
    if (binomial) {
      lme4::glmer(f, data = d, family = stats::binomial, nAGQ = nagq,
                  control = lme4::glmerControl(optimizer = "bobyqa"))
    } else {
      lme4::lmer(f, data = d, REML = TRUE)
    },
    warning = function(w) { keep(w); invokeRestart("muffleWarning") },
    message = function(m) { keep(m); invokeRestart("muffleMessage") }
  )
  notes <- unique(trimws(c(notes, model@optinfo$conv$lme4$messages)))
  list(singular = lme4::isSingular(model), warnings = as.character(notes), model = model)
}
roft_mixed_describe <- function(fitted, binomial) {
  model <- fitted$model
  notes <- character(0)
  if (!binomial) {
    # lmerTest's Satterthwaite degrees of freedom, on the model lme4 fitted
    model <- withCallingHandlers(
      lmerTest::as_lmerModLmerTest(model),
      warning = function(w) {
        notes <<- c(notes, conditionMessage(w))
        invokeRestart("muffleWarning")
      }
    )
  }
  co <- summary(model)$coefficients
  vc <- as.data.frame(lme4::VarCorr(model))
  list(
    estimate = unname(co[, 1]), se = unname(co[, 2]),
    df = if (binomial) rep(Inf, nrow(co)) else unname(co[, "df"]),
    vcov = as.matrix(stats::vcov(model)),
    vc_group = as.character(vc$grp), vc_var1 = ifelse(is.na(vc$var1), "", vc$var1),
    vc_var2 = ifelse(is.na(vc$var2), "", vc$var2), vc_value = vc$vcov,
    singular = fitted$singular, warnings = unique(trimws(c(fitted$warnings, notes))),
    loglik = as.numeric(stats::logLik(model)), model = model
  )
}
roft_mixed_contest <- function(model, L) {
  out <- lmerTest::contest(model, L, joint = TRUE, ddf = "Satterthwaite")
  c(out[["F value"]], out[["NumDF"]], out[["DenDF"]], out[["Pr(>F)"]])
}
"""


@dataclass
class MixedResult:
    """One fitted model: what was fitted, by which library, its effects and its test."""

    outcome: str
    family: str
    library: str
    model: str
    n: int
    groups: dict[str, int]
    converged: bool
    effects: list[dict]
    test: dict | None = None  # the joint test of the `test` terms
    variances: dict[str, float] = field(default_factory=dict)
    random_slope: bool = False
    warnings: list[str] = field(default_factory=list)

    @property
    def is_mixed(self) -> bool:
        """A model with random effects (not the clustered fallback)."""
        return "clustered" not in self.model

    @property
    def p_value(self) -> float | None:
        return None if self.test is None else self.test.get("p_value")

    def as_dict(self) -> dict:
        out = asdict(self)
        out["p_value"] = self.p_value
        out["is_mixed"] = self.is_mixed
        return out


@functools.cache
def r_available() -> str | None:
    """The R and lme4 versions when R, lme4, lmerTest and rpy2 are all importable, else None.

    Starting R sets LD_LIBRARY_PATH to R's and the system's library folders in this process's
    environment; every program started afterwards (a server, a worker, a test's subprocess) would
    inherit it and could load the system's libpython instead of its own. R's libraries are loaded
    by then, so the variable is put back as it was."""
    library_path = os.environ.get("LD_LIBRARY_PATH")
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            import rpy2.robjects as ro
        ro.r("suppressPackageStartupMessages({library(lme4); library(lmerTest)})")
        ro.r(_R_CODE)
        version = ro.r(
            'paste0("R ", R.version$major, ".", R.version$minor, ", lme4 ", '
            'format(packageVersion("lme4")), ", lmerTest ", format(packageVersion("lmerTest")))'
        )
        return str(version[0])
    except Exception:  # no R, no rpy2, or no lme4: the fallback is named
        return None
    finally:
        if library_path is None:
            os.environ.pop("LD_LIBRARY_PATH", None)
        else:
            os.environ["LD_LIBRARY_PATH"] = library_path


def design(
    frame: pd.DataFrame, column: str, numeric: bool = False, reference: str | None = None
) -> tuple[np.ndarray, list[str]]:
    """A constant and `column` (numeric), or a constant and indicators of every level but the
    reference (`reference`, else the first in sorted order; named "(reference) level")."""
    values = frame[column]
    if numeric:
        return np.column_stack([np.ones(len(values)), values.to_numpy(float)]), [
            "intercept",
            column,
        ]
    levels = sorted(values.astype(str).unique())
    if reference is not None and reference in levels:
        levels.remove(reference)
        levels.insert(0, reference)
    codes = pd.Categorical(values.astype(str), categories=levels).codes
    x = np.column_stack([np.ones(len(values))] + [codes == i for i in range(1, len(levels))])
    return x.astype(float), ["(reference) " + levels[0], *levels[1:]]


def outcome_values(frame: pd.DataFrame, outcome: str) -> np.ndarray:
    """exact_hit (0/1), points (0–5) or distance (guess − boundary, signed) per row; a column of
    that name when the frame has one (simulated studies)."""
    if outcome in frame.columns:
        return frame[outcome].to_numpy(float)
    if outcome == "exact_hit":
        return (frame["guess"] == frame["boundary"]).to_numpy(float)
    if outcome == "distance":
        return (frame["guess"] - frame["boundary"]).to_numpy(float)
    raise ValueError(f"unknown outcome {outcome!r} (exact_hit, points or distance)")


def fit(
    frame: pd.DataFrame,
    x: np.ndarray,
    names: list[str],
    test: list[int] | None = None,
    outcome: str = "points",
    slopes: list[int] | None = None,
    engine: str = "auto",
) -> MixedResult | None:
    """Fit `outcome` on the fixed effects x (with its own constant) with crossed random
    intercepts for annotator and text, and a random slope by text of the columns `slopes` when
    the data support it. `test`: the columns tested jointly. engine: "auto" (lme4 when R is
    there), "lme4", "statsmodels" or "clustered". None when there are too few rows to fit."""
    y = outcome_values(frame, outcome)
    x = np.asarray(x, dtype=float)
    test = list(test or [])
    family = "binomial" if outcome == "exact_hit" else "gaussian"
    if len(y) <= x.shape[1] + 2 or np.linalg.matrix_rank(x) < x.shape[1]:
        return None
    annotators = pd.factorize(frame["annotator"])[0]
    texts = pd.factorize(frame["example"])[0]
    notes: list[str] = []
    if engine in ("auto", "lme4"):
        version = r_available()
        if version is None and engine == "lme4":
            raise RuntimeError("R with lme4 and lmerTest is not available (scripts/ensure-r.sh)")
        if version is None:
            notes.append("R with lme4 was not found (scripts/ensure-r.sh installs it): fallback")
        else:
            try:
                return _fit_lme4(
                    y, x, names, test, outcome, family, slopes, annotators, texts, version
                )
            except Exception as error:  # lme4 refused the data (an R error): said, then fallback
                if engine == "lme4":
                    raise
                message = str(error).strip().removeprefix("Error:").strip()
                notes.append(f"lme4 could not fit this data ({message}): fallback used")
    if family == "gaussian" and engine != "clustered" and len(y) <= STATSMODELS_MAX_ROWS:
        result = _fit_statsmodels(y, x, names, test, outcome, annotators, texts)
        if result is not None:
            result.warnings[:0] = notes
            return result
    result = _fit_clustered(y, x, names, test, outcome, family, annotators, texts)
    result.warnings[:0] = notes
    return result


def _effects(names, estimate, se, df, p) -> list[dict]:
    out = []
    for i, name in enumerate(names):
        q = (
            stats.norm.ppf(0.5 + LEVEL / 2)
            if not np.isfinite(df[i])
            else stats.t.ppf(0.5 + LEVEL / 2, df[i])
        )
        out.append(
            {
                "term": name,
                "estimate": float(estimate[i]),
                "se": float(se[i]),
                "df": float(df[i]) if np.isfinite(df[i]) else None,
                "ci_low": float(estimate[i] - q * se[i]),
                "ci_high": float(estimate[i] + q * se[i]),
                "p_value": float(p[i]),
            }
        )
    return out


def _odds_ratios(effects: list[dict]) -> None:
    for effect in effects:
        for key in ("estimate", "ci_low", "ci_high"):
            effect["odds_ratio" if key == "estimate" else f"or_{key}"] = float(
                np.exp(np.clip(effect[key], -700, 700))
            )


def _wald(estimate: np.ndarray, cov: np.ndarray, test: list[int]) -> dict | None:
    if not test:
        return None
    beta, v = estimate[test], cov[np.ix_(test, test)]
    try:
        statistic = float(beta @ np.linalg.solve(v, beta))
    except np.linalg.LinAlgError:
        return {"kind": "Wald χ²", "statistic": None, "df": len(test), "p_value": None}
    return {
        "kind": "Wald χ²",
        "statistic": statistic,
        "df": len(test),
        "p_value": float(stats.chi2.sf(statistic, len(test))),
    }


def _fit_lme4(y, x, names, test, outcome, family, slopes, annotators, texts, version):
    import rpy2.robjects as ro
    from rpy2.robjects import numpy2ri

    binomial = family == "binomial"
    laplace = not binomial or len(y) <= LAPLACE_MAX_ROWS
    function = ro.globalenv["roft_mixed_fit"]
    with (ro.default_converter + numpy2ri.converter).context():
        args = (
            np.ascontiguousarray(y),
            np.asfortranarray(x),
            annotators.astype(np.int32),
            texts.astype(np.int32),
        )
        raw, slope_notes = None, []
        if slopes:
            raw = function(*args, binomial, np.asarray(slopes, dtype=np.int32), int(laplace))
            trouble = _trouble(raw)
            if trouble:
                slope_notes.append(
                    "the random slope of "
                    + ", ".join(names[i] for i in slopes)
                    + " by text was dropped (the data do not support it: "
                    + "; ".join(trouble)
                    + "); random intercepts only"
                )
                raw = None
        if raw is None:
            raw = function(*args, binomial, np.asarray([], dtype=np.int32), int(laplace))
        r = dict(ro.globalenv["roft_mixed_describe"](raw, binomial).items())
        estimate = np.asarray(r["estimate"], float)
        se = np.asarray(r["se"], float)
        df = np.asarray(r["df"], float)
        cov = np.asarray(r["vcov"], float)
        found = [str(w) for w in r["warnings"]]
        singular = bool(np.asarray(r["singular"])[0])
        joint = None
        if test and not binomial:
            matrix = np.zeros((len(test), x.shape[1]))
            matrix[np.arange(len(test)), test] = 1.0
            f_value, num, den, p = np.asarray(
                ro.globalenv["roft_mixed_contest"](r["model"], matrix), float
            )
            joint = {
                "kind": "F (Satterthwaite)",
                "statistic": float(f_value),
                "df": round(num),
                "df_denominator": float(den),
                "p_value": float(p),
            }
    if binomial:
        p = 2 * stats.norm.sf(np.abs(estimate / se))
        joint = _wald(estimate, cov, test)
    else:
        p = 2 * stats.t.sf(np.abs(estimate / se), df)
    effects = _effects(names, estimate, se, df, p)
    if binomial:
        _odds_ratios(effects)
    random_slope = bool(slopes) and not slope_notes
    variances = {}
    for group, var1, var2, value in zip(
        r["vc_group"], r["vc_var1"], r["vc_var2"], np.asarray(r["vc_value"], float), strict=True
    ):
        label = {"a": "annotator", "t": "text", "Residual": "residual"}.get(str(group), str(group))
        if str(var1) not in ("(Intercept)", "") and str(var2) == "":
            label += " slope " + names[int(str(var1)[1:])]
        elif str(var2) != "":
            continue  # a covariance, not a variance
        variances[label] = float(value)
    all_notes = (
        slope_notes
        + (
            []
            if laplace
            else [
                f"fitted with lme4's nAGQ = 0 (above {LAPLACE_MAX_ROWS:,} rows): faster and "
                "less exact than the Laplace approximation"
            ]
        )
        + found
        + (
            ["the fit is singular (a variance estimated as 0)"]
            if (singular and not any("singular" in w for w in found))
            else []
        )
    )
    converged = not any("converge" in w.lower() for w in found)
    if binomial:
        kind = "glmer (binomial, logit, " + ("Laplace)" if laplace else "nAGQ = 0)")
    else:
        kind = "lmer (REML), lmerTest Satterthwaite"
    text_term = "(1 + slope | text)" if random_slope else "(1 | text)"
    return MixedResult(
        outcome=outcome,
        family=family,
        library=f"{version} ({kind})",
        model=f"{outcome} ~ fixed + (1 | annotator) + {text_term}",
        n=len(y),
        groups={"annotators": int(annotators.max()) + 1, "texts": int(texts.max()) + 1},
        converged=converged,
        effects=effects,
        test=joint,
        variances=variances,
        random_slope=random_slope,
        warnings=all_notes,
    )


def _trouble(raw) -> list[str]:
    r = dict(raw.items())
    notes = [str(w) for w in r["warnings"]]
    if bool(np.asarray(r["singular"])[0]) and not any("singular" in n for n in notes):
        notes.append("singular fit")
    return notes


def _fit_statsmodels(y, x, names, test, outcome, annotators, texts) -> MixedResult | None:
    import statsmodels
    from statsmodels.regression.mixed_linear_model import MixedLM

    data = pd.DataFrame({"y": y, "a": annotators, "t": texts, "g": 0})
    exog = pd.DataFrame(x, columns=[f"x{i}" for i in range(x.shape[1])])
    vc = {"annotator": "0 + C(a)", "text": "0 + C(t)"}
    found: list[str] = []
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            model = MixedLM.from_formula(
                "y ~ 0 + " + " + ".join(exog.columns),
                pd.concat([data, exog], axis=1),
                groups="g",
                vc_formula=vc,
            )
            result = model.fit(reml=True, method=["nm", "powell", "lbfgs"])
        except (np.linalg.LinAlgError, ValueError) as error:
            found.append(f"statsmodels MixedLM failed: {error}")
            result = None
    found += sorted({str(w.message) for w in caught})
    if result is None:
        return None
    estimate = np.asarray(result.fe_params, float)
    k = x.shape[1]
    cov = np.asarray(result.cov_params())[:k, :k]
    se = np.sqrt(np.clip(np.diag(cov), 0, None))
    df = np.full(k, np.inf)
    effects = _effects(names, estimate, se, df, 2 * stats.norm.sf(np.abs(estimate / se)))
    return MixedResult(
        outcome=outcome,
        family="gaussian",
        library=f"statsmodels {statsmodels.__version__} MixedLM (REML; z tests)",
        model=f"{outcome} ~ fixed + (1 | annotator) + (1 | text)",
        n=len(y),
        groups={"annotators": int(annotators.max()) + 1, "texts": int(texts.max()) + 1},
        converged=bool(result.converged),
        effects=effects,
        test=_wald(estimate, cov, test),
        variances={
            "annotator": float(result.vcomp[0]),
            "text": float(result.vcomp[1]),
            "residual": float(result.scale),
        },
        warnings=found + ([] if result.converged else ["statsmodels MixedLM did not converge"]),
    )


def _fit_clustered(y, x, names, test, outcome, family, annotators, texts) -> MixedResult:
    import statsmodels
    import statsmodels.api as sm

    found: list[str] = []
    clusters = np.column_stack([annotators, texts])
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        if family == "binomial":
            model = sm.GLM(y, x, family=sm.families.Binomial())
            kind = "logistic GLM"
        else:
            model = sm.OLS(y, x)
            kind = "least squares"
        result = model.fit(cov_type="cluster", cov_kwds={"groups": clusters})
    found += sorted({str(w.message) for w in caught})
    found.append(
        "no mixed model: fixed effects with standard errors clustered by annotator and by text"
    )
    estimate = np.asarray(result.params, float)
    cov = np.asarray(result.cov_params(), float)
    se = np.sqrt(np.clip(np.diag(cov), 0, None))
    g = min(int(annotators.max()) + 1, int(texts.max()) + 1)
    df = np.full(len(names), float(max(g - 1, 1)))
    effects = _effects(names, estimate, se, df, 2 * stats.t.sf(np.abs(estimate / se), df))
    if family == "binomial":
        _odds_ratios(effects)
    return MixedResult(
        outcome=outcome,
        family=family,
        library=f"statsmodels {statsmodels.__version__} {kind}, two-way clustered SEs",
        model=f"{outcome} ~ fixed (clustered by annotator and text)",
        n=len(y),
        groups={"annotators": int(annotators.max()) + 1, "texts": int(texts.max()) + 1},
        converged=True,
        effects=effects,
        test=_wald(estimate, cov, test),
        warnings=found,
    )
