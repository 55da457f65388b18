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
