#!/bin/sh
# Makes /opt/apprafter inside an image build; both Dockerfiles run it (docs/images.md).
#
# The build context (staged by tools/images.sh, bind-mounted at /context, never copied into a layer) holds
# requirements.txt (the hash-pinned lock), wheels/ (this package) and bin/ (the pinned tools the image ships).
# pip trusts the CA bundle given as the build secret `ca`. The venv keeps no pip or setuptools, and its .pyc
# files are compiled ahead with unchecked hashes: the root filesystem is read-only at run time and never
# changes, so Python could not write them and need not check them.
set -eu
ctx=/context
python3 -m venv /opt/apprafter
export PIP_CERT=/run/secrets/ca.crt PIP_NO_CACHE_DIR=1 PIP_DISABLE_PIP_VERSION_CHECK=1 PIP_NO_COMPILE=1
/opt/apprafter/bin/pip install --quiet --no-input --require-hashes -r "$ctx/requirements.txt"
/opt/apprafter/bin/pip install --quiet --no-input --no-deps "$ctx"/wheels/*.whl
/opt/apprafter/bin/pip check
/opt/apprafter/bin/pip uninstall --quiet --yes pip setuptools
/opt/apprafter/bin/python -m compileall -q -j 1 --invalidation-mode unchecked-hash /opt/apprafter/lib
for tool in "$ctx"/bin/*; do
  install -m 0755 "$tool" /opt/apprafter/bin/
done
