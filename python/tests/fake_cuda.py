"""A CPU stand-in for the few CUDA driver calls trt_gpu_check.py makes (DSWA_FAKE_CUDA=1), so
that its whole path -- the plugin layer's PTX and launch, the argument list in TensorRT's order,
stream capture, graph replay, poisoning, the comparison -- runs in CI without a GPU.

"Device" memory is host memory. A kernel launch is executed by reading the argument list by
position as the kernel's own parameter list says (the library's metadata: q, k, v, the 20 int32
extras by name, out) and the batch and head count from gridDim.z and gridDim.y, exactly the
things the CUDA kernel takes them from, and running the library's CPU backend on that problem.
What this proves: the launch TensorRT would make carries the right pointers, extras, grid and
block for the kernel; not that the PTX loads or computes (that is the GPU run's job).
"""
import ctypes
import re
import struct

import dswa._lib as L
from dswa.trt import _some_arch as some_arch

_c = ctypes


def _obj(ref):
    return ref._obj


class FakeDriver:
    def __init__(self):
        self.mem = {}           # address -> ctypes buffer
        self.modules, self.functions = {}, {}
        self.capturing = None
        self.launches = 0

    # ---- context, errors -----------------------------------------------------------------
    def cuInit(self, flags):
        return 0

    def cuDeviceGetCount(self, ref):
        _obj(ref).value = 1
        return 0

    def cuGetErrorName(self, r, ref):
        _obj(ref).value = b"FAKE_ERROR"
        return 0

    def cuDeviceGet(self, ref, i):
        _obj(ref).value = 0
        return 0

    def cuDevicePrimaryCtxRetain(self, ref, dev):
        _obj(ref).value = 1
        return 0

    def cuDevicePrimaryCtxRelease_v2(self, dev):
        return 0

    def cuCtxSetCurrent(self, ctx):
        return 0

    # ---- modules ---------------------------------------------------------------------------
    def cuModuleLoadData(self, ref, ptx):
        text = ptx.value.decode()
        if ".version" not in text or ".target sm_" not in text:
            return 218                                 # CUDA_ERROR_INVALID_PTX
        h = len(self.modules) + 1
        self.modules[h] = text
        _obj(ref).value = h
        return 0

    def cuModuleGetFunction(self, ref, mod, name):
        name = name.decode()
        if not re.search(r"\.entry\s+" + re.escape(name) + r"\s*\(", self.modules[mod.value]):
            return 500                                 # CUDA_ERROR_NOT_FOUND
        h = 1000 + len(self.functions)
        self.functions[h] = name
        _obj(ref).value = h
        return 0

    def cuModuleUnload(self, mod):
        self.modules.pop(mod.value)
        return 0

    # ---- memory ----------------------------------------------------------------------------
    def cuMemAlloc_v2(self, ref, size):
        buf = (_c.c_char * (size.value + 256))()
        addr = (_c.addressof(buf) + 255) & ~255        # 256-byte aligned, as cuMemAlloc's
        self.mem[addr] = buf
        _obj(ref).value = addr
        return 0

    def cuMemFree_v2(self, ptr):
        return 0 if self.mem.pop(ptr.value, None) is not None else 1

    def cuMemcpyHtoD_v2(self, dst, src, n):
        _c.memmove(dst.value, src, n.value)
        return 0

    def cuMemcpyDtoH_v2(self, dst, src, n):
        _c.memmove(dst, src.value, n.value)
        return 0

    def cuMemsetD8Async(self, ptr, byte, n, stream):
        return self._do(lambda: _c.memset(ptr.value, byte.value, n.value) and 0)

    # ---- streams, graphs -------------------------------------------------------------------
    def cuStreamCreate(self, ref, flags):
        _obj(ref).value = 7
        return 0

    def cuStreamDestroy_v2(self, s):
        return 0

    def cuStreamBeginCapture_v2(self, s, mode):
        self.capturing = []
        return 0

    def cuStreamEndCapture(self, s, ref):
        g, self.capturing = self.capturing, None
        h = id(g)
        self.graphs = getattr(self, "graphs", {})
        self.graphs[h] = g
        _obj(ref).value = h
        return 0

    def cuGraphInstantiateWithFlags(self, ref, graph, flags):
        _obj(ref).value = graph.value
        return 0

    def cuGraphLaunch(self, gexec, stream):
        for op in self.graphs[gexec.value]:
            r = op()
            if r:
                return r
        return 0

    def cuGraphExecDestroy(self, g):
        return 0

    def cuGraphDestroy(self, g):
        self.graphs.pop(g.value)
        return 0

    def cuStreamSynchronize(self, s):
        return 0

    def _do(self, op):
        if self.capturing is not None:
            self.capturing.append(lambda: op() or 0)
            return 0
        return op() or 0

    # ---- the kernel --------------------------------------------------------------------------
    def cuLaunchKernel(self, fn, gx, gy, gz, bx, by, bz, shared, stream, params, extra):
        name = self.functions[fn.value]
        # the kernel's parameter list, from the library's metadata for this entry
        dtype = L.F32 if "f32" in name else L.BF16 if name.endswith("bf16") else L.F16
        math = "fp32" if name.endswith("fp32") else "default"
        wide = "_wide_" in name
        k = L.aot_kernel(some_arch(), dtype, -1 if wide else 0, -1 if wide else 0, math)
        assert k.name == name, (k.name, name)
        args = {}
        for i, p in enumerate(k.params):
            t = _c.c_int32 if p.kind == "extra" else _c.c_uint64
            args[p.name] = _c.cast(params[i], _c.POINTER(t)).contents.value
        if (bx, by, bz) != k.block or shared != k.dynamic_shared_bytes:
            return 1                                   # CUDA_ERROR_INVALID_VALUE
        n = args["n"]
        if gx * 64 < n or (gx - 1) * 64 >= n:          # every 64-query tile, and no more
            return 1

        def run():
            self.launches += 1
            bits = lambda i: struct.unpack("<f", struct.pack("<i", i))[0]  # noqa: E731
            p = L.Problem(gz, n, gy, k.head_dim, args["wl"], args["wr"], bits(args["scale_bits"]),
                          bits(args["lambda_bits"]), dtype, L.MATH[math],
                          *[L.Layout(*[args[f"{t}_{s}"] for s in ("sb", "sn", "sp", "sh")], 1)
                            for t in ("q", "k", "v")],
                          L.Layout(args["o_sb"], args["o_sn"], 0, args["o_sh"], 1))
            return L.lib().dswa_forward_cpu(_c.byref(p), args["q"], args["k"], args["v"],
                                            args["out"])
        return self._do(run)
