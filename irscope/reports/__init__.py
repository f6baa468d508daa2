"""One module per report format over the same report records."""
