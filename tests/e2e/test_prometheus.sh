#!/usr/bin/env bash
# test_prometheus.sh — profile-derived series for Prometheus (docs/api.md
# "/metrics/profiles") and the Grafana dashboard (deploy/grafana/profd.json),
# with a real Prometheus (Debian's, started here on a loopback port):
#   1. real goapp profiles of two services (cpu and heap) in the latest
#      complete window (--profile-metrics-window 1h: the last whole hour);
#      /metrics/profiles passes promtool check metrics, and every service's
#      total equals API v1's series for the same window (cores for cpu,
#      the value for heap); the top functions are there; the series cap
#      drops the smallest and says how many;
#   2. Prometheus scrapes /metrics/profiles and /metrics; its HTTP API gives
#      back the same values;
#   3. every query of the dashboard runs in that Prometheus, and the fleet CPU,
#      heap and top functions panels have data; its links open the profd UI.
# Run: BUILD=build bash tests/e2e/test_prometheus.sh
# shellcheck source-path=SCRIPTDIR source=lib.sh
source "$(dirname "$0")/lib.sh"
go_bins_from_build GOAPP # Go programs, not sanitized
need_built 1 "make && make build/goapp" "$PROFD" "$GOAPP"
need_cmds 1 curl jq python3
if ! command -v prometheus >/dev/null || ! command -v promtool >/dev/null; then
	ok "prometheus # skip no prometheus/promtool (tools/deps.sh takes them from Debian's prometheus package)"
	exit 0
fi
kill_started_on_exit

# the window is the last whole hour: not within a minute of the next one (the test takes ~20 s)
while [ $(($(date +%s) % 3600)) -gt 3540 ]; do sleep 5; done
H=$(($(date +%s) / 3600 * 3600 - 3600))
for s in auth search; do
	GOAPP_ARGS="-workload $s -service $s" "$ROOT/tests/e2e/capture.sh" "$GOAPP" "$T/cap-$s" 1 >"$T/capture-$s.log" 2>&1 &
done
wait
"$PROFD" serve --addr 127.0.0.1:0 --data-dir "$T/data" --retention 0 --profile-metrics-window 1h \
	--profile-metrics-delay 0s --profile-metrics-top 5 -q 2>"$T/serve.log" &
SPID=$!
PORT=$(serve_port "$T/serve.log" "$SPID")
[ -n "$PORT" ] || { fail "setup: serve" "$(head -c 400 "$T/serve.log")"; exit 1; }
URL=http://127.0.0.1:$PORT
for s in auth search; do
	for t in cpu heap; do
		[ -s "$T/cap-$s/$t.pb.gz" ] || { fail "setup: capture $s" "$(tail -3 "$T/capture-$s.log")"; exit 1; }
		code=$(curl -s -o "$T/post" -w '%{http_code}' --data-binary "@$T/cap-$s/$t.pb.gz" \
			"$URL/api/0/profiles?service=$s&type=$t&created_at=$((H + 600))&labels=pod=$s-1")
		[ "$code" = 200 ] || { fail "setup: upload $s $t" "$code $(cat "$T/post")"; exit 1; }
	done
done

# a cpu profile without CPU time in nanoseconds (samples/count only: another producer's, or a
# hostile client's) for a third service: it cannot be given in cores, and must not take the
# other services' series away (the whole endpoint answered 400 before)
python3 "$ROOT/tests/e2e/hostile_prof.py" names "$T/odd.pb.gz" 'main.odd' >/dev/null
code=$(curl -s -o "$T/post" -w '%{http_code}' --data-binary "@$T/odd.pb.gz" \
	"$URL/api/0/profiles?service=odd&type=cpu&created_at=$((H + 600))")
[ "$code" = 200 ] || { fail "setup: upload odd cpu" "$code $(cat "$T/post")"; exit 1; }
# a function name that is not UTF-8 (nothing validates a profile's strings; Go's pprof neither):
# one bad label value and Prometheus refuses the whole scrape
python3 "$ROOT/tests/e2e/hostile_prof.py" names "$T/utf8.pb.gz" $'main.bad\xff\xfe"' >/dev/null
code=$(curl -s -o "$T/post" -w '%{http_code}' --data-binary "@$T/utf8.pb.gz" \
	"$URL/api/0/profiles?service=utf8&type=cpu&created_at=$((H + 600))")
[ "$code" = 200 ] || { fail "setup: upload utf8 cpu" "$code $(cat "$T/post")"; exit 1; }

# ---- 1. the endpoint ------------------------------------------------------------------------
code=$(curl -sS -o "$T/pm.txt" -w '%{http_code}' "$URL/metrics/profiles")
expect "/metrics/profiles answers 200 with one service's cpu profiles not in nanoseconds" 200 "$code"
check "/metrics/profiles passes promtool check metrics" promtool check metrics <"$T/pm.txt"
curl -sS -G "$URL/api/1/series" --data-urlencode 'query=cpu{service="utf8"}' -d by=function -d format=prometheus \
	-d from="$H" -d to=$((H + 3599)) -d step=3600 >"$T/u8.txt"
check "/api/1/series?format=prometheus: a function name not UTF-8 passes promtool" promtool check metrics <"$T/u8.txt"
expect "... its bad bytes are U+FFFD each" 1 "$(grep -c $'function="main.bad\xef\xbf\xbd\xef\xbf\xbd\\\\""' "$T/u8.txt")"
gauge() { awk -v k="$1" '$1 == k {print $2}' "$T/pm.txt"; }
api_total() { # TYPE SERVICE [unit=cores]: the window's total from /api/1/series
	curl -sS -G "$URL/api/1/series" --data-urlencode "query=$1{service=\"$2\"}" -d from="$H" -d to=$((H + 3599)) \
		-d step=3600 ${3:+-d "$3"} | jq -r '.body.series[0].points[0][1]'
}
bad=
for s in auth search; do
	g=$(gauge "profd_profile_cpu_cores{service=\"$s\",function=\"\"}") a=$(api_total cpu "$s" unit=cores)
	python3 -c "import sys; a, g = float('$a'), float('${g:-nan}'); sys.exit(0 if a > 0 and abs(a - g) <= 1e-5 * a else 1)" ||
		bad+="$s cpu: gauge '$g' vs API '$a'; "
	g=$(gauge "profd_profile_value{service=\"$s\",type=\"heap\",sample_type=\"inuse_space\",unit=\"bytes\",function=\"\"}")
	a=$(api_total heap "$s")
	[ -n "$g" ] && [ "$g" = "$a" ] || bad+="$s heap: gauge '$g' vs API '$a'; "
done
[ -z "$bad" ] && ok "/metrics/profiles: each service's cpu (cores) and heap totals = API v1's series of the window" ||
	fail "/metrics/profiles totals" "$bad"
nfn=$(grep -c '^profd_profile_cpu_cores{service="auth",function="[^"]' "$T/pm.txt")
expect "/metrics/profiles: auth's top 5 functions (--profile-metrics-top 5)" 5 "$nfn"
expect "/metrics/profiles: the window's end" "$((H + 3600))" "$(gauge profd_profile_metrics_window_end_timestamp_seconds)"
expect "/metrics/profiles: the services whose cpu cannot be in cores (odd, utf8) are left out and counted" "0 0 2" \
	"$(grep -c 'service="odd"' "$T/pm.txt") $(grep -c 'service="utf8"' "$T/pm.txt") $(gauge profd_profile_metrics_skipped_groups)"
check "/metrics/profiles: the service left out is logged with the reason" \
	grep -q 'level=warn component=metrics .*left out: cpu{service=\\"odd\\"}: .*samples/count' "$T/serve.log"
kill "$SPID" && wait "$SPID" 2>/dev/null
"$PROFD" serve --addr "127.0.0.1:$PORT" --data-dir "$T/data" --retention 0 --profile-metrics-window 1h \
	--profile-metrics-delay 0s --profile-metrics-max-series 3 -q 2>"$T/serve2.log" &
SPID=$!
[ -n "$(serve_port "$T/serve2.log" "$SPID")" ] || { fail "setup: serve 2" "$(head -c 300 "$T/serve2.log")"; exit 1; }
curl -sS "$URL/metrics/profiles" >"$T/pm3.txt"
kept=$(grep -c '^profd_profile_\(cpu_cores\|value\){' "$T/pm3.txt")
dropped=$(awk '$1 == "profd_profile_metrics_dropped_series" {print $2}' "$T/pm3.txt")
total=$(grep -c '^profd_profile_\(cpu_cores\|value\){' <(sed 's/--profile-metrics-top 5//' "$T/pm.txt"))
[ "$kept" = 3 ] && [ "$dropped" -gt 0 ] && ok "/metrics/profiles: --profile-metrics-max-series 3 keeps 3 and counts the $dropped dropped" ||
	fail "/metrics/profiles: series cap" "kept $kept, dropped '$dropped' (of $total with top 5)"
kill "$SPID" && wait "$SPID" 2>/dev/null
"$PROFD" serve --addr "127.0.0.1:$PORT" --data-dir "$T/data" --retention 0 --profile-metrics-window 1h \
	--profile-metrics-delay 0s --profile-metrics-top 5 -q 2>"$T/serve3.log" &
SPID=$!
[ -n "$(serve_port "$T/serve3.log" "$SPID")" ] || { fail "setup: serve 3" "$(head -c 300 "$T/serve3.log")"; exit 1; }

# ---- 2. a real Prometheus -------------------------------------------------------------------
PP=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
cat >"$T/prom.yml" <<EOF
global: {scrape_interval: 1s, evaluation_interval: 1s}
scrape_configs:
  - job_name: profd-profiles
    metrics_path: /metrics/profiles
    static_configs: [{targets: ["127.0.0.1:$PORT"]}]
  - job_name: profd
    static_configs: [{targets: ["127.0.0.1:$PORT"]}]
EOF
check "prometheus: promtool check config" promtool check config "$T/prom.yml"
prometheus --config.file="$T/prom.yml" --storage.tsdb.path="$T/tsdb" --web.listen-address="127.0.0.1:$PP" \
	--log.level=warn >"$T/prom.log" 2>&1 &
PROM=http://127.0.0.1:$PP
q() { curl -sS -G "$PROM/api/v1/query" --data-urlencode "query=$1"; }
got=
for _ in $(seq 150); do # ~15 s: started, and 3 scrapes of each job
	got=$(q 'count_over_time(profd_profile_cpu_cores{service="auth",function=""}[1m]) >= 3 and on() count_over_time(profd_build_info[1m]) >= 3' 2>/dev/null |
		jq -r '.data.result | length' 2>/dev/null)
	[ "$got" = 1 ] && break
	sleep 0.1
done
[ "$got" = 1 ] && ok "prometheus: scraped /metrics/profiles and /metrics" || fail "prometheus: scrape" "$(tail -5 "$T/prom.log")"
bad=
for s in auth search; do
	p=$(q "profd_profile_cpu_cores{service=\"$s\",function=\"\"}" | jq -r '.data.result[0].value[1]')
	g=$(gauge "profd_profile_cpu_cores{service=\"$s\",function=\"\"}")
	python3 -c "import sys; sys.exit(0 if abs(float('$p') - float('$g')) <= 1e-9 + 1e-6 * float('$g') else 1)" 2>/dev/null || bad+="$s: prometheus '$p', profd '$g'; "
done
[ -z "$bad" ] && ok "prometheus: its query API gives back profd's values" || fail "prometheus: values" "$bad"
up=$(q 'up' | jq -r '[.data.result[] | .value[1]] | join(",")')
expect "prometheus: both targets up" "1,1" "$up"

# ---- 3. the dashboard -------------------------------------------------------------------------
D=$ROOT/deploy/grafana/profd.json
if jq -e '.panels | length >= 4' "$D" >/dev/null && [ "$(jq -r '.uid' "$D")" = profd-fleet ]; then ok "dashboard: valid JSON, $(jq '.panels | length' "$D") panels"
else fail "dashboard: JSON" "$(jq -c . "$D" 2>&1 | head -c 300)"; fi
fn=$(jq -r '.templating.list[] | select(.name == "function") | .query' "$D")
bad= n=0
while IFS=$'\t' read -r title expr; do
	expr=${expr//'${function}'/$fn}
	r=$(q "$expr")
	[ "$(jq -r .status <<<"$r")" = success ] || bad+="$title: $(jq -r .error <<<"$r"); "
	case $title in Fleet*|Heap*|Top*) [ "$(jq '.data.result | length' <<<"$r")" -ge 1 ] || bad+="$title: no data; " ;; esac
	n=$((n + 1))
done < <(jq -r '.panels[] | .title as $t | .targets[] | [$t, .expr] | @tsv' "$D")
[ -z "$bad" ] && [ "$n" -ge 6 ] && ok "dashboard: all $n queries run in Prometheus; fleet CPU, heap and top functions have data" ||
	fail "dashboard: queries" "$bad"
if [ "$(jq -r '[.panels[].fieldConfig.defaults.links[]?.url | test("^\\$\\{profd_url\\}/\\?")] | all' "$D")" = true ]; then
	ok "dashboard: every panel links to the profd UI for its range"
else fail "dashboard: links" "$(jq -c '[.panels[].fieldConfig.defaults.links]' "$D" | head -c 300)"; fi
no_sanitizer "prometheus: no sanitizer report" "$T"/serve*.log
