"""SQLite persistence: one writer connection, numbered migrations, one repository per aggregate."""

from .db import CATALOG, Database

__all__ = ["CATALOG", "Database"]
