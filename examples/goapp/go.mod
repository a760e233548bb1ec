module profd.example/goapp

go 1.19
