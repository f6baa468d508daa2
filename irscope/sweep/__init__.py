"""`irscope compile`: sweep configurations (``configs``), compile them in worker processes
(``pool``), file and compare the results (``results``)."""
