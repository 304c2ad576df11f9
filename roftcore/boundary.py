"""The boundary convention and RoFT's scoring rule (pure).

An example has N sentences s[0..N-1]; s[0] is always human-written. `boundary` is the 0-based index
of the first machine-written sentence, 1 <= boundary <= N, and boundary = N means the whole text is
human-written. A guess `g` is the index of the sentence the player flagged as machine-written, or
N for "all human".

RoFT's public dataset (`roft.csv`) counts one less: `true_boundary_index = boundary - 1` (index of
the last human sentence; N - 1 = all human) and `predicted_boundary_index = guess - 1`. Convert
only at the edges, with `from_roft_index` / `to_roft_index`.
"""

from __future__ import annotations

from dataclasses import dataclass

MAX_POINTS = 5
CONVENTION = (
    "boundary = 0-based index of the first machine-written sentence (1..N; N = all human); "
    "guess = index of the flagged sentence (N = 'all human'); RoFT's roft.csv indices are one less"
)


def points(guess: int, boundary: int) -> int:
    """5 for the exact boundary, one less per sentence late (never below 0), 0 when too early."""
    if guess < boundary:
        return 0
    return max(MAX_POINTS - (guess - boundary), 0)


def distance(guess: int, boundary: int) -> int:
    """Signed distance in sentences: negative when too early, positive when late."""
    return guess - boundary


def to_roft_index(position: int) -> int:
    """A boundary or guess in our convention as RoFT's index (one less)."""
    return position - 1


def from_roft_index(index: int) -> int:
    """RoFT's true/predicted boundary index as our boundary or guess (one more)."""
    return index + 1


@dataclass(frozen=True)
class Verdict:
    points: int
    distance: int
    message: str

    @property
    def exact(self) -> bool:
        return self.distance == 0

    @property
    def too_early(self) -> bool:
        return self.distance < 0


def verdict(guess: int, boundary: int, n_sentences: int) -> Verdict:
    """Points plus the short message shown when the truth is revealed."""
    d = distance(guess, boundary)
    all_human = boundary == n_sentences
    if d == 0:
        message = "Right: the whole text was human-written!" if all_human else "Exact!"
    elif d < 0:
        if all_human:
            message = "Too early: the whole text was human-written."
        else:
            n = -d
            message = f"Too early, by {n} sentence{'s' if n != 1 else ''}."
    else:
        message = f"{d} sentence{'s' if d != 1 else ''} late."
    return Verdict(points=points(guess, boundary), distance=d, message=message)


def validate_boundary(boundary: int, n_sentences: int) -> None:
    """Raise ValueError unless 1 <= boundary <= N (s[0] is always human-written)."""
    if n_sentences < 2:
        raise ValueError(f"an example needs at least 2 sentences, got {n_sentences}")
    if not 1 <= boundary <= n_sentences:
        raise ValueError(f"boundary must be between 1 and {n_sentences}, got {boundary}")
