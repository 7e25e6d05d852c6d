"""The broad public suite: architectures nobody here wrote, built in code.

torchvision classification models and Hugging Face `transformers` models initialised
from a config, with random weights and fixed seeds (nothing is downloaded).  Each name
takes an optional serving batch, ``resnet50@8``; without one the batch is 1.  Text models
read 128 token ids; the Whisper-style encoder reads 256 mel frames (128 positions after
its stride-2 convolution).

    torchvision    resnet18 resnet50 mobilenet_v2 mobilenet_v3_small efficientnet_b0
                   regnet (regnet_y_400mf) convnext_tiny vit (ViT-S/16 style, 4 layers)
    transformers   bert distilbert gpt2 t5 (encoder) whisper (encoder); 2 layers each

Random weights, honestly: BatchNorm running statistics are calibrated on random images
(two forward passes in training mode) so activations stay O(1) through deep CNNs, and
layers torchvision initialises to zero (a ViT's head) get small random weights; otherwise
the outputs of a random ResNet or ViT are zeros or 1e-15 and parity checks mean nothing.

torchvision is imported through `integrations.torchvision_compat` (the index's wheel is a
CUDA build that cannot load beside the CPU torch as it is); `transformers` imports
torchvision too, so text models need it as well.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch
from torch import nn

from benchmarks.models import SUITE_NAMES, SuiteModel
from luminal.integrations.torchvision_compat import torchvision as _torchvision

VISION = (
    "resnet18",
    "resnet50",
    "mobilenet_v2",
    "mobilenet_v3_small",
    "efficientnet_b0",
    "regnet",
    "convnext_tiny",
    "vit",
)
TEXT = ("bert", "distilbert", "gpt2", "t5", "whisper")
PUBLIC_NAMES: tuple[str, ...] = VISION + TEXT
#: The serving batch the suite times besides batch 1.
SERVING_BATCH = 8
SEQUENCE = 128
_SEED = 0


def split(name: str) -> tuple[str, int]:
    """``resnet50@8`` -> ("resnet50", 8); ``bert`` -> ("bert", 1)."""
    base, _, batch = name.partition("@")
    if base not in PUBLIC_NAMES:
        raise KeyError(
            f"unknown suite model {base!r}; expected one of: "
            f"{', '.join((*SUITE_NAMES, *PUBLIC_NAMES))} (a public name may end in @BATCH)"
        )
    try:
        return base, int(batch) if batch else 1
    except ValueError:
        raise KeyError(f"{name!r}: the batch after '@' must be an integer") from None


def build(name: str) -> SuiteModel:
    base, batch = split(name)
    torch.manual_seed(_SEED)
    _torchvision()  # transformers imports torchvision when it is installed
    if base in VISION:
        return _vision(name, base, batch)
    return _text(name, base, batch)


def _vision_module(base: str) -> nn.Module:
    models = _torchvision().models
    makers: dict[str, Callable[[], nn.Module]] = {
        "resnet18": lambda: models.resnet18(weights=None),
        "resnet50": lambda: models.resnet50(weights=None),
        "mobilenet_v2": lambda: models.mobilenet_v2(weights=None),
        "mobilenet_v3_small": lambda: models.mobilenet_v3_small(weights=None),
        "efficientnet_b0": lambda: models.efficientnet_b0(weights=None),
        "regnet": lambda: models.regnet_y_400mf(weights=None),
        "convnext_tiny": lambda: models.convnext_tiny(weights=None),
        "vit": lambda: models.VisionTransformer(
            image_size=224, patch_size=16, num_layers=4, num_heads=6, hidden_dim=384, mlp_dim=1536
        ),
    }
    return makers[base]()


def _vision(name: str, base: str, batch: int) -> SuiteModel:
    module = _vision_module(base)
    gen = torch.Generator().manual_seed(_SEED)
    with torch.no_grad():
        for p in module.parameters():
            if p.dim() >= 2 and not p.any():  # zero-initialised (a ViT's head)
                p.copy_(torch.randn(p.shape, generator=gen) * 0.02)
        if any(isinstance(m, nn.modules.batchnorm._BatchNorm) for m in module.modules()):
            for m in module.modules():
                if isinstance(m, nn.modules.batchnorm._BatchNorm):
                    m.reset_running_stats()
                    m.momentum = None  # a cumulative average over the calibration passes
            module.train()
            for _ in range(2):
                module(torch.randn(4, 3, 224, 224, generator=gen))
    x = torch.randn(batch, 3, 224, 224, generator=gen)
    return SuiteModel(name, module.eval(), (x,), ("x",), ("y",))


class _Hidden(nn.Module):
    """A `transformers` model called the way users export it: ids in, last hidden state
    out, no cache (the TorchScript exporter cannot pass keyword flags)."""

    def __init__(self, model: nn.Module, kwarg: str) -> None:
        super().__init__()
        self.model = model
        self.kwarg = kwarg

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        extra = (
            {"use_cache": False} if self.kwarg == "input_ids" and _takes_cache(self.model) else {}
        )
        return self.model(**{self.kwarg: x}, return_dict=True, **extra).last_hidden_state


def _takes_cache(model: nn.Module) -> bool:
    import inspect

    return "use_cache" in inspect.signature(model.forward).parameters


def _text(name: str, base: str, batch: int) -> SuiteModel:
    import transformers as tf

    gen = torch.Generator().manual_seed(_SEED)
    if base == "whisper":
        cfg = tf.WhisperConfig(
            encoder_layers=2,
            decoder_layers=2,
            d_model=384,
            encoder_attention_heads=6,
            decoder_attention_heads=6,
            encoder_ffn_dim=1536,
            decoder_ffn_dim=1536,
            num_mel_bins=80,
            max_source_positions=SEQUENCE,
        )
        model = tf.WhisperModel(cfg).get_encoder()
        x = torch.randn(batch, 80, 2 * SEQUENCE, generator=gen)
        wrapped = _Hidden(model.eval(), "input_features")
        return SuiteModel(name, wrapped.eval(), (x,), ("input_features",), ("hidden",))
    configs: dict[str, Callable[[], Any]] = {
        "bert": lambda: tf.BertModel(tf.BertConfig(num_hidden_layers=2)),
        "distilbert": lambda: tf.DistilBertModel(tf.DistilBertConfig(n_layers=2)),
        "gpt2": lambda: tf.GPT2Model(tf.GPT2Config(n_layer=2)),
        "t5": lambda: tf.T5EncoderModel(tf.T5Config(num_layers=2)),
    }
    model = configs[base]()
    ids = torch.randint(0, 1000, (batch, SEQUENCE), generator=gen)
    wrapped = _Hidden(model.eval(), "input_ids")
    return SuiteModel(name, wrapped.eval(), (ids,), ("input_ids",), ("hidden",))


def suite(batches: tuple[int, ...] = (1, SERVING_BATCH)) -> tuple[str, ...]:
    """Every public model at every batch, ``resnet18``, ``resnet18@8``, ..."""
    return tuple(n if b == 1 else f"{n}@{b}" for n in PUBLIC_NAMES for b in batches)
