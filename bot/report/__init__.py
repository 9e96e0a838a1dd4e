"""Setup report, PR body, PR comment and job summary."""

from bot.report.model import (
    Charge,
    ProofItem,
    Repair,
    ReportData,
    RequirementRow,
    ServiceUse,
    SiblingRepo,
    TestCounts,
    from_pipeline,
)
from bot.report.render import render_comment, render_job_summary, render_pr_body, render_report, write_job_summary

__all__ = [
    "Charge",
    "ProofItem",
    "Repair",
    "ReportData",
    "RequirementRow",
    "ServiceUse",
    "SiblingRepo",
    "TestCounts",
    "from_pipeline",
    "render_comment",
    "render_job_summary",
    "render_pr_body",
    "render_report",
    "write_job_summary",
]
