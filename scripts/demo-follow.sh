#!/usr/bin/env bash
# make demo-follow: follow a synthetic CometBFT chain that grows in real
# time and reorganises now and then, into the demo database, with the
# progress display. Usage: scripts/demo-follow.sh SERVER_URL
#
# The chain starts at DEMO_FOLLOW_START blocks (default 2000, caught up at
# once), then grows one block each DEMO_BLOCK_TIME (200ms); every
# DEMO_REORG_EVERY blocks (25) a reorg replaces the DEMO_REORG_DEPTH (3)
# blocks below the tip, which follow rolls back and exports again. It stops
# at DEMO_FOLLOW_TO (start + 300: about a minute); Ctrl-C stops it sooner
# (exit 3). The database is $DEMO_DB (blockhaul_demo), dropped and
# recreated as for make demo (scripts/demo-db.sh says which).
set -euo pipefail
server=$1
db=${DEMO_DB:-blockhaul_demo}
bin=${DEMO_BIN:-bin/blockhaul}
start=${DEMO_FOLLOW_START:-2000}
to=${DEMO_FOLLOW_TO:-$((start + 300))}
block_time=${DEMO_BLOCK_TIME:-200ms}
every=${DEMO_REORG_EVERY:-25}
depth=${DEMO_REORG_DEPTH:-3}
. "$(dirname "$0")/demo-db.sh"

demo_prepare "$server" "$db"
dburl=$(demo_url "$server" "$db")
rm -rf demo-data/follow
mkdir -p demo-data

echo "== blockhaul follow: a synthetic CometBFT chain at $start blocks, one more each $block_time,"
echo "   a reorg of $depth blocks each $every, followed up to height $to -> $db"
"$bin" follow --pg "$dburl" --staging demo-data/follow --from 1 --to "$to" \
	--synthetic-tip "$start" --synthetic-block-time "$block_time" \
	--synthetic-reorg-every "$every" --synthetic-reorg-depth "$depth" \
	--poll-interval "$block_time" --progress-interval 5s

echo
echo "== the head stream's checkpoint and the last blocks"
psql -X -q "$dburl" -P pager=off <<SQL
SELECT stream, height FROM cometbft.blockhaul_checkpoints WHERE stream = 'head';
SELECT height, encode(hash, 'hex') AS hash, num_txs FROM cometbft.blocks ORDER BY height DESC LIMIT 3;
SQL
