"""When a player's record is implausible for a human, and whose addresses count as one.
Pure: no Flask, no database. The thresholds are explained in docs/players.md.

- **Exact hits.** After JUDGE_AFTER rounds, a player is unlisted when their number of exact hits
  would happen with probability below P_LIMIT (binomial upper tail) for a *strong* player: one who
  misses half as often as the site's players do on average (hit rate (1 + site rate) / 2). Judging
  against the average alone would unlist the best honest readers; judging against a strong player
  unlists records that only an answer key explains.
- **Speed.** A round read faster than MIN_SECONDS_PER_SENTENCE per revealed sentence (from the
  first sentence shown to the answer) is *fast*; after JUDGE_AFTER rounds a player whose median
  round is fast (more than half of the rounds) is unlisted. One second for a sentence of 18 words
  (the demo set's median) is over 1,000 words a minute, well beyond reading with understanding.
"""

from __future__ import annotations

import ipaddress
import math

JUDGE_AFTER = 30
P_LIMIT = 1e-6
MIN_SECONDS_PER_SENTENCE = 1.0
# Until the site has this many counted rounds its rate is noise: use RoFT's published rate.
SITE_RATE_MIN_ROUNDS = 500
DEFAULT_SITE_RATE = 0.234
EXACT_REASON = "exact hits: {exact} of {rounds} (p = {p:.1e} for a strong player at {rate:.0%})"
FAST_REASON = "faster than reading: {fast} of {rounds} rounds under {limit:g} s a sentence"


def binomial_tail(k: int, n: int, p: float) -> float:
    """P(X >= k) for X ~ Binomial(n, p), summed in log space from k upward until the terms stop
    mattering (they fall geometrically above the mean)."""
    if k <= 0:
        return 1.0
    if k > n:
        return 0.0
    if p <= 0.0:
        return 0.0
    if p >= 1.0:
        return 1.0
    log_p, log_q = math.log(p), math.log1p(-p)

    def log_term(i: int) -> float:
        return (
            math.lgamma(n + 1)
            - math.lgamma(i + 1)
            - math.lgamma(n - i + 1)
            + i * log_p
            + (n - i) * log_q
        )

    if k <= n * p:
        # At or below the mean the tail is at least about one half: sum the other side.
        return 1.0 - sum(math.exp(log_term(i)) for i in range(0, k))
    total = 0.0
    for i in range(k, n + 1):
        term = math.exp(log_term(i))
        total += term
        if term < total * 1e-12:
            break
    return min(total, 1.0)


def strong_rate(site_rate: float) -> float:
    """The exact-hit rate of a player who misses half as often as the site's average."""
    return (1.0 + min(max(site_rate, 0.0), 1.0)) / 2.0


def site_rate(exact: int, rounds: int) -> float:
    """The site's exact-hit rate, or RoFT's published one while the site has few rounds."""
    if rounds < SITE_RATE_MIN_ROUNDS:
        return DEFAULT_SITE_RATE
    return exact / rounds


def is_fast(seconds: float, revealed: int) -> bool:
    """Whether a round was answered faster than anyone reads its revealed sentences."""
    return seconds < MIN_SECONDS_PER_SENTENCE * max(revealed, 1)


def implausible(rounds: int, exact: int, fast_rounds: int, site_exact_rate: float) -> str | None:
    """Why a record is implausible for a human, or None; judged only after JUDGE_AFTER rounds."""
    if rounds < JUDGE_AFTER:
        return None
    if 2 * fast_rounds > rounds:
        return FAST_REASON.format(fast=fast_rounds, rounds=rounds, limit=MIN_SECONDS_PER_SENTENCE)
    rate = strong_rate(site_exact_rate)
    p = binomial_tail(exact, rounds, rate)
    if p < P_LIMIT:
        return EXACT_REASON.format(exact=exact, rounds=rounds, p=p, rate=rate)
    return None


def address_identity(address: str | None) -> str | None:
    """The part of a client address that identifies one household: the whole IPv4 address, the
    /64 network of an IPv6 one. None for an address that is not public (loopback, private, a
    proxy the site was not told about), which would make every player look like one."""
    if not address:
        return None
    try:
        ip = ipaddress.ip_address(address.strip())
    except ValueError:
        return None
    if ip.version == 6 and ip.ipv4_mapped is not None:
        ip = ip.ipv4_mapped
    if not ip.is_global:
        return None
    if ip.version == 6:
        return str(ipaddress.ip_network(f"{ip}/64", strict=False))
    return str(ip)
