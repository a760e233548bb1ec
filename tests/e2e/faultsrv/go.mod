module profd.test/faultsrv

go 1.19
