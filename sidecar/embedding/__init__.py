"""A local sentence-embedding model: texts in, unit vectors out. Knows no tool, chat or table.

The model (all-MiniLM-L6-v2, int8 ONNX) and its tokenizer come from installed packages, or from
paths the user sets; numpy, onnxruntime and tokenizers are imported on the first load, which runs
on a worker thread, never on the event loop.
"""

from .model import EmbeddingModel, ModelFiles, ModelStatus, ModelUnavailable, find_files

__all__ = ["EmbeddingModel", "ModelFiles", "ModelStatus", "ModelUnavailable", "find_files"]
