#!/usr/bin/env bash
# make_seeds.sh — regenerate the pprof fuzz seeds from a live examples/goapp:
# raw (decompressed) protos of every Go profile type, trimmed to small ones,
# plus one gzip seed. Run from the repo root after `make build/goapp`.
set -euo pipefail
BUILD=${BUILD:-build}
out=tests/fuzz/corpus/pprof
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
tests/e2e/capture.sh "$BUILD/goapp" "$tmp" 1 >/dev/null
for t in cpu heap allocs block mutex goroutine threadcreate; do
	gzip -dc "$tmp/$t.pb.gz" >"$out/seed-$t.pb"
done
cp "$tmp/threadcreate.pb.gz" "$out/seed-threadcreate.pb.gz"
ls -l "$out"

# storeblob: real blobs of a store (headers, sample blocks, rollup tables),
# written by the store's unit test (`make BUILD=... $BUILD/tests/test_store` first)
sb=tests/fuzz/corpus/storeblob
mkdir -p "$sb"
rm -f "$sb"/seed-*
PD_WRITE_SEEDS=$PWD/$sb "$BUILD/tests/test_store" >/dev/null
ls -l "$sb"
