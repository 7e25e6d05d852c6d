"""A Hugging Face decoder from a local directory (config.json and its weights), never
from the network: what `luminal compile DIR` reads."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from luminal.errors import UsageError, one_line

__all__ = ["is_model_dir", "load_pretrained"]


def is_model_dir(path: Path) -> bool:
    return path.is_dir() and (path / "config.json").is_file()


def load_pretrained(path: Path) -> Any:
    """The causal LM saved in `path` (f32, eval mode); a UsageError naming the file or
    the architecture otherwise."""
    if not path.is_dir():
        raise UsageError(f"{path}: not a directory")
    if not (path / "config.json").is_file():
        raise UsageError(f"{path}: no config.json (a Hugging Face model directory is expected)")
    from luminal.integrations.torchvision_compat import torchvision

    torchvision()  # transformers imports it when installed
    import torch
    import transformers

    try:
        model = transformers.AutoModelForCausalLM.from_pretrained(
            path, local_files_only=True, dtype=torch.float32
        )
    except Exception as err:  # transformers raises many kinds; the first line says which
        raise UsageError(f"{path}: cannot load the model: {one_line(err)}") from None
    from luminal.compiler.llm.config import config_of

    config_of(model)  # a UsageError unless it is a supported decoder
    return model.eval()
