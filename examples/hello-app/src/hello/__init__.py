"""Greets people; uses six only so that the example has a dependency to install."""

import six


def greet(name: str) -> str:
    return "Hello, {}!".format(six.ensure_str(name).strip() or "world")
