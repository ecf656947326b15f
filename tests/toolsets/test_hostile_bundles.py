"""Bundles built to attack the parser or the threads (issue 18 item 6), read directly."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import threading
import zipfile
from pathlib import Path

import pytest

from sidecar.toolsets import bundle
from sidecar.toolsets.bundle import BundleError
from sidecar.toolsets.manifest import MAX_MANIFEST_DEPTH, MAX_MANIFEST_NODES, ManifestError, parse
from tests.toolsets.hostile import deep_yaml, fifos, overlapping_zip
from tests.toolsets.test_bundle import EXAMPLE, GOOD, example_entries, make_zip


def read_in_thread(source: Path) -> BaseException | None:
    """bundle.read on a thread, so a read that blocks (a FIFO opened for reading) fails the test
    instead of hanging it; the blocked open is released by opening the FIFOs for writing."""
    outcome: list[BaseException | None] = []

    def run() -> None:
        try:
            bundle.read(source)
            outcome.append(None)
        except BaseException as exc:
            outcome.append(exc)

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    thread.join(20)
    if thread.is_alive():
        for pipe in source.rglob("pipe*"):
            fd = os.open(pipe, os.O_WRONLY | os.O_NONBLOCK)
            os.close(fd)
        thread.join(5)
        pytest.fail("reading the bundle blocked on a FIFO")
    return outcome[0]


@pytest.mark.parametrize("text", [deep_yaml(), b"{a: " * 5_000 + b"}" * 5_000,
                                  b"".join(b"  " * i + b"- \n" for i in range(400))])
def test_a_deeply_nested_manifest_is_refused_without_building_it(text: bytes):
    # Built with libyaml, 25,000 levels overflowed the C stack: SIGSEGV, the whole process gone.
    with pytest.raises(ManifestError, match=f"nested more than {MAX_MANIFEST_DEPTH} levels"):
        parse(text)


def test_a_manifest_of_too_many_values_is_refused_before_they_are_built():
    # Under the 1 MiB limit, but building its 260,000 values took 3.5 s of CPU.
    text = GOOD + b"x:\n" + b"  - [a, {b: c}]\n" * 65_000
    assert len(text) < 1 << 20
    with pytest.raises(ManifestError, match=f"more than {MAX_MANIFEST_NODES} values"):
        parse(text)


def test_a_manifest_as_deep_as_allowed_still_parses():
    schema = "{}"
    for _ in range((MAX_MANIFEST_DEPTH - 4) // 2):  # the manifest, tools, a tool: 3 levels; each wrap 2
        schema = '{"type": "object", "properties": {"x": ' + schema + "}}"
    text = GOOD.replace(b"entrypoint: tools.files:write_file\n",
                        b"entrypoint: tools.files:write_file\n    input_schema: " + schema.encode() + b"\n", 1)
    assert text != GOOD
    parsed = parse(text)
    assert parsed.manifest.tools[0].input_schema is not None


def test_a_deep_manifest_in_a_folder_is_an_invalid_bundle_naming_the_manifest(tmp_path: Path):
    folder = tmp_path / "ts"
    shutil.copytree(EXAMPLE, folder)
    (folder / "toolset.yaml").write_bytes(deep_yaml())
    with pytest.raises(BundleError, match="nested more than") as caught:
        bundle.read(folder)
    assert caught.value.path.startswith("toolset.yaml")


def test_a_fifo_in_a_folder_is_refused_without_being_opened(tmp_path: Path):
    folder = tmp_path / "ts"
    shutil.copytree(EXAMPLE, folder)
    fifos(folder / "tools", 1)
    error = read_in_thread(folder)
    assert isinstance(error, BundleError)
    assert error.path == "tools/pipe0.py" and "named pipe" in error.reason


def test_a_fifo_given_as_the_bundle_is_refused(tmp_path: Path):
    pipe = fifos(tmp_path, 1)[0]
    error = read_in_thread(pipe)
    assert isinstance(error, BundleError) and "named pipe" in str(error)


def test_a_file_and_a_folder_of_the_same_name_are_refused(tmp_path: Path):
    entries = example_entries() | {"tools": b"a file named like the folder"}
    with pytest.raises(BundleError, match="is a file, and 'tools/") as caught:
        bundle.read(make_zip(tmp_path / "clash.zip", entries))
    assert caught.value.path == "tools"


def test_names_that_differ_only_in_case_are_refused(tmp_path: Path):
    entries = example_entries() | {"Tools/files.py": b"x = 1\n"}
    with pytest.raises(BundleError, match="only in case"):
        bundle.read(make_zip(tmp_path / "case.zip", entries))


def test_overlapping_entries_are_refused_before_anything_inflates(tmp_path: Path):
    path = overlapping_zip(tmp_path / "overlap.zip", example_entries())
    with zipfile.ZipFile(path) as z:  # the archive is valid: each entry reads, with a right CRC
        assert len(z.read("assets/o0000.bin")) > 1 << 20
    assert path.stat().st_size < 100_000
    with pytest.raises(BundleError, match="overlaps") as caught:
        bundle.read(path)
    assert caught.value.path == "assets/o0001.bin"


@pytest.mark.parametrize("source", ["x = " + "-" * 100_000 + "1", "x = " + "a." * 100_000 + "b",
                                    "x = " + "1+" * 100_000 + "1", "x = 1\0"])
def test_python_too_deep_for_the_parser_is_an_invalid_bundle(tmp_path: Path, source: str):
    entries = example_entries() | {"tools/files.py": source.encode()}
    with pytest.raises(BundleError) as caught:
        bundle.read(make_zip(tmp_path / "deep.zip", entries))
    assert caught.value.path.startswith("tools/files.py")


def test_the_bundle_path_itself_may_be_a_link(tmp_path: Path):
    # Only what is inside a toolset may not be a link: the path the user picked may (a Downloads alias).
    real = make_zip(tmp_path / "real.zip", example_entries())
    (tmp_path / "alias.zip").symlink_to(real)
    assert bundle.read(tmp_path / "alias.zip").manifest.id == "app-builder"


def test_a_module_too_big_to_parse_here_is_checked_line_by_line(tmp_path: Path):
    # ast.parse of an 8 MiB module of one-line statements held 3.3 GB: such a module is read by
    # its lines here and parsed only in the worker's own process.
    padding = b"".join(b"x%d = %d\n" % (i, i) for i in range(bundle.MAX_PARSED_MODULE_BYTES // 10))
    tool = (EXAMPLE / "tools" / "files.py").read_bytes()
    big = make_zip(tmp_path / "big.zip", example_entries() | {"tools/files.py": padding + tool})
    assert {t.id for t in bundle.read(big).manifest.tools} >= {"write_file", "read_file"}
    gone = tool.replace(b"def read_file(", b"def read_file_renamed(")
    assert gone != tool
    wrong = make_zip(tmp_path / "wrong.zip", example_entries() | {"tools/files.py": padding + gone})
    with pytest.raises(BundleError, match="has no function read_file in tools/files.py"):
        bundle.read(wrong)


def test_an_8_mib_module_is_read_within_a_gib_of_memory(tmp_path: Path):
    # Parsed here, it held 3.3 GB (the sidecar's own memory): read in a process capped at 1 GiB.
    padding = b"".join(b"x%d = %d\n" % (i, i) for i in range((8 << 20) // 14))
    module = padding + (EXAMPLE / "tools" / "files.py").read_bytes()
    big = make_zip(tmp_path / "big.zip", example_entries() | {"tools/files.py": module})
    script = ("import resource, sys; resource.setrlimit(resource.RLIMIT_AS, (1 << 30, 1 << 30)); "
              "from sidecar.toolsets import bundle; print(bundle.read(sys.argv[1]).manifest.id)")
    done = subprocess.run([sys.executable, "-c", script, str(big)], capture_output=True, text=True, timeout=120,
                          cwd=Path(__file__).resolve().parents[2])
    assert done.returncode == 0 and done.stdout.strip() == "app-builder", done.stderr[-2000:]
