#!/usr/bin/env bash
# `pg-throwaway.sh start` creates a PostgreSQL cluster in a temporary directory on a free loopback port and prints
# shell assignments (FLAKENOTES_POSTGRES_URL, PG_STOP) for `eval`. `PG_STOP` stops it and deletes the directory.
set -euo pipefail
[ "${1:-}" = "start" ] || { echo "usage: pg-throwaway.sh start" >&2; exit 2; }
bin=$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -n 1)
[ -x "$bin/initdb" ] || { echo "pg-throwaway: PostgreSQL server binaries not found (apt-get install postgresql)" >&2; exit 1; }
dir=$(mktemp -d /tmp/flakenotes-pg.XXXXXX)
port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1]); s.close()')
run=()
if [ "$(id -u)" -eq 0 ]; then
  id postgres >/dev/null 2>&1 || useradd --system --no-create-home postgres
  chown postgres "$dir"
  run=(runuser -u postgres --)
fi
"${run[@]}" "$bin/initdb" -D "$dir/data" -U flakenotes --auth=trust -E UTF8 >"$dir/initdb.log" 2>&1 \
  || { cat "$dir/initdb.log" >&2; exit 1; }
"${run[@]}" "$bin/pg_ctl" -D "$dir/data" -l "$dir/server.log" -w -t 60 \
  -o "-c listen_addresses=127.0.0.1 -c port=$port -c unix_socket_directories=$dir -c max_connections=200 -c fsync=on" \
  start >/dev/null || { cat "$dir/server.log" >&2; exit 1; }
"${run[@]}" "$bin/createdb" -h 127.0.0.1 -p "$port" -U flakenotes flakenotes
echo "FLAKENOTES_POSTGRES_URL='postgres://flakenotes@127.0.0.1:$port/flakenotes?sslmode=disable'"
printf "PG_STOP='%s %s/pg_ctl -D %s/data -m fast stop >/dev/null 2>&1; rm -rf %s'\n" "${run[*]}" "$bin" "$dir" "$dir"
