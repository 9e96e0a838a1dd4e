"""Verification: sibling services and repositories, prosecutor, judge, verdict and record
(docs/verdicts.md)."""

from bot.services import ServiceManager, ServiceSpec
from bot.verify.judge import Ruling, judge
from bot.verify.prosecutor import Charge, LocalExecutor, prosecute
from bot.verify.record import VerificationRecord
from bot.verify.siblings import SiblingManager, SiblingSpec
from bot.verify.verdict import Verdict, decide

__all__ = [
    "Charge",
    "LocalExecutor",
    "Ruling",
    "ServiceManager",
    "ServiceSpec",
    "SiblingManager",
    "SiblingSpec",
    "VerificationRecord",
    "Verdict",
    "decide",
    "judge",
    "prosecute",
]
