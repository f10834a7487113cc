"""Repositories: take a Session, map rows to frozen records, never commit."""
