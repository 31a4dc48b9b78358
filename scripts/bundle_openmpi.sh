#!/usr/bin/env bash
# Usage: bash scripts/bundle_openmpi.sh DEST
# Copies this machine's Open MPI runtime (4.x: mpirun, orted, libmpi and the libraries it loads,
# its plugins, help files and configuration, and the PMIx it runs on) into DEST/openmpi and writes
# DEST/bin/mpirun, a launcher that points Open MPI and PMIx at those folders through their own
# environment variables (OPAL_PREFIX, OPAL_LIBDIR, OPAL_PKGLIBDIR, ..., PMIX_PREFIX, ...) and
# starts the bundled mpirun. `make gpu-dist` runs it, so that a GPU machine without Open MPI
# starts several ranks with build/gpu-dist/bin/mpirun. Those variables and LD_LIBRARY_PATH reach
# the ranks too, which then load the bundle's libmpi and plugins.
#
# The C library and the few libraries every Linux has (libz, libudev, libuuid, libatomic, libgcc_s,
# libstdc++) stay the GPU machine's: copies of them ahead on LD_LIBRARY_PATH could be older than
# what the machine's other libraries (CUDA's) need. Exits 1 naming what is missing.
set -euo pipefail
[ $# -eq 1 ] || { echo "usage: $0 DEST" >&2; exit 2; }
dest=$1
fail() { echo "bundle_openmpi: $*" >&2; exit 1; }
command -v ompi_info >/dev/null 2>&1 || fail "ompi_info not found: Open MPI (openmpi-bin) is not installed here"
info=$(ompi_info --parsable --path all)
path_of() { sed -n "s/^path:$1://p" <<<"$info" | head -n 1; }
bindir=$(path_of bindir) libdir=$(path_of libdir) pkglibdir=$(path_of pkglibdir)
pkgdatadir=$(path_of pkgdatadir) sysconfdir=$(path_of sysconfdir)
version=$(ompi_info --version 2>/dev/null | sed -n 's/^Open MPI v//p' | head -n 1)
for tool in orterun orted; do [ -x "$bindir/$tool" ] || fail "$bindir/$tool not found (Open MPI $version)"; done
[ -d "$pkglibdir" ] || fail "Open MPI's plugin folder $pkglibdir not found"

out=$dest/openmpi
rm -rf "$out"
mkdir -p "$out"/{bin,lib,etc,share}
cp "$bindir/orterun" "$bindir/orted" "$out/bin/"
cp -r "$pkglibdir" "$out/lib/"
pkglib_name=$(basename "$pkglibdir")
plugins=$out/lib/$pkglib_name
cp -r "$pkgdatadir" "$out/share/"
[ -d "$sysconfdir" ] && cp -r "$sysconfdir"/. "$out/etc/"

# PMIx: external (Debian's libpmix2) or Open MPI's internal one, in libopen-pal. An external PMIx
# keeps its plugins in <prefix>/lib/pmix and its help files in <prefix>/share/pmix.
pmix_lib=$(ldd "$plugins"/mca_pmix_*.so 2>/dev/null | awk '/libpmix\.so/ { print $3; exit }')
if [ -n "$pmix_lib" ]; then
  pmix_prefix=$(dirname "$(dirname "$(readlink -f "$pmix_lib")")")
  mkdir -p "$out/pmix/lib" "$out/pmix/share"
  [ -d "$pmix_prefix/lib/pmix" ] && cp -r "$pmix_prefix/lib/pmix" "$out/pmix/lib/"
  [ -d "$pmix_prefix/share" ] && cp -r "$pmix_prefix/share"/. "$out/pmix/share/"
fi

# Every shared library the launcher, the daemons, libmpi and the plugins load, but the system's own.
system_libs='^(libc|libm|libdl|libpthread|librt|libresolv|ld-linux-x86-64|libz|libudev|libuuid|libatomic|libgcc_s'
system_libs+='|libstdc\+\+)\.so'
objects=("$out/bin/orterun" "$out/bin/orted" "$plugins"/*.so)
[ -d "$out/pmix/lib/pmix" ] && objects+=("$out/pmix/lib/pmix"/*.so)
[ -e "$libdir/libmpi.so" ] || fail "libmpi.so not found in $libdir"
libmpi=$(readlink -f "$libdir/libmpi.so")
objects+=("$libmpi")
needed=$(ldd "${objects[@]}" 2>/dev/null)
unresolved=$(awk '/=> not found/ { print $1 }' <<<"$needed" | sort -u | tr '\n' ' ')
[ -z "$unresolved" ] || fail "libraries that Open MPI's own files need are missing here: $unresolved"
awk '$2 == "=>" && $3 ~ /^\// { print $1, $3 }' <<<"$needed" | sort -u |
  while read -r name path; do
    grep -Eq "$system_libs" <<<"$name" || cp -L "$path" "$out/lib/$name"
  done
cp -L "$libmpi" "$out/lib/$(objdump -p "$libmpi" | awk '/SONAME/ { print $2 }')"

cat >"$dest/bin/mpirun" <<EOF
#!/bin/sh
# Open MPI $version's mpirun from the bundle (scripts/bundle_openmpi.sh): Open MPI and PMIx find
# their libraries, plugins, help files and configuration in ../openmpi, through their own
# variables, which the ranks inherit.
here=\$(cd "\$(dirname "\$0")/../openmpi" && pwd)
export OPAL_PREFIX="\$here" OPAL_EXEC_PREFIX="\$here" OPAL_BINDIR="\$here/bin" OPAL_LIBDIR="\$here/lib"
export OPAL_PKGLIBDIR="\$here/lib/$pkglib_name" OPAL_DATAROOTDIR="\$here/share" OPAL_DATADIR="\$here/share"
export OPAL_PKGDATADIR="\$here/share/$(basename "$pkgdatadir")" OPAL_SYSCONFDIR="\$here/etc"
export PMIX_PREFIX="\$here/pmix" PMIX_EXEC_PREFIX="\$here/pmix" PMIX_LIBDIR="\$here/pmix/lib"
export PMIX_PKGLIBDIR="\$here/pmix/lib/pmix" PMIX_DATAROOTDIR="\$here/pmix/share" PMIX_DATADIR="\$here/pmix/share"
export PMIX_PKGDATADIR="\$here/pmix/share/pmix" PMIX_SYSCONFDIR="\$here/pmix/share"
# A distribution's pmix-mca-params.conf may name its plugin folder by absolute path; this wins.
export PMIX_MCA_mca_base_component_path="\$here/pmix/lib/pmix"
export PATH="\$here/bin:\$PATH" LD_LIBRARY_PATH="\$here/lib\${LD_LIBRARY_PATH:+:\$LD_LIBRARY_PATH}"
exec "\$here/bin/orterun" "\$@"
EOF
chmod +x "$dest/bin/mpirun"
echo "bundle_openmpi: Open MPI $version in $out ($(du -sh "$out" | cut -f1)), launcher $dest/bin/mpirun"
