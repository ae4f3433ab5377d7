"""The package's command-line parser: argparse whose errors are one line.

argparse prints its whole usage block before an error ("usage: ..." then "prog: error: ...");
the package's tools print the error line alone, naming the argument and the value, and exit with
status 2 as argparse does. `--help` still prints the usage. Imports nothing but argparse.
"""

from __future__ import annotations

import argparse


class ArgumentParser(argparse.ArgumentParser):
    """argparse.ArgumentParser whose `error` writes "prog: error: message" alone to stderr."""

    def error(self, message: str):
        self.exit(2, f"{self.prog}: error: {message}\n")
