#!/usr/bin/env bash
# Makes (once) a virtual environment over Debian's Python and its torch, with
# Hugging Face transformers 4.36.2 (the last release that runs on torch 1.13),
# then runs the rest of the command line with that environment's programs:
#
#   tools/hf_venv.sh build/hf-venv python test/e2e/hf_families.py --ppc build/bin/ppc
#
# The system Python is not touched: pip installs into the venv only, with numpy
# pinned to Debian's version (transformers would otherwise pull numpy 2, which
# Debian's torch was not built against).
set -euo pipefail
venv="$1"
shift
if ! "$venv/bin/python" -c "import transformers, torch" 2>/dev/null; then
  echo "hf_venv: installing transformers 4.36.2 into $venv" >&2
  /usr/bin/python3 -m venv --system-site-packages "$venv"
  numpy_version="$(/usr/bin/python3 -c 'import numpy; print(numpy.__version__)')"
  "$venv/bin/pip" install -q --disable-pip-version-check \
    "transformers==4.36.2" "numpy==$numpy_version"
fi
program="$1"
shift
exec "$venv/bin/$program" "$@"
