"""Control-plane schema: SQLAlchemy models, engine/session helpers and Alembic migrations.

Imports nothing else of Legato's.
"""
