"""REST and page routes of the server, one module per concern, each mounted with one line."""
