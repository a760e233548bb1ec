#!/usr/bin/env bash
# test_serve_config.sh — `profd serve --config FILE` and `--print-config`
# (docs/operations.md "A configuration file"):
#   1. a file's flags act as the same flags on the command line (a max-body
#      and a retention that refuse, the address), and --print-config of the
#      file equals --print-config of the same flags; the command line wins
#      over the file (flags > file > defaults); --print-config reads
#      abbreviated flags as getopt does, prints no password of --store's
#      URL; --config is not abbreviated (--conf would be ignored);
#   2. its scrape: section is the scraper's YAML: a real goapp target is
#      scraped into the store;
#   3. bad files exit 2 with FILE:LINE:COL (unknown key, a key given twice,
#      a list for a value, a bad boolean, not YAML, a scrape: error at its
#      own line, after non-ASCII text or a byte order mark too; a UTF-16
#      file with scrape:, a second YAML document); a missing file exits 1.
# Run: BUILD=build bash tests/e2e/test_serve_config.sh
# shellcheck source-path=SCRIPTDIR source=lib.sh
source "$(dirname "$0")/lib.sh"
go_bins_from_build GOAPP # Go programs, not sanitized
need_built 1 "make && make build/goapp" "$PROFD" "$GOAPP"
need_cmds 1 curl python3
kill_started_on_exit
free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
head -c 3000 /dev/urandom | gzip -c >"$T/big.gz" # 3 KB: over a max-body of 2KiB
start_goapp cfgapp auth -service cfgapp
curl -sf -o "$T/heap.pb.gz" "http://127.0.0.1:$PORT_cfgapp/debug/pprof/heap" || { fail "setup: a heap profile" "goapp"; exit 1; }

# ---- 1. the file's flags = the same flags ------------------------------------------------------
P1=$(free_port)
cat >"$T/c.yaml" <<EOF
# a collector's configuration
addr: 127.0.0.1:$P1
data-dir: $T/data1
retention: 2h
max-body: 2KiB
metrics-open: true
quiet: false
EOF
"$PROFD" serve --config "$T/c.yaml" --print-config >"$T/p-file.yaml"
"$PROFD" serve --addr "127.0.0.1:$P1" --data-dir "$T/data1" --retention 2h --max-body 2KiB --metrics-open --print-config >"$T/p-flags.yaml"
if diff <(grep -v '^#' "$T/p-file.yaml") <(grep -v '^#' "$T/p-flags.yaml") >"$T/d" && grep -q '^max-body: 2KiB$' "$T/p-file.yaml"; then
	ok "--print-config: the file's settings are the same flags' ($(grep -vc '^#' "$T/p-file.yaml") settings)"
else fail "--print-config: file = flags" "$(head -c 400 "$T/d")"; fi
"$PROFD" serve --config "$T/c.yaml" 2>"$T/s1.log" &
SPID=$!
port=$(serve_port "$T/s1.log" "$SPID")
expect "--config: serves on the file's address" "$P1" "$port"
code=$(curl -s -o /dev/null -w '%{http_code}' --data-binary "@$T/big.gz" "http://127.0.0.1:$P1/api/0/profiles?service=a&type=cpu")
expect "--config: the file's max-body refuses a bigger upload (413)" 413 "$code"
kill "$SPID" && wait "$SPID" 2>/dev/null
"$PROFD" serve --config "$T/c.yaml" --max-body 1MiB --retention 1h --print-config >"$T/p-over.yaml"
if grep -q '^max-body: 1MiB$' "$T/p-over.yaml" && grep -q '^retention: 1h$' "$T/p-over.yaml" && grep -q "^data-dir: $T/data1\$" "$T/p-over.yaml"; then
	ok "the command line wins over the file (max-body, retention), the rest stays the file's"
else fail "command line over file" "$(cat "$T/p-over.yaml")"; fi
"$PROFD" serve --config "$T/c.yaml" --max-body 1MiB 2>"$T/s2.log" &
SPID=$!
serve_port "$T/s2.log" "$SPID" >/dev/null
code=$(curl -s -o "$T/post" -w '%{http_code}' --data-binary "@$T/big.gz" "http://127.0.0.1:$P1/api/0/profiles?service=a&type=cpu")
expect "... and acts so (the 3 KB upload gets past the size check: 400, not a profile)" 400 "$code"
code=$(curl -s -o /dev/null -w '%{http_code}' "http://127.0.0.1:$P1/metrics")
expect "--config: metrics-open: true" 200 "$code"
code=$(curl -s -o "$T/old" -w '%{http_code}' --data-binary "@$T/heap.pb.gz" \
	"http://127.0.0.1:$P1/api/0/profiles?service=a&type=heap&created_at=$(($(date +%s) - 3 * 3600))")
code2=$(curl -s -o /dev/null -w '%{http_code}' --data-binary "@$T/heap.pb.gz" \
	"http://127.0.0.1:$P1/api/0/profiles?service=a&type=heap&created_at=$(($(date +%s) - 3600))")
if [ "$code" != 200 ] && grep -q 'retention' "$T/old" && [ "$code2" = 200 ]; then ok "--config: the file's retention (2h): 3 h ago refused, 1 h ago stored"
else fail "--config: retention" "$code $(cat "$T/old"); 1h ago: $code2"; fi
kill "$SPID" && wait "$SPID" 2>/dev/null

"$PROFD" serve --store 'clickhouse://profd:s3cret-pw@127.0.0.1:8123/profd' --print-config >"$T/p-store.yaml" 2>&1
printf 'store: clickhouse://profd:s3cret-pw@127.0.0.1:8123/profd\n' >"$T/store.yaml"
"$PROFD" serve --config "$T/store.yaml" --print-config >"$T/p-store2.yaml" 2>&1
if ! grep -q 's3cret-pw' "$T/p-store.yaml" "$T/p-store2.yaml" && grep -q '^store: clickhouse://profd:REDACTED@127.0.0.1:8123/profd$' "$T/p-store.yaml" &&
	grep -q '^store: clickhouse://profd:REDACTED@' "$T/p-store2.yaml"; then
	ok "--print-config: the password in --store's URL is not printed (flag and file)"
else fail "--print-config: no password" "$(cat "$T/p-store.yaml" "$T/p-store2.yaml")"; fi
"$PROFD" serve --tok "$T/some-tokens" --metrics --data-dir="$T/d0" --print-config >"$T/p-abbr.yaml" 2>&1
if grep -q "^tokens: $T/some-tokens\$" "$T/p-abbr.yaml" && grep -q '^metrics-open: true$' "$T/p-abbr.yaml" && grep -q "^data-dir: $T/d0\$" "$T/p-abbr.yaml"; then
	ok "--print-config: flags as getopt reads them (--tok is --tokens, --metrics is --metrics-open)"
else fail "--print-config: abbreviated flags" "$(cat "$T/p-abbr.yaml")"; fi
expect_exit "an abbreviated --config (--conf FILE) is refused, not ignored" 2 'write --config and --print-config in full' \
	"$PROFD" serve --conf "$T/c.yaml" --print-config

# ---- 2. the scrape: section ---------------------------------------------------------------------
P2=$(free_port)
cat >"$T/s.yaml" <<EOF
addr: 127.0.0.1:$P2
data-dir: $T/data2
retention: 0
scrape:
  global:
    interval: 1s
    types: [heap, goroutine]
  scrape_configs:
    - job_name: cfgapp
      static_configs:
        - targets: ["127.0.0.1:$PORT_cfgapp"]
EOF
: >"$T/s3.log"
"$PROFD" serve --config "$T/s.yaml" 2>"$T/s3.log" &
SPID=$!
serve_port "$T/s3.log" "$SPID" >/dev/null
n=0
for _ in $(seq 100); do
	n=$(curl -s "http://127.0.0.1:$P2/metrics" | awk '$1 == "profd_scrape_stored_total{result=\"ok\"}" {print $2}')
	[ -n "$n" ] && [ "$n" -ge 2 ] && break
	sleep 0.1
done
svc=$(curl -s "http://127.0.0.1:$P2/api/0/services")
if [ -n "$n" ] && [ "$n" -ge 2 ] && grep -q '"cfgapp"' <<<"$svc"; then ok "--config scrape: the scraper's YAML: the goapp target scraped into the store ($n profiles)"
else fail "--config scrape" "stored '$n', services $svc, log $(head -c 400 "$T/s3.log")"; fi
kill "$SPID" && wait "$SPID" 2>/dev/null

# ---- 3. bad files -------------------------------------------------------------------------------
bad() { # NAME CONTENT REGEX
	printf '%s' "$2" >"$T/bad.yaml"
	expect_exit "bad config: $1: exit 2, FILE:LINE:COL" 2 "$3" "$PROFD" serve --config "$T/bad.yaml" --data-dir "$T/nodata"
}
bad "unknown key" $'addr: :0\nbogus: 1\n' "bad.yaml:2:1: unknown key \"bogus\""
bad "a list for a value" $'addr: [1, 2]\n' "bad.yaml:1:7: addr: want a single value"
bad "a bad boolean" $'metrics-open: maybe\n' "bad.yaml:1:15: metrics-open: want true or false"
# (with --print-config: a file taken as it is would print, not serve)
printf 'metrics-open: true\naddr: :0\nmetrics-open: false\n' >"$T/twice.yaml"
expect_exit "bad config: a key given twice (the false would not undo the true): exit 2, FILE:LINE:COL" 2 \
	"twice.yaml:3:1: key \"metrics-open\" given twice \\(first at 1:1\\)" "$PROFD" serve --config "$T/twice.yaml" --print-config
printf 'scrape:\n  global:\n    interval: 1s\nscrape:\n  global:\n    interval: 2s\n' >"$T/twice.yaml"
expect_exit "bad config: scrape: given twice: exit 2" 2 "twice.yaml:4:1: key \"scrape\" given twice" \
	"$PROFD" serve --config "$T/twice.yaml" --print-config
bad "not YAML" $'addr: "\n' "bad.yaml:2:1: not YAML"
bad "not a mapping" $'- addr\n' "bad.yaml:1:1: want a mapping"
bad "a second document (its tokens: would be ignored, the collector open)" $'addr: :0\n---\ntokens: /etc/profd/tokens\n' \
	"bad.yaml:3:1: a second YAML document \\(after ---\\): give one only"
printf 'data-dir: %s\n---\n' "$T/d9" >"$T/trail.yaml"
if "$PROFD" serve --config "$T/trail.yaml" --print-config >"$T/p-trail.yaml" 2>&1 && grep -q "^data-dir: $T/d9\$" "$T/p-trail.yaml"; then
	ok "an empty document after the file's (a trailing ---) is nothing"
else fail "a trailing ---" "$(cat "$T/p-trail.yaml")"; fi
bad "a scrape: error, at its line in the file" $'addr: :0\nscrape:\n  global:\n    intervl: 1s\n' "bad.yaml:4:5: global: unknown key \"intervl\""
# libyaml's marks count characters: the section is cut from the file by bytes
printf '# \xc3\xa9quipe d\xc3\xa9ploiement\ndata-dir: /x\nscrape:\n  global:\n    labels:\n      env: production\n' >"$T/utf8.yaml"
if "$PROFD" serve --config "$T/utf8.yaml" --print-config >"$T/p-utf8.yaml" 2>&1 && grep -q '^      env: production$' "$T/p-utf8.yaml" &&
	! grep -q '^  :' "$T/p-utf8.yaml"; then
	ok "scrape: after non-ASCII text is the section as written (env: production, not env: product)"
else fail "scrape: after non-ASCII text" "$(cat "$T/p-utf8.yaml")"; fi
bad "a scrape: error after a byte order mark, at its line" $'\xef\xbb\xbfaddr: :0\nscrape:\n  global:\n    intervl: 1s\n' "bad.yaml:4:5: global: unknown key \"intervl\""
printf 'scrape:\n  global:\n    intervl: 1s\n' | iconv -f utf-8 -t utf-16 >"$T/u16.yaml"
expect_exit "bad config: a UTF-16 file with scrape: is refused (the section is cut as UTF-8)" 2 "u16.yaml:2:3: scrape: the file is UTF-16: save it as UTF-8" \
	"$PROFD" serve --config "$T/u16.yaml" --print-config
# as big a scrape: section as profd scrape --config takes (16 MiB): 5 MB of targets
python3 -c '
print("data-dir: /x\nscrape:\n  scrape_configs:\n    - service: a\n      static_configs:\n        - targets:")
for i in range(9000): print("          - h%d.example:6060  # %s" % (i, "x" * 500))' >"$T/big.yaml"
n=$("$PROFD" serve --config "$T/big.yaml" --print-config 2>"$T/big.err" | grep -c 'example:6060')
expect "a 5 MB file with 9000 targets in scrape: is read (profd scrape --config takes 16 MiB) $(head -c 200 "$T/big.err")" 9000 "$n"
bad "a bad value, as the flag says it" $'max-body: lots\n' "max-body: bad size 'lots'"
expect_exit "a missing config file: exit 1" 1 "no-such.yaml" "$PROFD" serve --config "$T/no-such.yaml"
no_sanitizer "config: no sanitizer report" "$T"/s*.log
