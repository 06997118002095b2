#!/usr/bin/env bash
# Does what a new user does with a built tree: installs it into a fresh prefix,
# then builds the C example against the installed package twice, with
# find_package(mlajit) (tools/examples/consumer, which also builds the C++
# example through the cpp component) and with pkg-config, and runs every
# binary. Also checks the installed file list, the SONAME, that the library
# exports the C ABI only, the package version rules and the installed jitcache.
# Any failed step fails the test. Registered in tests/CMakeLists.txt (label cpu):
#
#   tests/install/install_test.sh SOURCE_DIR BUILD_DIR [C_COMPILER] [CXX_COMPILER]
set -euo pipefail

src="$1"
build="$2"
cc="${3:-cc}"
cxx="${4:-c++}"
work="$(mktemp -d "${TMPDIR:-/tmp}/mlajit-install-test.XXXXXX")"
trap 'rm -rf "$work"' EXIT
prefix="$work/prefix"
step() { printf '== %s\n' "$*"; }
fail() { printf 'FAIL: %s\n' "$*" >&2; exit 1; }

step "cmake --install $build --prefix $prefix"
cmake --install "$build" --prefix "$prefix" >"$work/install.log" || { cat "$work/install.log"; fail "install"; }

# GNUInstallDirs picks lib/ or lib/<multiarch>/; take whatever was configured.
so="$(find "$prefix" -name 'libmlajit.so' -print -quit)"
[ -n "$so" ] || fail "no libmlajit.so under $prefix"
libdir="$(dirname "$so")"
step "installed files (libdir ${libdir#"$prefix"/})"
for f in "$libdir"/libmlajit.so.[0-9]* include/mlajit/mlajit.h include/mlajit/mlajit.hpp bin/jitcache \
    "$libdir"/cmake/mlajit/mlajitConfig.cmake "$libdir"/cmake/mlajit/mlajitConfigVersion.cmake \
    "$libdir"/cmake/mlajit/mlajitTargets.cmake "$libdir"/pkgconfig/mlajit.pc; do
  case "$f" in /*) ;; *) f="$prefix/$f" ;; esac
  [ -e "$f" ] || fail "not installed: ${f#"$prefix"/}"
done
# Nothing internal: no static stages, no headers but the two public ones.
extra="$(cd "$prefix" && find . -name '*.a' -o -path './include/*' -type f \
    ! -name mlajit.h ! -name mlajit.hpp)"
[ -z "$extra" ] || fail "installed internal files: $extra"

soname="$(objdump -p "$so" | awk '$1 == "SONAME" {print $2}')"
[[ "$soname" =~ ^libmlajit\.so\.[0-9]+$ ]] || fail "SONAME '$soname', expected libmlajit.so.MAJOR"
exports="$(nm -D --defined-only "$so" | awk '{print $NF}')"
others="$(grep -v '^mlajit_' <<<"$exports" || true)"
[ -z "$others" ] || fail "exported besides mlajit_*: $(tr '\n' ' ' <<<"$others")"
step "SONAME $soname; exports $(wc -l <<<"$exports") symbols, all mlajit_*"

step "package version rules (SameMajorVersion)"
cat >"$work/version_check.cmake" <<EOF
foreach(want IN ITEMS 0.1 0 1.0)
  set(PACKAGE_FIND_VERSION \${want})
  string(REPLACE "." ";" parts "\${want}.0.0")
  list(GET parts 0 PACKAGE_FIND_VERSION_MAJOR)
  list(GET parts 1 PACKAGE_FIND_VERSION_MINOR)
  list(GET parts 2 PACKAGE_FIND_VERSION_PATCH)
  unset(PACKAGE_VERSION_COMPATIBLE)
  include("$libdir/cmake/mlajit/mlajitConfigVersion.cmake")
  message("find_package(mlajit \${want}) -> \${PACKAGE_VERSION} compatible=\${PACKAGE_VERSION_COMPATIBLE}")
endforeach()
EOF
versions="$(cmake -P "$work/version_check.cmake" 2>&1)"
echo "$versions"
version="$(awk '/-> /{print $4; exit}' <<<"$versions")"
major="${version%%.*}"
while read -r want compatible; do
  [ "${want%%.*}" = "$major" ] && expect=TRUE || expect=FALSE
  [ "$compatible" = "compatible=$expect" ] || fail "find_package(mlajit $want) against $version: $compatible"
done < <(awk '{sub(/\)$/, "", $2); print $2, $5}' <<<"$versions")

step "installed jitcache runs from its own RPATH"
env -u LD_LIBRARY_PATH "$prefix/bin/jitcache" --cache-dir "$work/cache" stats >/dev/null ||
  fail "installed jitcache stats"

step "a relocated jitcache finds its manifest beside it"
# An unknown --arch fails while checking the manifest, before any compile, and
# the error names the manifest it read.
moved="$work/moved-prefix"
cp -a "$prefix" "$moved"
out="$(env -u LD_LIBRARY_PATH "$moved/bin/jitcache" --cache-dir "$work/cache" warm --arch sm_0 2>&1 || true)"
grep -q "$moved/share/mlajit/manifests/deepseek_v3.jsonl" <<<"$out" ||
  fail "relocated jitcache warm did not read $moved/share/...: $out"

# Both example builds must load the installed library, not the build tree's.
run() {
  local bin="$1"
  # Not `ldd | grep -q`: under pipefail, grep quitting early can kill ldd (SIGPIPE).
  local libs
  libs="$(ldd "$bin")"
  [[ "$libs" == *"$libdir/libmlajit.so"* ]] || fail "$bin does not load $libdir/libmlajit.so: $libs"
  printf '   run %s\n' "${bin#"$work"/}"
  "$bin" >"$work/run.log" 2>&1 || { cat "$work/run.log"; fail "$bin exited non-zero"; }
  sed 's/^/   | /' "$work/run.log"
  grep -q '^cache stats: {' "$work/run.log" || fail "$bin printed no cache stats"
}

step "find_package(mlajit): tools/examples/consumer"
cmake -S "$src/tools/examples/consumer" -B "$work/consumer" -DCMAKE_PREFIX_PATH="$prefix" \
  -DCMAKE_BUILD_TYPE=Release -DCMAKE_C_COMPILER="$cc" -DCMAKE_CXX_COMPILER="$cxx" \
  >"$work/consumer.log" 2>&1 || { cat "$work/consumer.log"; fail "consumer configure"; }
cmake --build "$work/consumer" -j 2 >>"$work/consumer.log" 2>&1 ||
  { cat "$work/consumer.log"; fail "consumer build"; }
run "$work/consumer/decode_c"
run "$work/consumer/decode_cpp"

step "pkg-config: cc decode_c.c \$(pkg-config --cflags --libs mlajit)"
export PKG_CONFIG_PATH="$libdir/pkgconfig"
pc_version="$(pkg-config --modversion mlajit)"
[ "$pc_version" = "$version" ] || fail "pkg-config version $pc_version, package $version"
# shellcheck disable=SC2046  # pkg-config output is meant to be split
"$cc" -Wall -Wextra -Werror "$src/tools/examples/decode_c.c" $(pkg-config --cflags --libs mlajit) \
  -o "$work/decode_c_pc" || fail "cc with pkg-config flags"
LD_LIBRARY_PATH="$libdir" run "$work/decode_c_pc"

step "all install checks passed"
