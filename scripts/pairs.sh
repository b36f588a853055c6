# Shell functions for the scripts that time two commands in turn, whole processes
# (scripts/nodehome-bench.sh, scripts/archive-bench.sh). Source it; it runs nothing.
#
# The sourcing script sets heights, pairs and warmup (from HEIGHTS, PAIRS, WARMUP), workdir,
# results (the file the runs are appended to) and a die function.

# pairs_check CMD...: HEIGHTS, PAIRS and WARMUP are numbers; CMD... and GNU time are installed.
pairs_check() {
	[[ "$heights" =~ ^[1-9][0-9]*$ ]] || die "HEIGHTS must be a positive integer, got '$heights'"
	[[ "$pairs" =~ ^[1-9][0-9]*$ ]] || die "PAIRS must be a positive integer, got '$pairs'"
	[[ "$warmup" =~ ^[0-9]+$ ]] || die "WARMUP must be a whole number, got '$warmup'"
	local cmd
	for cmd in "$@"; do command -v "$cmd" >/dev/null || die "$cmd not found"; done
	[[ -x /usr/bin/time ]] || die "/usr/bin/time (GNU time) not found"
}

# timed NAME SIDE N OUT CMD...: runs CMD under /usr/bin/time, its output into OUT, and sets
# wall, user, sys (seconds) and rss (KiB); a failed run dies with its output. Prints the run's
# line, prefixed NAME, to stderr.
timed() {
	local name=$1 side=$2 n=$3 out=$4 code
	shift 4
	sync
	/usr/bin/time -o "$workdir/time" -f '%e %U %S %M %x' "$@" >"$out" 2>&1 || true
	read -r wall user sys rss code <"$workdir/time"
	if [[ "$code" != 0 ]]; then
		cat "$out" >&2
		die "$side exited $code (its output above)"
	fi
	printf '%s: %-7s %2s  wall %6.2f s  cpu %5.2f s  peak %4d MiB  load %s\n' \
		"$name" "$side" "$n" "$wall" "$(awk -v u="$user" -v s="$sys" 'BEGIN { print u + s }')" $((rss / 1024)) "$(cut -d' ' -f1 /proc/loadavg)" >&2
}
