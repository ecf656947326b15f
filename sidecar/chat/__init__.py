"""Chats: the message tree and its branches (``chats``), the turn engine (``turns``, with the tools a
turn offers in ``toolbox``) and the model providers it streams from (``providers``)."""
