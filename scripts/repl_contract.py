"""The contract as the REPL reads it (``protocol/openrpc.json``): methods, their params and
schemas, and short renderings of them for help and completion."""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

RequestId = int | str  # a JSON-RPC id as the REPL keeps it

@dataclass(frozen=True)
class ParamSpec:
    name: str
    required: bool
    schema: dict[str, Any]

    @property
    def type_text(self) -> str:
        return schema_text(self.schema)


@dataclass(frozen=True)
class MethodSpec:
    name: str
    summary: str = ""
    params: tuple[ParamSpec, ...] = ()
    direction: str = "clientToServer"
    kind: str = "request"
    result: dict[str, Any] | None = None
    errors: tuple[str, ...] = ()
    cancel: str | None = None

    @property
    def client_sends(self) -> bool:
        return self.direction in ("clientToServer", "both")

    @property
    def server_sends(self) -> bool:
        return self.direction in ("serverToClient", "both")


@dataclass
class Contract:
    methods: dict[str, MethodSpec] = field(default_factory=dict)
    schemas: dict[str, dict[str, Any]] = field(default_factory=dict)
    error_codes: dict[str, int] = field(default_factory=dict)  # name -> code
    title: str = ""

    @classmethod
    def load(cls, path: str | Path) -> Contract:
        return cls.from_openrpc(json.loads(Path(path).read_text(encoding="utf-8")))

    @classmethod
    def from_openrpc(cls, doc: dict[str, Any]) -> Contract:
        methods = {}
        for m in doc.get("methods", []):
            params = tuple(
                ParamSpec(p["name"], bool(p.get("required")), p.get("schema", {}))
                for p in m.get("params", [])
            )
            errors = tuple(e.get("$ref", "").rsplit("/", 1)[-1] for e in m.get("errors", []))
            methods[m["name"]] = MethodSpec(
                name=m["name"],
                summary=m.get("summary", ""),
                params=params,
                direction=m.get("x-direction", "clientToServer"),
                kind=m.get("x-kind", "request"),
                result=(m.get("result") or {}).get("schema"),
                errors=errors,
                cancel=m.get("x-cancel"),
            )
        components = doc.get("components", {})
        codes = {name: e["code"] for name, e in components.get("errors", {}).items()}
        info = doc.get("info", {})
        title = f"{info.get('title', '')} {info.get('version', '')}".strip()
        return cls(methods, components.get("schemas", {}), codes, title)

    def error_name(self, code: Any) -> str:
        for name, value in self.error_codes.items():
            if value == code:
                return name
        return ""

    def error_code(self, text: str) -> int | None:
        """``-32012`` or ``PermissionDenied`` (any case) -> -32012; None when neither."""
        if re.fullmatch(r"[+-]?\d+", text):
            return int(text)
        for name, code in self.error_codes.items():
            if name.lower() == text.lower():
                return code
        return None

    def client_methods(self, kind: str) -> list[MethodSpec]:
        return [m for m in self.methods.values() if m.client_sends and m.kind == kind]

    def resolve(self, schema: dict[str, Any]) -> dict[str, Any]:
        ref = schema.get("$ref")
        if ref:
            return self.schemas.get(ref.rsplit("/", 1)[-1], {})
        return schema


def schema_text(schema: dict[str, Any] | None) -> str:
    """A short, TypeScript-like rendering of a JSON schema: ``integer | string | null``."""
    if not schema:
        return "any"
    if "$ref" in schema:
        return schema["$ref"].rsplit("/", 1)[-1]
    for union in ("anyOf", "oneOf"):
        if union in schema:
            return " | ".join(schema_text(s) for s in schema[union])
    if "enum" in schema:
        return " | ".join(json.dumps(v) for v in schema["enum"])
    if "const" in schema:
        return json.dumps(schema["const"])
    kind = schema.get("type")
    if isinstance(kind, list):
        return " | ".join(kind)
    if kind == "array":
        item = schema_text(schema.get("items"))
        return f"({item})[]" if " | " in item else f"{item}[]"
    return kind or "any"


def object_shape(contract: Contract, schema: dict[str, Any] | None) -> str:
    """One level of a referenced object's fields: ``{name: string, version?: string}``."""
    if not schema:
        return ""
    refs = [schema] if "$ref" in schema else [s for s in schema.get("anyOf", []) if "$ref" in s]
    for ref in refs:
        target = contract.resolve(ref)
        props = target.get("properties")
        if target.get("type") == "object" and props:
            required = set(target.get("required", []))
            fields = ", ".join(
                f"{k}{'' if k in required else '?'}: {schema_text(v)}" for k, v in props.items()
            )
            return "{" + fields + "}"
    return ""


def placeholder(schema: dict[str, Any] | None, contract: Contract | None = None) -> Any:
    """A value of the schema's type, to build example lines."""
    schema = schema or {}
    if "$ref" in schema and contract is not None:
        return placeholder(contract.resolve(schema), contract)
    for union in ("anyOf", "oneOf"):
        if union in schema:
            return placeholder(schema[union][0], contract)
    if "enum" in schema:
        return schema["enum"][0]
    kind = schema.get("type")
    kind = kind[0] if isinstance(kind, list) else kind
    if not isinstance(kind, str):
        return {}
    return {"integer": 0, "number": 0, "string": "", "boolean": False, "array": [],
            "null": None}.get(kind, {})


def first_sentence(text: str) -> str:
    match = re.match(r"(.+?\.)(\s|$)", text)
    return match.group(1) if match else text
