// Command targets plays many Go services for bench/scrape.sh: it listens on
// N loopback ports, each one a "target" serving net/http/pprof-like endpoints
// with real profiles captured from examples/goapp, so that one `profd scrape`
// can be measured against hundreds of targets served by a few processes.
// Optionally it is also a stub collector that answers every POST with 200
// (to measure the scraper without a real collector's cost).
//
// Usage:
//
//	targets -n N -profiles DIR[,DIR...] [-ports-file F] [-first 0]
//	        [-variants 16] [-collector 127.0.0.1:0]
//
// Each DIR holds {cpu,heap,allocs,block,mutex,goroutine,threadcreate}.pb.gz
// (tests/e2e/capture.sh writes them). Target i (i = -first, -first+1, ...)
// serves the set of DIR number i mod len(DIRS), on 127.0.0.1:PORT:
//
//	/debug/pprof/profile?seconds=S  waits S seconds (default 30, as Go), then
//	                                the cpu profile
//	/debug/pprof/{heap,allocs,block,mutex,goroutine,threadcreate}
//
// with Go's headers (application/octet-stream, Content-Disposition). Go's
// allocs, block and mutex profiles (and heap's alloc_* columns) count since
// the process started; to make the scraper's deltas non-empty, the k-th
// request of a (target, type) gets variant k of the profile, whose cumulative
// values are the captured ones times k+1 (heap's inuse_* columns vary by up
// to 20 %). Variants are encoded once at start (gzip'd protobuf, with
// github.com/google/pprof/profile); from -variants on, the last one is
// served again (the scraper then stores nothing: "unchanged"). cpu,
// goroutine and threadcreate are served as captured.
//
// -ports-file F gets one HOST:PORT per line, written before the ready line
//
//	targets: listening on N ports
//
// is printed on stderr. With -collector ADDR it also serves a stub collector
// there (POST /api/0/profiles: the body is read and counted, 200 with a
// profefe-style JSON answer; GET /stats: "posts=N bytes=B"), announced as
// "targets: collector on HOST:PORT" before the ready line. -n 0 is allowed
// (a stub collector alone). SIGINT/SIGTERM stop it (exit 0).
//
// Build offline, like bench/gen (Debian's golang-github-google-pprof-dev):
//
//	GO111MODULE=off GOPATH=/usr/share/gocode go build -o OUT ./bench/targets
package main

import (
	"bytes"
	"flag"
	"fmt"
	"io"
	"log"
	"math"
	"net"
	"net/http"
	"os"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/google/pprof/profile"
)

var types = []string{"cpu", "heap", "allocs", "block", "mutex", "goroutine", "threadcreate"}

// cumulative reports whether sample type index vi of a profile of type t
// counts since the process started.
func cumulative(t string, p *profile.Profile, vi int) bool {
	switch t {
	case "allocs", "heap":
		return strings.HasPrefix(p.SampleType[vi].Type, "alloc_")
	case "block", "mutex":
		return true
	}
	return false
}

// variants encodes n variants of the profile in file: variant k has every
// cumulative value times k+1 (inuse values times 1 + (k mod 3)/10).
func variants(file, t string, n int) ([][]byte, error) {
	raw, err := os.ReadFile(file)
	if err != nil {
		return nil, err
	}
	if t == "cpu" || t == "goroutine" || t == "threadcreate" {
		return [][]byte{raw}, nil
	}
	base, err := profile.Parse(bytes.NewReader(raw))
	if err != nil {
		return nil, fmt.Errorf("%s: %v", file, err)
	}
	out := make([][]byte, n)
	for k := 0; k < n; k++ {
		p := base.Copy()
		for _, s := range p.Sample {
			for vi := range s.Value {
				if cumulative(t, p, vi) {
					s.Value[vi] *= int64(k + 1)
				} else {
					s.Value[vi] = int64(math.Round(float64(s.Value[vi]) * (1 + float64(k%3)/10)))
				}
			}
		}
		if p.TimeNanos != 0 {
			p.TimeNanos += int64(k) * int64(time.Minute)
		}
		var b bytes.Buffer
		if err := p.Write(&b); err != nil {
			return nil, err
		}
		out[k] = b.Bytes()
	}
	return out, nil
}

type target struct {
	set  map[string][][]byte // type -> variants
	hits map[string]*atomic.Int64
}

func (tg *target) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	name := strings.TrimPrefix(r.URL.Path, "/debug/pprof/")
	if name == "profile" {
		name = "cpu"
		sec, err := strconv.Atoi(r.URL.Query().Get("seconds"))
		if err != nil || sec <= 0 {
			sec = 30
		}
		select {
		case <-time.After(time.Duration(sec) * time.Second):
		case <-r.Context().Done():
			return
		}
	}
	vs, ok := tg.set[name]
	if !ok {
		http.NotFound(w, r)
		return
	}
	k := int(tg.hits[name].Add(1) - 1)
	if k >= len(vs) {
		k = len(vs) - 1
	}
	w.Header().Set("Content-Type", "application/octet-stream")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	fn := name
	if name == "cpu" {
		fn = "profile"
	}
	w.Header().Set("Content-Disposition", `attachment; filename="`+fn+`"`)
	w.Write(vs[k])
}

func main() {
	n := flag.Int("n", 100, "targets (ports) to serve")
	first := flag.Int("first", 0, "index of the first target (chooses its profile set)")
	dirs := flag.String("profiles", "", "comma-separated directories of captured profiles")
	nv := flag.Int("variants", 16, "variants of each cumulative profile")
	portsFile := flag.String("ports-file", "", "write HOST:PORT of every target here")
	coll := flag.String("collector", "", "also serve a stub collector on this address")
	flag.Parse()
	log.SetFlags(0)
	log.SetPrefix("targets: ")

	var sets []map[string][][]byte
	if *n > 0 {
		if *dirs == "" {
			log.Fatal("-profiles is required")
		}
		for _, d := range strings.Split(*dirs, ",") {
			set := map[string][][]byte{}
			for _, t := range types {
				v, err := variants(filepath.Join(d, t+".pb.gz"), t, *nv)
				if err != nil {
					log.Fatal(err)
				}
				set[t] = v
			}
			sets = append(sets, set)
		}
	}

	if *coll != "" {
		ln, err := net.Listen("tcp", *coll)
		if err != nil {
			log.Fatal(err)
		}
		var posts, nbytes atomic.Int64
		mux := http.NewServeMux()
		mux.HandleFunc("/api/0/profiles", func(w http.ResponseWriter, r *http.Request) {
			if r.Method != http.MethodPost {
				http.Error(w, "POST only", http.StatusMethodNotAllowed)
				return
			}
			m, _ := io.Copy(io.Discard, r.Body)
			posts.Add(1)
			nbytes.Add(m)
			q := r.URL.Query()
			w.Header().Set("Content-Type", "application/json")
			fmt.Fprintf(w, `{"code":200,"body":{"id":"%d","type":%q,"service":%q}}`+"\n",
				posts.Load(), q.Get("type"), q.Get("service"))
		})
		mux.HandleFunc("/stats", func(w http.ResponseWriter, r *http.Request) {
			fmt.Fprintf(w, "posts=%d bytes=%d\n", posts.Load(), nbytes.Load())
		})
		go func() { log.Fatal(http.Serve(ln, mux)) }()
		log.Printf("collector on %s", ln.Addr())
	}

	var addrs []string
	for i := 0; i < *n; i++ {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			log.Fatalf("target %d: %v (ulimit -n?)", i, err)
		}
		tg := &target{set: sets[(*first+i)%len(sets)], hits: map[string]*atomic.Int64{}}
		for _, t := range types {
			tg.hits[t] = new(atomic.Int64)
		}
		srv := &http.Server{Handler: tg, ReadHeaderTimeout: 10 * time.Second, IdleTimeout: 5 * time.Minute}
		go func() { log.Fatal(srv.Serve(ln)) }()
		addrs = append(addrs, ln.Addr().String())
	}
	if *portsFile != "" {
		if err := os.WriteFile(*portsFile, []byte(strings.Join(addrs, "\n")+"\n"), 0o644); err != nil {
			log.Fatal(err)
		}
	}
	log.Printf("listening on %d ports", *n)

	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGINT, syscall.SIGTERM)
	<-sig
}
