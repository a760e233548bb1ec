#!/usr/bin/env bash
# make_legacy_seeds.sh — regenerate the legacy-format fuzz seeds
# (tests/fuzz/corpus/legacy/), reproducibly:
#  - Debian's golang-github-google-pprof-dev testdata
#    (/usr/share/gocode/src/github.com/google/pprof/profile/testdata/): the
#    small C++ and Go legacy profiles Google's own parser tests use (heap,
#    growth, contention, threadz, binary CPU), cut to their first 8 KiB
#    except the binary CPU ones (kept whole: they end in their memory map);
#  - hand-written seeds below for Go's formats (heap with # symbol lines and
#    the runtime.MemStats tail, contention, mutex, goroutine, threadcreate,
#    a /proc maps section with $attr lines) and for the refusals (HTML,
#    JSON, a debug=2 goroutine dump).
# Run from the repo root.
set -euo pipefail
src=/usr/share/gocode/src/github.com/google/pprof/profile/testdata
out=tests/fuzz/corpus/legacy
mkdir -p "$out"
for f in cppbench.heap cppbench.growth cppbench.contention cppbench.thread cppbench.thread.all \
	cppbench.thread.none go.godoc.thread gobench.heap; do
	head -c 8192 "$src/$f" >"$out/debian-$f"
done
for f in go.crc32.cpu gobench.cpu; do
	cp "$src/$f" "$out/debian-$f"
done
printf '%s\n' 'heap profile: 3: 6144 [10: 20480] @ heap/1048576' \
	'1: 2048 [5: 10240] @ 0x4a1b2d 0x4a1c01 0x43e1a1' \
	'#	0x4a1b2c	main.foo+0x2c	/src/main.go:12' \
	'0: 0 [3: 6144] @ 0x4a1d01' '2: 4096 [2: 4096] @' '' \
	'# runtime.MemStats' '# Alloc = 123456' '# NumGC = 3' >"$out/go-heap.txt"
printf '%s\n' '--- contention:' 'cycles/second=2096000242' \
	'1520000 3 @ 0x44a0e1 0x46ef01 0x4a1b2d' '#	0x44a0e0	sync.(*Mutex).Lock+0x40	/go/sync/mutex.go:81' \
	'900 1 @ 0x44a0e1' >"$out/go-block.txt"
printf '%s\n' '--- mutex:' 'cycles/second=2096000242' 'sampling period=5' \
	'40000 2 @ 0x44a2a1 0x4a1b2d 0x46ef01' >"$out/go-mutex.txt"
printf '%s\n' 'goroutine profile: total 4' '3 @ 0x43a5c6 0x40743b 0x46ee81' \
	'#	0x43a5c5	runtime.gopark+0xe5	/go/runtime/proc.go:363' '' '1 @ 0x46ee81' >"$out/go-goroutine.txt"
printf '%s\n' 'threadcreate profile: total 2' '1 @ 0x43c2e1 0x43d001' '1 @ 0x43c2e1' >"$out/go-threadcreate.txt"
printf '%s\n' 'heap profile: 1: 64 [1: 64] @ heap_v2/524288' '1: 64 [1: 64] @ 0x400a01 0x7f0000001001' \
	'--- Memory map: ---' 'build=/opt' '00400000-00410000 r-xp 00000000 fc:01 12 $build/app' \
	'00410000-00420000 r-xp 00010000 fc:01 12 $build/app' '7f0000000000-7f0000100000: /lib/libc.so.6 (@1000) abcdef' \
	'I1201 12:00:00.000 main.cc:12] 7f0000100000-7f0000200000 r--p 00000000 00:00 0 /x' >"$out/maps-heap.txt"
printf '<!DOCTYPE html>\n<html><body>login</body></html>\n' >"$out/refuse-html"
printf '{"error":"unauthorized"}\n' >"$out/refuse-json"
printf 'goroutine 1 [running]:\nmain.main()\n\t/src/main.go:5 +0x1d\n' >"$out/refuse-debug2"
printf 'go 1.19 trace\0\0\0\x00\x01\x02\x03' >"$out/refuse-trace"
printf '/usr/bin/app\0-addr\0:6060' >"$out/refuse-cmdline"
printf 'num_symbols: 1\n0x401000 main.main\n' >"$out/refuse-symbol"
# found by fuzz_legacy: a heap sample whose "bytes" label is 0 (protobuf cannot carry it)
echo 'aGVhcCBwcm9maWxlOiAxOiA2NCBbMTogNjRdIEAgaGVhcF92Mi81MjQyODgKMTQ6NiAgWzE6IDY0XSBAIDB4NDAwYTAxIDB4N2YwMDAwMDAxMDAxCi0tLSBNZW1vcnkgbWFwOiAtLS0KYnVpbGQ9L29wdAowMDQwMDAwMC0wMDQxMDAwMCByLXhwIDAwMDgwMDA6MDAuMDAwIG1haW4uY2M6MTJdIDdmMDAwMDEwMDAwMC03ZjAwMDAyMDAwMDAgbS0tcCAwMDAwMDAwMCAwMDowMCAwIC94Cg==' |
	base64 -d >"$out/fuzz-bytes0-label"
ls -l "$out"
