#!/usr/bin/env sh
# nemori installed as a Python tool, the way a user would, on this machine, timed step by step:
#
#     sh scripts/tool_install.sh [pipx|uv] [RECORD]      (make tool-install)
#
# Into a throwaway folder: the installer itself (pipx or uv, from PyPI), then
# `pipx install .` (or `uv tool install .`), which compiles llama-cpp-python
# like any user's install does; then, with no `make` and nothing from the
# project's .venv, `nemori ingest examples/chat.jsonl` (which installs the
# default models into the tool's own environment when first needed) and
# `nemori ask`. Each step's wall time goes to RECORD (default
# docs/bench/tool-install-TOOL.txt). Needs the network to PyPI; takes about
# 10 minutes on 2 cores, most of it compiling llama.cpp.
set -eu
tool=${1:-pipx}
record=${2:-docs/bench/tool-install-$tool.txt}
repo=$(pwd)
work=$(mktemp -d "${TMPDIR:-/tmp}/nemori-tool-XXXXXX")
trap 'rm -rf "$work"' EXIT
export PIPX_HOME="$work/pipx" PIPX_BIN_DIR="$work/bin" UV_TOOL_DIR="$work/uv" UV_TOOL_BIN_DIR="$work/bin" UV_CACHE_DIR="$work/uv-cache"
export NEMORI_CACHE_DIR="$work/cache" XDG_DATA_HOME="$work/data" XDG_CONFIG_HOME="$work/config"
unset NEMORI_MODEL NEMORI_EMBEDDER NEMORI_DB NEMORI_MODELS_FILE VIRTUAL_ENV PYTHONPATH
# What `make install` does for the llama.cpp build (scripts/llama_cmake_args.sh says why); a user passes the same.
CMAKE_ARGS="$(sh "$repo/scripts/llama_cmake_args.sh")"
export CMAKE_ARGS
# The script runs without a terminal; on one, the first command that needs a model installs it by itself.
export NEMORI_INSTALL_MODELS=yes

now() { date +%s.%N; }
step() {
    name=$1
    shift
    start=$(now)
    "$@"
    seconds=$(awk "BEGIN {print $(now) - $start}")
    printf '%-44s %7.1f s\n' "$name" "$seconds" | tee -a "$work/times"
}

python3 -m venv "$work/installer"
step "install $tool itself" "$work/installer/bin/pip" install -q "$tool"
case "$tool" in
    pipx) step "pipx install ." "$work/installer/bin/pipx" install --quiet "$repo" ;;
    uv) step "uv tool install ." "$work/installer/bin/uv" tool install --quiet "$repo" ;;
    *) echo "tool_install.sh: the tool is pipx or uv, not $tool" >&2; exit 2 ;;
esac
nemori="$work/bin/nemori"
test -x "$nemori"
step "nemori --version" "$nemori" --version
step "nemori ingest (installs the models first)" "$nemori" ingest "$repo/examples/chat.jsonl" --db "$work/demo.db"
step "nemori ask" "$nemori" ask "When did Priya go to the climbing gym, and with whom?" --db "$work/demo.db"
step "nemori ask (a second question)" "$nemori" ask "What did Sam decide about the job offer?" --db "$work/demo.db"
{
    echo "# sh scripts/tool_install.sh $tool   ($(date -u +%Y-%m-%d), $(nproc) cores, commit $(git -C "$repo" rev-parse --short HEAD))"
    cat "$work/times"
    total=$(awk '{s += $(NF-1)} END {printf "%.1f", s}' "$work/times")
    echo "total                                        $total s"
} > "$repo/$record"
cat "$repo/$record"
