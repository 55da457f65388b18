"""The zoo's models, each in two sizes, built from configs with random weights (nothing is
downloaded: the libraries' constructors only, HF_HUB_OFFLINE set).

`full` is what a user runs: the vision nets in their default configs at batch 32 and 224x224,
the text models at their real width with a few layers (Dynamo unrolls every layer, so depth
adds compile time and little else) at batch 4-8 and sequence 512. `small` keeps each
architecture's structure (depthwise convolutions, squeeze-excite, windows, GQA, RoPE,
relative position buckets) with few blocks, narrow where the constructors allow, on 32x32 images
and 16 tokens, for the CPU in CI.

Every model's forward returns a tensor or a tuple of tensors (the HF models are wrapped), so
that eager, Inductor and coil are compared on the same values.
"""
import os
from dataclasses import dataclass
from typing import Callable

import torch
import torch.nn as nn

os.environ.setdefault("HF_HUB_OFFLINE", "1")  # configs only: never reach for the hub


@dataclass(frozen=True)
class Model:
    name: str
    family: str  # cnn | vit | encoder | decoder | encoder-decoder | audio | attention
    build: Callable  # size -> (module, inputs), inputs: (device, dtype, generator) -> [tensors]


class Output(nn.Module):
    """An HF model called with its inputs by name (T5 takes decoder_input_ids third), returning
    one field of its output (logits, last_hidden_state)."""

    def __init__(self, model, field, names=("input_ids",)):
        super().__init__()
        self.model, self.field, self.names = model, field, names

    def forward(self, *args):
        return getattr(self.model(**dict(zip(self.names, args))), self.field)


class SelfAttention(nn.Module):
    """nn.MultiheadAttention called as most code calls it: self-attention, the averaged weights returned too."""

    def __init__(self):
        super().__init__()
        self.mha = nn.MultiheadAttention(64, 4, batch_first=True)

    def forward(self, x):
        return self.mha(x, x, x)


def _images(side, batch):
    def make(device, dtype, gen):
        return [torch.randn(batch, 3, side, side, device=device, generator=gen).to(dtype)]
    return make


def _tokens(vocab, batch, seq, decoder_seq=None):
    """Token ids (and decoder ids when `decoder_seq` is given)."""
    def make(device, dtype, gen):
        ids = [torch.randint(0, vocab, (batch, seq), device=device, generator=gen)]
        if decoder_seq:
            ids.append(torch.randint(0, vocab, (batch, decoder_seq), device=device, generator=gen))
        return ids
    return make


def _calibrate(module, images):
    """Gives random weights the activations of a trained net. With BatchNorm's initial statistics
    (mean 0, variance 1), activations shrink layer after layer (torchvision's MobileNetV3 and
    EfficientNet give outputs of 1e-10 and 1e-14), which leaves sigmoid, hardswish and
    squeeze-excite near 0 where they are linear, and a comparison there tests little: one forward
    in training mode on a batch of 32 random images sets each BatchNorm's statistics to that
    batch's, as training would. Zero-initialized weights (torchvision's ViT head) would give a zero
    output, and get small random values."""
    for p in module.parameters():
        if p.dim() >= 2 and not p.any():
            nn.init.normal_(p, std=0.02)
    norms = [m for m in module.modules() if isinstance(m, nn.modules.batchnorm._BatchNorm)]
    for m in norms:
        m.momentum = 1.0  # the statistics of this batch alone
    if norms:
        module.train()
        module(images)


def _vision(full, small):
    """A vision net: `full()` (its default config) at 224x224 and batch 32 (or
    $COIL_ZOO_VISION_BATCH: run.py's --batch); `small()` (a tiny config with 10 classes) at 32x32
    and batch 2."""
    def build(size):
        full_batch = int(os.environ.get("COIL_ZOO_VISION_BATCH", "32"))
        module, side, batch = (full(), 224, full_batch) if size == "full" else (small(), 32, 2)
        with torch.no_grad():
            _calibrate(module, torch.randn(32, 3, side, side))  # on the device of make()'s torch.device
        return module, _images(side, batch)
    return build


def _tv():
    import torchvision.models

    return torchvision.models


def _timm(name, **kwargs):
    import timm

    return timm.create_model(name, pretrained=False, **kwargs)


def _hf(config_class, model_class, field, full, small, inputs):
    """A transformers model from `config_class(**full or small)` with SDPA attention and no KV cache;
    `inputs[size]`: (batch, seq) or (batch, seq, decoder seq)."""
    def build(size):
        import transformers

        args = full if size == "full" else small
        config = getattr(transformers, config_class)(**args, use_cache=False, attn_implementation="sdpa")
        names = ("input_ids", "decoder_input_ids")[:len(inputs[size]) - 1]
        model = Output(getattr(transformers, model_class)(config), field, names)
        return model, _tokens(config.vocab_size, *inputs[size])
    return build


def _whisper(size):
    import transformers

    if size == "full":  # whisper-base's encoder: 30 s of 80 mel bins
        args, batch = dict(d_model=512, encoder_layers=6, encoder_attention_heads=8, encoder_ffn_dim=2048, decoder_layers=1,
                           decoder_attention_heads=8, decoder_ffn_dim=2048, num_mel_bins=80, max_source_positions=1500), 8
    else:
        args, batch = dict(d_model=64, encoder_layers=2, encoder_attention_heads=4, encoder_ffn_dim=128, decoder_layers=1,
                           decoder_attention_heads=4, decoder_ffn_dim=128, num_mel_bins=16, max_source_positions=32,
                           vocab_size=256, pad_token_id=0, bos_token_id=0, eos_token_id=0, decoder_start_token_id=0), 2
    config = transformers.WhisperConfig(**args, use_cache=False, attn_implementation="sdpa")
    encoder = Output(transformers.WhisperModel(config).encoder, "last_hidden_state", ("input_features",))
    frames = 2 * config.max_source_positions  # the encoder takes exactly this many (its conv stride is 2)

    def make(device, dtype, gen):
        return [torch.randn(batch, config.num_mel_bins, frames, device=device, generator=gen).to(dtype)]
    return encoder, make


def _mha(size):
    batch, seq = (32, 512) if size == "full" else (2, 16)

    def make(device, dtype, gen):
        return [torch.randn(batch, seq, 64, device=device, generator=gen).to(dtype)]
    return SelfAttention(), make


_SMALL_TEXT = dict(vocab_size=256, hidden_size=64, num_hidden_layers=2, num_attention_heads=4, intermediate_size=128)
_LAYERS = 4  # of the full text models: their real width, a few layers
_ENCODER_INPUTS = {"full": (8, 512), "small": (2, 16)}
_DECODER_INPUTS = {"full": (4, 512), "small": (2, 16)}

MODELS = [Model(*m) for m in [
    ("tv_resnet18", "cnn", _vision(lambda: _tv().resnet18(), lambda: _tv().ResNet(_tv().resnet.BasicBlock, [1] * 4, num_classes=10))),
    ("tv_resnet50", "cnn", _vision(lambda: _tv().resnet50(), lambda: _tv().ResNet(_tv().resnet.Bottleneck, [1] * 4, num_classes=10))),
    ("tv_mobilenet_v3_large", "cnn", _vision(lambda: _tv().mobilenet_v3_large(),
                                             lambda: _tv().mobilenet_v3_large(width_mult=0.5, num_classes=10))),
    ("tv_efficientnet_b0", "cnn", _vision(lambda: _tv().efficientnet_b0(), lambda: _tv().efficientnet_b0(num_classes=10))),
    ("tv_convnext_tiny", "cnn", _vision(lambda: _tv().convnext_tiny(), lambda: _tv().ConvNeXt(
        [_tv().convnext.CNBlockConfig(16, 32, 1), _tv().convnext.CNBlockConfig(32, 64, 1), _tv().convnext.CNBlockConfig(64, None, 1)],
        num_classes=10))),
    ("timm_resnet50", "cnn", _vision(lambda: _timm("resnet50"), lambda: _timm("resnet50", layers=(1,) * 4, num_classes=10))),
    ("timm_convnext_tiny", "cnn", _vision(lambda: _timm("convnext_tiny"), lambda: _timm(
        "convnext_tiny", depths=(1,) * 4, dims=(16, 32, 48, 64), num_classes=10))),
    ("timm_mobilenetv3_large_100", "cnn", _vision(lambda: _timm("mobilenetv3_large_100"),
                                                  lambda: _timm("mobilenetv3_large_100", num_classes=10))),
    ("tv_vit_b_16", "vit", _vision(lambda: _tv().vit_b_16(), lambda: _tv().VisionTransformer(
        image_size=32, patch_size=8, num_layers=2, num_heads=2, hidden_dim=64, mlp_dim=128, num_classes=10))),
    ("tv_swin_t", "vit", _vision(lambda: _tv().swin_t(), lambda: _tv().SwinTransformer(
        patch_size=[4, 4], embed_dim=32, depths=[2, 2], num_heads=[2, 4], window_size=[4, 4], num_classes=10))),
    ("timm_deit_small", "vit", _vision(lambda: _timm("deit_small_patch16_224"), lambda: _timm(
        "deit_small_patch16_224", img_size=32, patch_size=8, depth=2, embed_dim=64, num_heads=2, num_classes=10))),
    ("hf_bert", "encoder", _hf("BertConfig", "BertModel", "last_hidden_state", dict(num_hidden_layers=_LAYERS),
                               dict(_SMALL_TEXT, max_position_embeddings=64), _ENCODER_INPUTS)),
    ("hf_distilbert", "encoder", _hf("DistilBertConfig", "DistilBertModel", "last_hidden_state", dict(n_layers=_LAYERS),
                                     dict(vocab_size=256, dim=64, n_layers=2, n_heads=4, hidden_dim=128, max_position_embeddings=64),
                                     _ENCODER_INPUTS)),
    ("hf_roberta", "encoder", _hf("RobertaConfig", "RobertaModel", "last_hidden_state",
                                  dict(num_hidden_layers=_LAYERS, max_position_embeddings=514),
                                  dict(_SMALL_TEXT, max_position_embeddings=64), _ENCODER_INPUTS)),
    ("hf_albert", "encoder", _hf("AlbertConfig", "AlbertModel", "last_hidden_state",
                                 dict(hidden_size=768, num_attention_heads=12, intermediate_size=3072, num_hidden_layers=_LAYERS),
                                 dict(_SMALL_TEXT, embedding_size=32, max_position_embeddings=64), _ENCODER_INPUTS)),
    ("hf_gpt2", "decoder", _hf("GPT2Config", "GPT2LMHeadModel", "logits", dict(n_layer=_LAYERS),
                               dict(vocab_size=256, n_embd=64, n_layer=2, n_head=4, n_positions=64, bos_token_id=0,
                                    eos_token_id=0), _DECODER_INPUTS)),
    ("hf_llama", "decoder", _hf("LlamaConfig", "LlamaForCausalLM", "logits",  # Llama-3-8B's width: GQA 32/8, RoPE
                                dict(vocab_size=128256, hidden_size=4096, intermediate_size=14336, num_hidden_layers=_LAYERS,
                                     num_attention_heads=32, num_key_value_heads=8, rope_theta=500000.0),
                                dict(_SMALL_TEXT, num_key_value_heads=2), _DECODER_INPUTS)),
    ("hf_mistral", "decoder", _hf("MistralConfig", "MistralForCausalLM", "logits",  # Mistral-7B's width
                                  dict(num_hidden_layers=_LAYERS), dict(_SMALL_TEXT, num_key_value_heads=2, sliding_window=8),
                                  _DECODER_INPUTS)),
    ("hf_qwen2", "decoder", _hf("Qwen2Config", "Qwen2ForCausalLM", "logits",  # Qwen2-1.5B's width: GQA 12/2, q/k/v biases
                                dict(vocab_size=151936, hidden_size=1536, intermediate_size=8960, num_hidden_layers=_LAYERS,
                                     num_attention_heads=12, num_key_value_heads=2, tie_word_embeddings=True),
                                dict(_SMALL_TEXT, num_key_value_heads=2), _DECODER_INPUTS)),
    ("hf_t5", "encoder-decoder", _hf("T5Config", "T5ForConditionalGeneration", "logits",  # t5-base's width
                                     dict(d_model=768, d_kv=64, d_ff=3072, num_heads=12, num_layers=_LAYERS),
                                     dict(vocab_size=256, d_model=64, d_kv=16, d_ff=128, num_heads=4, num_layers=2),
                                     {"full": (8, 512, 128), "small": (2, 16, 8)})),
    ("hf_whisper_encoder", "audio", _whisper),
    ("nn_mha", "attention", _mha),
]]
BY_NAME = {m.name: m for m in MODELS}
NAMES = [m.name for m in MODELS]


def make(name, size, device, dtype):
    """(module in eval mode on `device` in `dtype`, its inputs), the same in every process (fixed seeds)."""
    torch.manual_seed(0)
    with torch.device(device):  # parameters made where they run: a 4-layer Llama's init on the CPU takes minutes
        module, inputs = BY_NAME[name].build(size)
    module = module.to(dtype).eval()
    return module, inputs(device, dtype, torch.Generator(device=device).manual_seed(1))
