// Command influxcheck reads InfluxDB line protocol with InfluxDB's own
// parser (github.com/influxdata/influxdb1-client/models, Debian's
// golang-github-influxdata-influxdb1-client-dev, built offline in GOPATH
// mode), for profd's tests of /api/1/series?format=influx and
// `profd serve --export-influx`.
//
//	influxcheck parse FILE...        parse each file (strictly: every line must be a point
//	                                 with an integer "value" field and a timestamp); print
//	                                 one JSON object per point; exit 1 on any error
//	influxcheck serve DIR [-fail N]  an InfluxDB write endpoint on 127.0.0.1:0 (any path):
//	                                 each POST body is parsed the same way and kept as
//	                                 DIR/NNNN.lp (good: 204) or DIR/NNNN.bad (bad: 400 with
//	                                 InfluxDB's JSON error), with DIR/NNNN.meta holding the
//	                                 request line and the Authorization header; the first
//	                                 N requests get 500. Prints "influxcheck: listening on
//	                                 HOST:PORT" to stderr once bound.
package main

import (
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"time"

	"github.com/influxdata/influxdb1-client/models"
)

type point struct {
	Measurement string            `json:"measurement"`
	Tags        map[string]string `json:"tags"`
	Value       int64             `json:"value"`
	Time        int64             `json:"time"`
}

// check parses body strictly; the points, or the first problem.
func check(body []byte) ([]point, error) {
	// a time far from any timestamp profd writes: a line without one would get it
	const sentinel = int64(1) << 62
	pts, err := models.ParsePointsWithPrecision(body, time.Unix(0, sentinel), "n")
	if err != nil {
		return nil, err
	}
	var out []point
	for _, p := range pts {
		if p.UnixNano() == sentinel {
			return nil, fmt.Errorf("point %q has no timestamp", p.String())
		}
		f, err := p.Fields()
		if err != nil {
			return nil, err
		}
		v, ok := f["value"].(int64)
		if !ok || len(f) != 1 {
			return nil, fmt.Errorf("point %q: want one integer field \"value\", got %v", p.String(), f)
		}
		tags := map[string]string{}
		for _, t := range p.Tags() {
			tags[string(t.Key)] = string(t.Value)
		}
		out = append(out, point{string(p.Name()), tags, v, p.UnixNano()})
	}
	return out, nil
}

func parseFiles(files []string) int {
	enc := json.NewEncoder(os.Stdout)
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		pts, err := check(b)
		if err != nil {
			fmt.Fprintf(os.Stderr, "%s: %v\n", f, err)
			return 1
		}
		for _, p := range pts {
			enc.Encode(p)
		}
	}
	return 0
}

func serve(dir string, fail int) int {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	var mu sync.Mutex
	n := 0
	http.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		mu.Lock()
		n++
		k := n
		mu.Unlock()
		base := filepath.Join(dir, fmt.Sprintf("%04d", k))
		meta := fmt.Sprintf("%s %s\nAuthorization: %s\nContent-Type: %s\n", r.Method, r.URL.RequestURI(),
			r.Header.Get("Authorization"), r.Header.Get("Content-Type"))
		os.WriteFile(base+".meta", []byte(meta), 0o644)
		if k <= fail {
			os.WriteFile(base+".failed", body, 0o644)
			w.WriteHeader(http.StatusInternalServerError)
			fmt.Fprintln(w, `{"code":"internal error","message":"told to fail"}`)
			return
		}
		if r.Method != http.MethodPost {
			w.WriteHeader(http.StatusMethodNotAllowed)
			return
		}
		if _, err := check(body); err != nil {
			os.WriteFile(base+".bad", append(body, []byte("\n# "+err.Error()+"\n")...), 0o644)
			w.WriteHeader(http.StatusBadRequest)
			json.NewEncoder(w).Encode(map[string]string{"code": "invalid", "message": err.Error()})
			return
		}
		os.WriteFile(base+".lp", body, 0o644)
		w.WriteHeader(http.StatusNoContent)
	})
	fmt.Fprintf(os.Stderr, "influxcheck: listening on %s\n", ln.Addr())
	if err := http.Serve(ln, nil); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	return 0
}

func main() {
	if len(os.Args) >= 3 && os.Args[1] == "parse" {
		os.Exit(parseFiles(os.Args[2:]))
	}
	if len(os.Args) >= 3 && os.Args[1] == "serve" {
		fail := 0
		if len(os.Args) == 5 && os.Args[3] == "-fail" {
			fail, _ = strconv.Atoi(os.Args[4])
		}
		os.Exit(serve(os.Args[2], fail))
	}
	fmt.Fprintln(os.Stderr, "usage: influxcheck parse FILE... | influxcheck serve DIR [-fail N]")
	os.Exit(2)
}
