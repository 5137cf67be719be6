# What the scripts that run a server of their own share; sourced (POSIX sh), after STENO (or
# what they run instead) and OUT are set.

# steno_serve NAME SECONDS ARG...: builds $STENO if it is missing, starts `$STENO serve` on
# 127.0.0.1 at a port the kernel picks, with ARG... (start_server).
steno_serve() {
    [ -x "$STENO" ] || swift build --product steno
    name=$1
    seconds=$2
    shift 2
    start_server "$name" "$seconds" "$STENO" serve --host 127.0.0.1 --port 0 "$@"
}

# start_server NAME SECONDS PROGRAM ARG...: starts PROGRAM ARG..., a server that announces
# `listening on http://127.0.0.1:PORT` first, with its output in $OUT/server.out and
# $OUT/server.err, stops it when the script ends, and waits up to SECONDS for the port in its
# first line. Sets SERVER (its pid) and PORT; exits 2, saying NAME, if it ends or says no port.
start_server() {
    name=$1
    tries=$(($2 * 10))
    shift 2
    mkdir -p "$OUT"
    "$@" >"$OUT/server.out" 2>"$OUT/server.err" &
    SERVER=$!
    trap 'kill $SERVER 2>/dev/null || true' EXIT INT TERM
    PORT=
    for _ in $(seq 1 "$tries"); do
        PORT=$(sed -n 's/.*listening on http:\/\/127\.0\.0\.1:\([0-9]*\).*/\1/p' "$OUT/server.out" | head -n 1)
        [ -n "$PORT" ] && break
        kill -0 $SERVER 2>/dev/null || { cat "$OUT/server.err" >&2; exit 2; }
        sleep 0.1
    done
    [ -n "$PORT" ] || { echo "$name: the server did not start" >&2; exit 2; }
}
