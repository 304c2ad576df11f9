"""Decoding settings per example (pure): top-p, temperature, top-k, min-p, repetition penalty,
and RAID's grid as a preset.

Each example gets one `Decoding`, drawn in the plan from the run's `DecodingPlan`, recorded in full
in its record (`decoding`), and applied by `generation.sampling` to that example's row only.

- p = 0 means greedy decoding (argmax, ties to the lowest token id); the other settings are then
  ignored except the repetition penalty. p = 1 keeps the whole distribution.
- temperature divides the logits before top-k, top-p and min-p are applied (1 = unchanged).
- top-k keeps the k most likely tokens (None or 0 = off); min-p keeps tokens whose probability is
  at least min_p times the most likely one's (None = off).
- repetition penalty is CTRL's, over the row's own prompt and continuation (None = off).

The RAID preset (`--preset raid`) draws each example's settings from RAID's grid: greedy, and
sampling at temperature 1 with the whole distribution, each without and with repetition penalty 1.2.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field, replace

from generation.errors import PlanError

P_DECIMALS = 3


@dataclass(frozen=True)
class PDistribution:
    """Where each example's nucleus p comes from: uniform on [low, high], or a list of values.
    (It lived in generation.prompts, which still re-exports it.)"""

    low: float = 0.0
    high: float = 1.0
    values: tuple[float, ...] = ()

    @classmethod
    def parse(cls, spec: str) -> PDistribution:
        """`uniform` (on [0, 1]), `uniform:LOW:HIGH`, or values `0,0.4,1.0` (one value is fixed)."""
        spec = spec.strip()
        if spec == "uniform":
            return cls()
        if spec.startswith("uniform:"):
            parts = spec.split(":")
            if len(parts) != 3:
                raise PlanError(f"p distribution {spec!r}: expected uniform:LOW:HIGH")
            low, high = (_p_value(x, spec) for x in parts[1:])
            if low > high:
                raise PlanError(f"p distribution {spec!r}: LOW is above HIGH")
            return cls(low=low, high=high)
        values = tuple(_p_value(x, spec) for x in spec.split(",") if x.strip())
        if not values:
            raise PlanError("p distribution is empty: give `uniform` or values like 0,0.4,1.0")
        return cls(values=values)

    def draw(self, rng: random.Random) -> float:
        if self.values:
            return rng.choice(self.values)
        return round(rng.uniform(self.low, self.high), P_DECIMALS)

    def describe(self) -> str:
        if self.values:
            return ",".join(f"{v:g}" for v in self.values)
        return f"uniform:{self.low:g}:{self.high:g}"


def _p_value(text: str, spec: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise PlanError(f"p distribution {spec!r}: {text.strip()!r} is not a number") from None
    if not 0.0 <= value <= 1.0:  # also rejects nan
        raise PlanError(f"p must be in [0, 1], got {text.strip()} (in {spec!r})")
    return value


@dataclass(frozen=True)
class Decoding:
    p: float = 1.0
    temperature: float = 1.0
    top_k: int | None = None
    min_p: float | None = None
    repetition_penalty: float | None = None
    preset: str | None = None  # the grid cell's name, for a preset

    @property
    def greedy(self) -> bool:
        return self.p == 0

    @property
    def strategy(self) -> str:
        """ "greedy", "nucleus" (top-p and nothing else, RoFT's setting) or "sampling" (anything
        else: a temperature, top-k, min-p or a repetition penalty also ran)."""
        if self.greedy:
            return "greedy"
        plain = (
            self.temperature == 1
            and not self.top_k
            and self.min_p is None
            and self.repetition_penalty is None
        )
        return "nucleus" if plain else "sampling"

    @property
    def steps(self) -> list[str]:
        """What `generation.sampling.decide` does to this example's scores, in order, naming only
        the steps that change anything (a temperature of 1, p = 1 or top-k off do not)."""
        out = []
        if self.repetition_penalty is not None and self.repetition_penalty != 1:
            out.append(f"repetition_penalty={self.repetition_penalty:g}")
        if self.greedy:
            return [*out, "argmax"]
        if self.temperature != 1:
            out.append(f"temperature={self.temperature:g}")
        if self.top_k:
            out.append(f"top_k={self.top_k}")
        if self.p < 1:
            out.append(f"top_p={self.p:g}")
        if self.min_p:
            out.append(f"min_p={self.min_p:g}")
        return [*out, "sample"]

    def to_json(self, max_new_tokens: int | None = None) -> dict:
        """Every setting, explicit: what was applied to this example, nothing left to defaults."""
        out = {
            "strategy": self.strategy,
            "p": self.p,
            "temperature": None if self.greedy else self.temperature,
            "top_k": None if self.greedy else (self.top_k or None),
            "min_p": None if self.greedy else self.min_p,
            "repetition_penalty": self.repetition_penalty,
            "steps": self.steps,
            "max_new_tokens": max_new_tokens,
        }
        if self.preset:
            out["preset"] = self.preset
        return out


RAID_GRID: tuple[Decoding, ...] = (
    Decoding(p=0.0, preset="raid:greedy"),
    Decoding(p=0.0, repetition_penalty=1.2, preset="raid:greedy+rep1.2"),
    Decoding(p=1.0, temperature=1.0, preset="raid:sampling"),
    Decoding(p=1.0, temperature=1.0, repetition_penalty=1.2, preset="raid:sampling+rep1.2"),
)
PRESETS = {"raid": RAID_GRID}


def _numbers(text: str, name: str, cast=float) -> tuple:
    values = []
    for part in text.split(","):
        if not part.strip():
            continue
        try:
            values.append(cast(part.strip()))
        except ValueError:
            raise PlanError(f"{name} {text!r}: {part.strip()!r} is not a number") from None
    if not values:
        raise PlanError(f"{name} is empty")
    return tuple(values)


@dataclass(frozen=True)
class DecodingPlan:
    """Where each example's settings come from: p from `p`, each other setting one of its values
    (drawn per example when there are several), or one cell of a preset's grid."""

    p: PDistribution = field(default_factory=PDistribution)
    temperatures: tuple[float, ...] = (1.0,)
    top_ks: tuple[int | None, ...] = (None,)
    min_ps: tuple[float | None, ...] = (None,)
    repetition_penalties: tuple[float | None, ...] = (None,)
    preset: str | None = None

    @classmethod
    def build(
        cls,
        p: str = "uniform",
        temperature: str | None = None,
        top_k: str | None = None,
        min_p: str | None = None,
        repetition_penalty: str | None = None,
        preset: str | None = None,
    ) -> DecodingPlan:
        """From the command line's text values; a preset excludes the other settings."""
        if preset is not None:
            if preset not in PRESETS:
                raise PlanError(f"unknown preset {preset!r}; choose from {', '.join(PRESETS)}")
            given = [temperature, top_k, min_p, repetition_penalty]
            if any(v is not None for v in given) or p != "uniform":
                raise PlanError(
                    f"--preset {preset} sets every decoding setting: leave out --p, "
                    "--temperature, --top-k, --min-p and --repetition-penalty"
                )
            return cls(preset=preset)
        plan = cls(p=PDistribution.parse(p))
        if temperature is not None:
            plan = replace(plan, temperatures=_numbers(temperature, "--temperature"))
            if any(t <= 0 for t in plan.temperatures):
                raise PlanError("--temperature must be above 0 (use p = 0 for greedy decoding)")
        if top_k is not None:
            plan = replace(plan, top_ks=_numbers(top_k, "--top-k", int))
            if any(k < 0 for k in plan.top_ks):
                raise PlanError("--top-k must be 0 (off) or more")
        if min_p is not None:
            plan = replace(plan, min_ps=_numbers(min_p, "--min-p"))
            if any(not 0 <= m <= 1 for m in plan.min_ps):
                raise PlanError("--min-p must be in [0, 1]")
        if repetition_penalty is not None:
            values = _numbers(repetition_penalty, "--repetition-penalty")
            if any(r <= 0 for r in values):
                raise PlanError("--repetition-penalty must be above 0")
            plan = replace(plan, repetition_penalties=tuple(None if r == 1 else r for r in values))
        return plan

    def draw_p(self, rng: random.Random) -> float:
        """The first draw (kept first so plans made before the other settings existed agree)."""
        if self.preset:
            return rng.randrange(len(PRESETS[self.preset]))  # a grid index, resolved in draw()
        return self.p.draw(rng)

    def draw(self, first: float, rng: random.Random) -> Decoding:
        if self.preset:
            return PRESETS[self.preset][int(first)]
        return Decoding(
            p=first,
            temperature=rng.choice(self.temperatures),
            top_k=rng.choice(self.top_ks) or None,
            min_p=rng.choice(self.min_ps),
            repetition_penalty=rng.choice(self.repetition_penalties),
        )

    def describe(self) -> dict:
        if self.preset:
            return {"preset": self.preset, "grid": [d.to_json() for d in PRESETS[self.preset]]}
        return {
            "p": self.p.describe(),
            "temperature": list(self.temperatures),
            "top_k": list(self.top_ks),
            "min_p": list(self.min_ps),
            "repetition_penalty": list(self.repetition_penalties),
        }
