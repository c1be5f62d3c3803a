# Shared by the peers' installers (install-*.sh), which source it:
#
#   source "$(dirname "${BASH_SOURCE[0]}")/venv-lib.sh"
#   peer_venv NAME REQUIREMENTS DEFAULT_VENV   # sets $name, $req, $venv, $py; creates the venv
#   pin PACKAGE                                # the version REQUIREMENTS pins
#   install_torch [CONSTRAINTS]                # torch 2.13.0 from the local CPU wheel only
#   apt_require INSTALLER PACKAGE...           # Debian packages, with apt-get only when some are missing
#   finish_install WHAT CONSTRAINTS PIP_ARGS... # the installer's last step (below)
#
# Env overrides: PYTHON (interpreter for the venv; default pyenv 3.11.7, else
# python3.11), TORCH_WHEEL_DIR (folder holding a torch 2.13.0 CPU wheel;
# default /opt/wheels), and each installer's own *_VENV.
set -euo pipefail

peers="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
repo="$(cd "$peers/../.." && pwd)"
wheels="${TORCH_WHEEL_DIR:-/opt/wheels}"
if [[ -z "${PYTHON:-}" ]]; then
    if [[ -x /root/.pyenv/versions/3.11.7/bin/python3.11 ]]; then
        PYTHON=/root/.pyenv/versions/3.11.7/bin/python3.11
    else
        PYTHON="$(command -v python3.11)"
    fi
fi

peer_venv() {
    name="$1"
    req="$2"
    venv="$3"
    if [[ ! -x "$venv/bin/python" ]]; then
        "$PYTHON" -m venv "$venv"
    fi
    py="$venv/bin/python"
}

pin() { sed -n "s/^$1==\([^[:space:]]*\).*/\1/p" "$req"; }

# torch first, from the local CPU wheel file only: pip never resolves torch (or
# its CUDA dependencies) against PyPI.  Its pure-Python dependencies come from
# PyPI, constrained by $1 (default: the requirements file).
install_torch() {
    local constraints="${1:-$req}"
    if "$py" -c 'import torch, sys; sys.exit(torch.__version__.split("+")[0] != "2.13.0")' 2>/dev/null; then
        return
    fi
    local wheel
    wheel="$(ls "$wheels"/torch-2.13.0*.whl 2>/dev/null | head -n 1 || true)"
    if [[ -z "$wheel" ]]; then
        echo "install-$name: no torch-2.13.0 wheel in $wheels (set TORCH_WHEEL_DIR)." >&2
        echo "install-$name: install a CPU-only torch 2.13.0 into $venv yourself, then re-run." >&2
        exit 1
    fi
    "$py" -m pip install "$wheel" -c "$constraints"
}

# Debian packages a peer needs outside its venv (build headers, shared
# libraries), installed with apt-get only when some are missing.
apt_require() {
    local who="$1" p sudo_cmd=""
    shift
    local missing=()
    for p in "$@"; do
        dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
    done
    ((${#missing[@]})) || return 0
    echo "install-$who: apt-get install ${missing[*]}"
    [[ $(id -u) -ne 0 ]] && sudo_cmd="sudo"
    $sudo_cmd apt-get update -qq
    DEBIAN_FRONTEND=noninteractive $sudo_cmd apt-get install -y -qq --no-install-recommends "${missing[@]}"
}

# Every installer's last step, after defining its own `check` function: exit
# at once when `check` passes (the venv is complete); else torch
# (install_torch CONSTRAINTS), then `pip install PIP_ARGS...`, then `check`
# again, which must pass ("install-NAME: WHAT check failed" otherwise).
finish_install() {
    local what="$1" constraints="$2"
    shift 2
    if check; then
        echo "install-$name: $venv already complete"
        exit 0
    fi
    install_torch "$constraints"
    "$py" -m pip install "$@"
    check || { echo "install-$name: $what check failed" >&2; exit 1; }
    echo "install-$name: ok ($venv)"
}
