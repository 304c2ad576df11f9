"""The data model, one module per concern. Importing this package registers every table."""

from app.models.coding import CodingLabel, CodingSample
from app.models.content import Category, Example, ExamplePassage, Passage, PassageRead, System
from app.models.experiments import ConditionSlot, StudyPlan
from app.models.players import LoginFailure, Player, PlayerSurvey
from app.models.rounds import ExplanationVote, Reveal, Round, TruthView
from app.models.sets import DailyChallenge, GameSet
from app.models.standings import (
    BoardCount,
    BoardCountDelta,
    BoardTotal,
    CategoryTotal,
    PlayerTotal,
)
from app.models.studies import (
    Participant,
    ParticipantStatus,
    Platform,
    Study,
    StudyBonus,
    StudyDecision,
    StudyMessage,
    StudySlot,
)

__all__ = [
    "BoardCount",
    "BoardCountDelta",
    "BoardTotal",
    "Category",
    "CategoryTotal",
    "CodingLabel",
    "CodingSample",
    "ConditionSlot",
    "DailyChallenge",
    "Example",
    "ExamplePassage",
    "ExplanationVote",
    "GameSet",
    "LoginFailure",
    "Participant",
    "ParticipantStatus",
    "Passage",
    "PassageRead",
    "Platform",
    "Player",
    "PlayerSurvey",
    "PlayerTotal",
    "Reveal",
    "Round",
    "Study",
    "StudyBonus",
    "StudyDecision",
    "StudyMessage",
    "StudyPlan",
    "StudySlot",
    "System",
    "TruthView",
]
