// Command faultsrv serves broken pprof endpoints for tests/e2e/test_scrape.sh,
// each under its own path prefix, so one process plays several bad targets:
//
//	/hang/debug/pprof/...     accepts the request and never answers
//	/html/debug/pprof/...     200 with an HTML page (a proxy's login page, say)
//	/garbage/debug/pprof/...  200 with random bytes
//	/text/debug/pprof/...     200 with Go's legacy text format (?debug=1 style)
//	/busy/debug/pprof/profile 500 "Could not enable CPU profiling: cpu profiling
//	                          already in use" for the first -busy requests, then
//	                          the -cpu-file profile (other types: -heap-file)
//	/slow/.../profile         the -cpu-file profile after -slow (ignores ?seconds=);
//	                          other types under /slow/: 404 after -slow
//
// It prints "faultsrv: listening on HOST:PORT" once bound. Standard library only.
package main

import (
	"flag"
	"log"
	"math/rand"
	"net"
	"net/http"
	"os"
	"strings"
	"sync/atomic"
	"time"
)

func main() {
	addr := flag.String("addr", "127.0.0.1:0", "listen address")
	busy := flag.Int64("busy", 1, "CPU requests under /busy/ answered 'already in use' first")
	cpuFile := flag.String("cpu-file", "", "profile served by /busy/ once it is not busy, and by /slow/")
	slow := flag.Duration("slow", 1500*time.Millisecond, "how long /slow/ takes to answer")
	flag.Parse()
	log.SetFlags(0)
	log.SetPrefix("faultsrv: ")
	cpu, err := os.ReadFile(*cpuFile)
	if err != nil && *cpuFile != "" {
		log.Fatal(err)
	}
	var busyLeft atomic.Int64
	busyLeft.Store(*busy)
	var requests atomic.Int64
	mux := http.NewServeMux()
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		requests.Add(1)
		p := r.URL.Path
		switch {
		case strings.HasPrefix(p, "/hang/"):
			<-r.Context().Done() // until the client gives up
		case strings.HasPrefix(p, "/html/"):
			w.Header().Set("Content-Type", "text/html; charset=utf-8")
			w.Write([]byte("<!DOCTYPE html>\n<html><head><title>Sign in</title></head><body>Please sign in</body></html>\n"))
		case strings.HasPrefix(p, "/garbage/"):
			b := make([]byte, 4096)
			rand.Read(b)
			w.Header().Set("Content-Type", "application/octet-stream")
			w.Write(b)
		case strings.HasPrefix(p, "/text/"):
			w.Header().Set("Content-Type", "text/plain; charset=utf-8")
			w.Write([]byte("heap profile: 1: 2 [3: 4] @ heap/1048576\n1: 2 [3: 4] @ 0x1 0x2\n"))
		case strings.HasPrefix(p, "/slow/"):
			select {
			case <-time.After(*slow):
			case <-r.Context().Done():
				return
			}
			if !strings.HasSuffix(p, "/profile") {
				http.NotFound(w, r)
				return
			}
			w.Header().Set("Content-Type", "application/octet-stream")
			w.Write(cpu)
		case strings.HasPrefix(p, "/busy/") && strings.HasSuffix(p, "/profile"):
			if busyLeft.Add(-1) >= 0 {
				// what net/http/pprof's serveError writes
				w.Header().Set("Content-Type", "text/plain; charset=utf-8")
				w.Header().Set("X-Go-Pprof", "1")
				w.WriteHeader(http.StatusInternalServerError)
				w.Write([]byte("Could not enable CPU profiling: cpu profiling already in use\n"))
				return
			}
			w.Header().Set("Content-Type", "application/octet-stream")
			w.Write(cpu)
		default:
			http.NotFound(w, r)
		}
	})
	ln, err := net.Listen("tcp", *addr)
	if err != nil {
		log.Fatal(err)
	}
	log.Printf("listening on %s", ln.Addr())
	log.Fatal(http.Serve(ln, mux))
}
