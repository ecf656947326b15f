"""SQLite persistence: one writer connection, numbered migrations, one repository per aggregate."""

from .db import Database

__all__ = ["Database"]
