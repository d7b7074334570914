#!/usr/bin/env sh
# CMake flags for compiling llama.cpp (through llama-cpp-python) on this machine.
#
# llama.cpp's default, GGML_NATIVE, compiles with -march=native, which trusts
# CPUID. Some virtual machines report instruction sets there that their kernel
# never enabled: on an Intel Xeon VM seen here, CPUID offers AMX, gcc's
# -march=native turns it on, and the first decode dies with "Illegal
# instruction". /proc/cpuinfo lists only what the kernel enabled, so on Linux
# x86 the instruction sets are chosen from it instead. Elsewhere (macOS, ARM)
# the native default stays.
if [ "$(uname -s)" != "Linux" ] || [ ! -r /proc/cpuinfo ]; then
    exit 0
fi
case "$(uname -m)" in x86_64|amd64) ;; *) exit 0 ;; esac
flags=$(grep -m1 '^flags' /proc/cpuinfo)
has() { case " $flags " in *" $1 "*) return 0 ;; *) return 1 ;; esac; }
args="-DGGML_NATIVE=OFF"
has avx && args="$args -DGGML_AVX=ON"
has avx2 && args="$args -DGGML_AVX2=ON"
has fma && args="$args -DGGML_FMA=ON"
has f16c && args="$args -DGGML_F16C=ON"
has avx_vnni && args="$args -DGGML_AVX_VNNI=ON"
if has avx512f && has avx512bw && has avx512vl && has avx512dq && has avx512cd; then
    args="$args -DGGML_AVX512=ON"
    has avx512_vnni && args="$args -DGGML_AVX512_VNNI=ON"
    has avx512_bf16 && args="$args -DGGML_AVX512_BF16=ON"
    has avx512vbmi && args="$args -DGGML_AVX512_VBMI=ON"
fi
echo "$args"
