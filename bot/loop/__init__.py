"""The setup loop: orchestrator, diagnosis, speculative repair, LLM planner, trajectory.

    record = run_setup(repo, settings, engine, store, llm=None)   # -> RunRecord
    signatures = diagnose(output)                                 # -> list[Signature]
"""

from bot.loop.diagnose import Signature, diagnose
from bot.loop.orchestrator import RunRecord, SetupLoop, TargetOutcome, run_setup

__all__ = ["RunRecord", "SetupLoop", "Signature", "TargetOutcome", "diagnose", "run_setup"]
