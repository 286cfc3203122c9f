"""The command line's usage error: a leaf module, so that every command's module (the main CLI
and report/cli.py) raises the same exception without importing the other."""


class UsageError(Exception):
    """A command line that cannot run (exit code 2)."""
