#!/usr/bin/env bash
# test_selector_re2.sh — end-to-end: selector regexes are RE2 syntax (as
# Prometheus'), fully anchored, through a real `profd serve` and API v1.
#   - generated CPU profiles (valid for Google's parser) POSTed with labels
#     version=1.2 / 1.10 / 2.0, team=Auth / Search, pod=a...ab (4,000 bytes);
#   - /api/1/profiles?query=cpu{version=~"1\\.\\d"}: \d works, anchored (1.10 is out);
#   - (?i), \w, [[:alpha:]], a|b anchoring, !~; __name__ as the type;
#   - back-reference and lookahead: 400 "unsupported in RE2/Prometheus selector syntax: ...";
#   - a catastrophic regex, (a+)+$ on the long pod label: a 400 naming the
#     match limit, within seconds; the collector still answers;
#   - differential: ~26,000 (regex, value) pairs (re2_cases.py: regexes where
#     PCRE2 and RE2 read the same text differently, and random ones) matched
#     by profd (build/rematch) and by Go's regexp as Prometheus compiles a
#     matcher (build/oracle regex): where both compile, they agree.
# Run: BUILD=build bash tests/e2e/test_selector_re2.sh
# shellcheck source-path=SCRIPTDIR source=lib.sh
source "$(dirname "$0")/lib.sh"

need_built 1 "make && make build/oracle build/rematch" "$PROFD" "$ORACLE" "$ROOT/$BUILD/rematch"
need_cmds 1 curl jq python3 gzip

SPID=
stop_all() { [ -n "$SPID" ] && kill -KILL "$SPID" 2>/dev/null && wait "$SPID" 2>/dev/null; }
eval "set -- $(trap -p EXIT)"
# shellcheck disable=SC2064 # lib.sh's command is expanded now, on purpose
trap "stop_all; ${3:-}" EXIT

# mkcpu OUT FN: a gzip'd Go-style CPU profile (samples/count, cpu/nanoseconds), one stack FN
mkcpu() {
	python3 - "$1" "$2" <<'PY'
import gzip, sys, time
def varint(n):
    out = b""
    while True:
        b = n & 0x7f; n >>= 7
        if n: out += bytes([b | 0x80])
        else: return out + bytes([b])
def fld(num, wt, payload):
    key = varint(num << 3 | wt)
    return key + (varint(payload) if wt == 0 else varint(len(payload)) + payload)
def msg(*parts): return b"".join(parts)
strs = ["", "samples", "count", "cpu", "nanoseconds", sys.argv[2]]
vt = lambda t, u: msg(fld(1, 0, t), fld(2, 0, u))
p = msg(
    fld(1, 2, vt(1, 2)), fld(1, 2, vt(3, 4)),
    fld(2, 2, msg(fld(1, 2, varint(1)), fld(2, 2, varint(7) + varint(70000000)))),
    fld(4, 2, msg(fld(1, 0, 1), fld(4, 2, msg(fld(1, 0, 1), fld(2, 0, 10))))),
    fld(5, 2, msg(fld(1, 0, 1), fld(2, 0, 5), fld(3, 0, 5))),
    *[fld(6, 2, s.encode()) for s in strs],
    fld(9, 0, time.time_ns()), fld(10, 0, 2000000000),
    fld(11, 2, vt(3, 4)), fld(12, 0, 10000000))
open(sys.argv[1], "wb").write(gzip.compress(p))
PY
}

mkcpu "$T/a.pb.gz" main.auth
mkcpu "$T/b.pb.gz" main.search
if "$ORACLE" check "$T/a.pb.gz" >/dev/null 2>"$T/oracle.err"; then
	ok "setup: generated CPU profiles are valid for Google's parser"
else
	fail "setup: generated profiles" "$(head -c 300 "$T/oracle.err")"
	exit 1
fi

"$PROFD" serve --addr 127.0.0.1:0 --data-dir "$T/data" --retention 0 2>"$T/serve.log" &
SPID=$!
PORT=$(wait_line "$T/serve.log" '.*listening on port \([0-9][0-9]*\).*')
if [ -z "$PORT" ]; then
	fail "setup: profd serve" "no 'listening on port' line: $(head -c 600 "$T/serve.log")"
	exit 1
fi
BASE=http://127.0.0.1:$PORT

LONGPOD=$(printf 'a%.0s' $(seq 4000))b
post() { # post FILE SERVICE LABELS
	local code
	code=$(curl -sS -o "$T/post.out" -w '%{http_code}' --data-binary @"$1" \
		--url-query "service=$2" --url-query type=cpu --url-query "labels=$3" "$BASE/api/0/profiles")
	[ "$code" = 200 ] || { echo "POST $1 $2 ${3:0:60}: $code $(head -c 300 "$T/post.out")"; return 1; }
}
postfail=
post "$T/a.pb.gz" auth "version=1.2,team=Auth,pod=p1" || postfail=1
post "$T/a.pb.gz" auth "version=1.10,team=Auth,pod=p2" || postfail=1
post "$T/b.pb.gz" search "version=2.0,team=Search,pod=$LONGPOD" || postfail=1
[ -z "$postfail" ] && ok "setup: POST 3 cpu profiles with version/team/pod labels" || fail "setup: POST" "see above"

# count QUERY: the number of profiles /api/1/profiles returns for QUERY (or "CODE: error")
count() {
	CODE=$(curl -sS -G -o "$T/b" -w '%{http_code}' --data-urlencode "query=$1" --data-urlencode from=now-1h \
		--data-urlencode to=now+1m "$BASE/api/1/profiles")
	if [ "$CODE" = 200 ]; then jq '.body | length' "$T/b"; else echo "$CODE: $(jq -r .error "$T/b" 2>/dev/null | head -c 300)"; fi
}
# versions QUERY: the sorted version labels of the matching profiles
versions() { count "$1" >/dev/null; jq -r '[.body[].labels[] | select(.key == "version") | .value] | sort | join(",")' "$T/b" 2>/dev/null; }

expect 'version=~"1\\.\\d": \d works and the match is anchored (1.2, not 1.10)' 1 "$(count 'cpu{version=~"1\\.\\d"}')"
expect 'version=~"1\\.\\d+": 1.2 and 1.10' 2 "$(count 'cpu{version=~"1\\.\\d+"}')"
expect 'team=~"(?i)auth": case-insensitive flag' 2 "$(count 'cpu{team=~"(?i)auth"}')"
expect 'team=~"(?i)AUTH|search": (?i) covers the alternation' 3 "$(count 'cpu{team=~"(?i)AUTH|search"}')"
expect 'team=~"\\w+": \w' 3 "$(count 'cpu{team=~"\\w+"}')"
expect 'team=~"[[:upper:]][[:lower:]]+": POSIX classes inside brackets' 3 "$(count 'cpu{team=~"[[:upper:]][[:lower:]]+"}')"
expect 'version=~"1|2": fully anchored, matches neither 1.2 nor 2.0' 0 "$(count 'cpu{version=~"1|2"}')"
expect 'version!~"1\\..*": negative regex' 1 "$(count 'cpu{version!~"1\\..*"}')"
expect 'service=~`a.*`, raw string' 2 "$(count 'cpu{service=~`a.*`}')"
expect 'which versions match 1\.\d' 1.2 "$(versions 'cpu{version=~"1\\.\\d"}')"
expect '{__name__="cpu"}: Prometheus'"'"' metric name is the type (as cpu{})' 3 "$(count '{__name__="cpu",team!=""}')"
expect '{__name__=~"heap|cpu"}: a regex on the type' 2 "$(count '{__name__=~"heap|cpu",service="auth"}')"
expect '{__name__="heap"}: no heap profile' 0 "$(count '{__name__="heap"}')"

# refused: 400 with a message saying so
expect_400() { # NAME QUERY WANT
	local got
	got=$(count "$2")
	case "$got" in
	"400: "*"$3"*) ok "$1" ;;
	*) fail "$1" "got '$got', want 400 with '$3'" ;;
	esac
}
expect_400 "back-reference: 400 unsupported in RE2" 'cpu{version=~"(1)\\.\\1"}' \
	'regex "(1)\.\1": unsupported in RE2/Prometheus selector syntax: back-reference \1'
expect_400 "lookahead: 400 unsupported in RE2" 'cpu{version=~"(?=1)1.*"}' \
	'unsupported in RE2/Prometheus selector syntax: lookahead (?='
expect_400 "possessive quantifier: 400 unsupported in RE2" 'cpu{version=~"1.*+"}' \
	'unsupported in RE2/Prometheus selector syntax: possessive quantifier'
expect_400 "a type and __name__: 400, as Prometheus' 'metric name must not be set twice'" 'cpu{__name__="cpu"}' \
	'the profile type is given twice'
expect_400 "regex that does not compile: 400 with the reason" 'cpu{version=~"1.("}' \
	'regex "1.(" does not compile: missing closing parenthesis'

# a catastrophic regex on a 4,001-byte label value: bounded, a 400 naming the limit
t0=$(date +%s%N)
got=$(count 'cpu{pod=~"(a+)+$"}')
ms=$((($(date +%s%N) - t0) / 1000000))
case "$got" in
"400: "*'regex "(a+)+$" of label "pod" hit the match limit'*) ok "(a+)+\$ on a^4000 b: 400 naming the match limit (${ms} ms)" ;;
*) fail "(a+)+\$ on a^4000 b" "got '$got' in ${ms} ms" ;;
esac
[ "$ms" -lt 10000 ] && ok "catastrophic regex answered within 10 s (${ms} ms)" || fail "catastrophic regex time" "${ms} ms"
expect "collector still answers after the catastrophic regex" 200 \
	"$(curl -sS -o /dev/null -w '%{http_code}' "$BASE/healthz")"
expect "a linear regex on the same long value matches" 1 "$(count 'cpu{pod=~"a+b"}')"
no_sanitizer "no sanitizer report in the collector's log" "$T/serve.log"

# differential against Go's regexp (RE2_SEED=N for other random regexes)
python3 "$ROOT/tests/e2e/re2_cases.py" "${RE2_SEED:-1}" 3000 >"$T/re2.in"
"$ROOT/$BUILD/rematch" <"$T/re2.in" >"$T/re2.profd"
"$ORACLE" regex <"$T/re2.in" >"$T/re2.go"
pairs=$(wc -l <"$T/re2.in")
paste -d ' ' "$T/re2.go" "$T/re2.profd" "$T/re2.in" | awk '$1 != "ERR" && $2 != "ERR" && $1 != $2' >"$T/re2.diff"
both=$(paste -d ' ' "$T/re2.go" "$T/re2.profd" | awk '$1 != "ERR" && $2 != "ERR"' | wc -l)
if [ ! -s "$T/re2.diff" ] && [ "$(wc -l <"$T/re2.profd")" = "$pairs" ] && [ "$both" -gt $((pairs * 9 / 10)) ]; then
	ok "differential: $both of $pairs (regex, value) pairs match in profd exactly as in Go's regexp (Prometheus)"
else
	fail "differential against Go's regexp" "$(wc -l <"$T/re2.diff") disagree, $both of $pairs compiled in both; first (go profd regex-hex value-hex): $(head -5 "$T/re2.diff" | tr '\n' ';')"
fi
