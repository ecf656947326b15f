"""Secrets: how they are shown (``masking``, by meaning: ``shapes``), which values this process knows
to be secret (``known``), and how a ``${VAR}`` reference is resolved when its value is used
(``variables``)."""

from .masking import (
    MASK,
    Placeholders,
    clean,
    mask,
    mask_args,
    mask_json,
    mask_map,
    mask_text,
    mask_url,
    masked_command,
    masked_key,
    placeholder_args,
    placeholder_map,
    placeholder_url,
    scrub,
    scrub_json,
    secret_values,
    stored_as_references,
)
from .variables import MissingVariable, is_reference, references, references_in, resolve, resolve_mapping

__all__ = [
    "MASK", "MissingVariable", "Placeholders", "clean", "is_reference", "mask", "mask_args", "mask_json", "mask_map",
    "mask_text", "mask_url", "masked_command", "masked_key", "placeholder_args", "placeholder_map",
    "placeholder_url", "references", "references_in", "resolve", "resolve_mapping", "scrub", "scrub_json",
    "secret_values", "stored_as_references",
]
