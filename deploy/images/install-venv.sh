#!/bin/sh
# Makes /opt/apprafter inside an image build; both Dockerfiles run it (docs/images.md).
#
# The build context (staged by tools/images.sh, bind-mounted at /context, never copied into a layer) holds
# requirements.txt (the hash-pinned lock), wheels/ (this package) and bin/ (the pinned tools the image ships).
# pip trusts the CA bundle given as the build secret `ca`. The venv keeps no pip or setuptools, and its .pyc
# files are compiled ahead with unchecked hashes: the root filesystem is read-only at run time and never
# changes, so Python could not write them and need not check them.
# pip resolves nothing: the lock is installed with --no-deps (it is closed, extras included: checked by
# scripts/lock_image_requirements.py), so a release PyPI serves later cannot change or break an image.
# CONTEXT and VENV default to the image build's paths; tests/images/test_tools.py runs this script elsewhere.
set -eu
ctx=${CONTEXT:-/context}
venv=${VENV:-/opt/apprafter}
python3 -m venv "$venv"
export PIP_NO_CACHE_DIR=1 PIP_DISABLE_PIP_VERSION_CHECK=1 PIP_NO_COMPILE=1
if [ -r /run/secrets/ca.crt ]; then export PIP_CERT=/run/secrets/ca.crt; fi
"$venv/bin/pip" install --quiet --no-input --no-deps --require-hashes -r "$ctx/requirements.txt"
"$venv/bin/pip" install --quiet --no-input --no-deps "$ctx"/wheels/*.whl
"$venv/bin/pip" check
"$venv/bin/pip" uninstall --quiet --yes pip setuptools
"$venv/bin/python" -m compileall -q -j 1 --invalidation-mode unchecked-hash "$venv/lib"
for tool in "$ctx"/bin/*; do
  [ -e "$tool" ] || continue
  install -m 0755 "$tool" "$venv/bin/"
done
