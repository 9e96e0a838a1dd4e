"""setupbot: works out how to set up a repository, proves it in containers, opens one PR."""

__version__ = "0.1.0"
