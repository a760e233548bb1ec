// Command gen writes reproducible synthetic Go CPU profiles (gzipped pprof
// protobuf, written with github.com/google/pprof/profile) for profd's
// benchmarks and tests.
//
// A set of profiles looks like repeated 10 s scrapes of one Go service: every
// profile draws its samples from one model of the service (a function pool, a
// call graph and a pool of stacks), the same function and line always get the
// same location (address and inline frames), and hot stacks recur in almost
// every profile. Merging a set is therefore realistic: the merged profile is
// much smaller than the sum of its inputs.
//
// Usage:
//
//	gen -kind small|large|deep|deepsmall -n N -seed S -o DIR
//	gen -fleet [-services 15] [-pods 150] [-hours 24] [-per-hour 6] -seed S -o DIR
//
// writes DIR/p0000.pb.gz ... and prints a summary (files, total and average
// bytes). Output depends only on -kind, -seed and the file index, so profile
// i is the same whatever -n is.
//
// -fleet writes a day of a fleet (bench/fleet.sh): -pods pods spread over
// -services services, -per-hour CPU profiles per pod per hour for -hours
// hours from 2026-01-01T00:00:00Z, into DIR/SERVICE/POD/NNN.pb.gz, each
// with time_nanos = its creation time (a pod scrapes at a fixed phase in
// the interval). Services differ: each is its own binary (own build id and
// addresses) with its own application packages, in one of three workloads
// (HTTP/JSON API, gRPC backend, queue worker) of different sizes; they
// overlap as real Go services do: the runtime and standard library frames
// and a shared platform library (middleware, clients: the same function
// names, files and lines) appear in all of them.
//
//   - small: ~5-7 KB gzipped; ~70-110 functions, 300-380 samples, depth
//     5-30.
//   - large: ~60-70 KB gzipped; ~1300-1500 functions out of a pool of
//     5000, 1500-2300 samples, depth up to 40, ~5% inlined locations.
//   - deep: the second shape, ~70-80 KB gzipped; stacks 12-64 deep, ~1/3
//     of application locations inlined, every leaf one of 24 renamed
//     copies (many distinct leaf functions), 3000-4200 samples.
//   - deepsmall: the same shape at ~5-6 KB gzipped (~150 functions, 70-100
//     samples).
//
// Sizes are dominated by the Function and Location messages (about 30
// bytes gzipped per function, as in real Go profiles), so the function
// count per profile is what sets the size.
//
// Build offline, either in GOPATH mode from the repository root:
//
//	GO111MODULE=off GOPATH=/usr/share/gocode go build -o OUT ./bench/gen
//
// or in module mode from this directory (go.mod replaces the module with
// Debian's golang-github-google-pprof-dev sources):
//
//	GOFLAGS=-mod=mod GOPROXY=off go build -o OUT .
package main

import (
	"flag"
	"fmt"
	"math"
	"math/rand"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"github.com/google/pprof/profile"
)

// kindSpec holds the shape parameters of one -kind.
type kindSpec struct {
	appFuncs   int     // application functions in the call graph
	helpers    int     // small functions that only appear inlined
	levels     int     // call graph levels of application functions
	fanout     int     // callees per function: 1..fanout
	calleeSkew float64 // >0 favours a function's first callees (shared paths)
	maxLines   int     // distinct lines (call sites) per function: 1..maxLines
	minDepth   int     // stack depth range, in locations
	maxDepth   int     //
	stackPool  int     // distinct stacks the service executes
	minSamples int     // samples per profile range
	maxSamples int     //
	zipf       float64 // skew of stack popularity
	inlineFrac float64 // fraction of application locations with inlined frames
	labelFrac  float64 // fraction of stacks carrying string labels
	tailFrac   float64 // fraction of stacks ending in runtime/stdlib frames
	countScale float64 // sample counts grow with popularity up to about this
	// leafVariants > 0: every stack's leaf is one of this many renamed
	// copies of the leaf function (its own name and code), so a profile
	// holds many distinct leaf functions, as in a big binary where hot
	// paths end in many small functions (the "deep" kinds).
	leafVariants int
}

var kinds = map[string]kindSpec{
	// ~5-7 KB gzipped: ~70-110 functions, 300-380 samples.
	"small": {
		appFuncs: 110, helpers: 10, levels: 24, fanout: 2, calleeSkew: 2, maxLines: 3,
		minDepth: 5, maxDepth: 30, stackPool: 1500,
		minSamples: 300, maxSamples: 380, zipf: 0.9,
		inlineFrac: 0.1, labelFrac: 0.2, tailFrac: 0.3, countScale: 20,
	},
	// ~60-70 KB gzipped: ~1300-1550 functions (pool of 5000), 1500-2300
	// samples.
	"large": {
		appFuncs: 5000, helpers: 200, levels: 36, fanout: 2, calleeSkew: 8, maxLines: 2,
		minDepth: 5, maxDepth: 40, stackPool: 20000,
		minSamples: 1500, maxSamples: 2300, zipf: 0.8,
		inlineFrac: 0.1, labelFrac: 0.2, tailFrac: 0.35, countScale: 40,
	},
	// The second shape (issue 18): deeper stacks (up to 64 locations, a
	// third of them with inlined frames), many distinct leaf functions,
	// thousands of samples per profile.
	// ~70-80 KB gzipped: ~2000-2400 functions, 3000-4200 samples.
	"deep": {
		appFuncs: 500, helpers: 120, levels: 64, fanout: 2, calleeSkew: 6, maxLines: 3,
		minDepth: 12, maxDepth: 64, stackPool: 30000,
		minSamples: 3000, maxSamples: 4200, zipf: 0.7,
		inlineFrac: 0.35, labelFrac: 0.1, tailFrac: 0.4, countScale: 30,
		leafVariants: 10,
	},
	// ~5-6 KB gzipped, the same shape scaled down.
	"deepsmall": {
		appFuncs: 64, helpers: 8, levels: 64, fanout: 2, calleeSkew: 3, maxLines: 2,
		minDepth: 12, maxDepth: 64, stackPool: 800,
		minSamples: 70, maxSamples: 100, zipf: 0.9,
		inlineFrac: 0.35, labelFrac: 0.1, tailFrac: 0.4, countScale: 20,
		leafVariants: 2,
	},
}

const (
	periodNanos   = 10_000_000     // 100 Hz, like Go's CPU profiler
	durationNanos = 10_000_000_000 // each profile covers 10 s
	startNanos    = 1_767_225_600 * int64(1_000_000_000)
	textStart     = 0x401000 // where the main binary's text starts
)

func main() {
	kind := flag.String("kind", "small", "profile kind: small, large, deep or deepsmall")
	n := flag.Int("n", 10, "number of profiles to write")
	seed := flag.Int64("seed", 1, "PRNG seed; same seed, same profiles")
	out := flag.String("o", "", "output directory (created if missing)")
	fleet := flag.Bool("fleet", false, "write a fleet's day: DIR/SERVICE/POD/NNN.pb.gz")
	services := flag.Int("services", 15, "-fleet: services")
	pods := flag.Int("pods", 150, "-fleet: pods, spread round-robin over the services")
	hours := flag.Int("hours", 24, "-fleet: hours of profiles")
	perHour := flag.Int("per-hour", 6, "-fleet: profiles per pod per hour")
	flag.Parse()

	if *fleet {
		if *out == "" || *services < 1 || *pods < *services || *hours < 1 || *perHour < 1 || flag.NArg() != 0 {
			fmt.Fprintln(os.Stderr, "usage: gen -fleet [-services N] [-pods N] [-hours N] [-per-hour N] -seed S -o DIR")
			os.Exit(2)
		}
		writeFleet(*out, *seed, *services, *pods, *hours, *perHour)
		return
	}

	spec, ok := kinds[*kind]
	if !ok || *out == "" || *n < 1 || flag.NArg() != 0 {
		fmt.Fprintln(os.Stderr, "usage: gen -kind small|large|deep|deepsmall -n N -seed S -o DIR")
		os.Exit(2)
	}
	if err := os.MkdirAll(*out, 0o755); err != nil {
		fatal(err)
	}

	m := newModel(spec, *kind, *seed, "", 0)
	width := len(fmt.Sprint(*n - 1))
	if width < 4 {
		width = 4
	}
	var total int64
	funcs, samples := 0, 0
	for i := 0; i < *n; i++ {
		p := m.profile(i)
		if err := p.CheckValid(); err != nil {
			fatal(fmt.Errorf("profile %d: %v", i, err))
		}
		name := filepath.Join(*out, fmt.Sprintf("p%0*d.pb.gz", width, i))
		size, err := writeProfile(name, p)
		if err != nil {
			fatal(err)
		}
		total += size
		funcs += len(p.Function)
		samples += len(p.Sample)
	}
	fmt.Printf("gen: kind=%s seed=%d files=%d total_bytes=%d avg_bytes=%d avg_functions=%d avg_samples=%d dir=%s\n",
		*kind, *seed, *n, total, total/int64(*n), funcs / *n, samples / *n, *out)
}

func fatal(err error) {
	fmt.Fprintln(os.Stderr, "gen:", err)
	os.Exit(1)
}

// writeProfile writes p gzipped to name and returns the file size.
func writeProfile(name string, p *profile.Profile) (int64, error) {
	f, err := os.Create(name)
	if err != nil {
		return 0, err
	}
	if err := p.Write(f); err != nil {
		f.Close()
		return 0, err
	}
	if err := f.Close(); err != nil {
		return 0, err
	}
	st, err := os.Stat(name)
	if err != nil {
		return 0, err
	}
	return st.Size(), nil
}

// ---------------------------------------------------------------------------
// The service model.

// function is one function of the modelled binary.
type function struct {
	name, file string
	lines      []int64 // lines where it calls others or spends CPU
	size       uint64  // bytes of machine code
	base       uint64  // address of its first instruction
	callees    []int   // indexes into model.funcs
}

// locKey identifies a location: a function and an index into its lines.
type locKey struct{ fn, line int }

// frame is one profile.Line of a location.
type frame struct {
	fn   int
	line int64
}

// location is the fixed address and line list of a locKey.
type location struct {
	addr   uint64
	frames []frame // innermost (inlined) first, the function itself last
}

// stack is one call stack of the service, leaf first.
type stack struct {
	locs   []locKey
	labels int // index into labelSets, or -1
	weight float64
}

// model is everything shared by the profiles of a set.
type model struct {
	spec      kindSpec
	seed      int64
	salt      int64
	service   string // fleet: the service's name ("" = the -kind sets)
	shared    int    // fleet: application functions 0..shared-1 are the shared platform library
	funcs     []function
	helpers   []int // functions that only appear inlined
	locs      map[locKey]*location
	variants  map[[2]int]int // (leaf function, variant) -> its copy's index
	textEnd   uint64         // end of the laid-out text (variants go after it)
	stacks    []stack
	maxWeight float64
	mapping   *profile.Mapping
}

var orgs = []string{"acme", "globex", "initech", "umbrella", "hooli", "stark", "wayne", "tyrell"}

// labelSets are the pprof label sets some stacks carry.
var labelSets = func() []map[string][]string {
	handlers := []string{"/api/v1/users", "/api/v1/orders", "/api/v1/search", "/api/v1/login", "/healthz", "/metrics"}
	var sets []map[string][]string
	for i, h := range handlers {
		sets = append(sets, map[string][]string{"handler": {h}})
		if i < 4 {
			sets = append(sets, map[string][]string{
				"handler": {h}, "tenant": {fmt.Sprintf("tenant-%d", i+1)},
			})
		}
	}
	return sets
}()

// goroot is where the modelled binary's Go sources lived.
const goroot = "/usr/local/go/src/"

// stdFunc describes a runtime or standard library function.
type stdFunc struct {
	name, file string
	line       int64
}

// entryPoints are the goroutine entry functions (called by runtime.goexit).
var entryPoints = []stdFunc{
	{"net/http.(*conn).serve", "net/http/server.go", 1995},
	{"runtime.main", "runtime/proc.go", 250},
	{"net/http.(*persistConn).readLoop", "net/http/transport.go", 2124},
	{"google.golang.org/grpc.(*Server).serveStreams.func1.2", "/go/pkg/mod/google.golang.org/grpc@v1.56.3/server.go", 957},
	{"github.com/acme/workerpool.(*Pool).worker", "/build/src/github.com/acme/workerpool/pool.go", 88},
}

// tails are runtime/stdlib call chains (caller first) that application
// stacks often end in.
var tails = [][]stdFunc{
	{{"runtime.newobject", "runtime/malloc.go", 1192}, {"runtime.mallocgc", "runtime/malloc.go", 1040}},
	{{"runtime.makeslice", "runtime/slice.go", 103}, {"runtime.mallocgc", "runtime/malloc.go", 1040}, {"runtime.memclrNoHeapPointers", "runtime/memclr_amd64.s", 182}},
	{{"runtime.growslice", "runtime/slice.go", 266}, {"runtime.memmove", "runtime/memmove_amd64.s", 383}},
	{{"runtime.mapaccess2_faststr", "runtime/map_faststr.go", 108}},
	{{"runtime.mapassign_faststr", "runtime/map_faststr.go", 203}, {"runtime.hashGrow", "runtime/map.go", 1068}},
	{{"runtime.memmove", "runtime/memmove_amd64.s", 383}},
	{{"runtime.concatstrings", "runtime/string.go", 47}, {"runtime.rawstringtmp", "runtime/string.go", 175}},
	{{"encoding/json.Marshal", "encoding/json/encode.go", 160}, {"encoding/json.(*encodeState).marshal", "encoding/json/encode.go", 295}, {"encoding/json.(*encodeState).reflectValue", "encoding/json/encode.go", 323}},
	{{"encoding/json.Unmarshal", "encoding/json/decode.go", 107}, {"encoding/json.(*decodeState).object", "encoding/json/decode.go", 715}, {"encoding/json.(*decodeState).literalStore", "encoding/json/decode.go", 1003}},
	{{"internal/poll.(*FD).Write", "internal/poll/fd_unix.go", 383}, {"syscall.write", "syscall/zsyscall_linux_amd64.go", 924}, {"syscall.Syscall", "syscall/syscall_linux.go", 90}, {"runtime/internal/syscall.Syscall6", "runtime/internal/syscall/asm_linux_amd64.s", 36}},
	{{"internal/poll.(*FD).Read", "internal/poll/fd_unix.go", 167}, {"syscall.read", "syscall/zsyscall_linux_amd64.go", 696}, {"syscall.Syscall", "syscall/syscall_linux.go", 90}, {"runtime/internal/syscall.Syscall6", "runtime/internal/syscall/asm_linux_amd64.s", 36}},
	{{"fmt.Sprintf", "fmt/print.go", 239}, {"fmt.(*pp).doPrintf", "fmt/print.go", 1110}, {"fmt.(*pp).printArg", "fmt/print.go", 694}},
	{{"crypto/sha256.(*digest).Write", "crypto/sha256/sha256.go", 201}, {"crypto/sha256.block", "crypto/sha256/sha256block_amd64.go", 13}, {"crypto/sha256.blockAVX2", "crypto/sha256/sha256block_amd64.s", 1012}},
	{{"sort.Slice", "sort/slice.go", 23}, {"sort.pdqsort_func", "sort/zsortfunc.go", 114}, {"sort.insertionSort_func", "sort/zsortfunc.go", 12}},
	{{"strconv.AppendInt", "strconv/itoa.go", 47}, {"strconv.formatBits", "strconv/itoa.go", 195}},
	{{"bytes.(*Buffer).Write", "bytes/buffer.go", 179}, {"bytes.(*Buffer).grow", "bytes/buffer.go", 149}},
	{{"sync.(*Mutex).Lock", "sync/mutex.go", 90}, {"sync.(*Mutex).lockSlow", "sync/mutex.go", 142}, {"runtime.procyield", "runtime/asm_amd64.s", 770}},
	{{"runtime.selectgo", "runtime/select.go", 328}},
}

// runtimeStacks are background runtime stacks (caller first) that appear in
// every Go CPU profile: GC workers and the scheduler.
var runtimeStacks = [][]stdFunc{
	{{"runtime.goexit", "runtime/asm_amd64.s", 1598}, {"runtime.gcBgMarkWorker", "runtime/mgc.go", 1295}, {"runtime.systemstack", "runtime/asm_amd64.s", 509}, {"runtime.gcBgMarkWorker.func2", "runtime/mgc.go", 1340}, {"runtime.gcDrain", "runtime/mgcmark.go", 1130}, {"runtime.scanobject", "runtime/mgcmark.go", 1286}},
	{{"runtime.goexit", "runtime/asm_amd64.s", 1598}, {"runtime.gcBgMarkWorker", "runtime/mgc.go", 1295}, {"runtime.systemstack", "runtime/asm_amd64.s", 509}, {"runtime.gcBgMarkWorker.func2", "runtime/mgc.go", 1340}, {"runtime.gcDrain", "runtime/mgcmark.go", 1130}, {"runtime.greyobject", "runtime/mgcmark.go", 1445}},
	{{"runtime.goexit", "runtime/asm_amd64.s", 1598}, {"runtime.bgsweep", "runtime/mgcsweep.go", 297}, {"runtime.sweepone", "runtime/mgcsweep.go", 372}},
	{{"runtime.mcall", "runtime/asm_amd64.s", 459}, {"runtime.park_m", "runtime/proc.go", 3533}, {"runtime.schedule", "runtime/proc.go", 3387}, {"runtime.findrunnable", "runtime/proc.go", 2987}, {"runtime.netpoll", "runtime/netpoll_epoll.go", 126}, {"runtime.epollwait", "runtime/sys_linux_amd64.s", 689}},
	{{"runtime.mstart", "runtime/asm_amd64.s", 394}, {"runtime.mstart0", "runtime/proc.go", 1433}, {"runtime.mstart1", "runtime/proc.go", 1477}, {"runtime.sysmon", "runtime/proc.go", 5241}, {"runtime.usleep", "runtime/sys_linux_amd64.s", 135}},
}

// newModel builds the service shared by all profiles of a set.
func newModel(spec kindSpec, kind string, seed int64, service string, shared int) *model {
	m := &model{spec: spec, seed: seed, locs: map[locKey]*location{}, service: service, shared: shared}
	for _, c := range kind {
		m.salt = m.salt*131 + int64(c)
	}
	rng := rand.New(rand.NewSource(seed*1_000_003 + m.salt))

	std := map[string]int{}
	stdIndex := func(f stdFunc) int {
		if i, ok := std[f.name]; ok {
			return i
		}
		file := f.file
		if !strings.HasPrefix(file, "/") {
			file = goroot + file
		}
		m.funcs = append(m.funcs, function{
			name: f.name, file: file, lines: []int64{f.line},
			size: 0x80 + uint64(rng.Intn(16))*0x20,
		})
		std[f.name] = len(m.funcs) - 1
		return len(m.funcs) - 1
	}

	// Application functions, level by level, followed by inline-only helpers.
	goexit := stdIndex(stdFunc{"runtime.goexit", "runtime/asm_amd64.s", 1598})
	var entries []int
	for _, e := range entryPoints {
		entries = append(entries, stdIndex(e))
	}
	m.funcs[goexit].callees = entries
	byLevel := make([][]int, spec.levels)
	for i := 0; i < spec.appFuncs+spec.helpers; i++ {
		var f function
		switch {
		case m.service == "":
			f = appFunction(rng, i, spec.maxLines, "")
		case i < m.shared: // the same in every service: its own PRNG
			f = appFunction(rand.New(rand.NewSource(int64(i)*7_919+17)), i, 3, "platform/")
		default:
			f = appFunction(rng, i, spec.maxLines, m.service+"/")
		}
		m.funcs = append(m.funcs, f)
		idx := len(m.funcs) - 1
		if i >= spec.appFuncs {
			m.funcs[idx].lines = m.funcs[idx].lines[:1]
			m.helpers = append(m.helpers, idx)
			continue
		}
		// Fewer functions near the top of the stack than in the middle.
		lvl := int(float64(spec.levels) * math.Sqrt(rng.Float64()))
		if i < spec.levels {
			lvl = i // every level has at least one function
		}
		byLevel[lvl] = append(byLevel[lvl], idx)
	}
	for lvl, fns := range byLevel {
		for _, f := range fns {
			if lvl+1 >= spec.levels {
				break
			}
			k := 1 + rng.Intn(spec.fanout)
			for j := 0; j < k; j++ {
				to := lvl + 1 // mostly the next level, so stacks get deep
				if rng.Intn(5) == 0 {
					to++
				}
				if to >= spec.levels {
					to = spec.levels - 1
				}
				cands := byLevel[to]
				m.funcs[f].callees = append(m.funcs[f].callees, cands[rng.Intn(len(cands))])
			}
		}
	}
	for _, e := range entries {
		k := 5 + rng.Intn(10)
		for j := 0; j < k; j++ {
			m.funcs[e].callees = append(m.funcs[e].callees, byLevel[0][rng.Intn(len(byLevel[0]))])
		}
	}
	var tailIdx [][]int
	for _, t := range tails {
		var chain []int
		for _, f := range t {
			chain = append(chain, stdIndex(f))
		}
		tailIdx = append(tailIdx, chain)
	}
	var rtIdx [][]int
	for _, t := range runtimeStacks {
		var chain []int
		for _, f := range t {
			chain = append(chain, stdIndex(f))
		}
		rtIdx = append(rtIdx, chain)
	}

	// Lay the functions out in the text segment in a shuffled order.
	order := rng.Perm(len(m.funcs))
	addr := uint64(textStart)
	for _, i := range order {
		m.funcs[i].base = addr
		addr += m.funcs[i].size
	}
	m.textEnd = addr
	var buildID [20]byte
	rng.Read(buildID[:])
	binary := "/usr/local/bin/shopd"
	if m.service != "" {
		binary = "/usr/local/bin/" + m.service
	}
	m.mapping = &profile.Mapping{
		ID: 1, Start: 0x400000, Limit: (addr + 0x200fff) &^ 0xfff, Offset: 0,
		File: binary, BuildID: fmt.Sprintf("%x", buildID),
		HasFunctions: true, HasFilenames: true, HasLineNumbers: true, HasInlineFrames: true,
	}

	// The stack pool: random walks down the call graph, a few fixed runtime
	// stacks, all with Zipf-like popularity.
	for _, chain := range rtIdx {
		m.stacks = append(m.stacks, stack{locs: m.chainLocs(chain), labels: -1})
	}
	seen := map[string]bool{}
	for len(m.stacks) < spec.stackPool {
		s := m.walk(rng, goexit, tailIdx)
		key := fmt.Sprint(s.locs, s.labels)
		if seen[key] {
			continue
		}
		seen[key] = true
		m.stacks = append(m.stacks, s)
	}
	if spec.leafVariants > 0 { // the copies were laid out past the text
		m.mapping.Limit = (m.textEnd + 0x200fff) &^ 0xfff
	}
	rng.Shuffle(len(m.stacks), func(i, j int) { m.stacks[i], m.stacks[j] = m.stacks[j], m.stacks[i] })
	for i := range m.stacks {
		m.stacks[i].weight = 1 / math.Pow(float64(i+1), spec.zipf)
	}
	m.maxWeight = m.stacks[0].weight
	return m
}

// appFunction makes application function number i: a Go-like name in one
// of ~20-function packages spread over a few organisations (under prefix,
// e.g. "billing/", in a fleet).
func appFunction(rng *rand.Rand, i, maxLines int, prefix string) function {
	pkg := i / 20
	org := orgs[pkg%len(orgs)]
	typ := (i % 20) / 5
	num := i % 20
	path := fmt.Sprintf("github.com/%s/%spkg%02d", org, prefix, pkg)
	var name, file string
	switch r := rng.Intn(10); {
	case r < 6:
		name = fmt.Sprintf("%s.(*Type%02d).Method%02d", path, typ, num)
		file = fmt.Sprintf("type%02d.go", typ)
	case r < 8:
		name = fmt.Sprintf("%s.Func%02d", path, num)
		file = fmt.Sprintf("pkg%02d.go", pkg)
	case r < 9:
		name = fmt.Sprintf("%s.(*Type%02d).Method%02d.func%d", path, typ, num, 1+rng.Intn(3))
		file = fmt.Sprintf("type%02d.go", typ)
	default:
		name = fmt.Sprintf("%s.Type%02d.Method%02d", path, typ, num)
		file = fmt.Sprintf("type%02d.go", typ)
	}
	start := int64(20 + num*60 + rng.Intn(20))
	nl := 1 + rng.Intn(maxLines)
	lines := make([]int64, 0, nl)
	for l := start + 2; len(lines) < nl; l += int64(1 + rng.Intn(12)) {
		lines = append(lines, l)
	}
	return function{
		name: name, file: "/build/src/" + path + "/" + file, lines: lines, size: 0x40 + uint64(nl)*0x40 + uint64(rng.Intn(32))*0x10,
	}
}

// loc returns the location of function fn at its line index li, creating
// it on first use. Its address and inline frames depend only on the model
// seed and (fn, li), so they are identical in every profile.
func (m *model) loc(fn, li int) locKey {
	k := locKey{fn, li}
	if _, ok := m.locs[k]; ok {
		return k
	}
	f := &m.funcs[fn]
	r := rand.New(rand.NewSource(m.seed ^ int64(fn)<<20 ^ int64(li)<<8 ^ m.salt))
	l := &location{addr: f.base + uint64(li)*0x20 + uint64(5+r.Intn(20))}
	if len(f.lines) > 1 && len(m.helpers) > 0 && r.Float64() < m.spec.inlineFrac {
		for j := 1 + r.Intn(2); j > 0; j-- { // 2 or 3 Line entries in all
			h := m.helpers[r.Intn(len(m.helpers))]
			l.frames = append(l.frames, frame{h, m.funcs[h].lines[0]})
		}
	}
	l.frames = append(l.frames, frame{fn, f.lines[li]})
	m.locs[k] = l
	return k
}

// variant returns the index of copy v of function fn (a leaf): the same
// file, its own name, lines and code placed after the text laid out so far.
func (m *model) variant(fn, v int) int {
	if m.variants == nil {
		m.variants = map[[2]int]int{}
	}
	k := [2]int{fn, v}
	if i, ok := m.variants[k]; ok {
		return i
	}
	f := m.funcs[fn]
	c := function{
		name: fmt.Sprintf("%s.gen%02d", f.name, v), file: f.file,
		lines: make([]int64, len(f.lines)), size: f.size, base: m.textEnd,
	}
	for j, l := range f.lines {
		c.lines[j] = l + int64(400+40*v)
	}
	m.textEnd += c.size
	m.funcs = append(m.funcs, c)
	m.variants[k] = len(m.funcs) - 1
	return len(m.funcs) - 1
}

// callLine is the line index from which fn calls callee (fixed per pair).
func (m *model) callLine(fn, callee int) int {
	return (fn*31 + callee*17) % len(m.funcs[fn].lines)
}

// chainLocs turns a caller-first chain of functions into leaf-first
// locations.
func (m *model) chainLocs(chain []int) []locKey {
	locs := make([]locKey, len(chain))
	for i, fn := range chain {
		li := 0
		if i+1 < len(chain) {
			li = m.callLine(fn, chain[i+1])
		}
		locs[len(chain)-1-i] = m.loc(fn, li)
	}
	return locs
}

// walk makes one stack: from runtime.goexit down the call graph to a
// random depth, sometimes ending in a runtime/stdlib tail.
func (m *model) walk(rng *rand.Rand, root int, tails [][]int) stack {
	spec := m.spec
	depth := spec.minDepth + rng.Intn(spec.maxDepth-spec.minDepth+1)
	var tail []int
	if rng.Float64() < spec.tailFrac {
		tail = tails[rng.Intn(len(tails))]
		if len(tail) > depth-3 {
			tail = tail[len(tail)-(depth-3):]
		}
	}
	chain := []int{root}
	for fn := root; len(chain) < depth-len(tail); {
		callees := m.funcs[fn].callees
		if len(callees) == 0 {
			break
		}
		// Favour the first callees: skewed but shared call paths.
		fn = callees[int(float64(len(callees))*math.Pow(rng.Float64(), 1+spec.calleeSkew))]
		chain = append(chain, fn)
	}
	chain = append(chain, tail...)
	locs := m.chainLocs(chain)
	// The leaf spends CPU at any of its lines, not only at a call site.
	leaf := chain[len(chain)-1]
	if spec.leafVariants > 0 {
		leaf = m.variant(leaf, rng.Intn(spec.leafVariants))
	}
	locs[0] = m.loc(leaf, rng.Intn(len(m.funcs[leaf].lines)))
	labels := -1
	if rng.Float64() < spec.labelFrac {
		labels = rng.Intn(len(labelSets))
	}
	return stack{locs: locs, labels: labels}
}

// profile builds profile number i of the set.
func (m *model) profile(i int) *profile.Profile {
	spec := m.spec
	rng := rand.New(rand.NewSource(m.seed*7_919 + int64(i)*104_729 + m.salt))
	nSamples := spec.minSamples + rng.Intn(spec.maxSamples-spec.minSamples+1)

	// Weighted sampling of distinct stacks (Efraimidis-Spirakis keys).
	type pick struct {
		stack int
		key   float64
	}
	picks := make([]pick, len(m.stacks))
	for s := range m.stacks {
		picks[s] = pick{s, math.Log(1-rng.Float64()) / m.stacks[s].weight}
	}
	sort.Slice(picks, func(a, b int) bool { return picks[a].key > picks[b].key })
	picks = picks[:nSamples]

	p := &profile.Profile{
		SampleType: []*profile.ValueType{
			{Type: "samples", Unit: "count"},
			{Type: "cpu", Unit: "nanoseconds"},
		},
		PeriodType:    &profile.ValueType{Type: "cpu", Unit: "nanoseconds"},
		Period:        periodNanos,
		TimeNanos:     startNanos + int64(i)*durationNanos,
		DurationNanos: durationNanos,
		Mapping:       []*profile.Mapping{m.mapping},
	}
	locs := map[locKey]*profile.Location{}
	funcs := map[int]*profile.Function{}
	function := func(fn int) *profile.Function {
		if f, ok := funcs[fn]; ok {
			return f
		}
		mf := &m.funcs[fn]
		f := &profile.Function{
			ID: uint64(len(p.Function) + 1), Name: mf.name, SystemName: mf.name,
			Filename: mf.file, // StartLine stays 0, as Go 1.19 leaves it
		}
		funcs[fn] = f
		p.Function = append(p.Function, f)
		return f
	}
	location := func(k locKey) *profile.Location {
		if l, ok := locs[k]; ok {
			return l
		}
		ml := m.locs[k]
		l := &profile.Location{ID: uint64(len(p.Location) + 1), Mapping: m.mapping, Address: ml.addr}
		for _, fr := range ml.frames {
			l.Line = append(l.Line, profile.Line{Function: function(fr.fn), Line: fr.line})
		}
		locs[k] = l
		p.Location = append(p.Location, l)
		return l
	}
	for _, pk := range picks {
		st := &m.stacks[pk.stack]
		count := 1 + int64(rng.ExpFloat64()*spec.countScale*st.weight/m.maxWeight)
		s := &profile.Sample{Value: []int64{count, count * periodNanos}}
		for _, k := range st.locs {
			s.Location = append(s.Location, location(k))
		}
		if st.labels >= 0 {
			s.Label = labelSets[st.labels]
		}
		p.Sample = append(p.Sample, s)
	}
	return p
}

// ---------------------------------------------------------------------------
// A fleet (-fleet).

// fleetKinds are the workloads of a fleet's services, assigned round-robin;
// a service's size also varies with its index.
var fleetKinds = []kindSpec{
	// HTTP/JSON API: allocation and encoding/json heavy, some labels
	{appFuncs: 450, helpers: 30, levels: 28, fanout: 2, calleeSkew: 3, maxLines: 3,
		minDepth: 8, maxDepth: 36, stackPool: 3000, minSamples: 350, maxSamples: 600, zipf: 0.9,
		inlineFrac: 0.1, labelFrac: 0.2, tailFrac: 0.45, countScale: 25},
	// gRPC backend: bigger binary, deeper stacks
	{appFuncs: 800, helpers: 50, levels: 32, fanout: 2, calleeSkew: 4, maxLines: 2,
		minDepth: 8, maxDepth: 40, stackPool: 5000, minSamples: 500, maxSamples: 800, zipf: 0.85,
		inlineFrac: 0.1, labelFrac: 0.1, tailFrac: 0.35, countScale: 30},
	// queue worker: small, a few hot paths
	{appFuncs: 250, helpers: 20, levels: 22, fanout: 2, calleeSkew: 2, maxLines: 3,
		minDepth: 6, maxDepth: 30, stackPool: 1500, minSamples: 200, maxSamples: 350, zipf: 1.0,
		inlineFrac: 0.1, labelFrac: 0.05, tailFrac: 0.5, countScale: 20},
}

var fleetNames = []string{"api-gateway", "auth", "billing", "cart", "catalog", "checkout", "email", "inventory",
	"notifications", "orders", "payments", "recommendations", "search", "shipping", "users"}

// fleetShared application functions (per service: the first ones, nearest
// the entry points) are the platform library every service links.
const fleetShared = 120

// writeFleet writes the fleet's profiles, one goroutine per service.
func writeFleet(dir string, seed int64, nsvc, npods, hours, perHour int) {
	type result struct {
		files, funcs, samples int
		bytes                 int64
		err                   error
	}
	res := make([]result, nsvc)
	done := make(chan struct{}, nsvc)
	sem := make(chan struct{}, 4)
	for k := 0; k < nsvc; k++ {
		go func(k int) {
			sem <- struct{}{}
			defer func() { <-sem; done <- struct{}{} }()
			name := fmt.Sprintf("svc%02d", k)
			if k < len(fleetNames) {
				name = fleetNames[k]
			}
			spec := fleetKinds[k%len(fleetKinds)]
			spec.appFuncs += 60 * (k % 5)
			spec.stackPool += 300 * (k % 5)
			m := newModel(spec, "fleet/"+name, seed, name, fleetShared)
			rng := rand.New(rand.NewSource(seed*31 + int64(k)))
			r := &res[k]
			step := int64(3600/perHour) * 1_000_000_000
			for pod := k; pod < npods; pod += nsvc {
				podName := fmt.Sprintf("%s-%s-%s", name, k8sName(rng, 10), k8sName(rng, 5))
				pdir := filepath.Join(dir, name, podName)
				if r.err = os.MkdirAll(pdir, 0o755); r.err != nil {
					return
				}
				phase := int64(rng.Intn(3600/perHour)) * 1_000_000_000
				for i := 0; i < hours*perHour; i++ {
					p := m.profile(pod*100_000 + i)
					p.TimeNanos = startNanos + phase + int64(i)*step
					if r.err = p.CheckValid(); r.err != nil {
						return
					}
					size, err := writeProfile(filepath.Join(pdir, fmt.Sprintf("%03d.pb.gz", i)), p)
					if r.err = err; err != nil {
						return
					}
					r.files++
					r.bytes += size
					r.funcs += len(p.Function)
					r.samples += len(p.Sample)
				}
			}
		}(k)
	}
	for k := 0; k < nsvc; k++ {
		<-done
	}
	var t result
	for _, r := range res {
		if r.err != nil {
			fatal(r.err)
		}
		t.files += r.files
		t.bytes += r.bytes
		t.funcs += r.funcs
		t.samples += r.samples
	}
	fmt.Printf("gen: fleet seed=%d services=%d pods=%d hours=%d per_hour=%d files=%d total_bytes=%d avg_bytes=%d avg_functions=%d avg_samples=%d dir=%s\n",
		seed, nsvc, npods, hours, perHour, t.files, t.bytes, t.bytes/int64(t.files), t.funcs/t.files, t.samples/t.files, dir)
}

// k8sName is a random string of Kubernetes' name-suffix alphabet.
func k8sName(rng *rand.Rand, n int) string {
	const alpha = "bcdfghjklmnpqrstvwxz2456789"
	b := make([]byte, n)
	for i := range b {
		b[i] = alpha[rng.Intn(len(alpha))]
	}
	return string(b)
}
