#!/bin/sh
# Build llama.cpp's OpenAI-compatible server (`llama-server`, with --parallel
# slots) from the llama.cpp source vendored in the llama-cpp-python release this
# environment runs, so the server and the in-process model are the same
# llama.cpp. No wheel on PyPI ships the server binary for Linux; this builds it
# (about 10 minutes on 2 cores) into .venv/bin/llama-server.
#
#   make llama-server        (or: sh scripts/build_llama_server.sh [VENV])
set -eu
VENV=${1:-.venv}
PY="$VENV/bin/python"
VERSION=$("$PY" -c 'import importlib.metadata as m; print(m.version("llama-cpp-python"))')
WORK=${TMPDIR:-/tmp}/nemori-llama-server-$VERSION
mkdir -p "$WORK"
if [ ! -d "$WORK/src" ]; then
    "$PY" -m pip download -q --no-deps --no-binary :all: "llama-cpp-python==$VERSION" -d "$WORK"
    mkdir -p "$WORK/src"
    tar xzf "$WORK"/llama_cpp_python-"$VERSION".tar.gz -C "$WORK/src" --strip-components=1
fi
# The same instruction sets as the in-process build (scripts/llama_cmake_args.sh says why).
ARGS=$(sh "$(dirname "$0")/llama_cmake_args.sh")
# shellcheck disable=SC2086
cmake -S "$WORK/src/vendor/llama.cpp" -B "$WORK/build" -DCMAKE_BUILD_TYPE=Release -DBUILD_SHARED_LIBS=OFF \
    -DLLAMA_CURL=OFF -DLLAMA_BUILD_SERVER=ON -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF $ARGS >"$WORK/cmake.log"
cmake --build "$WORK/build" --target llama-server -j "$(nproc)" >"$WORK/build.log"
cp "$WORK/build/bin/llama-server" "$VENV/bin/llama-server"
echo "$VENV/bin/llama-server (llama.cpp of llama-cpp-python $VERSION)"
