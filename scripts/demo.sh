#!/usr/bin/env bash
# make demo: load synthetic CometBFT blocks into a fresh database and show
# what landed. Usage: scripts/demo.sh SERVER_URL LAST_HEIGHT
#
# The database is $DEMO_DB (default blockhaul_demo) on the server
# of SERVER_URL (a URI or a keyword/value string). The demo says which
# database it drops and recreates, and drops only one it created itself
# (scripts/demo-db.sh).
set -euo pipefail
server=$1
to=${2:-20000}
db=${DEMO_DB:-blockhaul_demo}
. "$(dirname "$0")/demo-db.sh"

demo_prepare "$server" "$db"
dburl=$(demo_url "$server" "$db")
rm -rf demo-data
mkdir -p demo-data

echo "== blockhaul run: synthetic CometBFT chain, heights 1-$to -> $db"
bin/blockhaul run --pg "$dburl" --staging demo-data/staging --from 1 --to "$to" --progress-interval 5s

echo
echo "== the same range again: a no-op"
bin/blockhaul run --pg "$dburl" --staging demo-data/staging --from 1 --to "$to" --log-level warn

echo
echo "== blockhaul status"
bin/blockhaul status --pg "$dburl" --staging demo-data/staging

echo
echo "== a few rows"
psql -q "$dburl" -P pager=off <<SQL
SELECT count(*) AS blocks, min(height), max(height) FROM cometbft.blocks;
SELECT (SELECT count(*) FROM cometbft.transactions) AS transactions, (SELECT count(*) FROM cometbft.events) AS events;
SELECT height, encode(hash, 'hex') AS hash, time, num_txs FROM cometbft.blocks ORDER BY height DESC LIMIT 3;
SELECT height, tx_index, encode(hash, 'hex') AS hash, gas_used, code FROM cometbft.transactions ORDER BY height DESC, tx_index LIMIT 3;
SELECT height, event_index, source, type, left(attributes::text, 80) AS attributes FROM cometbft.events ORDER BY height DESC, event_index LIMIT 5;
SQL
