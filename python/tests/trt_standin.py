"""A stand-in for TensorRT's compiled core (tensorrt.so, which needs libnvinfer), just enough for
the real pure-Python plugin layer (`tensorrt.plugin` from a tensorrt-cu1x-bindings wheel) to
import and run, plus `Builder`, which makes the calls the engine builder makes on a quick
plugin, in its order.

    import trt_standin
    trt, trtp = trt_standin.load("/path/to/site")     # the --target dir of the bindings wheel

What it is: enums and plain records (DataType, PluginField, PluginTensorDesc, ...), a plugin
registry (a dict), and shape expressions (`Expr`): a constant, a named dimension (a dynamic
axis: "B", "N") or an operation on two expressions, with TensorRT's operators. Constant
operands fold (as TensorRT's IExprBuilder does); everything else stays a tree that `value(env)`
evaluates with integers later: the same expression serves every (B, N) of a dynamic profile.

What it is not: no engine, no kernel compilation or launch, no CUDA; TensorRT's own C++ checks
(e.g. that a launch fits the device, that the PTX loads) do not happen here.
"""
import importlib
import os
import sys
import types

import numpy as np


class _Enum:
    def __init__(self, owner, name, value):
        self._owner, self.name, self.value = owner, name, value

    def __repr__(self):
        return f"{self._owner}.{self.name}"

    def __int__(self):
        return self.value

    def __hash__(self):
        return hash((self._owner, self.name))

    def __eq__(self, other):
        return isinstance(other, _Enum) and (self._owner, self.name) == (other._owner, other.name)


def _enum(owner, *names):
    cls = type(owner, (), {})
    cls.__members__ = {}
    for i, n in enumerate(names):
        e = _Enum(owner, n, i)
        setattr(cls, n, e)
        cls.__members__[n] = e
    return cls


# ---- shape expressions ---------------------------------------------------------------------
DimensionOperation = _enum("DimensionOperation", "SUM", "PROD", "MAX", "MIN", "SUB", "EQUAL",
                           "LESS", "FLOOR_DIV", "CEIL_DIV")
_OPS = {"SUM": lambda a, b: a + b, "PROD": lambda a, b: a * b, "MAX": max, "MIN": min,
        "SUB": lambda a, b: a - b, "EQUAL": lambda a, b: int(a == b),
        "LESS": lambda a, b: int(a < b), "FLOOR_DIV": lambda a, b: a // b,
        "CEIL_DIV": lambda a, b: -(-a // b)}


class IDimensionExpr:
    pass


class Expr(IDimensionExpr):
    """A constant (`const`), a dimension named `name`, or `op` applied to `args`."""

    def __init__(self, const=None, name=None, op=None, args=()):
        self.const, self.name, self.op, self.args = const, name, op, args

    def is_constant(self):
        return self.const is not None

    def get_constant_value(self):
        assert self.const is not None, "not a constant"
        return self.const

    def value(self, env):
        """The integer for dimension values env {"B": 2, "N": 300}."""
        if self.const is not None:
            return self.const
        if self.name is not None:
            return env[self.name]
        return _OPS[self.op](*(a.value(env) for a in self.args))

    def __repr__(self):
        if self.const is not None:
            return str(self.const)
        return self.name or f"{self.op}({', '.join(map(repr, self.args))})"


class IExprBuilder:
    def constant(self, value):
        assert isinstance(value, int), value
        return Expr(const=value)

    def operation(self, op, a, b):
        assert isinstance(a, Expr) and isinstance(b, Expr), (a, b)
        if a.is_constant() and b.is_constant():
            return Expr(const=_OPS[op.name](a.const, b.const))
        return Expr(op=op.name, args=(a, b))

    def declare_size_tensor(self, *a):
        raise NotImplementedError("size tensors are not part of this stand-in")


class Dims(list):
    MAX_DIMS = 8


class DimsExprs(list):
    def __init__(self, n):
        super().__init__([None] * n)


# ---- types, fields, descriptors ------------------------------------------------------------
DataType = _enum("DataType", "FLOAT", "HALF", "INT8", "INT32", "BOOL", "UINT8", "FP8", "BF16",
                 "INT64", "INT4", "FP4")
float32, float16, bfloat16, int8, int32, int64 = (DataType.FLOAT, DataType.HALF, DataType.BF16,
                                                  DataType.INT8, DataType.INT32, DataType.INT64)
TensorFormat = _enum("TensorFormat", "LINEAR", "CHW2", "HWC8", "CHW4", "CHW16", "CHW32",
                     "DHWC8", "CDHW32", "HWC", "DLA_LINEAR", "DLA_HWC4", "HWC16", "DHWC")
PluginFieldType = _enum("PluginFieldType", "FLOAT16", "FLOAT32", "FLOAT64", "INT8", "INT16",
                        "INT32", "CHAR", "DIMS", "UNKNOWN", "BF16", "INT64", "FP8", "INT4")
TensorRTPhase = _enum("TensorRTPhase", "BUILD", "RUNTIME")
QuickPluginCreationRequest = _enum("QuickPluginCreationRequest", "UNKNOWN", "PREFER_JIT",
                                   "PREFER_AOT", "STRICT_JIT", "STRICT_AOT")
PluginArgType = _enum("PluginArgType", "INT")
PluginArgDataType = _enum("PluginArgDataType", "INT8", "INT16", "INT32")
_NP = {"FLOAT16": np.float16, "FLOAT32": np.float32, "FLOAT64": np.float64, "INT8": np.int8,
       "INT16": np.int16, "INT32": np.int32, "INT64": np.int64, "CHAR": np.int8,
       "UNKNOWN": np.int8}


def nptype(t):
    return {"FLOAT": np.float32, "HALF": np.float16, "INT8": np.int8, "INT32": np.int32,
            "INT64": np.int64, "BOOL": np.bool_}[t.name]


class PluginField:
    """As the binding keeps it: `data` becomes a 1-D numpy array of the field's type (bytes for
    CHAR/UNKNOWN become int8), which is what the plugin layer reads back."""

    def __init__(self, name="", data=None, type=PluginFieldType.UNKNOWN):
        self.name, self.type = name, type
        if isinstance(data, (bytes, bytearray)):
            data = np.frombuffer(bytes(data), np.int8)
        self.data = np.array(data if data is not None else [], dtype=_NP[type.name]).ravel()
        self.size = self.data.size


class PluginFieldCollection(list):
    pass


class PluginTensorDesc:
    def __init__(self):
        self.dims, self.type, self.format, self.scale = Dims(), DataType.FLOAT, \
            TensorFormat.LINEAR, 1.0


class DynamicPluginTensorDesc:
    def __init__(self):
        self.desc, self.min, self.max, self.opt = PluginTensorDesc(), Dims(), Dims(), Dims()


class ISymExpr:
    def __init__(self):
        pass


class ITensor:
    """A network tensor: its dims (-1 for a dynamic one), as ITensor.shape gives them."""

    def __init__(self, shape=()):
        self.shape = Dims(shape)


class Logger:
    INTERNAL_ERROR, ERROR, WARNING, INFO, VERBOSE = range(5)

    def __init__(self, *a):
        pass

    def log(self, severity, msg):
        pass


def _base(name):
    return type(name, (), {"__init__": lambda self: None})


IPluginV3, IPluginV3QuickCore, IPluginV3QuickBuild, IPluginV3QuickRuntime, \
    IPluginV3QuickAOTBuild, IPluginCreatorV3Quick = map(_base, (
        "IPluginV3", "IPluginV3QuickCore", "IPluginV3QuickBuild", "IPluginV3QuickRuntime",
        "IPluginV3QuickAOTBuild", "IPluginCreatorV3Quick"))


class _Registry:
    def __init__(self):
        self.creators = {}

    def register_creator(self, creator, namespace):
        key = (creator.name, creator.plugin_version, namespace)
        if key in self.creators:
            return False
        self.creators[key] = creator
        return True

    def deregister_creator(self, creator):
        key = (creator.name, creator.plugin_version, creator.plugin_namespace)
        return self.creators.pop(key, None) is not None

    def get_creator(self, name, version, namespace=""):
        return self.creators.get((name, version, namespace))

    @property
    def all_creators(self):
        return list(self.creators.values())


_registry = _Registry()


def get_plugin_registry():
    return _registry


# ---- loading --------------------------------------------------------------------------------
def load(site):
    """Imports `tensorrt` (this stand-in) with `tensorrt.plugin` from site/tensorrt_bindings:
    returns (tensorrt, tensorrt.plugin). One site per process: versions must not mix."""
    bindings = os.path.join(site, "tensorrt_bindings")
    if not os.path.isdir(os.path.join(bindings, "plugin")):
        raise FileNotFoundError(f"{site}: no tensorrt_bindings/plugin (install a "
                                "tensorrt-cu1x-bindings wheel there with pip --target)")
    if "tensorrt" in sys.modules:
        assert getattr(sys.modules["tensorrt"], "__standin_site__", None) == site, \
            "another tensorrt is already imported in this process"
        return sys.modules["tensorrt"], importlib.import_module("tensorrt.plugin")
    trt = types.ModuleType("tensorrt")
    me = sys.modules[__name__]
    for k, v in vars(me).items():
        if not k.startswith("_") and k not in ("load", "Builder", "Build", "importlib",
                                               "os", "sys", "types", "np"):
            setattr(trt, k, v)
    trt.__path__ = [bindings]          # tensorrt.plugin is the wheel's tensorrt_bindings/plugin
    trt.__standin_site__ = site
    trt.__version__ = _wheel_version(site)
    sys.modules["tensorrt"] = trt
    return trt, importlib.import_module("tensorrt.plugin")


def _wheel_version(site):
    for d in os.listdir(site):
        if d.startswith("tensorrt_") and d.endswith(".dist-info"):
            return d.split("-")[1].split(".dist")[0]
    return "unknown"


# ---- the engine builder's calls on a quick plugin ------------------------------------------
class Build:
    """What the builder makes of one plugin layer: plugin instance, output dtype/shape
    expressions, supported type combinations, and (AOT) the kernel and its launch."""


class Builder:
    """Drives one plugin layer through the calls TensorRT's builder makes (IPluginV3 quick
    plugins, TensorRT 10.9-11.x): creator.create_plugin, get_output_data_types,
    get_output_shapes, get_supported_format_combinations, configure_plugin, get_valid_tactics,
    set_tactic, then (AOT) get_launch_params and get_kernel; or (JIT) enqueue."""

    def __init__(self, trt, trtp):
        self.trt, self.trtp = trt, trtp

    def build(self, plugin_id, inputs, fields, profile=None, request="UNKNOWN",
              out_types=None):
        """inputs: [(dtype, dims)], each dim an int or a name ("B", "N": dynamic).
        profile: {name: (min, opt, max)} for the named dims (the optimization profile).
        fields: {name: value} as the network carries them (str -> CHAR, numpy array), or a
        PluginFieldCollection as given (onnx_plugin_fields: the ONNX parser's).
        request: the QuickPluginCreationRequest name the network's flags give (UNKNOWN: none,
        PREFER_AOT, PREFER_JIT, STRICT_AOT, STRICT_JIT)."""
        profile = profile or {}
        trt = self.trt
        ns, name = plugin_id.split("::")
        creator = trt.get_plugin_registry().get_creator(name, "1", ns)
        assert creator is not None, f"no creator registered for {plugin_id}"
        fc = fields if isinstance(fields, PluginFieldCollection) else \
            PluginFieldCollection(_field(k, v) for k, v in fields.items())
        qpcr = getattr(QuickPluginCreationRequest, request)
        if hasattr(trt.plugin, "aot_impl"):
            plugin = creator.create_plugin(name, ns, fc, TensorRTPhase.BUILD, qpcr)
        else:
            plugin = creator.create_plugin(name, ns, fc, TensorRTPhase.BUILD)
        b = Build()
        b.plugin = plugin
        b.aot = type(plugin).__name__ == "_TemplateAOTPlugin"
        b.output_types = plugin.get_output_data_types([t for t, _ in inputs],
                                                       [len(d) for _, d in inputs])
        eb = IExprBuilder()
        in_exprs = [[Expr(const=d) if isinstance(d, int) else Expr(name=d) for d in dims]
                    for _, dims in inputs]
        b.output_shapes = plugin.get_output_shapes(in_exprs, [], eb)
        # get_supported_format_combinations: TensorRT passes candidate descs; the plugin
        # answers with the combinations it supports (all of them in one flat list)
        n_io = len(inputs) + len(b.output_types)
        in_out = []
        for dt, dims in [(t, d) for t, d in inputs] + [(t, ()) for t in b.output_types]:
            d = DynamicPluginTensorDesc()
            d.desc.type, d.desc.dims = dt, Dims(x if isinstance(x, int) else -1 for x in dims)
            for i, attr in enumerate(("min", "opt", "max")):
                setattr(d, attr, Dims(x if isinstance(x, int) else profile[x][i] for x in dims))
            in_out.append(d)
        combs = plugin.get_supported_format_combinations(in_out, len(inputs))
        b.combinations = [tuple(c.type for c in combs[i:i + n_io])
                          for i in range(0, len(combs), n_io)]
        want = tuple(t for t, _ in inputs) + tuple(out_types or b.output_types)
        b.supported = want in b.combinations
        if not b.supported:
            return b                   # TensorRT reports "no supported format combination"
        for d, t in zip(in_out, want):
            d.desc.type = t
        plugin.configure_plugin(in_out[:len(inputs)], in_out[len(inputs):])
        b.tactics = plugin.get_valid_tactics()
        tactic = (b.tactics or [0])[0]
        plugin.set_tactic(tactic)
        if b.aot:
            lp = types.SimpleNamespace()
            setter = _SymSetter()
            plugin.get_launch_params(in_exprs, in_out, len(inputs), lp, setter, eb)
            b.launch = {k: getattr(lp, k).expr for k in ("grid_x", "grid_y", "grid_z", "block_x",
                                                          "block_y", "block_z", "shared_mem")}
            b.extras = [e.expr for e in setter.exprs]
            b.extra_types = [e.dtype for e in setter.exprs]
            b.kernel_name, b.ptx = plugin.get_kernel([d.desc for d in in_out[:len(inputs)]],
                                                     [d.desc for d in in_out[len(inputs):]])
        b.serialized = {f.name: f for f in plugin.get_fields_to_serialize()} \
            if not b.aot else None
        return b


# ---- the ONNX parser's hand-over of a custom node's attributes ------------------------------
_ONNX_TO_FIELD = {"INT32": np.int32, "INT64": np.int64, "INT16": np.int16, "INT8": np.int8,
                  "FLOAT32": np.float32, "FLOAT64": np.float64, "FLOAT16": np.float16}


def onnx_plugin_fields(plugin_id, node):
    """The PluginFieldCollection TensorRT's ONNX parser builds for a node it hands to a plugin
    creator (onnx-tensorrt's fallback plugin importer): for each field the creator declares,
    in the creator's order, the node's attribute of that name converted to the declared field
    type (an INT attribute to one int32 for an INT32 field, to one int64 for INT64; a STRING
    to CHAR bytes); a declared field the node lacks is left out; an attribute the creator does
    not declare is not handed over. node: an onnx.NodeProto; plugin_id: "ns::name", whose
    registered creator receives it."""
    import onnx
    ns, name = plugin_id.split("::")
    creator = get_plugin_registry().get_creator(name, "1", ns)
    assert creator is not None, f"no creator registered for {plugin_id}"
    attrs = {a.name: onnx.helper.get_attribute_value(a) for a in node.attribute}
    fields = []
    for decl in creator.field_names:
        if decl.name not in attrs:
            continue
        v, t = attrs[decl.name], decl.type.name
        if t == "CHAR":
            fields.append(PluginField(decl.name, v if isinstance(v, bytes) else str(v).encode(),
                                      PluginFieldType.CHAR))
        elif t in _ONNX_TO_FIELD:
            data = np.atleast_1d(np.array(v)).astype(_ONNX_TO_FIELD[t])
            fields.append(PluginField(decl.name, data, decl.type))
        else:
            raise NotImplementedError(f"field {decl.name}: type {t} is not modelled here")
    return PluginFieldCollection(fields)


def published_node(num_heads=24, **extra):
    """The attention node of SAME-L's published encoder/decoder graphs, made with onnx.helper in
    a checked model: samel::diff_attn_swa(q_bat, k_bat, v_bat) -> one output, and exactly one
    attribute, the INT num_heads (extra: attributes added for the refusal checks)."""
    import onnx
    from onnx import TensorProto, helper
    H2 = 2 * num_heads if isinstance(num_heads, int) and num_heads > 0 else 48
    ins = [helper.make_tensor_value_info(n, TensorProto.FLOAT, ["B", "N", H2, 64])
           for n in ("q_bat", "k_bat", "v_bat")]
    out = helper.make_tensor_value_info("out", TensorProto.FLOAT, ["B", "N", H2 // 2, 64])
    node = helper.make_node("diff_attn_swa", ["q_bat", "k_bat", "v_bat"], ["out"],
                            domain="samel", num_heads=num_heads, **extra)
    model = helper.make_model(helper.make_graph([node], "attn", ins, [out]),
                              opset_imports=[helper.make_opsetid("", 17),
                                             helper.make_opsetid("samel", 1)])
    onnx.checker.check_model(model)
    node = model.graph.node[0]
    if not extra:
        assert [(a.name, a.type, a.i) for a in node.attribute] == \
            [("num_heads", onnx.AttributeProto.INT, num_heads)]
        assert (node.domain, node.op_type, len(node.input), len(node.output)) == \
            ("samel", "diff_attn_swa", 3, 1)
    return node


def _field(k, v):
    if isinstance(v, str):
        return PluginField(k, v.encode(), PluginFieldType.CHAR)
    if isinstance(v, np.ndarray):
        return PluginField(k, v, {np.dtype(np.int32): PluginFieldType.INT32,
                                  np.dtype(np.float32): PluginFieldType.FLOAT32,
                                  np.dtype(np.int64): PluginFieldType.INT64}[v.dtype])
    if isinstance(v, PluginField):
        return v
    raise TypeError(f"field {k}: {type(v)}")


class _SymSetter:
    def __init__(self):
        self.exprs = []

    @property
    def nbSymExprs(self):
        return len(self.exprs)

    @nbSymExprs.setter
    def nbSymExprs(self, n):
        self.exprs = [None] * n

    def __setitem__(self, i, e):
        self.exprs[i] = e


