"""The setup loop: orchestrator, diagnosis, speculative repair, LLM planner, trajectory.

record = run_setup(repo, settings, engine, store, llm=None)   # -> RunRecord
signatures = diagnose(output)                                 # -> list[Signature]
"""

from bot.loop.diagnose import Signature, diagnose
from bot.loop.orchestrator import SetupLoop, run_setup
from bot.loop.records import RunRecord
from bot.loop.target import TargetOutcome

__all__ = ["RunRecord", "SetupLoop", "Signature", "TargetOutcome", "diagnose", "run_setup"]
