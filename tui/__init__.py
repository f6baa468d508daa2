"""The Textual TUI that browses a run."""
