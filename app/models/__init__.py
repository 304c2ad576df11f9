"""The data model, one module per concern. Importing this package registers every table."""

from app.models.content import Category, Example, System
from app.models.players import Player, PlayerSurvey
from app.models.rounds import Reveal, Round
from app.models.standings import CategoryTotal, PlayerTotal
from app.models.studies import (
    Participant,
    ParticipantStatus,
    Platform,
    Study,
    StudyBonus,
    StudyDecision,
)

__all__ = [
    "Category",
    "CategoryTotal",
    "Example",
    "Participant",
    "ParticipantStatus",
    "Platform",
    "Player",
    "PlayerSurvey",
    "PlayerTotal",
    "Reveal",
    "Round",
    "Study",
    "StudyBonus",
    "StudyDecision",
    "System",
]
