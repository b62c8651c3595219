# Sourced by the scripts in this folder (after env.sh).

# require_gpu BIN OUT MESSAGE: writes `cnnbench info` (text and JSON) under
# OUT and prints its head; exits 2 when no GPU is usable.
require_gpu() {
    "$1" info > "$2/info.txt" 2>&1
    "$1" info --format json > "$2/info.json" 2>/dev/null
    if ! grep -q '"usable": true' "$2/info.json"; then
        cat "$2/info.txt"
        echo "$3" >&2
        exit 2
    fi
    head -n 12 "$2/info.txt"
}
