"""Events, the one environment pull request (PyGithub) and rollout."""

from bot.github.events import Event, handle_event, load_event
from bot.github.provider import DryRunProvider, GitHubProvider, Provider, RetryPolicy
from bot.github.publish import PublishResult, publish_environment
from bot.github.rollout import rollout

__all__ = [
    "DryRunProvider",
    "Event",
    "GitHubProvider",
    "Provider",
    "PublishResult",
    "RetryPolicy",
    "handle_event",
    "load_event",
    "publish_environment",
    "rollout",
]
