"""What a secret looks like, by its name or by its value (no imports: masking, variables and the
known-values registry all ask).

A name looks secret when it says so (``token``, ``api_key``, ``password``, ``Authorization``...). A
value looks like a credential when it has a vendor's key prefix (``sk-``, ``ghp_``, ``xoxb-``,
``AKIA``...), is a JWT, or is a long high-entropy run of token characters that is not made of words
(``/v1/chat/completions``, ``2024-06-01``, ``memory-file-path`` stay readable).
"""

from __future__ import annotations

import math
import re
from collections import Counter

SECRET_NAME = re.compile(
    r"(token|secret|passw|pwd|api[-_]?key|apikey|auth(?!ors?(?![a-z]))|credential|signature|cookie|session|jwt|bearer|"
    r"private|access[-_]?key|client[-_]?secret|^sig$|^code$|^key$|[-_.]key$|^k$|^p$)",
    re.I,
)
_PREFIX = re.compile(
    r"^(sk-|sk_|rk_|pk_live_|sk_live_|ghp_|gho_|ghu_|ghs_|ghr_|github_pat_|glpat-|xox[abprse]-|xapp-|"
    r"AKIA|ASIA|AIza|ya29\.|hf_|npm_|pypi-|dop_v1_|shpat_|sq0|SG\.|key-)[A-Za-z0-9._~+/=-]{6,}$"
)
_JWT = re.compile(r"^eyJ[A-Za-z0-9_-]{4,}\.[A-Za-z0-9_-]{4,}\.[A-Za-z0-9_-]*$")
_TOKEN_CHARS = re.compile(r"^[A-Za-z0-9._~+/=-]+$")
_HEX = re.compile(r"^[0-9a-fA-F-]{32,}$")


def looks_secret_name(name: str) -> bool:
    """A flag, header, query or variable name that says it holds a secret (``--api-key``, ``X-Auth``)."""
    return SECRET_NAME.search(name.strip().lstrip("-")) is not None


def _entropy(value: str) -> float:
    counts = Counter(value)
    n = len(value)
    return -sum(c / n * math.log2(c / n) for c in counts.values())


def _is_words(value: str) -> bool:
    """Made of words and small numbers joined by separators (``memory-file-path``, ``v2024-06-01``)."""
    pieces = [p for p in re.split(r"[-_.~/+=]+", value) if p]
    return all(p.isalpha() and (p.islower() or p.isupper() or p.istitle()) or
               (p.isdigit() and len(p) <= 8) or
               re.fullmatch(r"[A-Za-z][a-z]*[0-9]{1,4}", p) is not None or
               (len(p) <= 4 and p.isalnum()) for p in pieces)


def looks_like_credential(value: str, *, random: bool = True, hex_ids: bool = True) -> bool:
    """A value shaped like a key or a token, whatever it is called.

    A vendor prefix or a JWT always counts. `random`: so does a long high-entropy run that is not
    made of words; `hex_ids`: so does a long hex run or a UUID (in a URL or a config an id is no loss
    to mask; in a log line it is what a reader needs, so free text asks without it).
    """
    value = value.strip()
    if len(value) < 8 or not _TOKEN_CHARS.match(value):
        return False
    if _PREFIX.match(value) or _JWT.match(value):
        return True
    if not random or len(value) < 20 or _is_words(value):
        return False
    if _HEX.match(value):
        return hex_ids
    letters = sum(ch.isalpha() for ch in value)
    digits = sum(ch.isdigit() for ch in value)
    return letters >= 4 and digits >= 2 and _entropy(value) >= 3.5
