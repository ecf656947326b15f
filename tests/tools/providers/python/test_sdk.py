"""The tool-author SDK (``covalt_toolset``): decorator, schema inference, argument validation,
context, and legacy plain functions."""

from __future__ import annotations

import asyncio
import contextvars
import dataclasses
import enum
import json
import subprocess
import sys
import threading
from pathlib import Path
from typing import Annotated, Any, Literal, Optional, TypedDict

import msgspec
import pydantic
import pytest

SDK_DIR = Path(__file__).resolve().parents[4] / "sidecar" / "tools" / "providers" / "python" / "sdk"
if str(SDK_DIR) not in sys.path:
    sys.path.insert(0, str(SDK_DIR))

import covalt_toolset  # noqa: E402
from covalt_toolset import (  # noqa: E402
    ArgumentError,
    ToolContext,
    ToolSpec,
    check_legacy_args,
    clear_context,
    get_context,
    get_tool_spec,
    input_schema_for,
    legacy_call,
    set_context,
    tool,
    validate_args,
)

# --- types used by the tools below (module level so string annotations resolve) ---


class Color(enum.Enum):
    RED = "red"
    BLUE = "blue"


@dataclasses.dataclass
class Item:
    name: str
    qty: int = 1


@dataclasses.dataclass
class Config:
    items: list[Item]
    color: Color = Color.RED


@dataclasses.dataclass
class Node:
    name: str
    children: list[Node] = dataclasses.field(default_factory=list)


class Point(msgspec.Struct):
    x: float
    y: float


class Options(TypedDict):
    verbose: bool


class TransformConfig(pydantic.BaseModel):
    input: str = pydantic.Field(description="Input file path")
    output: str = pydantic.Field(description="Output file path")
    steps: list[Step] = []


class Step(pydantic.BaseModel):
    name: str
    level: int = 0


TransformConfig.model_rebuild()


def schema_json(fn: Any) -> str:
    return json.dumps(input_schema_for(fn), sort_keys=True)


def props(fn: Any) -> dict[str, Any]:
    return input_schema_for(fn)["properties"]


# --- the decorator ---


def test_bare_decorator_attaches_spec_and_returns_function() -> None:
    def analyze_data(filename: str) -> dict:
        """Analyze a data file and return statistics.

        Args:
            filename: File to analyze
        """
        return {"file": filename}

    decorated = tool(analyze_data)
    assert decorated is analyze_data
    spec = get_tool_spec(analyze_data)
    assert isinstance(spec, ToolSpec)
    assert spec.name == "analyze_data"
    assert spec.description == "Analyze a data file and return statistics."
    assert spec.fn is analyze_data
    assert spec.is_async is False
    assert spec.requires_confirmation is False
    assert spec.timeout is None
    assert analyze_data("a.csv") == {"file": "a.csv"}


def test_decorator_with_options() -> None:
    @tool(name="Analyze Data", description="Explicit wins", requires_confirmation=True, timeout=2.5)
    def analyze(filename: str) -> str:
        """Docstring summary that is overridden."""
        return filename

    spec = get_tool_spec(analyze)
    assert spec is not None
    assert (spec.name, spec.description, spec.requires_confirmation, spec.timeout) == (
        "Analyze Data",
        "Explicit wins",
        True,
        2.5,
    )
    assert analyze("x") == "x"


def test_get_tool_spec_on_plain_function_is_none() -> None:
    def plain(a: int) -> int:
        return a

    assert get_tool_spec(plain) is None
    assert get_tool_spec(42) is None


def test_async_tool_stays_callable() -> None:
    @tool
    async def fetch(n: int) -> int:
        await asyncio.sleep(0)
        return n * 2

    spec = get_tool_spec(fetch)
    assert spec is not None and spec.is_async
    assert asyncio.run(fetch(21)) == 42


def test_varargs_rejected_at_decoration() -> None:
    with pytest.raises(TypeError, match=r"\*args or \*\*kwargs"):

        @tool
        def bad(*args: str) -> None: ...

    with pytest.raises(TypeError, match=r"\*args or \*\*kwargs"):

        @tool
        def bad2(a: int, **kwargs: Any) -> None: ...


def test_positional_only_rejected() -> None:
    with pytest.raises(TypeError, match="positional-only"):

        @tool
        def bad(a: int, /) -> None: ...


def test_nonpositive_timeout_rejected() -> None:
    with pytest.raises(ValueError, match="timeout"):
        tool(timeout=0)


def test_unresolvable_hint_is_a_clear_type_error() -> None:
    def f(a: NoSuchType) -> None: ...  # type: ignore[name-defined]  # noqa: F821

    with pytest.raises(TypeError, match="cannot resolve the type hints"):
        tool(f)


def test_unsupported_type_is_a_clear_type_error() -> None:
    class Opaque:
        pass

    def f(a: Any) -> None: ...

    f.__annotations__ = {"a": Opaque}
    with pytest.raises(TypeError, match="cannot build an input schema"):
        tool(f)


# --- schemas ---


def test_scalars_defaults_and_optional_exact() -> None:
    @tool
    def f(
        text: str,
        count: int,
        ratio: float = 0.5,
        flag: bool = False,
        note: str | None = None,
        limit: Optional[int] = 10,  # noqa: UP045 - the old spelling must work too
        maybe: int | None = ...,  # type: ignore[assignment]
    ) -> None: ...

    assert input_schema_for(f) == {
        "type": "object",
        "properties": {
            "text": {"type": "string"},
            "count": {"type": "integer"},
            "ratio": {"type": "number", "default": 0.5},
            "flag": {"type": "boolean", "default": False},
            "note": {"anyOf": [{"type": "string"}, {"type": "null"}], "default": None},
            "limit": {"anyOf": [{"type": "integer"}, {"type": "null"}], "default": 10},
            # Ellipsis is not JSON: the default stays Python's, the schema omits it.
            "maybe": {"anyOf": [{"type": "integer"}, {"type": "null"}]},
        },
        "required": ["text", "count"],
        "additionalProperties": False,
    }


def test_optional_without_default_is_required_but_nullable() -> None:
    @tool
    def f(note: str | None) -> None: ...

    schema = input_schema_for(f)
    assert schema["required"] == ["note"]
    assert validate_args(f, {"note": None}) == {"note": None}


def test_no_parameters() -> None:
    @tool
    def ping() -> str:
        return "pong"

    assert input_schema_for(ping) == {
        "type": "object",
        "properties": {},
        "required": [],
        "additionalProperties": False,
    }


def test_literal_enum_list_dict_tuple() -> None:
    @tool
    def f(
        mode: Literal["fast", "slow"],
        color: Color,
        tags: list[str],
        weights: dict[str, float],
        pair: tuple[int, str],
        many: tuple[int, ...] = (),
    ) -> None: ...

    schema = input_schema_for(f)
    assert schema["properties"] == {
        "mode": {"enum": ["fast", "slow"]},
        "color": {"$ref": "#/$defs/Color"},
        "tags": {"type": "array", "items": {"type": "string"}},
        "weights": {"type": "object", "additionalProperties": {"type": "number"}},
        "pair": {
            "type": "array",
            "minItems": 2,
            "maxItems": 2,
            "prefixItems": [{"type": "integer"}, {"type": "string"}],
            "items": False,
        },
        "many": {"type": "array", "items": {"type": "integer"}, "default": []},
    }
    assert schema["$defs"] == {"Color": {"title": "Color", "enum": ["red", "blue"]}}  # as declared
    assert schema["required"] == ["mode", "color", "tags", "weights", "pair"]


@dataclasses.dataclass
class Leveled:
    level: Literal["zeta", "alpha", "mid"]


def test_choices_keep_the_authors_order() -> None:
    @tool
    def f(
        mode: Literal["slow", "fast", "auto"],
        color: Color,
        size: Literal[3, 1, 2] | None = None,
        tags: list[Literal["y", "x"]] | None = None,
        nested: Leveled | None = None,
    ) -> None: ...

    schema = input_schema_for(f)
    props = schema["properties"]
    assert props["mode"] == {"enum": ["slow", "fast", "auto"]}
    assert props["size"]["anyOf"][0] == {"enum": [3, 1, 2]}
    assert props["tags"]["anyOf"][0]["items"] == {"enum": ["y", "x"]}
    assert schema["$defs"]["Color"]["enum"] == ["red", "blue"]
    assert schema["$defs"]["Leveled"]["properties"]["level"] == {"enum": ["zeta", "alpha", "mid"]}


def test_nested_dataclass_struct_typeddict() -> None:
    @tool
    def f(config: Config, at: Point, opts: Options) -> None: ...

    schema = input_schema_for(f)
    assert schema["properties"] == {
        "config": {"$ref": "#/$defs/Config"},
        "at": {"$ref": "#/$defs/Point"},
        "opts": {"$ref": "#/$defs/Options"},
    }
    defs = schema["$defs"]
    assert set(defs) == {"Config", "Item", "Color", "Point", "Options"}
    assert defs["Config"]["properties"]["items"] == {"type": "array", "items": {"$ref": "#/$defs/Item"}}
    assert defs["Config"]["properties"]["color"] == {"$ref": "#/$defs/Color", "default": "red"}
    assert defs["Item"] == {
        "title": "Item",
        "type": "object",
        "properties": {"name": {"type": "string"}, "qty": {"type": "integer", "default": 1}},
        "required": ["name"],
    }
    assert defs["Point"]["required"] == ["x", "y"]
    assert defs["Options"]["properties"] == {"verbose": {"type": "boolean"}}


def test_recursive_dataclass() -> None:
    @tool
    def f(tree: Node) -> None: ...

    assert schema_json(f) == json.dumps(
        {
            "$defs": {
                "Node": {
                    "properties": {
                        "children": {"items": {"$ref": "#/$defs/Node"}, "type": "array"},
                        "name": {"type": "string"},
                    },
                    "required": ["name"],
                    "title": "Node",
                    "type": "object",
                }
            },
            "additionalProperties": False,
            "properties": {"tree": {"$ref": "#/$defs/Node"}},
            "required": ["tree"],
            "type": "object",
        },
        sort_keys=True,
    )


def test_unannotated_parameter_is_any() -> None:
    @tool
    def f(anything, n: int = 1) -> None: ...  # type: ignore[no-untyped-def]

    assert props(f)["anything"] == {}
    assert validate_args(f, {"anything": [1, {"a": None}]}) == {"anything": [1, {"a": None}]}


def test_workspace_and_context_params_not_in_schema() -> None:
    @tool
    def f(workspace: Path, path: str, ctx: ToolContext) -> None: ...

    spec = get_tool_spec(f)
    assert spec is not None
    assert list(spec.input_schema["properties"]) == ["path"]
    assert spec.injected == {"workspace": "workspace", "ctx": "context"}
    ctx = ToolContext(workspace=Path("/w"), chat_id="c", toolset_id="ts", toolset_dir=Path("/t"))
    assert spec.injected_kwargs(ctx) == {"workspace": Path("/w"), "ctx": ctx}
    assert validate_args(f, {"path": "a"}) == {"path": "a"}


def test_path_parameter_is_a_string() -> None:
    @tool
    def f(target: Path = Path("out.txt")) -> None: ...

    assert props(f)["target"] == {"type": "string", "default": "out.txt"}
    assert validate_args(f, {"target": "a/b.txt"}) == {"target": Path("a/b.txt")}
    with pytest.raises(ArgumentError) as err:
        validate_args(f, {"target": 3})
    assert err.value.path == "args.target"


def test_pydantic_model_param() -> None:
    @tool(name="Transform File", description="Transform a file using a template")
    def transform_file(config: TransformConfig, dry_run: bool = False) -> dict:
        """
        Args:
            config: What to transform.
        """
        return {"out": config.output}

    schema = input_schema_for(transform_file)
    assert schema["properties"] == {
        "config": {"$ref": "#/$defs/TransformConfig", "description": "What to transform."},
        "dry_run": {"type": "boolean", "default": False},
    }
    assert schema["$defs"]["TransformConfig"]["properties"]["input"]["description"] == "Input file path"
    assert schema["$defs"]["TransformConfig"]["properties"]["steps"]["items"] == {"$ref": "#/$defs/Step"}
    assert set(schema["$defs"]) == {"TransformConfig", "Step"}

    kwargs = validate_args(transform_file, {"config": {"input": "a", "output": "b", "steps": [{"name": "s"}]}})
    assert isinstance(kwargs["config"], TransformConfig)
    assert kwargs["config"].steps == [Step(name="s", level=0)]
    assert transform_file(**kwargs) == {"out": "b"}

    with pytest.raises(ArgumentError) as err:
        validate_args(transform_file, {"config": {"input": "a", "output": "b", "steps": [{}, {"name": 5}]}})
    assert err.value.path == "args.config.steps[0].name"
    with pytest.raises(ArgumentError) as err:
        validate_args(transform_file, {"config": {"input": "a", "output": "b", "steps": [{"name": "s", "level": "5"}]}})
    assert err.value.path == "args.config.steps[0].level"  # strict: no "5" -> 5


def test_pydantic_and_dataclass_of_the_same_name_do_not_clash() -> None:
    class Item(pydantic.BaseModel):  # noqa: F811 - shadows the dataclass on purpose
        label: str

    def f(a: Any, b: Any) -> None: ...

    f.__annotations__ = {"a": globals()["Item"], "b": Item}
    schema = input_schema_for(f)
    assert schema["properties"]["a"] == {"$ref": "#/$defs/Item"}
    assert schema["properties"]["b"] == {"$ref": "#/$defs/Item2"}
    assert "label" in schema["$defs"]["Item2"]["properties"]
    assert "qty" in schema["$defs"]["Item"]["properties"]


# --- docstrings ---


def test_google_docstring() -> None:
    @tool
    def search(query: str, limit: int = 5) -> None:
        """Search the index
        for matching documents.

        Longer explanation that is not part of the summary.

        Args:
            query (str): What to look for,
                in plain words.
            limit: At most this many results.

        Returns:
            The hits.
        """

    spec = get_tool_spec(search)
    assert spec is not None
    assert spec.description == "Search the index for matching documents."
    assert props(search) == {
        "query": {"type": "string", "description": "What to look for, in plain words."},
        "limit": {"type": "integer", "default": 5, "description": "At most this many results."},
    }


def test_numpy_docstring() -> None:
    @tool
    def search(query: str, limit: int = 5) -> None:
        """Search the index.

        Parameters
        ----------
        query : str
            What to look for.
        limit : int, optional
            At most this many results.
        """

    assert get_tool_spec(search).description == "Search the index."  # type: ignore[union-attr]
    assert props(search)["query"]["description"] == "What to look for."
    assert props(search)["limit"]["description"] == "At most this many results."


def test_sphinx_docstring() -> None:
    @tool
    def search(query: str, limit: int = 5) -> None:
        """Search the index.

        :param query: What to look for.
        :param int limit: At most this many results.
        :returns: The hits.
        """

    assert get_tool_spec(search).description == "Search the index."  # type: ignore[union-attr]
    assert props(search)["query"]["description"] == "What to look for."
    assert props(search)["limit"]["description"] == "At most this many results."


def test_no_docstring_and_args_only_docstring() -> None:
    @tool
    def bare(x: int) -> None: ...

    @tool
    def args_only(x: int) -> None:
        """
        Args:
            x: The x.
        """

    assert get_tool_spec(bare).description == ""  # type: ignore[union-attr]
    assert get_tool_spec(args_only).description == ""  # type: ignore[union-attr]
    assert props(args_only)["x"]["description"] == "The x."


def test_annotated_description_wins_over_docstring() -> None:
    @tool
    def f(x: Annotated[int, msgspec.Meta(description="From Meta", ge=0)]) -> None:
        """Doc.

        Args:
            x: From docstring.
        """

    assert props(f)["x"] == {"type": "integer", "minimum": 0, "description": "From Meta"}
    with pytest.raises(ArgumentError) as err:
        validate_args(f, {"x": -1})
    assert err.value.path == "args.x"


# --- validate_args ---


@tool
def build(
    config: Config, color: Color = Color.BLUE, at: Point | None = None,
    tags: list[str] = [],  # noqa: B006 - a mutable default, as tool authors write them
) -> None: ...


def test_validate_constructs_nested_types_and_leaves_defaults_to_python() -> None:
    kwargs = validate_args(build, {"config": {"items": [{"name": "a"}, {"name": "b", "qty": 3}]}, "color": "red"})
    assert kwargs == {"config": Config(items=[Item("a"), Item("b", 3)]), "color": Color.RED}
    assert isinstance(kwargs["config"].items[1], Item)
    assert kwargs["color"] is Color.RED
    kwargs = validate_args(build, {"config": {"items": [], "color": "blue"}, "at": {"x": 1, "y": 2.5}})
    assert kwargs["config"].color is Color.BLUE
    assert kwargs["at"] == Point(1.0, 2.5)


def test_validate_accepts_spec_and_plain_function() -> None:
    spec = get_tool_spec(build)
    assert spec is not None
    assert validate_args(spec, {"config": {"items": []}}) == {"config": Config(items=[])}

    def plain(n: int) -> int:
        return n

    assert validate_args(plain, {"n": 3}) == {"n": 3}


@pytest.mark.parametrize(
    ("args", "path", "reason"),
    [
        (
            {"config": {"items": [{"name": "a"}, {"name": "b"}, {"name": 7}]}},
            "args.config.items[2].name",
            "Expected `str`, got `int`",
        ),
        ({"config": {"items": [{"name": "a"}, {"name": "b"}, {}]}}, "args.config.items[2].name",
         "missing required field"),
        ({"config": {"items": [{"name": "a", "qty": "5"}]}}, "args.config.items[0].qty", "Expected `int`, got `str`"),
        ({"config": {"items": []}, "color": "green"}, "args.color", "Invalid enum value 'green'"),
        ({"config": {"items": []}, "tags": ["a", 2]}, "args.tags[1]", "Expected `str`, got `int`"),
        ({"config": {"items": []}, "extra": 1}, "args.extra", "unknown argument"),
        ({}, "args.config", "missing required argument"),
        ([], "args", "Expected `object`, got `array`"),
    ],
)
def test_validate_failures_have_paths(args: Any, path: str, reason: str) -> None:
    with pytest.raises(ArgumentError) as err:
        validate_args(build, args)
    assert (err.value.path, err.value.reason) == (path, reason)
    assert str(err.value) == f"{path}: {reason}"
    assert isinstance(err.value, ValueError)


# --- context ---


def make_ctx(**over: Any) -> ToolContext:
    fields: dict[str, Any] = {
        "workspace": Path("/ws"),
        "chat_id": "chat-1",
        "toolset_id": "app-builder",
        "toolset_dir": Path("/toolsets/app-builder"),
        "tool_call_id": "call-1",
    }
    fields.update(over)
    return ToolContext(**fields)


def test_get_context_outside_a_call() -> None:
    with pytest.raises(RuntimeError, match="outside a tool call"):
        get_context()


def test_set_get_clear_with_token_and_without() -> None:
    ctx = make_ctx()
    token = set_context(ctx)
    try:
        assert get_context() is ctx
        inner = make_ctx(tool_call_id="call-2")
        inner_token = set_context(inner)
        assert get_context() is inner
        clear_context(inner_token)
        assert get_context() is ctx
    finally:
        clear_context(token)
    with pytest.raises(RuntimeError):
        get_context()
    set_context(ctx)
    clear_context()
    with pytest.raises(RuntimeError):
        get_context()


def test_context_is_frozen_and_coerces_paths() -> None:
    ctx = ToolContext(workspace="/w", chat_id=None, toolset_id="t", toolset_dir="/d")  # type: ignore[arg-type]
    assert ctx.workspace == Path("/w") and ctx.toolset_dir == Path("/d") and ctx.tool_call_id is None
    with pytest.raises(dataclasses.FrozenInstanceError):
        ctx.chat_id = "x"  # type: ignore[misc]
    with pytest.raises(TypeError):
        set_context({"workspace": "/w"})  # type: ignore[arg-type]


def test_context_in_async_tool_and_copied_thread() -> None:
    @tool
    async def where() -> dict:
        await asyncio.sleep(0)
        ctx = get_context()
        seen: dict[str, Any] = {}

        def in_thread() -> None:
            seen["workspace"] = get_context().workspace

        def bare_thread() -> None:
            try:
                get_context()
            except RuntimeError:
                seen["bare"] = "no context"

        t = threading.Thread(target=contextvars.copy_context().run, args=(in_thread,))
        t.start()
        t.join()
        t = threading.Thread(target=bare_thread)
        t.start()
        t.join()
        return {"chat": ctx.chat_id, **seen}

    async def run_call(ctx: ToolContext) -> dict:
        token = set_context(ctx)
        try:
            return await where()
        finally:
            clear_context(token)

    async def main() -> list[dict]:
        # Two concurrent calls each see their own context.
        return await asyncio.gather(run_call(make_ctx(chat_id="a")), run_call(make_ctx(chat_id="b")))

    assert asyncio.run(main()) == [
        {"chat": "a", "workspace": Path("/ws"), "bare": "no context"},
        {"chat": "b", "workspace": Path("/ws"), "bare": "no context"},
    ]


def test_sync_tool_reads_context(tmp_path: Path) -> None:
    @tool
    def write(path: str, content: str) -> dict:
        target = get_context().workspace / path
        target.write_text(content)
        return {"written": path}

    token = set_context(make_ctx(workspace=tmp_path))
    try:
        assert write(**validate_args(write, {"path": "a.txt", "content": "hi"})) == {"written": "a.txt"}
    finally:
        clear_context(token)
    assert (tmp_path / "a.txt").read_text() == "hi"


# --- legacy plain functions (seed 000 §10) ---

WRITE_SCHEMA = {
    "type": "object",
    "properties": {
        "path": {"type": "string", "description": "File path relative to workspace"},
        "content": {"type": "string"},
        "mode": {"type": "integer"},
        "lines": {"type": "array",
                  "items": {"type": "object", "required": ["n"], "properties": {"n": {"type": "number"}}}},
    },
    "required": ["path", "content"],
}


def write_file(workspace: Path, path: str, content: str, **_: Any) -> dict:
    target = workspace / path
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_text(content)
    return {"written": path, "size": len(content)}


def test_legacy_call(tmp_path: Path) -> None:
    result = legacy_call(write_file, str(tmp_path), {"path": "d/f.txt", "content": "abc"}, WRITE_SCHEMA)
    assert result == {"written": "d/f.txt", "size": 3}
    assert (tmp_path / "d" / "f.txt").read_text() == "abc"
    # Without a schema the function's own signature is the only check.
    assert legacy_call(write_file, tmp_path, {"path": "g.txt", "content": ""})["size"] == 0


@pytest.mark.parametrize(
    ("args", "path", "reason"),
    [
        ({"path": "a"}, "args.content", "missing required argument"),
        ({"path": 1, "content": "x"}, "args.path", "expected string, got integer"),
        ({"path": "a", "content": "x", "mode": True}, "args.mode", "expected integer, got boolean"),
        ({"path": "a", "content": "x", "lines": [{"n": 1}, {"n": 2.5}, {"n": "3"}]}, "args.lines[2].n",
         "expected number, got string"),
        ({"path": "a", "content": "x", "lines": [{}]}, "args.lines[0].n", "missing required field"),
        ({"path": "a", "content": "x", "lines": {}}, "args.lines", "expected array, got object"),
        (["a"], "args", "expected object, got array"),
    ],
)
def test_legacy_argument_errors(tmp_path: Path, args: Any, path: str, reason: str) -> None:
    with pytest.raises(ArgumentError) as err:
        legacy_call(write_file, tmp_path, args, WRITE_SCHEMA)
    assert (err.value.path, err.value.reason) == (path, reason)
    assert not any(tmp_path.iterdir())


def test_legacy_additional_properties_false() -> None:
    schema = {"type": "object", "properties": {"a": {"type": "string"}}, "additionalProperties": False}
    check_legacy_args(schema, {"a": "x"})
    with pytest.raises(ArgumentError) as err:
        check_legacy_args(schema, {"a": "x", "b": 1})
    assert (err.value.path, err.value.reason) == ("args.b", "unknown argument")


# --- output schemas ---


class _Point(msgspec.Struct):
    x: int
    label: str | None = None


def test_the_return_annotation_becomes_the_output_schema() -> None:
    def points() -> list[_Point]: ...
    def path() -> Path: ...
    def untyped(): ...  # noqa: ANN202 - on purpose
    def anything() -> Any: ...
    def model() -> pydantic.BaseModel: ...

    schema = covalt_toolset.output_schema_for(points)
    assert schema is not None and schema["items"] == {"$ref": "#/$defs/_Point"}
    assert schema["$defs"]["_Point"]["required"] == ["x"]
    assert covalt_toolset.output_schema_for(path) == {"type": "string"}
    # Nothing to check against: no annotation, Any, or a type JSON Schema is not written for here.
    assert [covalt_toolset.output_schema_for(f) for f in (untyped, anything, model)] == [None, None, None]


# --- packaging ---


def test_import_is_light_and_never_pulls_pydantic() -> None:
    code = (
        "import sys; sys.path.insert(0, sys.argv[1]); import covalt_toolset\n"
        "from covalt_toolset import tool\n"
        "@tool\n"
        "def f(a: int, b: 'list[str] | None' = None) -> None:\n"
        "    '''Doc.\n\n    Args:\n        a: An a.\n    '''\n"
        "assert f.__covalt_tool__.input_schema['properties']['a']['description'] == 'An a.'\n"
        "print(sorted(m for m in ('pydantic', 'pydantic_core', 'sidecar', 'yaml', 'anyio') if m in sys.modules))"
    )
    out = subprocess.run(
        [sys.executable, "-c", code, str(SDK_DIR)], capture_output=True, text=True, timeout=60, check=True
    )
    assert out.stdout.strip() == "[]", out.stderr


def test_public_api() -> None:
    assert set(covalt_toolset.__all__) == {
        "ArgumentError",
        "ToolContext",
        "ToolSpec",
        "check_legacy_args",
        "clear_context",
        "get_context",
        "get_tool_spec",
        "input_schema_for",
        "legacy_call",
        "output_schema_for",
        "set_context",
        "tool",
        "validate_args",
    }
    assert Path(covalt_toolset.__file__).parent.parent == SDK_DIR
    assert not (SDK_DIR / "__init__.py").exists()
