// Command oracle is the reference implementation profd's tests compare
// against: Google's own github.com/google/pprof/profile package (Debian's
// golang-github-google-pprof-dev, built offline in GOPATH mode).
//
//	oracle merge OUT FILE...   profile.Parse each FILE, profile.Merge, Write (gzip) to OUT
//	oracle check FILE...       profile.Parse (+CheckValid); print p.String(); exit 1 on error
//	oracle convert IN OUT      profile.Parse IN (any format Parse reads, e.g. legacy text), Write (gzip) to OUT
//	oracle random SEED N DIR   N random valid profiles of one family into DIR (random.go)
//	oracle delta OUT PREV CUR  PREV.Scale(-1), Merge([CUR, PREV]) (what go tool pprof -base reads)
//	oracle dump FILE...        p.String() plus default type, drop/keep frames, functions (random.go)
//	oracle regex               stdin: lines "HEX(regex) HEX(value)"; stdout: a line 1, 0 or ERR each:
//	                           does value match regex as a Prometheus label matcher (^(?s:regex)$, Go's regexp)
package main

import (
	"bufio"
	"encoding/hex"
	"fmt"
	"os"
	"regexp"
	"strconv"
	"strings"

	"github.com/google/pprof/profile"
)

func parse(path string) *profile.Profile {
	f, err := os.Open(path)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	defer f.Close()
	p, err := profile.Parse(f)
	if err != nil {
		fmt.Fprintf(os.Stderr, "%s: %v\n", path, err)
		os.Exit(1)
	}
	return p
}

// regexMatches answers "oracle regex" (see the top), as Prometheus compiles a
// label matcher's regex (model/labels: NewFastRegexMatcher, ^(?s:re)$).
func regexMatches() {
	in := bufio.NewScanner(os.Stdin)
	in.Buffer(make([]byte, 1<<20), 1<<20)
	out := bufio.NewWriter(os.Stdout)
	defer out.Flush()
	for in.Scan() {
		f := strings.Fields(in.Text())
		if len(f) == 1 {
			f = append(f, "")
		}
		re, err1 := hex.DecodeString(f[0])
		v, err2 := hex.DecodeString(f[1])
		if err1 != nil || err2 != nil {
			fmt.Fprintln(os.Stderr, "bad line:", in.Text())
			os.Exit(2)
		}
		r, err := regexp.Compile("^(?s:" + string(re) + ")$")
		switch {
		case err != nil:
			fmt.Fprintln(out, "ERR")
		case r.MatchString(string(v)):
			fmt.Fprintln(out, "1")
		default:
			fmt.Fprintln(out, "0")
		}
	}
}

func main() {
	if len(os.Args) == 2 && os.Args[1] == "regex" {
		regexMatches()
		return
	}
	if len(os.Args) < 3 {
		fmt.Fprintln(os.Stderr, "usage: oracle merge OUT FILE... | oracle check FILE...")
		os.Exit(2)
	}
	switch os.Args[1] {
	case "random":
		if len(os.Args) != 5 {
			fmt.Fprintln(os.Stderr, "usage: oracle random SEED N DIR")
			os.Exit(2)
		}
		seed, err1 := strconv.ParseInt(os.Args[2], 10, 64)
		n, err2 := strconv.Atoi(os.Args[3])
		if err1 != nil || err2 != nil || n < 1 {
			fmt.Fprintln(os.Stderr, "oracle random: bad SEED or N")
			os.Exit(2)
		}
		if err := randomSet(seed, n, os.Args[4]); err != nil {
			fmt.Fprintln(os.Stderr, "oracle random:", err)
			os.Exit(1)
		}
	case "delta":
		// what go tool pprof -base PREV CUR reads: PREV's values negated
		// (Scale(-1)), then Merge([CUR, PREV])
		if len(os.Args) != 5 {
			fmt.Fprintln(os.Stderr, "usage: oracle delta OUT PREV CUR")
			os.Exit(2)
		}
		prev, cur := parse(os.Args[3]), parse(os.Args[4])
		prev.Scale(-1)
		m, err := profile.Merge([]*profile.Profile{cur, prev})
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		out, err := os.Create(os.Args[2])
		if err == nil {
			err = m.Write(out)
		}
		if err == nil {
			err = out.Close()
		}
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
	case "dump":
		for _, a := range os.Args[2:] {
			dump(a)
		}
	case "merge":
		var ps []*profile.Profile
		for _, a := range os.Args[3:] {
			ps = append(ps, parse(a))
		}
		m, err := profile.Merge(ps)
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		out, err := os.Create(os.Args[2])
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		if err := m.Write(out); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		if err := out.Close(); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
	case "convert":
		if len(os.Args) != 4 {
			fmt.Fprintln(os.Stderr, "usage: oracle convert IN OUT")
			os.Exit(2)
		}
		p := parse(os.Args[2])
		out, err := os.Create(os.Args[3])
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		if err := p.Write(out); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		if err := out.Close(); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
	case "check":
		for _, a := range os.Args[2:] {
			p := parse(a)
			if err := p.CheckValid(); err != nil {
				fmt.Fprintf(os.Stderr, "%s: %v\n", a, err)
				os.Exit(1)
			}
			fmt.Print(p.String())
		}
	default:
		fmt.Fprintln(os.Stderr, "unknown command", os.Args[1])
		os.Exit(2)
	}
}
