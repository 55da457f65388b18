"""The CUDA backend without a GPU: the CUDA C++ generated for every op case that coil accepts,
and for the bundled models, must compile with NVRTC for sm_80 and sm_90a (Hopper's exact
target). Graphs are built together, a few dozen to a translation unit, by one `coil compile
--emit cubin` call per architecture."""
import subprocess
import tempfile
import warnings
from pathlib import Path

import pytest

from conftest import COIL, ROOT
from op_cases import CASES
from test_ops import torch_expected

NVRTC = Path("/usr/local/cuda/lib64/libnvrtc.so")


def accepted_cases():
    out = []
    for case in CASES:
        if case.coil_rejects:
            continue
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            _, error = torch_expected(case)
        if error is None:
            out.append(case)
    return out


@pytest.mark.skipif(not NVRTC.exists(), reason="no CUDA toolkit (NVRTC) on this machine")
@pytest.mark.parametrize("arch", ["sm_80", "sm_90a"])
def test_every_op_builds_for_cuda(arch):
    cases = accepted_cases()
    assert len(cases) > 3000
    with tempfile.TemporaryDirectory() as d:
        files = []
        for i, case in enumerate(cases):
            path = Path(d) / f"c{i}.coil"
            path.write_text(case.graph.text(case.outputs))
            files.append(str(path))
        files += [str(p) for p in sorted((ROOT / "models").glob("*.coil"))]
        proc = subprocess.run([COIL, "compile", "--device", "cuda", "--arch", arch, "--emit", "cubin", *files],
                              capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr[-4000:]
    assert f"{len(files)} graphs" in proc.stdout and f"for {arch}" in proc.stdout, proc.stdout


# Every special function (and the ops around them) in one graph per float dtype: their helpers
# join the prelude only when a kernel calls one (cuda/special.h, special_prelude.h), so they are
# checked apart from the sweep above, with NVRTC, and absent from a graph that calls none.
SPECIAL_UNARY = ["exp2", "erfc", "erfinv", "special_erfcx", "lgamma", "digamma", "i0", "special_i0e", "special_i1",
                 "special_i1e", "special_bessel_j0", "special_bessel_j1", "special_bessel_y0", "special_bessel_y1",
                 "special_modified_bessel_k0", "special_modified_bessel_k1", "special_scaled_modified_bessel_k0",
                 "special_scaled_modified_bessel_k1", "special_spherical_bessel_j0", "special_airy_ai", "special_ndtri"]
POLYNOMIALS = ["chebyshev_polynomial_t", "chebyshev_polynomial_u", "chebyshev_polynomial_v", "chebyshev_polynomial_w",
               "shifted_chebyshev_polynomial_t", "shifted_chebyshev_polynomial_u", "shifted_chebyshev_polynomial_v",
               "shifted_chebyshev_polynomial_w", "hermite_polynomial_h", "hermite_polynomial_he", "laguerre_polynomial_l",
               "legendre_polynomial_p"]


def special_graph(dt):
    lines = [f"graph special_{dt} {{", f"  %x = input() : {dt}[4, 8]", f"  %y = input() : {dt}[4, 8]",
             "  %n = input() : i32[4, 8]", "  %k = input() : i8[4, 8]"]
    outs = []
    halves = ["exp2", "erfc", "erfinv", "lgamma", "digamma", "i0", "special_i0e", "special_i1", "special_i1e"]
    for i, op in enumerate(SPECIAL_UNARY if dt in ("f32", "f64") else halves):
        lines.append(f"  %u{i} = {op}(%x)")
        outs.append(f"%u{i}")
    lines += ["  %s = signbit(%x)", "  %r = round.decimals(%x, decimals=2)", "  %m, %e = frexp.Tensor(%x)",
              "  %c = copysign.Tensor(%x, %y)", "  %h = hypot(%x, %y)", "  %a = nextafter(%x, %y)", "  %l = ldexp.Tensor(%x, %n)",
              "  %l2 = ldexp.Tensor(%x, %y)", "  %sl = bitwise_left_shift.Tensor(%k, %k)", "  %sr = bitwise_right_shift.Scalar_Tensor(-5, %k)",
              "  %g = gcd(%k, %k)", "  %lc = lcm(%n, %n)"]
    outs += ["%s", "%r", "%m", "%e", "%c", "%h", "%a", "%l", "%l2", "%sl", "%sr", "%g", "%lc"]
    for order in range(4):  # digamma, trigamma, the zeta form (16-bit: zeta rounded apart)
        lines.append(f"  %pg{order} = polygamma({order}, %x)")
        outs.append(f"%pg{order}")
    if dt in ("f32", "f64"):
        lines += ["  %z = special_zeta(%x, %y)", "  %zs = special_zeta.self_scalar(2.5, %y)", "  %zo = special_zeta.other_scalar(%x, 3)"]
        outs += ["%z", "%zs", "%zo"]
        for i, name in enumerate(POLYNOMIALS):
            lines += [f"  %p{i} = special_{name}(%x, %y)", f"  %px{i} = special_{name}.x_scalar(0.5, %y)",
                      f"  %pn{i} = special_{name}.n_scalar(%x, 7)"]
            outs += [f"%p{i}", f"%px{i}", f"%pn{i}"]
    return "\n".join(lines + [f"  return {', '.join(outs)}", "}"]) + "\n"


@pytest.mark.skipif(not NVRTC.exists(), reason="no CUDA toolkit (NVRTC) on this machine")
@pytest.mark.parametrize("arch", ["sm_80", "sm_90a"])
def test_special_functions_build_for_cuda(arch):
    with tempfile.TemporaryDirectory() as d:
        files = []
        for dt in ["f32", "f64", "f16", "bf16"]:
            files.append(str(Path(d) / f"{dt}.coil"))
            Path(files[-1]).write_text(special_graph(dt))
        plain = Path(d) / "plain.coil"
        plain.write_text("graph plain {\n  %x = input() : f32[4]\n  %y = exp(%x)\n  return %y\n}\n")
        proc = subprocess.run([COIL, "compile", "--device", "cuda", "--arch", arch, "--emit", "cubin", str(plain), *files],
                              capture_output=True, text=True)
        assert proc.returncode == 0, proc.stderr[-4000:]
        code = subprocess.run([COIL, "compile", "--device", "cuda", "--arch", arch, "--emit", "code", files[0]],
                              capture_output=True, text=True)
        bare = subprocess.run([COIL, "compile", "--device", "cuda", "--arch", arch, "--emit", "code", str(plain)],
                              capture_output=True, text=True)
    assert code.returncode == 0 and bare.returncode == 0, code.stderr + bare.stderr
    assert "bessel_k0_impl" in code.stdout and "coil_rt::erfinv(" in code.stdout
    assert "chebyshev_t_impl" in code.stdout and "coil_rt::zeta(" in code.stdout and "coil_rt::polygamma(" in code.stdout
    assert "bessel_k0_impl" not in bare.stdout and "chebyshev_t_impl" not in bare.stdout
