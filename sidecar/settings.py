"""Settings from the command line and the environment (the command line wins)."""

from __future__ import annotations

import argparse
import os
from pathlib import Path
from typing import Literal
from urllib.parse import urlsplit

import msgspec

LOG_LEVELS = ("debug", "info", "warning", "error")
SECRETS_BACKENDS = ("auto", "keystore", "file")
SANDBOXES = ("auto", "bubblewrap", "landlock", "none")
# What the secret store records in the data directory (sidecar/secrets/store.py): the file backend's
# values (mode 0600), or the keystore backend's service name and entry names (never a value).
SECRETS_FILE = "secrets.json"
SECRETS_INDEX = "secrets-keystore.json"


class Settings(msgspec.Struct, frozen=True, kw_only=True):
    data_dir: Path
    log_level: str = "info"
    parent_pid: int | None = None
    max_line_bytes: int = 64 << 20
    shutdown_timeout: float = 5.0  # seconds for the whole shutdown path before we exit anyway
    parent_poll_interval: float = 1.0
    # Where secrets go: "auto" (the OS keystore, else a 0600 file), "keystore" (never the file) or "file".
    secrets_backend: Literal["auto", "keystore", "file"] = "auto"
    # The HTTPS URL of the app's OAuth client ID metadata document: the client_id a remote MCP
    # server's authorization server gets when it supports those documents (else dynamic registration).
    oauth_client_metadata_url: str | None = None
    # The largest bundle toolsets/import {url} downloads (the body is refused past it, or before
    # reading when its Content-Length says more).
    max_bundle_bytes: int = 256 << 20
    # The most bytes one workspace/upload copies (counted while copying; the upload is refused past it).
    max_upload_bytes: int = 4 << 30
    # Seconds a soft-deleted toolset (toolsets/delete) is kept, restorable, before the reaper removes it.
    soft_delete_retention: float = 2 * 86400.0
    # What confines tool processes (sidecar/sandbox/detect.py): "auto" (bubblewrap, else Landlock, else
    # rlimits only), one of those forced, or "none" (unconfined; status then says so loudly).
    sandbox: Literal["auto", "bubblewrap", "landlock", "none"] = "auto"
    # The sentence-embedding model that ranks tools by meaning (sidecar/embedding): a model.onnx path,
    # "none" (rank by words only), or None for the one an installed package ships; its tokenizer.json
    # likewise (None: the packaged one).
    embedding_model: str | None = None
    embedding_tokenizer: str | None = None

    @property
    def db_path(self) -> Path:
        return self.data_dir / "sidecar.db"

    @property
    def lock_path(self) -> Path:
        return self.data_dir / "sidecar.lock"

    def recorded_secrets_backend(self) -> Literal["keystore", "file"] | None:
        """Where this data directory keeps secrets, without touching the keystore (``initialize``
        says it; importing the secret store would cost its first answer milliseconds): what is
        forced or recorded, or None while no secret was ever stored here."""
        if self.secrets_backend != "auto":
            return self.secrets_backend
        if (self.data_dir / SECRETS_FILE).exists():
            return "file"
        return "keystore" if (self.data_dir / SECRETS_INDEX).exists() else None


def default_data_dir() -> Path:
    import platformdirs  # only needed when neither --data-dir nor SIDECAR_DATA_DIR is given

    return Path(platformdirs.user_data_dir("covalt-sidecar", appauthor=False))


def _positive_int(text: str) -> int:
    value = int(text)
    if value <= 0:
        raise argparse.ArgumentTypeError(f"must be a positive integer, got {text}")
    return value


_UNITS = {"s": 1, "m": 60, "h": 3600, "d": 86400}


def duration(text: str) -> float:
    """``90s``, ``30m``, ``12h``, ``2d`` or plain seconds, as seconds (positive)."""
    body, unit = (text[:-1], text[-1]) if text and text[-1].lower() in _UNITS else (text, "s")
    try:
        value = float(body) * _UNITS[unit.lower()]
    except ValueError:
        raise argparse.ArgumentTypeError(f"give a duration such as 2d, 12h, 30m or 90s, got {text!r}") from None
    if not value > 0 or value == float("inf"):
        raise argparse.ArgumentTypeError(f"must be a positive duration, got {text!r}")
    return value


def parse(argv: list[str] | None = None, environ: dict[str, str] | None = None) -> Settings:
    env = os.environ if environ is None else environ
    parser = argparse.ArgumentParser(
        prog="python -m sidecar",
        description="Tool host sidecar: JSON-RPC 2.0 over stdio (one JSON object per line).",
    )
    parser.add_argument("--data-dir", default=env.get("SIDECAR_DATA_DIR"),
                        help="where the database, workspaces and toolsets live "
                             "(env SIDECAR_DATA_DIR; default: the per-user data directory)")
    parser.add_argument("--log-level", choices=LOG_LEVELS,
                        default=env.get("SIDECAR_LOG_LEVEL", "info").lower(),
                        help="stderr log level (env SIDECAR_LOG_LEVEL)")
    parser.add_argument("--parent-pid", type=_positive_int,
                        default=env.get("SIDECAR_PARENT_PID") or None,
                        help="shut down when this process exits (env SIDECAR_PARENT_PID)")
    parser.add_argument("--max-line-bytes", type=_positive_int,
                        default=env.get("SIDECAR_MAX_LINE_BYTES") or 64 << 20,
                        help="longest accepted message line (default 64 MiB)")
    parser.add_argument("--secrets-backend", choices=SECRETS_BACKENDS,
                        default=env.get("SIDECAR_SECRETS_BACKEND", "auto").lower(),
                        help="where secrets are stored: auto (the OS keystore, else a 0600 file in the data "
                             "directory), keystore (never the file) or file (env SIDECAR_SECRETS_BACKEND)")
    parser.add_argument("--oauth-client-metadata-url", default=env.get("SIDECAR_OAUTH_CLIENT_METADATA_URL") or None,
                        help="HTTPS URL of the app's OAuth client ID metadata document, used as its client_id "
                             "where an MCP server's authorization server takes one "
                             "(env SIDECAR_OAUTH_CLIENT_METADATA_URL)")
    parser.add_argument("--max-bundle-bytes", type=_positive_int,
                        default=env.get("SIDECAR_MAX_BUNDLE_BYTES") or 256 << 20,
                        help="largest bundle ZIP toolsets/import downloads from a URL (default 256 MiB; "
                             "env SIDECAR_MAX_BUNDLE_BYTES)")
    parser.add_argument("--max-upload-bytes", type=_positive_int,
                        default=env.get("SIDECAR_MAX_UPLOAD_BYTES") or 4 << 30,
                        help="most bytes one workspace/upload copies in, counted while copying (default 4 GiB; "
                             "env SIDECAR_MAX_UPLOAD_BYTES)")
    parser.add_argument("--soft-delete-retention", type=duration,
                        default=env.get("SIDECAR_SOFT_DELETE_RETENTION") or "2d",
                        help="how long a deleted toolset stays restorable before it is removed for good: "
                             "2d, 12h, 30m, 90s (default 2d; env SIDECAR_SOFT_DELETE_RETENTION)")
    parser.add_argument("--sandbox", choices=SANDBOXES, default=env.get("SIDECAR_SANDBOX", "auto").lower(),
                        help="what confines tool processes: auto (bubblewrap, else Landlock), bubblewrap, landlock "
                             "or none, which runs tools unconfined (env SIDECAR_SANDBOX)")
    parser.add_argument("--embedding-model", default=env.get("SIDECAR_EMBEDDING_MODEL") or None,
                        help="the sentence-embedding model (ONNX) that ranks tools by meaning: a model.onnx path, "
                             "or none to rank by words only (default: the one the installed package ships; "
                             "env SIDECAR_EMBEDDING_MODEL)")
    parser.add_argument("--embedding-tokenizer", default=env.get("SIDECAR_EMBEDDING_TOKENIZER") or None,
                        help="the model's tokenizer.json (default: the packaged one; env SIDECAR_EMBEDDING_TOKENIZER)")
    args = parser.parse_args(argv)
    if args.sandbox not in SANDBOXES:
        parser.error(f"--sandbox must be one of {', '.join(SANDBOXES)}")
    cimd = args.oauth_client_metadata_url
    if cimd is not None and (not cimd.startswith("https://") or urlsplit(cimd).path in ("", "/")):
        parser.error("--oauth-client-metadata-url must be an https:// URL with a path")
    if args.secrets_backend not in SECRETS_BACKENDS:
        parser.error(f"--secrets-backend must be one of {', '.join(SECRETS_BACKENDS)}")
    if args.log_level not in LOG_LEVELS:
        parser.error(f"--log-level must be one of {', '.join(LOG_LEVELS)}")
    data_dir = Path(args.data_dir).expanduser() if args.data_dir else default_data_dir()
    return Settings(
        data_dir=data_dir.absolute(),
        log_level=args.log_level,
        parent_pid=int(args.parent_pid) if args.parent_pid else None,
        max_line_bytes=int(args.max_line_bytes),
        secrets_backend=args.secrets_backend,
        oauth_client_metadata_url=cimd,
        max_bundle_bytes=int(args.max_bundle_bytes),
        max_upload_bytes=int(args.max_upload_bytes),
        soft_delete_retention=float(args.soft_delete_retention),
        sandbox=args.sandbox,
        embedding_model=args.embedding_model,
        embedding_tokenizer=args.embedding_tokenizer,
    )
