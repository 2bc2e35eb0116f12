# Sourced, not run: what the measurements of clients against one `qbench-server` on loopback
# share. Makes $tmp, a directory removed at exit with the server, whatever ends the script
# (a script with more to undo defines `also_cleanup` before sourcing this), and defines
# `start_server BIN CPUS THREADS`, which starts BIN on CPUS with a certificate in
# $tmp/cert.pem and sets $server (its pid) and $addr (where it listens).
tmp=$(mktemp -d)
server=
cleanup() {
  if declare -F also_cleanup >/dev/null; then also_cleanup; fi
  if [ -n "$server" ]; then
    kill "$server" 2>/dev/null || true
    wait "$server" 2>/dev/null || true
  fi
  rm -rf "$tmp"
}
trap cleanup EXIT
# A signal ends bash without the EXIT trap unless it is trapped too.
trap 'exit 130' INT
trap 'exit 143' TERM
trap 'exit 129' HUP

start_server() {
  taskset -c "$2" "$1" --listen 127.0.0.1:0 --threads "$3" --cert-out "$tmp/cert.pem" \
    2>"$tmp/server.log" &
  server=$!
  addr=
  for _ in $(seq 50); do
    addr=$(grep -oE '127\.0\.0\.1:[0-9]+' "$tmp/server.log" | head -1 || true)
    [ -n "$addr" ] && return 0
    sleep 0.1
  done
  echo "$(basename "$0"): the server did not start: $(tail -1 "$tmp/server.log")" >&2
  exit 1
}
