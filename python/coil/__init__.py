"""coil: a tensor compiler for PyTorch programs, written in C++.

    torch.compile(model, backend="coil")     # registered through the torch_dynamo_backends entry point
    coil.compile(model, freeze=True)         # the same, with coil's options

Graphs come through AOTAutograd with the Core ATen decompositions; compiling happens in C++
(coil._coil). Nodes coil cannot compile run in PyTorch eager.
"""
from ._backend import CompileErrorWarning, FallbackWarning, backend, compile  # noqa: F401
from ._coil import CoilError, LimitError, __version__  # noqa: F401


def register():
    """Makes backend="coil" known to torch.compile where the package is not installed (a build
    tree on PYTHONPATH has no entry point). Installed packages need not call it."""
    import torch._dynamo

    if "coil" not in torch._dynamo.list_backends(exclude_tags=()):
        torch._dynamo.register_backend(backend, "coil")
