"""A real Secret Service for the tests: a private D-Bus session bus with an unlocked gnome-keyring
on it, so the sidecar's keystore backend is tested against the real thing (and not the desktop's)."""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

PASSWORD = "test-keyring-password"
# A bus that activates nothing: no stray keyring daemon or unlock prompter is started behind the
# test's back, and a keystore that is stopped stays gone.
BUS_CONFIG = """<!DOCTYPE busconfig PUBLIC "-//freedesktop//DTD D-Bus Bus Configuration 1.0//EN"
 "http://www.freedesktop.org/standards/dbus/1.0/busconfig.dtd">
<busconfig>
  <type>session</type>
  <listen>unix:dir={dir}</listen>
  <auth>EXTERNAL</auth>
  <policy context="default">
    <allow send_destination="*" eavesdrop="true"/>
    <allow eavesdrop="true"/>
    <allow own="*"/>
  </policy>
</busconfig>
"""


def _binaries() -> tuple[str, str]:
    dbus, keyring = shutil.which("dbus-daemon"), shutil.which("gnome-keyring-daemon")
    if dbus is None or keyring is None:
        pytest.skip("gnome-keyring-daemon or dbus-daemon is not installed: scripts/test installs them as root "
                    "with apt-get (Debian packages gnome-keyring and dbus-daemon)")
    return dbus, keyring


def _stop(proc: subprocess.Popen[bytes]) -> None:
    if proc.poll() is None:
        proc.terminate()
        try:
            proc.wait(5)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(5)


def _has_owner(address: str, name: str) -> bool:
    from jeepney import DBusAddress, new_method_call
    from jeepney.io.blocking import open_dbus_connection

    bus = DBusAddress("/org/freedesktop/DBus", bus_name="org.freedesktop.DBus", interface="org.freedesktop.DBus")
    with open_dbus_connection(bus=address) as conn:
        return bool(conn.send_and_get_reply(new_method_call(bus, "NameHasOwner", "s", (name,))).body[0])


class SecretService:
    """The bus and the keyring daemon; ``env`` is what a process needs to use them."""

    def __init__(self, root: Path) -> None:
        self.dbus, self.daemon_path = _binaries()
        self.root = root
        home = root / "home"
        home.mkdir(parents=True, mode=0o700)
        # Sockets go here: a pytest path can be longer than a socket path may be (108 bytes).
        runtime = self.runtime = Path(tempfile.mkdtemp(prefix="covalt-bus-"))
        config = root / "bus.conf"
        config.write_text(BUS_CONFIG.format(dir=runtime))
        self.bus = subprocess.Popen([self.dbus, f"--config-file={config}", "--nofork", "--print-address=1",
                                     "--nopidfile"], stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        assert self.bus.stdout is not None and self.bus.stderr is not None
        address = self.bus.stdout.readline().decode().strip()
        if not address:
            self.bus.wait(5)
            shutil.rmtree(runtime, ignore_errors=True)
            raise AssertionError(f"dbus-daemon printed no address: {self.bus.stderr.read().decode()}")
        self.env = {"DBUS_SESSION_BUS_ADDRESS": address, "HOME": str(home),
                    "XDG_DATA_HOME": str(home / "share"), "XDG_CONFIG_HOME": str(home / "config"),
                    "XDG_RUNTIME_DIR": str(runtime)}
        self.daemon: subprocess.Popen[bytes] | None = None
        self.start_keyring()

    def start_keyring(self) -> None:
        """Start (again) the keyring daemon, unlocked with the password its keyring was made with."""
        env = {**os.environ, **self.env}
        self.daemon = subprocess.Popen([self.daemon_path, "--foreground", "--unlock", "--components=secrets"],
                                       stdin=subprocess.PIPE, stdout=subprocess.DEVNULL,
                                       stderr=subprocess.DEVNULL, env=env)
        assert self.daemon.stdin is not None
        self.daemon.stdin.write(f"{PASSWORD}\n".encode())
        self.daemon.stdin.close()
        deadline = time.monotonic() + 10
        while not _has_owner(self.env["DBUS_SESSION_BUS_ADDRESS"], "org.freedesktop.secrets"):
            assert self.daemon.poll() is None, "gnome-keyring-daemon exited at start"
            assert time.monotonic() < deadline, "gnome-keyring-daemon did not take org.freedesktop.secrets"
            time.sleep(0.02)

    def stop_keyring(self) -> None:
        """The keystore goes away (as when the desktop session ends)."""
        if self.daemon is not None:
            _stop(self.daemon)
            self.daemon = None

    def lock(self) -> None:
        """Lock the default collection, as a screen lock or the user in the keychain app would."""
        import secretstorage
        from jeepney.io.blocking import open_dbus_connection

        with open_dbus_connection(bus=self.env["DBUS_SESSION_BUS_ADDRESS"]) as conn:
            secretstorage.get_default_collection(conn).lock()

    def items(self) -> dict[tuple[str, str], str]:
        """Every (service, name) -> value in the keystore, read directly (not through the sidecar)."""
        import secretstorage
        from jeepney.io.blocking import open_dbus_connection

        with open_dbus_connection(bus=self.env["DBUS_SESSION_BUS_ADDRESS"]) as conn:
            found = {}
            for item in secretstorage.get_default_collection(conn).get_all_items():
                attrs = item.get_attributes()
                if "service" in attrs:
                    found[attrs["service"], attrs.get("username", "")] = item.get_secret().decode()
            return found

    def close(self) -> None:
        self.stop_keyring()
        _stop(self.bus)
        shutil.rmtree(self.runtime, ignore_errors=True)


@contextmanager
def secret_service(root: Path) -> Iterator[SecretService]:
    service = SecretService(root)
    try:
        yield service
    finally:
        service.close()
