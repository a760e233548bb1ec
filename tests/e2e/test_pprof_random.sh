#!/usr/bin/env bash
# test_pprof_random.sh — profd against Google's profile package and go tool
# pprof on random profiles that Go writes (`oracle random SEED N DIR`,
# tests/oracle/random.go: 1-4 sample types, fake, ASLR-moved and reordered
# mappings, equal names in other files, nameless and duplicated functions,
# locations without mapping, address or lines, inlining, folded frames,
# sparse and shuffled ids, zero and negative values, string and numeric
# labels, comments, drop/keep frames, odd strings), a set per seed:
#   1. profd pprof merge = profile.Merge (the whole parsed profile, ids and
#      order included), on both of its paths (streamed, and piped: decoded by
#      another thread, then merged whole)
#   2. profd pprof convert keeps every file as it is
#   3. profd pprof top -n 0 = go tool pprof -top, byte for byte, by flat, by
#      cum and for the first sample type
#   4. profd pprof delta = what go tool pprof -base reads (prev negated,
#      merged), on prev and prev merged with another file
#   5. the collector, on its embedded store and (where clickhouse-server is
#      installed) on ClickHouse: the set POSTed, GET /merge reads as
#      profile.Merge of the same files in time order, under go tool pprof
#      -top and -traces; the first half as version 1, the rest as version 2:
#      /api/1/diff of the two = go tool pprof -top -diff_base; the flame
#      graph of the merge = the call tree of go tool pprof -traces
# A failure names its seed: `build/oracle random SEED N DIR` writes the set.
# Env: RANDOM_SETS (default 40; 5. runs on every other one), RANDOM_SEED0
# (default 1). Run: BUILD=build bash tests/e2e/test_pprof_random.sh
# shellcheck source-path=SCRIPTDIR source=lib.sh
source "$(dirname "$0")/lib.sh"
# shellcheck source-path=SCRIPTDIR source=clickhouse.sh
source "$(dirname "$0")/clickhouse.sh"

need_built 1 "make && make build/oracle" "$PROFD" "$ORACLE"
need_cmds 1 go curl python3
PPROF=$(go env GOROOT)/pkg/tool/$(go env GOOS)_$(go env GOARCH)/pprof
[ -x "$PPROF" ] || {
	fail "setup: go's pprof tool" "not found at $PPROF"
	exit 1
}
SETS=${RANDOM_SETS:-40}
SEED0=${RANDOM_SEED0:-1}
TOP=(-nodecount=100000 -nodefraction=0 -edgefraction=0)

# report KIND [FLAG] FILE...: go tool pprof's KIND (-top, -traces) report of
# the FILEs, its header lines that name the file, build or time left out
# (stderr too: its warnings come in map order)
report() {
	local flags=("$1" "${TOP[@]}")
	shift
	while [ $# -gt 0 ] && [ "${1#-}" != "$1" ]; do
		flags+=("$1")
		shift
	done
	"$PPROF" "${flags[@]}" "$@" 2>/dev/null | grep -a -v -E '^(File|Build ID|Time|Duration):'
}

# canon_traces: -traces with its samples sorted (a collector's merge need
# not keep profile.Merge's sample order)
canon_traces() {
	python3 -c '
import sys
sep = b"-----------+-------------------------------------------------------"
head, blocks, cur = [], [], None
for l in sys.stdin.buffer.read().split(b"\n"):
    if l == sep:
        if cur is not None: blocks.append(b"\n".join(cur))
        cur = []
    elif cur is None: head.append(l)
    else: cur.append(l)
if cur is not None: blocks.append(b"\n".join(cur))
sys.stdout.buffer.write(b"\n".join(head) + b"\n" + b"\n==\n".join(sorted(blocks)) + b"\n")'
}

# flame_vs_traces JSON TRACES: the /api/1/merge flame graph JSON against the
# call tree that go tool pprof -traces (with -unit= the sample type's own,
# which prints integers, but huge ones through a float64: compared to 1e-9)
# gives: the same nodes under the root, each
# with the same value and self. Samples of value 0 are left out of the tree
# (the flame graph skips them); so is the root's self (pprof -traces does
# not print samples without a frame). Prints the first difference.
flame_vs_traces() {
	python3 - "$1" "$2" <<'PY'
import json, re, sys
body = json.load(open(sys.argv[1], encoding="utf-8", errors="surrogateescape"))["body"]
sep = "-----------+-------------------------------------------------------"
val = re.compile(r"^ *(-?[0-9]+(?:\.[0-9]+)?)[A-Za-z]*   (.*)$")
tree = {}
def add(stack, v):
    node = None
    kids = tree
    for name in stack:
        node = kids.setdefault(name, {"v": 0, "s": 0, "k": {}})
        node["v"] += v
        kids = node["k"]
    node["s"] += v
lines = open(sys.argv[2], encoding="utf-8", errors="surrogateescape").read().split("\n")
i = 0
while i < len(lines):
    if lines[i] != sep:
        i += 1
        continue
    i += 1
    while i < len(lines) and lines[i] != sep and not val.match(lines[i]):
        i += 1  # labels
    if i >= len(lines) or lines[i] == sep:
        continue
    m = val.match(lines[i])
    v, stack = float(m.group(1)), [m.group(2)]
    i += 1
    while i < len(lines) and lines[i].startswith(" " * 13):
        stack.append(lines[i][13:])
        i += 1
    stack = [f[:-9] if f.endswith(" (inline)") else f for f in stack]
    if v:
        add(stack[::-1], v)
def near(a, b):  # pprof prints huge values through a float64 (1020253399358343.88us)
    return abs(a - b) <= 1e-9 * max(abs(a), abs(b)) + 0.5
def cmp(path, want, got):
    gk = {c["name"]: c for c in got}
    if len(gk) != len(got):
        return "%s: two children of one name" % path
    if set(want) != set(gk):
        return "%s: children %r, want %r" % (path, sorted(gk)[:5], sorted(want)[:5])
    for name, w in want.items():
        g = gk[name]
        if not near(g["value"], w["v"]) or not near(g["self"], w["s"]):
            return "%s/%s: value %d self %d, want %.0f %.0f" % (path, name, g["value"], g["self"], w["v"], w["s"])
        r = cmp(path + "/" + name, w["k"], g.get("children", []))
        if r:
            return r
    return None
if body.get("truncated"):
    print("truncated")
    sys.exit(1)
r = cmp("root", tree, body["root"].get("children", []))
if r:
    print(r.replace("\0", "\\0"))
    sys.exit(1)
print("%d nodes" % body["frames"])
PY
}

# sel SERVICE VERSION: the API v1 selector other{service="SERVICE",version="VERSION"}, URL-encoded
sel() { printf 'other%%7Bservice%%3D%%22%s%%22%%2Cversion%%3D%%22%s%%22%%7D' "$1" "$2"; }

# time_if_samples FILE: the "Time:" line of FILE as the oracle parses it,
# nothing (and status 1) if FILE has no sample
time_if_samples() {
	"$ORACLE" dump "$1" | awk '/^Time:/ && !t { t = $0 } /^Samples:/ { s = 1; next } /^Locations/ { s = 0 }
		s && /^ *-?[0-9]+( +-?[0-9]+)*: / { n++ } END { if (n) print t; exit !n }'
}

# first_diff A B: the first lines that differ, printable
first_diff() { diff -a "$1" "$2" | head -8 | cat -v; }

# ---- the collectors, for 5.: embedded store, ClickHouse -------------------------------
kill_started_on_exit
URLS=() SERVES=() STORES=()
# start_serve NAME ARGS...: profd serve ARGS in the background; appends to URLS
start_serve() {
	local name=$1 pid port
	shift
	"$PROFD" serve --addr 127.0.0.1:0 --data-dir "$T/data-$name" --retention 0 --max-query-range 1000000h "$@" \
		2>"$T/serve-$name.log" &
	pid=$!
	port=$(serve_port "$T/serve-$name.log" $pid)
	if [ -z "$port" ]; then
		fail "setup: profd serve ($name)" "$(head -c 600 "$T/serve-$name.log")"
		exit 1
	fi
	URLS+=("http://127.0.0.1:$port") SERVES+=("$pid") STORES+=("$name")
}
start_serve sqlite
if ! ch_available; then
	ok "collector on ClickHouse # SKIP clickhouse-server not installed (make deps)"
elif ! ch_start rnd; then
	fail "setup: clickhouse-server" "did not answer"
else
	# shellcheck disable=SC2154 # exported by ch_start
	start_serve clickhouse --store "clickhouse://127.0.0.1:$CH_HTTP_rnd/default"
fi

for ((k = 0; k < SETS; k++)); do
	seed=$((SEED0 + k))
	n=$((1 + seed % 6))
	d=$T/s$seed
	mkdir -p "$d"
	if ! "$ORACLE" random "$seed" "$n" "$d" 2>"$d/gen.err"; then
		fail "seed $seed: oracle random" "$(head -c 300 "$d/gen.err")"
		continue
	fi
	files=("$d"/r*.pb.gz)

	# 1. merge
	if ! "$ORACLE" merge "$d/o.pb.gz" "${files[@]}" 2>"$d/o.err"; then
		fail "seed $seed: oracle merge" "$(head -c 300 "$d/o.err")"
	elif ! "$PROFD" pprof merge -q -o "$d/p.pb.gz" "${files[@]}" 2>"$d/p.err"; then
		fail "seed $seed: profd pprof merge of $n files" "$(head -c 300 "$d/p.err")"
	else
		"$ORACLE" dump "$d/o.pb.gz" >"$d/o.dump" 2>&1
		"$ORACLE" dump "$d/p.pb.gz" >"$d/p.dump" 2>&1
		if [ -s "$d/o.dump" ] && cmp -s "$d/o.dump" "$d/p.dump"; then
			ok "seed $seed: profd pprof merge of $n files = profile.Merge ($(grep -a -c '^ *-\?[0-9]\+\( \+-\?[0-9]\+\)*: ' "$d/o.dump") lines)"
		else fail "seed $seed: profd pprof merge = profile.Merge" "$(first_diff "$d/o.dump" "$d/p.dump")"; fi
		# the path of large inputs (files decoded into memory by another
		# thread, then merged whole): the same bytes
		if [ "$n" -gt 1 ]; then
			if ! PROFD_MERGE_PIPE_MIN=0 "$PROFD" pprof merge -q -j 2 -o "$d/pp.pb.gz" "${files[@]}" 2>"$d/pp.err"; then
				fail "seed $seed: piped merge of $n files" "$(head -c 300 "$d/pp.err")"
			elif cmp -s "$d/p.pb.gz" "$d/pp.pb.gz"; then
				ok "seed $seed: piped merge of $n files: the same bytes"
			else fail "seed $seed: piped merge of $n files: the same bytes" "$(cmp "$d/p.pb.gz" "$d/pp.pb.gz")"; fi
		fi
	fi

	# 2. convert
	bad=""
	for f in "${files[@]}"; do
		if ! "$PROFD" pprof convert "$f" "$d/c.pb.gz" 2>"$d/c.err"; then
			bad="$f: $(head -c 200 "$d/c.err")"
			break
		fi
		"$ORACLE" dump "$f" >"$d/in.dump" 2>&1
		"$ORACLE" dump "$d/c.pb.gz" >"$d/c.dump" 2>&1
		if ! cmp -s "$d/in.dump" "$d/c.dump"; then
			bad="${f##*/}: $(first_diff "$d/in.dump" "$d/c.dump")"
			break
		fi
	done
	if [ -z "$bad" ]; then ok "seed $seed: profd pprof convert keeps each of the $n files as profile.Parse reads it"
	else fail "seed $seed: profd pprof convert" "$bad"; fi

	# 3. top: by flat, by cum, of the first sample type
	for v in "flat:" "cum:-cum:--cum" "index 0:-sample_index=0:-i 0"; do
		IFS=: read -r what gflag pflag <<<"$v"
		# shellcheck disable=SC2086 # the flags are words or nothing
		report -top $gflag "${files[@]}" | sed -n '/flat%/,$p' >"$d/g.top"
		# shellcheck disable=SC2086
		"$PROFD" pprof top -n 0 $pflag "${files[@]}" 2>"$d/t.err" | sed -n '/flat%/,$p' >"$d/p.top"
		if [ -s "$d/g.top" ] && cmp -s "$d/g.top" "$d/p.top"; then
			ok "seed $seed: profd pprof top -n 0 $pflag = go tool pprof -top $gflag ($(($(wc -l <"$d/g.top") - 1)) rows)"
		else fail "seed $seed: profd pprof top ($what) = go tool pprof -top $gflag" "$(first_diff "$d/g.top" "$d/p.top") $(head -c 200 "$d/t.err")"; fi
	done

	# 4. delta: prev = the first file, cur = profile.Merge of the first two;
	# what go tool pprof -base prev cur reads (oracle delta), but for the
	# time and duration (profd's: cur's time, the time between the two). A
	# total that went down (a second file whose values sum below zero) is a
	# counter reset: cur written as it is, with a note
	if [ "$n" -ge 2 ]; then
		bad=""
		if ! "$ORACLE" merge "$d/cur.pb.gz" "${files[0]}" "${files[1]}" 2>"$d/cur.err" ||
			! "$ORACLE" delta "$d/od.pb.gz" "${files[0]}" "$d/cur.pb.gz" 2>>"$d/cur.err"; then
			bad="oracle: $(head -c 300 "$d/cur.err")"
		elif ! "$PROFD" pprof delta -o "$d/pd.pb.gz" "${files[0]}" "$d/cur.pb.gz" 2>"$d/pd.err"; then
			bad="profd pprof delta: $(head -c 300 "$d/pd.err")"
		else
			want=$d/od.pb.gz what="oracle delta"
			if [ -s "$d/pd.err" ]; then want=$d/cur.pb.gz what="cur (a counter reset: $(head -c 100 "$d/pd.err"))"; fi
			"$ORACLE" dump "$want" | grep -a -v -E '^(Time|Duration):' >"$d/od.dump"
			"$ORACLE" dump "$d/pd.pb.gz" | grep -a -v -E '^(Time|Duration):' >"$d/pd.dump"
			cmp -s "$d/od.dump" "$d/pd.dump" || bad="against $what: $(first_diff "$d/od.dump" "$d/pd.dump")"
		fi
		if [ -z "$bad" ]; then ok "seed $seed: profd pprof delta = go tool pprof -base's (prev negated, merged)"
		else fail "seed $seed: profd pprof delta" "$bad"; fi
	fi

	# 5. the collector, every other set: the files with samples (it refuses
	# the others, as profefe does) posted in time order, merged back
	if ((k % 2 == 0)); then
		svc=rand$seed
		sorted=$(for f in "${files[@]}"; do
			t=$(time_if_samples "$f") || continue
			echo "$t $f"
		done | sort | awk '{ print $NF }')
		if [ -z "$sorted" ]; then
			ok "seed $seed: collector: no file with samples to post"
			continue
		fi
		# shellcheck disable=SC2086 # one path per word
		"$ORACLE" merge "$d/om.pb.gz" $sorted 2>"$d/om.err"
		report -top "$d/om.pb.gz" >"$d/om.top"
		report -traces "$d/om.pb.gz" | canon_traces >"$d/om.tr"
		# exact values for the flame graph check: -unit= the default sample type's unit
		unit=$("$ORACLE" dump "$d/om.pb.gz" | awk '/^Samples:/ { getline; n = split($0, t, " ")
			u = t[n]; for (j = 1; j <= n; j++) if (t[j] ~ /\[dflt\]$/) u = t[j]; sub(/\[dflt\]$/, "", u); sub(/^.*\//, "", u); print u; exit }')
		report -traces -unit="$unit" "$d/om.pb.gz" >"$d/om.traces"
		# the first half of the files as version 1, the rest as version 2:
		# /api/1/diff of the two = go tool pprof -diff_base of their merges
		mapfile -t sf <<<"$sorted"
		half=$((${#sf[@]} / 2))
		if [ "$half" -gt 0 ]; then
			"$ORACLE" merge "$d/ob.pb.gz" "${sf[@]:0:half}" 2>>"$d/om.err"
			"$ORACLE" merge "$d/ot.pb.gz" "${sf[@]:half}" 2>>"$d/om.err"
			report -top -diff_base="$d/ob.pb.gz" "$d/ot.pb.gz" >"$d/od.top"
		fi
		for i in "${!URLS[@]}"; do
			url=${URLS[$i]} bad=""
			for j in "${!sf[@]}"; do
				code=$(curl -s -o "$d/post" -w '%{http_code}' --data-binary "@${sf[$j]}" \
					"$url/api/0/profiles?service=$svc&type=other&labels=version=$((j < half ? 1 : 2))")
				if [ "$code" != 200 ]; then
					bad="POST ${sf[$j]##*/}: $code $(head -c 300 "$d/post")"
					break
				fi
			done
			if [ -z "$bad" ]; then
				code=$(curl -s -o "$d/m.pb.gz" -w '%{http_code}' "$url/api/0/profiles/merge?service=$svc&type=other&from=2000-01-01T00:00:00&to=2100-01-01T00:00:00")
				[ "$code" = 200 ] || bad="merge: $code $(head -c 300 "$d/m.pb.gz")"
			fi
			if [ -z "$bad" ]; then
				report -top "$d/m.pb.gz" >"$d/m.top"
				report -traces "$d/m.pb.gz" | canon_traces >"$d/m.tr"
				if [ ! -s "$d/om.top" ]; then bad="go tool pprof -top printed nothing"
				elif ! cmp -s "$d/om.top" "$d/m.top"; then bad="-top: $(first_diff "$d/om.top" "$d/m.top")"
				elif ! cmp -s "$d/om.tr" "$d/m.tr"; then bad="-traces: $(first_diff "$d/om.tr" "$d/m.tr")"; fi
			fi
			if [ -z "$bad" ]; then ok "seed $seed: collector (${STORES[$i]}): $(echo "$sorted" | wc -w) posted, /merge = profile.Merge under -top and -traces"
			else fail "seed $seed: collector (${STORES[$i]}): posted, /merge = profile.Merge" "$bad"; fi
			# the flame graph of the same merge against -traces' call tree
			if [ -z "$bad" ]; then
				code=$(curl -s -o "$d/fl.json" -w '%{http_code}' "$url/api/1/merge?query=other%7Bservice%3D%22$svc%22%7D&from=2000-01-01T00:00:00Z&to=2100-01-01T00:00:00Z&format=flamegraph&max_nodes=100000&normalize=false")
				if [ "$code" != 200 ]; then fail "seed $seed: collector (${STORES[$i]}): flame graph" "$code $(head -c 300 "$d/fl.json")"
				elif why=$(flame_vs_traces "$d/fl.json" "$d/om.traces"); then ok "seed $seed: collector (${STORES[$i]}): the flame graph = go tool pprof -traces' call tree ($why)"
				else fail "seed $seed: collector (${STORES[$i]}): the flame graph = go tool pprof -traces' call tree" "$why"; fi
			fi
			if [ "$half" -eq 0 ] || [ -n "$bad" ]; then continue; fi
			code=$(curl -s -o "$d/d.pb.gz" -w '%{http_code}' "$url/api/1/diff?base=$(sel "$svc" 1)&target=$(sel "$svc" 2)&from=2000-01-01T00:00:00Z&to=2100-01-01T00:00:00Z&format=pprof&raw=true")
			if [ "$code" != 200 ]; then bad="/api/1/diff: $code $(head -c 300 "$d/d.pb.gz")"
			else
				report -top "$d/d.pb.gz" >"$d/d.top"
				if [ ! -s "$d/od.top" ]; then bad="go tool pprof -top -diff_base printed nothing"
				elif ! cmp -s "$d/od.top" "$d/d.top"; then bad="$(first_diff "$d/od.top" "$d/d.top")"; fi
			fi
			if [ -z "$bad" ]; then ok "seed $seed: collector (${STORES[$i]}): /api/1/diff (pprof) = go tool pprof -top -diff_base"
			else fail "seed $seed: collector (${STORES[$i]}): /api/1/diff = go tool pprof -diff_base" "$bad"; fi
		done
	fi
	rm -rf "$d"
done

for i in "${!SERVES[@]}"; do
	kill -TERM "${SERVES[$i]}"
	exit_within "${SERVES[$i]}" 10
	expect "profd serve (${STORES[$i]}) exits 0 on SIGTERM" 0 "$EXIT_RC"
	no_sanitizer "profd serve (${STORES[$i]})" "$T/serve-${STORES[$i]}.log"
done
