module profd.bench/loadgen

go 1.19
