"""Prolific end to end through its API: a draft study made from the study file, publish, pause,
the study's places and submissions synced into our participants, and messages to workers.
Acting on verify's decisions and paying bonuses exactly once from the ledger is
app/crowd/prolific_pay.py.

The client (app/crowd/prolific_api.py) speaks Prolific's documented request shapes; this module
decides what to send and records what came back. Money and messages follow one rule: the
intent is committed to the database before the call that cannot be taken back, so a crash or a
lost answer is never followed by a second payment or a second message.
"""

from __future__ import annotations

import hashlib
import json
import math
from collections import Counter
from dataclasses import dataclass, field

from sqlalchemy import select, update
from sqlalchemy.exc import IntegrityError

from app.crowd import links
from app.crowd.admission import mark_left
from app.crowd.lookup import FINISHED, config_of
from app.crowd.prolific_api import ProlificClient, ProlificError
from app.crowd.reports import latest_decisions
from app.crowd.verify_submissions import APPROVE, LEFT_STATUSES, REJECT, normal_status
from app.errors import BadRequest, Conflict
from app.extensions import db
from app.models import Participant, ParticipantStatus, Study
from app.models.base import utcnow
from app.models.studies import StudyMessage

# Our outcomes -> Prolific's completion code types. Every code asks for a manual review, so
# that `flask study verify` decides: with "approve and pay" on a code, a worker who failed the
# checks would be paid before verify sees them (docs/running-a-study.md).
CODE_TYPES = {
    "completed": "COMPLETED",
    "failed_checks": "FAILED_ATTENTION_CHECK",
    "screened_out": "OTHER",
}
CODE_ACTION = "MANUALLY_REVIEW"
MESSAGE_MAX = 5000


# -- the draft study ------------------------------------------------------------------------


def study_body(study: Study, external_url: str, places: int | None = None) -> dict:
    """The body of Prolific's 'create a draft study' call, from the study file.

    Raises BadRequest when the file lacks what Prolific needs (a number of places, a
    reward, a completed code)."""
    config = config_of(study)
    places = places or config.places
    if not places:
        raise BadRequest(
            "Prolific needs a number of places: set `places` in the study file or pass --places"
        )
    if config.reward <= 0:
        raise BadRequest("Prolific needs a reward: set `reward` in the study file")
    if "completed" not in config.completion_codes:
        raise BadRequest("the study file has no completion_codes.completed")
    description = config.description or (
        f"Read short texts sentence by sentence and say where a computer took over from a "
        f"person. About {config.expected_minutes:g} minutes."
    )
    return {
        "name": config.title,
        "internal_name": f"roft:{study.slug}",
        "description": description,
        "external_study_url": external_url,
        "prolific_id_option": "url_parameters",
        "completion_codes": [
            {
                "code": code,
                "code_type": CODE_TYPES.get(outcome, "OTHER"),
                "actions": [{"action": CODE_ACTION}],
            }
            for outcome, code in config.completion_codes.items()
        ],
        "estimated_completion_time": max(1, math.ceil(config.expected_minutes)),
        "reward": round(config.reward * 100),
        "total_available_places": int(places),
        "device_compatibility": ["desktop", "tablet", "mobile"],
    }


def _prolific_id(study: Study) -> str:
    if not study.prolific_study_id:
        raise Conflict(
            f"study {study.slug!r} has no Prolific study yet: run "
            f"`flask study prolific create {study.slug}` first"
        )
    return study.prolific_study_id


def create_draft(client: ProlificClient, study: Study, places: int | None = None) -> dict:
    """Create the study's draft on Prolific and keep its id on the study. Refused when the study
    already has one: a second draft would split the workers."""
    if study.platform != "prolific":
        raise Conflict(f"study {study.slug!r} runs on {study.platform}, not Prolific")
    if study.prolific_study_id:
        raise Conflict(
            f"study {study.slug!r} already has the Prolific study {study.prolific_study_id}"
        )
    url = links.entry_link(study)
    if url is None:
        raise BadRequest(
            "the study link is not known: set PUBLIC_URL to the site's public https address"
        )
    answer = client.create_study(study_body(study, url, places))
    study.prolific_study_id = str(answer["id"])
    db.session.commit()
    return answer


def use_existing(client: ProlificClient, study: Study, prolific_id: str) -> dict:
    """Keep an existing Prolific study as the study's (a draft whose creation lost its answer,
    or one made on the website), once Prolific shows it and its link leads to this study."""
    if study.prolific_study_id:
        raise Conflict(
            f"study {study.slug!r} already has the Prolific study {study.prolific_study_id}"
        )
    answer = client.study(prolific_id) or {}
    link = links.entry_link(study)
    url = answer.get("external_study_url") or ""
    if link is None or url.split("?")[0] != link.split("?")[0]:
        raise Conflict(
            f"the Prolific study {prolific_id} does not lead to this study's link "
            f"({url or 'no link'})"
        )
    study.prolific_study_id = str(answer.get("id") or prolific_id)
    db.session.commit()
    return answer


# action -> the statuses it starts from, and the status it leads to
TRANSITIONS = {
    "PUBLISH": (("UNPUBLISHED",), "ACTIVE"),
    "PAUSE": (("ACTIVE",), "PAUSED"),
    "START": (("PAUSED",), "ACTIVE"),
}


def _transition(client: ProlificClient, study: Study, action: str) -> tuple[dict, bool]:
    """Move the study on Prolific, unless it is there already: (Prolific's study, whether it
    moved). Reading the status first makes a second run a no-op."""
    prolific_id = _prolific_id(study)
    current = client.study(prolific_id) or {}
    sources, target = TRANSITIONS[action]
    if current.get("status") == target:
        return current, False
    if current.get("status") not in sources:
        raise Conflict(
            f"the Prolific study {prolific_id} is {current.get('status')}: it cannot be "
            f"{'published' if action == 'PUBLISH' else action.lower() + 'ed'} from there"
        )
    answer = client.transition_study(prolific_id, action)
    return (answer if isinstance(answer, dict) else {"status": target}), True


def publish(client: ProlificClient, study: Study) -> tuple[dict, bool]:
    return _transition(client, study, "PUBLISH")


def pause(client: ProlificClient, study: Study) -> tuple[dict, bool]:
    return _transition(client, study, "PAUSE")


def start_again(client: ProlificClient, study: Study) -> tuple[dict, bool]:
    return _transition(client, study, "START")


# -- syncing --------------------------------------------------------------------------------


@dataclass
class Synced:
    study_status: str | None
    places: int | None
    places_taken: int | None
    by_status: Counter = field(default_factory=Counter)
    marked_left: list[str] = field(default_factory=list)
    unknown: list[str] = field(default_factory=list)  # on Prolific, never seen on the site
    kept: list[str] = field(default_factory=list)  # left on Prolific; our record stands
    # approved or rejected on Prolific with no such decision here (apply records them)
    decided_there: list[str] = field(default_factory=list)


def sync(client: ProlificClient, study: Study) -> Synced:
    """Read the study and its submissions on Prolific. A worker who returned the submission or
    ran out of time there, and is still playing here, is marked returned / timed out, which
    frees their place. A decision of ours (approve, reject, a finished outcome) is never
    overwritten: such workers are only listed."""
    prolific_id = _prolific_id(study)
    info = client.study(prolific_id) or {}
    submissions = list(client.submissions(prolific_id))
    participants = {
        p.worker_id: p
        for p in db.session.scalars(select(Participant).where(Participant.study_id == study.id))
    }
    decided = latest_decisions(study)
    result = Synced(
        info.get("status"), info.get("total_available_places"), info.get("places_taken")
    )
    now = utcnow()
    for sub in submissions:
        # Prolific's status words as verify reads them ('TIMED_OUT' -> 'TIMED-OUT').
        status = normal_status(sub.get("status")) or ""
        result.by_status[status] += 1
        worker = sub.get("participant_id") or ""
        participant = participants.get(worker)
        if participant is None:
            result.unknown.append(worker)
            continue
        ours = decided.get(participant.id)
        there = {"APPROVED": APPROVE, "REJECTED": REJECT}.get(status)
        if there and (ours is None or ours.decision != there):
            result.decided_there.append(worker)
        if status not in LEFT_STATUSES:
            continue
        if participant.status == ParticipantStatus.started and (
            ours is None or ours.decision not in (APPROVE, REJECT)
        ):
            mark_left(participant, LEFT_STATUSES[status], now)
            result.marked_left.append(worker)
        elif participant.status in FINISHED or ours is not None:
            result.kept.append(worker)
    db.session.commit()
    return result


# -- messages -------------------------------------------------------------------------------


def message(client: ProlificClient, study: Study, worker_id: str, body: str) -> str:
    """Send `body` to a worker of the study, once: the same text to the same worker is never
    sent twice: "sent", "already sent" or "unconfirmed". The row is committed as `sending` before
    the call; a lost answer leaves it so, and it is not sent again (Prolific may have delivered
    it)."""
    body = body.strip()
    if not body:
        raise BadRequest("the message is empty")
    if len(body) > MESSAGE_MAX:
        raise BadRequest(f"the message is longer than {MESSAGE_MAX} characters")
    prolific_id = _prolific_id(study)
    known = db.session.scalar(
        select(Participant.id).where(
            Participant.study_id == study.id, Participant.worker_id == worker_id
        )
    )
    if known is None:
        raise BadRequest(f"{worker_id!r} never joined study {study.slug!r}")
    digest = hashlib.sha256(body.encode()).hexdigest()
    row = db.session.scalar(
        select(StudyMessage).where(
            StudyMessage.study_id == study.id,
            StudyMessage.worker_id == worker_id,
            StudyMessage.body_hash == digest,
        )
    )
    if row is not None and row.state == "sent":
        return "already sent"
    if row is not None and row.state == "sending":
        return "unconfirmed"
    if row is None:
        row = StudyMessage(
            study_id=study.id, worker_id=worker_id, body_hash=digest, body=body, state="sending"
        )
        db.session.add(row)
        try:
            db.session.commit()
        except IntegrityError:  # another run is sending the same message right now
            db.session.rollback()
            return "unconfirmed"
    else:  # failed before: try again, unless another run already does
        taken = db.session.execute(
            update(StudyMessage)
            .where(StudyMessage.id == row.id, StudyMessage.state == "failed")
            .values(state="sending", created_at=utcnow())
            .execution_options(synchronize_session=False)
        )
        db.session.commit()
        if taken.rowcount != 1:
            return "unconfirmed"
    try:
        answer = client.send_message(worker_id, prolific_id, body)
    except ProlificError as error:
        if not error.uncertain:  # refused: nothing was sent, a later run may try again
            row.state = "failed"
        row.platform_ref = json.dumps({"error": str(error)})
        db.session.commit()
        raise
    row.state, row.sent_at = "sent", utcnow()
    row.platform_ref = json.dumps({"answer": answer})
    db.session.commit()
    return "sent"
