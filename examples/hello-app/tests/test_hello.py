from hello import greet


def test_greets_by_name():
    assert greet("Ada") == "Hello, Ada!"


def test_blank_name_greets_the_world():
    assert greet("  ") == "Hello, world!"
