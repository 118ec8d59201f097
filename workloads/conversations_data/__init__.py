"""Conversation data shipped with specgrid (written for this project):

* ``agentic.jsonl`` - 34 agentic issue-fixing conversations in OpenAI chat format with tool
  schemas, 5-20 rounds each, contexts growing from ~1k to ~36k tokens; written by
  ``make_agentic.py`` (deterministic) from the hand-written text of ``agentic_tasks.py`` and
  ``agentic_sources.py``.
* ``speed_bench_sample.jsonl`` - a small file in SPEED-Bench's row shape (``question_id``,
  ``category``, ``turns``) with our own questions, for the loader's tests and a first look.
"""

from pathlib import Path

DATA_DIR = Path(__file__).resolve().parent
AGENTIC = DATA_DIR / "agentic.jsonl"
SPEED_BENCH_SAMPLE = DATA_DIR / "speed_bench_sample.jsonl"
