"""Symbolic sizes in coil's program: a graph Dynamo traced with dynamic sizes (dynamic=True,
mark_dynamic, or the second size it met) is compiled once, its sizes kept as expressions of
Dynamo's size symbols (s0, s1, ...), which coil binds from its inputs' shapes at each call.

An expression is written as a tree (src/frontend/export_nodes.h): an int, {"sym": name},
{"add": [...]}, {"mul": [...]}, {"floordiv": [a, b]}, {"mod": [a, b]}, {"min": [...]} or
{"max": [...]}; a size or an argument that holds one is {"as_sym": tree}.
"""
import operator

import sympy
import torch
from torch.utils._sympy import functions as F


class NotExpressible(Exception):
    """A symbolic value coil's expressions do not take (a float, a size from a tensor's values)."""


def is_symbolic(value):
    """Whether a traced value has a symbolic size: a SymInt, or a tensor with symbolic sizes,
    strides or offset."""
    if isinstance(value, torch.SymInt):
        return value.node.maybe_as_int() is None
    if isinstance(value, torch.Tensor):
        return any(isinstance(s, torch.SymInt) for s in (*value.shape, *value.stride(), value.storage_offset()))
    return False


def _tree(expr):
    """A sympy integer expression as coil's expression tree."""
    if isinstance(expr, (int, sympy.Integer)):
        return int(expr)
    if isinstance(expr, sympy.Symbol):
        return {"sym": expr.name}
    if isinstance(expr, sympy.Add):
        return {"add": [_tree(a) for a in expr.args]}
    if isinstance(expr, sympy.Mul):
        return {"mul": [_tree(a) for a in expr.args]}
    if isinstance(expr, (sympy.Pow, F.PowByNatural)) and isinstance(expr.args[1], sympy.Integer) and 1 <= int(expr.args[1]) <= 8:
        return {"mul": [_tree(expr.args[0])] * int(expr.args[1])}
    if isinstance(expr, F.FloorDiv):
        return {"floordiv": [_tree(expr.args[0]), _tree(expr.args[1])]}
    if isinstance(expr, F.CeilDiv):  # ceil(a / b) = (a + b - 1) // b, for the positive b of sizes
        a, b = expr.args
        return {"floordiv": [{"add": [_tree(a), _tree(b), -1]}, _tree(b)]}
    if isinstance(expr, (F.Mod, F.PythonMod, sympy.Mod)):
        return {"mod": [_tree(expr.args[0]), _tree(expr.args[1])]}
    if isinstance(expr, F.ModularIndexing):  # (a // b) % c
        a, b, c = expr.args
        return {"mod": [{"floordiv": [_tree(a), _tree(b)]}, _tree(c)]}
    if isinstance(expr, (F.Max, sympy.Max)):
        return {"max": [_tree(a) for a in expr.args]}
    if isinstance(expr, (F.Min, sympy.Min)):
        return {"min": [_tree(a) for a in expr.args]}
    raise NotExpressible(f"the size expression {expr}")


def size_json(s):
    """A size, stride or integer argument: an int, or {"as_sym": tree}."""
    if isinstance(s, torch.SymInt):
        value = s.node.maybe_as_int()
        if value is not None:
            return value
        if not s.node.expr.is_integer:
            raise NotExpressible(f"the symbolic value {s.node.expr}")
        return {"as_sym": _tree(s.node.expr)}
    if isinstance(s, bool) or not isinstance(s, int):
        raise NotExpressible(f"a {type(s).__name__} size")
    return s


def is_size_node(node):
    """Whether an FX node computes a size (a SymInt: Dynamo's sym_size, arithmetic on sizes),
    which the program writes as an expression wherever it is read instead of as a node."""
    return isinstance(node, torch.fx.Node) and isinstance(node.meta.get("val"), torch.SymInt)


def size_of(node):
    """The size an FX node computes (is_size_node), for an argument."""
    return size_json(node.meta["val"])


# Nodes of a symbolic graph that compute nothing the program needs: checks of sizes that
# Dynamo's guards already made before the graph is called.
ASSERTIONS = {"aten::_assert_scalar", "aten::sym_constrain_range_for_size", "aten::sym_constrain_range"}


def is_assertion(node):
    target = node.target
    if target in (torch._check, torch._check_is_size) or target is operator.truth:
        return True
    return isinstance(target, torch._ops.OpOverload) and target.name() in ASSERTIONS


def declarations(values):
    """The size symbols that the traced values' sizes and strides hold, each with its
    hint (the size Dynamo traced with) and the range Dynamo's guards keep it in (sizes of 0 and
    1 are specialized: at least 2): [{"name", "hint", "min", "max"}], by name."""
    found = {}

    def visit(s):
        if not isinstance(s, torch.SymInt) or s.node.maybe_as_int() is not None:
            return
        env = s.node.shape_env
        hints = getattr(env, "backed_var_to_val", None)  # (torch 2.11's name of var_to_val)
        if hints is None:
            hints = getattr(env, "var_to_val", {})
        ranges = getattr(env, "var_to_range", {})
        for sym in s.node.expr.free_symbols:
            if sym.name in found:
                continue
            hint, bounds = hints.get(sym), ranges.get(sym)
            low = int(bounds.lower) if bounds is not None and isinstance(bounds.lower, sympy.Integer) else 0
            high = int(bounds.upper) if bounds is not None and isinstance(bounds.upper, sympy.Integer) else None
            found[sym.name] = {"name": sym.name, "hint": int(hint) if hint is not None else None, "min": low, "max": high}

    for v in values:
        if isinstance(v, torch.SymInt):
            visit(v)
        elif isinstance(v, torch.Tensor):  # (not its storage offset: the adapter passes data pointers)
            for s in (*v.shape, *v.stride()):
                visit(s)
    return [found[name] for name in sorted(found)]


def bare_symbols(values):
    """Per symbol that is a whole size, or a whole stride of a dim longer than 1, of one of these
    tensors, where the first such is: {name: (index among `values`, dim, 0 for its size or 1 for
    its stride)} (what a call reads the symbol's value from; Dynamo makes an input's strides
    symbols of their own when it has seen them change, or a strided input's size change)."""
    out = {}
    for k, v in enumerate(values):
        if isinstance(v, torch.Tensor):
            for d, s in enumerate(v.shape):
                if isinstance(s, torch.SymInt) and isinstance(s.node.expr, sympy.Symbol):
                    out.setdefault(s.node.expr.name, (k, d, 0))
            for d, (n, s) in enumerate(zip(v.shape, v.stride())):
                if isinstance(s, torch.SymInt) and isinstance(s.node.expr, sympy.Symbol) and n != 1:
                    out.setdefault(s.node.expr.name, (k, d, 1))
    return out


def evaluate(size, values):
    """A size of size_json's form (an int or {"as_sym": tree}) at these symbol values ({name: int})."""
    return _value(size["as_sym"], values) if isinstance(size, dict) else size


def _value(tree, values):
    if isinstance(tree, int):
        return tree
    (op, args), = tree.items()
    if op == "sym":
        return values[args]
    args = [_value(a, values) for a in args]
    if op == "add":
        return sum(args)
    if op == "mul":
        out = 1
        for a in args:
            out *= a
        return out
    if op == "floordiv":
        return args[0] // args[1]
    if op == "mod":
        return args[0] % args[1]
    return min(args) if op == "min" else max(args)


def is_symbolic_layout(layout):
    """Whether a layout ({"sizes", "strides", ...} of size_json's entries) holds an expression."""
    return layout is not None and any(isinstance(s, dict) for s in (*layout["sizes"], *layout["strides"]))


def layout_at(layout, values):
    """A layout with its expressions evaluated at these symbol values."""
    return dict(layout, sizes=[evaluate(s, values) for s in layout["sizes"]], strides=[evaluate(s, values) for s in layout["strides"]])
