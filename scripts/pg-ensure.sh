#!/usr/bin/env bash
# Prints the URL of a reachable PostgreSQL for blockhaul's tests and demo:
# $DATABASE_URL if set and reachable, else the local server on 127.0.0.1:5432,
# else a throwaway cluster started from the PostgreSQL binaries on this
# machine (run as the postgres OS user when invoked as root).
set -euo pipefail

log() { echo "pg-ensure: $*" >&2; }

reachable() { pg_isready -q -d "$1" -t 3 >/dev/null 2>&1; }

if [[ -n "${DATABASE_URL:-}" ]]; then
	if reachable "$DATABASE_URL"; then echo "$DATABASE_URL"; exit 0; fi
	log "\$DATABASE_URL is set but not reachable; looking for a local server"
fi

local_url="postgres://postgres@127.0.0.1:5432/postgres?sslmode=disable"
# BLOCKHAUL_PG_THROWAWAY=1 skips the local server (to exercise the throwaway path).
if [[ -n "${BLOCKHAUL_PG_THROWAWAY:-}" ]]; then local_url="postgres://postgres@127.0.0.1:1/none"; fi
if reachable "$local_url"; then echo "$local_url"; exit 0; fi

# The machine's own cluster, if it has one that is merely stopped.
if [[ -z "${BLOCKHAUL_PG_THROWAWAY:-}" ]] && command -v pg_lsclusters >/dev/null 2>&1; then
	while read -r ver name port status _; do
		[[ "$port" == 5432 && "$status" != online ]] || continue
		log "starting PostgreSQL cluster $ver/$name"
		pg_ctlcluster --skip-systemctl-redirect "$ver" "$name" start >&2 || true
	done < <(pg_lsclusters -h 2>/dev/null || true)
	for _ in $(seq 1 30); do
		if reachable "$local_url"; then echo "$local_url"; exit 0; fi
		sleep 0.5
	done
fi

# A throwaway cluster of our own.
bindir=$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -1 || true)
if [[ -z "$bindir" ]]; then
	bindir=$(dirname "$(command -v initdb 2>/dev/null || echo /nonexistent/initdb)")
fi
if [[ ! -x "$bindir/initdb" ]]; then
	log "no PostgreSQL reachable and no PostgreSQL binaries (initdb) found; install postgresql or set DATABASE_URL"
	exit 1
fi
port=${BLOCKHAUL_PG_PORT:-54329}
dir=${BLOCKHAUL_PG_DIR:-${TMPDIR:-/tmp}/blockhaul-pg}
url="postgres://postgres@127.0.0.1:$port/postgres?sslmode=disable"
if reachable "$url"; then echo "$url"; exit 0; fi

as_pg=()
if [[ $(id -u) == 0 ]]; then as_pg=(runuser -u postgres --); fi
mkdir -p "$dir"
if [[ $(id -u) == 0 ]]; then chown postgres "$dir"; fi
if [[ ! -f "$dir/PG_VERSION" ]]; then
	log "initialising a throwaway cluster in $dir"
	"${as_pg[@]}" "$bindir/initdb" -D "$dir" -U postgres -A trust --no-sync >&2
fi
log "starting the throwaway cluster on 127.0.0.1:$port"
"${as_pg[@]}" "$bindir/pg_ctl" -D "$dir" -l "$dir/server.log" -w \
	-o "-p $port -k $dir -c listen_addresses=127.0.0.1 -c fsync=off -c max_connections=200" start >&2
echo "$url"
