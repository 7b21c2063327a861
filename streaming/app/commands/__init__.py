"""The CLI's subcommands: one function per subcommand, taking the parsed arguments and returning the exit
code; heavy imports happen inside them. The argument table is ``streaming/app/cli.py``."""


class UsageError(Exception):
    """Bad input found after parsing: printed as one line, exit code 2."""


class NotFound(Exception):
    """A group, broker or table that is not there: printed as one line, exit code 1."""
