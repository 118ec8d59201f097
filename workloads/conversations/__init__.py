"""Multi-turn conversations as a workload: the model (:mod:`.model`), streaming loaders of
trace and dataset formats (:mod:`.loaders`, :mod:`.formats`), the history/rendering of each
round's request (:mod:`.render`). The shipped agentic conversations are package data in
``workloads/conversations_data/`` (written by its ``make_agentic`` module).

Pure: imports nothing from ``grid``, ``actors`` or ``engines``."""

from workloads.conversations.loaders import (
    ConversationFormatError,
    LoadReport,
    detect_format,
    iter_conversations,
    load_conversations,
)
from workloads.conversations.model import Conversation, Turn
from workloads.conversations.render import History

__all__ = [
    "Conversation", "ConversationFormatError", "History", "LoadReport", "Turn",
    "detect_format", "iter_conversations", "load_conversations",
]
