"""Rewrites an ONNX graph's SAME-L attention blocks to the fused node samel::samel_attention.

    python -m dswa.onnx_samel in.onnx out.onnx [--no-verify]
    model, n = dswa.onnx_samel.rewrite(onnx.load("in.onnx"))

For every `samel::diff_attn_swa` node (the op's TensorRT plugin, dswa.trt), the subgraph from
the packed projection X = to_qkv(x) (B, N, 5*H*D) to that node's output - the split into q, k,
v, q_diff, k_diff, the DyT norms (Tanh), RoPE (Cos, Sin, rotate_half) and the concatenations
that build the node's (B, N, 2H, D) q and k - is replaced by one node

    samel::samel_attention(x, q_gamma, q_beta, k_gamma, k_beta) -> (B, N, H*D)

with the `config` attribute of dswa.trt.samel_config (windows, scale, lambda and math from the
old node's config, or SAME-L's where it has none, as the published graphs' nodes, which carry
only num_heads, checked against the projection's heads; rot_dims, pos_offset and RoPE's
frequencies from the RoPE angles (the model's own: a model cast whole to float16 or bfloat16
has them rounded to 16 bits; `base` is the best fit, and `freq` is written where they are not
its float32 ones); q_alpha and k_alpha
from the norms' initializers), followed by a Reshape to the old node's (B, N, H, D) output
(TensorRT folds it). The weights are fp32 (D,) initializers (the norms' own when they are
that already). Nodes left without a consumer by the rewrite are removed.

How the block was exported does not matter (Split or Slice, Reshape and Transpose in any
order, the norms applied per chunk or to the concatenation, the angles computed or folded to
a table) within these limits, each refused with a message naming what did not match: v must
come from a Split/Slice/Gather of one tensor (the packed X); q and k must each pass through
DyT norms of one (alpha, gamma, beta), Tanh(Mul(alpha, .)) then Mul by gamma and Add of
beta, all constant; the RoPE angles (the input of every Cos and Sin) must be one table,
float32 positions pos_offset + i times fixed frequencies, repeated twice (non-interleaved),
and depend on nothing but constants and shapes.

Verification (on by default): the matched subgraph, cut out as it stands (the old node run on
the library's CPU backend), and the fused node (dswa_samel_forward_cpu) run on the same random
X (B and N from the graph's fixed dims, else B = 2, N = 50); the rewrite is refused when they
differ beyond rounding. So a block that computes something else (another chunk order,
interleaved RoPE, another norm) is refused, not rewritten. float32, float16 and bfloat16
graphs (bfloat16 is checked widened to float32: numpy does not compute in it).

`reference_ops()` gives onnx.reference implementations of both custom nodes (over the
library's CPU backend), for running either graph with onnx.reference.ReferenceEvaluator.
"""
import os
import sys

import numpy as np

from . import _lib, trt

DOMAIN, OP = trt.PLUGIN_ID.split("::")                # the op's node: samel::diff_attn_swa
FUSED_DOMAIN, FUSED = trt.SAMEL_PLUGIN_ID.split("::")  # the fused node: samel::samel_attention
_PASS = ("Reshape", "Transpose", "Identity", "Cast", "Squeeze", "Unsqueeze", "Flatten",
         "Expand", "Concat")
_MAX_NODES = 5000


class RewriteError(ValueError):
    """A block that cannot be rewritten; the message names the node and what did not match."""


def _onnx():
    try:
        import onnx
        import onnx.reference  # noqa: F401
    except ImportError as e:
        raise RuntimeError(f"dswa.onnx_samel: the onnx package is needed ({e}); "
                           "pip install onnx") from None
    return onnx


# ---- the custom nodes for onnx.reference -----------------------------------------------------
def reference_ops():
    """[DiffAttnSwa, SamelAttention]: onnx.reference OpRun classes for the nodes
    samel::diff_attn_swa (dswa.diff_swa) and samel::samel_attention (dswa.samel_attention),
    on the library's CPU backend: ReferenceEvaluator(model, new_ops=reference_ops())."""
    _onnx()
    from onnx.reference.op_run import OpRun

    import dswa

    class DiffAttnSwa(OpRun):
        op_domain = DOMAIN

        def _run(self, q, k, v, config=None, num_heads=None):
            c = trt.node_config(None if config is None else _text(config))
            if num_heads is not None:
                trt.check_num_heads(num_heads, q.shape[2], OP)
            return (dswa.diff_swa(q, k, v, window_left=c.window_left,
                                  window_right=c.window_right, scale=c.scale, lam=c.lam,
                                  math=c.math),)

    class SamelAttention(OpRun):
        op_domain = FUSED_DOMAIN

        def _run(self, x, q_gamma, q_beta, k_gamma, k_beta, config=None):
            c = trt.samel_parse(_text(config))
            return (dswa.samel_attention(
                x, *(np.ascontiguousarray(w, np.float32) for w in (q_gamma, q_beta, k_gamma,
                                                                   k_beta)),
                q_alpha=c.q_alpha, k_alpha=c.k_alpha, window_left=c.window_left,
                window_right=c.window_right, scale=c.scale, lam=c.lam, rot_dims=c.rot_dims,
                freq=c.frequencies(), pos_offset=c.pos_offset, math=c.math),)

    DiffAttnSwa.__name__, SamelAttention.__name__ = OP, FUSED   # the op_type they implement
    return [DiffAttnSwa, SamelAttention]


def _text(s):
    return s.decode() if isinstance(s, bytes) else s


# ---- the graph ---------------------------------------------------------------------------------
class _Graph:
    def __init__(self, model):
        onnx = _onnx()
        self.onnx, self.model, self.g = onnx, model, model.graph
        self.refresh()
        self.shapes = _infer_shapes(model)

    def refresh(self):
        g = self.g
        self.producer = {o: n for n in g.node for o in n.output if o}
        self.consumers = {}
        for n in g.node:
            for i in n.input:
                self.consumers.setdefault(i, []).append(n)
        self.inits = {t.name: t for t in g.initializer}
        self.inputs = {i.name for i in g.input} - set(self.inits)
        self.outputs = {o.name for o in g.output}
        self._const = {}

    def const(self, name, depth=0):
        """The value of a tensor computed from initializers and Constant nodes only, else
        None."""
        if name in self._const:
            return self._const[name]
        val = None
        if name in self.inits:
            val = self.onnx.numpy_helper.to_array(self.inits[name])
        elif name in self.producer and depth < 32:
            n = self.producer[name]
            if n.domain in ("", "ai.onnx") and n.op_type not in (
                    "Shape", "Size", "RandomNormal", "RandomUniform", "RandomNormalLike",
                    "RandomUniformLike"):
                ins = [self.const(i, depth + 1) if i else None for i in n.input]
                if all(v is not None for i, v in zip(n.input, ins) if i):
                    from onnx.reference import ReferenceEvaluator
                    feeds = {i: v for i, v in zip(n.input, ins) if i}
                    outs = ReferenceEvaluator(n).run(None, feeds)
                    val = dict(zip(n.output, outs)).get(name)
        self._const[name] = val
        return val

    def describe(self, name):
        n = self.producer.get(name)
        if n is None:
            return f"'{name}' ({'an initializer' if name in self.inits else 'a graph input'})"
        return f"'{name}' (output of {n.op_type} node '{n.name}')"


def _infer_shapes(model):
    """{tensor: [dim value or symbol or None]} from onnx shape inference, with the custom
    nodes' outputs filled in ((B, N, H, D) for the op, (B, N, H*D) for the fused node) so that
    inference goes on past them (a model with several blocks)."""
    import onnx
    m = onnx.ModelProto()
    m.CopyFrom(model)
    known = {}
    for _ in range(1 + sum(n.domain in (DOMAIN, FUSED_DOMAIN) for n in m.graph.node)):
        try:
            inf = onnx.shape_inference.infer_shapes(m)
        except Exception:          # a model shape inference cannot handle: only what is declared
            inf = m
        known = {}
        for vi in list(inf.graph.value_info) + list(inf.graph.input) + list(inf.graph.output):
            t = vi.type.tensor_type
            if t.HasField("shape"):
                known[vi.name] = ([d.dim_value if d.HasField("dim_value") else
                                   (d.dim_param or None) for d in t.shape.dim], t.elem_type)
        for t in inf.graph.initializer:
            known[t.name] = (list(t.dims), t.data_type)
        added = False
        have = {vi.name for vi in m.graph.value_info}
        for n in m.graph.node:
            if n.domain not in (DOMAIN, FUSED_DOMAIN) or n.output[0] in known or not n.input \
                    or n.input[0] not in known:
                continue
            s, et = known[n.input[0]]
            if n.op_type == OP and len(s) == 4:
                h2 = s[2] if isinstance(s[2], int) and s[2] else None
                out = [s[0], s[1], h2 // 2 if h2 else None, s[3]]
            elif n.op_type == FUSED and len(s) == 3:
                out = [s[0], s[1], s[2] // 5 if isinstance(s[2], int) and s[2] else None]
            else:
                continue
            if n.output[0] not in have:
                m.graph.value_info.append(onnx.helper.make_tensor_value_info(n.output[0], et, out))
                added = True
        if not added:
            break
    return known


# ---- matching one block -------------------------------------------------------------------------
def _fail(node, what):
    raise RewriteError(f"dswa.onnx_samel: {OP} node '{node.name}': {what}")


def _find_packed(G, node):
    """The packed projection X that v comes from: back from v through reshapes, transposes,
    casts and a concatenation of copies, to the Split/Slice/Gather that takes v out of X (and
    past any reshape of X to its rank-3 (B, N, 5*H*D) form)."""
    t, seen = node.input[2], 0
    while True:
        n = G.producer.get(t)
        seen += 1
        if n is None or seen > 64:
            _fail(node, f"v ({node.input[2]}) does not come from a Split/Slice/Gather of the "
                        f"packed projection: the chain back from it ends at {G.describe(t)}")
        if n.op_type in ("Split", "Slice", "Gather"):
            x = n.input[0]
            break
        if n.op_type not in _PASS:
            _fail(node, f"v ({node.input[2]}) is computed by {n.op_type} node '{n.name}', not "
                        "taken out of the packed projection by a Split/Slice/Gather (through "
                        f"{', '.join(_PASS)})")
        data = [i for i in n.input[:1 if n.op_type != "Concat" else None] if i]
        if n.op_type == "Concat" and len(set(data)) != 1:
            _fail(node, f"v ({node.input[2]}) comes from Concat node '{n.name}' of different "
                        "tensors (only copies of one v are taken: v duplicated for both pairs)")
        t = data[0]
    while len(G.shapes.get(x, ([None] * 3, 0))[0]) != 3 and G.producer.get(x) is not None and \
            G.producer[x].op_type in ("Reshape", "Identity", "Unsqueeze", "Squeeze", "Flatten"):
        x = G.producer[x].input[0]
    return x


def _walk(G, node, x):
    """The nodes the old node's inputs are computed by, back to X: [nodes] in graph order, the
    Shape nodes whose outputs are cut (their sizes come from the shapes), and the graph inputs
    reached other than through a Shape."""
    order = {id(n): i for i, n in enumerate(G.g.node)}
    nodes, cuts, inputs, stack, seen = {}, {}, set(), list(node.input), set()
    while stack:
        t = stack.pop()
        if not t or t in seen or t == x:
            continue
        seen.add(t)
        n = G.producer.get(t)
        if n is None:
            if t not in G.inits:
                inputs.add(t)
            continue
        if n.op_type == "Shape" and _known(G, n.input[0], x):
            cuts[t] = n      # its value comes from the sizes: no need to look further back
            continue
        if id(n) not in nodes:
            nodes[id(n)] = n
            if len(nodes) > _MAX_NODES:
                _fail(node, f"more than {_MAX_NODES} nodes between it and the packed projection "
                            f"{x}: it reads more than the block")
            stack.extend(n.input)
    return sorted(nodes.values(), key=lambda n: order[id(n)]), cuts, inputs


def _known(G, name, x):
    """Whether every dim of `name` is fixed or one of X's (B, N)."""
    xs = G.shapes.get(x, ([None], 0))[0]
    syms = {d for d in xs[:2] if d is not None and not isinstance(d, int)}
    s = G.shapes.get(name, (None, 0))[0]
    return name == x or s is not None and all(
        (isinstance(d, int) and d > 0) or d in syms for d in s)


def _ancestors(G, names, within):
    ids = {id(n) for n in within}
    out, stack, seen = set(), list(names), set()
    while stack:
        t = stack.pop()
        if t in seen:
            continue
        seen.add(t)
        n = G.producer.get(t)
        if n is not None and id(n) in ids:
            out.add(id(n))
            stack.extend(n.input)
    return out


def _operand(G, n, other):
    """(constant operand value, its name, the other operand) of a binary node n, one of whose
    inputs is `other` (None: whichever is not constant); None when there is no constant one."""
    a, b = n.input[0], n.input[1]
    for c, o in ((a, b), (b, a)):
        if (other is None or o == other) and G.const(c) is not None and G.const(o) is None:
            return G.const(c), c, o
    return None


def _dyt(G, node, tanh):
    """(alpha, gamma, beta, gamma's name, beta's name) of the DyT norm around Tanh node `tanh`:
    Mul(alpha, x) -> Tanh -> Mul(gamma, .) -> Add(., beta)."""
    m = G.producer.get(tanh.input[0])
    if m is None or m.op_type != "Mul" or _operand(G, m, None) is None:
        _fail(node, f"Tanh node '{tanh.name}' does not read Mul(alpha, x) with a constant "
                    f"alpha: its input is {G.describe(tanh.input[0])} (DyT: gamma * "
                    "tanh(alpha * x) + beta)")
    alpha = _operand(G, m, None)[0]
    if np.size(alpha) != 1:
        _fail(node, f"DyT alpha of Tanh node '{tanh.name}' has {np.size(alpha)} elements: a "
                    "scalar is expected")
    cons = G.consumers.get(tanh.output[0], [])
    mul = cons[0] if len(cons) == 1 else None
    if mul is None or mul.op_type != "Mul" or _operand(G, mul, tanh.output[0]) is None:
        _fail(node, f"Tanh node '{tanh.name}' is not followed by one Mul with a constant gamma "
                    f"(found {', '.join(c.op_type for c in cons) or 'no consumer'})")
    gamma, gname, _ = _operand(G, mul, tanh.output[0])
    cons = G.consumers.get(mul.output[0], [])
    add = cons[0] if len(cons) == 1 else None
    if add is None or add.op_type != "Add" or _operand(G, add, mul.output[0]) is None:
        _fail(node, f"DyT: Mul node '{mul.name}' (gamma) is not followed by one Add with a "
                    f"constant beta (found {', '.join(c.op_type for c in cons) or 'no consumer'})")
    beta, bname, _ = _operand(G, add, mul.output[0])
    return (float(np.asarray(alpha, np.float64).reshape(())), np.asarray(gamma, np.float32).ravel(),
            np.asarray(beta, np.float32).ravel(), gname, bname)


def _norm(G, node, which, tanhs):
    if not tanhs:
        _fail(node, f"no DyT norm (Tanh) on the path from the packed projection to {which}")
    if len(tanhs) > 2:
        _fail(node, f"{len(tanhs)} Tanh nodes on the path to {which}: expected the DyT norm of "
                    f"each chunk (2) or of their concatenation (1)")
    found = [_dyt(G, node, t) for t in tanhs]
    a = found[0]
    for b, t in zip(found[1:], tanhs[1:]):
        if a[0] != b[0] or a[1].shape != b[1].shape or not (np.array_equal(a[1], b[1]) and
                                                            np.array_equal(a[2], b[2])):
            _fail(node, f"the two DyT norms on the path to {which} (Tanh nodes '{tanhs[0].name}', "
                        f"'{t.name}') have different weights: the fused block applies one norm "
                        f"to both chunks of {which}")
    return a


def _dims(G, node, name, sizes):
    """Concrete dims of tensor `name` with the symbols in `sizes` replaced."""
    if name not in G.shapes:
        _fail(node, f"the shape of {G.describe(name)} is unknown (shape inference could not "
                    "tell it): the block's sizes cannot be read")
    out = []
    for j, d in enumerate(G.shapes[name][0]):
        if isinstance(d, int) and d > 0:
            out.append(d)
        elif d in sizes:
            out.append(sizes[d])
        else:
            _fail(node, f"dim {j} of {G.describe(name)} is {d or 'unnamed and dynamic'}: "
                        "neither fixed nor one of the packed projection's B and N")
    return out


def _angles(table, n):
    """(rot_dims, base, freq, pos_offset) of a RoPE angle table whose last axis is the rotated
    dims and one other axis of size n the positions: upstream's fp32(fp32(pos) * inv_freq),
    whatever inv_freq holds (float32, or rounded to 16 bits by a model cast whole). freq: the
    rot_dims / 2 frequencies read from the table, None where they are base's float32 ones."""
    t = np.asarray(table, np.float64)
    rot = t.shape[-1]
    axes = [a for a in range(t.ndim - 1) if t.shape[a] == n]
    if n < 2 or not axes:
        raise ValueError(f"the RoPE angles have shape {t.shape}: expected the positions "
                         f"({n}) on one axis and the rotated dims last")
    t = np.moveaxis(t, axes[-1], 0).reshape(n, -1, rot)
    if not np.array_equal(t, np.broadcast_to(t[:, :1], t.shape)):
        raise ValueError(f"the RoPE angles of shape {table.shape} vary along an axis other "
                         "than the positions and the rotated dims")
    t = t[:, 0]
    c = rot // 2
    if rot % 2 or not np.array_equal(t[:, :c], t[:, c:]):
        raise ValueError(f"the RoPE angles' last axis ({rot}) is not one set of frequencies "
                         "repeated twice (non-interleaved rotate_half)")
    inv = (t[-1, :c] - t[0, :c]) / (n - 1)
    pos = t[:, 0] / inv[0] if inv[0] > 0 else None
    if pos is None or not np.allclose(pos, np.round(pos), atol=1e-3):
        raise ValueError("the RoPE angles are not integer positions times the frequencies")
    pos0 = int(round(pos[0]))
    if c > 1:          # the base that fits best: the config's `base`, and a candidate below
        f = np.arange(1, c)
        lb = -np.sum(np.log(inv[1:] / inv[0]) * (2 * f / rot)) / np.sum((2 * f / rot) ** 2)
        base = float(np.exp(lb))
        if abs(base - round(base)) < 1e-4 * base:
            base = float(round(base))
    else:
        base = 10000.0
    # The fused block computes fp32(fp32(pos) * freq[j]). From position 0, row 1 is the
    # frequencies exactly; from another, the base's float32 ones or their 16-bit roundings
    # where they fit, else row 0 / pos0. Then the whole table is checked against them.
    inv32 = np.asarray(_lib.rope_frequencies(rot, base), np.float32)
    cands = ([t[1, :c].astype(np.float32)] if pos0 == 0 else
             [inv32, inv32.astype(np.float16).astype(np.float32), _bf16(inv32),
              (t[0, :c] / pos0).astype(np.float32)])
    positions = np.float32(pos0) + np.arange(n, dtype=np.float32)
    errs = []
    for cand in cands:
        want = (positions[:, None] * cand[None, :]).astype(np.float64)
        want = np.concatenate([want, want], 1)
        errs.append(float(np.max(np.abs(t - want) / (np.abs(want) + 1.0))))
    k = int(np.argmin(errs))
    if not errs[k] <= 1e-6:
        raise ValueError(f"the RoPE angles are not float32 positions {pos0} + i times fixed "
                         f"frequencies: they differ from that by up to {errs[k]:.2g} (relative; "
                         "a 16-bit table, or interpolation that rounds otherwise?)")
    freq = tuple(float(v) for v in cands[k])
    return rot, base, None if np.array_equal(cands[k], inv32) else freq, pos0


def _bf16(a):
    """float32 a rounded to bfloat16 (nearest even), as float32 (numpy has no bfloat16)."""
    b = np.asarray(a, np.float32).view(np.uint32).astype(np.uint64)
    b = (b + 0x7FFF + ((b >> 16) & 1)) & 0xFFFF0000
    return b.astype(np.uint32).view(np.float32)


def _match(G, node, verify, rng):
    if len(node.input) != 3 or len(node.output) != 1:
        _fail(node, f"{len(node.input)} inputs and {len(node.output)} outputs: expected q, k, v "
                    "and one output")
    attr = {a.name: G.onnx.helper.get_attribute_value(a) for a in node.attribute}
    unknown = sorted(set(attr) - {"config", "num_heads"})
    if unknown:
        _fail(node, f"attribute(s) {', '.join(unknown)}: the op's node takes num_heads and "
                    "config, both optional")
    try:
        op = trt.node_config(_text(attr["config"]) if "config" in attr else None)
    except ValueError as e:
        _fail(node, str(e))
    x = _find_packed(G, node)
    nodes, cuts, inputs = _walk(G, node, x)
    if inputs:
        _fail(node, f"its inputs depend on graph input(s) {', '.join(sorted(inputs))} other than "
                    "through their shapes: the fused block reads only the packed projection "
                    f"{x} (a RoPE position offset must be a constant)")
    for i, which in enumerate(("q", "k", "v")):
        up = _ancestors(G, [node.input[i]], nodes)
        if not any(x in n.input for n in nodes if id(n) in up):
            _fail(node, f"{which} ({node.input[i]}) does not depend on the packed projection {x}")
    ids = {w: _ancestors(G, [node.input[i]], nodes) for i, w in enumerate(("q", "k"))}
    tanh = {w: [n for n in nodes if n.op_type == "Tanh" and id(n) in ids[w]] for w in ids}
    both = [n.name for n in tanh["q"] if n in tanh["k"]]
    if both:
        _fail(node, f"Tanh node(s) {', '.join(both)} feed both q and k: the norms of q and k "
                    "must be separate")
    qn, kn = _norm(G, node, "q", tanh["q"]), _norm(G, node, "k", tanh["k"])
    D = qn[1].size
    if kn[1].size != D or qn[2].size != D or kn[2].size != D:
        _fail(node, f"the norms' gamma and beta have {qn[1].size}, {qn[2].size}, {kn[1].size}, "
                    f"{kn[2].size} elements: all four must have D")
    xs = G.shapes.get(x, (None, 0))
    if xs[0] is None or len(xs[0]) != 3:
        _fail(node, f"the packed projection {G.describe(x)} has shape "
                    f"{xs[0] if xs[0] is not None else 'unknown'}: (B, N, 5*H*D) is expected")
    C = xs[0][2]
    if not isinstance(C, int) or C <= 0 or C % (5 * D):
        _fail(node, f"the packed projection {G.describe(x)} has {C} features: a multiple of 5*D "
                    f"= {5 * D} (D = {D}, the norms' length) is expected")
    H = C // (5 * D)
    if "num_heads" in attr:
        try:
            trt.check_num_heads(attr["num_heads"], 2 * H, "the node")
        except ValueError as e:
            _fail(node, f"{e} (the packed projection {x} holds {H} heads of D = {D})")
    B = xs[0][0] if isinstance(xs[0][0], int) and xs[0][0] > 0 else 2
    N = xs[0][1] if isinstance(xs[0][1], int) and xs[0][1] > 0 else 50
    sizes = {xs[0][0]: B, xs[0][1]: N}

    # The cut-out subgraph: X and the Shape cuts as inputs, the old node's output and every
    # RoPE angle tensor as outputs.
    trig = [n.input[0] for n in nodes if n.op_type in ("Cos", "Sin")]
    feeds = {}
    for t, sn in cuts.items():
        if sn.input[0] == x:
            dims = [B, N, C]
        else:
            dims = _dims(G, node, sn.input[0], sizes)
        a = {at.name: G.onnx.helper.get_attribute_value(at) for at in sn.attribute}
        feeds[t] = np.array(dims[a.get("start", 0):a.get("end", len(dims))], np.int64)
    et = xs[1]
    TP = G.onnx.TensorProto
    # bfloat16 (which numpy cannot compute in) is checked as float32: every bfloat16 tensor of
    # the cut-out subgraph widened, so the check is of what it computes, not of its rounding.
    widen = et == TP.BFLOAT16
    npdt = {TP.FLOAT: np.float32, TP.FLOAT16: np.float16, TP.BFLOAT16: np.float32}.get(et)
    if npdt is None:
        _fail(node, f"the packed projection {x} is of ONNX element type "
                    f"{TP.DataType.Name(et)}: float32, float16 or bfloat16 is expected")
    X = rng.standard_normal((B, N, C)).astype(npdt)
    feeds[x] = X
    outs = [node.output[0]] + sorted(set(trig) - set(G.inits))
    run_nodes = nodes + [node] if verify or (set(trig) - set(G.inits)) else []
    got = _run(G, run_nodes, feeds, outs, widen) if run_nodes else {}
    tables = [np.asarray(G.const(t), np.float32) if t in G.inits else got[t] for t in trig]
    try:
        if not tables:
            rot, base, freq, pos = 0, 10000.0, None, 0
        else:
            for t, v in zip(trig[1:], tables[1:]):
                if np.shape(v) != np.shape(tables[0]) or not np.array_equal(v, tables[0]):
                    raise ValueError(f"the Cos/Sin inputs {trig[0]} and {t} differ: one table of "
                                     "angles is expected")
            rot, base, freq, pos = _angles(tables[0], N)
    except ValueError as e:
        _fail(node, str(e))
    try:
        sc = trt.samel_config(window_left=op.window_left, window_right=op.window_right,
                              scale=op.scale, lam=op.lam, math=op.math, rot_dims=rot, base=base,
                              freq=freq, pos_offset=pos, q_alpha=qn[0], k_alpha=kn[0])
    except ValueError as e:
        _fail(node, f"the block's settings are refused: {e}")
    found = dict(x=x, H=H, D=D, config=sc, q=qn, k=kn, nodes=nodes, cuts=cuts)
    if verify:
        import dswa
        want = got[node.output[0]].astype(np.float64)
        fused = dswa.samel_attention(X, qn[1], qn[2], kn[1], kn[2], q_alpha=sc.q_alpha,
                                     k_alpha=sc.k_alpha, window_left=sc.window_left,
                                     window_right=sc.window_right, scale=sc.scale, lam=sc.lam,
                                     rot_dims=sc.rot_dims, freq=sc.frequencies(),
                                     pos_offset=sc.pos_offset, math="fp32")
        fused = fused.astype(np.float64).reshape(want.shape)
        err = np.linalg.norm(fused - want) / max(np.linalg.norm(want), 1e-30)
        tol = 1e-4 if npdt == np.float32 else 2e-2
        if not np.isfinite(err) or err > tol:
            _fail(node, f"the subgraph from {x} to it does not compute the fused SAME-L block "
                        f"with the settings read from it ({sc}): on random input (B = {B}, N = "
                        f"{N}) the relative difference is {err:.3g} (> {tol:g}); is the chunk "
                        "order q, k, v, q_diff, k_diff and RoPE non-interleaved?")
    return found


def _widen(onnx, n):
    """Node n with its bfloat16 types and constants made float32 (a copy when it changes)."""
    BF16, F32 = onnx.TensorProto.BFLOAT16, onnx.TensorProto.FLOAT
    attrs = [a for a in n.attribute if (a.type == onnx.AttributeProto.INT and a.name == "to"
                                        and a.i == BF16) or
             (a.type == onnx.AttributeProto.TENSOR and a.t.data_type == BF16)]
    if not attrs:
        return n
    c = onnx.NodeProto()
    c.CopyFrom(n)
    for a in c.attribute:
        if a.type == onnx.AttributeProto.INT and a.name == "to" and a.i == BF16:
            a.i = F32
        elif a.type == onnx.AttributeProto.TENSOR and a.t.data_type == BF16:
            a.t.CopyFrom(_widen_tensor(onnx, a.t))
    return c


def _widen_tensor(onnx, t):
    if t.data_type != onnx.TensorProto.BFLOAT16:
        return t
    return onnx.numpy_helper.from_array(np.asarray(onnx.numpy_helper.to_array(t), np.float32),
                                        t.name)


def _run(G, nodes, feeds, outs, widen=False):
    onnx = G.onnx
    from onnx.reference import ReferenceEvaluator
    used = {i for n in nodes for i in n.input}
    h = onnx.helper
    ins = [h.make_tensor_value_info(k, h.np_dtype_to_tensor_dtype(v.dtype), v.shape)
           for k, v in feeds.items()]
    inits = [t for n, t in G.inits.items() if n in used and n not in feeds]
    if widen:
        nodes = [_widen(onnx, n) for n in nodes]
        inits = [_widen_tensor(onnx, t) for t in inits]
    graph = h.make_graph(list(nodes), "samel_block", ins,
                         [h.make_tensor_value_info(o, onnx.TensorProto.UNDEFINED, None)
                          for o in outs], inits)
    m = h.make_model(graph, opset_imports=list(G.model.opset_import))
    m.ir_version = G.model.ir_version
    ev = ReferenceEvaluator(m, new_ops=reference_ops())
    return dict(zip(outs, ev.run(None, feeds)))


# ---- the rewrite ---------------------------------------------------------------------------------
def rewrite(model, *, verify=True, seed=0):
    """(new model, number of blocks rewritten) for an onnx.ModelProto (not modified).
    RewriteError (a ValueError) naming the node and what did not match, for any
    samel::diff_attn_swa node that cannot be rewritten: nothing is rewritten then."""
    onnx = _onnx()
    m = onnx.ModelProto()
    m.CopyFrom(model)
    G = _Graph(m)
    targets = [n for n in m.graph.node if n.domain == DOMAIN and n.op_type == OP]
    rng = np.random.default_rng(seed)
    found = [(n, _match(G, n, verify, rng)) for n in targets]
    h = onnx.helper
    names = set(G.producer) | set(G.inits) | G.inputs
    candidates = {}

    def fresh(base):
        name, i = base, 0
        while name in names:
            i += 1
            name = f"{base}_{i}"
        names.add(name)
        return name

    for node, f in found:
        weights = []
        for (_, w, b, gname, bname), side in ((f["q"], "q"), (f["k"], "k")):
            for val, src, what in ((w, gname, "gamma"), (b, bname, "beta")):
                t = G.inits.get(src)
                if t is not None and t.data_type == onnx.TensorProto.FLOAT and \
                        list(t.dims) == [val.size]:
                    weights.append(src)
                else:
                    nm = fresh(f"{src}_samel_{side}_{what}")
                    m.graph.initializer.append(onnx.numpy_helper.from_array(val, nm))
                    weights.append(nm)
        out = fresh(f"{node.output[0]}_fused")
        shape = fresh(f"{node.output[0]}_shape")
        m.graph.initializer.append(onnx.numpy_helper.from_array(
            np.array([0, 0, f["H"], f["D"]], np.int64), shape))
        fused = h.make_node(FUSED, [f["x"]] + weights, [out], name=fresh(f"{node.name}_fused"),
                            domain=FUSED_DOMAIN, config=str(f["config"]))
        reshape = h.make_node("Reshape", [out, shape], [node.output[0]],
                              name=fresh(f"{node.name}_reshape"))
        i = list(m.graph.node).index(node)
        m.graph.node.remove(node)
        m.graph.node.insert(i, reshape)
        m.graph.node.insert(i, fused)
        for n in f["nodes"] + list(f["cuts"].values()):
            candidates[id(n)] = n
    # Nodes the rewrite left without a consumer, and then the initializers only they read
    # (any other initializer, used or not, stays as it was).
    freed = {i for node, _ in found for i in node.input}
    while True:
        G.refresh()
        dead = [n for n in candidates.values()
                if not any(o in G.consumers or o in G.outputs for o in n.output)]
        if not dead:
            break
        for n in dead:
            freed.update(n.input)
            m.graph.node.remove(n)
            del candidates[id(n)]
    G.refresh()
    listed = {i.name for i in m.graph.input}
    keep = [t for t in m.graph.initializer if t.name not in freed or t.name in listed or
            t.name in G.consumers or t.name in G.outputs]
    del m.graph.initializer[:]
    m.graph.initializer.extend(keep)
    if found and not any(o.domain == FUSED_DOMAIN for o in m.opset_import):
        m.opset_import.append(h.make_opsetid(FUSED_DOMAIN, 1))
    return m, len(found)


def main(argv=None):
    import argparse
    ap = argparse.ArgumentParser(prog="python -m dswa.onnx_samel",
                                 description="Rewrite every samel::diff_attn_swa block of an ONNX "
                                             "model to the fused samel::samel_attention node.")
    ap.add_argument("input")
    ap.add_argument("output")
    ap.add_argument("--no-verify", action="store_true",
                    help="skip running each matched subgraph against the fused node (then "
                         "only the structure is matched)")
    a = ap.parse_args(argv)
    onnx = _onnx()
    try:
        model = onnx.load(a.input)
        new, n = rewrite(model, verify=not a.no_verify)
        if n == 0:
            raise RewriteError(f"dswa.onnx_samel: {a.input} has no {DOMAIN}::{OP} node")
        tmp = f"{a.output}.tmp{os.getpid()}"
        try:                     # a failed run leaves no output file
            onnx.save(new, tmp)
            os.replace(tmp, a.output)
        finally:
            if os.path.exists(tmp):
                os.unlink(tmp)
    except (OSError, ValueError, RuntimeError) as e:
        print(f"{ap.prog}: {e}", file=sys.stderr)
        return 1
    print(f"{a.output}: {n} block(s) rewritten to {FUSED_DOMAIN}::{FUSED}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
