"""Full-text search over a thread's originals: the query parser and the index per database."""
