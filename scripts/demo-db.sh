#!/usr/bin/env bash
# The demo's database, kept apart from scripts/demo.sh so that it can be
# tested (scripts/demo_test.go). Sourced for its functions, or run as
#   scripts/demo-db.sh url SERVER_URL DB     prints SERVER_URL pointing at DB
#   scripts/demo-db.sh prepare SERVER_URL DB drops and recreates DB, if the demo made it
#
# SERVER_URL is either form libpq takes: a URI
# (postgres://user:pw@host:port/db?sslmode=disable) or keyword/value
# ("host=h port=5432 user=postgres dbname=db password=..."). Its other
# parameters are kept.
set -euo pipefail

# The comment the demo puts on its database: only a database carrying it is
# ever dropped.
demo_marker="created by blockhaul make demo; dropped and recreated by every run"

# demo_url SERVER_URL DB prints SERVER_URL with its database replaced by DB.
demo_url() {
	local server=$1 db=$2
	case $server in
	postgres://* | postgresql://*)
		local scheme=${server%%://*} rest=${server#*://}
		local authority=${rest%%[/?]*}
		local after=${rest:${#authority}} query=""
		if [[ $after == *\?* ]]; then query="?${after#*\?}"; fi
		echo "$scheme://$authority/$db$query"
		;;
	*)
		# keyword/value: drop any dbname (dbname=x, dbname = x,
		# dbname='x y'), then name ours.
		local kv
		kv=$(sed -E "s/(^|[[:space:]])dbname[[:space:]]*=[[:space:]]*('([^'\\\\]|\\\\.)*'|[^[:space:]']+)//g" <<<"$server")
		kv=$(sed -E 's/^[[:space:]]+//; s/[[:space:]]+$//' <<<"$kv")
		echo "${kv:+$kv }dbname=$db"
		;;
	esac
}

# demo_where SERVER_URL says which server a URL reaches, without its
# credentials.
demo_where() {
	psql -X -q -tA "$1" -c "SELECT current_user || '@' || coalesce(host(inet_server_addr()), 'local socket') || ':' || current_setting('port')"
}

# demo_made_before SERVER_URL DB reports whether DB holds nothing but what
# a demo of before the marker loads: a cometbft schema, public empty.
demo_made_before() {
	local other
	other=$(psql -X -q -tA "$(demo_url "$1" "$2")" -c "SELECT count(*) FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
		WHERE n.nspname NOT IN ('cometbft', 'pg_catalog', 'information_schema', 'pg_toast') AND n.nspname NOT LIKE 'pg_temp%' AND n.nspname NOT LIKE 'pg_toast_temp%'") || return 1
	local has
	has=$(psql -X -q -tA "$(demo_url "$1" "$2")" -c "SELECT to_regclass('cometbft.blockhaul_checkpoints') IS NOT NULL") || return 1
	[[ $other == 0 && $has == t ]]
}

# demo_prepare SERVER_URL DB (re)creates DB for the demo: a DB the demo did
# not create is refused, never dropped.
demo_prepare() {
	local server=$1 db=$2
	if [[ ! $db =~ ^[a-z_][a-z0-9_]{0,62}$ ]]; then
		echo "demo: database name \"$db\" (DEMO_DB) must be lowercase letters, digits and _" >&2
		return 2
	fi
	local where
	where=$(demo_where "$server") || {
		echo "demo: cannot connect to the server of DATABASE_URL" >&2
		return 1
	}
	local comment exists
	exists=$(psql -X -q -tA "$server" -c "SELECT count(*) FROM pg_database WHERE datname = '$db'")
	if [[ $exists == 1 ]]; then
		comment=$(psql -X -q -tA "$server" -c "SELECT coalesce(shobj_description(oid, 'pg_database'), '') FROM pg_database WHERE datname = '$db'")
		if [[ $comment != "$demo_marker" ]] && ! demo_made_before "$server" "$db"; then
			echo "demo: database $db on $where exists and was not created by make demo: not dropping it (set DEMO_DB to another name, or drop it yourself)" >&2
			return 2
		fi
		echo "== dropping and recreating database $db on $where (made by an earlier make demo)"
		psql -X -q "$server" -c "DROP DATABASE $db WITH (FORCE)" >/dev/null
	else
		echo "== creating database $db on $where"
	fi
	psql -X -q "$server" -c "CREATE DATABASE $db" -c "COMMENT ON DATABASE $db IS '$demo_marker'" >/dev/null
	# The URL the demo uses must reach the new database.
	local dburl
	dburl=$(demo_url "$server" "$db")
	if [[ $(psql -X -q -tA "$dburl" -c "SELECT current_database()") != "$db" ]]; then
		echo "demo: the database URL built for $db does not reach it" >&2
		return 1
	fi
}

if [[ ${BASH_SOURCE[0]} == "$0" ]]; then
	case ${1:-} in
	url) demo_url "$2" "$3" ;;
	prepare) demo_prepare "$2" "$3" ;;
	*)
		echo "usage: $0 url|prepare SERVER_URL DB" >&2
		exit 2
		;;
	esac
fi
