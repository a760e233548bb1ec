module profd.bench/gen

go 1.19

require github.com/google/pprof v0.0.0-20211008130755-947d60d73cc0

// Offline build: use Debian's golang-github-google-pprof-dev sources.
replace github.com/google/pprof => /usr/share/gocode/src/github.com/google/pprof
