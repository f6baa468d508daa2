"""Headless browse models: what the TUI shows, as plain functions over a run's view (the
unit tree, line locations and following, launches, kernel cards, autotune candidates,
problems, line diffs), tested without the app."""
