#!/bin/sh
# What tools/device-check.sh needs on the lent GPU machine that its image lacks, fetched HERE (a Debian 12 amd64
# machine with network and with omnishard's build dependencies installed, as tools/setup.sh leaves it):
#   .debs/  the Debian packages `make` and the tests need (Open MPI, OpenBLAS, oneDNN, cJSON, PCRE2, libsndfile, make)
#           and the shared libraries they load, found by ldd on this machine's copies; unpacked there with dpkg -x
#           into a folder of the checkout (never onto /), found through CPATH / LIBRARY_PATH / LD_LIBRARY_PATH
#   .whl/   Python wheels the oracle tests import that the machine's image lacks (openai-whisper for the speech
#           oracle, more-itertools, its one missing dependency), installed there with pip --no-index --target
# Both folders are git-ignored; the device call names them in `carry` (bench/NOTES.md "Device check").
# usage: tools/device-debs.sh [--list]     (--list: print the package list and exit, download nothing)
set -eu
cd "$(dirname "$0")/.."
ARCH=x86_64-linux-gnu
L=/usr/lib/$ARCH

# the -dev packages (headers, the link-time .so names, the mpicc wrapper) and the tools
DEV="libopenmpi-dev openmpi-bin openmpi-common libopenblas-dev libopenblas-pthread-dev libdnnl-dev libcjson-dev
     libpcre2-dev libsndfile1-dev make"
# what they load at run time: the libraries omnishard links, Open MPI's launcher, daemon and plugins (a plugin
# missing a library prints warnings into every mpirun's stderr), PMIx's plugins
FILES="$L/openblas-pthread/libopenblas.so.0 $L/libdnnl.so.2 $L/libcjson.so.1 $L/libpcre2-8.so.0 $L/libsndfile.so.1
       $L/libmpi.so.40 /usr/bin/orterun /usr/bin/orted /usr/bin/opal_wrapper $L/openmpi/lib/openmpi3/*.so
       $L/pmix2/lib/pmix/*.so"
# on every image that has a C compiler (gcc and its runtime, the C library, compression, systemd's libraries):
# never carried, so the machine's newer copies stay in use (an older libstdc++ first on LD_LIBRARY_PATH would
# break its Python and PyTorch)
BASE="libc6 libgcc-s1 libstdc++6 zlib1g libgomp1 libudev1 libsystemd0 liblzma5 libzstd1 libcap2 libssl3 libcrypt1
      libselinux1 libbz2-1.0 libgcrypt20 libgpg-error0 liblz4-1 libtinfo6 libexpat1 libffi8 libatomic1 libuuid1"

libs=$(
    for f in $FILES; do
        [ -e "$f" ] || { echo "device-debs: $f is missing here: install omnishard's build dependencies first (tools/setup.sh)" >&2; exit 1; }
        echo "$f"
        ldd "$f" 2>/dev/null | awk '/=> \// {print $3}'
    done | while read -r f; do readlink -f "$f"; done | sort -u
)
# the packages that installed them, in one dpkg query (the real files: a name may be a link that the package's
# scripts made, e.g. an alternative; merged /usr: a package lists its file under /lib or /usr/lib, so both are asked)
# shellcheck disable=SC2046
owners=$(dpkg -S $(for f in $libs; do echo "$f"; case $f in /usr/lib/*) echo "${f#/usr}" ;; /lib/*) echo "/usr$f" ;; esac
                   done) 2>/dev/null || true)
for f in $libs; do
    echo "$owners" | grep -q "/$(basename "$f")\$" || { echo "device-debs: no package owns $f" >&2; exit 1; }
done
pkgs=$(echo "$owners" | cut -d: -f1 | tr ',' '\n' | tr -d ' ' | sort -u)
all=$(for p in $DEV $pkgs; do echo "$p"; done | sort -u | while read -r p; do
          case " $(echo $BASE) " in *" $p "*) ;; *) echo "$p" ;; esac
      done)
if [ "${1:-}" = "--list" ]; then
    echo "$all"
    exit 0
fi

rm -rf .debs.tmp && mkdir .debs.tmp
# shellcheck disable=SC2086
(cd .debs.tmp && apt-get download $(echo $all) 2>&1 | grep -v "^W: Download is performed unsandboxed" || true)
n=$(ls .debs.tmp/*.deb | wc -l)
[ "$n" -eq "$(echo "$all" | wc -l)" ] || { echo "device-debs: $n .deb files for $(echo "$all" | wc -l) packages" >&2; exit 1; }
rm -rf .debs && mv .debs.tmp .debs

PY=${PYTHON:-.venv/bin/python}
rm -rf .whl && mkdir .whl
# pure-Python wheels (py3-none-any): openai-whisper is published as a source archive, which pip wheel builds
"$PY" -m pip wheel -q --no-deps -w .whl openai-whisper==20250625 more-itertools==11.2.1

echo "device-debs: $n packages in .debs ($(du -sh .debs | cut -f1)), $(ls .whl | wc -l) wheels in .whl ($(du -sh .whl | cut -f1))"
echo "device-debs: name them in the device call: carry [\".debs\", \".whl\"] (bench/NOTES.md \"Device check\")"
