"""Model providers: ``base`` is what they speak, ``service`` which ones exist; ``scripted`` answers
offline, ``openai_compat`` and ``anthropic`` call a model API through its official SDK (``remote``)."""
