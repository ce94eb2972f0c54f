"""The ctypes mirror of dswa.h (dswa._lib) against the header itself: a C compiler prints
offsetof/sizeof of every mirrored field, which must equal ctypes'. Skipped without a compiler."""
import ctypes
import os
import shutil
import subprocess
import tempfile

from _util import skip
from dswa import _lib

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def c_layout(struct, fields):
    cc = shutil.which(os.environ.get("CC", "cc")) or shutil.which("gcc")
    hdr = os.path.join(ROOT, "include", "dswa.h")
    if not os.path.exists(hdr):
        skip(f"skipped: {hdr} not found (the tests run outside the repository)")
    if not cc:
        skip("skipped: no C compiler")
    src = "#include <stddef.h>\n#include <stdio.h>\n#include \"dswa.h\"\nint main(void) {\n"
    src += f'    printf("%zu\\n", sizeof({struct}));\n'
    for f in fields:
        src += f'    printf("%zu\\n", offsetof({struct}, {f}));\n'
    src += "    return 0;\n}\n"
    with tempfile.TemporaryDirectory() as d:
        with open(os.path.join(d, "t.c"), "w") as fh:
            fh.write(src)
        r = subprocess.run([cc, "-std=c11", "-I", os.path.dirname(hdr), "t.c", "-o", "t"],
                           cwd=d, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        assert r.returncode == 0, r.stdout
        out = subprocess.run([os.path.join(d, "t")], stdout=subprocess.PIPE, text=True).stdout
    return [int(x) for x in out.split()]


def check(cls, struct):
    names = [n for n, _ in cls._fields_]
    got = c_layout(struct, ["lambda" if n == "lambda_" else n for n in names])
    want = [ctypes.sizeof(cls)] + [getattr(cls, n).offset for n in names]
    assert got == want, f"{struct}: C (size, offsets) {got} != ctypes {want} for {names}"


def test_problem_layout():
    check(_lib.Layout, "dswa_layout")
    check(_lib.Problem, "dswa_problem")


def test_backward_layout():
    check(_lib.BackwardProblem, "dswa_backward_problem")
    L = _lib.lib()
    f = L.dswa_problem_default(2, 5, 3, 8, 2)
    bp = L.dswa_backward_problem_default(ctypes.byref(f))
    assert bp.dq.seq == f.q.seq and bp.dv.pair == f.v.pair and bp.dout.seq == f.out.seq
    # 6 floats per (b, i, h), then 8 bytes per 16 rows of each (b, h), at a 256-byte offset
    want = (2 * 5 * 3 * 24 + 255) // 256 * 256 + 2 * 3 * 1 * 8
    assert L.dswa_backward_workspace_bytes(ctypes.byref(bp)) == want
    assert L.dswa_backward_workspace_bytes(None) == 0


def test_aot_layout():
    check(_lib.AotParam, "dswa_aot_param")
    check(_lib.AotInfo, "dswa_aot_info")


def test_enum_mirrors():
    """The enum values dswa._lib mirrors are the library's own: names parsed by the library
    give the mirrored numbers, and the status codes name the statuses they stand for."""
    L = _lib.lib()
    for name, value in (("f32", _lib.F32), ("f16", _lib.F16), ("bf16", _lib.BF16)):
        out = ctypes.c_int(-1)
        assert L.dswa_dtype_parse(name.encode(), ctypes.byref(out)) == 0, name
        assert out.value == value, f"dtype {name}: library {out.value}, dswa._lib {value}"
        assert L.dswa_dtype_name(value).decode() == name
    for name, value in _lib.MATH.items():
        out = ctypes.c_int(-1)
        assert L.dswa_math_parse(name.encode(), ctypes.byref(out)) == 0, name
        assert out.value == value, f"math {name}: library {out.value}, dswa._lib {value}"
    for code, word in ((_lib.INVALID_ARGUMENT, "invalid"), (_lib.UNSUPPORTED, "unsupported"),
                       (_lib.MISALIGNED, "align")):
        assert word in L.dswa_status_string(code).decode().lower(), code


def test_samel_layout():
    """The fused block's structs, its backward's included."""
    check(_lib.SamelLayout, "dswa_samel_layout")
    check(_lib.SamelNorm, "dswa_samel_norm")
    check(_lib.SamelProblem, "dswa_samel_problem")
    check(_lib.SamelBackwardProblem, "dswa_samel_backward_problem")
    check(_lib.SamelNormGrad, "dswa_samel_norm_grad")
    check(_lib.SamelNormGrads, "dswa_samel_norm_grads")
    L = _lib.lib()
    f = L.dswa_samel_problem_default(2, 5, 3)
    bp = L.dswa_samel_backward_problem_default(ctypes.byref(f))
    assert (bp.fwd.rot_dims, bp.fwd.heads) == (32, 3)
    assert bp.dqkv.chunk == f.qkv.chunk == 3 * 64 and bp.dout.seq == f.out.seq == 3 * 64


def test_missing_symbol():
    """A function the package binds but an older library lacks raises when called, naming
    it; the rest of the library stays usable."""
    f = _lib._missing("/x/libdswa.so", "dswa_new_thing")
    try:
        f(1, 2)
    except _lib.LibraryNotFound as e:
        assert "/x/libdswa.so has no dswa_new_thing" in str(e)
    else:
        raise AssertionError("no LibraryNotFound raised")
