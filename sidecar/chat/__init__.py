"""Chats: the message tree, branches, and (later) the turn engine."""
