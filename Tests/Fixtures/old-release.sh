# Sourced by the make-fixtures.sh scripts that drive an older release's binaries: NOTESYNCD_BIN and NOTES_BIN name
# that release's `notesyncd` and `notes`. Starts the daemon in a temporary directory ($work, removed at exit with
# every process in $children) on a free port, sign-up open through the environment (open by default before issue 18,
# closed since), and defines $pid (the daemon), $url, `n DEVICE ARGS...` (`notes` with DEVICE's own home under $work)
# and `pw` (the password, for --password-stdin).
work="$(mktemp -d)"
children=()
trap 'kill "${children[@]}" 2>/dev/null || true; rm -rf "$work"' EXIT
NOTESYNCD_SIGN_UP=open "$NOTESYNCD_BIN" --data-dir "$work/data" --port 0 >"$work/daemon.out" 2>"$work/daemon.err" &
pid=$!
children+=("$pid")
for _ in $(seq 100); do grep -q listening "$work/daemon.out" && break; sleep 0.1; done
url="$(sed -n 's/.*listening on //p' "$work/daemon.out")"
n() { local home="$work/$1"; shift; NOTES_HOME="$home" "$NOTES_BIN" "$@"; }
pw() { echo "correct horse battery"; }
