#!/bin/bash
# A conda-like Python prefix from Debian's python3: make_env.sh ENV PIP_WHEEL PACKAGE...
# Not a venv: Python finds a venv only by a pyvenv.cfg beside the path it was started by, so a link to a venv's
# python (tox-current-env's .tox/<env>/bin/python) starts the bare system Python. Like a conda env, ENV is a prefix
# Python recognises from its real binary: the binary copied in, the standard library linked in, and every
# site-packages path Debian's site.py / sysconfig use inside a prefix pointed at one directory.
set -euo pipefail
env=$1 pip_wheel=$2
shift 2
v=$(python3 -c 'import sys; print("%d.%d" % sys.version_info[:2])')
lib=$env/lib/python$v
python3 -m venv --copies --without-pip "$env"
rm -f "$env/pyvenv.cfg" "$env"/bin/activate* "$env"/bin/Activate.ps1
for f in /usr/lib/python"$v"/*; do
  case ${f##*/} in
    site-packages | dist-packages | EXTERNALLY-MANAGED) ;; # the env's own packages; pip may install into it
    *) ln -s "$f" "$lib/${f##*/}" ;;
  esac
done
ln -s site-packages "$lib/dist-packages"
mkdir -p "$env/local/lib/python$v"
ln -s "../../../lib/python$v/site-packages" "$env/local/lib/python$v/dist-packages"
ln -s ../bin "$env/local/bin"
(cd "$env/bin" && rm -f python python3 && ln -s "python$v" python3 && ln -s python3 python)
if [ "$("$env/bin/python" -c 'import sys; print(sys.prefix)')" != "$env" ]; then
  echo "make_env.sh: $env/bin/python does not see $env as its prefix" >&2
  exit 1
fi
if ! python3 -c 'import sys; sys.version_info >= (3, 10) or __import__("distutils.cmd")' 2>/dev/null; then
  echo "make_env.sh: pip on Python $v needs distutils: the base image lacks python3-distutils (rebuild it:" \
    "sandboxes build-base --suite <suite> --tag swe-rl/base:<suite> --force)" >&2
  exit 1
fi
"$env/bin/python" "/opt/swe-rl-wheels/$pip_wheel/pip" install -q --no-index --find-links /opt/swe-rl-wheels "$@"
