"""The data model, one module per concern. Importing this package registers every table."""

from app.models.content import Category, Example, System
from app.models.players import LoginFailure, Player, PlayerSurvey
from app.models.rounds import Reveal, Round, TruthView
from app.models.standings import BoardCount, BoardTotal, CategoryTotal, PlayerTotal
from app.models.studies import Participant, ParticipantStatus, Platform, Study

__all__ = [
    "BoardCount",
    "BoardTotal",
    "Category",
    "CategoryTotal",
    "Example",
    "LoginFailure",
    "Participant",
    "ParticipantStatus",
    "Platform",
    "Player",
    "PlayerSurvey",
    "PlayerTotal",
    "Reveal",
    "Round",
    "Study",
    "System",
    "TruthView",
]
