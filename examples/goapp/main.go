// Command goapp is a small Go HTTP service used as a profiling target for
// profd's examples, demos and end-to-end tests.
//
// It serves net/http/pprof on http.DefaultServeMux and keeps busy with a
// selectable synthetic workload so that every pprof profile type has samples:
//
//   - cpu:          named hot functions per workload, run under pprof labels
//     ("handler", "service"), duty-cycled to stay under -cpu-load cores;
//   - heap/allocs:  retainBuffers keeps a bounded ring of live buffers;
//   - mutex:        lockContention goroutines fight over one sync.Mutex;
//   - block:        chanBlock/chanProduce wait on channels in select;
//   - goroutine:    a few dozen labelled parkedWorker goroutines;
//   - threadcreate: lockedThreadWorker pins a goroutine to its own thread.
//
// Usage:
//
//	goapp [-addr 127.0.0.1:6060] [-service goapp] [-workload mixed] [-cpu-load 0.5]
//	      [-pprof-prefix /custom/pprof] [-stretch N]
//
// -pprof-prefix also serves the pprof handlers under another path prefix
// (PREFIX/heap, PREFIX/profile?seconds=N, ...), as a service that mounts
// them elsewhere would: the scraper's tests use it for profefe.com/path.
//
// Once the listener is bound it prints exactly one line
// "goapp: listening on HOST:PORT" to stderr (with the real port when -addr
// uses port 0). GET /work answers 200 "ok" as a health probe. SIGINT and
// SIGTERM shut it down cleanly (exit status 0).
package main

import (
	"bytes"
	"compress/gzip"
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"log"
	"math/rand"
	"net"
	"net/http"
	_ "net/http/pprof" // registers /debug/pprof/* on http.DefaultServeMux
	"os"
	"os/signal"
	"runtime"
	"runtime/pprof"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
	"unicode"
)

// Profiling rates. The mutex fraction samples 1 in 5 contention events; the
// block rate records every blocking event of at least 10µs (and a
// proportional sample of shorter ones).
const (
	mutexProfileFraction = 5
	blockProfileRateNs   = 10000
)

// Sizes of the always-on background activity.
const (
	workersPerWorkload = 2                     // CPU goroutines per selected workload
	dutyPeriod         = 20 * time.Millisecond // CPU duty-cycle period
	parkedGoroutines   = 40                    // goroutines parked forever
	contenders         = 4                     // goroutines fighting over one mutex
	retainSlots        = 256                   // live buffers kept by retainBuffers
)

// workloads maps a -workload name to the unit of work it repeats. Each unit
// calls the workload's named hot functions with its own relative weights.
var workloads = map[string]func(*workState){
	"auth":   authUnit,
	"search": searchUnit,
	"ingest": ingestUnit,
}

func main() {
	addr := flag.String("addr", "127.0.0.1:6060", "listen address (port 0 picks a free port)")
	service := flag.String("service", "goapp", "service name, logged and used as the pprof label \"service\"")
	workload := flag.String("workload", "mixed", "workload: auth, search, ingest or mixed (all of them)")
	cpuLoad := flag.Float64("cpu-load", 0.5, "CPU budget of the workload in cores, 0..1")
	pprofPrefix := flag.String("pprof-prefix", "", "also serve the pprof handlers under this path prefix, e.g. /custom/pprof")
	flag.IntVar(&stretch, "stretch", 0, "auth workload: also run authStretchKey for this many iterations per unit of work (0 = not at all); a \"new version\" with more makes that one function costlier, for the regression report's tests")
	flag.Parse()

	log.SetFlags(0)
	log.SetPrefix("goapp: ")

	names, err := selectWorkloads(*workload)
	if err != nil {
		log.Fatal(err)
	}
	if *cpuLoad < 0 || *cpuLoad > 1 {
		log.Fatalf("-cpu-load must be within 0..1, got %g", *cpuLoad)
	}

	runtime.SetMutexProfileFraction(mutexProfileFraction)
	runtime.SetBlockProfileRate(blockProfileRateNs)

	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()

	http.HandleFunc("/work", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		io.WriteString(w, "ok")
	})

	if p := strings.TrimRight(*pprofPrefix, "/"); p != "" {
		if !strings.HasPrefix(p, "/") {
			log.Fatalf("-pprof-prefix must start with '/', got %q", *pprofPrefix)
		}
		// PREFIX/x is served as /debug/pprof/x
		http.HandleFunc(p+"/", func(w http.ResponseWriter, r *http.Request) {
			r2 := r.Clone(r.Context())
			r2.URL.Path = "/debug/pprof" + strings.TrimPrefix(r.URL.Path, p)
			r2.URL.RawPath = ""
			http.DefaultServeMux.ServeHTTP(w, r2)
		})
	}

	// Bind first so that the "listening" line means the service is ready.
	ln, err := net.Listen("tcp", *addr)
	if err != nil {
		log.Fatal(err)
	}
	srv := &http.Server{Handler: http.DefaultServeMux, ReadHeaderTimeout: 10 * time.Second}

	var wg sync.WaitGroup
	startBackground(ctx, &wg, *service, names, *cpuLoad)

	log.Printf("service=%s workload=%s cpu-load=%g pid=%d", *service, *workload, *cpuLoad, os.Getpid())
	log.Printf("listening on %s", ln.Addr())

	serveErr := make(chan error, 1)
	go func() { serveErr <- srv.Serve(ln) }()

	select {
	case <-ctx.Done():
		log.Printf("signal received, shutting down")
	case err := <-serveErr:
		log.Fatalf("serve: %v", err)
	}
	shutdownCtx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := srv.Shutdown(shutdownCtx); err != nil {
		// A running CPU profile request may outlive the grace period.
		srv.Close()
	}
	wg.Wait()
	log.Printf("stopped")
}

// selectWorkloads validates -workload and returns the workload names to run.
func selectWorkloads(name string) ([]string, error) {
	if name == "mixed" {
		return []string{"auth", "search", "ingest"}, nil
	}
	if _, ok := workloads[name]; ok {
		return []string{name}, nil
	}
	return nil, fmt.Errorf("unknown -workload %q (want auth, search, ingest or mixed)", name)
}

// startBackground launches every background goroutine; they all stop when
// ctx is cancelled and are tracked by wg.
func startBackground(ctx context.Context, wg *sync.WaitGroup, service string, names []string, cpuLoad float64) {
	spawn := func(handler string, seed int64, fn func(ctx context.Context, rng *rand.Rand)) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			labels := pprof.Labels("handler", handler, "service", service)
			pprof.Do(ctx, labels, func(ctx context.Context) {
				fn(ctx, rand.New(rand.NewSource(seed)))
			})
		}()
	}

	// CPU workers share the budget equally.
	if cpuLoad > 0 {
		share := cpuLoad / float64(len(names)*workersPerWorkload)
		for i, name := range names {
			unit := workloads[name]
			for j := 0; j < workersPerWorkload; j++ {
				spawn(name, int64(100*i+j+1), func(ctx context.Context, rng *rand.Rand) {
					runDutyCycle(ctx, share, newWorkState(rng), unit)
				})
			}
		}
	}

	spawn("retain", 7, retainBuffers)

	var mu sync.Mutex
	bell := make([]chan struct{}, contenders)
	for i := range bell {
		ch := make(chan struct{}, 1)
		bell[i] = ch
		spawn("mutex", int64(10+i), func(ctx context.Context, rng *rand.Rand) {
			lockContention(ctx, &mu, ch)
		})
	}
	spawn("mutex", 9, func(ctx context.Context, rng *rand.Rand) { ringBell(ctx, bell) })

	items := make(chan int)
	spawn("block", 20, func(ctx context.Context, rng *rand.Rand) { chanProduce(ctx, items) })
	for i := 0; i < 2; i++ {
		spawn("block", int64(21+i), func(ctx context.Context, rng *rand.Rand) { chanBlock(ctx, items) })
	}

	for i := 0; i < parkedGoroutines; i++ {
		spawn("parked", int64(30+i), func(ctx context.Context, rng *rand.Rand) { parkedWorker(ctx) })
	}

	spawn("thread", 8, func(ctx context.Context, rng *rand.Rand) { lockedThreadWorker(ctx) })
}

// runDutyCycle repeats unit until ctx is done, keeping the fraction of wall
// time spent working at about share: after each burst of work it sleeps in
// proportion to the time the burst actually took.
func runDutyCycle(ctx context.Context, share float64, st *workState, unit func(*workState)) {
	budget := time.Duration(float64(dutyPeriod) * share)
	for ctx.Err() == nil {
		start := time.Now()
		for time.Since(start) < budget {
			unit(st)
		}
		worked := time.Since(start)
		rest := time.Duration(float64(worked) * (1/share - 1))
		select {
		case <-ctx.Done():
		case <-time.After(rest):
		}
	}
}

// workState holds the per-goroutine inputs of the workloads, built lazily.
type workState struct {
	rng *rand.Rand

	// auth
	key    []byte
	tokens []string

	// search
	docs  []string
	index [][]string

	// ingest
	batch []byte
}

func newWorkState(rng *rand.Rand) *workState { return &workState{rng: rng} }

// ---------------------------------------------------------------------------
// auth workload: password hashing and token verification (sha256/HMAC).

// authUnit hashes two passwords and verifies a batch of tokens.
func authUnit(st *workState) {
	if st.tokens == nil {
		st.key = []byte("profd-example-signing-key")
		for i := 0; i < 16; i++ {
			st.tokens = append(st.tokens, authIssueToken(st.key, fmt.Sprintf("user%03d", i)))
		}
	}
	salt := []byte("s4lt")
	pw := []byte(fmt.Sprintf("hunter%d", st.rng.Intn(1000)))
	sinkBytes(authHashPassword(pw, salt, 400))
	sinkBytes(authHashPassword(pw, salt, 400))
	for i := 0; i < 60; i++ {
		if !authVerifyToken(st.key, st.tokens[st.rng.Intn(len(st.tokens))]) {
			panic("token verification failed")
		}
	}
	if stretch > 0 {
		stretchSink ^= authStretchKey(uint64(st.rng.Int63()), stretch)
	}
}

// stretch is -stretch; stretchSink keeps authStretchKey's result alive.
var (
	stretch     int
	stretchSink uint64
)

// authStretchKey is pure CPU in the function itself (flat cost): n rounds
// of xorshift64.
//
//go:noinline
func authStretchKey(x uint64, n int) uint64 {
	for i := 0; i < n; i++ {
		x ^= x << 13
		x ^= x >> 7
		x ^= x << 17
	}
	return x
}

// authHashPassword derives a key by iterating sha256 over salt+password.
//
//go:noinline
func authHashPassword(password, salt []byte, rounds int) []byte {
	sum := sha256.Sum256(append(append([]byte{}, salt...), password...))
	for i := 0; i < rounds; i++ {
		sum = sha256.Sum256(sum[:])
	}
	return sum[:]
}

// authIssueToken returns "payload.signature" with an HMAC-SHA256 signature.
func authIssueToken(key []byte, user string) string {
	payload := base64.RawURLEncoding.EncodeToString([]byte(`{"sub":"` + user + `","exp":4102444800}`))
	mac := hmac.New(sha256.New, key)
	mac.Write([]byte(payload))
	return payload + "." + base64.RawURLEncoding.EncodeToString(mac.Sum(nil))
}

// authVerifyToken checks the HMAC signature of a token from authIssueToken.
//
//go:noinline
func authVerifyToken(key []byte, token string) bool {
	payload, sig, ok := strings.Cut(token, ".")
	if !ok {
		return false
	}
	want, err := base64.RawURLEncoding.DecodeString(sig)
	if err != nil {
		return false
	}
	mac := hmac.New(sha256.New, key)
	mac.Write([]byte(payload))
	return hmac.Equal(mac.Sum(nil), want)
}

// ---------------------------------------------------------------------------
// search workload: tokenizing documents and ranking them against a query.

var searchVocabulary = strings.Fields(`alpha beta gamma delta epsilon zeta eta theta iota kappa
	lambda mu nu xi omicron pi rho sigma tau upsilon phi chi psi omega profile sample
	location function mapping merge scrape cluster service kernel network storage cache`)

// searchUnit tokenizes a few documents and ranks the corpus for one query.
func searchUnit(st *workState) {
	if st.docs == nil {
		for i := 0; i < 400; i++ {
			var b strings.Builder
			for w := 0; w < 40; w++ {
				word := searchVocabulary[st.rng.Intn(len(searchVocabulary))]
				if w%7 == 0 {
					word = strings.ToUpper(word[:1]) + word[1:] + ","
				}
				b.WriteString(word)
				b.WriteByte(' ')
			}
			st.docs = append(st.docs, b.String())
		}
		for _, d := range st.docs {
			st.index = append(st.index, searchTokenize(d))
		}
	}
	for i := 0; i < 30; i++ {
		st.index[st.rng.Intn(len(st.index))] = searchTokenize(st.docs[st.rng.Intn(len(st.docs))])
	}
	query := []string{
		searchVocabulary[st.rng.Intn(len(searchVocabulary))],
		searchVocabulary[st.rng.Intn(len(searchVocabulary))],
	}
	sinkInt(len(searchRankResults(st.index, query, 10)))
}

// searchTokenize lower-cases a document and splits it into words.
//
//go:noinline
func searchTokenize(doc string) []string {
	return strings.FieldsFunc(strings.ToLower(doc), func(r rune) bool {
		return !unicode.IsLetter(r)
	})
}

// searchResult is one ranked document.
type searchResult struct {
	doc   int
	score int
}

// searchRankResults scores every document by query term frequency and
// returns the top n, best first.
//
//go:noinline
func searchRankResults(index [][]string, query []string, n int) []searchResult {
	results := make([]searchResult, 0, len(index))
	for i, words := range index {
		score := 0
		for _, w := range words {
			for _, q := range query {
				if w == q {
					score += 10
				} else if strings.HasPrefix(w, q[:1]) {
					score++
				}
			}
		}
		results = append(results, searchResult{doc: i, score: score})
	}
	sort.Slice(results, func(a, b int) bool {
		if results[a].score != results[b].score {
			return results[a].score > results[b].score
		}
		return results[a].doc < results[b].doc
	})
	if len(results) > n {
		results = results[:n]
	}
	return results
}

// ---------------------------------------------------------------------------
// ingest workload: decoding JSON batches and gzip-compressing them
// (allocation heavy).

// ingestEvent is one record of an ingested batch.
type ingestEvent struct {
	ID      int               `json:"id"`
	Service string            `json:"service"`
	Message string            `json:"message"`
	Tags    map[string]string `json:"tags"`
	Values  []float64         `json:"values"`
}

// ingestUnit decodes a batch and compresses it back.
func ingestUnit(st *workState) {
	if st.batch == nil {
		events := make([]ingestEvent, 60)
		for i := range events {
			events[i] = ingestEvent{
				ID:      i,
				Service: "svc-" + searchVocabulary[st.rng.Intn(len(searchVocabulary))],
				Message: strings.Repeat(searchVocabulary[st.rng.Intn(len(searchVocabulary))]+" ", 8),
				Tags:    map[string]string{"zone": "eu-1", "tier": "backend"},
				Values:  []float64{st.rng.Float64(), st.rng.Float64(), float64(i)},
			}
		}
		st.batch, _ = json.Marshal(events)
	}
	events, err := ingestDecodeBatch(st.batch)
	if err != nil {
		panic(err)
	}
	sinkInt(len(ingestCompress(events)))
}

// ingestDecodeBatch parses a JSON array of events.
//
//go:noinline
func ingestDecodeBatch(data []byte) ([]ingestEvent, error) {
	var events []ingestEvent
	if err := json.Unmarshal(data, &events); err != nil {
		return nil, err
	}
	return events, nil
}

// ingestCompress re-encodes events as JSON lines into a fresh gzip stream.
//
//go:noinline
func ingestCompress(events []ingestEvent) []byte {
	var buf bytes.Buffer
	zw := gzip.NewWriter(&buf)
	enc := json.NewEncoder(zw)
	for i := range events {
		if err := enc.Encode(&events[i]); err != nil {
			panic(err)
		}
	}
	if err := zw.Close(); err != nil {
		panic(err)
	}
	return buf.Bytes()
}

// ---------------------------------------------------------------------------
// Always-on background activity for the non-CPU profile types.

// retainedRing holds the buffers kept alive by retainBuffers. It is a
// package variable on purpose: a local slice that is only ever written to
// is dead as far as the garbage collector is concerned, and the buffers
// would be freed.
var retainedRing = make([][]byte, retainSlots)

// retainBuffers allocates buffers of 8-64 KiB every few milliseconds and
// keeps the latest retainSlots of them alive in retainedRing, so the heap
// profile always has in-use samples (about 9 MiB live) and allocs keeps
// growing.
//
//go:noinline
func retainBuffers(ctx context.Context, rng *rand.Rand) {
	ring := retainedRing
	tick := time.NewTicker(5 * time.Millisecond)
	defer tick.Stop()
	for i := 0; ; i++ {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		buf := make([]byte, 8<<10+rng.Intn(56<<10))
		for j := 0; j < len(buf); j += 4096 {
			buf[j] = byte(i)
		}
		ring[i%len(ring)] = buf
	}
}

// ringBell wakes all lockContention goroutines at the same moment every
// 50ms, so that they reliably contend for the mutex.
//
//go:noinline
func ringBell(ctx context.Context, bell []chan struct{}) {
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		for _, ch := range bell {
			select {
			case ch <- struct{}{}:
			default:
			}
		}
	}
}

// lockContention takes mu a dozen times per bell. The critical sections
// either yield the processor or sleep while holding the lock, so the other
// contenders reliably park on the mutex even when only one P is free; every
// Unlock that hands the lock to a parked waiter is what the mutex profile
// (and, for the waiter, the block profile) records. CPU cost stays small.
//
//go:noinline
func lockContention(ctx context.Context, mu *sync.Mutex, bell <-chan struct{}) {
	var acc [32]byte
	for {
		select {
		case <-ctx.Done():
			return
		case <-bell:
		}
		for i := 0; i < 4; i++ {
			lockUpdateStats(mu, &acc)
			lockFlushStats(mu, &acc)
			lockUpdateStats(mu, &acc)
		}
	}
}

// lockUpdateStats is one of the two places where lockContention takes mu:
// a short computation that yields the processor mid-way, as a long critical
// section preempted by the scheduler would.
//
//go:noinline
func lockUpdateStats(mu *sync.Mutex, acc *[32]byte) {
	mu.Lock()
	lockHeldWork(acc, 10*time.Microsecond)
	runtime.Gosched()
	lockHeldWork(acc, 10*time.Microsecond)
	mu.Unlock()
}

// lockFlushStats is the other place where lockContention takes mu; it
// simulates slow I/O under the lock (a short sleep) and gives the mutex
// profile a second, distinct contention stack.
//
//go:noinline
func lockFlushStats(mu *sync.Mutex, acc *[32]byte) {
	mu.Lock()
	defer mu.Unlock()
	lockHeldWork(acc, 10*time.Microsecond)
	time.Sleep(100 * time.Microsecond)
}

// lockHeldWork burns CPU for d while the caller holds the mutex.
func lockHeldWork(acc *[32]byte, d time.Duration) {
	for deadline := time.Now().Add(d); time.Now().Before(deadline); {
		*acc = sha256.Sum256(acc[:])
	}
}

// chanProduce sends a counter into items every 2ms.
//
//go:noinline
func chanProduce(ctx context.Context, items chan<- int) {
	tick := time.NewTicker(2 * time.Millisecond)
	defer tick.Stop()
	for i := 0; ; i++ {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		select {
		case <-ctx.Done():
			return
		case items <- i:
		}
	}
}

// chanBlock waits in a select for items; each wait lasts about a millisecond
// and shows up in the block profile.
//
//go:noinline
func chanBlock(ctx context.Context, items <-chan int) {
	sum := 0
	for {
		select {
		case <-ctx.Done():
			sinkInt(sum)
			return
		case v := <-items:
			sum += v
		}
	}
}

// parkedWorker waits until shutdown, like an idle connection handler.
//
//go:noinline
func parkedWorker(ctx context.Context) {
	<-ctx.Done()
}

// lockedThreadWorker pins itself to an OS thread, which forces the runtime
// to create an extra thread (threadcreate profile), and does a tiny bit of
// periodic work on it.
//
//go:noinline
func lockedThreadWorker(ctx context.Context) {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
			sinkInt(runtime.NumGoroutine())
		}
	}
}

// sinkVal keeps results alive so the compiler cannot drop the work.
var sinkVal int64

func sinkInt(v int) { atomic.AddInt64(&sinkVal, int64(v)) }

func sinkBytes(b []byte) {
	if len(b) > 0 {
		sinkInt(int(b[0]))
	}
}
