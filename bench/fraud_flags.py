"""Benchmark: what the fraud flags cost the study page and the review page, on a big study.

    .venv/bin/python bench/fraud_flags.py [--workers 300] [--rounds 12] [--repeat 5]
                                          [--database URL]

Builds a study of --workers workers (default 300) with --rounds answered rounds each, every
round with an explanation, its sentences' reveal times, and a browser per worker (a few
browsers shared by two ids, a few explanations copied), on a fresh SQLite file (or the
database at --database, whose tables are dropped and recreated). Then times, --repeat times each:

- compute: `fraud_report.compute_flags`, the flags worked out from the rows (what every page
  load cost before the cache);
- cached: `fraud_report.study_flags` once the flags are cached (the check that nothing changed,
  then the cached flags);
- the study page and the review list, signed in as a researcher, without the cache
  (FRAUD_FLAGS_CACHE = False: every load computes, as before) and with it (the first load after
  an answer pays for one compute, the others do not).

Prints the median of each and the ratio compute / cached. The numbers depend on the machine;
the ratio is what to compare.
"""

from __future__ import annotations

import argparse
import random
import statistics
import sys
import tempfile
import time
from datetime import timedelta
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

# A vocabulary of 3,000 made-up words, drawn with a heavy tail as in real text: explanations
# share common words without being alike.
_RNG = random.Random(11)
WORDS = ["".join(_RNG.choice("abcdefghijklmnoprstuvw") for _ in range(_RNG.randint(2, 9)))
         for _ in range(3000)]  # fmt: skip
WEIGHTS = [1 / (rank + 1) for rank in range(len(WORDS))]


def seed(workers: int, rounds_each: int) -> None:
    from app.accounts import service as accounts
    from app.extensions import db
    from app.models import Participant, Player, Reveal, Round, TruthView
    from app.models.base import utcnow
    from tests import factories
    from tests.crowd.helpers import make_study

    rng = random.Random(7)
    examples = [factories.example(boundary=3, category_slug="news") for _ in range(60)]
    study = make_study(rounds=rounds_each, attention_check_rate=0.0, time_limit_minutes=600)
    start = utcnow() - timedelta(days=1)
    for w in range(workers):
        player = Player(kind="crowd")
        db.session.add(player)
        db.session.flush()
        participant = Participant(
            study_id=study.id,
            player_id=player.id,
            worker_id=f"w-{w:04d}",
            platform_session=f"s-{w}",
            schedule=[],
            status="completed",
            rounds_done=rounds_each,
        )
        db.session.add(participant)
        db.session.flush()
        device = f"dev{w - 1 if w % 50 == 1 else w:06d}"  # every 50th pair shares a browser
        at = start + timedelta(minutes=w)
        for r in range(rounds_each):
            example = examples[(w + r) % len(examples)]
            if w % 40 == 3 and r < 3:
                text = "the text suddenly invents a doctor in a city that the story never named"
            else:
                text = " ".join(rng.choices(WORDS, WEIGHTS, k=rng.randint(4, 14)))
            round_ = Round(
                player_id=player.id,
                example_id=example.id,
                order_index=r,
                kind="normal",
                participant_id=participant.id,
                chosen_category="news",
                revealed=4,
                guess=3,
                points=5,
                explanation=text,
                explanation_pasted=bool(rng.random() < 0.02),
                typing_ms=rng.randint(5_000, 40_000),
                typed_chars=len(text),
                started_at=at,
                answered_at=at + timedelta(seconds=20),
            )
            db.session.add(round_)
            db.session.flush()
            for i in range(4):
                db.session.add(
                    Reveal(
                        round_id=round_.id,
                        sentence_index=i,
                        revealed_at=at + timedelta(seconds=4 * i),
                    )
                )
            db.session.add(
                TruthView(example_id=example.id, player_id=player.id, device=device, shown_at=at)
            )
            at += timedelta(seconds=30)
    db.session.commit()
    accounts.sign_up("benchlab", "a long bench password", consent=False, researcher=True)


def timed(fn, repeat: int) -> float:
    times = []
    for _ in range(repeat):
        began = time.perf_counter()
        fn()
        times.append(time.perf_counter() - began)
    return statistics.median(times)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--workers", type=int, default=300)
    parser.add_argument("--rounds", type=int, default=12)
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--database", default=None)
    args = parser.parse_args(argv)

    from app import create_app
    from app.crowd import fraud_report, lookup
    from app.extensions import db
    from tests.conftest import csrf_token

    folder = tempfile.mkdtemp(prefix="roft-fraud-bench-")
    url = args.database or f"sqlite:///{folder}/bench.sqlite3"
    app = create_app(
        {
            "TESTING": True,
            "SQLALCHEMY_DATABASE_URI": url,
            "SECRET_KEY": "bench",
            "RATELIMIT_STORAGE_URI": "memory://",
            "CACHE_TYPE": "SimpleCache",
            "PASSWORD_HASH_METHOD": "pbkdf2:sha256:2000",
        }
    )
    with app.app_context():
        db.drop_all()
        db.create_all()
        began = time.perf_counter()
        seed(args.workers, args.rounds)
        print(f"seeded {args.workers} workers x {args.rounds} rounds in "
              f"{time.perf_counter() - began:.1f} s ({url.split(':')[0]})")  # fmt: skip
        study = lookup.get_study("pilot")
        flagged = fraud_report.compute_flags(study)
        print(f"{len(flagged)} worker(s) flagged")
        compute = timed(lambda: fraud_report.compute_flags(study), args.repeat)
        fraud_report.study_flags(study)
        cached = timed(lambda: fraud_report.study_flags(study), args.repeat)
    browser = app.test_client()
    token = csrf_token(browser)
    browser.post(
        "/login",
        data={"csrf_token": token, "username": "benchlab", "password": "a long bench password"},
    )
    pages = {}
    for cached_flags in (False, True):
        app.config["FRAUD_FLAGS_CACHE"] = cached_flags
        for name, path in (
            ("study page", "/research/studies/pilot"),
            ("review list", "/research/studies/pilot/review?show=all"),
        ):
            assert browser.get(path).status_code == 200
            pages[(name, cached_flags)] = timed(lambda path=path: browser.get(path), args.repeat)
    print(f"flags computed (every load, before): {compute * 1000:8.1f} ms")
    print(f"flags cached (after):                {cached * 1000:8.1f} ms")
    print(f"ratio compute / cached:              {compute / cached:8.1f}x")
    for name in ("study page", "review list"):
        before, after = pages[(name, False)], pages[(name, True)]
        print(f"{name:12} before {before * 1000:8.1f} ms, after {after * 1000:8.1f} ms "
              f"({before / after:.1f}x)")  # fmt: skip
    with app.app_context():
        db.session.remove()
        if args.database:
            db.drop_all()
        db.engine.dispose()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
