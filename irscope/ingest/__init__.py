"""Filing existing dumps into a run: one module per kind of dump source."""
