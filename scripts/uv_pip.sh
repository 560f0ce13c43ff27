# Sourced by scripts/setup_venv.sh and scripts/check_extras.sh.
#
# uv_pip UV PYTHON ARGS...: `UV pip install --python PYTHON ARGS...` resolving from what pip is
# configured with: $UV_FLAGS holds scripts/uv_flags.py's lines (uv reads no pip configuration);
# its --cert goes to uv as SSL_CERT_FILE, and uv chooses among the indexes as pip does.
uv_pip() {
    local uv=$1 python=$2 flags=() cert=() flag
    shift 2
    while read -r flag; do
        case $flag in
            --cert=*) cert=(env "SSL_CERT_FILE=${SSL_CERT_FILE:-${flag#--cert=}}") ;;
            ?*) flags+=("$flag") ;;
        esac
    done <<<"${UV_FLAGS:-}"
    "${cert[@]}" "$uv" pip install --python "$python" --index-strategy unsafe-best-match \
        "${flags[@]}" "$@"
}
