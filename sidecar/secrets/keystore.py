"""The operating system's keystore (macOS Keychain, Windows Credential Locker, the Secret Service on
Linux) through the ``keyring`` library.

Every call here blocks (a D-Bus round trip, a Keychain query) and the first one imports ``keyring``,
which costs about 25 MB and 250 ms: the store runs them in a worker thread, and only once a secret
is needed, never at start-up. Messages raised from here name what failed and what to do; they never
hold a value.
"""

from __future__ import annotations

from typing import Any

from .masking import scrub

# The keyring backends that store nothing: keyring picks one when no keystore is reachable.
_NOT_A_KEYSTORE = ("keyring.backends.fail", "keyring.backends.null", "keyring.backends.chainer")
PROBE_NAME = "covalt-sidecar probe"


class KeystoreUnavailable(Exception):
    """The keystore cannot be used right now; ``str()`` says why and what to do (no secret in it)."""


def _keyring() -> Any:
    import keyring  # heavy (keyring, secretstorage, cryptography): only once a keystore is needed

    return keyring


def backend_name() -> str:
    """The keystore ``keyring`` would use here.

    Raises:
        KeystoreUnavailable: keyring found no keystore (a headless box without a Secret Service).
    """
    backend = _keyring().get_keyring()
    kind = f"{type(backend).__module__}.{type(backend).__name__}"
    usable = getattr(backend, "priority", 0) > 0 and not type(backend).__module__.startswith(_NOT_A_KEYSTORE)
    if not usable:
        raise KeystoreUnavailable(f"no OS keystore is available (keyring chose {kind})")
    return kind


class Keystore:
    """One data directory's entries: the keystore's service name keeps two data directories apart."""

    def __init__(self, service: str) -> None:
        self.service = service

    def probe(self) -> str:
        """Write, read back and delete an entry: a keystore that answers but cannot store fails here."""
        kind = backend_name()
        self.set(PROBE_NAME, "probe")
        try:
            if self.get(PROBE_NAME) != "probe":
                raise KeystoreUnavailable(f"the OS keystore ({kind}) did not return what was stored in it")
        finally:
            self.delete(PROBE_NAME)
        return kind

    def get(self, name: str) -> str | None:
        return self._call("read", name, lambda kr: kr.get_password(self.service, name))

    def set(self, name: str, value: str) -> None:
        self._call("store", name, lambda kr: kr.set_password(self.service, name, value), value)

    def delete(self, name: str) -> None:
        keyring = _keyring()

        def delete(kr: Any) -> None:
            try:
                kr.delete_password(self.service, name)
            except keyring.errors.PasswordDeleteError:
                pass  # not there: what delete wants

        self._call("delete", name, delete)

    def _call(self, verb: str, name: str, op: Any, value: str = "") -> Any:
        keyring = _keyring()
        try:
            backend_name()
        except KeystoreUnavailable as exc:
            raise KeystoreUnavailable(f"cannot {verb} the secret {name}: {exc}; the secrets of this app are kept "
                                      "there: start or unlock it, and try again") from None
        try:
            return op(keyring)
        except keyring.errors.KeyringLocked as exc:
            raise KeystoreUnavailable(
                f"cannot {verb} the secret {name}: the OS keystore is locked; unlock it (for example by "
                "logging in to the desktop session or in the system's keychain app) and try again"
            ) from exc
        except Exception as exc:  # D-Bus, Keychain and Credential Locker each raise their own errors
            reason = scrub(f"{type(exc).__name__}: {exc}", [value])
            raise KeystoreUnavailable(
                f"cannot {verb} the secret {name}: the OS keystore did not answer ({reason}); check that it "
                "is running and unlocked, and try again"
            ) from exc
