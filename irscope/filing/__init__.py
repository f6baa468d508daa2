"""The parent side of a capture: one collection from start to end (``session``), the watch that
files while the script runs (``watch``), and the staging folder filed into the run through
``irscope.ingest`` (``folder``). What runs inside the user's program is ``irscope.collectors``."""
