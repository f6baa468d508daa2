"""The read layer: a run read once (``RunView``) and the figures, findings, passes, ranks and
summaries every front end reads from it."""
