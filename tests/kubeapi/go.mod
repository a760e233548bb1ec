module profd.tests/kubeapi

go 1.19
