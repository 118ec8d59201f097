#!/usr/bin/env bash
# Create a separate virtual environment in which SGLang's own argument parser runs, so that
# specgrid can check its generated server command lines against the real `ServerArgs` on a
# machine without a GPU (CI included). The orchestrator's venv never needs SGLang.
#
# Usage: scripts/validate_sglang_venv.sh VENV_DIR [SGLANG_VERSION]
#   VENV_DIR        where to create the venv (e.g. .venv-sglang, git-ignored)
#   SGLANG_VERSION  default 0.5.23
#
# Env:
#   PYTHON          interpreter to create the venv with (default python3.11, else python3)
#
# Then: SPECGRID_SGLANG_PYTHON=VENV_DIR/bin/python pytest tests/engines/sglang
#
# What gets installed: sglang itself with --no-deps (its full dependency set pulls CUDA
# kernels and gigabytes), plus only what `from sglang.srt.server_args import ServerArgs` and
# `ServerArgs.from_cli_args` import on a CPU machine. torch is the CPU build (pinned to the
# wheel that lies in the machines' local wheel folder); a CPU torch does not bring triton,
# which SGLang's utils import, so triton is installed separately.
# Re-running on an existing venv with the same version is a fast no-op.
set -euo pipefail

VENV_DIR=${1:?usage: $0 VENV_DIR [SGLANG_VERSION]}
SGLANG_VERSION=${2:-0.5.23}
PY=${PYTHON:-$(command -v python3.11 || command -v python3)}

start=$(date +%s)
if [[ -x "$VENV_DIR/bin/python" ]] && "$VENV_DIR/bin/python" - "$SGLANG_VERSION" <<'EOF'
import sys
from importlib.metadata import version
sys.exit(0 if version("sglang") == sys.argv[1] else 1)
EOF
then
    echo "validate_sglang_venv: $VENV_DIR already has sglang $SGLANG_VERSION"
else
    "$PY" -m venv "$VENV_DIR"
    PIP=("$VENV_DIR/bin/python" -m pip install --quiet --disable-pip-version-check)
    "${PIP[@]}" --no-deps "sglang==$SGLANG_VERSION"
    "${PIP[@]}" \
        "torch==2.13.0" triton \
        numpy msgspec orjson psutil pybase64 requests packaging pillow starlette pydantic \
        pyzmq tqdm ipython aiohttp huggingface_hub
fi

# Prove the parser works: import, parse a minimal command line, build ServerArgs.
"$VENV_DIR/bin/python" - <<'EOF'
import argparse
import time

t0 = time.monotonic()
import sglang
from sglang.srt.server_args import ServerArgs

p = argparse.ArgumentParser()
ServerArgs.add_cli_args(p)
ns = p.parse_args(["--model-path", "dummy/model", "--tp-size", "8"])
ServerArgs.from_cli_args(ns)
print(f"validate_sglang_venv: sglang {sglang.__version__} parser OK "
      f"(import+parse {time.monotonic() - t0:.1f}s)")
EOF
echo "validate_sglang_venv: ready in $(( $(date +%s) - start ))s: $VENV_DIR/bin/python"
