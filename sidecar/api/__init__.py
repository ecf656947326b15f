"""The wire contract: every method as a ``MethodSpec`` over msgspec Structs (``api.specs.SPECS``).

``scripts/gen_protocol.py`` turns this package into ``protocol/``. Imports only msgspec. This file
imports none of its modules: the start-up path needs ``errors`` and ``lifecycle`` alone.
"""
