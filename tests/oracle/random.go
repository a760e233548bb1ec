package main

// oracle random SEED N DIR: N random profiles that Google's profile package
// writes and reads back as valid, sharing one header family (so that
// profile.Merge takes them) and one universe of mappings, functions and
// locations (so that merging has something to find equal). What varies, by
// seed: 1-4 sample types, period type present or not, default sample type;
// 0-4 mappings, each with or without file and build id (a mapping with
// neither is a fake one), its Has* flags, loaded at another address in some
// profiles (ASLR) and listed in another order; functions with equal names
// but another file, system name or start line; locations without mapping,
// without address, without lines, with up to 4 inlined lines, folded;
// duplicated functions and locations inside one profile under other ids;
// ids sparse or shuffled; samples without stack, with zero or negative
// values, with string labels (several values per key, empty values),
// numeric labels with and without units (one unit per key and set); comments, drop/keep frames, times
// and durations. Strings include UTF-8, spaces, ';', quotes and NUL.
//
// oracle dump FILE...: everything profile.Parse read, in table order: the
// p.String() that `oracle check` prints, then the default sample type,
// drop/keep frames and every function with its id (p.String() shows
// functions only through locations, and neither those frames nor the
// default).

import (
	"fmt"
	"math/rand"
	"os"
	"path/filepath"
	"strconv"

	"github.com/google/pprof/profile"
)

var randNames = []string{
	"main.main", "main.work", "runtime.mallocgc", "net/http.(*conn).serve",
	"github.com/acme/svc/internal.(*Server).Handle", "main.func1", "main.(*T).M",
	"compress/flate.(*compressor).deflate", "sort.Slice", "x", "",
	"äöü.Größe", "name with spaces", "semi;colon", "quote\"d", "nul\x00byte",
	"a.b.c.d.e.f.g.h.i.j.k.l.m.n.o.p.q.r.s.t.u.v.w.x.y.z.very.long.function.name",
	// what pprof's names step rewrites or leaves alone on purpose (not
	// mangled names: pprof demangles _Z... and _R..., profd shows them as
	// they are, docs/pprof-tools.md)
	"std::vector<int>::push_back(int const&)", "ns::f(std::map<int, std::pair<a, b> >)",
	"java.util.HashMap.<init>", "main.Map[...]", "pkg.(*T[...]).M", "x<y",
}
var randFiles = []string{"/src/main.go", "/usr/lib/go/src/runtime/malloc.go", "", "x.go", "/a b/c;d.go"}
var randValueTypes = []*profile.ValueType{
	{Type: "samples", Unit: "count"}, {Type: "cpu", Unit: "nanoseconds"},
	{Type: "alloc_objects", Unit: "count"}, {Type: "alloc_space", Unit: "bytes"},
	{Type: "inuse_space", Unit: "bytes"}, {Type: "contentions", Unit: "count"},
	{Type: "delay", Unit: "nanoseconds"}, {Type: "wall", Unit: "microseconds"},
	{Type: "goroutine", Unit: "count"}, {Type: "odd type", Unit: "widgets"},
}
var randLabelKeys = []string{"span", "endpoint", "goroutine", "k", "", "trace id"}
var randLabelValues = []string{"a", "b", "/api/v1/users", "", "ü", "v;1", "123"}
var randNumKeys = []string{"bytes", "request_size", "n", "depth"}
var randUnits = []string{"", "bytes", "count", "seconds", "kilobytes"}

func pick(r *rand.Rand, s []string) string { return s[r.Intn(len(s))] }

// ids gives n ids: 1..n in order, or shuffled, or sparse and large.
func ids(r *rand.Rand, n int) []uint64 {
	out := make([]uint64, n)
	mode := r.Intn(3)
	used := map[uint64]bool{}
	for i := range out {
		if mode < 2 {
			out[i] = uint64(i + 1)
			continue
		}
		for {
			v := uint64(1 + r.Int63n(1<<40))
			if r.Intn(4) == 0 {
				v = uint64(1 + r.Intn(10*n+10))
			}
			if !used[v] {
				used[v] = true
				out[i] = v
				break
			}
		}
	}
	if mode == 1 {
		r.Shuffle(n, func(i, j int) { out[i], out[j] = out[j], out[i] })
	}
	return out
}

type rmap struct {
	size, offset uint64
	file, build  string
	fl           [4]bool
	start        uint64
	aslr         bool
}

type rloc struct {
	mapping int    // -1: none
	off     uint64 // address = start + off; with mapping -1, the address itself
	lines   []profile.Line
	folded  bool
}

func randomSet(seed int64, n int, dir string) error {
	r := rand.New(rand.NewSource(seed))
	// the header family
	nst := 1 + r.Intn(4)
	perm := r.Perm(len(randValueTypes))
	var st []*profile.ValueType
	for i := 0; i < nst; i++ {
		st = append(st, randValueTypes[perm[i]])
	}
	var pt *profile.ValueType
	if r.Intn(5) != 0 {
		pt = randValueTypes[r.Intn(len(randValueTypes))]
	}
	dflt := ""
	if r.Intn(3) == 0 {
		dflt = st[r.Intn(nst)].Type
	}
	// the universe
	var maps []rmap
	next := uint64(0x400000)
	for i, nm := 0, r.Intn(5); i < nm; i++ {
		m := rmap{size: uint64(0x1000 * (1 + r.Intn(64))), start: next}
		if r.Intn(4) == 0 {
			m.size -= uint64(r.Intn(0x800)) // not page-rounded
		}
		if r.Intn(3) == 0 {
			m.offset = uint64(0x1000 * r.Intn(16))
		}
		switch r.Intn(4) {
		case 0: // fake: neither file nor build id
		case 1:
			m.file = fmt.Sprintf("/usr/lib/lib%d.so", i)
		case 2:
			m.build = fmt.Sprintf("%040x", r.Uint64())
		default:
			m.file = fmt.Sprintf("/bin/app%d", i)
			m.build = fmt.Sprintf("b%d", r.Intn(3))
		}
		for j := range m.fl {
			m.fl[j] = r.Intn(2) == 0
		}
		m.aslr = r.Intn(3) == 0
		next += m.size + uint64(0x1000*(1+r.Intn(4)))
		maps = append(maps, m)
	}
	var fns []*profile.Function
	for i, nf := 0, 1+r.Intn(40); i < nf; i++ {
		f := &profile.Function{Name: pick(r, randNames), Filename: pick(r, randFiles)}
		f.SystemName = f.Name
		if r.Intn(5) == 0 {
			f.SystemName = pick(r, randNames)
		}
		if r.Intn(3) == 0 {
			f.StartLine = int64(r.Intn(500))
		}
		fns = append(fns, f)
	}
	var locs []rloc
	for i, nl := 0, 1+r.Intn(120); i < nl; i++ {
		l := rloc{mapping: -1}
		if len(maps) > 0 && r.Intn(6) != 0 {
			l.mapping = r.Intn(len(maps))
			l.off = uint64(r.Int63n(int64(maps[l.mapping].size)))
		} else if r.Intn(2) == 0 {
			l.off = uint64(r.Int63n(1 << 48))
		}
		for j, k := 0, r.Intn(5); j < k; j++ {
			l.lines = append(l.lines, profile.Line{Function: fns[r.Intn(len(fns))], Line: int64(r.Intn(3000)) - 5})
		}
		l.folded = r.Intn(20) == 0
		locs = append(locs, l)
	}
	var comments []string
	for i, k := 0, r.Intn(3); i < k; i++ {
		comments = append(comments, pick(r, []string{"built by ci", "", "comment ü", "x"}))
	}
	// one unit per numeric label key over the set (samples may leave it
	// out): which of two units pprof shows for a key depends on the order
	// of the samples, which a merge need not keep
	keyUnit := map[string]string{}
	for _, k := range randNumKeys {
		keyUnit[k] = pick(r, randUnits)
	}
	drop, keep := "", ""
	if r.Intn(6) == 0 {
		drop = pick(r, []string{"runtime\\..*", "main.work", "^x$"})
	}
	if r.Intn(8) == 0 {
		keep = pick(r, []string{"runtime\\.mallocgc", "main.*"})
	}

	for k := 0; k < n; k++ {
		p := &profile.Profile{
			SampleType:        st,
			PeriodType:        pt,
			DefaultSampleType: dflt,
			DropFrames:        drop,
			KeepFrames:        keep,
			TimeNanos:         1600000000000000000 + r.Int63n(1e15),
			DurationNanos:     r.Int63n(1e11),
			Comments:          comments,
		}
		if r.Intn(4) != 0 {
			p.Period = r.Int63n(1e7)
		}
		if r.Intn(4) == 0 {
			p.Comments = append(append([]string{}, comments...), fmt.Sprintf("profile %d", k))
		}
		// this profile's mappings: all of them or a subset, the first kept first
		// in most profiles (the main binary), some moved by ASLR
		var pm []*profile.Mapping
		mid := ids(r, len(maps))
		idx := map[int]*profile.Mapping{}
		order := r.Perm(len(maps))
		if r.Intn(3) != 0 && len(maps) > 0 {
			for i, o := range order {
				if o == 0 {
					order[0], order[i] = order[i], order[0]
				}
			}
		}
		for i, o := range order {
			m := maps[o]
			if i > 0 && r.Intn(6) == 0 {
				continue
			}
			start := m.start
			if m.aslr {
				start += uint64(0x10000000 * (1 + r.Intn(8)))
			}
			pmap := &profile.Mapping{ID: mid[i], Start: start, Limit: start + m.size, Offset: m.offset,
				File: m.file, BuildID: m.build, HasFunctions: m.fl[0], HasFilenames: m.fl[1],
				HasLineNumbers: m.fl[2], HasInlineFrames: m.fl[3]}
			pm = append(pm, pmap)
			idx[o] = pmap
		}
		p.Mapping = pm
		// this profile's functions: copies (the profile owns them), some twice
		var pf []*profile.Function
		fcopy := map[*profile.Function][]*profile.Function{}
		for _, f := range fns {
			for c, nc := 0, 1+boolInt(r.Intn(10) == 0); c < nc; c++ {
				g := *f
				pf = append(pf, &g)
				fcopy[f] = append(fcopy[f], &g)
			}
		}
		r.Shuffle(len(pf), func(i, j int) { pf[i], pf[j] = pf[j], pf[i] })
		for i, id := range ids(r, len(pf)) {
			pf[i].ID = id
		}
		// locations: those of the universe this profile has the mapping of, some twice
		var pl []*profile.Location
		lcopy := make([][]*profile.Location, len(locs))
		for i, l := range locs {
			var m *profile.Mapping
			addr := l.off
			if l.mapping >= 0 {
				if m = idx[l.mapping]; m == nil {
					continue
				}
				addr = m.Start + l.off
			}
			for c, nc := 0, 1+boolInt(r.Intn(12) == 0); c < nc; c++ {
				pl2 := &profile.Location{Mapping: m, Address: addr, IsFolded: l.folded}
				for _, ln := range l.lines {
					cs := fcopy[ln.Function]
					pl2.Line = append(pl2.Line, profile.Line{Function: cs[r.Intn(len(cs))], Line: ln.Line})
				}
				pl = append(pl, pl2)
				lcopy[i] = append(lcopy[i], pl2)
			}
		}
		r.Shuffle(len(pl), func(i, j int) { pl[i], pl[j] = pl[j], pl[i] })
		for i, id := range ids(r, len(pl)) {
			pl[i].ID = id
		}
		p.Function, p.Location = pf, pl
		// samples
		for s, ns := 0, r.Intn(150); s < ns; s++ {
			smp := &profile.Sample{Value: make([]int64, nst)}
			for j := range smp.Value {
				switch r.Intn(10) {
				case 0:
				case 1:
					smp.Value[j] = -r.Int63n(1000)
				case 2:
					smp.Value[j] = r.Int63n(1 << 50)
				default:
					smp.Value[j] = 1 + r.Int63n(1000)
				}
			}
			if len(pl) > 0 && r.Intn(15) != 0 {
				for d, nd := 0, 1+r.Intn(20); d < nd; d++ {
					li := r.Intn(len(locs))
					if len(lcopy[li]) == 0 {
						continue
					}
					smp.Location = append(smp.Location, lcopy[li][r.Intn(len(lcopy[li]))])
				}
			}
			if r.Intn(3) == 0 {
				smp.Label = map[string][]string{}
				for j, nk := 0, 1+r.Intn(3); j < nk; j++ {
					key := pick(r, randLabelKeys)
					smp.Label[key] = append(smp.Label[key], pick(r, randLabelValues))
				}
			}
			if r.Intn(5) == 0 {
				smp.NumLabel = map[string][]int64{}
				withUnits := r.Intn(2) == 0
				if withUnits {
					smp.NumUnit = map[string][]string{}
				}
				for j, nk := 0, 1+r.Intn(2); j < nk; j++ {
					key := pick(r, randNumKeys)
					smp.NumLabel[key] = append(smp.NumLabel[key], r.Int63n(1<<20)-100)
					if withUnits {
						smp.NumUnit[key] = append(smp.NumUnit[key], keyUnit[key])
					}
				}
			}
			p.Sample = append(p.Sample, smp)
		}
		if err := p.CheckValid(); err != nil {
			return fmt.Errorf("profile %d: %v", k, err)
		}
		f, err := os.Create(filepath.Join(dir, "r"+strconv.Itoa(k)+".pb.gz"))
		if err != nil {
			return err
		}
		if err := p.Write(f); err != nil {
			return err
		}
		if err := f.Close(); err != nil {
			return err
		}
	}
	return nil
}

func boolInt(b bool) int {
	if b {
		return 1
	}
	return 0
}

func dump(path string) {
	p := parse(path)
	fmt.Print(p.String())
	fmt.Printf("DefaultSampleType: %q\nDropFrames: %q\nKeepFrames: %q\nFunctions\n", p.DefaultSampleType, p.DropFrames, p.KeepFrames)
	for _, f := range p.Function {
		fmt.Printf("%6d: %q %q %q s=%d\n", f.ID, f.Name, f.SystemName, f.Filename, f.StartLine)
	}
}
