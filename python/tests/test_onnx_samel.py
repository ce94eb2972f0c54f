"""dswa.onnx_samel: SAME-L attention blocks with the samel::diff_attn_swa node rewritten to
the fused samel::samel_attention node. The blocks are built with onnx.helper (no torch needed:
CI runs these) in several export styles, and, with torch, exported from the upstream-shaped
module of samel_ref.py. The original and rewritten graphs run in onnx's ReferenceEvaluator (the
custom nodes over the library's CPU backend) and are compared with each other and with the
float64 reference; blocks that compute something else are refused, with messages."""
import os
import subprocess
import sys
import tempfile

from _util import np, raises, skip, torch
from samel_ref import round_to, samel_reference

try:
    import onnx
    from onnx import TensorProto, helper, numpy_helper
    from onnx.reference import ReferenceEvaluator
except ImportError:
    onnx = None

from dswa import onnx_samel, trt  # noqa: E402

CONFIG = "window_left=17;window_right=17;scale=default;lambda=1;math=default"
PYTHON_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def need_onnx():
    if onnx is None:
        skip("skipped: the onnx package is not installed (pip install onnx)")


class Block:
    """A SAME-L attention block y = to_out(core(to_qkv(x))) as an ONNX graph, and what it
    should compute. split: "Split" or "Slice" for the chunks; layout: "bnhd" (chunks reshaped
    to (B, N, H, D), RoPE angles (N, 1, rot)) or "bhnd" (transposed to (B, H, N, D), angles
    (N, rot), transposed back after the concatenation); dynamic: B and N dynamic (angles
    computed from the input's shape) or fixed (angles an initializer); order: which chunk each
    of q, k, v, q_diff, k_diff reads (SAME-L: 0..4); norm: "dyt", "none" or "split" (q_diff
    with another gamma); rope: "half" or "interleaved"; pos_input: the angles' first position
    is a graph input; split "Gather": chunks taken from a (B, N, 5, H*D) reshape; cat_first:
    the norms and RoPE applied once to the concatenations of q, q_diff and k, k_diff; dtype:
    the model's ("float32", "float16", "bfloat16": RoPE in float32
    between two Casts, as upstream's); attrs: the op node's attributes (default: config; the
    published graphs': {"num_heads": H} alone)."""

    def __init__(self, B=2, N=40, H=2, D=64, *, split="Split", layout="bnhd", dynamic=True,
                 rot=32, pos_offset=0, order=(0, 1, 2, 3, 4), dup_v=False, norm="dyt",
                 rope="half", pos_input=False, seed=0, dtype="float32", cat_first=False,
                 attrs=None):
        rng = np.random.default_rng(seed)
        dim = H * D
        self.B, self.N, self.H, self.D, self.rot, self.pos_offset = B, N, H, D, rot, pos_offset
        self.dtype = dtype
        ET = {"float32": TensorProto.FLOAT, "float16": TensorProto.FLOAT16,
              "bfloat16": TensorProto.BFLOAT16}[dtype]
        f32 = lambda a: round_to(np.asarray(a, np.float64), dtype).astype(np.float32)  # noqa: E731
        self.w = f32(rng.standard_normal((dim, 5 * dim)) / dim ** 0.5)
        self.wo = f32(rng.standard_normal((dim, dim)) / dim ** 0.5)
        self.qn = (f32([0.3 + rng.random()]), f32(1 + 0.3 * rng.standard_normal(D)),
                   f32(0.2 * rng.standard_normal(D)))
        self.kn = (f32([0.3 + rng.random()]), f32(1 + 0.3 * rng.standard_normal(D)),
                   f32(0.2 * rng.standard_normal(D)))
        nodes, inits = [], []
        count = [0]

        def name(s):
            count[0] += 1
            return f"{s}_{count[0]}"

        def const(s, a):
            n = name(s)
            inits.append(numpy_helper.from_array(np.asarray(a), n))
            return n

        def wconst(s, a):        # a weight, in the model's dtype
            n = name(s)
            a = np.asarray(a, np.float32)
            inits.append(helper.make_tensor(n, ET, a.shape, a.ravel().tolist()) if
                         dtype == "bfloat16" else numpy_helper.from_array(a.astype(dtype), n))
            return n

        def node(op, ins, n_out=1, domain="", **attrs):
            outs = [name(op.lower()) for _ in range(n_out)]
            nodes.append(helper.make_node(op, ins, outs, name=name(op), domain=domain, **attrs))
            return outs[0] if n_out == 1 else outs

        W, WO = wconst("to_qkv.weight", self.w), wconst("to_out.weight", self.wo)
        norms = {}
        for side, (a, g, b) in (("q_norm", self.qn), ("k_norm", self.kn)):
            norms[side] = (wconst(f"{side}.alpha", a), wconst(f"{side}.gamma", g),
                           wconst(f"{side}.beta", b))
        if norm == "split":
            norms["q_norm_diff"] = (norms["q_norm"][0], wconst("q_norm2.gamma", self.qn[1] * 1.5),
                                    norms["q_norm"][2])
        qkv = node("MatMul", ["x", W])
        if split == "Split":
            chunks = node("Split", [qkv, const("split", np.array([dim] * 5, np.int64))],
                          n_out=5, axis=-1)
        elif split == "Gather":           # (B, N, 5, H*D), one chunk taken at a time
            q5 = node("Reshape", [qkv, const("shape", np.array([0, 0, 5, dim], np.int64))])
            chunks = [node("Gather", [q5, const("i", np.array(c, np.int64))], axis=2)
                      for c in range(5)]
        else:
            chunks = [node("Slice", [qkv, const("s", np.array([c * dim], np.int64)),
                                     const("e", np.array([(c + 1) * dim], np.int64)),
                                     const("a", np.array([2], np.int64))]) for c in range(5)]
        heads = []
        for c in order:
            t = node("Reshape", [chunks[c], const("shape", np.array([0, 0, H, D], np.int64))])
            if layout == "bhnd":
                t = node("Transpose", [t], perm=[0, 2, 1, 3])
            heads.append(t)
        q, k, v, qd, kd = heads

        # RoPE angles: positions pos_offset + i times inv_freq, repeated twice
        c2 = rot // 2
        inv = (1.0 / 10000 ** (np.arange(0, rot, 2) / rot)).astype(np.float32)
        if dynamic or pos_input:
            n = node("Cast", [node("Gather", [node("Shape", ["x"]),
                                              const("one", np.array(1, np.int64))], axis=0)],
                     to=TensorProto.FLOAT)
            start = "pos" if pos_input else const("start", np.array(pos_offset, np.float32))
            pos = node("Range", [start, node("Add", [n, start]),
                                 const("delta", np.array(1, np.float32))])
            freqs = node("Mul", [node("Unsqueeze", [pos, const("ax", np.array([1], np.int64))]),
                                 const("inv_freq", inv[None, :])])
            table = node("Concat", [freqs, freqs], axis=-1)
            if layout == "bnhd":
                table = node("Unsqueeze", [table, const("ax", np.array([1], np.int64))])
        else:
            pos = np.arange(pos_offset, pos_offset + N, dtype=np.float32)
            t = (pos[:, None] * inv[None, :]).astype(np.float32)
            t = np.concatenate([t, t], -1)
            table = const("freqs", t[:, None, :] if layout == "bnhd" else t)
        cos, sin = node("Cos", [table]), node("Sin", [table])

        def sl(t, a, b):
            return node("Slice", [t, const("s", np.array([a], np.int64)),
                                  const("e", np.array([b], np.int64)),
                                  const("a", np.array([-1], np.int64))])

        def dyt(t, side):
            if norm == "none":
                return t
            a, g, b = norms[side]
            return node("Add", [node("Mul", [g, node("Tanh", [node("Mul", [a, t])])]), b])

        def rotary(t):
            if dtype != "float32":
                t = node("Cast", [t], to=TensorProto.FLOAT)
            r, rest = sl(t, 0, rot), sl(t, rot, D)
            if rope == "half":
                rh = node("Concat", [node("Neg", [sl(r, c2, rot)]), sl(r, 0, c2)], axis=-1)
            else:      # interleaved pairs (2i, 2i+1): another RoPE, which the block is not
                ev = node("Slice", [r, const("s", np.array([0], np.int64)),
                                    const("e", np.array([rot], np.int64)),
                                    const("a", np.array([-1], np.int64)),
                                    const("st", np.array([2], np.int64))])
                od = node("Slice", [r, const("s", np.array([1], np.int64)),
                                    const("e", np.array([rot], np.int64)),
                                    const("a", np.array([-1], np.int64)),
                                    const("st", np.array([2], np.int64))])
                rh = node("Concat", [node("Neg", [od]), ev], axis=-1)
            y = node("Add", [node("Mul", [r, cos]), node("Mul", [rh, sin])])
            if dtype != "float32":
                y, rest = (node("Cast", [z], to=ET) for z in (y, rest))
            return node("Concat", [y, rest], axis=-1)

        hd = 2 if layout == "bnhd" else 1
        if cat_first:                     # the norm and RoPE once, on the concatenations
            qc = rotary(dyt(node("Concat", [q, qd], axis=hd), "q_norm"))
            kc = rotary(dyt(node("Concat", [k, kd], axis=hd), "k_norm"))
        else:
            qc = node("Concat", [rotary(dyt(q, "q_norm")),
                                 rotary(dyt(qd, "q_norm_diff" if norm == "split" else "q_norm"))],
                      axis=hd)
            kc = node("Concat", [rotary(dyt(k, "k_norm")), rotary(dyt(kd, "k_norm"))], axis=hd)
        vc = node("Concat", [v, v], axis=hd) if dup_v else v
        if layout == "bhnd":
            qc, kc, vc = (node("Transpose", [t], perm=[0, 2, 1, 3]) for t in (qc, kc, vc))
        o = node("diff_attn_swa", [qc, kc, vc], domain="samel",
                 **({"config": CONFIG} if attrs is None else attrs))
        o = node("Reshape", [o, const("shape", np.array([0, 0, dim], np.int64))])
        nodes.append(helper.make_node("MatMul", [o, WO], ["y"], name="to_out"))
        bn = ["B", "N"] if dynamic else [B, N]
        ins = [helper.make_tensor_value_info("x", ET, bn + [dim])]
        if pos_input:
            ins.append(helper.make_tensor_value_info("pos", TensorProto.FLOAT, []))
        graph = helper.make_graph(nodes, "samel_block", ins,
                                  [helper.make_tensor_value_info("y", ET, bn + [dim])], inits)
        self.model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17),
                                                             helper.make_opsetid("samel", 1)])
        self.model.ir_version = 8
        onnx.checker.check_model(self.model)

    def reference(self, x):
        """float64 y for x."""
        qkv = round_to(x.astype(np.float64) @ self.w, self.dtype)
        core = samel_reference(qkv, self.qn, self.kn, self.H, rot_dims=self.rot,
                               pos_offset=self.pos_offset, dtype=self.dtype)
        return round_to(core, self.dtype) @ self.wo.astype(np.float64)


def run(model, x, **feeds):
    ev = ReferenceEvaluator(model, new_ops=onnx_samel.reference_ops())
    return ev.run(None, {"x": x, **feeds})[0]


def rel(a, b):
    a, b = np.asarray(a, np.float64), np.asarray(b, np.float64)
    assert a.shape == b.shape, (a.shape, b.shape)
    assert np.isfinite(a).all()
    return float(np.linalg.norm(a - b) / max(np.linalg.norm(b), 1e-30))


def ops(model):
    return [(n.domain, n.op_type) for n in model.graph.node]


def check_rewrite(block, shapes, tol=2e-5):
    new, n = onnx_samel.rewrite(block.model)
    assert n == 1
    onnx.checker.check_model(new)
    got = ops(new)
    assert ("samel", "samel_attention") in got and ("samel", "diff_attn_swa") not in got, got
    for op in ("Tanh", "Cos", "Sin", "Split", "Neg", "Transpose"):
        assert ("", op) not in got, f"{op} left in the rewritten graph: {got}"
    used = {i for nd in new.graph.node for i in nd.input}
    assert [t.name for t in new.graph.initializer if t.name not in used] == []   # alphas gone
    fused = [nd for nd in new.graph.node if nd.op_type == "samel_attention"][0]
    if block.dtype == "float32":           # the model's own float32 (D,) weights are used
        assert list(fused.input[1:]) == ["q_norm.gamma_4", "q_norm.beta_5", "k_norm.gamma_7",
                                         "k_norm.beta_8"], list(fused.input)
    weights = {t.name: numpy_helper.to_array(t) for t in new.graph.initializer}
    for name, want in zip(fused.input[1:], (block.qn[1], block.qn[2], block.kn[1], block.kn[2])):
        assert weights[name].dtype == np.float32 and np.array_equal(weights[name], want), name
    cfg = helper.get_attribute_value(fused.attribute[0]).decode()
    assert f"rot_dims={block.rot};base=10000;pos_offset={block.pos_offset}" in cfg, cfg
    rng = np.random.default_rng(1)
    for B, N in shapes:
        x = rng.standard_normal((B, N, block.H * block.D)).astype(block.dtype)
        y0 = run(block.model, x)
        y1 = run(new, x)
        ref = block.reference(x)
        e0, e1, e01 = rel(y0, ref), rel(y1, ref), rel(y1, y0)
        assert e0 < tol and e1 < tol and e01 < tol, (B, N, e0, e1, e01)
    return new


def test_rewrite_styles():
    """Every export style the tool takes: Split, Slice or Gather, (B, N, H, D) or (B, H, N, D)
    order, the norms per chunk or on the concatenation, B and N dynamic or fixed (angles
    computed or an initializer), v shared or duplicated, a position offset, fewer rotated
    dims. Dynamic graphs run at several sizes, N below the window and not a multiple of the
    kernels' 64-row tile included."""
    need_onnx()
    cases = [dict(), dict(split="Slice", layout="bhnd"), dict(layout="bhnd", dup_v=True),
             dict(dynamic=False, split="Slice"), dict(dynamic=False, layout="bhnd", dup_v=True),
             dict(pos_offset=7, rot=16), dict(dynamic=False, pos_offset=1000, rot=64),
             dict(split="Gather", cat_first=True), dict(layout="bhnd", cat_first=True)]
    for i, kw in enumerate(cases):
        blk = Block(seed=i, **kw)
        shapes = [(2, 70), (1, 9), (3, 40)] if kw.get("dynamic", True) else [(2, 40)]
        check_rewrite(blk, shapes)


def test_rewrite_published_node():
    """The op node as SAME-L's published graphs carry it (num_heads, no config: SAME-L's
    settings), V duplicated as they feed it, float32 and float16; with both attributes too.
    The evaluator runs the old node with those settings too."""
    need_onnx()
    check_rewrite(Block(attrs={"num_heads": 2}, dup_v=True), [(2, 70), (1, 9)])
    check_rewrite(Block(attrs={"num_heads": 2}, dup_v=True, dtype="float16", layout="bhnd"),
                  [(2, 40)], tol=3e-3)
    check_rewrite(Block(attrs={"num_heads": 2, "config": CONFIG}), [(1, 30)])


def test_rewrite_16bit():
    """A float16 model (run before and after in the reference evaluator) and a bfloat16 one
    (numpy cannot run it: the rewrite's check runs it widened to float32; a wrong chunk order
    is still refused)."""
    need_onnx()
    check_rewrite(Block(dtype="float16"), [(2, 70), (1, 9)], tol=3e-3)
    check_rewrite(Block(dtype="float16", dynamic=False, layout="bhnd", pos_offset=3), [(2, 40)],
                  tol=3e-3)
    blk = Block(dtype="bfloat16", layout="bhnd", dup_v=True, pos_offset=2)
    new, n = onnx_samel.rewrite(blk.model)
    fused = [nd for nd in new.graph.node if nd.op_type == "samel_attention"]
    assert n == 1 and len(fused) == 1 and ("", "Tanh") not in ops(new)
    c = trt.samel_parse(helper.get_attribute_value(fused[0].attribute[0]).decode())
    assert (c.rot_dims, c.base, c.pos_offset, c.q_alpha, c.k_alpha) == \
        (32, 10000.0, 2, float(blk.qn[0][0]), float(blk.kn[0][0])), c
    raises(onnx_samel.RewriteError, "does not compute the fused SAME-L block", onnx_samel.rewrite,
           Block(dtype="bfloat16", order=(0, 4, 2, 3, 1)).model)


def test_refusals():
    """Blocks the fused node does not compute are refused with a message naming what did not
    match, and the model is left as it was."""
    need_onnx()
    cases = [
        (dict(order=(0, 3, 2, 1, 4)), "does not compute the fused SAME-L block"),
        (dict(rope="interleaved"), "does not compute the fused SAME-L block"),
        (dict(norm="none"), "no DyT norm (Tanh) on the path from the packed projection to q"),
        (dict(norm="split"), "have different weights"),
        (dict(pos_input=True), "graph input(s) pos"),
    ]
    for kw, msg in cases:
        blk = Block(**kw)
        before = blk.model.SerializeToString()
        raises(onnx_samel.RewriteError, msg, onnx_samel.rewrite, blk.model)
        assert blk.model.SerializeToString() == before
    # v not taken out of a split of the projection
    blk = Block()
    g = blk.model.graph
    d = [n for n in g.node if n.op_type == "diff_attn_swa"][0]
    g.input.append(helper.make_tensor_value_info("v_in", TensorProto.FLOAT, ["B", "N", 2, 64]))
    d.input[2] = "v_in"
    raises(onnx_samel.RewriteError, "the chain back from it ends at 'v_in' (a graph input)",
           onnx_samel.rewrite, blk.model)
    # the op node's attributes: num_heads against the projection's heads, no others
    for attrs, msg in (({"num_heads": 3}, "num_heads = 3 but q_bat.shape[2] = 4"),
                       ({"num_heads": 2, "window": 17}, "attribute(s) window: the op's node "
                        "takes num_heads and config")):
        blk = Block(attrs=attrs)
        before = blk.model.SerializeToString()
        raises(onnx_samel.RewriteError, msg, onnx_samel.rewrite, blk.model)
        assert blk.model.SerializeToString() == before
    # a model without the op: nothing to do
    m = helper.make_model(helper.make_graph(
        [helper.make_node("Relu", ["x"], ["y"])], "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1])]))
    assert onnx_samel.rewrite(m)[1] == 0


def test_two_blocks():
    """Two blocks in a row (the second's projection after the first's custom node: shape
    inference goes on past it); both rewritten, unrelated nodes kept."""
    need_onnx()
    a, b = Block(seed=1, dynamic=False), Block(seed=2, dynamic=False, layout="bhnd")
    ga, gb = a.model.graph, b.model.graph
    ren = {n: f"b_{n}" for nd in gb.node for n in list(nd.input) + list(nd.output)}
    ren.update({t.name: f"b_{t.name}" for t in gb.initializer})
    ren["x"] = "y_a"
    ren["y"] = "y"
    nodes = []
    for nd in ga.node:
        nd2 = onnx.NodeProto()
        nd2.CopyFrom(nd)
        nd2.output[:] = ["y_a" if o == "y" else o for o in nd.output]
        nodes.append(nd2)
    nodes.append(helper.make_node("Relu", ["x"], ["side"], name="side"))
    for nd in gb.node:
        nd2 = onnx.NodeProto()
        nd2.CopyFrom(nd)
        nd2.input[:] = [ren.get(i, i) for i in nd.input]
        nd2.output[:] = [ren.get(o, o) for o in nd.output]
        nd2.name = "b_" + nd.name
        nodes.append(nd2)
    inits = list(ga.initializer)
    for t in gb.initializer:
        t2 = onnx.TensorProto()
        t2.CopyFrom(t)
        t2.name = ren[t.name]
        inits.append(t2)
    outs = [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 40, 128]),
            helper.make_tensor_value_info("side", TensorProto.FLOAT, [2, 40, 128])]
    m = helper.make_model(helper.make_graph(nodes, "two", list(ga.input), outs, inits),
                          opset_imports=list(a.model.opset_import))
    m.ir_version = 8
    new, n = onnx_samel.rewrite(m)
    assert n == 2 and sum(op == ("samel", "samel_attention") for op in ops(new)) == 2
    assert ("", "Relu") in ops(new)
    x = np.random.default_rng(3).standard_normal((2, 40, 128)).astype(np.float32)
    ev0 = ReferenceEvaluator(m, new_ops=onnx_samel.reference_ops())
    ev1 = ReferenceEvaluator(new, new_ops=onnx_samel.reference_ops())
    y0, s0 = ev0.run(None, {"x": x})
    y1, s1 = ev1.run(None, {"x": x})
    ref = b.reference(a.reference(x).astype(np.float32))
    assert rel(y1, ref) < 5e-5 and rel(y0, ref) < 5e-5 and rel(y1, y0) < 5e-5
    assert np.array_equal(s0, s1)


def test_cli():
    """python -m dswa.onnx_samel IN OUT: writes OUT and says how many blocks; a refusal exits
    1 with the message and writes nothing."""
    need_onnx()
    env = dict(os.environ, PYTHONPATH=PYTHON_DIR + os.pathsep + os.environ.get("PYTHONPATH", ""))
    with tempfile.TemporaryDirectory() as d:
        src, dst = os.path.join(d, "in.onnx"), os.path.join(d, "out.onnx")
        onnx.save(Block().model, src)
        r = subprocess.run([sys.executable, "-m", "dswa.onnx_samel", src, dst], env=env,
                           capture_output=True, text=True)
        assert r.returncode == 0 and "1 block(s) rewritten" in r.stdout, r
        assert ("samel", "samel_attention") in ops(onnx.load(dst))
        os.unlink(dst)
        onnx.save(Block(order=(1, 0, 2, 3, 4)).model, src)
        r = subprocess.run([sys.executable, "-m", "dswa.onnx_samel", src, dst], env=env,
                           capture_output=True, text=True)
        assert r.returncode == 1 and "does not compute the fused SAME-L block" in r.stderr, r
        assert not os.path.exists(dst) and os.listdir(d) == ["in.onnx"]


def test_torch_export():
    """The upstream-shaped module of samel_ref.py (random weights) exported with
    torch.onnx.export (the TorchScript exporter; its core as the samel::diff_attn_swa node) in
    both layouts, v shared or duplicated, B and N dynamic or fixed: rewritten, and both graphs
    against the module itself (plain-torch core) and the float64 reference."""
    need_onnx()
    if torch is None:
        skip("skipped: torch not installed (the onnx.helper graphs cover the rewrite)")
    import io
    import warnings

    from samel_ref import Attention, norms, randomize
    torch.manual_seed(0)
    ref_mod = randomize(Attention(128)).eval()
    x = torch.randn(2, 40, 128)
    for layout in ("bhnd", "bnhd"):
        for dup in (False, True):
            for dynamic in (True, False):
                mod = Attention(128, core="plugin", layout=layout, dup_v=dup).eval()
                mod.load_state_dict(ref_mod.state_dict())
                f = io.BytesIO()
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore")
                    torch.onnx.export(mod, (x,), f, dynamo=False, input_names=["x"],
                                      output_names=["y"], opset_version=17,
                                      dynamic_axes={"x": {0: "B", 1: "N"}} if dynamic else None)
                model = onnx.load_from_string(f.getvalue())
                new, n = onnx_samel.rewrite(model)
                assert n == 1 and ("", "Tanh") not in ops(new)
                for xs in ([x, torch.randn(1, 70, 128)] if dynamic else [x]):
                    with torch.no_grad():
                        want = ref_mod(xs).numpy()
                        qkv = ref_mod.to_qkv(xs)
                    qn, kn = norms(ref_mod)
                    ref = samel_reference(qkv, qn, kn, 2) @ \
                        ref_mod.to_out.weight.detach().double().numpy().T
                    y0, y1 = run(model, xs.numpy()), run(new, xs.numpy())
                    errs = rel(y0, ref), rel(y1, ref), rel(y1, y0), rel(want, ref)
                    assert max(errs) < 2e-5, (layout, dup, dynamic, errs)


def test_torch_export_16bit():
    """torch.onnx exports of the module in float16 and bfloat16. With its RoPE inv_freq buffer
    converted too (module.to(dtype), as upstream casts a model) the table is float32 positions
    times the 16-bit-rounded frequencies: rewritten with those frequencies in the config
    (`freq=`), exactly the rounded inv_freq. With inv_freq kept in float32: rewritten with
    exactly those (torch's float32 pow may differ from dswa_rope_frequencies' by an ulp: then
    they are written too). The float16 graphs run as before."""
    need_onnx()
    if torch is None:
        skip("skipped: torch not installed (the onnx.helper graphs cover the rewrite)")
    import io
    import warnings

    from samel_ref import Attention, RotaryEmbedding, randomize
    x32 = torch.randn(2, 40, 128)
    for dt in (torch.float16, torch.bfloat16):
        for keep in (False, True):
            mod = randomize(Attention(128, core="plugin"), seed=4).to(dt).eval()
            if keep:                        # a fresh float32 one (not the rounded one)
                mod.rotary.inv_freq = RotaryEmbedding(32).inv_freq
            f = io.BytesIO()
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                torch.onnx.export(mod, (x32.to(dt),), f, dynamo=False, input_names=["x"],
                                  output_names=["y"], opset_version=17,
                                  dynamic_axes={"x": {0: "B", 1: "N"}})
            model = onnx.load_from_string(f.getvalue())
            new, n = onnx_samel.rewrite(model)
            assert n == 1 and ("", "Tanh") not in ops(new)
            cfg = [a.s.decode() for nd in new.graph.node for a in nd.attribute
                   if a.name == "config"]
            assert len(cfg) == 1, cfg
            got = trt.samel_parse(cfg[0]).frequencies()
            want = tuple(mod.rotary.inv_freq.float().tolist())
            assert got == want, (dt, keep, got, want)
            if dt == torch.float16:
                x = x32.half().numpy()
                assert rel(run(new, x), run(model, x)) < 3e-3
