"""``python -m irscope`` runs the command line."""

from irscope.cli import entry

entry()
