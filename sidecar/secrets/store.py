"""The one secret store: values in the OS keystore, or in a 0600 file where there is none.

Which backend a data directory uses is chosen once and recorded there: ``secrets-keystore.json``
(the keystore's service name and the names it holds, never a value) or ``secrets.json`` (the values,
mode 0600). The choice is made the first time a secret is stored or the backend is asked for, not at
start-up: importing ``keyring`` costs about 25 MB and 250 ms, which a sidecar without secrets never
pays. With nothing recorded, the keystore is probed (write, read back, delete); if it cannot be used
the file is chosen and recorded. Once the keystore is recorded, a keystore that is locked or gone is
an error (StorageError naming what to do), never a silent switch to the file that would hide the
user's values. ``--secrets-backend file`` (or ``SIDECAR_SECRETS_BACKEND=file``) forces the file;
``keystore`` forbids the fallback.

The store accepts any name. Names the user gives (``^[A-Z_][A-Z0-9_]{0,127}$``) are what ``${VAR}``
refers to and what ``secrets/list`` shows; other parts of the sidecar keep entries under names that
cannot collide with those (they hold ``:`` or lower case, e.g. ``provider:<id>``).

Every value read or stored is registered with ``known`` (log lines and error texts are scrubbed of
it). Cache: every value read or stored this session stays in memory, and which names exist is known from
the record, so a warm read and a lookup of a name the store does not hold (``${HOME}``) touch neither
the keystore nor the disk. That is safe because the sidecar is the only writer of its entries, through
this class; an entry changed behind its back (in the system's keychain app) is seen after a restart.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import re
import secrets as random
from collections.abc import Awaitable, Callable, Iterable, Iterator, Mapping
from pathlib import Path
from typing import Any, Literal, TypeVar

import anyio

from ..errors import InvalidParams, StorageError
from ..settings import SECRETS_FILE, SECRETS_INDEX, Settings
from .keystore import Keystore, KeystoreUnavailable
from .known import remember, remember_all

log = logging.getLogger("sidecar.secrets")

Backend = Literal["keystore", "file"]
Preference = Literal["auto", "keystore", "file"]

FILE_NAME = SECRETS_FILE
INDEX_NAME = SECRETS_INDEX
SERVICE = "covalt-sidecar"
KEYSTORE_TIMEOUT = 20.0  # seconds: a keystore showing an unlock prompt may take a while, not forever
USER_NAME = re.compile(r"^[A-Z_][A-Z0-9_]{0,127}$")
USER_NAME_RULE = "use 1-128 upper-case letters, digits and '_', not starting with a digit"

T = TypeVar("T")
OnChange = Callable[[str], Awaitable[None]]


MAX_VALUE = 65536  # characters: far beyond any key or token, well within every keystore


def is_user_name(name: str) -> bool:
    """A name the user gives, that ``${VAR}`` can refer to and ``secrets/list`` shows."""
    return USER_NAME.fullmatch(name) is not None  # fullmatch: '$' alone lets a final newline through


def check_user_name(name: str, path: str = "params.name") -> str:
    if not is_user_name(name):
        raise InvalidParams(path, f"{USER_NAME_RULE} (^[A-Z_][A-Z0-9_]{{0,127}}$)")
    return name


def check_value(value: str, path: str = "params.value") -> str:
    """A value as it will be stored (trailing whitespace stripped), or InvalidParams saying what is wrong."""
    value = value.rstrip()
    if not value:
        raise InvalidParams(path, "is empty; to remove a secret use secrets/delete")
    if "\x00" in value:
        raise InvalidParams(path, "holds a NUL character, which no keystore can store")
    if len(value) > MAX_VALUE:
        raise InvalidParams(path, f"is longer than {MAX_VALUE} characters")
    return value


def recorded_backend(data_dir: Path, prefer: Preference = "auto") -> Backend | None:
    """The backend `data_dir` uses, without touching the keystore: what is forced or recorded, or
    None while nothing was ever stored there (the choice is made when the first secret is)."""
    return Settings(data_dir=data_dir, secrets_backend=prefer).recorded_secrets_backend()


class SecretStore:
    def __init__(self, data_dir: Path, prefer: Preference = "auto", on_change: OnChange | None = None) -> None:
        self.data_dir = data_dir
        self.prefer = prefer
        self._on_change = on_change
        self._lock = anyio.Lock()
        self._values: dict[str, str] = {}  # every value read or stored this session
        self._names: set[str] = set()  # every name the backend holds, from its record
        self._keystore: Keystore | None = None
        self._chosen: Backend | None = None
        self.error: str | None = None  # why the last use of the keystore failed, until one succeeds
        self._broken: str | None = None  # a record that cannot be read: every use fails, nothing is overwritten
        try:
            self._open()
        except StorageError as exc:
            self._broken = self.error = exc.message
            log.error("%s", exc.message)

    # -- what is in use ----------------------------------------------------------------------

    @property
    def backend(self) -> Backend:
        """The backend in use, or the one that will be tried first while none is chosen yet."""
        return self._chosen or ("file" if self.prefer == "file" else "keystore")

    @property
    def chosen(self) -> bool:
        return self._chosen is not None

    @property
    def path(self) -> Path:
        """Where the record of this store lives (the values too, for the file backend)."""
        return self.data_dir / (FILE_NAME if self.backend == "file" else INDEX_NAME)

    async def choose(self) -> Backend:
        """Make (and record) the choice now if it was not made yet; the backend in use."""
        async with self._lock:
            return await self._choose()

    # -- reading -----------------------------------------------------------------------------

    def cached(self, name: str) -> str | None:
        """The value if it was read or stored this session: no keystore call, no await."""
        return self._values.get(name)

    async def get(self, name: str) -> str | None:
        """The value stored under `name`, or None.

        Raises:
            StorageError: the keystore holds `name` but is locked or not reachable.
        """
        if self._broken is not None:
            raise StorageError(self._broken)
        value = self._values.get(name)
        if value is not None or name not in self._names:
            return value
        async with self._lock:
            if name in self._values or name not in self._names:
                return self._values.get(name)
            keystore = self._keystore
            assert keystore is not None  # names without a loaded value are the keystore's
            value = await self._run(keystore.get, name)
            if value is not None:
                remember(value)  # scrubbed from every log line and error text from now on
                self._values[name] = value
            return value

    async def names(self) -> list[str]:
        """Every name stored, sorted (internal ones included)."""
        return sorted(self._names)

    async def environ(self, names: Iterable[str]) -> Mapping[str, str]:
        """What ``${VAR}`` resolves against: the user's secrets first, then the process environment.

        The values of `names` the store holds are read first (once; later calls find them cached), so
        the mapping itself never blocks.
        """
        self._check()
        for name in names:
            if is_user_name(name) and name in self._names and name not in self._values:
                await self.get(name)
        return Variables(self._values)

    # -- writing -----------------------------------------------------------------------------

    async def set(self, name: str, value: str) -> None:
        """Store `value` (trailing whitespace and newlines stripped: a pasted key often ends with one).

        Raises:
            StorageError: the keystore is locked or not reachable, or the file cannot be written; the
                value stored before (if any) is kept.
        """
        value = value.rstrip()
        remember(value)  # before anything could fail with it in a message
        async with self._lock:
            backend = await self._choose()
            if backend == "file":
                await self._write_file({**self._file_values(), name: value})
            else:
                keystore = self._keystore
                assert keystore is not None
                new = name not in self._names
                if new:
                    # Recorded first: a name without a value reads as unset, a value without a name
                    # would be lost to the store.
                    await self._write_index(self._names | {name})
                try:
                    await self._run(keystore.set, name, value)
                except StorageError:
                    if new:
                        await self._write_index(self._names)
                    raise
            self._names.add(name)
            self._values[name] = value
        log.info("secret %s stored (%s)", name, backend)
        await self._changed(name)

    async def delete(self, name: str) -> bool:
        """Forget `name`; False when the store did not hold it.

        Raises:
            StorageError: the keystore is locked or not reachable (the entry is kept).
        """
        async with self._lock:
            if name not in self._names:
                return False
            self._check()
            if self._chosen == "file":
                await self._write_file({k: v for k, v in self._file_values().items() if k != name})
            else:
                keystore = self._keystore
                assert keystore is not None
                await self._run(keystore.delete, name)
                await self._write_index(self._names - {name})
            self._names.discard(name)
            self._values.pop(name, None)
        log.info("secret %s deleted", name)
        await self._changed(name)
        return True

    async def warm(self) -> None:
        """Read every stored value into the cache, and so find a locked or missing keystore at once
        rather than at the first tool call. Failures are logged and kept in ``error``."""
        try:
            for name in sorted(self._names):
                await self.get(name)
        except StorageError as exc:
            log.warning("%s", exc.message)

    # -- inside ------------------------------------------------------------------------------

    async def _changed(self, name: str) -> None:
        if self._on_change is not None:
            await self._on_change(name)

    def _open(self) -> None:
        """Read the record: which backend, which names (and the file backend's values)."""
        file_path, index_path = self.data_dir / FILE_NAME, self.data_dir / INDEX_NAME
        if self.prefer != "keystore" and (self.prefer == "file" or file_path.exists()):
            self._chosen = "file"
            if index_path.exists():
                log.warning("the file backend is forced: the secrets recorded in %s stay in the OS keystore, "
                            "unused until the backend is no longer forced", index_path)
            if file_path.exists():
                values = self._read_file(file_path)
                remember_all(values.values())
                self._values.update(values)
                self._names.update(values)
            return
        if index_path.exists() or self.prefer == "keystore":
            if file_path.exists():
                log.warning("the keystore backend is forced: the secrets in %s are not used", file_path)
            self._chosen = "keystore"
            service, names = self._read_index(index_path) if index_path.exists() else (self._service(), [])
            self._keystore = Keystore(service)
            self._names.update(names)

    def _check(self) -> None:
        if self._broken is not None:
            raise StorageError(self._broken)

    async def _choose(self) -> Backend:
        self._check()
        if self._chosen == "keystore" and not (self.data_dir / INDEX_NAME).exists():
            await self._run(self._new_keystore().probe)  # forced, never used: record it once it works
            await self._write_index(set())
        if self._chosen is not None:
            return self._chosen
        keystore = self._new_keystore()
        try:
            kind = await self._run(keystore.probe)
        except StorageError as exc:
            log.info("secrets go to %s (mode 0600): %s", self.data_dir / FILE_NAME, exc.message)
            self.error = None
            await self._write_file({})
            self._chosen = "file"
            return "file"
        await self._write_index(set())
        self._chosen = "keystore"
        log.info("secrets go to the OS keystore (%s, service %s)", kind, keystore.service)
        return "keystore"

    def _new_keystore(self) -> Keystore:
        if self._keystore is None:
            self._keystore = Keystore(self._service())
        return self._keystore

    def _service(self) -> str:
        # Two data directories (tests run many sidecars at once) must not share entries; the name is
        # recorded, so a data directory that moves keeps its entries.
        digest = hashlib.sha256(str(self.data_dir.absolute()).encode()).hexdigest()[:16]
        return f"{SERVICE}:{digest}"

    async def _run(self, op: Callable[..., T], *args: Any) -> T:
        """A keystore call in a worker thread (it blocks); its failure is a StorageError."""
        try:
            with anyio.fail_after(KEYSTORE_TIMEOUT):
                result = await anyio.to_thread.run_sync(lambda: op(*args), abandon_on_cancel=True)
        except KeystoreUnavailable as exc:
            self.error = str(exc)
            raise StorageError(str(exc)) from None
        except TimeoutError:
            self.error = (f"the OS keystore did not answer within {KEYSTORE_TIMEOUT:.0f} s; check that it is "
                          "running and unlocked, and try again")
            raise StorageError(self.error) from None
        self.error = None
        return result

    # -- the files ---------------------------------------------------------------------------

    def _file_values(self) -> dict[str, str]:
        return {name: self._values[name] for name in self._names if name in self._values}

    def _read_file(self, path: Path) -> dict[str, str]:
        try:
            mode = path.stat().st_mode & 0o777
            if os.name == "posix" and mode & 0o077:
                os.chmod(path, 0o600)
                log.warning("%s was readable by others (mode %o); it is 0600 again", path, mode)
            data = json.loads(path.read_bytes())
            values = data["secrets"]
            if not (isinstance(values, dict) and all(isinstance(v, str) for v in values.values())):
                raise ValueError("'secrets' is not a mapping of names to strings")
        except (OSError, ValueError, KeyError, TypeError) as exc:
            # Never overwritten while it cannot be read: every use fails until it is fixed or moved.
            self.error = f"the secrets file {path} cannot be read ({type(exc).__name__}); fix it or move it aside"
            raise StorageError(self.error) from None
        return values

    def _read_index(self, path: Path) -> tuple[str, list[str]]:
        try:
            data = json.loads(path.read_bytes())
            service, names = data["service"], data["names"]
            if not (isinstance(service, str) and isinstance(names, list)):
                raise ValueError("'service' or 'names' has the wrong type")
            return service, [n for n in names if isinstance(n, str)]
        except (OSError, ValueError, KeyError, TypeError) as exc:
            raise StorageError(f"the secret index {path} cannot be read ({type(exc).__name__}); "
                               "fix it or move it aside") from None

    async def _write_file(self, values: dict[str, str]) -> None:
        data = {"version": 1, "secrets": dict(sorted(values.items()))}
        await anyio.to_thread.run_sync(write_private, self.data_dir / FILE_NAME, data)  # fsync blocks

    async def _write_index(self, names: set[str]) -> None:
        data = {"version": 1, "service": self._new_keystore().service, "names": sorted(names)}
        await anyio.to_thread.run_sync(write_private, self.data_dir / INDEX_NAME, data)


class Variables(Mapping[str, str]):
    """The user's secrets over the process environment; internal entries are not variables."""

    def __init__(self, values: Mapping[str, str]) -> None:
        self._values = values

    def __getitem__(self, name: str) -> str:
        value = self._values.get(name) if is_user_name(name) else None
        return value if value is not None else os.environ[name]

    def __iter__(self) -> Iterator[str]:
        return iter({*(n for n in self._values if is_user_name(n)), *os.environ})

    def __len__(self) -> int:
        return sum(1 for _ in self)


def write_private(path: Path, data: Any) -> None:
    """Replace `path` atomically with `data` as JSON, readable by the owner only at every moment: the
    temporary file is created 0600 (never chmod-ed after the fact) in the same directory.

    Raises:
        StorageError: the directory cannot be written; the old file is left as it was.
    """
    body = json.dumps(data, indent=1).encode()
    tmp = path.with_name(f".{path.name}.{random.token_hex(6)}.tmp")
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0), 0o600)
        try:
            view = memoryview(body)
            while view:
                view = view[os.write(fd, view):]
            os.fsync(fd)
        finally:
            os.close(fd)
        os.replace(tmp, path)
    except OSError as exc:
        tmp.unlink(missing_ok=True)
        raise StorageError(f"cannot write {path}: {exc.strerror or exc}") from None
    if os.name == "posix":
        try:
            dir_fd = os.open(path.parent, os.O_RDONLY)
            try:
                os.fsync(dir_fd)  # the rename itself survives a power cut
            finally:
                os.close(dir_fd)
        except OSError:
            pass
