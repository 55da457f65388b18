"""How the zoo judges a compiled model against eager, and reads what coil said while compiling;
shared by the zoo's runs (bench/zoo/child.py) and the CPU slice in CI (tests/python/test_zoo.py).
"""
import re

import torch

from bench.measure import outputs

# f32: the compiled model may sum in another order (blocked GEMMs, fused reductions, Winograd-free
# convolutions); over a few layers that moves results by ~1e-5 of their scale, while a wrong axis,
# weight or mask moves them by 1e-1 or more. Tolerances relative to the output's largest value keep
# one rule for logits of size ~1 and for activations of size ~100.
F32_RTOL, F32_ATOL = 1e-3, 1e-3
# bf16 rounds each op's result to 8 bits of mantissa, and the compiled model rounds in other
# places than eager: elementwise closeness would judge rounding, the direction of the whole output
# judges the computation.
MIN_COSINE = 0.99

_NODES = re.compile(r"coil: (\d+) node\(s\) of this graph run in PyTorch eager \(ops coil does not compile: ([^)]*)\)")


def compare(got, want, dtype):
    """{"ok", "why", "cosine", "max_abs", "rel"} of the compiled outputs `got` against eager's `want`:
    f32 (and f64): allclose with rtol F32_RTOL and atol F32_ATOL times the largest |eager|; bf16 and
    f16: cosine similarity of the flattened outputs at least MIN_COSINE and no NaN where eager has
    none; integers exactly. max_abs: the largest |got - want|; rel: that over the largest |want|."""
    got, want = outputs(got), outputs(want)
    result = {"ok": True, "why": "", "cosine": 1.0, "max_abs": 0.0, "rel": 0.0}
    if len(got) != len(want):
        return dict(result, ok=False, why=f"{len(got)} outputs, eager gives {len(want)}")
    for i, (g, w) in enumerate(zip(got, want)):
        if g.shape != w.shape or g.dtype != w.dtype:
            return dict(result, ok=False, why=f"output {i}: {g.dtype}{list(g.shape)}, eager gives {w.dtype}{list(w.shape)}")
        if not w.is_floating_point():
            if not torch.equal(g, w):
                result.update(ok=False, why=f"output {i}: integers differ")
            continue
        g64, w64 = g.double(), w.double()
        if (g64.isnan() & ~w64.isnan()).any():
            result.update(ok=False, why=f"output {i}: NaN where eager has none")
        compared = ~(g64.isnan() | w64.isnan())
        if not compared.all():  # where eager has NaN (or coil has new ones, judged above): the rest compared
            g64, w64 = g64[compared], w64[compared]
        if not w64.numel():
            continue
        max_abs, scale = (g64 - w64).abs().max().item(), w64.abs().max().item()
        # scaled to 1 first: cosine_similarity's floor on the norms (1e-8) would judge outputs of 1e-10
        cosine = torch.nn.functional.cosine_similarity(g64.flatten() / scale, w64.flatten() / scale, dim=0).item() \
            if scale else 1.0
        result.update(cosine=min(result["cosine"], cosine), max_abs=max(result["max_abs"], max_abs),
                      rel=max(result["rel"], max_abs / scale if scale else max_abs))
        if dtype in (torch.float32, torch.float64):
            if not torch.allclose(g64, w64, rtol=F32_RTOL, atol=F32_ATOL * scale):
                result.update(ok=False, why=f"output {i}: max |diff| {max_abs:.3g} over max |eager| {scale:.3g}")
        elif cosine < MIN_COSINE:
            result.update(ok=False, why=f"output {i}: cosine similarity {cosine:.4f} < {MIN_COSINE}")
    return result


def coil_messages(caught):
    """What coil said in the warnings `caught` (warnings.catch_warnings(record=True)): {"fallback_nodes":
    the nodes sent to PyTorch eager, "fallback_ops": their ops, "compile_errors": coil's own failures
    (CompileErrorWarning: the graph ran in eager instead), "other": the rest of its FallbackWarnings}."""
    import coil

    said = {"fallback_nodes": 0, "fallback_ops": [], "compile_errors": [], "other": []}
    for w in caught:
        if not issubclass(w.category, coil.FallbackWarning):
            continue
        text = str(w.message)
        nodes = _NODES.search(text)
        if issubclass(w.category, coil.CompileErrorWarning):
            said["compile_errors"].append(text)
        elif nodes:
            said["fallback_nodes"] += int(nodes.group(1))
            said["fallback_ops"] = sorted(set(said["fallback_ops"]) | set(nodes.group(2).split(", ")))
        else:
            said["other"].append(text)
    return said
