#!/bin/sh
# `make install` into a temporary prefix, then what a C user does with it: a program built with
# `pkg-config --cflags --libs dswa` (run without LD_LIBRARY_PATH: the rpath of dswa.pc), one
# linked statically through dswa.pc's static_libs, and a CMake project using find_package(dswa)
# with dswa::dswa and dswa::dswa_static; each runs tests/install/consumer.c, which checks
# dswa_forward_cpu against a direct computation. Then `make uninstall` must leave no file, and a
# DESTDIR install must write only under DESTDIR, and its CMake package work from there. Exit 77
# (skipped) without pkg-config or cmake.
# Run by `make test` (tests/run.sh) with BUILD set; the make variables of the caller (GPU_ARCH=...)
# reach the inner make through MAKEFLAGS, so it installs that build without rebuilding it.
set -eu
cd "$(dirname "$0")/../.."
for tool in pkg-config cmake; do
    command -v $tool >/dev/null 2>&1 || { echo "skipped: $tool not found (apt-get install $tool)"; exit 77; }
done
BUILD=${BUILD:-build}
CC=${CC:-cc}
# the caller's jobserver is not ours (this script is not a recursive make rule)
MAKEFLAGS=$(printf '%s' "${MAKEFLAGS:-}" | sed -e 's/--jobserver-[a-z]*=[^ ]*//g')
export MAKEFLAGS
tmp=$(mktemp -d "${TMPDIR:-/tmp}/dswa-install.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
fail() { echo "FAILED: $*"; exit 1; }
step() { echo "== $*"; }

major=$(sed -n 's/.*define DSWA_VERSION_MAJOR  *\([0-9]*\).*/\1/p' include/dswa.h)
version=$(sed -n 's/.*define DSWA_VERSION_STRING  *"\(.*\)".*/\1/p' include/dswa.h)
prefix=$tmp/prefix
expected="bin/dswa
include/dswa.h
lib/cmake/dswa/dswaConfig.cmake
lib/cmake/dswa/dswaConfigVersion.cmake
lib/libdswa.a
lib/libdswa.so
lib/libdswa.so.$major
lib/libdswa.so.$version
lib/pkgconfig/dswa.pc"
files_under() { (cd "$1" && find . \( -type f -o -type l \) | sed 's|^\./||' | LC_ALL=C sort); }

step "make install PREFIX=$prefix"
make -s --no-print-directory install BUILD="$BUILD" PREFIX="$prefix" > "$tmp/install.log" 2>&1 ||
    { cat "$tmp/install.log"; fail "make install"; }
got=$(files_under "$prefix")
[ "$got" = "$expected" ] || fail "installed files:
$got
expected:
$expected"
[ "$(readlink "$prefix/lib/libdswa.so")" = "libdswa.so.$major" ] || fail "lib/libdswa.so -> $(readlink "$prefix/lib/libdswa.so")"
[ "$(readlink "$prefix/lib/libdswa.so.$major")" = "libdswa.so.$version" ] || fail "lib/libdswa.so.$major link"
soname=$(readelf -d "$prefix/lib/libdswa.so.$version" | sed -n 's/.*(SONAME).*\[\(.*\)\].*/\1/p')
[ "$soname" = "libdswa.so.$major" ] || fail "SONAME '$soname', expected libdswa.so.$major"
"$prefix/bin/dswa" help > /dev/null || fail "installed bin/dswa help"
echo "installed $(echo "$expected" | wc -l) files; SONAME $soname"

step "pkg-config"
export PKG_CONFIG_PATH="$prefix/lib/pkgconfig"
[ "$(pkg-config --modversion dswa)" = "$version" ] || fail "pkg-config --modversion dswa: $(pkg-config --modversion dswa)"
cflags="-std=c11 -O2 -Wall -Wextra -Werror"
# shellcheck disable=SC2046,SC2086
$CC $cflags tests/install/consumer.c $(pkg-config --cflags --libs dswa) -lm -o "$tmp/consumer_pc" ||
    fail "build with pkg-config --cflags --libs dswa"
readelf -d "$tmp/consumer_pc" | grep -q "NEEDED.*\[libdswa.so.$major\]" || fail "consumer_pc does not need libdswa.so.$major"
env -u LD_LIBRARY_PATH "$tmp/consumer_pc" || fail "consumer built with pkg-config (shared, rpath)"
# shellcheck disable=SC2046,SC2086
$CC $cflags tests/install/consumer.c $(pkg-config --cflags dswa) "$prefix/lib/libdswa.a" \
    $(pkg-config --variable=static_libs dswa) -o "$tmp/consumer_pc_static" ||
    fail "static build with pkg-config --variable=static_libs dswa"
! readelf -d "$tmp/consumer_pc_static" | grep -q 'NEEDED.*libdswa' || fail "consumer_pc_static needs libdswa.so"
"$tmp/consumer_pc_static" || fail "consumer built with libdswa.a"

step "cmake find_package(dswa)"
cmake -S tests/install/cmake -B "$tmp/cmake-build" -DCMAKE_PREFIX_PATH="$prefix" -DCMAKE_C_COMPILER="$CC" \
    -DCMAKE_C_FLAGS="$cflags" > "$tmp/cmake.log" 2>&1 || { cat "$tmp/cmake.log"; fail "cmake configure"; }
cmake --build "$tmp/cmake-build" > "$tmp/cmake-build.log" 2>&1 || { cat "$tmp/cmake-build.log"; fail "cmake build"; }
! grep -i 'warning' "$tmp/cmake.log" "$tmp/cmake-build.log" || fail "cmake warnings"
readelf -d "$tmp/cmake-build/consumer_shared" | grep -q "NEEDED.*\[libdswa.so.$major\]" ||
    fail "consumer_shared does not need libdswa.so.$major"
env -u LD_LIBRARY_PATH "$tmp/cmake-build/consumer_shared" || fail "CMake consumer (dswa::dswa)"
"$tmp/cmake-build/consumer_static" || fail "CMake consumer (dswa::dswa_static)"
# a version this install cannot satisfy is refused
printf 'cmake_minimum_required(VERSION 3.16)\nproject(v C)\nfind_package(dswa %s REQUIRED CONFIG)\n' \
    "$((major + 1)).0" > "$tmp/CMakeLists.txt"
! cmake -S "$tmp" -B "$tmp/cmake-v" -DCMAKE_PREFIX_PATH="$prefix" > "$tmp/cmake-v.log" 2>&1 ||
    fail "find_package(dswa $((major + 1)).0) accepted version $version"

step "make uninstall"
make -s --no-print-directory uninstall BUILD="$BUILD" PREFIX="$prefix" > "$tmp/uninstall.log" 2>&1 ||
    { cat "$tmp/uninstall.log"; fail "make uninstall"; }
left=$(files_under "$prefix")
[ -z "$left" ] || fail "left after uninstall: $left"
[ ! -e "$prefix/lib/cmake/dswa" ] || fail "lib/cmake/dswa left after uninstall"
echo "nothing left"

step "DESTDIR"
make -s --no-print-directory install BUILD="$BUILD" PREFIX=/opt/dswa DESTDIR="$tmp/stage" > "$tmp/install2.log" 2>&1 ||
    { cat "$tmp/install2.log"; fail "make install DESTDIR"; }
[ "$(files_under "$tmp/stage/opt/dswa")" = "$expected" ] || fail "DESTDIR install: $(files_under "$tmp/stage")"
grep -q '^prefix=/opt/dswa$' "$tmp/stage/opt/dswa/lib/pkgconfig/dswa.pc" || fail "dswa.pc prefix under DESTDIR"
# the CMake package finds its files from where it lies: the staged tree works where it is
if ! { cmake -S tests/install/cmake -B "$tmp/cmake-stage" -DCMAKE_PREFIX_PATH="$tmp/stage/opt/dswa" \
           -DCMAKE_C_COMPILER="$CC" -DCMAKE_C_FLAGS="$cflags" && cmake --build "$tmp/cmake-stage"; } \
       > "$tmp/cmake-stage.log" 2>&1; then
    cat "$tmp/cmake-stage.log"; fail "CMake consumer of the tree staged under DESTDIR"
fi
"$tmp/cmake-stage/consumer_shared" > /dev/null || fail "CMake consumer of the staged tree"
make -s --no-print-directory uninstall BUILD="$BUILD" PREFIX=/opt/dswa DESTDIR="$tmp/stage" > /dev/null 2>&1
[ -z "$(files_under "$tmp/stage")" ] || fail "left after DESTDIR uninstall: $(files_under "$tmp/stage")"
echo "install test passed"
