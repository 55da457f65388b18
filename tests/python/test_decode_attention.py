"""Grouped-query attention over a static KV cache, as LLM decoding writes it, through
torch.compile against eager: the cache written at each step's position by index_copy_, its heads
repeated for the query heads (gpt-fast's expand + reshape, Hugging Face's repeat_kv, or
enable_gqa), a mask over the cache positions (bool, or added), a prefill of several rows then
single-row steps. On CUDA the fused attention takes these (the repeat read in place, the mask
applied inside the kernel), with and without CUDA graphs; the cache must follow eager's."""
import copy
import warnings

import pytest
import torch
import torch.nn.functional as F
from torch import nn

import coil
from conftest import CUDA, coil_fallbacks

pytestmark = pytest.mark.usefixtures("fresh_dynamo")
DEVICES = ["cpu"] + (["cuda"] if CUDA and torch.cuda.is_available() else [])


class CachedAttention(nn.Module):
    def __init__(self, repeat, mask_kind, heads=8, kv_heads=2, head=64, max_len=48, batch=2):
        super().__init__()
        self.repeat, self.mask_kind, self.heads, self.kv_heads, self.head = repeat, mask_kind, heads, kv_heads, head
        self.wq = nn.Linear(heads * head, heads * head, bias=False)
        self.wkv = nn.Linear(heads * head, 2 * kv_heads * head, bias=False)
        self.register_buffer("k_cache", torch.zeros(batch, kv_heads, max_len, head))
        self.register_buffer("v_cache", torch.zeros(batch, kv_heads, max_len, head))
        self.register_buffer("causal", torch.tril(torch.ones(max_len, max_len, dtype=torch.bool)))

    def expand_heads(self, x):
        b, kv, s, d = x.shape
        rep = self.heads // kv
        if self.repeat == "gpt-fast":
            return x.unsqueeze(2).expand(b, kv, rep, s, d).reshape(b, kv * rep, s, d)
        return x[:, :, None, :, :].expand(b, kv, rep, s, d).reshape(b, kv * rep, s, d)  # repeat_kv

    def forward(self, x, pos):
        b, t, _ = x.shape
        q = self.wq(x).view(b, t, self.heads, self.head).transpose(1, 2)
        k, v = self.wkv(x).view(b, t, 2, self.kv_heads, self.head).unbind(2)
        self.k_cache.index_copy_(2, pos, k.transpose(1, 2))
        self.v_cache.index_copy_(2, pos, v.transpose(1, 2))
        mask = self.causal[None, None, pos]
        if self.mask_kind == "added":
            mask = torch.zeros(mask.shape, dtype=x.dtype, device=x.device).masked_fill(~mask, float("-inf"))
        if self.repeat == "enable_gqa":
            y = F.scaled_dot_product_attention(q, self.k_cache, self.v_cache, attn_mask=mask, enable_gqa=True)
        else:
            y = F.scaled_dot_product_attention(q, self.expand_heads(self.k_cache), self.expand_heads(self.v_cache), attn_mask=mask)
        return y.transpose(1, 2).reshape(b, t, -1)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("repeat,mask_kind", [("gpt-fast", "bool"), ("repeat_kv", "added"), ("enable_gqa", "bool")])
@pytest.mark.parametrize("mode", [None, "reduce-overhead"])
def test_decoding_over_a_static_cache_follows_eager(device, repeat, mask_kind, mode):
    if mode and device == "cpu":
        pytest.skip("CUDA graphs are a CUDA mode (on the CPU it changes nothing, test_cuda_graphs checks)")
    torch.manual_seed(0)
    dtype = torch.bfloat16 if device == "cuda" else torch.float32
    model = CachedAttention(repeat, mask_kind).to(device, dtype)
    eager = copy.deepcopy(model)
    compiled = coil.compile(model, mode=mode)
    tol = dict(rtol=2e-2, atol=2e-2) if dtype == torch.bfloat16 else dict(rtol=1e-4, atol=1e-4)
    with warnings.catch_warnings(record=True) as caught, torch.no_grad():
        warnings.simplefilter("always")
        x = torch.randn(2, 5, 512, device=device, dtype=dtype)
        pos = torch.arange(5, device=device)
        torch.testing.assert_close(compiled(x, pos), eager(x, pos), **tol, msg="prefill")
        for step in range(5, 12):
            x = torch.randn(2, 1, 512, device=device, dtype=dtype)
            pos = torch.tensor([step], device=device)
            torch.testing.assert_close(compiled(x, pos), eager(x, pos), **tol, msg=f"step {step}")
            torch.testing.assert_close(model.k_cache, eager.k_cache, **tol, msg=f"k cache at step {step}")
            torch.testing.assert_close(model.v_cache, eager.v_cache, **tol, msg=f"v cache at step {step}")
    assert not coil_fallbacks(caught), [str(w.message) for w in caught]
