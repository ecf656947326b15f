"""Reading bundles: the example toolset, and every hostile bundle named in the issue."""

from __future__ import annotations

import shutil
import stat
import zipfile
from pathlib import Path

import pytest

from sidecar.toolsets import bundle
from sidecar.toolsets.bundle import BundleError
from sidecar.toolsets.manifest import ManifestError, parse

EXAMPLE = Path(__file__).resolve().parents[1] / "fixtures" / "toolsets" / "app-builder"
GOOD = (EXAMPLE / "toolset.yaml").read_bytes()
GOOD_TOOL = (EXAMPLE / "tools" / "files.py").read_bytes()


def make_zip(path: Path, entries: dict[str, bytes], *, prefix: str = "") -> Path:
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as z:
        for name, data in entries.items():
            z.writestr(prefix + name, data)
    return path


def example_entries() -> dict[str, bytes]:
    return {p.relative_to(EXAMPLE).as_posix(): p.read_bytes() for p in EXAMPLE.rglob("*") if p.is_file()}


def test_the_example_folder_and_its_zip_read_the_same(tmp_path: Path):
    from_dir = bundle.read(EXAMPLE)
    from_zip = bundle.read(make_zip(tmp_path / "a.zip", example_entries(), prefix="app-builder/"))
    assert from_dir.source_type == "local" and from_zip.source_type == "zip"
    assert from_dir.files == from_zip.files  # the one top folder is stripped
    m = from_dir.manifest
    assert (m.id, m.name, m.version) == ("app-builder", "App Builder", "1.0.0")
    assert [t.id for t in m.tools] == ["write_file", "read_file", "run_command", "word_stats"]
    renderers = {o.tool_id: o.renderer for o in from_dir.parsed.overrides}
    assert renderers == {"write_file": "code", "read_file": "code", "run_command": "code", "word_stats": "html"}
    assert bundle.kind_of("tools/files.py") == "python" and bundle.kind_of("artifacts/stats.html") == "artifact"
    assert from_dir.warnings == []


def test_legacy_renderer_loses_to_an_explicit_override_with_a_warning():
    text = GOOD.replace(b"tool_overrides:\n", b"tool_overrides:\n  - tool_id: write_file\n    renderer: document\n")
    parsed = parse(text)
    assert [o.renderer for o in parsed.overrides if o.tool_id == "write_file"] == ["document"]
    assert any("write_file" in w and "ignored" in w for w in parsed.warnings)


@pytest.mark.parametrize("name", ["../x.py", "a/../../x.py", "/abs.py", "//abs.py", "C:\\x.py", "tools\\x.py", "C:/x.py"])
def test_hostile_entry_names(tmp_path: Path, name: str):
    entries = {"toolset.yaml": GOOD, **{k: v for k, v in example_entries().items() if k != "toolset.yaml"}}
    entries[name] = b"evil"
    with pytest.raises(BundleError):
        bundle.read(make_zip(tmp_path / "b.zip", entries))


def test_duplicate_entries_are_refused(tmp_path: Path):
    path = tmp_path / "dup.zip"
    with zipfile.ZipFile(path, "w") as z, pytest.warns(UserWarning):
        for k, v in example_entries().items():
            z.writestr(k, v)
        z.writestr("tools/files.py", b"def write_file(): pass")
    with pytest.raises(BundleError, match="twice"):
        bundle.read(path)


def test_symlink_entries_are_refused(tmp_path: Path):
    path = make_zip(tmp_path / "l.zip", example_entries())
    with zipfile.ZipFile(path, "a") as z:
        info = zipfile.ZipInfo("tools/link.py")
        info.external_attr = (stat.S_IFLNK | 0o777) << 16
        z.writestr(info, "/etc/passwd")
    with pytest.raises(BundleError, match="symbolic links"):
        bundle.read(path)


def test_symlinks_in_a_folder_are_refused(tmp_path: Path):
    folder = tmp_path / "ts"
    shutil.copytree(EXAMPLE, folder)
    (folder / "tools" / "escape.py").symlink_to("/etc/passwd")
    with pytest.raises(BundleError, match="symbolic links"):
        bundle.read(folder)


def test_a_zip_bomb_is_refused(tmp_path: Path):
    entries = example_entries()
    entries["assets/zeros.bin"] = b"\0" * (20 << 20)
    with pytest.raises(BundleError, match="ZIP bomb"):
        bundle.read(make_zip(tmp_path / "bomb.zip", entries))


def test_too_many_files_are_refused(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setattr(bundle, "MAX_FILES", 10)
    entries = example_entries() | {f"assets/{i}.txt": b"x" for i in range(20)}
    with pytest.raises(BundleError, match="more than 10 files"):
        bundle.read(make_zip(tmp_path / "many.zip", entries))


def test_a_lying_size_header_stops_at_what_is_read(tmp_path: Path):
    path = make_zip(tmp_path / "lie.zip", example_entries() | {"assets/big.txt": b"y" * 300_000})
    raw = bytearray(path.read_bytes())
    # Shrink the declared size of assets/big.txt in the central directory to 10 bytes.
    with zipfile.ZipFile(path) as z:
        info = z.getinfo("assets/big.txt")
    central = raw.rfind(b"PK\x01\x02", 0, raw.rfind(b"assets/big.txt"))
    raw[central + 24:central + 28] = (10).to_bytes(4, "little")
    path.write_bytes(bytes(raw))
    assert info.file_size == 300_000
    with pytest.raises(BundleError):
        bundle.read(path)


def manifest_with(**changes: str) -> bytes:
    text = GOOD.decode()
    for old, new in changes.items():
        assert old in text, old
        text = text.replace(old, new, 1)
    return text.encode()


@pytest.mark.parametrize(("text", "where", "says"), [
    (manifest_with(**{"id: app-builder": "id: ../evil"}), "id", "ids are"),
    (manifest_with(**{"id: app-builder": "id: a/b"}), "id", "ids are"),
    (manifest_with(**{"id: app-builder": "id: a~b"}), "id", "ids are"),
    (manifest_with(**{"id: app-builder": "id: a:b"}), "id", "ids are"),
    (manifest_with(**{'manifest_version: "1"': 'manifest_version: "2"'}), "manifest_version", ""),
    (manifest_with(**{"entrypoint: tools.files:write_file": "entrypoint: tools.files"}), "tools[0].entrypoint", "module.path:function"),
    (manifest_with(**{"id: read_file": "id: write_file"}), "tools[1].id", "declared twice"),
    (manifest_with(**{"    renderer:\n      type: code\n      file: \"$args.path\"\n      language: auto\n      editable": "    renderer:\n      type: fancy\n      editable"}), "tools[0].renderer.type", "must be one of"),
    (b"- just\n- a list\n", "", "mapping"),
    (b"a: &x [1, 2]\nb: *x\n", "line 2", "aliases"),
    (b"manifest_version: '1'\nid: x\nname: y\nsurprise: 1\n", "", "surprise"),
])
def test_manifest_rejections_name_the_place(text: bytes, where: str, says: str):
    with pytest.raises(ManifestError) as info:
        parse(text)
    assert info.value.path == where or (where == "" and says in str(info.value)), str(info.value)
    assert says in str(info.value)


def test_a_billion_laughs_manifest_is_refused_fast():
    lines = ["a0: &a0 [lol, lol, lol, lol, lol, lol, lol, lol, lol, lol]"]
    lines += [f"a{i}: &a{i} [*a{i-1}, *a{i-1}, *a{i-1}, *a{i-1}, *a{i-1}, *a{i-1}, *a{i-1}, *a{i-1}, *a{i-1}, *a{i-1}]" for i in range(1, 10)]
    with pytest.raises(ManifestError, match="aliases"):
        parse("\n".join(lines).encode())


def test_a_huge_manifest_is_refused():
    with pytest.raises(ManifestError, match="limit"):
        parse(b"# " + b"x" * (50 << 20))


@pytest.mark.parametrize(("entrypoint", "says"), [
    ("tools.missing:run", "needs tools/missing.py"),
    ("tools.files:nope", "has no function nope in tools/files.py"),
    ("tools:run", "names the tools folder"),
    ("os.path:join", "needs tools/os/path.py"),  # outside tools/: resolved under it, not imported
])
def test_entrypoints_are_checked_without_importing(tmp_path: Path, entrypoint: str, says: str):
    entries = example_entries()
    entries["toolset.yaml"] = manifest_with(**{"entrypoint: tools.files:write_file": f"entrypoint: {entrypoint}"})
    with pytest.raises(BundleError, match=says):
        bundle.read(make_zip(tmp_path / "e.zip", entries))


def test_a_syntax_error_names_file_and_line(tmp_path: Path):
    entries = example_entries() | {"tools/files.py": b"def write_file(:\n"}
    with pytest.raises(BundleError) as info:
        bundle.read(make_zip(tmp_path / "s.zip", entries))
    assert info.value.path == "tools/files.py:1"


@pytest.mark.parametrize("artifact", ["../outside.html", "/etc/passwd", "artifacts/missing.html"])
def test_html_artifacts_must_be_inside_the_toolset(tmp_path: Path, artifact: str):
    entries = example_entries()
    entries["toolset.yaml"] = manifest_with(**{"artifact: artifacts/stats.html": f"artifact: {artifact}"})
    with pytest.raises(BundleError, match="artifact"):
        bundle.read(make_zip(tmp_path / "h.zip", entries))


def test_not_a_zip_and_no_manifest(tmp_path: Path):
    junk = tmp_path / "junk.zip"
    junk.write_bytes(b"not a zip at all")
    with pytest.raises(BundleError, match="not a readable ZIP"):
        bundle.read(junk)
    with pytest.raises(BundleError, match="no toolset.yaml"):
        bundle.read(make_zip(tmp_path / "empty.zip", {"readme.txt": b"hi"}))
    with pytest.raises(BundleError, match="absolute path"):
        bundle.read("relative/path.zip")
